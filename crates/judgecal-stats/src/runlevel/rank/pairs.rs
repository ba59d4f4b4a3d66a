//! A ranking's answers: each labelled run's plain and labelled answers combined, every pair's
//! difference (the best of its plain difference, its runs' answers' and, on a chain, its own
//! on the items both labelled), the pairs' simultaneous intervals (max-t) and the runs' rank
//! intervals.

use super::super::{AnswerPath, RunEstimate, chain, inference};
use super::{ErrorRate, PRIOR_ITEMS, RankedPair, RankedRun};
use crate::rng::Rng;
use crate::stats::quantile_sorted;

/// Each labelled run's answer combined with its plain one, weighted by the inverse of their
/// variances (see [`plain_weight`]); returns every run's error (draw × run) in its combined
/// answer.
pub(super) fn combine_runs(
    estimates: &mut [RunEstimate],
    plains: &[RunEstimate],
    plain_errors: &[f64],
    labelled: &[f64],
    level: f64,
) -> Vec<f64> {
    let k = estimates.len();
    let draws = plain_errors.len() / k;
    // Each run's weight on its plain answer: 1 for a plain run; for a labelled one, the
    // labelled answer's variance (its t quantile's excess over the normal folded in) over the
    // two's sum.
    let weights: Vec<f64> = estimates
        .iter()
        .zip(plains)
        .map(|(e, p)| plain_weight(e, p, level))
        .collect();
    // A run on its labels alone (weight 0) holds its interval at no less than the anchors'
    // noise on a normal quantile: its half-width is the larger of its own t interval's and
    // z·√(anchors' noise). On 3–5 labels the labels' own spread is often low exactly when
    // their mean is off (90.1% coverage at 5 labels on a weak judge on the t alone).
    let scales: Vec<f64> = estimates
        .iter()
        .zip(plains)
        .map(|(e, p)| {
            let own = e.mean.variance.total() * t_excess(e.mean.df, level);
            if plain_trusted(e, p) || own <= 0.0 {
                1.0
            } else {
                (anchors_noise(e, p) / own).max(1.0).sqrt()
            }
        })
        .collect();
    let errors: Vec<f64> = (0..draws * k)
        .map(|x| {
            let w = weights[x % k];
            w * plain_errors[x] + (1.0 - w) * scales[x % k] * labelled[x]
        })
        .collect();
    for i in 0..k {
        if estimates[i].path != AnswerPath::Plain {
            let column: Vec<f64> = (0..draws).map(|d| errors[d * k + i]).collect();
            let mut labelled = estimates[i].clone();
            labelled.mean.variance.sampling *= scales[i].powi(2);
            labelled.mean.variance.corrector *= scales[i].powi(2);
            labelled.mean.variance.group *= scales[i].powi(2);
            estimates[i] = combined(&labelled, &plains[i], weights[i], &column, level);
        }
    }
    errors
}

/// The variance of labelled run `e`'s answer at the anchors' noise within one system: its
/// plain answer `p`'s per-item sampling variance, less the between-system part τ̂²/N where the
/// anchors measured groups (a run is one system's), scaled to n of N items labelled,
/// (N/n − 1)·V.
fn anchors_noise(e: &RunEstimate, p: &RunEstimate) -> f64 {
    let (n, labelled) = (e.mean.n as f64, e.mean.labelled as f64);
    if labelled <= 0.0 || n <= labelled {
        return 0.0;
    }
    let between = p.group.tau.map_or(0.0, |t| t * t / n);
    (p.mean.variance.sampling - between).max(0.0) * (n / labelled - 1.0)
}

