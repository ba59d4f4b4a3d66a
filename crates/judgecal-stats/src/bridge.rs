//! A bridge between two judge versions: on items both versions scored, how far the new
//! version's scores moved, and whether the old version's calibration still serves them.
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-stats/src/bridge.rs".

use serde::{Deserialize, Serialize};

use crate::warning::{Code, Warning};

use super::quality::{level_spacing, pearson};
use super::stats::{average_ranks, least_squares, mean, sample_variance, t_quantile};

/// The default tolerance as a share of the rubric's scale width: 0.1 on a 1–5 scale.
pub const TOLERANCE_SHARE: f64 = 0.025;
/// One-sided error rate of each of the two tests (the interval's level is 1 − 2α).
pub const ALPHA: f64 = 0.05;
/// Groups with fewer shared items are reported but not tested.
pub const MIN_GROUP_ITEMS: usize = 10;
/// Fewer shared items than this and the spread of d is not trusted: planning uses
/// [`PLANNING_CORRELATION`].
pub const MIN_ITEMS: usize = 10;
/// Before enough items are re-scored, the plan assumes the two versions' corrected scores
/// correlate this well and nothing moved.
pub const PLANNING_CORRELATION: f64 = 0.9;

/// What a bridge decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The corrected mean moved by less than the tolerance: the old calibration still serves.
    CarryOver,
    /// It moved by more: train on the re-scored anchors.
    Refit,
    /// Undecided: re-score more items.
    MoreItems,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::CarryOver => "carry_over",
            Verdict::Refit => "refit",
            Verdict::MoreItems => "more_items",
        }
    }
}

/// What a `refit` bridge advises: the re-scores are anchors of the new version.
const REFIT_ADVICE: &str = "train on the re-scored anchors";
/// What a `refit` check advises: a check stores nothing.
const CHECK_REFIT_ADVICE: &str = "the judge changed behind its label: upload these re-scores as anchors under a new \
     judge_version (POST /v1/anchors with \"judge_version\", no reference_score), then train on them; a check \
     stores nothing";

/// What a `refit` bridge of a pairwise cell advises.
const PAIRWISE_REFIT_ADVICE: &str = "train on the re-judged comparisons";
/// What a `refit` check of a pairwise cell advises.
const PAIRWISE_CHECK_REFIT_ADVICE: &str = "the judge changed behind its label: upload these verdicts as comparisons \
     under a new judge_version (POST /v1/comparisons with \"judge_version\", no preference), then train on them; a \
     check stores nothing";

/// A mean shift with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = BridgeShift)]
pub struct Shift {
    pub mean: f64,
    /// The (1 − 2α) interval: both one-sided tests at α.
    pub lo: f64,
    pub hi: f64,
    pub se: f64,
}

/// How the raw scores moved.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RawShift {
    /// Mean of new − old.
    pub mean: f64,
    /// Standard deviation of new − old. Under the same version label this is the judge's
    /// repeat noise times √2.
    pub sd: f64,
    /// Slope of the new scores on the old (least squares; attenuated by repeat noise).
    pub slope: Option<f64>,
    /// Spearman's rank correlation of new and old.
    pub rank_correlation: f64,
}

/// One part's corrected shift: a group's, or a band's of the score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GroupShift {
    /// The group, or the band (`low`, `middle`, `high`: thirds of the items by the rank of
    /// their mean of their two raw scores).
    pub group: String,
    pub items: usize,
    pub shift: Shift,
    /// Whether its interval (Bonferroni-adjusted over the mean and the tested parts) lies wholly outside
    /// ±tolerance; `None` for a group with too few items to test.
    pub moved: Option<bool>,
}

/// A bridge's answer (a check stores it, and reads it back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Bridge {
    pub items: usize,
    pub tolerance: f64,
    pub raw: Option<RawShift>,
    /// The shift of the corrected mean (old calibration on new scores minus on old).
    pub corrected: Option<Shift>,
    /// Per score band (with at least 30 shared items).
    pub bands: Vec<GroupShift>,
    /// Per group, where the items name two or more.
    pub groups: Vec<GroupShift>,
    pub verdict: Verdict,
    /// With `more_items`: about how many more shared items would decide it (None where the
    /// shift sits at the tolerance, which no number of items decides).
    pub more_items: Option<usize>,
    /// Why, in words.
    pub reason: String,
    /// The new scores reverse the old order ([`reverses`]): `refit`, whatever the mean did.
    #[serde(default)]
    pub reversed: bool,
}

