//! One cell's agreement report (issue 58), read from its version's anchors with their
//! cross-fitted corrections: the raw judge and the corrected scores side by side against the
//! reference, the bias by judge-score level and by system with intervals, and the items the
//! reference disagrees with most.
//!
//! Bias is a score minus its reference (positive: the score is too high), its interval the
//! Student-t interval of a mean. On a discrete reference scale (at most [`MAX_LEVELS`] levels)
//! the κs compare each score at its nearest reference level with the reference; a judge on
//! another scale gets none.

use serde::{Deserialize, Serialize};

use super::{Figure, Kappas, LEVEL, MAX_LEVELS, correlations, distinct, kappas, on_grid};
use crate::repeats::{OneScore, RepeatReport, Repeats, WithinItem};
use crate::stats::{mean, sample_variance, t_quantile};
use crate::warning::{Code, Warning};

/// One anchor of a version as the report reads it, in the order the version saw them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HeldOutRow {
    pub item_id: String,
    pub group: Option<String>,
    pub judge_score: f64,
    pub reference_score: f64,
    /// The corrected score from a fit that did not see this anchor; `None` where the split
    /// never held it out.
    pub corrected: Option<f64>,
    /// That fit's 95% predictive band for the item's reference, where it gives one.
    pub band: Option<[f64; 2]>,
    /// Further scores of the item by the same judge version (the judge re-asked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<f64>,
}

/// How one kind of score agrees with the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Agreement {
    /// Items compared.
    pub n: usize,
    /// `None` (as are the other two) with fewer than three items or a constant side.
    pub pearson: Option<Figure>,
    pub spearman: Option<Figure>,
    pub kendall: Option<Figure>,
    /// On a discrete reference scale: the scores at their nearest reference level against the
    /// reference, with the confusion matrix (rows: the score's level).
    pub kappa: Option<Kappas>,
}

/// The mean bias (score − reference) of a slice of anchors, raw and corrected.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Bias {
    /// Anchors in the slice.
    pub n: usize,
    /// The raw judge's (judge score − reference, each on its own scale).
    pub raw: Option<Figure>,
    /// Of the held-out corrected scores (over the slice's held-out anchors).
    pub corrected: Option<Figure>,
}

/// The bias where the judge gave scores from `from` to `to` (one level where they are equal).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LevelBias {
    pub from: f64,
    pub to: f64,
    pub bias: Bias,
}

/// The bias on one system's outputs (the anchors' group).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SystemBias {
    pub group: String,
    pub bias: Bias,
}

/// One anchor the corrected score misses by much.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Disagreement {
    pub item_id: String,
    pub group: Option<String>,
    pub judge_score: f64,
    pub reference_score: f64,
    /// The held-out corrected score.
    pub corrected: f64,
    /// Reference − corrected.
    pub error: f64,
    /// The held-out 95% predictive band, and whether the reference lies outside it.
    pub band: Option<[f64; 2]>,
    pub outside: Option<bool>,
}

/// The report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = AgreementReport)]
pub struct AgreementReport {
    /// Anchors read.
    pub n: usize,
    /// Of them, those with a held-out corrected score.
    pub held_out: usize,
    /// The reference's levels where its scale is discrete (what the κs use).
    pub levels: Option<Vec<f64>>,
    /// The raw judge against the reference, over every anchor.
    pub raw: Agreement,
    /// The held-out corrected scores against the reference, over the held-out anchors.
    pub corrected: Agreement,
    pub bias: Bias,
    /// By the judge's level where it gives at most [`MAX_LEVELS`] distinct scores, else by
    /// [`BINS`] bins of about equal size.
    pub by_level: Vec<LevelBias>,
    /// By the anchors' group, where any names one.
    pub by_group: Vec<SystemBias>,
    /// The held-out anchors by how far the reference lies from the corrected score, largest
    /// first.
    pub disagreements: Vec<Disagreement>,
    /// The judge's repeat (test–retest) noise, where at least two anchors carry repeats.
    pub repeats: Option<RepeatReport>,
    /// What a reader could take wrongly from the figures.
    pub warnings: Vec<Warning>,
}

/// A judge score that holds at least this share of the held-out anchors gets a warning about
/// the corrected side's rank figures.
pub const TIE_WARNING_SHARE: f64 = 0.05;

