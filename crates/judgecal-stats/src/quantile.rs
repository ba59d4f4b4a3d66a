//! The marginal optimal-transport map: ŷ(j) = F_y⁻¹(F_j(j)), from the anchors' judge-score
//! distribution to their reference-score distribution, ignoring the pairing.
//!
//! It is the paper's reference point for shape: in the population the corrected scores have
//! exactly the reference distribution (KL 0), whatever it does to single items. Both quantile
//! functions are the empirical ones with linear interpolation (Hyndman–Fan type 7), kept at
//! `KNOTS` evenly spaced levels. Judge scores are often discrete (1–5 integers, or means of
//! three); a judge score shared by several anchors maps to the middle of the levels it spans,
//! so ties do not all land on the lowest reference quantile. Scores outside the anchors'
//! range map to the reference extremes: the map never extrapolates.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::corrector::{Cell, CellModel, Corrected, Corrector, Run};
use super::report::NoReport;
use super::stats::quantile_sorted;

/// Levels kept for each quantile function (fewer when there are fewer anchors).
pub const KNOTS: usize = 513;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuantileMap {
    /// Q_j(p_k) and Q_y(p_k) at p_k = k / (len − 1); both non-decreasing.
    pub judge: Vec<f64>,
    pub reference: Vec<f64>,
}

impl QuantileMap {
    /// Fits the map to (judge, reference) pairs; needs two.
    pub fn fit(pairs: &[(f64, f64)]) -> Result<Self, String> {
        if pairs.len() < 2 {
            return Err("the quantile map needs at least 2 anchors".into());
        }
        let mut j: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let mut y: Vec<f64> = pairs.iter().map(|p| p.1).collect();
        j.sort_by(f64::total_cmp);
        y.sort_by(f64::total_cmp);
        let k = pairs.len().min(KNOTS);
        let level = |i: usize| i as f64 / (k - 1) as f64;
        Ok(Self {
            judge: (0..k).map(|i| quantile_sorted(&j, level(i))).collect(),
            reference: (0..k).map(|i| quantile_sorted(&y, level(i))).collect(),
        })
    }

    /// F_j(x): the level of judge score `x`, in [0, 1].
    fn level(&self, x: f64) -> f64 {
        let q = &self.judge;
        let last = q.len() - 1;
        if x <= q[0] {
            // Below or at the lowest knot: the middle of the levels that share it.
            let run = q.iter().take_while(|&&v| v <= x).count();
            return if run == 0 {
                0.0
            } else {
                (run - 1) as f64 / last as f64 / 2.0
            };
        }
        if x >= q[last] {
            let run = q.iter().rev().take_while(|&&v| v >= x).count();
            return if run == 0 {
                1.0
            } else {
                1.0 - (run - 1) as f64 / last as f64 / 2.0
            };
        }
        // First knot ≥ x and last knot ≤ x.
        let a = q.partition_point(|&v| v < x);
        let b = q.partition_point(|&v| v <= x);
        if b > a {
            // x is a knot value shared by knots a..b: the middle of their levels.
            (a + b - 1) as f64 / 2.0 / last as f64
        } else {
            let (lo, hi) = (a - 1, a);
            (lo as f64 + (x - q[lo]) / (q[hi] - q[lo])) / last as f64
        }
    }

    /// The corrected score of judge score `x`.
    pub fn correct(&self, x: f64) -> f64 {
        quantile_sorted(&self.reference, self.level(x))
    }
}

/// The quantile map has nothing to set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct QuantileMapOptions {}

/// The quantile map as a method: one map per rubric.
pub struct QuantileMapping;

impl Corrector for QuantileMapping {
    const LABEL: &'static str = "quantile map";
    type Options = QuantileMapOptions;
    type Fit = Vec<QuantileMap>;
    type Model = QuantileMap;

    fn fit(_: &QuantileMapOptions, cells: &[Cell], _: u64, _: &Run) -> Result<Self::Fit, String> {
        cells.iter().map(|c| QuantileMap::fit(&c.pairs)).collect()
    }

    fn predict(fit: &Self::Fit, r: usize, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        fit[r].correct_all(scores)
    }