/// What a silent-change check found, as `judgecal_judge_changed` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// `carry_over`, or undecided with the corrected mean's shift inside the tolerance: 0.
    Unchanged,
    /// `refit`: 1.
    Changed,
    /// Undecided with the corrected mean's shift beyond the tolerance (a likely change that
    /// needs more re-scored items to show): 2.
    Undecided,
}

impl Finding {
    pub fn gauge(self) -> i64 {
        match self {
            Finding::Unchanged => 0,
            Finding::Changed => 1,
            Finding::Undecided => 2,
        }
    }

    /// The finding a gauge value (as stored) reads as; an unknown value as unchanged.
    pub fn of_gauge(v: i64) -> Self {
        match v {
            1 => Finding::Changed,
            2 => Finding::Undecided,
            _ => Finding::Unchanged,
        }
    }
}

impl Bridge {
    /// What a reader of the bridge must know beside its verdict.
    pub fn warnings(&self) -> Vec<Warning> {
        let Some(raw) = self.raw.filter(|_| self.reversed) else {
            return Vec::new();
        };
        vec![Warning::new(
            Code::JudgeReversed,
            format!(
                "the new scores reverse the old order (rank correlation {:+.3} on {} items): a mirrored or inverted \
                 judge (a scale read backwards, a↔b swapped) is a change whatever its mean does; the old calibration \
                 would correct these scores backwards",
                raw.rank_correlation, self.items
            ),
        )]
    }

    /// What the bridge says of a silent change.
    pub fn finding(&self) -> Finding {
        match (self.verdict, self.corrected) {
            (Verdict::Refit, _) => Finding::Changed,
            (Verdict::MoreItems, Some(c)) if c.mean.abs() > self.tolerance => Finding::Undecided,
            _ => Finding::Unchanged,
        }
    }

    /// The same answer worded for a silent-change check, which stores nothing.
    pub fn for_check(mut self) -> Self {
        self.reason = self.reason.replace(REFIT_ADVICE, CHECK_REFIT_ADVICE);
        self
    }

    /// The same answer for a pairwise cell's verdicts (a check's where `check`): its advice
    /// names comparisons, not anchors.
    pub fn for_comparisons(mut self, check: bool) -> Self {
        let advice = if check {
            PAIRWISE_CHECK_REFIT_ADVICE
        } else {
            PAIRWISE_REFIT_ADVICE
        };
        self.reason = self.reason.replace(REFIT_ADVICE, advice);
        self
    }
}

/// One shared item: its old and new raw scores, both corrected by the old calibration, and
/// its group.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub old: f64,
    pub new: f64,
    pub old_corrected: f64,
    pub new_corrected: f64,
    pub group: Option<String>,
}

/// The variance of d, floored at its value with two more items one corrected level `h` either
/// side of the mean, (Σ(d − d̄)² + 2h²)/(n + 1), as Agresti and Coull add pseudo-counts and the
/// labelled path floors S²: identical or tied re-scores then give a narrow interval, never one
/// of width 0 that a handful of items would turn into a verdict, and a change to a few items
/// of a deterministic judge (a rare, skewed d) is not read as no spread.
fn floored_variance(d: &[f64], h: f64) -> f64 {
    let n = d.len() as f64;
    let m = mean(d);
    let squares: f64 = d.iter().map(|x| (x - m) * (x - m)).sum();
    sample_variance(d).max((squares + 2.0 * h * h) / (n + 1.0))
}

fn shift(d: &[f64], alpha: f64, h: f64) -> Shift {
    let n = d.len();
    let m = mean(d);
    let se = (floored_variance(d, h) / n as f64).sqrt();
    let t = t_quantile(1.0 - alpha, (n as f64 - 1.0).max(1.0));
    Shift {
        mean: m,
        lo: m - t * se,
        hi: m + t * se,
        se,
    }
}

/// Each part's mean shift, its (floored) spread, and whether it has the items to be tested and
/// its (1 − 2α) interval lies inside ±`tolerance`.
fn equivalence(parts: &[(String, Vec<f64>)], tolerance: f64, h: f64) -> Vec<(f64, f64, bool)> {
    parts
        .iter()
        .map(|(_, v)| {
            let s = shift(v, ALPHA, h);
            (
                s.mean,
                floored_variance(v, h).sqrt(),
                v.len() >= MIN_GROUP_ITEMS && s.lo > -tolerance && s.hi < tolerance,
            )
        })
        .collect()
}

