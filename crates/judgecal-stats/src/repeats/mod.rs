//! Judge repeat noise (issue 58): the same item scored more than once by the same judge version.
//! A judge re-asked gives another score, so a judge score is the item's own score (what the
//! judge would give on average) plus noise of variance σ_w² that a second asking redraws.
//!
//! - [`WithinItem`] measures σ_w² from items carrying several scores (one-way analysis of
//!   variance: each item's sample variance, weighted by its k − 1 degrees of freedom), with an
//!   interval that does not assume the noise is normal or the same on every item: the
//!   estimate's variance is the spread of the items' own variances, and the interval is a
//!   scaled χ² on Satterthwaite's degrees of freedom (on normal noise, the exact χ² interval).
//! - [`Repeats`] carries σ_w² with the one-score judge the anchors describe (its mean, variance
//!   and R² against the reference, a straight line's summary) and says what k scores of an item
//!   are worth. A corrector fitted on one-score anchors describes E[y | j₁]; an item's mean of k
//!   scores, j̄_k, varies less (Var j̄_k = Var j₁ − σ_w²(1 − 1/k)) and says more about y. For a
//!   linear judge, E[y | j̄_k] = E[y | j₁ = s] at the *one-score equivalent*
//!   s = μ_j + (Var j₁ / Var j̄_k)(j̄_k − μ_j) ([`Repeats::expand`]), and the reference's
//!   variance around it is the one-score residual variance times
//!   (1 − R²·Var j₁/Var j̄_k)/(1 − R²) ([`Repeats::residual_ratio`]). A run of one known
//!   system is read around that system's mean, with the judge's variance within systems
//!   ([`Systems`]).
//! - [`cheapest`]: whether re-asking the judge or labelling more items reaches a run's target
//!   half-width at the lower cost.
//!
//! Without repeats nothing here is used.

use serde::{Deserialize, Serialize};

use crate::agreement::Figure;
use crate::stats::{chi_square_quantile, mean_of, normal_quantile};

mod systems;
#[cfg(test)]
mod tests;

pub use systems::{AnchorRepeats, MIN_SYSTEM_ANCHORS, RunRead, SystemJudge, Systems, read_run};

/// σ_w² is taken as at most this share of the one-score judge's variance: a judge whose scores
/// are all noise corrects nothing, and the ratios below would divide by zero.
pub const MAX_NOISE_SHARE: f64 = 0.95;

/// The numbers of scores per item [`Repeats::report`] tabulates.
pub const REPORTED_REPEATS: [usize; 5] = [1, 2, 3, 5, 10];

/// The within-item spread of items that carry several scores.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WithinItem {
    /// Per item with at least two scores: (k − 1, the item's sample variance).
    parts: Vec<(f64, f64)>,
    /// Scores of those items, in all.
    scores: usize,
    /// The smallest gap between distinct scores seen (a zero variance's interval needs one).
    spacing: f64,
}

/// σ_w² as measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseEstimate {
    pub variance: f64,
    pub interval: [f64; 2],
    /// Items with at least two scores, and their scores in all.
    pub items: usize,
    pub scores: usize,
}

impl WithinItem {
    /// Adds one item's scores (an item with fewer than two adds nothing).
    pub fn add(&mut self, scores: &[f64]) {
        let k = scores.len();
        if k < 2 {
            return;
        }
        let m = mean_of(scores.iter().copied());
        let s2 = scores.iter().map(|s| (s - m).powi(2)).sum::<f64>() / (k - 1) as f64;
        self.parts.push(((k - 1) as f64, s2));
        self.scores += k;
        for (i, a) in scores.iter().enumerate() {
            for b in &scores[i + 1..] {
                let gap = (a - b).abs();
                if gap > 0.0 && (self.spacing == 0.0 || gap < self.spacing) {
                    self.spacing = gap;
                }
            }
        }
    }