/// The warning where many held-out anchors share one judge score: their corrections come
/// from different folds' fits, so they differ by fold noise that the corrected rank figures
/// order as if it were signal.
fn tie_warning(rows: &[HeldOutRow]) -> Option<Warning> {
    let held: Vec<f64> = rows
        .iter()
        .filter(|r| r.corrected.is_some())
        .map(|r| r.judge_score)
        .collect();
    let mut sorted = held.clone();
    sorted.sort_by(f64::total_cmp);
    let (mut best, mut at, mut run) = (0usize, f64::NAN, 0usize);
    for (i, v) in sorted.iter().enumerate() {
        run = if i > 0 && sorted[i - 1] == *v {
            run + 1
        } else {
            1
        };
        if run > best {
            (best, at) = (run, *v);
        }
    }
    (held.len() >= 3 && best as f64 >= TIE_WARNING_SHARE * held.len() as f64).then(|| {
        Warning::new(
            Code::TiedJudgeScores,
            format!(
                "{best} of {} held-out anchors share the judge score {at}: their corrections come \
             from different folds' fits and differ only by that, so the corrected side's \
             spearman and kendall rank fold noise among them (a monotone correction keeps the \
             raw judge's order: read the raw side's ranks)",
                held.len()
            ),
        )
    })
}

/// The repeat noise the anchors' repeats measure, beside the one-score judge of `pairs`.
fn repeat_report(rows: &[HeldOutRow], pairs: &[(f64, f64)]) -> Option<RepeatReport> {
    let all: Vec<Vec<f64>> = rows
        .iter()
        .filter(|r| !r.repeats.is_empty())
        .map(|r| {
            std::iter::once(r.judge_score)
                .chain(r.repeats.iter().copied())
                .collect()
        })
        .collect();
    let measured = WithinItem::of(all.iter().map(Vec::as_slice)).estimate(LEVEL)?;
    let judge = OneScore::of(pairs)?;
    Some(Repeats::new(measured.variance, judge).report(&measured))
}

/// Judge-score bins where the judge's scale is not discrete.
pub const BINS: usize = 10;

/// Each slice's mean with its Student-t interval. A slice whose own variance is below the
/// variance pooled within all `slices` has it raised by one pseudo-value at the pooled one (and
/// its degrees of freedom by one): a slice of a few anchors on a discrete scale can show no
/// spread at all by chance, and its own variance alone covered 80% where one level held six
/// anchors. A slice noisier than the rest keeps its own (shrinking it down covered a rare
/// noisy system 93.0%). Simulated in the tests. No interval for a slice of one.
fn slice_means(slices: &[Vec<f64>]) -> Vec<Option<Figure>> {
    let (ss, dof) = slices
        .iter()
        .filter(|s| s.len() >= 2)
        .fold((0.0, 0.0), |(ss, dof), s| {
            let m = mean(s);
            (
                ss + s.iter().map(|v| (v - m).powi(2)).sum::<f64>(),
                dof + (s.len() - 1) as f64,
            )
        });
    let pooled = if dof > 0.0 { ss / dof } else { 0.0 };
    slices
        .iter()
        .map(|s| {
            if s.is_empty() {
                return None;
            }
            let value = mean(s);
            let n = s.len() as f64;
            let interval = (s.len() >= 2).then(|| {
                let own = sample_variance(s);
                let shrunk = (own * (n - 1.0) + pooled) / n;
                let (variance, dof) = if own >= shrunk {
                    (own, n - 1.0)
                } else {
                    (shrunk, n)
                };
                let half = t_quantile(0.5 + LEVEL / 2.0, dof) * (variance / n).sqrt();
                [value - half, value + half]
            });
            Some(Figure { value, interval })
        })
        .collect()
}

/// The bias of each slice of anchors.
fn biases(slices: &[Vec<&HeldOutRow>]) -> Vec<Bias> {
    let raw: Vec<Vec<f64>> = slices
        .iter()
        .map(|s| {
            s.iter()
                .map(|r| r.judge_score - r.reference_score)
                .collect()
        })
        .collect();
    let corrected: Vec<Vec<f64>> = slices
        .iter()
        .map(|s| {
            s.iter()
                .filter_map(|r| r.corrected.map(|c| c - r.reference_score))
                .collect()
        })
        .collect();
    slices
        .iter()
        .zip(slice_means(&raw))
        .zip(slice_means(&corrected))
        .map(|((s, raw), corrected)| Bias {
            n: s.len(),
            raw,
            corrected,
        })
        .collect()
}

fn agreement(x: &[f64], y: &[f64], levels: Option<&[f64]>) -> Agreement {
    let c = correlations(x, y);
    Agreement {
        n: x.len(),
        pearson: c.map(|c| c.pearson),
        spearman: c.map(|c| c.spearman),
        kendall: c.map(|c| c.kendall),
        kappa: levels
            .and_then(|l| on_grid(x, l))
            .and_then(|g| kappas(&g, y)),
    }
}

