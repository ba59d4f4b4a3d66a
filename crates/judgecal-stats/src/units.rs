//! How alike one unit's anchors are in missing a version's interval: the one-way ANOVA over
//! units (raters, or uploads naming none) of their miss counts, and the intra-unit correlation
//! the drift alarm (`drift`) bets with. Kept apart from the alarm because a
//! version's intervals (`conformal`) carry its training anchors' units.

use serde::{Deserialize, Serialize};

/// The intra-unit correlation of misses assumed before units are seen.
pub const PRIOR_RHO: f64 = 0.05;

/// How many units' worth of weight [`PRIOR_RHO`] has against the estimate from the units seen.
pub const PRIOR_UNITS: f64 = 5.0;

/// The estimated ρ is widened by this factor.
pub const RHO_MARGIN: f64 = 1.25;

/// The running sums behind ρ's estimate: over units, their count, Σn, Σm, Σm²/n and Σn².
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnitSpread {
    pub units: f64,
    pub anchors: f64,
    pub misses: f64,
    pub squares: f64,
    pub sizes: f64,
}

impl UnitSpread {
    /// The sums over units of `(anchors, misses)` each.
    pub fn of(units: impl IntoIterator<Item = (f64, f64)>) -> Self {
        let mut out = Self::default();
        for (n, m) in units {
            if n > 0.0 {
                out.units += 1.0;
                out.add(n, m, 1.0);
            }
        }
        out
    }

    pub(super) fn add(&mut self, n: f64, m: f64, sign: f64) {
        self.anchors += sign * n;
        self.misses += sign * m;
        self.squares += sign * m * m / n;
        self.sizes += sign * n * n;
    }

    /// The one-way ANOVA estimate of the intra-unit correlation, where one can be made.
    fn estimate(&self) -> Option<f64> {
        let (u, n, m) = (self.units, self.anchors, self.misses);
        if u < 2.0 || n - u < 1.0 || m <= 0.0 {
            return None;
        }
        let between = (self.squares - m * m / n).max(0.0) / (u - 1.0);
        let within = (m - self.squares).max(0.0) / (n - u);
        let n0 = (n - self.sizes / n) / (u - 1.0);
        let denominator = between + (n0 - 1.0) * within;
        (denominator > 0.0).then(|| ((between - within) / denominator).clamp(0.0, 0.99))
    }

    /// The intra-unit correlation the next anchor is bet with: the estimate, shrunk towards
    /// the prior and widened by [`RHO_MARGIN`] (a rater's miss rate is skewed: a few raters
    /// miss far more often than a beta with the same spread allows).
    pub fn rho(&self) -> f64 {
        let shrunk = match self.estimate() {
            Some(r) => (self.units * r + PRIOR_UNITS * PRIOR_RHO) / (self.units + PRIOR_UNITS),
            None => PRIOR_RHO,
        };
        (RHO_MARGIN * shrunk).min(0.99)
    }
}
