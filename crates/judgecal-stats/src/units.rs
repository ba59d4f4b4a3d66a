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
    /// Consecutive uploads naming no rater, in upload order (versions trained before these were
    /// kept have none).
    #[serde(default, skip_serializing_if = "PairSpread::is_empty")]
    pub chain: PairSpread,
    /// The same uploads' pairs two, three, … [`MAX_LAG`] apart (versions trained before these
    /// were kept have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lags: Vec<PairSpread>,
}

/// The farthest apart two uploads naming no rater are paired: one labeller's uploads are
/// expected to span at most this many and one more.
pub const MAX_LAG: usize = 4;

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

    /// The same sums, with the pairs of `uploads` (naming no rater, in upload order) one to
    /// [`MAX_LAG`] apart.
    pub fn with_uploads(mut self, uploads: &[(f64, f64)]) -> Self {
        self.chain = PairSpread::of(uploads);
        self.lags = (2..=MAX_LAG)
            .map(|lag| PairSpread::lagged(uploads, lag))
            .collect();
        self
    }

    pub fn add(&mut self, n: f64, m: f64, sign: f64) {
        self.anchors += sign * n;
        self.misses += sign * m;
        self.squares += sign * m * m / n;
        self.sizes += sign * n * n;
    }

    /// The miss rate over the units' anchors, where they have any.
    pub fn mean(&self) -> Option<f64> {
        (self.anchors > 0.0).then(|| self.misses / self.anchors)
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

/// The running sums behind the correlation of misses between a session and the one before it
/// in its stream (the same rater's, or the previous upload naming none): over such pairs, their
/// count and the sums of the products of their anchors and misses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairSpread {
    pub pairs: f64,
    misses: f64,
    cross: f64,
    anchors: f64,
}

impl PairSpread {
    /// Over `sessions` (anchors, misses) in order, each with the one before it.
    pub fn of(sessions: &[(f64, f64)]) -> Self {
        Self::lagged(sessions, 1)
    }

    /// Over `sessions` in order, each with the one `lag` before it.
    pub fn lagged(sessions: &[(f64, f64)], lag: usize) -> Self {
        let mut out = Self::default();
        for (earlier, later) in sessions.iter().zip(sessions.iter().skip(lag)) {
            out.add(*earlier, *later);
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.pairs == 0.0
    }

    /// One pair: the earlier session's (anchors, misses), then the later's.
    pub fn add(&mut self, (n0, m0): (f64, f64), (n1, m1): (f64, f64)) {
        self.pairs += 1.0;
        self.misses += m0 * m1;
        self.cross += m0 * n1 + n0 * m1;
        self.anchors += n0 * n1;
    }

    /// The covariance of two anchors' misses, one in each session of a pair, around the miss
    /// rate `mu`, over the variance of one anchor's: a correlation, where one can be made.
    pub fn estimate(&self, mu: f64) -> Option<f64> {
        let variance = mu * (1.0 - mu);
        (self.pairs >= 2.0 && self.anchors > 0.0 && variance > 0.0).then(|| {
            let covariance =
                (self.misses - mu * self.cross + mu * mu * self.anchors) / self.anchors;
            (covariance / variance).clamp(-1.0, 1.0)
        })
    }

    /// The correlation the next session is bet with: the estimate (floored at 0), shrunk
    /// towards [`PRIOR_RHO`] with the weight of [`PRIOR_UNITS`] pairs, widened by
    /// [`RHO_MARGIN`].
    pub fn rho(&self, mu: f64) -> f64 {
        let shrunk = match self.estimate(mu) {
            Some(r) => {
                (self.pairs * r.max(0.0) + PRIOR_UNITS * PRIOR_RHO) / (self.pairs + PRIOR_UNITS)
            }
            None => PRIOR_RHO,
        };
        (RHO_MARGIN * shrunk).min(0.99)
    }

    /// How many standard errors the estimate lies above 0, where sessions of `size` anchors
    /// miss at `mu` with intra-session correlation `rho` and pairs are independent.
    pub fn z(&self, mu: f64, rho: f64, size: f64) -> f64 {
        let v = size * mu * (1.0 - mu) * (1.0 + (size - 1.0).max(0.0) * rho);
        if self.pairs < 2.0 || v <= 0.0 {
            return 0.0;
        }
        let covariance = self.misses - mu * self.cross + mu * mu * self.anchors;
        covariance / (self.pairs.sqrt() * v)
    }
}

/// Squared differences of consecutive uploads' miss shares (naming no rater) at lags 1 and 2.
/// Their lag-1 covariance is half the difference of the two means where labellers span at most
/// two uploads, whatever the level of misses does: a change moves both alike, so it cannot pass
/// for labellers who upload twice (a covariance around the mean would call it one).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Differences {
    last: [Option<f64>; 2],
    lag1: (f64, f64),
    lag2: (f64, f64),
}

impl Differences {
    pub(crate) fn add(&mut self, x: f64) {
        if let Some(y) = self.last[0] {
            self.lag1 = (self.lag1.0 + (x - y).powi(2), self.lag1.1 + 1.0);
        }
        if let Some(y) = self.last[1] {
            self.lag2 = (self.lag2.0 + (x - y).powi(2), self.lag2.1 + 1.0);
        }
        self.last = [Some(x), self.last[0]];
    }

    /// The correlation of misses between consecutive uploads: the training uploads' pairs'
    /// estimate and these differences', each weighted by its pairs, shrunk towards
    /// [`PRIOR_RHO`] with the weight of [`PRIOR_UNITS`] pairs and widened by [`RHO_MARGIN`].
    pub(crate) fn rho(&self, mu: f64, training: &PairSpread) -> f64 {
        let (mut sum, mut weight) = (PRIOR_UNITS * PRIOR_RHO, PRIOR_UNITS);
        if let Some(r) = training.estimate(mu) {
            sum += training.pairs * r.max(0.0);
            weight += training.pairs;
        }
        let variance = mu * (1.0 - mu);
        if self.lag2.1 >= 2.0 && variance > 0.0 {
            let covariance = (self.lag2.0 / self.lag2.1 - self.lag1.0 / self.lag1.1) / 2.0;
            sum += self.lag2.1 * (covariance / variance).clamp(0.0, 1.0);
            weight += self.lag2.1;
        }
        (RHO_MARGIN * sum / weight).min(0.99)
    }
}
