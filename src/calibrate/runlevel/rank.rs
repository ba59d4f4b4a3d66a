//! Ranking K runs of one cell (`/v1/rank`): each run's de-biased mean as `/v1/estimate` gives
//! it, every pair's difference with intervals that hold for all pairs at once, each run's rank
//! interval, and where labels would settle what is left.
//!
//! **Simultaneous intervals (max-t).** The runs' errors are drawn jointly from the model the
//! single-run answers rest on: each plain run's own noise (independent between runs), the
//! corrector's error (one draw of (α, β) from their posterior, or one refit of the resampled
//! corrector, or one anchor offset, shared by every plain run), the groups' bias (one τ and one
//! μ per draw, shared, and each group's deviation; runs of one group share it), and each
//! labelled run's error (t on its degrees of freedom, correlated with another labelled run's
//! through the items both labelled, by the covariance of their PPI residuals there). Each pair's
//! standard error is its errors' root mean square over the draws; the critical value is the
//! level's quantile of the largest standardised pair error over the draws, so that every pair's
//! interval d̂ ± c·se covers at once with the level's probability (Hothorn, Bretz and Westfall's
//! single-step max-t; [`DRAWS`] draws put its Monte Carlo error near 0.2 points of coverage).
//! `per_pair` instead takes each pair's own quantile: no family-wise control.
//!
//! **Rank intervals.** Run k's rank (1 = highest mean) lies in [1 + #runs surely above it,
//! K − #runs surely below it], where "surely" is a simultaneous interval that excludes 0: when
//! every pair's interval covers, every run's rank interval covers its true rank, so they cover
//! jointly at the level (Mogstad, Romano, Shaikh and Wilhelm's rank confidence sets). The runs
//! tied with the top are those whose rank interval reaches 1.
//!
//! **Rounds.** A user who labels and asks again looks at the data more than once. Each look
//! (`round` r of `rounds` R, fixed before the first) is made at the family-wise level
//! 1 − α/R, so that across all R looks the chance of any wrong claim is at most α (Bonferroni
//! over looks). Labels are drawn as a uniform random sample of each run's unlabelled items
//! (seeded; where every run has the same ids, one permutation of the ids for all, so that the
//! runs' labels fall on the same prompts and what the prompts share cancels in differences),
//! so the labelled path's assumption holds at every look. `judgecal rank` measures it.
//!
//! **Pairs.** A pair with a labelled run is answered by the least-variance blend of its plain
//! difference (whose shared corrector and group errors cancel) and the difference of the two
//! runs' answers, weighted by their joint draws; where both runs' labels lie on one chain of
//! nested item sets, by the pair's own answer on the items both labelled, if that is better
//! still ([`super::paired`]): weighed and chosen by its variance at the pair's noise shrunk
//! toward the pairs' pooled value ([`PRIOR_ITEMS`]), since a choice by a variance measured
//! on a few items favours the pairs it underestimates; its interval is then at the variance
//! it measured. A pair's difference is not always the difference of its runs' estimates; its
//! interval is the one that holds.
//!
//! **Labels (`Allocation`).** A pair is *open* when its interval excludes neither 0 nor a gap
//! of `min_gap`. To settle an open pair with a true gap g at power 1 − β its standard error
//! must fall to g/(c + z_{1−β}), with g = max(|d̂| − se, min_gap). The plan models each run's
//! combined answer with m labels, and each pair's answer as the better of the difference of
//! its runs' answers and, where the runs pair by id, its own on the items both labelled
//! (the residual difference's noise per item, measured on the chain or from the runs' noise
//! and their pooled correlation, over min(m_a, m_b) items, weighed with the plain
//! difference). Counts rise one run at a time or both runs of an open pair together, where
//! they remove the most excess variance per label, within the budget; where pairs have their
//! own answers, each open pair at the fewest shared labels that settle it (each run at the
//! most its pairs ask) is taken instead where it costs less; then counts are trimmed back
//! while every target still holds. Before any labels, with two looks to spare and runs that
//! pair by id, the plan is a first sample (`pilot`, [`PILOT_LABELS`] per run in an open
//! pair): a plan from the plain answers alone cannot see what the runs' residuals share item
//! by item, and asks for many times the labels needed. With labels on the same items and two
//! looks to spare, it is a step ([`STEP_SHARE`] of the whole plan): a plan made on a few
//! labels sizes pairs for gaps measured loosely, and the next look measures them better. A
//! pair's residual-difference noise, measured on the items both runs labelled, is shrunk
//! toward the pairs' pooled value ([`PRIOR_ITEMS`]).

use crate::calibrate::rng::{Rng, RngExt, SeedableRng, SliceRandom};
use rand_distr::{ChiSquared, Distribution};

use super::inference::{self, Estimand, mean_share};
use super::paired;
use super::{Anchored, Basis, MIN_LABELLED, Path, RunEstimate, RunItems, Settings};
use crate::calibrate::MeanUncertainty;
use crate::calibrate::error::{CalibrateError, Result};
use crate::calibrate::stats::{
    cholesky, covariance, fpc, mean, normal_quantile, quantile_sorted, sample_variance,
    standard_normal,
};

/// The most runs one ranking takes.
pub const MAX_RUNS: usize = 50;

/// Joint draws of the runs' errors behind the critical value.
pub const DRAWS: usize = 20_000;

/// A run is first labelled with at least this many items: fewer leave the labelled path's t
/// quantile too wide to help.
pub const FIRST_LABELS: usize = 10;

/// Labels per run of a first sample (`Allocation::pilot`): what the items share between runs,
/// the residuals' spread and the pairs' gaps are measured on them before the rest is planned.
/// With a weak judge 10 put a pair's gap at ±0.13, and the plans after them needed 14% more
/// labels at K = 12 than after 20 (`judgecal rank`: 5, 10, 15 and 20 tried).
pub const PILOT_LABELS: usize = 20;

/// The share of the plan a step asks for ([`Allocation::step`]). A plan made on a first
/// sample sizes each pair for the lower end of its gap (|d̂| − se, se from a few labels) and
/// asks 3–5 times the labels that settle; a tenth of it, looked at, sharpens the gaps and the
/// spreads the next plan rests on (`judgecal rank`: 0.05 to 0.15 alike, a quarter worse,
/// half far worse).
pub const STEP_SHARE: f64 = 0.1;

/// What the pairs' pooled residual-difference noise counts for, in items, beside a pair's own
/// measure when the plan shrinks one toward the other.
const PRIOR_ITEMS: f64 = 30.0;

/// Which error the pairs' intervals control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorRate {
    /// Every pair's interval covers at once with the level's probability.
    #[default]
    Familywise,
    /// Each pair's interval covers on its own: no control over the pairs together.
    PerPair,
}

impl ErrorRate {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorRate::Familywise => "familywise",
            ErrorRate::PerPair => "per_pair",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "familywise" => Some(ErrorRate::Familywise),
            "per_pair" => Some(ErrorRate::PerPair),
            _ => None,
        }
    }
}

/// What labels to plan for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelGoal {
    /// The most labels in all; `None`: as many as settling every open pair takes.
    pub budget: Option<usize>,
    /// Gaps smaller than this (reference units) need not be resolved.
    pub min_gap: f64,
    /// The chance of resolving a pair whose true gap is the one planned for.
    pub power: f64,
    pub seed: u64,
}

impl Default for LabelGoal {
    fn default() -> Self {
        Self {
            budget: None,
            min_gap: 0.1,
            power: 0.8,
            seed: 0,
        }
    }
}

/// How a ranking is worked out, beyond the runs' own [`Settings`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankSettings {
    pub error: ErrorRate,
    /// This look, from 1.
    pub round: usize,
    /// The looks planned in all, fixed before the first.
    pub rounds: usize,
    pub draws: usize,
    pub labels: Option<LabelGoal>,
}

