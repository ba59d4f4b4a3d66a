//! A new group's bias term whose interval covers at every between-group spread τ: a design
//! measured beside the served term (`judgecal-study coverage --new-group`), not yet served.
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-stats/src/runlevel/new_group.rs".

use crate::stats::{chi_square_quantile, normal_cdf, normal_quantile};

/// The two constants of one answer's rule, and the coverage they reach.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NewGroupRule {
    /// The weight k on the spread the standard errors do not explain.
    pub weight: f64,
    /// The share c of s̄² taken from S_b² before weighting.
    pub offset: f64,
    /// The largest and smallest coverage over the grid of τ, by quadrature.
    pub coverage: (f64, f64),
    pub z: f64,
}

/// Rules already calibrated, by number of groups and the ratio of the answer's other variance
/// to s̄² on a log grid of step 0.05 (the rule depends on nothing else: it is scale-free).
#[derive(Debug, Default)]
pub struct Rules(std::collections::HashMap<(usize, i64, u64), NewGroupRule>);

impl Rules {
    /// The rule for `groups` groups, `s2` and `extra` as in [`NewGroupRule::calibrate`],
    /// calibrated at the nearest ratio on the grid.
    pub fn get(&mut self, groups: usize, s2: f64, extra: f64, level: f64) -> NewGroupRule {
        let step = ((extra / s2.max(1e-300)).max(1e-6).ln() / 0.05).round() as i64;
        *self
            .0
            .entry((groups, step, level.to_bits()))
            .or_insert_with(|| {
                NewGroupRule::calibrate(groups, 1.0, (step as f64 * 0.05).exp(), level)
            })
    }
}

/// Points of S_b²'s law in the quadrature.
const POINTS: usize = 96;

/// τ over s̄ at which the coverage is held.
const SPREADS: [f64; 10] = [0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// Quantiles of χ²_{G−1}/(G − 1), the law of S_b² over its mean.
fn spread_points(groups: usize) -> Vec<f64> {
    let dof = groups.max(2) - 1;
    (0..POINTS)
        .map(|i| chi_square_quantile((i as f64 + 0.5) / POINTS as f64, dof) / dof as f64)
        .collect()
}

impl NewGroupRule {
    /// The rule for `groups` groups whose means have mean squared standard error `s2`, the
    /// answer's other variance `extra`, at `level`.
    pub fn calibrate(groups: usize, s2: f64, extra: f64, level: f64) -> Self {
        let z = normal_quantile(0.5 + level / 2.0);
        let points = spread_points(groups);
        let worst = |weight: f64, offset: f64| {
            let rule = NewGroupRule {
                weight,
                offset,
                coverage: (0.0, 0.0),
                z,
            };
            let (lo, hi) = rule.coverage_range(groups, s2, extra, &points);
            (hi - level).max(level - lo)
        };
        let mut best = (f64::INFINITY, 0.0, 0.0);
        for step in 0..=15 {
            let offset = 0.1 * step as f64;
            // Coverage grows with the weight at every τ: the worst miss is unimodal in it.
            let (mut a, mut b) = (0.0_f64, 64.0_f64);
            for _ in 0..32 {
                let (m1, m2) = (a + (b - a) / 3.0, b - (b - a) / 3.0);
                if worst(m1, offset) <= worst(m2, offset) {
                    b = m2;
                } else {
                    a = m1;
                }
            }
            let weight = 0.5 * (a + b);
            let w = worst(weight, offset);
            if w < best.0 {
                best = (w, weight, offset);
            }
        }
        let mut rule = NewGroupRule {
            weight: best.1,
            offset: best.2,
            coverage: (0.0, 0.0),
            z,
        };
        rule.coverage = rule.coverage_range(groups, s2, extra, &points);
        rule
    }

    /// The half-width for groups whose means' sample variance is `spread`.
    pub fn half_width(&self, groups: usize, s2: f64, extra: f64, spread: f64) -> f64 {
        (self.z.powi(2) * (extra + s2 / groups as f64)
            + self.weight * (spread - self.offset * s2).max(0.0))
        .sqrt()
    }

    /// The coverage at spread `tau` where every group mean has standard error √`s2`, by
    /// quadrature over `points` (from [`spread_points`]).
    fn coverage_at(&self, groups: usize, s2: f64, extra: f64, tau: f64, points: &[f64]) -> f64 {
        let t2 = tau * tau;
        let g = groups as f64;
        let sd = (t2 * (1.0 + 1.0 / g) + s2 / g + extra).sqrt();
        points
            .iter()
            .map(|q| {
                let h = self.half_width(groups, s2, extra, (t2 + s2) * q);
                2.0 * normal_cdf(h / sd) - 1.0
            })
            .sum::<f64>()
            / points.len() as f64
    }

    /// The smallest and largest coverage over the grid of τ.
    fn coverage_range(&self, groups: usize, s2: f64, extra: f64, points: &[f64]) -> (f64, f64) {
        SPREADS
            .iter()
            .map(|r| self.coverage_at(groups, s2, extra, r * s2.sqrt(), points))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), c| {
                (lo.min(c), hi.max(c))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quadrature_is_exact_where_the_rule_is_a_normal_interval() {
        // No weight: a fixed half-width z·√(v + s̄²/G), exact at τ = 0.
        let rule = NewGroupRule {
            weight: 0.0,
            offset: 0.0,
            coverage: (0.0, 0.0),
            z: normal_quantile(0.975),
        };
        let c = rule.coverage_at(8, 0.0064, 0.0033, 0.0, &spread_points(8));
        assert!((c - 0.95).abs() < 1e-6, "{c}");
        // χ²'s tables: 2.5% and 97.5% points on 7 degrees of freedom, 5% and 95% on 4, the
        // median on 1.
        for (p, dof, x) in [
            (0.025, 7, 1.6899),
            (0.975, 7, 16.0128),
            (0.05, 4, 0.7107),
            (0.95, 4, 9.4877),
            (0.5, 1, 0.4549),
        ] {
            assert!((chi_square_quantile(p, dof) - x).abs() < 1e-3, "{p} {dof}");
        }
    }
}