/// The weight of run's plain answer `p` in its combined one, beside its own answer `e`: 1
/// where `e` is plain; otherwise the labelled answer's variance over the two's sum.
///
/// The labelled answer's variance is taken at the anchors' noise, not the labels' own
/// ([`anchors_noise`]), with the labelled t quantile's excess over the normal folded in. Weighed by its own S², a
/// labelled answer gets most weight exactly where S² came out low (91.8% coverage at 3
/// labels); the interval still comes from the labelled answer's own draws.
///
/// 0 where the plain answer rests on what the labels are there to test: a run of a group the
/// anchors do not hold (a new system), whose plain answer takes its bias as a normal draw
/// between the anchors' systems. A system far from them (HANNA's HINT lies 2.7 τ out) would
/// bring that back into the combined answer (64–77% coverage at 3–20 labels); on its labels
/// alone it covers as the labelled answer does.
pub(super) fn plain_weight(e: &RunEstimate, p: &RunEstimate, level: f64) -> f64 {
    if e.path == AnswerPath::Plain {
        return 1.0;
    }
    if !plain_trusted(e, p) {
        return 0.0;
    }
    let vl = anchors_noise(e, p) * t_excess(e.mean.df, level);
    let vp = p.mean.variance.total();
    if vl + vp > 0.0 { vl / (vl + vp) } else { 0.5 }
}

/// Whether a labelled run's answer `e` may lean on its plain answer `p`: not where the plain
/// answer's group term is a new system's (see [`plain_weight`]).
pub(super) fn plain_trusted(e: &RunEstimate, p: &RunEstimate) -> bool {
    e.path == AnswerPath::Plain || p.group.term != super::super::groups::GroupTerm::New
}

/// (t quantile / normal quantile)² at `level` on `df` degrees of freedom: how much wider a t
/// interval is, as a variance.
pub(super) fn t_excess(df: Option<f64>, level: f64) -> f64 {
    (inference::quantile(level, df) / inference::quantile(level, None)).powi(2)
}

/// The combined answer of a labelled run: `weight` on its plain answer `p`, the rest on its
/// labelled one `l`; its interval from its error draws `column` (symmetric, at `level`).
pub(super) fn combined(
    l: &RunEstimate,
    p: &RunEstimate,
    weight: f64,
    column: &[f64],
    level: f64,
) -> RunEstimate {
    let (w, u) = (weight, 1.0 - weight);
    let estimate = w * p.mean.estimate + u * l.mean.estimate;
    let mut spread: Vec<f64> = column.iter().map(|e| e.abs()).collect();
    spread.sort_by(f64::total_cmp);
    let half = quantile_sorted(&spread, level);
    let (vp, vl) = (p.mean.variance, l.mean.variance);
    RunEstimate {
        path: AnswerPath::Combined,
        mean: inference::MeanEstimate {
            estimate,
            interval: (estimate - half, estimate + half),
            variance: inference::Variance {
                sampling: w * w * vp.sampling + u * u * vl.total(),
                corrector: w * w * vp.corrector,
                group: w * w * vp.group,
            },
            df: None,
            lambda: l.mean.lambda,
            n: l.mean.n,
            labelled: l.mean.labelled,
        },
        term: p.term,
        support: l.support,
        transport: l.transport,
        advice: None,
        group: p.group.clone(),
    }
}

/// A pair before its interval: its difference, and where its errors come from.
pub(super) struct Draft {
    pub(super) a: usize,
    pub(super) b: usize,
    pub(super) difference: f64,
    /// Items both runs labelled behind the pair's own answer (0: the runs' answers').
    pub(super) labelled: usize,
    /// The pair's own errors, draw by draw; `None`: the runs' errors' difference.
    pub(super) own: Option<Vec<f32>>,
}

/// A pair's answer from two of its estimates.
pub(super) struct Blend {
    pub(super) estimate: f64,
    /// Its error, draw by draw.
    pub(super) column: Vec<f32>,
    /// Its mean square over the draws.
    pub(super) square: f64,
    /// Items both runs labelled behind it (0: none of the pair's own).
    pub(super) shared: usize,
}