impl Default for RankSettings {
    fn default() -> Self {
        Self {
            error: ErrorRate::Familywise,
            round: 1,
            rounds: 1,
            draws: DRAWS,
            labels: None,
        }
    }
}

impl RankSettings {
    /// The level each look's intervals hold at together: 1 − α/rounds.
    pub fn family_level(&self, level: f64) -> f64 {
        1.0 - (1.0 - level) / self.rounds.max(1) as f64
    }
}

/// One run in a ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedRun {
    pub estimate: RunEstimate,
    /// The ranks compatible with the pairs' intervals (1 = highest mean).
    pub rank: (usize, usize),
}

/// A pair of runs, A − B (indices into the runs, A before B).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedPair {
    pub a: usize,
    pub b: usize,
    pub difference: f64,
    pub interval: (f64, f64),
    pub standard_error: f64,
    /// Items both runs labelled behind the pair's own answer (the labelled path on the
    /// per-item differences, weighed with the plain difference); 0 where the pair is the
    /// difference of the two runs' answers.
    pub labelled: usize,
}

impl RankedPair {
    /// Which run is surely higher, where the interval excludes 0.
    pub fn higher(&self) -> Option<usize> {
        if self.interval.0 > 0.0 {
            Some(self.a)
        } else if self.interval.1 < 0.0 {
            Some(self.b)
        } else {
            None
        }
    }

    /// Whether the interval lies within ±`gap`: the pair is settled as close.
    pub fn within(&self, gap: f64) -> bool {
        self.interval.0 > -gap && self.interval.1 < gap
    }
}

/// Where labels would settle the ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub goal: LabelGoal,
    /// Labels to add, per run.
    pub add: Vec<usize>,
    /// Which items of each run to label (indices into the run, in the order to label them).
    pub items: Vec<Vec<usize>>,
    /// Open pairs the plan targets.
    pub open: usize,
    /// Open pairs whose target the plan reaches.
    pub reached: usize,
    /// The same targets reached with one count for every run: that count times the runs
    /// (`None` where no uniform count reaches them).
    pub uniform: Option<usize>,
    /// Whether every run shares the same ids, so the labels fall on the same items.
    pub paired: bool,
    /// A first sample, [`PILOT_LABELS`] on every run in an open pair, to look at before the
    /// rest is planned: made before any labels, where the runs pair by id and two more looks
    /// remain (this one's labels, and the rest's).
    pub pilot: bool,
    /// A step toward the plan: [`STEP_SHARE`] of each run's labels in the whole plan (at
    /// least [`FIRST_LABELS`] where that share rounds above 0), made where runs that pair by id already
    /// have labels and two more looks remain; `reached` counts the whole plan's targets.
    pub step: bool,
}

impl Allocation {
    pub fn total(&self) -> usize {
        self.add.iter().sum()
    }

    /// The items to label in run `k`, named as the caller knows them: their ids where the run
    /// has ids, else their 1-based positions in the run as sent.
    pub fn item_names(&self, k: usize, ids: Option<&[String]>) -> Vec<String> {
        self.items[k]
            .iter()
            .map(|&i| match ids {
                Some(ids) => ids[i].clone(),
                None => (i + 1).to_string(),
            })
            .collect()
    }

    /// A plan that falls short of some open pairs' targets (the budget or the runs' items
    /// run out). A first sample plans no targets; a step counts the whole plan's.
    pub fn shortfall(&self) -> Option<super::warnings::Warning> {
        (!self.pilot && self.reached < self.open).then_some(super::warnings::Warning::PlanShort {
            reached: self.reached,
            open: self.open,
        })
    }
}

/// A ranking of runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    pub runs: Vec<RankedRun>,
    /// Every pair, (0, 1), (0, 2), … .
    pub pairs: Vec<RankedPair>,
    /// The critical value of the family (max-t), or the largest per-pair one.
    pub critical: f64,
    /// The level the pairs' intervals hold at together this round.
    pub family_level: f64,
    pub allocation: Option<Allocation>,
}

impl Ranking {
    /// Run indices by estimate, highest first.
    pub fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.runs.len()).collect();
        order.sort_by(|&i, &k| {
            self.runs[k]
                .estimate
                .mean
                .estimate
                .total_cmp(&self.runs[i].estimate.mean.estimate)
        });
        order
    }

    /// The runs tied with the top: rank interval reaching 1.
    pub fn top(&self) -> Vec<usize> {
        self.order()
            .into_iter()
            .filter(|&k| self.runs[k].rank.0 == 1)
            .collect()
    }
}

