//! The one-score judge of each system the anchors came from (issue 85). A run of one system
//! whose items carry k scores is read around that system's own mean judge score, not the
//! pooled one: stretching around the pooled mean moves a whole run of a system far from it by
//! (c − 1)(m_g − μ_j), which the system's bias (measured on one-score anchors) does not take
//! back; 28 of 40 runs of the top of six systems covered through the service. Around the
//! system's own mean, with the judge's variance within systems (between-system spread is no
//! part of what one more asking redraws), the system's bias applies as measured. The system's
//! mean is itself measured on its anchors: its error moves every item of the run together, by
//! (1 − c) times it, against the bias term's error, and what that adds to the run mean's
//! variance is [`SystemJudge::centre_variance`].

use std::collections::BTreeMap;

use super::{OneScore, Repeats};
use crate::runlevel::RunItems;
use crate::stats::least_squares;

/// The fewest anchors a system's mean is read from; a run of a system with fewer is read
/// around the pooled mean, as a run naming no system.
pub const MIN_SYSTEM_ANCHORS: usize = 3;

/// What a version's anchors say of the judge's repeats: their within-item spread, and the
/// judge score of each system they came from.
#[derive(Debug, Default)]
pub struct AnchorRepeats {
    pub within: super::WithinItem,
    pub systems: Systems,
}

/// The anchors' judge scores by system.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Systems {
    /// Per system: its anchors and their mean judge score.
    means: BTreeMap<String, (usize, f64)>,
    /// The judge within systems and over them (`None` with fewer than two systems or no
    /// spread within them).
    within: Option<Within>,
}

/// What the anchors say of the judge within systems.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Within {
    /// The pooled within-system variance of the judge scores, their covariance with the
    /// reference, and the within-system R².
    variance: f64,
    covariance: f64,
    r2: f64,
    /// The reference's slope on the judge score over every system's anchors: the line a
    /// corrector of the pooled anchors draws.
    slope: f64,
}

/// One system's judge, as its runs' repeats are read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SystemJudge {
    /// Around the system's mean, with the within-system variance and R².
    pub judge: OneScore,
    /// Anchors the mean was measured on.
    pub anchors: usize,
    /// The judge score's within-system covariance with the reference.
    pub covariance: f64,
    /// The pooled anchors' slope of the reference on the judge score.
    pub slope: f64,
}

impl Systems {
    /// From anchors' (system, judge score, reference).
    pub fn of<'a>(rows: impl IntoIterator<Item = (Option<&'a str>, f64, f64)>) -> Self {
        let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (g, j, y) in rows {
            if let Some(g) = g {
                by.entry(g.to_owned()).or_default().push((j, y));
            }
        }
        let (mut sxx, mut syy, mut sxy, mut df) = (0.0, 0.0, 0.0, 0.0);
        let mut means = BTreeMap::new();
        for (g, pairs) in &by {
            let n = pairs.len() as f64;
            let mx = pairs.iter().map(|p| p.0).sum::<f64>() / n;
            let my = pairs.iter().map(|p| p.1).sum::<f64>() / n;
            for (j, y) in pairs {
                sxx += (j - mx).powi(2);
                syy += (y - my).powi(2);
                sxy += (j - mx) * (y - my);
            }
            df += n - 1.0;
            means.insert(g.clone(), (pairs.len(), mx));
        }
        let all: Vec<(f64, f64)> = by.values().flatten().copied().collect();
        let within = (means.len() >= 2 && df >= 2.0 && sxx > 0.0 && syy > 0.0)
            .then(|| least_squares(&all))
            .flatten()
            .map(|(_, slope)| Within {
                variance: sxx / df,
                covariance: sxy / df,
                r2: sxy * sxy / (sxx * syy),
                slope,
            });
        Self { means, within }
    }

    /// How many anchors name system `group` (`None`: none does).
    pub fn anchors_of(&self, group: &str) -> Option<usize> {
        self.means.get(group).map(|&(n, _)| n)
    }

    /// The judge of system `group`, where it has at least [`MIN_SYSTEM_ANCHORS`] anchors and
    /// the judge varies within systems.
    pub fn judge(&self, group: &str) -> Option<SystemJudge> {
        let w = self.within?;
        let &(anchors, mean) = self.means.get(group)?;
        (anchors >= MIN_SYSTEM_ANCHORS).then_some(SystemJudge {
            judge: OneScore {
                mean,
                variance: w.variance,
                r2: w.r2,
            },
            anchors,
            covariance: w.covariance,
            slope: w.slope,
        })
    }
}