/// The judge's levels, or bins of about `len / BINS` anchors that never split a level: the
/// rows (sorted by judge score) in consecutive runs.
fn level_runs<'a>(rows: &[&'a HeldOutRow]) -> Vec<Vec<&'a HeldOutRow>> {
    let mut sorted = rows.to_vec();
    sorted.sort_by(|a, b| a.judge_score.total_cmp(&b.judge_score));
    let judge: Vec<f64> = sorted.iter().map(|r| r.judge_score).collect();
    let by_level = distinct(&judge).len() <= MAX_LEVELS;
    let target = sorted.len().div_ceil(BINS).max(1);
    let mut runs: Vec<Vec<&HeldOutRow>> = Vec::new();
    for r in sorted {
        let start = match runs.last() {
            None => true,
            Some(run) => {
                let last = run[run.len() - 1].judge_score;
                last != r.judge_score && (by_level || run.len() >= target)
            }
        };
        if start {
            runs.push(Vec::new());
        }
        if let Some(run) = runs.last_mut() {
            run.push(r);
        }
    }
    runs
}

impl AgreementReport {
    /// The report of a version's anchors `rows`, with its `top` largest disagreements.
    pub fn of(rows: &[HeldOutRow], top: usize) -> Self {
        let all: Vec<&HeldOutRow> = rows.iter().collect();
        let judge: Vec<f64> = rows.iter().map(|r| r.judge_score).collect();
        let reference: Vec<f64> = rows.iter().map(|r| r.reference_score).collect();
        let levels = Some(distinct(&reference)).filter(|l| (2..=MAX_LEVELS).contains(&l.len()));
        let (corrected, held_reference): (Vec<f64>, Vec<f64>) = rows
            .iter()
            .filter_map(|r| r.corrected.map(|c| (c, r.reference_score)))
            .unzip();
        let runs = level_runs(&all);
        let by_level = runs
            .iter()
            .zip(biases(&runs))
            .map(|(run, bias)| LevelBias {
                from: run[0].judge_score,
                to: run[run.len() - 1].judge_score,
                bias,
            })
            .collect();
        let mut groups: std::collections::BTreeMap<&str, Vec<&HeldOutRow>> = Default::default();
        for r in rows {
            if let Some(g) = &r.group {
                groups.entry(g.as_str()).or_default().push(r);
            }
        }
        let slices: Vec<Vec<&HeldOutRow>> = groups.values().cloned().collect();
        let by_group = groups
            .keys()
            .zip(biases(&slices))
            .map(|(g, bias)| SystemBias {
                group: (*g).to_string(),
                bias,
            })
            .collect();
        let mut disagreements: Vec<Disagreement> = rows
            .iter()
            .filter_map(|r| {
                let c = r.corrected?;
                Some(Disagreement {
                    item_id: r.item_id.clone(),
                    group: r.group.clone(),
                    judge_score: r.judge_score,
                    reference_score: r.reference_score,
                    corrected: c,
                    error: r.reference_score - c,
                    band: r.band,
                    outside: r
                        .band
                        .map(|[lo, hi]| !(lo..=hi).contains(&r.reference_score)),
                })
            })
            .filter(|d| d.error.is_finite())
            .collect();
        // Largest first; ties by item, so the order is the same on every call.
        disagreements.sort_by(|a, b| {
            b.error
                .abs()
                .total_cmp(&a.error.abs())
                .then_with(|| a.item_id.cmp(&b.item_id))
        });
        disagreements.truncate(top);
        let raw = agreement(&judge, &reference, levels.as_deref());
        let mut warnings: Vec<Warning> = tie_warning(rows).into_iter().collect();
        if let (Some(l), None) = (&levels, &raw.kappa) {
            warnings.push(Warning::new(
                Code::NoRawKappa,
                format!(
                    "no raw kappa: the judge's scores reach beyond the reference's levels ({} to {}) by more than half a step, so they are read as another scale",
                    l[0],
                    l[l.len() - 1]
                ),
            ));
        }
        let pairs: Vec<(f64, f64)> = judge
            .iter()
            .copied()
            .zip(reference.iter().copied())
            .collect();
        let repeats = repeat_report(rows, &pairs);
        Self {
            repeats,
            n: rows.len(),
            held_out: corrected.len(),
            raw,
            corrected: agreement(&corrected, &held_reference, levels.as_deref()),
            levels,
            bias: biases(std::slice::from_ref(&all))[0],
            by_level,
            by_group,
            disagreements,
            warnings,
        }
    }

