//! The linear corrector's model: the multi-input linear model (`crate::linear`) with one input,
//! the judge score. For rubrics r = 1..R (R >= 2):
//!
//! ```text
//! y ~ Normal(α_r + β_r·j, σ_r)        (α_r, β_r) ~ Normal((μ_α, μ_β), diag(τ_α², τ_β²))
//! σ_r ~ HalfNormal(s_σ)   μ_α ~ N(m_α, s_α²)   μ_β ~ N(m_β, s_β²)   τ_α, τ_β ~ HalfNormal(s_τ)
//! ```
//!
//! The rubric effects and μ are integrated out in closed form (see `crate::linear`), so the
//! sampler has no funnel to fall into. With R = 1 there is nothing to pool, and the model is the
//! paper's single-cell one with fixed priors `α ~ N(m_α, s_α²)`, `β ~ N(m_β, s_β²)`,
//! `σ ~ HalfNormal(s_σ)` (each σ's HalfNormal with a floor at 10⁻³·s_σ: `crate::linear`). This module only names the line's pieces: its statistics, its priors
//! and a draw's (α, β).

use nalgebra::{Matrix2, U2, Vector2};
use serde::{Deserialize, Serialize};

use crate::linear::{StackModel, StackPriors, Stats};

/// n, XᵀX and Xᵀy for X = [1, j], and yᵀy, of one rubric's anchors: the line's sufficient
/// statistics.
pub type SufficientStats = Stats<U2>;

impl Stats<U2> {
    pub fn from_pairs(pairs: impl IntoIterator<Item = (f64, f64)>) -> Self {
        let mut s = Self {
            n: 0.0,
            gram: Matrix2::zeros(),
            xty: Vector2::zeros(),
            yty: 0.0,
        };
        for (j, y) in pairs {
            let x = Vector2::new(1.0, j);
            s.n += 1.0;
            s.gram.ger(1.0, &x, &x, 1.0);
            s.xty.axpy(y, &x, 1.0);
            s.yty += y * y;
        }
        s
    }

    /// Σ log Normal(y | α + βj, e^u) without the constant.
    pub fn loglik(&self, a: f64, b: f64, log_sigma: f64) -> f64 {
        -self.n * log_sigma - 0.5 * self.sse(&Vector2::new(a, b)) * (-2.0 * log_sigma).exp()
    }
}

/// The priors; the defaults are the paper's: α ~ N(0, 2²), β ~ N(1, 2²), σ ~ HalfNormal(1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Priors {
    pub alpha_mean: f64,
    #[schema(exclusive_minimum = 0)]
    pub alpha_sd: f64,
    pub beta_mean: f64,
    #[schema(exclusive_minimum = 0)]
    pub beta_sd: f64,
    /// Scale of the HalfNormal prior on each σ_r (which turns away from 0 below a thousandth of
    /// it, so that references exactly on a line still give a proper posterior).
    #[schema(exclusive_minimum = 0)]
    pub sigma_scale: f64,
    /// Scale of the HalfNormal priors on τ_α and τ_β.
    #[schema(exclusive_minimum = 0)]
    pub tau_scale: f64,
}

impl Default for Priors {
    fn default() -> Self {
        Self {
            alpha_mean: 0.0,
            alpha_sd: 2.0,
            beta_mean: 1.0,
            beta_sd: 2.0,
            sigma_scale: 1.0,
            tau_scale: 1.0,
        }
    }
}

impl Priors {
    pub fn check(&self) -> Result<(), String> {
        let finite = [self.alpha_mean, self.beta_mean]
            .iter()
            .all(|x| x.is_finite());
        let positive = [
            self.alpha_sd,
            self.beta_sd,
            self.sigma_scale,
            self.tau_scale,
        ]
        .iter()
        .all(|x| x.is_finite() && *x > 0.0);
        if finite && positive {
            Ok(())
        } else {
            Err("prior means must be finite and prior scales finite and positive".into())
        }
    }
}

impl Priors {
    /// The same priors in the multi-input model's terms.
    pub fn stacked(&self) -> StackPriors {
        StackPriors {
            mean: vec![self.alpha_mean, self.beta_mean],
            sd: vec![self.alpha_sd, self.beta_sd],
            sigma_scale: self.sigma_scale,
            tau_scale: self.tau_scale,
        }
    }
}

/// The posterior of one judge's rubrics: the multi-input model with the judge score alone.
pub type LineModel = StackModel<U2>;

impl StackModel<U2> {
    /// The line's model of `stats` (one per rubric) under `priors`.
    pub fn line(stats: Vec<SufficientStats>, priors: Priors) -> Self {
        Self::new(stats, priors.stacked())
    }
}
