//! Each MC-dropout sub-network of a trained flow is a fixed one-dimensional map per rubric, so
//! it can be tabulated once on a fine grid and interpolated: 100,000 corrections then cost
//! 100,000 × K look-ups instead of 100,000 × K integrations.

use serde::{Deserialize, Serialize};

use super::FlowWeights;

/// The K sub-networks' outputs on `points` evenly spaced judge scores over [lo, hi].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub lo: f64,
    pub hi: f64,
    pub points: usize,
    pub passes: usize,
    /// Pass-major: `values[k * points + g]`.
    pub values: Vec<f64>,
}

impl Table {
    pub fn build(
        weights: &FlowWeights,
        rubric: usize,
        lo: f64,
        hi: f64,
        points: usize,
    ) -> Result<Self, String> {
        if !(lo < hi && points >= 2) {
            return Err("a table needs lo < hi and at least 2 points".into());
        }
        let grid: Vec<f64> = (0..points)
            .map(|g| lo + (hi - lo) * g as f64 / (points - 1) as f64)
            .collect();
        let passes = weights.passes(rubric, &grid)?;
        Ok(Self {
            lo,
            hi,
            points,
            passes: passes.len(),
            values: passes.concat(),
        })
    }

    /// Whether `x` lies on the table.
    pub fn covers(&self, x: f64) -> bool {
        (self.lo..=self.hi).contains(&x)
    }

    /// Each pass's value at `x` by linear interpolation; `x` must be covered.
    fn pass_values(&self, x: f64) -> impl Iterator<Item = f64> + Clone + '_ {
        let pos = (x - self.lo) / (self.hi - self.lo) * (self.points - 1) as f64;
        let g = (pos.floor() as usize).min(self.points - 2);
        let w = pos - g as f64;
        (0..self.passes).map(move |k| {
            let row = &self.values[k * self.points..(k + 1) * self.points];
            row[g] * (1.0 - w) + row[g + 1] * w
        })
    }

    /// Mean and sd over the passes at `x`, or `None` off the table.
    pub fn correct(&self, x: f64) -> Option<(f64, f64)> {
        self.covers(x).then(|| super::mean_sd(self.pass_values(x)))
    }
}
