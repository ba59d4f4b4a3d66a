//! What a fitted version reports whatever its method, as the generic corrector trait and the
//! methods both name it: neutral types, so the trait depends on no method. [`MethodReport`] is
//! what a method declares of a fitted cell (its one report type); the β posterior and sampler
//! diagnostics of a Bayesian version, and the settings of a flow version, live here too.

use std::fmt::Debug;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a method reports of one fitted cell beyond its corrections, declared once, as its
/// model's `CellModel::Report`. A version's answer carries the report's fields beside its own
/// (`posterior` and `diagnostics` for bayes, `flow` for flow), the spec states them from the
/// report's schema (the registry merges every method's), and the gauges and the report picture
/// read it through the methods below. A method with nothing to add reports [`NoReport`].
pub trait MethodReport: Serialize + ToSchema + Debug + Clone + PartialEq + Send + Sync {
    /// The β posterior the canary reads (the `judgecal_beta_*` gauges, `/v1/correct`'s
    /// `canary`).
    fn posterior(&self) -> Option<&PosteriorReport> {
        None
    }

    /// A sampled fit's convergence (the R̂ and ESS gauges).
    fn diagnostics(&self) -> Option<&DiagnosticsReport> {
        None
    }

    /// A few words the report picture adds to its title.
    fn headline(&self) -> Option<String> {
        None
    }
}

/// The report of a method with nothing to say beyond its corrections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, ToSchema)]
pub struct NoReport {}

impl MethodReport for NoReport {}

/// A rubric's β posterior as a version reports it: the line's means, β's interval and the
/// canary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
#[schema(as = PosteriorDto)]
pub struct PosteriorReport {
    pub alpha_mean: f64,
    pub beta_mean: f64,
    pub sigma_mean: f64,
    /// 95% credible interval of beta.
    pub beta_interval: [f64; 2],
    /// Pr(beta < collapse_beta | anchors).
    pub beta_collapse_probability: f64,
    /// The judge no longer tracks the reference on this rubric.
    pub canary: bool,
}

impl From<&RubricPosterior> for PosteriorReport {
    fn from(p: &RubricPosterior) -> Self {
        Self {
            alpha_mean: p.alpha_mean,
            beta_mean: p.beta_mean,
            sigma_mean: p.sigma_mean,
            beta_interval: [p.beta_lo, p.beta_hi],
            beta_collapse_probability: p.beta_collapse_probability,
            canary: p.canary,
        }
    }
}

impl PosteriorReport {
    /// β's mean and interval and the canary, as the report picture prints them.
    pub fn headline(&self) -> String {
        let [lo, hi] = self.beta_interval;
        format!(
            "beta {:.2} [{lo:.2}, {hi:.2}]{}",
            self.beta_mean,
            if self.canary { ", CANARY" } else { "" }
        )
    }
}

/// A sampled fit's convergence as a version reports it; a figure that is not finite (the R̂
/// of a constant chain) is null.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
#[schema(as = DiagnosticsDto)]
pub struct DiagnosticsReport {
    /// Largest rank-normalised split R-hat (null if undefined).
    pub rhat_max: Option<f64>,
    pub ess_bulk_min: Option<f64>,
    pub ess_tail_min: Option<f64>,
    pub divergences: u64,
    /// Rounds the sampler was extended by (longer runs, more chains) because an earlier round
    /// missed the gate; 0 where the first passed. At most 2.
    pub extensions: u32,
}

impl From<&FitDiagnostics> for DiagnosticsReport {
    fn from(d: &FitDiagnostics) -> Self {
        let finite = |x: f64| x.is_finite().then_some(x);
        Self {
            rhat_max: finite(d.rhat_max),
            ess_bulk_min: finite(d.ess_bulk_min),
            ess_tail_min: finite(d.ess_tail_min),
            divergences: d.divergences,
            extensions: d.extensions,
        }
    }
}

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
    #[serde(with = "crate::nullable_f64")]
    pub rhat_max: f64,
    #[serde(with = "crate::nullable_f64")]
    pub ess_bulk_min: f64,
    #[serde(with = "crate::nullable_f64")]
    pub ess_tail_min: f64,
    pub divergences: u64,
    /// Rounds the sampler was extended by because an earlier round missed the gate (see
    /// `bayes::fit_extending`); 0 where the first round passed.
    #[serde(default)]
    pub extensions: u32,
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

/// When a corrected score is routed to a person.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ReviewRule {
    /// σ above this value (in score units).
    #[schema(title = "SigmaAboveRule")]
    SigmaAbove(f64),
    /// σ above the (100 − q)-th percentile of σ over the rubric's anchors.
    #[schema(title = "TopPercentRule")]
    TopPercent(f64),
}

/// How the learning rate moves over training.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// The same rate throughout (the paper's).
    #[default]
    Constant,
    /// Half a cosine from the rate down to zero over all the optimiser's steps.
    Cosine,
}

impl Schedule {
    /// The rate at `step` of `steps` (0-based), starting from `rate`.
    pub fn rate(self, rate: f64, step: usize, steps: usize) -> f64 {
        match self {
            Schedule::Constant => rate,
            Schedule::Cosine => {
                0.5 * rate * (1.0 + (std::f64::consts::PI * step as f64 / steps as f64).cos())
            }
        }
    }
}