/// Ranks `runs` (at least 2, at most [`MAX_RUNS`]) by their de-biased means.
pub fn rank(
    basis: Basis,
    runs: &[RunItems],
    settings: &Settings,
    how: &RankSettings,
) -> Result<Ranking> {
    if runs.len() < 2 || runs.len() > MAX_RUNS {
        return Err(CalibrateError::TooFew(format!(
            "{} runs; a ranking takes 2 to {MAX_RUNS}",
            runs.len()
        )));
    }
    let settings = Settings {
        estimand: Estimand::Runs,
        ..*settings
    };
    let anchored = Anchored::new(basis)?;
    let k = runs.len();
    let mut estimates: Vec<RunEstimate> = Vec::with_capacity(k);
    let mut plains: Vec<RunEstimate> = Vec::with_capacity(k);
    for (i, r) in runs.iter().enumerate() {
        let name = |e| super::named(&format!("run {}", i + 1), e);
        let e = anchored.estimate(r, &settings).map_err(name)?;
        // A labelled run's plain answer too: the combined answer weighs the two.
        let p = if e.path == Path::Plain {
            e.clone()
        } else {
            let bare = RunItems {
                reference: Vec::new(),
                ..r.clone()
            };
            anchored.estimate(&bare, &settings).map_err(name)?
        };
        estimates.push(e);
        plains.push(p);
    }
    let mut rng = Rng::seed_from_u64(settings.seed ^ 0x7A11);
    let draws = how.draws.max(1);
    let plain_errors = joint_plain_errors(&anchored, runs, &plains, &settings, draws, &mut rng)?;
    // The labelled runs' errors: on one chain of nested label sets, drawn with every pair's
    // own (`paired`); otherwise each run's alone.
    let chain = paired::Chain::new(&anchored, runs, &estimates)?;
    let mut labelled = vec![0.0; draws * k];
    let (rho, chain_draws) = match &chain {
        Some(c) => {
            let d = c.draws(draws, &mut rng);
            for i in 0..k {
                if let Some(column) = c.run_errors(i, &d, &mut rng) {
                    for (x, e) in column.into_iter().enumerate() {
                        labelled[x * k + i] = e;
                    }
                }
            }
            (c.correlation(), Some(d))
        }
        None => (
            labelled_errors(&anchored, runs, &estimates, &mut labelled, k, &mut rng)?,
            None,
        ),
    };
    // Each run's weight on its plain answer: 1 for a plain run; for a labelled one, the
    // labelled answer's variance (its t quantile's excess over the normal folded in) over the
    // two's sum.
    let weights: Vec<f64> = estimates
        .iter()
        .zip(&plains)
        .map(|(e, p)| plain_weight(e, p, settings.level))
        .collect();
    let errors: Vec<f64> = (0..draws * k)
        .map(|x| {
            let w = weights[x % k];
            w * plain_errors[x] + (1.0 - w) * labelled[x]
        })
        .collect();
    for i in 0..k {
        if estimates[i].path != Path::Plain {
            let column: Vec<f64> = (0..draws).map(|d| errors[d * k + i]).collect();
            estimates[i] = combined(
                &estimates[i],
                &plains[i],
                weights[i],
                &column,
                settings.level,
            );
        }
    }
    // A pair with a labelled run: the runs' answers' difference, blended with the pair's
    // plain difference (whose shared corrector and group errors cancel) as their joint draws
    // say is best; and where both runs are on the chain, the pair's own answer on the items
    // both labelled, if its variance is smaller still.
    let mut drafts = drafts(&estimates);
    let noise = shrunk_noise(chain.as_ref(), k);
    for draft in drafts.iter_mut() {
        let (a, b) = (draft.a, draft.b);
        if estimates[a].path == Path::Plain && estimates[b].path == Path::Plain {
            continue;
        }
        let plain = |x: usize| plain_errors[x * k + a] - plain_errors[x * k + b];
        let plain_estimate = plains[a].mean.estimate - plains[b].mean.estimate;
        let mut best = blend(
            (plain_estimate, &plain),
            (draft.difference, &|x| errors[x * k + a] - errors[x * k + b]),
            draws,
        );
        let own = match (&chain, &chain_draws) {
            (Some(c), Some(d)) if c.holds(a) && c.holds(b) => c
                .pair(a, b, settings.level, anchored.spacing)
                .and_then(|answer| Some((c.pair_errors(a, b, &answer, d, &mut rng)?, answer))),
            _ => None,
        };
        if let Some((own, answer)) = own {
            // The pair's plain difference and its own labelled one (uncorrelated: the labels
            // are a random sample), weighed as a run's are, but by the own answer's variance
            // at its pair's shrunk noise: on ten shared items its own measure is off by half
            // and more, and weighing or choosing by it favours the pairs whose noise it
            // underestimates (HANNA: one pair of equal systems resolved on ten labels). The
            // interval then holds at the own answer's variance as measured, t-widened.
            let ratio = noise[a * k + b].map_or(1.0, |n| n.ratio());
            let vp = (0..draws).map(|x| plain(x).powi(2)).sum::<f64>() / draws as f64;
            let e = &answer.estimate;
            let vl = e.variance.total() * t_excess(e.df, settings.level) * ratio;
            let w = if vl + vp > 0.0 { vl / (vl + vp) } else { 0.5 };
            let column: Vec<f32> = (0..draws)
                .map(|x| (w * plain(x) + (1.0 - w) * own[x]) as f32)
                .collect();
            let square = column.iter().map(|&e| (e as f64).powi(2)).sum::<f64>() / draws as f64;
            let scale = ratio.sqrt();
            let judged = (0..draws)
                .map(|x| (w * plain(x) + (1.0 - w) * scale * own[x]).powi(2))
                .sum::<f64>()
                / draws as f64;
            if judged < best.square {
                best = Blend {
                    estimate: w * plain_estimate + (1.0 - w) * e.estimate,
                    column,
                    square,
                    shared: answer.shared,
                };
            }
        }
        draft.difference = best.estimate;
        draft.labelled = best.shared;
        draft.own = Some(best.column);
    }
    let family_level = how.family_level(settings.level);
    let (pairs, critical) = pair_intervals(&drafts, &errors, k, how.error, family_level);
    let ranked: Vec<RankedRun> = estimates
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
        .collect();
    let mut ranking = Ranking {
        runs: ranked,
        pairs,
        critical,
        family_level,
        allocation: None,
    };
    if let Some(goal) = how.labels {
        let model = PlanModel::new(runs, &plains, &ranking, &plain_errors, rho, chain.as_ref());
        let looks_left = how.rounds.saturating_sub(how.round);
        ranking.allocation = Some(allocate(&ranking, runs, &model, &goal, looks_left));
    }
    Ok(ranking)
}

/// The weight of run's plain answer `p` in its combined one, beside its own answer `e`: 1
/// where `e` is plain; otherwise the labelled answer's variance (its t quantile's excess over
/// the normal folded in) over the two's sum.
fn plain_weight(e: &RunEstimate, p: &RunEstimate, level: f64) -> f64 {
    if e.path == Path::Plain {
        return 1.0;
    }
    let vl = e.mean.variance.total() * t_excess(e.mean.df, level);
    let vp = p.mean.variance.total();
    if vl + vp > 0.0 { vl / (vl + vp) } else { 0.5 }
}

/// (t quantile / normal quantile)² at `level` on `df` degrees of freedom: how much wider a t
/// interval is, as a variance.
fn t_excess(df: Option<f64>, level: f64) -> f64 {
    (inference::quantile(level, df) / inference::quantile(level, None)).powi(2)
}

