//! What a fitted version reports whatever its method, as the generic corrector trait and the
//! methods both name it: neutral types, so the trait depends on no method.

use serde::{Deserialize, Serialize};

/// What a correction needs of one rubric's posterior, and what operators watch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RubricPosterior {
    pub alpha_mean: f64,
    pub beta_mean: f64,
    pub sigma_mean: f64,
    pub alpha_var: f64,
    pub beta_var: f64,
    pub alpha_beta_cov: f64,
    /// E[σ²], the noise part of a new item's predictive variance.
    pub sigma2_mean: f64,
    /// 95% central credible intervals of β.
    pub beta_lo: f64,
    pub beta_hi: f64,
    /// Pr(β < collapse_beta | anchors).
    pub beta_collapse_probability: f64,
    /// The canary: the judge no longer tracks the reference on this rubric.
    pub canary: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FitDiagnostics {
    /// Largest rank-normalised split-R̂ over α_r, β_r, σ_r (and μ, τ when pooled).
    #[serde(with = "crate::calibrate::nullable_f64")]
    pub rhat_max: f64,
    #[serde(with = "crate::calibrate::nullable_f64")]
    pub ess_bulk_min: f64,
    #[serde(with = "crate::calibrate::nullable_f64")]
    pub ess_tail_min: f64,
    pub divergences: u64,
}

impl FitDiagnostics {
    /// Why a fit should not be activated, if it should not: R̂ ≥ 1.01, bulk ESS < 400, or any
    /// divergence.
    pub fn failure(&self) -> Option<String> {
        let mut why = Vec::new();
        if self.rhat_max.is_nan() || self.rhat_max >= 1.01 {
            why.push(format!("max R-hat {:.4} >= 1.01", self.rhat_max));
        }
        if self.ess_bulk_min.is_nan() || self.ess_bulk_min < 400.0 {
            why.push(format!("min bulk ESS {:.0} < 400", self.ess_bulk_min));
        }
        if self.divergences > 0 {
            why.push(format!("{} divergent transitions", self.divergences));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}