impl SystemJudge {
    /// The variance the system mean's error adds to the mean corrected score of a run read
    /// around it by `model`, the run's items scored `ks` times each, beyond the system's bias
    /// term. The run's answer leans on the system's anchors through their mean reference less
    /// the corrector's slope b times c̄ times their mean judge score (c̄ the items' mean
    /// stretch), where the bias term alone counts their mean reference less b times their mean
    /// judge score: the difference is (b²(c̄² − 1)·V_w − 2b(c̄ − 1)·C_w)/n_g (V_w, C_w the
    /// judge's within-system variance and covariance with the reference), never below 0.
    pub fn centre_variance(&self, model: &Repeats, ks: &[f64]) -> f64 {
        if ks.is_empty() {
            return 0.0;
        }
        let c = ks.iter().map(|&k| model.stretch(k)).sum::<f64>() / ks.len() as f64;
        let b = self.slope;
        let extra =
            b * b * (c * c - 1.0) * self.judge.variance - 2.0 * b * (c - 1.0) * self.covariance;
        (extra / self.anchors as f64).max(0.0)
    }
}

/// What reading one run's repeats found: the fewest scores an item carries, and the sum over
/// its items of their residual variance as a share of a one-score item's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunRead {
    pub fewest: usize,
    pub ratio_sum: f64,
}

/// Reads the repeats `more` of `run`'s items (item i's further scores beside `run.scores[i]`):
/// each item is read at the one-score equivalent of its scores' mean (`Repeats::expand`) by
/// `pooled`, or around the run's system's anchor mean where it names one of `systems` (with
/// that mean's error in `run.centre_variance`); the run's noise ratio and given scores are set.
pub fn read_run(
    pooled: &Repeats,
    systems: &Systems,
    run: &mut RunItems,
    more: &[Vec<f64>],
) -> RunRead {
    let system = run.group.as_deref().and_then(|g| systems.judge(g));
    let model = system.map_or(*pooled, |s| Repeats::new(pooled.within, s.judge));
    let (mut fewest, mut ratio_sum) = (usize::MAX, 0.0);
    let mut given = Vec::with_capacity(run.scores.len());
    let mut ks = Vec::with_capacity(run.scores.len());
    for (score, r) in run.scores.iter_mut().zip(more) {
        let k = (r.len() + 1) as f64;
        let mean = (*score + r.iter().sum::<f64>()) / k;
        given.push(mean);
        *score = model.expand(mean, k);
        ratio_sum += model.residual_ratio(k);
        fewest = fewest.min(r.len() + 1);
        ks.push(k);
    }
    run.noise_ratio = Some(ratio_sum / run.scores.len().max(1) as f64);
    run.given_scores = Some(given);
    run.centre_variance = system.map_or(0.0, |s| s.centre_variance(&model, &ks));
    RunRead { fewest, ratio_sum }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_systems_judge_is_its_own_mean_with_the_pooled_within_spread() {
        // System a: judge 1, 2, 3 with references 1, 3, 2; system b: judge 5, 7, 9 with
        // references 4, 6, 8. Within: Σ(j − m)² = 2 + 8 = 10 on 4 degrees of freedom;
        // Σ(y − m)² = 2 + 8 = 10; Σ(j − m)(y − m) = 1 + 8 = 9. Ungrouped rows are not read.
        let rows = [
            (Some("a"), 1.0, 1.0),
            (Some("a"), 2.0, 3.0),
            (Some("a"), 3.0, 2.0),
            (Some("b"), 5.0, 4.0),
            (Some("b"), 7.0, 6.0),
            (Some("b"), 9.0, 8.0),
            (None, 100.0, -100.0),
        ];
        let s = Systems::of(rows);
        let b = s.judge("b").expect("three anchors");
        assert_eq!((b.anchors, b.judge.mean), (3, 7.0));
        assert!((b.judge.variance - 2.5).abs() < 1e-12);
        assert!((b.judge.r2 - 81.0 / 100.0).abs() < 1e-12);
        assert!((b.covariance - 2.25).abs() < 1e-12);
        // The pooled slope: Σ(j − 4.5)(y − 4) = 39 over Σ(j − 4.5)² = 47.5.
        assert!((b.slope - 39.0 / 47.5).abs() < 1e-12);
        assert!(s.judge("c").is_none());
        // Two anchors are too few for a system's mean; one system gives no within spread.
        let two = Systems::of(rows[..5].iter().copied());
        assert!(two.judge("b").is_none() && two.judge("a").is_some());
        assert!(Systems::of(rows[..3].iter().copied()).judge("a").is_none());
        // The centre's variance: noise share 0.5 of 2.5, items of 3 scores: c = 1/(1 − 0.5·2/3)
        // = 1.5; (b²(c² − 1)·2.5 − 2b(c − 1)·2.25)/3.
        let model = Repeats::new(1.25, b.judge);
        let v = b.centre_variance(&model, &[3.0, 3.0]);
        let slope = 39.0 / 47.5;
        let expected = (slope * slope * 1.25 * 2.5 - 2.0 * slope * 0.5 * 2.25) / 3.0;
        assert!((v - expected).abs() < 1e-12, "{v} {expected}");
        assert_eq!(b.centre_variance(&model, &[1.0]), 0.0);
    }
}