/// The combined answer of a labelled run: `weight` on its plain answer `p`, the rest on its
/// labelled one `l`; its interval from its error draws `column` (symmetric, at `level`).
fn combined(
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
        path: Path::Combined,
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

/// `draws` joint draws of every run's plain error (its plain estimate − truth), row-major
/// (draw × run): each run's own noise (independent between runs), the corrector's error and
/// the groups' bias (shared as the model says).
fn joint_plain_errors(
    anchored: &Anchored,
    runs: &[RunItems],
    plains: &[RunEstimate],
    settings: &Settings,
    draws: usize,
    rng: &mut Rng,
) -> Result<Vec<f64>> {
    let k = runs.len();
    let mut errors = vec![0.0; draws * k];
    let all: Vec<usize> = (0..k).collect();
    for (i, p) in plains.iter().enumerate() {
        let sd = p.mean.variance.sampling.max(0.0).sqrt();
        for d in 0..draws {
            errors[d * k + i] += sd * standard_normal(rng);
        }
    }
    corrector_errors(anchored, runs, &all, settings, &mut errors, k, rng)?;
    if let Some(g) = anchored.basis.groups {
        let names: Vec<Option<&str>> = runs.iter().map(|r| r.group.as_deref()).collect();
        for (d, row) in g.joint_errors(&names, draws, rng).iter().enumerate() {
            for (i, e) in row.iter().enumerate() {
                errors[d * k + i] += e;
            }
        }
    }
    Ok(errors)
}

/// Adds the corrector's error, shared by the plain runs `plain`, to each draw.
fn corrector_errors(
    anchored: &Anchored,
    runs: &[RunItems],
    plain: &[usize],
    settings: &Settings,
    errors: &mut [f64],
    k: usize,
    rng: &mut Rng,
) -> Result<()> {
    let draws = errors.len() / k;
    // With a group term, a plain answer keeps only what the run's scores add beyond the
    // anchors' (`Anchored::plain`): the corrector at the run's scores less at the anchors'.
    let grouped = anchored.basis.groups.is_some();
    let anchor_mean = mean(&anchored.judge_scores);
    match anchored.basis.model.mean_uncertainty() {
        MeanUncertainty::Line(p) => {
            // (δα, δβ) ~ N(0, posterior covariance), by its Cholesky factor.
            let l11 = p.alpha_var.max(0.0).sqrt();
            let l21 = if l11 > 0.0 {
                p.alpha_beta_cov / l11
            } else {
                0.0
            };
            let l22 = (p.beta_var - l21 * l21).max(0.0).sqrt();
            let weights: Vec<(f64, f64)> = plain
                .iter()
                .map(|&i| {
                    let j = mean(&runs[i].scores);
                    if grouped {
                        (0.0, j - anchor_mean)
                    } else {
                        (1.0, j)
                    }
                })
                .collect();
            for d in 0..draws {
                let (z1, z2) = (standard_normal(rng), standard_normal(rng));
                let (da, db) = (l11 * z1, l21 * z1 + l22 * z2);
                for (&i, (wa, wb)) in plain.iter().zip(&weights) {
                    errors[d * k + i] += wa * da + wb * db;
                }
            }
        }
        MeanUncertainty::Offset => {
            // The anchors' mean residual, shared by every plain run (cancelled by a group
            // term, which carries it).
            let r = &anchored.residuals;
            if !grouped && r.len() >= 2 {
                let sd = (sample_variance(r) / r.len() as f64).sqrt();
                for d in 0..draws {
                    let e = sd * standard_normal(rng);
                    for &i in plain {
                        errors[d * k + i] += e;
                    }
                }
            }
        }
        MeanUncertainty::Omitted(_) => {}
        MeanUncertainty::Resample => {
            let mut scores: Vec<&[f64]> =
                plain.iter().map(|&i| runs[i].scores.as_slice()).collect();
            scores.push(&anchored.judge_scores);
            let (_, resampled) = anchored.resampled(&scores, settings)?;
            // One refit per draw, centred on the refits' mean, at the bootstrap's scale.
            let refits = &resampled.means;
            let centre: Vec<f64> = (0..scores.len())
                .map(|h| mean(&refits.iter().map(|m| m[h]).collect::<Vec<_>>()))
                .collect();
            let scale = resampled.bootstrap_scale.sqrt();
            let at_anchors = plain.len();
            for d in 0..draws {
                let m = &refits[rng.random_range(0..refits.len())];
                let base = if grouped {
                    m[at_anchors] - centre[at_anchors]
                } else {
                    0.0
                };
                for (h, &i) in plain.iter().enumerate() {
                    errors[d * k + i] += scale * (m[h] - centre[h] - base);
                }
            }
        }
    }
    Ok(())
}

/// One labelled run's PPI residuals (reference − λ·corrected) on its labelled items, by item.
struct Labelled {
    run: usize,
    residual: Vec<Option<f64>>,
    n: usize,
    big_n: usize,
    variance: f64,
    df: Option<f64>,
}

/// Adds the labelled runs' errors: normal with the covariance their shared labelled items
/// give, each scaled by its own t draw. Returns the correlation of two runs' residuals on the
/// items both labelled, pooled over the pairs of labelled runs (weighted by the items shared;
/// `None` where no pair shares enough).
fn labelled_errors(
    anchored: &Anchored,
    runs: &[RunItems],
    estimates: &[RunEstimate],
    errors: &mut [f64],
    k: usize,
    rng: &mut Rng,
) -> Result<Option<f64>> {
    let draws = errors.len() / k;
    let mut block: Vec<Labelled> = Vec::new();
    for (i, (run, e)) in runs.iter().zip(estimates).enumerate() {
        if e.path != Path::Labelled {
            continue;
        }
        let lambda = e.mean.lambda.unwrap_or(1.0);
        let corrected = anchored.corrected(&run.scores)?;
        let residual = run
            .references()
            .iter()
            .zip(&corrected)
            .map(|(y, f)| y.map(|y| y - lambda * f))
            .collect();
        block.push(Labelled {
            run: i,
            residual,
            n: e.mean.labelled,
            big_n: e.mean.n,
            variance: e.mean.variance.total(),
            df: e.mean.df,
        });
    }
    if block.is_empty() {
        return Ok(None);
    }
    let l = block.len();
    let mut cov = vec![0.0; l * l];
    let (mut pooled, mut weight) = (0.0, 0.0);
    for a in 0..l {
        cov[a * l + a] = block[a].variance;
        for b in 0..a {
            let Some(shared) = labelled_covariance(&block[a], &block[b], runs) else {
                continue;
            };
            cov[a * l + b] = shared.covariance;
            cov[b * l + a] = shared.covariance;
            pooled += shared.items as f64 * shared.correlation;
            weight += shared.items as f64;
        }
    }
    let factor = cholesky(&cov, l).unwrap_or_else(|| {
        // Not positive definite (covariances from few shared items): independent.
        let mut d = vec![0.0; l * l];
        for a in 0..l {
            d[a * l + a] = block[a].variance.max(0.0).sqrt();
        }
        d
    });
    let chi: Vec<Option<ChiSquared<f64>>> = block
        .iter()
        .map(|b| {
            b.df.filter(|df| df.is_finite() && *df < 200.0)
                .and_then(|df| ChiSquared::new(df).ok())
        })
        .collect();
    let mut z = vec![0.0; l];
    for d in 0..draws {
        for x in z.iter_mut() {
            *x = standard_normal(rng);
        }
        for a in 0..l {
            let x: f64 = (0..=a).map(|b| factor[a * l + b] * z[b]).sum();
            let t = match &chi[a] {
                Some(c) => {
                    let df = block[a].df.unwrap_or(f64::INFINITY);
                    (df / c.sample(rng).max(1e-12)).sqrt()
                }
                None => 1.0,
            };
            errors[d * k + block[a].run] += x * t;
        }
    }
    Ok((weight > 0.0).then(|| pooled / weight))
}

/// Two labelled runs' residuals on the items both labelled.
struct Shared {
    /// Of the two runs' errors.
    covariance: f64,
    /// Of the residuals, item by item.
    correlation: f64,
    items: usize,
}

/// The covariance of two labelled runs' errors, from the items both labelled (runs paired by
/// id): (m/(n_a·n_b) − 1/N)·S_ab, S_ab the residuals' covariance on the m shared items; `None`
/// for runs not paired, sharing fewer than 3 items, or with clusters (whose errors the
/// single-run answers treat by cluster).
fn labelled_covariance(a: &Labelled, b: &Labelled, runs: &[RunItems]) -> Option<Shared> {
    let (ra, rb) = (&runs[a.run], &runs[b.run]);
    if ra.clusters.is_some() || rb.clusters.is_some() || a.big_n != b.big_n {
        return None;
    }
    let pairs = super::pairing(ra, rb)?;
    let shared: Vec<(f64, f64)> = pairs
        .iter()
        .filter_map(|&(i, j)| a.residual[i].zip(b.residual[j]))
        .collect();
    let m = shared.len();
    if m < 3 {
        return None;
    }
    let s = covariance(&shared);
    let (xs, ys): (Vec<f64>, Vec<f64>) = shared.iter().copied().unzip();
    let (sx, sy) = (sample_variance(&xs), sample_variance(&ys));
    let c = (m as f64 / (a.n * b.n) as f64 - 1.0 / a.big_n as f64) * s;
    // Never beyond a correlation of 0.99.
    let bound = 0.99 * (a.variance * b.variance).max(0.0).sqrt();
    Some(Shared {
        covariance: c.clamp(-bound, bound),
        correlation: if sx > 0.0 && sy > 0.0 {
            (s / (sx * sy).sqrt()).clamp(-1.0, 1.0)
        } else {
            0.0
        },
        items: m,
    })
}

/// A pair before its interval: its difference, and where its errors come from.
struct Draft {
    a: usize,
    b: usize,
    difference: f64,
    /// Items both runs labelled behind the pair's own answer (0: the runs' answers').
    labelled: usize,
    /// The pair's own errors, draw by draw; `None`: the runs' errors' difference.
    own: Option<Vec<f32>>,
}

/// A pair's answer from two of its estimates.
struct Blend {
    estimate: f64,
    /// Its error, draw by draw.
    column: Vec<f32>,
    /// Its mean square over the draws.
    square: f64,
    /// Items both runs labelled behind it (0: none of the pair's own).
    shared: usize,
}

/// The least-variance weighting w·X₁ + (1 − w)·X₂ of two estimates of one difference, each
/// given as (estimate, its error in draw x), w from their errors' joint draws.
fn blend(
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
    let column: Vec<f32> = (0..draws)
        .map(|x| (w * first.1(x) + (1.0 - w) * second.1(x)) as f32)
        .collect();
    let square = column.iter().map(|&e| (e as f64).powi(2)).sum::<f64>() / draws.max(1) as f64;
    Blend {
        estimate: w * first.0 + (1.0 - w) * second.0,
        column,
        square,
        shared: 0,
    }
}

/// Every pair, (0, 1), (0, 2), …, as the difference of its runs' answers.
fn drafts(estimates: &[RunEstimate]) -> Vec<Draft> {
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
fn pair_intervals(
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

/// What a run's answer would be with `m` labels in all, for planning.
#[derive(Debug, Clone, Copy)]
struct Planned {
    /// The plain answer's variance.
    plain: f64,
    /// Labels it has now.
    labelled: usize,
    n: usize,
    /// The noise of one labelled item's residual.
    noise: f64,
}

impl Planned {
    /// The labelled answer's variance with `m` labels in all, its t quantile's excess over
    /// the normal folded in (`None` under [`MIN_LABELLED`]).
    fn labelled(&self, m: usize, level: f64) -> Option<f64> {
        if m < MIN_LABELLED {
            return None;
        }
        Some(self.noise * fpc(m, self.n) * t_excess(Some(planned_df(m)), level))
    }

    /// The weight of the plain answer in the combined one with `m` labels (1: plain), and
    /// the labelled answer's variance.
    fn weight(&self, m: usize, level: f64) -> (f64, f64) {
        match self.labelled(m, level) {
            None => (1.0, 0.0),
            Some(vl) if vl + self.plain > 0.0 => (vl / (vl + self.plain), vl),
            Some(vl) => (0.5, vl),
        }
    }
}

/// The degrees of freedom of a labelled answer on `m` items (one more goes to λ where it is
/// tuned).
fn planned_df(m: usize) -> f64 {
    let df = if m < inference::MIN_TUNED {
        m - 1
    } else {
        m - 2
    };
    (df as f64).max(1.0)
}

/// What the plan knows: each run's plain and labelled answers' variances, the plain answers'
/// covariances (from their joint draws), and the correlation of two runs' residuals on items
/// both label.
struct PlanModel {
    runs: Vec<Planned>,
    /// k × k, row-major.
    plain_cov: Vec<f64>,
    rho: f64,
    /// Whether `rho` was measured (on labelled runs' shared items) or is the 0 assumed
    /// before any labels.
    rho_measured: bool,
    /// Whether every run has the same ids, so that the plan's labels nest and a pair of
    /// labelled runs is answered on the items both labelled.
    paired: bool,
    /// k × k: the noise of one item's residual difference between two runs, measured where
    /// both are labelled, otherwise from each run's noise and `rho`.
    difference_noise: Vec<f64>,
    level: f64,
}

impl PlanModel {
    fn new(
        runs: &[RunItems],
        plains: &[RunEstimate],
        ranking: &Ranking,
        plain_errors: &[f64],
        rho: Option<f64>,
        chain: Option<&paired::Chain>,
    ) -> Self {
        let k = runs.len();
        let draws = (plain_errors.len() / k).max(1);
        let mut plain_cov = vec![0.0; k * k];
        for row in plain_errors.chunks_exact(k) {
            for a in 0..k {
                for b in 0..=a {
                    plain_cov[a * k + b] += row[a] * row[b];
                }
            }
        }
        for a in 0..k {
            for b in 0..=a {
                plain_cov[a * k + b] /= draws as f64;
                plain_cov[b * k + a] = plain_cov[a * k + b];
            }
        }
        let planned: Vec<Planned> = runs
            .iter()
            .zip(plains)
            .zip(&ranking.runs)
            .enumerate()
            .map(|(i, ((run, p), r))| {
                let e = &r.estimate;
                Planned {
                    plain: plain_cov[i * k + i],
                    labelled: e.mean.labelled,
                    n: e.mean.n,
                    // The noise of a reference around its corrected score, as the plain
                    // answer measures it for every run alike.
                    noise: p.mean.variance.sampling
                        / mean_share(run.scores.len(), run.clusters.as_deref()),
                }
            })
            .collect();
        let rho_used = rho.unwrap_or(0.0).clamp(0.0, 0.95);
        // Measured where both runs are labelled, shrunk as the ranking's pairs are; otherwise
        // from each run's noise and the pooled correlation.
        let difference_noise = shrunk_noise(chain, k)
            .into_iter()
            .enumerate()
            .map(|(x, noise)| match noise {
                Some(n) => n.shrunk,
                None => {
                    let (na, nb) = (planned[x / k].noise, planned[x % k].noise);
                    na + nb - 2.0 * rho_used * (na * nb).sqrt()
                }
            })
            .collect();
        Self {
            runs: planned,
            plain_cov,
            rho: rho_used,
            rho_measured: rho.is_some(),
            paired: same_ids(runs),
            difference_noise,
            level: ranking.family_level,
        }
    }

    /// The variance of run a's answer less run b's with `m[i]` labels on run i (nested
    /// samples of the same items where both are labelled).
    fn pair(&self, m: &[usize], a: usize, b: usize) -> f64 {
        let k = self.runs.len();
        let (pa, pb) = (&self.runs[a], &self.runs[b]);
        let (wa, la) = pa.weight(m[a], self.level);
        let (wb, lb) = pb.weight(m[b], self.level);
        let plain = wa * wa * self.plain_cov[a * k + a] + wb * wb * self.plain_cov[b * k + b]
            - 2.0 * wa * wb * self.plain_cov[a * k + b];
        let (ua, ub) = (1.0 - wa, 1.0 - wb);
        let shared = if ua > 0.0 && ub > 0.0 {
            self.rho * (pa.noise * pb.noise).sqrt() * fpc(m[a].max(m[b]), pa.n.max(pb.n))
        } else {
            0.0
        };
        let of_runs = (plain + ua * ua * la + ub * ub * lb - 2.0 * ua * ub * shared).max(0.0);
        let c = |x: usize, y: usize| self.plain_cov[x * k + y];
        let vp = (c(a, a) + c(b, b) - 2.0 * c(a, b)).max(0.0);
        // The pair's own answer on the items both labelled, weighed with its plain
        // difference.
        if !self.paired || m[a].min(m[b]) < MIN_LABELLED {
            return of_runs;
        }
        let both = m[a].min(m[b]);
        let vl = self.difference_noise[a * k + b]
            * fpc(both, pa.n.max(pb.n))
            * t_excess(Some(planned_df(both)), self.level);
        let own = if vl + vp > 0.0 {
            vl * vp / (vl + vp)
        } else {
            0.0
        };
        of_runs.min(own)
    }
}

/// A pair's residual-difference noise per item, measured on the items both runs labelled.
#[derive(Clone, Copy)]
struct PairNoise {
    measured: f64,
    /// Shrunk toward the pairs' pooled value, which counts as [`PRIOR_ITEMS`] items of its
    /// own.
    shrunk: f64,
}

impl PairNoise {
    /// What the shrunk noise is of the measured (1 where nothing was measured).
    fn ratio(&self) -> f64 {
        if self.measured > 1e-12 {
            self.shrunk / self.measured
        } else {
            1.0
        }
    }
}

/// Every pair's noise (k × k, row-major) where both runs are on `chain`: on a first sample's
/// 20 shared items a pair's own measure has 19 degrees of freedom (±32%), on ten 9 (±47%).
fn shrunk_noise(chain: Option<&paired::Chain>, k: usize) -> Vec<Option<PairNoise>> {
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

/// Plans labels for the open pairs of `ranking`.
fn allocate(
    ranking: &Ranking,
    runs: &[RunItems],
    model: &PlanModel,
    goal: &LabelGoal,
    looks_left: usize,
) -> Allocation {
    let k = runs.len();
    let start: Vec<usize> = model.runs.iter().map(|p| p.labelled).collect();
    let z = normal_quantile(goal.power.clamp(0.5, 0.999));
    // Open pairs as (a, b, the variance that settles them).
    let open: Vec<(usize, usize, f64)> = ranking
        .pairs
        .iter()
        .filter(|p| p.higher().is_none() && !p.within(goal.min_gap))
        .map(|p| {
            let gap = (p.difference.abs() - p.standard_error).max(goal.min_gap);
            (p.a, p.b, (gap / (ranking.critical + z)).powi(2))
        })
        .collect();
    let mut touching: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (o, &(a, b, _)) in open.iter().enumerate() {
        touching[a].push(o);
        touching[b].push(o);
    }
    let over = |m: &[usize], o: usize| {
        let (a, b, target) = open[o];
        (model.pair(m, a, b) / target - 1.0).max(0.0)
    };
    let met = |m: &[usize]| -> usize {
        open.iter()
            .filter(|&&(a, b, target)| model.pair(m, a, b) <= target * (1.0 + 1e-9))
            .count()
    };
    let budget = goal.budget.unwrap_or(usize::MAX);
    // Before any labels the plan cannot see what the runs' residuals share item by item, nor
    // their spread where the judge's corrected scores are off within a run, and a plan from
    // the plain answers' noise alone asks for many times the labels needed. With two looks to
    // spare, a first sample on every run in an open pair measures both.
    if model.paired && !model.rho_measured && looks_left >= 2 {
        let m: Vec<usize> = (0..k)
            .map(|i| {
                if touching[i].is_empty() {
                    start[i]
                } else {
                    start[i].max(PILOT_LABELS).min(model.runs[i].n)
                }
            })
            .collect();
        let spent: usize = m.iter().zip(&start).map(|(a, b)| a - b).sum();
        if spent <= budget {
            let add: Vec<usize> = m.iter().zip(&start).map(|(a, b)| a - b).collect();
            let (items, paired) = draw_items(runs, &add, goal.seed);
            return Allocation {
                goal: *goal,
                add,
                items,
                open: open.len(),
                reached: met(&m),
                uniform: uniform_total(&open, model),
                paired,
                pilot: true,
                step: false,
            };
        }
    }
    let mut m = start.clone();
    // The counts worth trying next for run i: at least [`FIRST_LABELS`], then steps that
    // double, so that labels whose gain only shows in number are still seen.
    let steps = |i: usize, now: usize| -> Vec<usize> {
        let most = model.runs[i].n;
        let mut out = Vec::new();
        let mut x = if now == start[i] {
            (now + FIRST_LABELS).max(FIRST_LABELS)
        } else {
            now + (now / 4).max(1)
        };
        while x < most {
            out.push(x);
            x *= 2;
        }
        if most > now {
            out.push(most);
        }
        out
    };
    loop {
        let spent: usize = m.iter().zip(&start).map(|(a, b)| a - b).sum();
        // Moves: one run raised, or both runs of an open pair raised to one count (their
        // paired labels then cancel what the items share).
        let mut moves: Vec<Vec<(usize, usize)>> = Vec::new();
        for i in 0..k {
            if !touching[i].is_empty() {
                moves.extend(steps(i, m[i]).into_iter().map(|x| vec![(i, x)]));
            }
        }
        for (o, &(a, b, _)) in open.iter().enumerate() {
            if over(&m, o) > 0.0 {
                for x in steps(a, m[a].max(m[b])) {
                    moves.push(vec![(a, x), (b, x.min(model.runs[b].n))]);
                }
            }
        }
        let mut best: Option<(f64, Vec<(usize, usize)>)> = None;
        for mv in moves {
            let added: usize = mv.iter().map(|&(i, x)| x.saturating_sub(m[i])).sum();
            if added == 0 || spent + added > budget {
                continue;
            }
            let mut affected: Vec<usize> =
                mv.iter().flat_map(|&(i, _)| touching[i].clone()).collect();
            affected.sort_unstable();
            affected.dedup();
            let before: f64 = affected.iter().map(|&o| over(&m, o)).sum();
            let mut trial = m.clone();
            for &(i, x) in &mv {
                trial[i] = x;
            }
            let after: f64 = affected.iter().map(|&o| over(&trial, o)).sum();
            let gain = (before - after) / added as f64;
            if gain > 1e-12 && best.as_ref().is_none_or(|b| gain > b.0) {
                best = Some((gain, mv));
            }
        }
        let Some((_, mv)) = best else { break };
        for (i, x) in mv {
            m[i] = x;
        }
    }
    // Where a pair is answered on the items both its runs labelled, it needs only the count
    // they share: each open pair at the fewest that settle it, both runs at that count, and
    // each run at the most its pairs ask. Taken where it reaches as many targets for less.
    let cost = |m: &[usize]| -> usize { m.iter().zip(&start).map(|(a, b)| a - b).sum() };
    if model.paired {
        let mut each = start.clone();
        for &(a, b, target) in &open {
            let at = |x: usize| {
                let mut t = start.clone();
                for i in [a, b] {
                    t[i] = if x > start[i] {
                        x.max(start[i] + FIRST_LABELS).min(model.runs[i].n)
                    } else {
                        start[i]
                    };
                }
                t
            };
            let most = model.runs[a].n.max(model.runs[b].n);
            let x = least(start[a].min(start[b]), most, |x| {
                model.pair(&at(x), a, b) <= target * (1.0 + 1e-9)
            });
            let t = at(x);
            each[a] = each[a].max(t[a]);
            each[b] = each[b].max(t[b]);
        }
        let (now, then) = (met(&m), met(&each));
        if cost(&each) <= budget && (then > now || (then == now && cost(&each) < cost(&m))) {
            m = each;
        }
    }
    // Trim back to the fewest labels that keep every target the plan met: first the runs that
    // share one count, together (each open pair's runs at one count stay paired item for
    // item), then each run alone. Only where every target is reached: short of the budget, a
    // run's labels also lower the pairs that stay open.
    let reached = met(&m);
    if reached == open.len() {
        let mut sets: Vec<Vec<usize>> = open
            .iter()
            .filter(|&&(a, b, _)| m[a] > start[a] && m[b] > start[b])
            .map(|&(a, b, _)| vec![a, b])
            .collect();
        sets.extend((0..k).filter(|&i| m[i] > start[i]).map(|i| vec![i]));
        for set in sets {
            // A run alone is not trimmed below the partner it was paired with.
            if let [i] = set[..]
                && open
                    .iter()
                    .any(|&(a, b, _)| (a == i || b == i) && m[a] == m[b])
            {
                continue;
            }
            // The set's runs at one count x (a run alone: its own, lowered).
            let at = |x: usize| -> Vec<usize> {
                let mut trial = m.clone();
                for &i in &set {
                    let x = x.max(start[i]).min(model.runs[i].n);
                    trial[i] = if x > start[i] && x < start[i] + FIRST_LABELS {
                        start[i] + FIRST_LABELS
                    } else {
                        x
                    }
                    .min(model.runs[i].n);
                }
                trial
            };
            let top = set.iter().map(|&i| m[i]).max().unwrap_or(0);
            let floor = set.iter().map(|&i| start[i]).max().unwrap_or(0);
            let hi = least(floor, top, |x| met(&at(x)) >= reached);
            // Equal counts for a pair only where they cost no more than the counts as they
            // are (they usually cost less: 1/m is convex), and they keep every target.
            let trial = at(hi);
            if met(&trial) >= reached && cost(&trial) <= cost(&m) {
                m = trial;
            }
        }
    }
    let uniform = uniform_total(&open, model);
    // Before any labels, with every run in an open pair the judge alone places no run: there
    // is no run to leave out, and uneven counts give up the pairing (the residuals' shared
    // part cancels in a difference only where both runs label the same items), which the plan
    // cannot yet measure. Every run then gets one count, the fewest reaching the targets the
    // uneven plan reached.
    if !model.paired && !model.rho_measured && touching.iter().all(|t| !t.is_empty()) {
        let equal = |c: usize| -> Vec<usize> {
            (0..k)
                .map(|i| start[i].max(c).min(model.runs[i].n))
                .collect()
        };
        let most = model.runs.iter().map(|p| p.n).max().unwrap_or(0);
        let lo = least(0, most, |c| met(&equal(c)) >= reached);
        let spent: usize = m.iter().zip(&start).map(|(a, b)| a - b).sum();
        let e = equal(lo);
        if e.iter().zip(&start).map(|(a, b)| a - b).sum::<usize>() <= budget.max(spent) {
            m = e;
        }
    }
    let mut add: Vec<usize> = m.iter().zip(&start).map(|(a, b)| a - b).collect();
    let reached = met(&m);
    // With labels on the same items already and two looks to spare, a step: the plan's
    // targets rest on gaps and spreads measured on a few labels, and it asks several times
    // what settles; a share of it sharpens them for the next look's plan.
    let step = model.paired && model.rho_measured && looks_left >= 2;
    if step {
        for (i, a) in add.iter_mut().enumerate() {
            let x = (*a as f64 * STEP_SHARE).round() as usize;
            *a = if x == 0 {
                0
            } else {
                x.max(FIRST_LABELS).min(*a).min(model.runs[i].n - start[i])
            };
        }
    }
    let (items, paired) = draw_items(runs, &add, goal.seed);
    Allocation {
        goal: *goal,
        add,
        items,
        open: open.len(),
        reached,
        uniform,
        paired,
        pilot: false,
        step,
    }
}

/// The least x in [lo, hi] where `ok` holds, `ok` false below some point and true from it
/// (`hi` where it holds nowhere below).
fn least(mut lo: usize, mut hi: usize, ok: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = (lo + hi) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi
}

/// The fewest labels, one count for every run, that reach every open pair's target.
fn uniform_total(open: &[(usize, usize, f64)], model: &PlanModel) -> Option<usize> {
    let counts = |c: usize| -> Vec<usize> {
        model
            .runs
            .iter()
            .map(|p| p.labelled.max(c).min(p.n))
            .collect()
    };
    let ok = |c: usize| {
        let m = counts(c);
        open.iter()
            .all(|&(a, b, target)| model.pair(&m, a, b) <= target * (1.0 + 1e-9))
    };
    let most = model.runs.iter().map(|p| p.n).max().unwrap_or(0);
    if !ok(most) {
        return None;
    }
    let lo = least(0, most, ok);
    Some(
        counts(lo)
            .iter()
            .zip(&model.runs)
            .map(|(m, p)| m - p.labelled)
            .sum(),
    )
}

/// Whether every run has the same ids.
fn same_ids(runs: &[RunItems]) -> bool {
    runs[0].ids.is_some()
        && runs
            .windows(2)
            .all(|w| super::pairing(&w[0], &w[1]).is_some())
}

/// Which items to label: `add[k]` of run k's unlabelled items, a seeded uniform sample. Where
/// every run has the same ids, one permutation of the ids serves all, so that the labels fall
/// on the same items.
fn draw_items(runs: &[RunItems], add: &[usize], seed: u64) -> (Vec<Vec<usize>>, bool) {
    let mut rng = Rng::seed_from_u64(seed ^ 0x1ABE1);
    if same_ids(runs) {
        let mut ids: Vec<&str> = runs[0]
            .ids
            .as_ref()
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default();
        ids.sort_unstable();
        ids.shuffle(&mut rng);
        let items = runs
            .iter()
            .zip(add)
            .map(|(r, &n)| {
                let position: std::collections::HashMap<&str, usize> = r
                    .ids
                    .iter()
                    .flatten()
                    .enumerate()
                    .map(|(i, id)| (id.as_str(), i))
                    .collect();
                let refs = r.references();
                ids.iter()
                    .filter_map(|id| position.get(id).copied())
                    .filter(|&i| refs[i].is_none())
                    .take(n)
                    .collect()
            })
            .collect();
        return (items, true);
    }
    let items = runs
        .iter()
        .zip(add)
        .map(|(r, &n)| {
            let refs = r.references();
            let mut free: Vec<usize> = (0..r.scores.len()).filter(|&i| refs[i].is_none()).collect();
            free.shuffle(&mut rng);
            free.truncate(n);
            free
        })
        .collect();
    (items, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(value: f64) -> RunEstimate {
        let mut e = crate::calibrate::runlevel::RunEstimate {
            path: Path::Plain,
            mean: inference::plain(&[value, value], 0.0, 0.0, None, 0.95).unwrap(),
            term: super::super::Term::Posterior,
            support: super::super::Support {
                anchor_range: (1.0, 5.0),
                outside: 0.0,
                thin: 0.0,
            },
            transport: None,
            advice: None,
            group: super::super::GroupAnswer::none(),
        };
        e.mean.estimate = value;
        e
    }

    #[test]
    fn the_combined_answer_weighs_plain_and_labelled_by_inverse_variance() {
        // Plain 3.0 with variance 0.04, labelled 3.3 with variance 0.01 on a normal quantile:
        // weight 0.01/0.05 = 0.2 on the plain one, estimate 0.2·3.0 + 0.8·3.3 = 3.24,
        // variance 0.04·0.01/0.05 = 0.008, so a 95% half-width of 1.96·√0.008 = 0.1753.
        let mut p = estimate(3.0);
        p.mean.variance = inference::Variance {
            sampling: 0.03,
            corrector: 0.0,
            group: 0.01,
        };
        let mut l = estimate(3.3);
        l.path = Path::Labelled;
        l.mean.variance = inference::Variance {
            sampling: 0.01,
            ..Default::default()
        };
        l.mean.df = None;
        let w = plain_weight(&l, &p, 0.95);
        assert!((w - 0.2).abs() < 1e-12, "{w}");
        assert_eq!(plain_weight(&p, &p, 0.95), 1.0);
        // A t quantile on few labels weighs the labelled answer down: on 4 degrees of
        // freedom its variance counts (2.776445/1.959964)² = 2.006671 times, so the weight
        // is 0.020067/0.060067 = 0.33407.
        l.mean.df = Some(4.0);
        let w4 = plain_weight(&l, &p, 0.95);
        assert!((w4 - 0.33407).abs() < 1e-4, "{w4}");
        l.mean.df = None;
        let mut rng = Rng::seed_from_u64(9);
        let column: Vec<f64> = (0..DRAWS)
            .map(|_| 0.2 * 0.2 * standard_normal(&mut rng) + 0.8 * 0.1 * standard_normal(&mut rng))
            .collect();
        let c = combined(&l, &p, 0.2, &column, 0.95);
        assert_eq!(c.path, Path::Combined);
        assert!((c.mean.estimate - 3.24).abs() < 1e-12);
        assert!((c.mean.variance.total() - 0.008).abs() < 1e-12);
        let half = (c.mean.interval.1 - c.mean.interval.0) / 2.0;
        assert!((half - 0.1753).abs() < 0.005, "{half}");
    }

    #[test]
    fn a_paired_difference_of_labelled_runs_loses_what_the_items_share() {
        // Plain answers too wide to count (weights ≈ 0); residual noise 1 per item, correlation
        // 0.5 between the runs on one item, 100 labels each of 1,000 on the same items: the
        // difference's variance is 2·(1/100 − 1/1000)·(t excess − 0.5), the t excess on 98
        // degrees of freedom (1.98447/1.95996)² = 1.02516.
        let run = Planned {
            plain: 1e12,
            labelled: 0,
            n: 1000,
            noise: 1.0,
        };
        let model = PlanModel {
            runs: vec![run; 2],
            plain_cov: vec![1e12, 0.0, 0.0, 1e12],
            rho: 0.5,
            rho_measured: true,
            paired: false,
            difference_noise: vec![0.0, 1.0, 1.0, 0.0],
            level: 0.95,
        };
        let want = 2.0 * (0.01 - 0.001) * (1.02516 - 0.5);
        let got = model.pair(&[100, 100], 0, 1);
        assert!((got / want - 1.0).abs() < 1e-3, "{got} vs {want}");
        // With no labels the plain answers' own covariance rules: 1e12 + 1e12.
        assert!((model.pair(&[0, 0], 0, 1) / 2e12 - 1.0).abs() < 1e-12);
        // Uneven counts, 100 and 400, residuals correlated 0.8: the runs' answers share only
        // ρ·(1/400 − 1/1000), so their difference has 1.02516·0.009 + 1.00614·0.0015 −
        // 2·0.8·0.0015 = 0.0083356 (t excess on 398 degrees of freedom (1.96597/1.95996)²).
        let model = PlanModel {
            rho: 0.8,
            difference_noise: vec![0.0, 0.4, 0.4, 0.0],
            ..model
        };
        let uneven = model.pair(&[100, 400], 0, 1);
        let want = 1.02516 * 0.009 + 1.00614 * 0.0015 - 1.6 * 0.0015;
        assert!((uneven / want - 1.0).abs() < 1e-3, "{uneven} vs {want}");
        // Answered on the 100 items both labelled, the pair keeps what they share: the
        // residual difference's noise 2·(1 − 0.8) = 0.4 per item, 0.4·1.02516·0.009 =
        // 0.0036906 (its plain difference, 2e12, adds nothing).
        let model = PlanModel {
            paired: true,
            ..model
        };
        let own = model.pair(&[100, 400], 0, 1);
        let want = 0.4 * 1.02516 * 0.009;
        assert!((own / want - 1.0).abs() < 1e-3, "{own} vs {want}");
        assert!(own < uneven);
    }

    #[test]
    fn before_any_labels_a_ranking_the_judge_cannot_order_gets_one_count_per_run_or_a_first_sample()
    {
        // Three runs 0.05 apart, every pair open (plain variance 0.01 each, independent):
        // the plan labels all three, as many each, and reaches every target.
        let estimates: Vec<RunEstimate> = [3.0, 3.05, 3.1].into_iter().map(estimate).collect();
        let mut rng = Rng::seed_from_u64(2);
        let errors: Vec<f64> = (0..DRAWS * 3)
            .map(|_| 0.1 * standard_normal(&mut rng))
            .collect();
        let (pairs, critical) = pair_intervals(
            &drafts(&estimates),
            &errors,
            3,
            ErrorRate::Familywise,
            0.975,
        );
        let ranking = Ranking {
            runs: estimates
                .into_iter()
                .map(|estimate| RankedRun {
                    estimate,
                    rank: (1, 3),
                })
                .collect(),
            pairs,
            critical,
            family_level: 0.975,
            allocation: None,
        };
        let runs: Vec<RunItems> = (0..3).map(|_| RunItems::scores(vec![3.0; 1000])).collect();
        let run = Planned {
            plain: 0.01,
            labelled: 0,
            n: 1000,
            noise: 1.0,
        };
        let mut model = PlanModel {
            runs: vec![run; 3],
            plain_cov: vec![0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01],
            rho: 0.0,
            rho_measured: false,
            paired: false,
            difference_noise: vec![2.0; 9],
            level: 0.975,
        };
        let a = allocate(&ranking, &runs, &model, &LabelGoal::default(), 1);
        assert_eq!(a.open, 3);
        assert_eq!(a.reached, 3, "{a:?}");
        assert!(
            a.add[0] > 0 && a.add.iter().all(|&x| x == a.add[0]),
            "{:?}",
            a.add
        );
        // Once a correlation is measured the plan may spend unevenly; it still reaches them.
        model.rho_measured = true;
        let b = allocate(&ranking, &runs, &model, &LabelGoal::default(), 1);
        assert_eq!(b.reached, 3, "{b:?}");
        assert!(!a.pilot && !b.pilot);
        // Runs paired by id, nothing measured yet and two looks to spare: a first sample of
        // PILOT_LABELS on each run in an open pair, and no more; with one look left, the plan.
        model.rho_measured = false;
        model.paired = true;
        let ids: Vec<String> = (0..1000).map(|i| format!("p{i}")).collect();
        let runs: Vec<RunItems> = runs
            .into_iter()
            .map(|r| RunItems {
                ids: Some(ids.clone()),
                ..r
            })
            .collect();
        let pilot = allocate(&ranking, &runs, &model, &LabelGoal::default(), 2);
        assert!(pilot.pilot && pilot.paired);
        assert_eq!(pilot.add, vec![PILOT_LABELS; 3]);
        // The same items on every run.
        assert!(pilot.items.iter().all(|i| *i == pilot.items[0]));
        let last = allocate(&ranking, &runs, &model, &LabelGoal::default(), 1);
        assert!(!last.pilot && last.reached == 3 && last.total() > 3 * PILOT_LABELS);
    }

    #[test]
    fn two_estimates_of_a_pair_blend_by_their_joint_errors() {
        // Independent errors of variance 1 and 4: w = 4/5 on the first, variance 4/5. With
        // the second's error the first's plus independent noise of variance 3 (so Var 4,
        // Cov 1), the first alone is best: w = (4 − 1)/(1 + 4 − 2) = 1. 20,000 draws: the
        // weights within 0.02, the variance within 4% (about 5 standard errors).
        let mut rng = Rng::seed_from_u64(11);
        let z: Vec<(f64, f64)> = (0..DRAWS)
            .map(|_| (standard_normal(&mut rng), standard_normal(&mut rng)))
            .collect();
        let b = blend((1.0, &|x| z[x].0), (2.0, &|x| 2.0 * z[x].1), DRAWS);
        assert!(
            (b.estimate - (0.8 + 0.2 * 2.0)).abs() < 0.02,
            "{}",
            b.estimate
        );
        assert!((b.square / 0.8 - 1.0).abs() < 0.04, "{}", b.square);
        let nested = blend(
            (1.0, &|x| z[x].0),
            (2.0, &|x| z[x].0 + 3f64.sqrt() * z[x].1),
            DRAWS,
        );
        assert!((nested.estimate - 1.0).abs() < 0.02, "{}", nested.estimate);
        assert_eq!(nested.shared, 0);
    }

    #[test]
    fn the_max_t_critical_value_matches_known_quantiles() {
        // Independent N(0, 1) errors. Two runs: one pair, whose 95% point is 1.96. Three runs:
        // three pairs of correlation ±0.5, whose max-|t| 95% point (Tukey's studentised range
        // for 3 means at infinite df, 3.314/√2 = 2.343) lies between the single pair's and
        // Bonferroni's 2.394. Monte Carlo error of 20,000 draws: about ±0.02.
        let mut rng = Rng::seed_from_u64(5);
        for (k, want) in [(2, 1.960), (3, 2.343)] {
            let errors: Vec<f64> = (0..DRAWS * k).map(|_| standard_normal(&mut rng)).collect();
            let estimates: Vec<RunEstimate> = (0..k).map(|i| estimate(i as f64)).collect();
            let (pairs, c) =
                pair_intervals(&drafts(&estimates), &errors, k, ErrorRate::Familywise, 0.95);
            assert!((c - want).abs() < 0.03, "{k} runs: {c}");
            assert!((pairs[0].standard_error - 2f64.sqrt()).abs() < 0.03);
            // Per pair, each pair's own 95% point.
            let (_, c) = pair_intervals(&drafts(&estimates), &errors, k, ErrorRate::PerPair, 0.95);
            assert!((c - 1.96).abs() < 0.05, "{k} runs per pair: {c}");
        }
    }
}