    fn model(
        fit: &Self::Fit,
        r: usize,
        _: &Cell,
        _: &[Option<Corrected>],
        _: usize,
    ) -> Result<QuantileMap, String> {
        Ok(fit[r].clone())
    }
}

impl QuantileMap {
    fn correct_all(&self, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        Ok(scores
            .iter()
            .map(|&j| Corrected::score(self.correct(j)))
            .collect())
    }
}

impl CellModel for QuantileMap {
    type Report = NoReport;

    fn report(&self) -> NoReport {
        NoReport {}
    }

    fn correct(&self, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        self.correct_all(scores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quality::kl_divergences;

    fn kl_mean(a: &[f64], b: &[f64]) -> f64 {
        let (f, r) = kl_divergences(a, b, 1.0, 5.0);
        (f + r) / 2.0
    }

    #[test]
    fn recovers_a_monotone_map() {
        // y = 1 + j² for j on an even grid in [0, 2]: the quantile map is that function,
        // up to interpolation between knots.
        let pairs: Vec<(f64, f64)> = (0..2000)
            .map(|i| {
                let j = 2.0 * i as f64 / 1999.0;
                (j, 1.0 + j * j)
            })
            .collect();
        // The pairing does not matter: shuffle the references against the judge scores.
        let mut shuffled = pairs.clone();
        let n = shuffled.len();
        for i in 0..n {
            let k = (i * 7919) % n;
            let y = shuffled[k].1;
            shuffled[k].1 = shuffled[i].1;
            shuffled[i].1 = y;
        }
        let map = QuantileMap::fit(&shuffled).unwrap();
        for x in [0.0, 0.3, 1.0, 1.7, 2.0] {
            let got = map.correct(x);
            assert!((got - (1.0 + x * x)).abs() < 2e-3, "{x}: {got}");
        }
        // Outside the anchors: the reference extremes.
        assert!((map.correct(-5.0) - 1.0).abs() < 1e-12);
        assert!((map.correct(9.0) - 5.0).abs() < 1e-12);
    }

    #[test]
    fn matches_the_reference_distribution_where_a_line_cannot() {
        // Judge uniform on [1, 5]; reference skewed to the top (a ceiling): y = 5 − 4(1 − u)².
        let u: Vec<f64> = (0..1000).map(|i| (i as f64 + 0.5) / 1000.0).collect();
        let pairs: Vec<(f64, f64)> = u
            .iter()
            .map(|&u| (1.0 + 4.0 * u, 5.0 - 4.0 * (1.0 - u).powi(2)))
            .collect();
        let map = QuantileMap::fit(&pairs).unwrap();
        let corrected: Vec<f64> = pairs.iter().map(|p| map.correct(p.0)).collect();
        let reference: Vec<f64> = pairs.iter().map(|p| p.1).collect();
        let judge: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let kl = kl_mean(&corrected, &reference);
        assert!(kl < 5e-4, "{kl}");
        assert!(kl_mean(&judge, &reference) > 0.05);
    }

    #[test]
    fn tied_judge_scores_map_to_the_middle_of_their_levels() {
        // Judge scores 1..=5, 20 anchors each; references 1..=100 in order. A judge score of
        // 3 covers levels 0.4 to 0.6: its corrected score is the reference median.
        let pairs: Vec<(f64, f64)> = (0..100)
            .map(|i| ((i / 20 + 1) as f64, (i + 1) as f64))
            .collect();
        let map = QuantileMap::fit(&pairs).unwrap();
        assert!(
            (map.correct(3.0) - 50.5).abs() < 0.6,
            "{}",
            map.correct(3.0)
        );
        assert!(map.correct(1.0) < map.correct(2.0));
        assert!(map.correct(4.0) < map.correct(5.0));
        // The lowest and highest ties sit inside their runs too, not at the extremes.
        assert!(
            (map.correct(1.0) - 10.5).abs() < 1.0,
            "{}",
            map.correct(1.0)
        );
        assert!(
            (map.correct(5.0) - 90.5).abs() < 1.0,
            "{}",
            map.correct(5.0)
        );
        // Between two tied values: between their corrections.
        let mid = map.correct(2.5);
        assert!(map.correct(2.0) < mid && mid < map.correct(3.0));
        assert!(QuantileMap::fit(&[(1.0, 1.0)]).is_err());
    }
}