impl Blend {
    /// One answer on its own: `estimate`, its error in draw x `error`.
    fn alone(estimate: f64, error: &dyn Fn(usize) -> f64, draws: usize) -> Blend {
        let column: Vec<f32> = (0..draws).map(|x| error(x) as f32).collect();
        let square = column.iter().map(|&e| (e as f64).powi(2)).sum::<f64>() / draws.max(1) as f64;
        Blend {
            estimate,
            column,
            square,
            shared: 0,
        }
    }
}

/// The least-variance weighting w·X₁ + (1 − w)·X₂ of two estimates of one difference, each
/// given as (estimate, its error in draw x), w from their errors' joint draws.
pub(super) fn blend(
    first: (f64, &dyn Fn(usize) -> f64),
    second: (f64, &dyn Fn(usize) -> f64),
    draws: usize,
) -> Blend {
    let (mut v1, mut v2, mut c) = (0.0, 0.0, 0.0);
    for x in 0..draws {
        let (e1, e2) = (first.1(x), second.1(x));
        v1 += e1 * e1;
        v2 += e2 * e2;
        c += e1 * e2;
    }
    let spread = v1 + v2 - 2.0 * c;
    let w = if spread > 0.0 {
        ((v2 - c) / spread).clamp(0.0, 1.0)
    } else {
        0.0
    };
    Blend::alone(
        w * first.0 + (1.0 - w) * second.0,
        &|x| w * first.1(x) + (1.0 - w) * second.1(x),
        draws,
    )
}

/// Every pair, (0, 1), (0, 2), …, as the difference of its runs' answers.
pub(super) fn drafts(estimates: &[RunEstimate]) -> Vec<Draft> {
    let k = estimates.len();
    (0..k)
        .flat_map(|a| (a + 1..k).map(move |b| (a, b)))
        .map(|(a, b)| Draft {
            a,
            b,
            difference: estimates[a].mean.estimate - estimates[b].mean.estimate,
            labelled: 0,
            own: None,
        })
        .collect()
}

/// Every pair's interval and the critical value, from the joint draws: `errors` the runs'
/// (draw × run, `k` runs), or a pair's own.
pub(super) fn pair_intervals(
    drafts: &[Draft],
    errors: &[f64],
    k: usize,
    error: ErrorRate,
    level: f64,
) -> (Vec<RankedPair>, f64) {
    let draws = errors.len() / k;
    let at = |d: usize, p: usize| {
        let x = &drafts[p];
        match &x.own {
            Some(own) => own[d] as f64,
            None => errors[d * k + x.a] - errors[d * k + x.b],
        }
    };
    let se: Vec<f64> = (0..drafts.len())
        .map(|p| {
            let ss: f64 = (0..draws).map(|d| at(d, p).powi(2)).sum();
            (ss / draws.max(1) as f64).sqrt()
        })
        .collect();
    let standardised = |d: usize, p: usize| {
        if se[p] > 0.0 {
            at(d, p).abs() / se[p]
        } else {
            0.0
        }
    };
    let critical: Vec<f64> = match error {
        ErrorRate::Familywise => {
            let mut largest: Vec<f64> = (0..draws)
                .map(|d| {
                    (0..drafts.len())
                        .map(|p| standardised(d, p))
                        .fold(0.0, f64::max)
                })
                .collect();
            largest.sort_by(f64::total_cmp);
            vec![quantile_sorted(&largest, level); drafts.len()]
        }
        ErrorRate::PerPair => (0..drafts.len())
            .map(|p| {
                let mut own: Vec<f64> = (0..draws).map(|d| standardised(d, p)).collect();
                own.sort_by(f64::total_cmp);
                quantile_sorted(&own, level)
            })
            .collect(),
    };
    let pairs = drafts
        .iter()
        .enumerate()
        .map(|(p, x)| {
            let d = x.difference;
            let half = critical[p] * se[p];
            RankedPair {
                a: x.a,
                b: x.b,
                difference: d,
                interval: (d - half, d + half),
                standard_error: se[p],
                labelled: x.labelled,
            }
        })
        .collect();
    (pairs, critical.iter().cloned().fold(0.0, f64::max))
}