/// Model, training and inference settings; the defaults are the paper's (stored versions
/// read missing fields from them, so a version trained before a field existed reads back as
/// it was trained).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlowConfig {
    pub hidden: i64,
    pub embedding_dim: i64,
    pub dropout: f64,
    /// RK4 step on [0, 1].
    pub step: f64,
    pub learning_rate: f64,
    pub schedule: Schedule,
    /// Anchors per optimiser step, reshuffled each epoch; `None` for full-batch steps.
    pub batch_size: Option<usize>,
    pub epochs: u64,
    /// When set, training makes this many optimiser steps however many anchors there are
    /// (reshuffling each epoch), in place of `epochs` epochs: the same time for 100 anchors
    /// as for 6,000.
    pub steps: Option<u64>,
    pub seed: u64,
    /// Hold out this fraction of the anchors and stop when its loss has not improved for
    /// `patience` epochs, keeping the best weights.
    pub early_stopping: Option<f64>,
    pub patience: u64,
    /// MC-dropout passes at inference.
    pub mc_passes: usize,
    pub review: ReviewRule,
}

impl Default for FlowConfig {
    fn default() -> Self {
        Self {
            hidden: 64,
            embedding_dim: 4,
            dropout: 0.1,
            step: 0.1,
            learning_rate: 3e-3,
            schedule: Schedule::Constant,
            batch_size: None,
            epochs: 1500,
            steps: None,
            seed: 0,
            early_stopping: None,
            patience: 100,
            mc_passes: 40,
            review: ReviewRule::TopPercent(5.0),
        }
    }
}

impl FlowConfig {
    /// The default recipe (preset `fast`): 220 optimiser steps on minibatches of 128 with a
    /// rate falling from 2e-2 along a cosine (about 19 epochs of 1,500 anchors), on the
    /// paper's network, integrator and MC-dropout (docs/methods.md, "The flow's training
    /// recipe", has the measurements behind it).
    pub fn fast() -> Self {
        Self {
            learning_rate: 2e-2,
            schedule: Schedule::Cosine,
            batch_size: Some(128),
            epochs: 19,
            steps: Some(220),
            ..Self::default()
        }
    }

    pub fn check(&self) -> Result<(), String> {
        let steps = 1.0 / self.step;
        if !(2..=1024).contains(&self.hidden) || !(1..=64).contains(&self.embedding_dim) {
            return Err("hidden must be 2 to 1024 and embedding_dim 1 to 64".into());
        }
        if !(0.0..0.9).contains(&self.dropout) {
            return Err("dropout must lie in [0, 0.9)".into());
        }
        if !(self.step > 0.0 && self.step <= 1.0 && (steps - steps.round()).abs() < 1e-9) {
            return Err("step must divide 1 (0.1, 0.05, 0.25, ...)".into());
        }
        if !(self.learning_rate > 0.0 && self.learning_rate < 1.0) {
            return Err("learning_rate must lie in (0, 1)".into());
        }
        if self
            .batch_size
            .is_some_and(|b| !(1..=1_000_000).contains(&b))
        {
            return Err("batch_size must be between 1 and 1000000".into());
        }
        if !(1..=100_000).contains(&self.epochs) {
            return Err("epochs must be between 1 and 100000".into());
        }
        if self.steps.is_some_and(|s| !(1..=1_000_000).contains(&s)) {
            return Err("steps must be between 1 and 1000000".into());
        }
        if let Some(f) = self.early_stopping
            && !(f > 0.0 && f < 0.5)
        {
            return Err("early_stopping (a validation fraction) must lie in (0, 0.5)".into());
        }
        if !(2..=1000).contains(&self.mc_passes) {
            return Err("mc_passes must be between 2 and 1000".into());
        }
        match self.review {
            ReviewRule::SigmaAbove(s) if !(s >= 0.0 && s.is_finite()) => {
                Err("review.sigma_above must be a finite number ≥ 0".into())
            }
            ReviewRule::TopPercent(q) if !(q > 0.0 && q < 100.0) => {
                Err("review.top_percent must lie in (0, 100)".into())
            }
            _ => Ok(()),
        }
    }

    /// RK4 steps on [0, 1].
    pub fn steps(&self) -> usize {
        (1.0 / self.step).round() as usize
    }
}

/// What the MC-dropout σ is worth as a review signal, on held-out anchors. σ is the spread of
/// the flow's own map over dropout masks: its uncertainty about E[y | j], not the reference's
/// noise around it. Large errors come mostly from that noise, so σ can only catch them where
/// the map is uncertain for the same reason the references are noisy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = ReviewAuditDto)]
pub struct ReviewAudit {
    /// Held-out anchors audited.
    pub held_out: usize,
    /// Share of them routed to review (σ above the threshold).
    pub routed: f64,
    /// Share of the largest 10% absolute errors among the routed: `routed` is what routing
    /// at random would catch.
    pub large_errors_routed: f64,
    /// The same share when as many anchors are routed by the widest 95% interval instead
    /// (conformal, per bin of the judge score; ties shared out evenly).
    pub large_errors_routed_by_width: Option<f64>,
}