    /// The report of the anchors of one group only (`None` where it names none).
    pub fn of_group(rows: &[HeldOutRow], group: &str, top: usize) -> Option<Self> {
        let rows: Vec<HeldOutRow> = rows
            .iter()
            .filter(|r| r.group.as_deref() == Some(group))
            .cloned()
            .collect();
        (!rows.is_empty()).then(|| Self::of(&rows, top))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::rng::{Rng, RngExt, SeedableRng};
    use crate::stats::standard_normal;

    fn row(
        id: &str,
        group: &str,
        judge: f64,
        reference: f64,
        corrected: Option<f64>,
    ) -> HeldOutRow {
        HeldOutRow {
            item_id: id.to_string(),
            group: Some(group.to_string()),
            judge_score: judge,
            reference_score: reference,
            corrected,
            band: corrected.map(|c| [c - 1.0, c + 1.0]),
            repeats: Vec::new(),
        }
    }

    #[test]
    fn a_small_report_has_its_hand_computed_slices_and_ranking() {
        // Judge levels 1, 2, 3; references 1–3; corrected held out for all but one.
        let rows = vec![
            row("a", "x", 1.0, 1.0, Some(1.2)),
            row("b", "x", 1.0, 2.0, Some(1.2)),
            row("c", "y", 2.0, 2.0, Some(2.1)),
            row("d", "y", 3.0, 1.0, Some(2.9)),
            row("e", "y", 3.0, 3.0, None),
        ];
        let r = AgreementReport::of(&rows, 2);
        assert_eq!((r.n, r.held_out), (5, 4));
        assert_eq!(r.levels.as_deref(), Some(&[1.0, 2.0, 3.0][..]));
        // Levels: 1 (a, b), 2 (c), 3 (d, e). Raw differences 0, −1 | 0 | 2, 0: squares
        // about the slices' means 0.5 and 2 on one degree of freedom each, pooled 1.25. Raw
        // bias at 1: mean −0.5, half-width t(0.975, 2)·√((0.5 + 1.25)/2²) = 4.3027·0.6614.
        let one = r.by_level[0];
        assert_eq!((one.from, one.to, one.bias.n), (1.0, 1.0, 2));
        let raw = one.bias.raw.expect("two anchors");
        assert!((raw.value + 0.5).abs() < 1e-12);
        let [lo, hi] = raw.interval.expect("two anchors");
        assert!(
            (hi - lo - 2.0 * 4.3027 * 1.75f64.sqrt() / 2.0).abs() < 1e-3,
            "{lo} {hi}"
        );
        // Level 3's corrected bias is over its one held-out anchor: 1.9, no interval.
        let three = r.by_level[2].bias.corrected.expect("d is held out");
        assert!((three.value - 1.9).abs() < 1e-12 && three.interval.is_none());
        // Groups x (a, b) and y (c, d, e); y's raw bias mean(0, 2, 0) = 2/3.
        assert_eq!(r.by_group.len(), 2);
        let y = r.by_group[1].bias.raw.expect("three anchors").value;
        assert!((y - 2.0 / 3.0).abs() < 1e-12);
        // Ranked: d misses by −1.9 (outside its band), then b by 0.8 (inside).
        let ids: Vec<&str> = r.disagreements.iter().map(|d| d.item_id.as_str()).collect();
        assert_eq!(ids, ["d", "b"]);
        assert_eq!(r.disagreements[0].outside, Some(true));
        assert_eq!(r.disagreements[1].outside, Some(false));
        // Raw κ on the reference grid; corrected κ with corrected scores at their nearest
        // level: 1.2 → 1, 2.1 → 2, 2.9 → 3.
        let k = r.corrected.kappa.expect("a discrete reference");
        assert_eq!(
            k.confusion,
            vec![vec![1, 1, 0], vec![0, 1, 0], vec![1, 0, 0]]
        );
        // A judge on another scale (0–100) gets correlations but no κ.
        let wide: Vec<HeldOutRow> = rows
            .iter()
            .map(|r| HeldOutRow {
                judge_score: r.judge_score * 30.0,
                ..r.clone()
            })
            .collect();
        let w = AgreementReport::of(&wide, 0);
        assert!(w.raw.kappa.is_none() && w.raw.pearson.is_some());
        assert!(
            w.warnings.iter().any(|m| m.code == Code::NoRawKappa),
            "{:?}",
            w.warnings
        );
        assert!(w.disagreements.is_empty());
        assert_eq!(
            AgreementReport::of_group(&rows, "x", 5).map(|r| r.n),
            Some(2)
        );
        // Two of the four held-out anchors share judge score 1 (and two 3): a warning.
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert_eq!(r.warnings[0].code, Code::TiedJudgeScores);
        assert!(
            r.warnings[0]
                .message
                .starts_with("2 of 4 held-out anchors share the judge score 1")
        );
        assert!(AgreementReport::of_group(&rows, "z", 5).is_none());
    }

    #[test]
    fn a_continuous_judge_is_cut_into_bins_that_never_split_a_score() {
        let rows: Vec<HeldOutRow> = (0..95)
            .map(|i| {
                let j = f64::from(i / 2) * 0.1;
                row(&format!("{i}"), "x", j, j, Some(j))
            })
            .collect();
        let r = AgreementReport::of(&rows, 0);
        assert!(r.by_level.len() <= BINS && r.by_level.len() >= BINS - 1);
        assert_eq!(r.by_level.iter().map(|l| l.bias.n).sum::<usize>(), 95);
        // Ties of two in 95: no warning about the corrected ranks.
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        for w in r.by_level.windows(2) {
            assert!(w[0].to < w[1].from, "{:?} then {:?}", w[0], w[1]);
        }
    }

    /// A skewed five-level judge (most items at 4 and 5), a reference on the same scale that
    /// the judge over-scores by a level-dependent amount, and a fixed correction. Systems: "a"
    /// (a third), "b", and a rare noisy one, "c" (one in twenty, twice the noise, shifted).
    fn draw(rng: &mut Rng, n: usize) -> Vec<HeldOutRow> {
        let weights = [0.04, 0.08, 0.18, 0.35, 0.35];
        (0..n)
            .map(|i| {
                let u: f64 = rng.random();
                let mut level = 0;
                let mut acc = weights[0];
                while u > acc && level < 4 {
                    level += 1;
                    acc += weights[level];
                }
                let judge = (level + 1) as f64;
                let rare = rng.random::<f64>() < 0.05;
                let (group, noise, shift) = match (rare, i % 3) {
                    (true, _) => ("c", 1.6, 0.3),
                    (false, 0) => ("a", 0.8, 0.0),
                    _ => ("b", 0.8, 0.0),
                };
                let truth = 1.0 + 0.6 * (judge - 1.0) + shift + noise * standard_normal(rng);
                let reference = truth.round().clamp(1.0, 5.0);
                let corrected = 1.0 + 0.6 * (judge - 1.0);
                row(&format!("{i}"), group, judge, reference, Some(corrected))
            })
            .collect()
    }

    /// Each slice's bias by its name (the level, or the group).
    fn slices(r: &AgreementReport) -> BTreeMap<String, Bias> {
        r.by_level
            .iter()
            .map(|l| (format!("level {}", l.from), l.bias))
            .chain(
                r.by_group
                    .iter()
                    .map(|g| (format!("group {}", g.group), g.bias)),
            )
            .collect()
    }

    #[test]
    fn the_bias_intervals_cover_by_level_and_by_group() {
        // Known truth from one draw of 400,000: each level's and group's mean bias, raw and
        // corrected. 400 samples of 150: the lowest level holds about 6 anchors and system
        // "c" about 7, their differences take a few values. Each interval must cover 93–97%
        // of the samples that give one.
        let mut rng = Rng::seed_from_u64(5801);
        let truth = slices(&AgreementReport::of(&draw(&mut rng, 400_000), 0));
        assert_eq!(truth.len(), 8);
        let reps = 1000;
        let mut counts: BTreeMap<(String, usize), (usize, usize)> = BTreeMap::new();
        for _ in 0..reps {
            let r = AgreementReport::of(&draw(&mut rng, 150), 0);
            for (name, b) in slices(&r) {
                let t = truth[&name];
                for (side, (f, t)) in [(b.raw, t.raw), (b.corrected, t.corrected)]
                    .into_iter()
                    .enumerate()
                {
                    let (Some(f), Some(t)) = (f, t) else { continue };
                    if let Some([lo, hi]) = f.interval {
                        let c = counts.entry((name.clone(), side)).or_default();
                        c.0 += usize::from(lo <= t.value && t.value <= hi);
                        c.1 += 1;
                    }
                }
            }
        }
        let mut failed = Vec::new();
        for ((name, side), (covered, n)) in &counts {
            let rate = *covered as f64 / *n as f64;
            eprintln!("{name} side {side}: covers {:.1}% of {n}", 100.0 * rate);
            if !(0.93..=0.97).contains(&rate) || *n < reps * 9 / 10 {
                failed.push((name.clone(), side, rate, n));
            }
        }
        assert_eq!(counts.len(), 16);
        assert!(failed.is_empty(), "{failed:?}");
    }
}