/// What answering the pairs takes: the runs' answers and plain answers, their errors' joint
/// draws (plain, and in the answers as combined), the chain with its draws where the labelled
/// runs lie on one, the level, and the judge scores' spacing.
pub(super) struct PairInputs<'a> {
    pub estimates: &'a [RunEstimate],
    pub plains: &'a [RunEstimate],
    pub plain_errors: &'a [f64],
    pub errors: &'a [f64],
    pub chain: Option<(&'a chain::Chain, &'a chain::Draws)>,
    pub level: f64,
    pub spacing: f64,
}

impl PairInputs<'_> {
    /// Whether run `k`'s plain answer may enter its pairs' answers ([`plain_trusted`]).
    fn trusted(&self, k: usize) -> bool {
        plain_trusted(&self.estimates[k], &self.plains[k])
    }
}

/// Answers every pair with a labelled run: the runs' answers' difference, blended with the
/// pair's plain difference (whose shared corrector and group errors cancel) as their joint
/// draws say is best; and where both runs are on the chain, the pair's own answer on the
/// items both labelled, if its variance is smaller still.
pub(super) fn answer_pairs(drafts: &mut [Draft], input: &PairInputs, rng: &mut Rng) {
    let k = input.estimates.len();
    let draws = input.errors.len() / k;
    let noise = shrunk_noise(input.chain.map(|c| c.0), k);
    let (plain_errors, errors) = (input.plain_errors, input.errors);
    for draft in drafts.iter_mut() {
        let (a, b) = (draft.a, draft.b);
        if input.estimates[a].path == AnswerPath::Plain
            && input.estimates[b].path == AnswerPath::Plain
        {
            continue;
        }
        // A labelled run of a new system is answered on its labels alone: so are its pairs.
        let trusted = input.trusted(a) && input.trusted(b);
        let plain = |x: usize| {
            if trusted {
                plain_errors[x * k + a] - plain_errors[x * k + b]
            } else {
                0.0
            }
        };
        let plain_estimate = input.plains[a].mean.estimate - input.plains[b].mean.estimate;
        let answers = |x: usize| errors[x * k + a] - errors[x * k + b];
        let mut best = if trusted {
            blend(
                (plain_estimate, &plain),
                (draft.difference, &answers),
                draws,
            )
        } else {
            Blend::alone(draft.difference, &answers, draws)
        };
        let own = match input.chain {
            Some((c, d)) if c.holds(a) && c.holds(b) => c
                .pair(a, b, input.level, input.spacing)
                .and_then(|answer| Some((c.pair_errors(a, b, &answer, d, rng)?, answer))),
            _ => None,
        };
        if let Some((own, answer)) = own {
            let ratio = noise[a * k + b].map_or(1.0, |n| n.ratio());
            let (judged, blended) = own_answer(
                (trusted, &plain, plain_estimate),
                &own,
                &answer,
                ratio,
                input.level,
                draws,
            );
            if judged < best.square {
                best = blended;
            }
        }
        draft.difference = best.estimate;
        draft.labelled = best.shared;
        draft.own = Some(best.column);
    }
}