    /// The within-item spread of `items` (each item's scores).
    pub fn of<'a>(items: impl IntoIterator<Item = &'a [f64]>) -> Self {
        let mut w = Self::default();
        for item in items {
            w.add(item);
        }
        w
    }

    /// This spread and `other`'s, as if measured together.
    pub fn merged(mut self, other: &WithinItem) -> Self {
        self.parts.extend_from_slice(&other.parts);
        self.scores += other.scores;
        if other.spacing > 0.0 && (self.spacing == 0.0 || other.spacing < self.spacing) {
            self.spacing = other.spacing;
        }
        self
    }

    /// Items with at least two scores.
    pub fn items(&self) -> usize {
        self.parts.len()
    }

    /// σ_w² with its interval at `level`, from at least two items with repeats (`None`
    /// otherwise). Every item's repeats identical: 0, with an upper end one disagreement of
    /// the smallest step would give at the rule of three (3 in the degrees of freedom).
    pub fn estimate(&self, level: f64) -> Option<NoiseEstimate> {
        let m = self.parts.len();
        if m < 2 {
            return None;
        }
        let df: f64 = self.parts.iter().map(|p| p.0).sum();
        let variance = self.parts.iter().map(|(w, s2)| w * s2).sum::<f64>() / df;
        let answer = |interval| {
            Some(NoiseEstimate {
                variance,
                interval,
                items: m,
                scores: self.scores,
            })
        };
        if variance <= 0.0 {
            let step = if self.spacing > 0.0 {
                self.spacing
            } else {
                1.0
            };
            return answer([0.0, 3.0 * step * step / (2.0 * df)]);
        }
        // The estimate's variance from the items' own spread (no normality), and the
        // degrees of freedom of the χ² with that variance: 2σ⁴/Var.
        let spread = self
            .parts
            .iter()
            .map(|(w, s2)| (w * (s2 - variance)).powi(2))
            .sum::<f64>()
            * m as f64
            / (m - 1) as f64
            / (df * df);
        // At most the normal-noise degrees of freedom: the spread of a few items' variances
        // is itself noisy, and taken at face value it covered 92% with 30 items of three.
        let nu = if spread > 0.0 {
            (2.0 * variance * variance / spread).clamp(1.0, df)
        } else {
            df
        };
        let alpha = 1.0 - level;
        answer([
            nu * variance / chi_square_quantile_real(1.0 - alpha / 2.0, nu),
            nu * variance / chi_square_quantile_real(alpha / 2.0, nu),
        ])
    }
}

/// The quantile of χ² at `p` on `nu` (real) degrees of freedom: exact on whole degrees up to
/// 100, Wilson–Hilferty's cube above (its error there is under 0.1%, and the exact series
/// underflows past a few hundred).
fn chi_square_quantile_real(p: f64, nu: f64) -> f64 {
    if nu <= 100.0 {
        return chi_square_quantile(p, nu.round().max(1.0) as usize);
    }
    let c = 2.0 / (9.0 * nu);
    nu * (1.0 - c + normal_quantile(p) * c.sqrt()).powi(3)
}

/// The one-score judge as the anchors describe it: what [`Repeats`] needs of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OneScore {
    /// The anchors' mean and variance of their (first) judge scores.
    pub mean: f64,
    pub variance: f64,
    /// The squared correlation of the judge score with the reference.
    pub r2: f64,
}

impl OneScore {
    /// From anchors' (judge score, reference) pairs; `None` under three or where either side
    /// is constant.
    pub fn of(pairs: &[(f64, f64)]) -> Option<Self> {
        if pairs.len() < 3 {
            return None;
        }
        let n = pairs.len() as f64;
        let mx = mean_of(pairs.iter().map(|p| p.0));
        let my = mean_of(pairs.iter().map(|p| p.1));
        let sxx: f64 = pairs.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let syy: f64 = pairs.iter().map(|p| (p.1 - my).powi(2)).sum();
        let sxy: f64 = pairs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        (sxx > 0.0 && syy > 0.0).then(|| Self {
            mean: mx,
            variance: sxx / (n - 1.0),
            r2: sxy * sxy / (sxx * syy),
        })
    }
}

/// The judge's repeat noise with the one-score judge it is a part of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Repeats {
    /// σ_w², the variance of one score around the item's own.
    pub within: f64,
    pub judge: OneScore,
}

impl Repeats {
    pub fn new(within: f64, judge: OneScore) -> Self {
        Self { within, judge }
    }

    /// σ_w² as a share of the one-score judge's variance (1 − the test–retest reliability),
    /// at most [`MAX_NOISE_SHARE`].
    pub fn noise_share(&self) -> f64 {
        (self.within / self.judge.variance).clamp(0.0, MAX_NOISE_SHARE)
    }

    /// Var j₁ / Var j̄_k: how much further from the mean an item's mean of `k` scores lies, in
    /// the one-score judge's terms, than the same evidence would in one score.
    pub fn stretch(&self, k: f64) -> f64 {
        1.0 / (1.0 - self.noise_share() * (1.0 - 1.0 / k.max(1.0)))
    }

    /// The one-score judge score that says what the mean `mean` of `k` scores says: the score
    /// to correct the item at.
    pub fn expand(&self, mean: f64, k: f64) -> f64 {
        self.judge.mean + self.stretch(k) * (mean - self.judge.mean)
    }

    /// R² of the one-score judge, at most its reliability (a judge cannot explain more of the
    /// reference than its own scores hold of the item).
    fn r2(&self) -> f64 {
        self.judge.r2.clamp(0.0, 1.0 - self.noise_share())
    }

