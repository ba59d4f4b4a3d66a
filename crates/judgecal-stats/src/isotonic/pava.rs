//! Weighted pool-adjacent-violators: the non-decreasing least-squares fit of the reference on
//! the judge score.

use serde::{Deserialize, Serialize};

/// A fitted non-decreasing step function: `values[k]` at judge scores from `knots[k]` up to
/// the next knot; flat below the first knot and above the last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepFit {
    /// The distinct judge scores of the anchors, increasing.
    pub knots: Vec<f64>,
    /// The fitted reference score at each knot, non-decreasing.
    pub values: Vec<f64>,
    /// The total weight of the anchors at each knot (ties pooled).
    pub weights: Vec<f64>,
}

/// A block of adjacent knots pooled to one value.
struct Block {
    /// Weighted mean of the pooled references.
    value: f64,
    weight: f64,
    knots: usize,
}

impl StepFit {
    /// Fits (judge score, reference score, weight) points; weights must be positive and
    /// finite. Needs at least one point.
    pub fn fit(points: &[(f64, f64, f64)]) -> Result<Self, String> {
        if points.is_empty() {
            return Err("isotonic regression needs at least 1 anchor".into());
        }
        if points.iter().any(|p| !(p.2 > 0.0 && p.2.is_finite())) {
            return Err("isotonic weights must be positive and finite".into());
        }
        let mut sorted = points.to_vec();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        // Tied judge scores are pooled first: one knot each, at their weighted mean.
        let mut knots: Vec<f64> = Vec::new();
        let mut pooled: Vec<(f64, f64)> = Vec::new(); // (Σw·y, Σw)
        for &(x, y, w) in &sorted {
            match (knots.last(), pooled.last_mut()) {
                (Some(&last), Some(p)) if last == x => {
                    p.0 += w * y;
                    p.1 += w;
                }
                _ => {
                    knots.push(x);
                    pooled.push((w * y, w));
                }
            }
        }
        let mut blocks: Vec<Block> = Vec::with_capacity(knots.len());
        for &(wy, w) in &pooled {
            blocks.push(Block {
                value: wy / w,
                weight: w,
                knots: 1,
            });
            // Merge while the last two blocks violate monotonicity.
            while blocks.len() >= 2
                && blocks[blocks.len() - 2].value > blocks[blocks.len() - 1].value
            {
                let b = blocks.pop().expect("two blocks");
                let a = blocks.last_mut().expect("two blocks");
                let weight = a.weight + b.weight;
                a.value = (a.value * a.weight + b.value * b.weight) / weight;
                a.weight = weight;
                a.knots += b.knots;
            }
        }
        let values = blocks
            .iter()
            .flat_map(|b| std::iter::repeat_n(b.value, b.knots))
            .collect();
        Ok(Self {
            knots,
            values,
            weights: pooled.iter().map(|p| p.1).collect(),
        })
    }

    /// The same step function with one knot per step: each run of knots that share a fitted
    /// value becomes its first knot, with their weights summed. On continuous judge scores a
    /// fit has a knot per distinct anchor score but far fewer steps (the blocks pooled), so a
    /// kept refit shrinks from thousands of knots to dozens.
    pub fn compacted(self) -> Self {
        let mut out = Self {
            knots: Vec::new(),
            values: Vec::new(),
            weights: Vec::new(),
        };
        for ((k, v), w) in self.knots.into_iter().zip(self.values).zip(self.weights) {
            match out.values.last() {
                Some(&last) if last == v => {
                    if let Some(total) = out.weights.last_mut() {
                        *total += w;
                    }
                }
                _ => {
                    out.knots.push(k);
                    out.values.push(v);
                    out.weights.push(w);
                }
            }
        }
        out
    }