/// The pair's plain difference and its own labelled one (uncorrelated: the labels are a
/// random sample), weighed as a run's are, but by the own answer's variance at its pair's
/// shrunk noise (`ratio` of the measured): on ten shared items its own measure is off by half
/// and more, and weighing or choosing by it favours the pairs whose noise it underestimates
/// (HANNA: one pair of equal systems resolved on ten labels). The interval then holds at the
/// own answer's variance as measured, t-widened; the own answer alone where the plain
/// difference is not `trusted` ([`plain_trusted`]). Returns the blend's mean square at the
/// shrunk noise, by which it is chosen, and the blend.
fn own_answer(
    (trusted, plain, plain_estimate): (bool, &dyn Fn(usize) -> f64, f64),
    own: &[f64],
    answer: &chain::PairAnswer,
    ratio: f64,
    level: f64,
    draws: usize,
) -> (f64, Blend) {
    let vp = (0..draws).map(|x| plain(x).powi(2)).sum::<f64>() / draws as f64;
    let e = &answer.estimate;
    let vl = e.variance.total() * t_excess(e.df, level) * ratio;
    let w = if !trusted {
        0.0
    } else if vl + vp > 0.0 {
        vl / (vl + vp)
    } else {
        0.5
    };
    let column: Vec<f32> = (0..draws)
        .map(|x| (w * plain(x) + (1.0 - w) * own[x]) as f32)
        .collect();
    let square = column.iter().map(|&e| (e as f64).powi(2)).sum::<f64>() / draws as f64;
    let scale = ratio.sqrt();
    let judged = (0..draws)
        .map(|x| (w * plain(x) + (1.0 - w) * scale * own[x]).powi(2))
        .sum::<f64>()
        / draws as f64;
    let blended = Blend {
        estimate: w * plain_estimate + (1.0 - w) * e.estimate,
        column,
        square,
        shared: answer.shared,
    };
    (judged, blended)
}

/// Each run's rank interval: [1 + the runs surely above it, K − the runs surely below it].
pub(super) fn rank_intervals(estimates: Vec<RunEstimate>, pairs: &[RankedPair]) -> Vec<RankedRun> {
    let k = estimates.len();
    estimates
        .into_iter()
        .enumerate()
        .map(|(i, estimate)| {
            let (above, below) = pairs.iter().fold((0, 0), |(above, below), p| {
                let h = p.higher();
                match (p.a == i || p.b == i, h) {
                    (true, Some(h)) if h == i => (above, below + 1),
                    (true, Some(_)) => (above + 1, below),
                    _ => (above, below),
                }
            });
            RankedRun {
                estimate,
                rank: (1 + above, k - below),
            }
        })
        .collect()
}

/// A pair's residual-difference noise per item, measured on the items both runs labelled.
#[derive(Clone, Copy)]
pub(super) struct PairNoise {
    pub(super) measured: f64,
    /// Shrunk toward the pairs' pooled value, which counts as [`PRIOR_ITEMS`] items of its
    /// own.
    pub(super) shrunk: f64,
}

impl PairNoise {
    /// What the shrunk noise is of the measured (1 where nothing was measured).
    pub(super) fn ratio(&self) -> f64 {
        if self.measured > 1e-12 {
            self.shrunk / self.measured
        } else {
            1.0
        }
    }
}

/// Every pair's noise (k × k, row-major) where both runs are on `chain`: on a first sample's
/// 20 shared items a pair's own measure has 19 degrees of freedom (±32%), on ten 9 (±47%).
pub(super) fn shrunk_noise(chain: Option<&chain::Chain>, k: usize) -> Vec<Option<PairNoise>> {
    let measured: Vec<Option<(f64, usize)>> = (0..k * k)
        .map(|x| chain.and_then(|c| c.difference_noise(x / k, x % k)))
        .collect();
    let (sum, df) = measured
        .iter()
        .enumerate()
        .filter(|(x, _)| x / k < x % k)
        .filter_map(|(_, m)| *m)
        .fold((0.0, 0.0), |(s, d), (v, m)| {
            let f = m.saturating_sub(1) as f64;
            (s + f * v, d + f)
        });
    let pooled = (df > 0.0).then(|| sum / df);
    measured
        .into_iter()
        .map(|m| {
            let (v, m) = m?;
            let f = m.saturating_sub(1) as f64;
            let shrunk = pooled.map_or(v, |p| (f * v + PRIOR_ITEMS * p) / (f + PRIOR_ITEMS));
            Some(PairNoise {
                measured: v,
                shrunk,
            })
        })
        .collect()
}