/// Items needed for a (1 − 2α) interval of a mean `m` with spread `sd` to clear ±`tolerance`;
/// `None` where `m` sits on the boundary.
pub fn items_to_decide(m: f64, sd: f64, tolerance: f64) -> Option<usize> {
    let room = (tolerance - m.abs()).abs();
    if room < 1e-12 * tolerance.max(1e-12) {
        return None;
    }
    let z = super::stats::normal_quantile(1.0 - ALPHA);
    // The t quantile at small n is larger than z: two items more covers it for n ≥ 10.
    Some(((z * sd / room).powi(2)).ceil() as usize + 2)
}

/// The shared items a bridge needs before any are re-scored: `sd_corrected` is the spread of
/// the old calibration's corrected anchor scores; the plan assumes the new version's correlate
/// [`PLANNING_CORRELATION`] with them and nothing moved. A `carry_over` needs each band of the
/// score (a third of the items) to show it: three times one band's count.
pub fn planned_items(sd_corrected: f64, tolerance: f64) -> Option<usize> {
    let sd = sd_corrected * (2.0 * (1.0 - PLANNING_CORRELATION)).sqrt();
    items_to_decide(0.0, sd, tolerance).map(|n| 3 * n.max(MIN_GROUP_ITEMS))
}

/// Whether re-scores reverse the old order: Spearman's ρ of old and new scores lies below 0
/// by its one-sided (1 − α/2) bound, on the Fisher z scale with the Bonett–Wright variance
/// (1 + ρ²/2)/(n − 3), on at least [`MIN_ITEMS`] items. The same judge re-scoring items
/// correlates with itself (its repeat reliability), and a new version with the old one; a
/// mirror (6 − score) keeps the mean and the bands by the mean of the two scores, so only
/// the order shows it. Where the true ρ is 0 (a judge of pure noise both times) it fires at
/// most α/2; where it is positive, less.
pub fn reverses(rho: f64, n: usize) -> bool {
    if n < MIN_ITEMS || !rho.is_finite() {
        return false;
    }
    let z = rho.clamp(-1.0 + 1e-12, 1.0 - 1e-12).atanh();
    let se = ((1.0 + rho * rho / 2.0) / (n as f64 - 3.0)).sqrt();
    z + super::stats::normal_quantile(1.0 - ALPHA / 2.0) * se < 0.0
}

/// The bridge over `pairs` at `tolerance` (reference units).
pub fn bridge(pairs: &[Pair], tolerance: f64) -> Bridge {
    let n = pairs.len();
    if n < 2 {
        return Bridge {
            items: n,
            tolerance,
            raw: None,
            corrected: None,
            bands: Vec::new(),
            groups: Vec::new(),
            verdict: Verdict::MoreItems,
            more_items: Some(MIN_ITEMS - n),
            reason: format!(
                "{n} shared item{}: a bridge needs both versions' scores of at least 2 items (better {MIN_ITEMS})",
                if n == 1 { "" } else { "s" }
            ),
            reversed: false,
        };
    }
    let d: Vec<f64> = pairs
        .iter()
        .map(|p| p.new_corrected - p.old_corrected)
        .collect();
    // The corrected scores' level spacing (the tolerance where every item corrects to one
    // value): the floor's step.
    let h = Some(level_spacing(
        &pairs
            .iter()
            .flat_map(|p| [p.old_corrected, p.new_corrected])
            .collect::<Vec<_>>(),
    ))
    .filter(|h| *h > 0.0)
    .unwrap_or(tolerance);
    let raw = raw_shift(pairs);
    let parts = Parts::of(pairs, &d);
    let evidence = Evidence {
        n,
        tolerance,
        h,
        corrected: shift(&d, ALPHA, h),
        reversed: reverses(raw.rank_correlation, n),
        bands: parts.shifts(&parts.bands, h, tolerance),
        groups: parts.shifts(&parts.groups, h, tolerance),
        d,
        raw,
        parts,
    };
    let (verdict, more_items, reason) = evidence.verdict();
    Bridge {
        items: n,
        tolerance,
        verdict,
        more_items,
        reason,
        reversed: evidence.reversed,
        raw: Some(evidence.raw),
        corrected: Some(evidence.corrected),
        bands: evidence.bands,
        groups: evidence.groups,
    }
}