    /// The fitted value at judge score `x`: that of the largest knot at or below `x`, the
    /// first knot's below them all.
    pub fn at(&self, x: f64) -> f64 {
        let k = self.knots.partition_point(|&k| k <= x);
        self.values[k.saturating_sub(1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unit(pairs: &[(f64, f64)]) -> Vec<(f64, f64, f64)> {
        pairs.iter().map(|&(x, y)| (x, y, 1.0)).collect()
    }

    #[test]
    fn a_hand_worked_example() {
        // y = 1, 3, 2, 4, 3.5, 5 at x = 1..6. Violators (3, 2) pool to 2.5 and (4, 3.5) to
        // 3.75: the fit is 1, 2.5, 2.5, 3.75, 3.75, 5.
        let fit = StepFit::fit(&unit(&[
            (1.0, 1.0),
            (2.0, 3.0),
            (3.0, 2.0),
            (4.0, 4.0),
            (5.0, 3.5),
            (6.0, 5.0),
        ]))
        .unwrap();
        assert_eq!(fit.values, [1.0, 2.5, 2.5, 3.75, 3.75, 5.0]);
        // A step function, flat beyond the anchors.
        assert_eq!(fit.at(0.0), 1.0);
        assert_eq!(fit.at(2.9), 2.5);
        assert_eq!(fit.at(4.0), 3.75);
        assert_eq!(fit.at(99.0), 5.0);
        // Ties are pooled before the pass: x = 2 twice (y 4 and 0) is one knot at 2 with
        // weight 2, then it violates the next knot (1) and pools with it to 5/3.
        let fit = StepFit::fit(&unit(&[(1.0, 0.0), (2.0, 4.0), (2.0, 0.0), (3.0, 1.0)])).unwrap();
        assert_eq!(fit.knots, [1.0, 2.0, 3.0]);
        assert_eq!(fit.weights, [1.0, 2.0, 1.0]);
        let pooled = 5.0 / 3.0;
        assert_eq!(fit.values, [0.0, pooled, pooled]);
        // Weights count: a heavy low reference pulls the pool down.
        let fit = StepFit::fit(&[(1.0, 2.0, 3.0), (2.0, 0.0, 1.0)]).unwrap();
        assert_eq!(fit.values, [1.5, 1.5]);
        assert!(StepFit::fit(&[]).is_err());
        assert!(StepFit::fit(&[(1.0, 1.0, 0.0)]).is_err());
    }

    fn points() -> impl Strategy<Value = Vec<(f64, f64, f64)>> {
        // Judge scores on a coarse grid so that ties happen; weights 0.5 to 3.
        prop::collection::vec(
            (
                (0u8..20).prop_map(|k| f64::from(k) / 4.0),
                -5.0..5.0f64,
                0.5..3.0f64,
            ),
            1..60,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn the_fit_is_monotone(pts in points()) {
            let fit = StepFit::fit(&pts).unwrap();
            prop_assert!(fit.values.windows(2).all(|w| w[0] <= w[1]), "{:?}", fit.values);
            prop_assert!(fit.knots.windows(2).all(|w| w[0] < w[1]));
        }

        #[test]
        fn the_weighted_mean_is_preserved(pts in points()) {
            let fit = StepFit::fit(&pts).unwrap();
            let w: f64 = pts.iter().map(|p| p.2).sum();
            let fitted = pts.iter().map(|p| p.2 * fit.at(p.0)).sum::<f64>() / w;
            let reference = pts.iter().map(|p| p.2 * p.1).sum::<f64>() / w;
            prop_assert!((fitted - reference).abs() < 1e-9, "{fitted} vs {reference}");
        }

        #[test]
        fn fitting_its_own_output_returns_it(pts in points()) {
            let fit = StepFit::fit(&pts).unwrap();
            let own: Vec<(f64, f64, f64)> = fit
                .knots
                .iter()
                .zip(&fit.values)
                .zip(&fit.weights)
                .map(|((&x, &y), &w)| (x, y, w))
                .collect();
            let again = StepFit::fit(&own).unwrap();
            prop_assert_eq!(&again.knots, &fit.knots);
            for (a, b) in again.values.iter().zip(&fit.values) {
                prop_assert!((a - b).abs() < 1e-12);
            }
        }

        #[test]
        fn the_order_of_the_anchors_does_not_matter(pts in points(), rotate in 0usize..60) {
            let fit = StepFit::fit(&pts).unwrap();
            let mut shuffled = pts.clone();
            shuffled.reverse();
            let k = rotate % shuffled.len();
            shuffled.rotate_left(k);
            let again = StepFit::fit(&shuffled).unwrap();
            prop_assert_eq!(&again.knots, &fit.knots);
            for (a, b) in again.values.iter().zip(&fit.values) {
                prop_assert!((a - b).abs() < 1e-9, "{a} vs {b}");
            }
        }

        #[test]
        fn the_compacted_fit_predicts_the_same_everywhere(pts in points()) {
            // At every knot, midway between knots and beyond both ends: the same value, to
            // the bit; one knot per distinct fitted value, and the weight kept.
            let fit = StepFit::fit(&pts).unwrap();
            let small = fit.clone().compacted();
            let mut xs = vec![fit.knots[0] - 1.0, fit.knots[fit.knots.len() - 1] + 1.0];
            xs.extend(&fit.knots);
            xs.extend(fit.knots.windows(2).map(|w| (w[0] + w[1]) / 2.0));
            for x in xs {
                prop_assert_eq!(small.at(x).to_bits(), fit.at(x).to_bits(), "at {}", x);
            }
            let mut steps = fit.values.clone();
            steps.dedup();
            prop_assert_eq!(&small.values, &steps);
            let total = |f: &StepFit| f.weights.iter().sum::<f64>();
            prop_assert!((total(&small) - total(&fit)).abs() < 1e-9);
        }
    }
}