    /// The variance of a reference around its corrected score for an item of `k` scores, as a
    /// share of a one-score item's.
    pub fn residual_ratio(&self, k: f64) -> f64 {
        let r2 = self.r2();
        if r2 >= 1.0 {
            return 1.0;
        }
        ((1.0 - r2 * self.stretch(k)) / (1.0 - r2)).clamp(0.0, 1.0)
    }

    /// The share of the judge's own error (its score's variance beyond what the reference
    /// explains, Var j₁·(1 − R²)) that is repeat noise.
    pub fn share_of_judge_error(&self) -> f64 {
        let error = self.judge.variance * (1.0 - self.r2());
        if error <= 0.0 {
            return 0.0;
        }
        (self.within / error).clamp(0.0, 1.0)
    }

    /// What the agreement report shows of it.
    pub fn report(&self, measured: &NoiseEstimate) -> RepeatReport {
        RepeatReport {
            items: measured.items,
            scores: measured.scores,
            within: Figure {
                value: measured.variance,
                interval: Some(measured.interval),
            },
            noise_share: self.noise_share(),
            share_of_judge_error: self.share_of_judge_error(),
            removable: 1.0 - self.residual_ratio(f64::INFINITY),
            by_repeats: REPORTED_REPEATS
                .iter()
                .map(|&k| RepeatGain {
                    k,
                    residual_ratio: self.residual_ratio(k as f64),
                })
                .collect(),
        }
    }
}

/// The judge's repeat noise as one cell's anchors measure it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RepeatReport {
    /// Anchors with at least two scores, and their scores in all.
    pub items: usize,
    pub scores: usize,
    /// The within-item (test–retest) variance of one score, with its 95% interval.
    pub within: Figure,
    /// That variance as a share of the judge scores' variance over the anchors (1 − the
    /// test–retest reliability).
    pub noise_share: f64,
    /// Its share of the judge's own error: the judge scores' variance beyond what the
    /// reference explains (a straight line's R²).
    pub share_of_judge_error: f64,
    /// The share of a corrected one-score item's error variance that averaging many scores
    /// of it would remove.
    pub removable: f64,
    /// For an item scored k times: its error variance as a share of a one-score item's.
    pub by_repeats: Vec<RepeatGain>,
}

/// What k scores of an item are worth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RepeatGain {
    pub k: usize,
    pub residual_ratio: f64,
}

/// What a judge call and a label cost, in any one unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Costs {
    /// One more score of one item by the judge.
    #[schema(minimum = 0.0)]
    pub judge: f64,
    /// One item labelled by people.
    #[schema(minimum = 0.0)]
    pub label: f64,
}

/// One way to reach a run's target: every item scored `repeats` times and `labels` of them
/// labelled at random.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Design {
    pub repeats: usize,
    pub labels: usize,
    /// What it costs beyond what the run has: (repeats − the run's) judge calls per item, and
    /// every label.
    pub cost: f64,
}

/// The most scores per item a plan considers.
pub const MAX_REPEATS: usize = 20;

/// For each number of scores per item from the run's `current` to [`MAX_REPEATS`], the labels
/// of the run (`run` items) its labelled path needs for a half-width of `target` with the
/// quantile `q`, given `s2_one`, the variance of a reference around a one-score item's
/// corrected score, and what that costs: the designs in order of k, and the index of the
/// cheapest (the fewest repeats among equal costs). The labelled path's variance is
/// (1 − n/N)·S²/n, S² the residual variance at k ([`Repeats::residual_ratio`]).
pub fn cheapest(
    repeats: &Repeats,
    current: usize,
    s2_one: f64,
    run: usize,
    target: f64,
    q: f64,
    costs: Costs,
) -> (Vec<Design>, usize) {
    let current = current.max(1);
    let big_n = run.max(1) as f64;
    let designs: Vec<Design> = (current..=MAX_REPEATS.max(current))
        .map(|k| {
            let s2 = s2_one * repeats.residual_ratio(k as f64);
            let needed = if s2 <= 0.0 {
                0.0
            } else {
                1.0 / ((target / q).powi(2) / s2 + 1.0 / big_n)
            };
            let labels = (needed.ceil() as usize)
                .max(crate::runlevel::MIN_LABELLED)
                .min(run);
            Design {
                repeats: k,
                labels,
                cost: costs.judge * big_n * (k - current) as f64 + costs.label * labels as f64,
            }
        })
        .collect();
    let best =
        designs.iter().enumerate().fold(
            0,
            |best, (i, d)| if d.cost < designs[best].cost { i } else { best },
        );
    (designs, best)
}