/// How the raw scores moved between the versions.
fn raw_shift(pairs: &[Pair]) -> RawShift {
    let old: Vec<f64> = pairs.iter().map(|p| p.old).collect();
    let new: Vec<f64> = pairs.iter().map(|p| p.new).collect();
    let raw_d: Vec<f64> = pairs.iter().map(|p| p.new - p.old).collect();
    RawShift {
        mean: mean(&raw_d),
        sd: sample_variance(&raw_d).sqrt(),
        slope: least_squares(
            &old.iter()
                .copied()
                .zip(new.iter().copied())
                .collect::<Vec<_>>(),
        )
        .map(|(_, b)| b),
        rank_correlation: pearson(&average_ranks(&old), &average_ranks(&new)),
    }
}

/// The parts a bridge tests besides the mean: the score's bands and, where the items name two
/// or more, their groups (systems); each a name and its items' corrected differences.
struct Parts {
    bands: Vec<(String, Vec<f64>)>,
    groups: Vec<(String, Vec<f64>)>,
    grouped: bool,
}

impl Parts {
    /// Thirds by rank of the level (ties in item order), so that a coarse scale with many
    /// ties still gives three bands of n/3.
    fn of(pairs: &[Pair], d: &[f64]) -> Self {
        let n = pairs.len();
        let level: Vec<f64> = pairs.iter().map(|p| (p.old + p.new) / 2.0).collect();
        let mut band_of: Vec<Option<&'static str>> = vec![None; n];
        if n >= 3 * MIN_GROUP_ITEMS {
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| level[a].total_cmp(&level[b]));
            for (rank, &i) in order.iter().enumerate() {
                band_of[i] = Some(["low", "middle", "high"][(3 * rank / n).min(2)]);
            }
        }
        let mut names: Vec<&String> = pairs.iter().filter_map(|p| p.group.as_ref()).collect();
        names.sort();
        names.dedup();
        let grouped = names.len() >= 2;
        let part = |keep: &dyn Fn(usize) -> bool| -> Vec<f64> {
            (0..n).filter(|&i| keep(i)).map(|i| d[i]).collect()
        };
        let bands = ["low", "middle", "high"]
            .iter()
            .map(|b| (b.to_string(), part(&|i| band_of[i] == Some(*b))))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let groups = if grouped {
            names
                .iter()
                .map(|g| {
                    (
                        g.to_string(),
                        part(&|i| pairs[i].group.as_ref() == Some(*g)),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            bands,
            groups,
            grouped,
        }
    }

    /// The parts with enough items to test.
    fn tested(&self) -> usize {
        self.bands
            .iter()
            .chain(&self.groups)
            .filter(|(_, v)| v.len() >= MIN_GROUP_ITEMS)
            .count()
    }

    /// Each part's shift, tested at α / (2·parts tested), the mean's refit test taking the
    /// other half of α, so that the family of one-sided claims "the mean or this part moved"
    /// errs at most α when none did.
    fn shifts(&self, parts: &[(String, Vec<f64>)], h: f64, tolerance: f64) -> Vec<GroupShift> {
        let tested = self.tested();
        parts
            .iter()
            .map(|(name, v)| {
                let testable = v.len() >= MIN_GROUP_ITEMS;
                let s = shift(v, ALPHA / (2 * tested.max(1)) as f64, h);
                GroupShift {
                    group: name.clone(),
                    items: v.len(),
                    shift: s,
                    moved: testable.then_some(s.lo > tolerance || s.hi < -tolerance),
                }
            })
            .collect()
    }
}

/// What a bridge's verdict rests on.
struct Evidence {
    n: usize,
    tolerance: f64,
    /// The floor's step.
    h: f64,
    /// Each shared item's corrected new − old.
    d: Vec<f64>,
    corrected: Shift,
    raw: RawShift,
    reversed: bool,
    parts: Parts,
    bands: Vec<GroupShift>,
    groups: Vec<GroupShift>,
}

impl Evidence {
    /// The verdict, the shared items it still needs, and why.
    fn verdict(&self) -> (Verdict, Option<usize>, String) {
        let (n, tolerance, corrected) = (self.n, self.tolerance, &self.corrected);
        let moved_groups: Vec<String> = self
            .bands
            .iter()
            .filter(|g| g.moved == Some(true))
            .map(|g| format!("the {} band", g.group))
            .chain(
                self.groups
                    .iter()
                    .filter(|g| g.moved == Some(true))
                    .map(|g| format!("group {}", g.group)),
            )
            .collect();
        // carry_over claims every band is within the tolerance: an intersection-union test,
        // each band's two one-sided tests at α (no adjustment needed), beside the mean's own.
        // And every system's, where the items name them: a change confined to one system
        // moves that system's runs though the mean hardly moves. A part with too few items to
        // test is not claimed: `carry_over` then waits for more of its items.
        let band_spread = equivalence(&self.parts.bands, tolerance, self.h);
        let groups_spread = equivalence(&self.parts.groups, tolerance, self.h);
        let bands_equivalent = self.parts.bands.len() == 3 && band_spread.iter().all(|b| b.2);
        let groups_equivalent = groups_spread.iter().all(|g| g.2);
        let inside = corrected.lo > -tolerance && corrected.hi < tolerance;
        // `refit` claims the mean or one part moved: α is split, half to the mean's test and
        // half to the parts' Bonferroni family (α / (2·parts) each), so that the claim errs at
        // most α where nothing moved beyond the tolerance (the mean alone at α where no part
        // is tested).
        let alpha = if self.parts.tested() > 0 {
            ALPHA / 2.0
        } else {
            ALPHA
        };
        let family = shift(&self.d, alpha, self.h);
        let outside = family.lo > tolerance || family.hi < -tolerance;
        let interval = format!(
            "the corrected mean moved {:+.4} (90% interval {:+.4} to {:+.4}) on {n} shared items",
            corrected.mean, corrected.lo, corrected.hi
        );
        let grouped = self.parts.grouped;
        if self.reversed {
            (Verdict::Refit, None, self.reversal(&interval))
        } else if outside {
            let reason = format!("{interval}, wholly outside ±{tolerance}: {REFIT_ADVICE}");
            (Verdict::Refit, None, reason)
        } else if !moved_groups.is_empty() {
            let reason = format!(
                "{interval}, but {} moved beyond ±{tolerance}: {REFIT_ADVICE}",
                moved_groups.join(" and ")
            );
            (Verdict::Refit, None, reason)
        } else if inside && bands_equivalent && groups_equivalent {
            let reason = format!(
                "{interval}, inside ±{tolerance}, and so is each band of the score{}: the old calibration still serves",
                if grouped { " and each system's" } else { "" }
            );
            (Verdict::CarryOver, None, reason)
        } else {
            let more = self.more_items(inside, &band_spread, &groups_spread);
            let reason = format!(
                "{interval}, {}: {}",
                if inside {
                    format!(
                        "inside ±{tolerance}, but not yet shown for each band of the score{}",
                        if grouped { " and each system" } else { "" }
                    )
                } else {
                    format!("which straddles ±{tolerance}")
                },
                match more {
                    Some(k) => format!("about {k} more shared items would decide it"),
                    None => "the shift sits at the tolerance; choose another tolerance".into(),
                }
            );
            (Verdict::MoreItems, more, reason)
        }
    }

    /// Why a reversed order calls for a refit, whatever the corrected mean did.
    fn reversal(&self, interval: &str) -> String {
        let (raw, n) = (&self.raw, self.n);
        format!(
            "the new scores reverse the old order (rank correlation {:+.3}, slope {}) on {n} shared items: \
             the judge was mirrored or inverted, not shifted, which the corrected mean cannot show \
             ({interval}): {REFIT_ADVICE}",
            raw.rank_correlation,
            raw.slope
                .map_or("undefined".to_owned(), |b| format!("{b:+.3}"))
        )
    }

    /// The shared items more that would decide an undecided bridge: the mean's count and,
    /// where it sits inside, every part's.
    fn more_items(
        &self,
        inside: bool,
        band_spread: &[(f64, f64, bool)],
        groups_spread: &[(f64, f64, bool)],
    ) -> Option<usize> {
        let tolerance = self.tolerance;
        let systems = self.parts.groups.len().max(1);
        let sd = floored_variance(&self.d, self.h).sqrt();
        // Each band holds a third of the items: it needs its own count three times over.
        let for_bands = band_spread
            .iter()
            .map(|&(m, sd, _)| items_to_decide(m, sd, tolerance).map(|k| 3 * k))
            .chain(groups_spread.iter().map(|&(m, sd, _)| {
                items_to_decide(m, sd, tolerance).map(|k| systems * k.max(MIN_GROUP_ITEMS))
            }))
            .try_fold(3 * MIN_GROUP_ITEMS, |most, k| k.map(|k| most.max(k)));
        items_to_decide(self.corrected.mean, sd, tolerance)
            .zip(if inside { for_bands } else { Some(0) })
            .map(|(total, bands)| {
                total
                    .max(bands)
                    .max(MIN_ITEMS)
                    .saturating_sub(self.n)
                    .max(1)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Rng, RngExt, SeedableRng};
    use crate::stats::standard_normal;

    /// Items scored twice, each scoring with its own repeat noise (new − old has sd `noise`).
    fn pairs(n: usize, shift: f64, noise: f64, rng: &mut Rng) -> Vec<Pair> {
        let each = noise / std::f64::consts::SQRT_2;
        (0..n)
            .map(|_| {
                let item = 3.0 + standard_normal(rng);
                let old = item + each * standard_normal(rng);
                let new = item + shift + each * standard_normal(rng);
                // The old calibration: a line with slope 0.8.
                Pair {
                    old,
                    new,
                    old_corrected: 0.5 + 0.8 * old,
                    new_corrected: 0.5 + 0.8 * new,
                    group: None,
                }
            })
            .collect()
    }

    /// A mirrored judge (every item re-scored 6 − score on a 1–5 integer scale, with repeat
    /// noise) keeps the mean and the bands by the mean of the two scores; its order shows it:
    /// `refit` in every one of 400 checks of 60 items. A judge of pure noise both times (true
    /// ρ = 0) is called reversed at most α/2 of the time, and an unchanged weak judge (repeat
    /// correlation about 0.3) all but never.
    #[test]
    fn a_mirrored_judge_is_a_change_and_noise_is_not() {
        let mut rng = Rng::seed_from_u64(83);
        let level = |x: f64| x.round().clamp(1.0, 5.0);
        let pair = |old: f64, new: f64| Pair {
            old,
            new,
            old_corrected: 0.5 + 0.8 * old,
            new_corrected: 0.5 + 0.8 * new,
            group: None,
        };
        let (reps, n) = (400, 60);
        let (mut mirrored, mut noise, mut weak) = (0, 0, 0);
        for _ in 0..reps {
            let (mut m, mut z, mut w) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..n {
                let x = 3.0 + standard_normal(&mut rng);
                let old = level(x + 0.5 * standard_normal(&mut rng));
                let new = level(x + 0.5 * standard_normal(&mut rng));
                m.push(pair(old, 6.0 - new));
                let (a, b) = (rng.random_range(1..=5), rng.random_range(1..=5));
                z.push(pair(f64::from(a), f64::from(b)));
                let y = 3.0 + 0.5 * standard_normal(&mut rng);
                let old = level(y + 0.8 * standard_normal(&mut rng));
                let new = level(y + 0.8 * standard_normal(&mut rng));
                w.push(pair(old, new));
            }
            let b = bridge(&m, 0.1);
            mirrored += usize::from(b.verdict == Verdict::Refit && b.reversed);
            noise += usize::from(bridge(&z, 0.1).reversed);
            weak += usize::from(bridge(&w, 0.1).reversed);
        }
        eprintln!(
            "reversed: mirrored {mirrored}/{reps}, pure noise {noise}/{reps}, weak judge {weak}/{reps}"
        );
        assert_eq!(mirrored, reps);
        assert!(
            noise <= reps / 20,
            "pure noise called reversed {noise}/{reps}"
        );
        assert!(
            weak <= 2,
            "an unchanged weak judge called reversed {weak}/{reps}"
        );
    }

    #[test]
    fn a_known_shift_is_measured_and_decided() {
        // New = old + 0.5 exactly: the corrected mean moves 0.8 · 0.5 = 0.4 with no spread.
        let exact: Vec<Pair> = (0..60)
            .map(|i| {
                let old = 1.0 + 0.06 * i as f64;
                Pair {
                    old,
                    new: old + 0.5,
                    old_corrected: 0.8 * old,
                    new_corrected: 0.8 * (old + 0.5),
                    group: None,
                }
            })
            .collect();
        let b = bridge(&exact, 0.1);
        let c = b.corrected.unwrap();
        // No spread: the floor's, two more items one corrected level either side, se =
        // √(2h²/(n + 1)/n). The two sides' grids interleave in gaps of 0.02 and 0.04 judge
        // points (0.06 beyond their overlap): the median gap is 0.04, h = 0.8 · 0.04.
        assert!((c.mean - 0.4).abs() < 1e-12, "{c:?}");
        let floor = (2.0 * 0.032f64.powi(2) / 61.0 / 60.0).sqrt();
        assert!((c.se - floor).abs() < 1e-12, "{c:?}");
        let raw = b.raw.unwrap();
        assert!((raw.mean - 0.5).abs() < 1e-12);
        assert!((raw.slope.unwrap() - 1.0).abs() < 1e-12);
        assert!((raw.rank_correlation - 1.0).abs() < 1e-12);
        assert_eq!(b.verdict, Verdict::Refit);
        assert_eq!(b.bands.len(), 3);
        assert!(
            b.bands
                .iter()
                .all(|band| band.items == 20 && band.moved == Some(true))
        );
        // Nothing moved, nothing spread: carry over (with too few items for the bands, not).
        let same: Vec<Pair> = exact
            .iter()
            .map(|p| Pair {
                new: p.old,
                new_corrected: p.old_corrected,
                ..p.clone()
            })
            .collect();
        assert_eq!(bridge(&same, 0.1).verdict, Verdict::CarryOver);
        assert_eq!(bridge(&same[..20], 0.1).verdict, Verdict::MoreItems);
        // Too few items to say anything.
        assert_eq!(bridge(&exact[..1], 0.1).verdict, Verdict::MoreItems);
    }

    /// The error rates the verdicts promise, counted: a shift exactly at the tolerance is
    /// called `carry_over` at most 5% of the time, and no shift is called `refit` far less;
    /// while no shift, with enough items, is called `carry_over` nearly always.
    #[test]
    fn verdicts_err_at_most_at_their_rate() {
        let mut rng = Rng::seed_from_u64(37);
        let reps = 2000;
        let tolerance = 0.1;
        let share = |verdict: Verdict, n: usize, shift: f64, rng: &mut Rng| {
            (0..reps)
                .filter(|_| bridge(&pairs(n, shift, 0.4, rng), tolerance).verdict == verdict)
                .count() as f64
                / reps as f64
        };
        // 0.8 · 0.125 = 0.1: the corrected mean, and each band's, moves exactly the tolerance.
        let carried = share(Verdict::CarryOver, 300, 0.125, &mut rng);
        let refit = share(Verdict::Refit, 300, 0.0, &mut rng);
        let healthy = share(Verdict::CarryOver, 600, 0.0, &mut rng);
        eprintln!(
            "carry_over at the tolerance {carried:.4}, refit with no change {refit:.4}, carry_over with no change {healthy:.4}"
        );
        // At the tolerance, moved up: refit is claimed at most 5% (mean and bands, one family).
        let refit_at = share(Verdict::Refit, 300, 0.125, &mut rng);
        eprintln!("refit at the tolerance {refit_at:.4}");
        assert!(refit_at <= 0.05, "{refit_at}");
        // 5% + 3 binomial sd at 2,000 (the four tests together are conservative).
        assert!(carried <= 0.065, "{carried}");
        assert!(refit <= 0.01, "{refit}");
        assert!(healthy >= 0.95, "{healthy}");
    }

    #[test]
    fn a_change_in_one_group_alone_calls_for_a_refit() {
        let mut rng = Rng::seed_from_u64(5);
        let mut all = Vec::new();
        for (g, shift) in [("A", 0.0), ("B", 0.0), ("C", 0.0), ("D", 0.6)] {
            for mut p in pairs(60, shift, 0.2, &mut rng) {
                p.group = Some(g.to_string());
                all.push(p);
            }
        }
        let b = bridge(&all, 0.15);
        // Overall: 0.8 · 0.6 / 4 = 0.12, inside the tolerance on average.
        assert!(b.corrected.unwrap().mean < 0.15);
        assert_eq!(b.verdict, Verdict::Refit, "{}", b.reason);
        let moved: Vec<&str> = b
            .groups
            .iter()
            .filter(|g| g.moved == Some(true))
            .map(|g| g.group.as_str())
            .collect();
        assert_eq!(moved, vec!["D"]);
    }

    /// On a coarse scale most items tie; the bands are still thirds of the items, so an
    /// unchanged re-score of integer scores can carry over.
    #[test]
    fn ties_still_make_three_bands() {
        let coarse: Vec<Pair> = (0..90)
            .map(|i| {
                let j = if i < 70 { 4.0 } else { 1.0 + (i % 3) as f64 };
                Pair {
                    old: j,
                    new: j,
                    old_corrected: j,
                    new_corrected: j,
                    group: None,
                }
            })
            .collect();
        let b = bridge(&coarse, 0.1);
        assert_eq!(
            b.bands.iter().map(|x| x.items).collect::<Vec<_>>(),
            vec![30, 30, 30]
        );
        assert_eq!(b.verdict, Verdict::CarryOver, "{}", b.reason);
    }

    /// A deterministic judge on a 1–5 integer scale whose re-score moves a share `p` of the
    /// items one level up (none past 5), corrected by 0.8·j: identical re-scores give a
    /// floored, never zero-width, interval, which covers the true shift of the corrected
    /// mean, and `carry_over` is no likelier than promised where the shift is at the
    /// tolerance, for 20, 60 and 200 items.
    #[test]
    fn floored_intervals_cover_on_tied_scores() {
        let mut rng = Rng::seed_from_u64(54);
        let reps = 2000;
        let tolerance = 0.1;
        let levels = [1.0, 2.0, 3.0, 4.0, 4.0, 5.0];
        let draw = |n: usize, p: f64, rng: &mut Rng| -> Vec<Pair> {
            (0..n)
                .map(|_| {
                    let old: f64 = levels[rng.random_range(0..levels.len())];
                    let new = if rng.random::<f64>() < p {
                        (old + 1.0).min(5.0)
                    } else {
                        old
                    };
                    Pair {
                        old,
                        new,
                        old_corrected: 0.8 * old,
                        new_corrected: 0.8 * new,
                        group: None,
                    }
                })
                .collect()
        };
        // The items not at 5 move; the true shift is 0.8 · p · 5/6.
        let truth = |p: f64| 0.8 * p * 5.0 / 6.0;
        let identical = bridge(&draw(60, 0.0, &mut rng), tolerance);
        let c = identical.corrected.unwrap();
        assert!(
            (c.se - (2.0 * 0.64 / 61.0 / 60.0f64).sqrt()).abs() < 1e-12,
            "{c:?}"
        );
        for n in [20, 60, 200] {
            for p in [0.0, 0.02, 0.05, 0.15] {
                let covered = (0..reps)
                    .filter(|_| {
                        let c = bridge(&draw(n, p, &mut rng), tolerance).corrected.unwrap();
                        c.lo <= truth(p) && truth(p) <= c.hi
                    })
                    .count() as f64
                    / reps as f64;
                eprintln!("n = {n}, p = {p}: the 90% interval covers {covered:.3}");
                assert!(covered >= 0.88, "n = {n}, p = {p}: {covered}");
            }
            // At the tolerance: 0.8 · p · 5/6 = 0.1.
            let carried = (0..reps)
                .filter(|_| {
                    bridge(&draw(n, 0.15, &mut rng), tolerance).verdict == Verdict::CarryOver
                })
                .count() as f64
                / reps as f64;
            eprintln!("n = {n}: carry_over at the tolerance {carried:.4}");
            assert!(carried <= 0.05, "n = {n}: {carried}");
        }
    }

    /// The gauge's three states: a refit is a change; an undecided bridge whose shift lies
    /// beyond the tolerance is undecided, not unchanged; one inside it is unchanged.
    #[test]
    fn a_check_finds_one_of_three_states() {
        let spread = |centre: f64| -> Vec<Pair> {
            (0..12)
                .map(|i| {
                    let old = 1.0 + 0.3 * i as f64;
                    let d = centre + if i % 2 == 0 { 0.3 } else { -0.3 };
                    Pair {
                        old,
                        new: old + d,
                        old_corrected: old,
                        new_corrected: old + d,
                        group: None,
                    }
                })
                .collect()
        };
        let beyond = bridge(&spread(0.15), 0.1);
        assert_eq!(beyond.verdict, Verdict::MoreItems, "{}", beyond.reason);
        assert_eq!(beyond.finding(), Finding::Undecided);
        let inside = bridge(&spread(0.05), 0.1);
        assert_eq!(inside.verdict, Verdict::MoreItems, "{}", inside.reason);
        assert_eq!(inside.finding(), Finding::Unchanged);
        let moved = bridge(&spread(1.0), 0.1);
        assert_eq!(moved.finding(), Finding::Changed);
        assert!(
            moved
                .clone()
                .for_check()
                .reason
                .contains("new judge_version")
        );
        for f in [Finding::Unchanged, Finding::Changed, Finding::Undecided] {
            assert_eq!(Finding::of_gauge(f.gauge()), f);
        }
    }

    #[test]
    fn undecided_bridges_say_how_many_more_items() {
        let mut rng = Rng::seed_from_u64(12);
        let b = bridge(&pairs(12, 0.0, 0.6, &mut rng), 0.1);
        assert_eq!(b.verdict, Verdict::MoreItems, "{}", b.reason);
        let more = b.more_items.unwrap();
        // sd of d ≈ 0.8 · 0.6 = 0.48: about (1.645 · 0.48 / 0.1)² ≈ 62 items in all.
        assert!((20..=200).contains(&(more + 12)), "{more}");
        assert_eq!(planned_items(1.0, 0.1), Some(171));
    }
}
