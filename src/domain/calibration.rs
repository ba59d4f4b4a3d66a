//! Training jobs and calibrator versions: what they are, independent of how they are stored or
//! served.

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{CellKey, JudgeName, Problem, RubricName};
use crate::calibrate::bayes::{FitDiagnostics, FitOptions, RubricPosterior};
use crate::calibrate::flow::{FlowOptions, FlowWeights, ReviewRule};
use crate::calibrate::metrics::{Comparison, Scheme};
use crate::calibrate::quantile::QuantileMap;
use crate::calibrate::select::{Candidate, Decision, Objective, Rule};

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            pub fn new() -> Self {
                Self(Uuid::new_v4())
            }

            pub fn parse(raw: &str) -> Option<Self> {
                Uuid::parse_str(raw).ok().map(Self)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// A training job.
    JobId
);
id_type!(
    /// One calibrator version of one cell.
    CalibratorId
);

/// How a cell's corrector is fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// The hierarchical Bayesian linear corrector (NUTS).
    Bayes,
    /// The neural-ODE score transport (libtorch), with MC-dropout σ.
    Flow,
    /// The marginal optimal-transport map from the judge scores' distribution to the
    /// reference scores'.
    QuantileMap,
    /// The raw judge score: what `auto` serves when no corrector beats it.
    Identity,
    /// A training method only: fits the others on the same held-out folds and keeps the best
    /// per cell.
    Auto,
}

impl Method {
    pub const ALL: [Method; 5] = [
        Method::Bayes,
        Method::Flow,
        Method::QuantileMap,
        Method::Identity,
        Method::Auto,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Method::Bayes => "bayes",
            Method::Flow => "flow",
            Method::QuantileMap => "quantile_map",
            Method::Identity => "identity",
            Method::Auto => "auto",
        }
    }

    /// The version method of a selection candidate.
    pub fn of(c: Candidate) -> Self {
        match c {
            Candidate::Identity => Method::Identity,
            Candidate::QuantileMap => Method::QuantileMap,
            Candidate::Bayes => Method::Bayes,
            Candidate::Flow => Method::Flow,
        }
    }

    pub fn parse(raw: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == raw)
            .ok_or_else(|| {
                format!(
                    "unknown method {raw:?}; this service trains: {}",
                    Self::ALL.map(|m| m.as_str()).join(", ")
                )
            })
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn as_str(&self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    pub fn finished(&self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [
            JobState::Queued,
            JobState::Running,
            JobState::Succeeded,
            JobState::Failed,
            JobState::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == raw)
    }
}

/// The options of a training request: how to fit, how to evaluate, whether to force
/// activation. Unknown keys are refused, so a misspelt option never silently does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainingOptions {
    /// Activate the new versions even when they fail their diagnostics.
    pub force: bool,
    /// k of k-fold cross-validation (ignored when `holdout` is set).
    pub folds: usize,
    /// Evaluate on this held-out fraction instead of k folds.
    pub holdout: Option<f64>,
    /// Sampler, priors and canary (the Bayesian method).
    pub chains: u64,
    pub warmup: u64,
    pub draws: u64,
    pub target_accept: f64,
    pub seed: u64,
    pub priors: crate::calibrate::bayes::Priors,
    pub collapse_beta: f64,
    pub collapse_probability: f64,
}

impl Default for TrainingOptions {
    fn default() -> Self {
        let fit = FitOptions::default();
        Self {
            force: false,
            folds: 5,
            holdout: None,
            chains: fit.chains,
            warmup: fit.warmup,
            draws: fit.draws,
            target_accept: fit.target_accept,
            seed: fit.seed,
            priors: fit.priors,
            collapse_beta: fit.collapse_beta,
            collapse_probability: fit.collapse_probability,
        }
    }
}

impl TrainingOptions {
    pub fn fit(&self) -> FitOptions {
        FitOptions {
            chains: self.chains,
            warmup: self.warmup,
            draws: self.draws,
            target_accept: self.target_accept,
            seed: self.seed,
            priors: self.priors,
            collapse_beta: self.collapse_beta,
            collapse_probability: self.collapse_probability,
        }
    }

    pub fn scheme(&self) -> Scheme {
        scheme_of(self.folds, self.holdout)
    }

    pub fn check(&self) -> Result<(), Vec<Problem>> {
        let mut problems = Vec::new();
        if let Err(e) = self.fit().check() {
            problems.push(Problem::at(None, "options", e));
        }
        check_scheme(self.folds, self.holdout, &mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

/// The options of a flow training request. Unknown keys are refused.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlowTrainingOptions {
    /// Activate the new versions whatever their held-out figures (flows have no
    /// convergence diagnostics; they always pass).
    pub force: bool,
    /// Fraction of each rubric's anchors held out: the flow is trained on the rest and
    /// evaluated on these (one training, not k: a flow takes a minute).
    pub holdout: f64,
    pub hidden: i64,
    pub embedding_dim: i64,
    pub dropout: f64,
    pub step: f64,
    pub learning_rate: f64,
    pub epochs: u64,
    pub seed: u64,
    pub early_stopping: Option<f64>,
    pub patience: u64,
    pub mc_passes: usize,
    pub review: ReviewRule,
}

impl Default for FlowTrainingOptions {
    fn default() -> Self {
        let f = FlowOptions::default();
        Self {
            force: false,
            holdout: 0.2,
            hidden: f.hidden,
            embedding_dim: f.embedding_dim,
            dropout: f.dropout,
            step: f.step,
            learning_rate: f.learning_rate,
            epochs: f.epochs,
            seed: f.seed,
            early_stopping: f.early_stopping,
            patience: f.patience,
            mc_passes: f.mc_passes,
            review: f.review,
        }
    }
}

impl FlowTrainingOptions {
    pub fn flow(&self) -> FlowOptions {
        FlowOptions {
            hidden: self.hidden,
            embedding_dim: self.embedding_dim,
            dropout: self.dropout,
            step: self.step,
            learning_rate: self.learning_rate,
            epochs: self.epochs,
            seed: self.seed,
            early_stopping: self.early_stopping,
            patience: self.patience,
            mc_passes: self.mc_passes,
            review: self.review,
        }
    }

    pub fn check(&self) -> Result<(), Vec<Problem>> {
        let mut problems = Vec::new();
        if let Err(e) = self.flow().check() {
            problems.push(Problem::at(None, "options", e));
        }
        if !(self.holdout > 0.0 && self.holdout < 0.5) {
            problems.push(Problem::at(
                None,
                "options.holdout",
                format!("must lie in (0, 0.5); got {}", self.holdout),
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

/// The options of the methods with nothing to tune (`quantile_map`, `identity`): how they are
/// evaluated. Unknown keys are refused.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvaluationOptions {
    /// k of k-fold cross-validation (ignored when `holdout` is set).
    pub folds: usize,
    /// Evaluate on this held-out fraction instead of k folds.
    pub holdout: Option<f64>,
    /// Seeds the split.
    pub seed: u64,
}

impl Default for EvaluationOptions {
    fn default() -> Self {
        Self {
            folds: 5,
            holdout: None,
            seed: 0,
        }
    }
}

fn scheme_of(folds: usize, holdout: Option<f64>) -> Scheme {
    match holdout {
        Some(f) => Scheme::Holdout(f),
        None => Scheme::Folds(folds),
    }
}

fn check_scheme(folds: usize, holdout: Option<f64>, problems: &mut Vec<Problem>) {
    if let Err(e) = scheme_of(folds, holdout).check() {
        let field = if holdout.is_some() {
            "options.holdout"
        } else {
            "options.folds"
        };
        problems.push(Problem::at(None, field, e));
    }
}

impl EvaluationOptions {
    pub fn scheme(&self) -> Scheme {
        scheme_of(self.folds, self.holdout)
    }
}

/// The options of `"method": "auto"`. Unknown keys are refused.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoOptions {
    /// k of the k folds every candidate is evaluated on (ignored when `holdout` is set).
    pub folds: usize,
    /// Evaluate every candidate on this held-out fraction instead (one flow training
    /// instead of k).
    pub holdout: Option<f64>,
    /// Seeds the split.
    pub seed: u64,
    /// The figure that picks the winner (lower is better): mae, kl_sym, w1 or mean_error.
    pub objective: Objective,
    /// Breaks ties on `objective`.
    pub tie_break: Objective,
    /// Candidates within this fraction of the best `objective` are tied.
    pub tie_tolerance: f64,
    /// A cell needs this many anchors for the flow to be a candidate.
    pub flow_min_anchors: usize,
    /// The Bayesian candidate's sampler settings.
    pub bayes: FitOptions,
    /// The flow candidate's settings.
    pub flow: FlowOptions,
}

impl Default for AutoOptions {
    fn default() -> Self {
        let rule = Rule::default();
        Self {
            folds: 5,
            holdout: None,
            seed: 0,
            objective: rule.objective,
            tie_break: rule.tie_break,
            tie_tolerance: rule.tie_tolerance,
            flow_min_anchors: 1000,
            bayes: FitOptions::default(),
            flow: FlowOptions::default(),
        }
    }
}

impl AutoOptions {
    pub fn scheme(&self) -> Scheme {
        scheme_of(self.folds, self.holdout)
    }

    pub fn rule(&self) -> Rule {
        Rule {
            objective: self.objective,
            tie_break: self.tie_break,
            tie_tolerance: self.tie_tolerance,
        }
    }
}

/// A method's options, parsed from the request's `options` object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MethodOptions {
    Bayes(TrainingOptions),
    Flow(FlowTrainingOptions),
    /// `quantile_map` or `identity`.
    Plain(Method, EvaluationOptions),
    Auto(AutoOptions),
}

impl MethodOptions {
    /// Parses `options` for `method`, refusing keys that method does not know.
    pub fn parse(method: Method, options: &serde_json::Value) -> Result<Self, Vec<Problem>> {
        fn read<T: serde::de::DeserializeOwned>(v: &serde_json::Value) -> Result<T, Vec<Problem>> {
            serde_json::from_value(v.clone())
                .map_err(|e| vec![Problem::at(None, "options", e.to_string())])
        }
        let parsed = match method {
            Method::Bayes => MethodOptions::Bayes(read(options)?),
            Method::Flow => MethodOptions::Flow(read(options)?),
            Method::QuantileMap | Method::Identity => MethodOptions::Plain(method, read(options)?),
            Method::Auto => MethodOptions::Auto(read(options)?),
        };
        let mut problems = Vec::new();
        match &parsed {
            MethodOptions::Bayes(o) => o.check()?,
            MethodOptions::Flow(o) => o.check()?,
            MethodOptions::Plain(_, o) => check_scheme(o.folds, o.holdout, &mut problems),
            MethodOptions::Auto(o) => {
                check_scheme(o.folds, o.holdout, &mut problems);
                for (field, e) in [
                    ("options", o.rule().check()),
                    ("options.bayes", o.bayes.check()),
                    ("options.flow", o.flow.check()),
                ] {
                    if let Err(e) = e {
                        problems.push(Problem::at(None, field, e));
                    }
                }
                if o.flow_min_anchors < 2 {
                    problems.push(Problem::at(
                        None,
                        "options.flow_min_anchors",
                        "must be at least 2",
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(parsed)
        } else {
            Err(problems)
        }
    }

    pub fn force(&self) -> bool {
        match self {
            MethodOptions::Bayes(o) => o.force,
            MethodOptions::Flow(o) => o.force,
            MethodOptions::Plain(..) | MethodOptions::Auto(_) => false,
        }
    }

    /// The options with every default filled in, as the job records them.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            MethodOptions::Bayes(o) => serde_json::to_value(o),
            MethodOptions::Flow(o) => serde_json::to_value(o),
            MethodOptions::Plain(_, o) => serde_json::to_value(o),
            MethodOptions::Auto(o) => serde_json::to_value(o),
        }
        .unwrap_or_default()
    }
}

/// A checked training request: which judge, which of its rubrics (all when `None`), how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingRequest {
    pub judge: JudgeName,
    pub method: Method,
    pub rubrics: Option<Vec<RubricName>>,
    /// The method's options with every default filled in (see [`MethodOptions`]).
    pub options: serde_json::Value,
}

impl TrainingRequest {
    pub fn options(&self) -> Result<MethodOptions, Vec<Problem>> {
        MethodOptions::parse(self.method, &self.options)
    }
}

/// A version as the job that made it reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionRef {
    pub rubric: RubricName,
    pub version: i64,
    pub passed: bool,
    pub active: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: JobId,
    pub judge: JudgeName,
    pub method: Method,
    pub request: serde_json::Value,
    pub state: JobState,
    /// 0 to 1.
    pub progress: f64,
    /// What the running job last reported (JSON text; empty before that).
    pub detail: String,
    pub error: Option<String>,
    pub attempts: i64,
    pub created_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
    pub versions: Vec<VersionRef>,
}

/// What a flow version holds for its cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowFit {
    /// The judge's flow (shared by its rubrics) and this cell's rubric index in it.
    pub weights: FlowWeights,
    pub rubric: usize,
    /// σ above this routes a corrected score to review.
    pub review_sigma: f64,
    /// The range of judge scores tabulated for corrections.
    pub table_lo: f64,
    pub table_hi: f64,
    /// Anchors of this cell the flow was trained on (the rest were held out).
    pub trained_on: usize,
}

/// What a method fitted for one cell: all a correction needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Fitted {
    Bayes {
        posterior: RubricPosterior,
        diagnostics: FitDiagnostics,
    },
    Flow(Box<FlowFit>),
    QuantileMap(QuantileMap),
    Identity,
}

impl Fitted {
    pub fn method(&self) -> Method {
        match self {
            Fitted::Bayes { .. } => Method::Bayes,
            Fitted::Flow(_) => Method::Flow,
            Fitted::QuantileMap(_) => Method::QuantileMap,
            Fitted::Identity => Method::Identity,
        }
    }

    /// Why this version should not be activated unless forced.
    pub fn failure(&self) -> Option<String> {
        match self {
            Fitted::Bayes { diagnostics, .. } => diagnostics.failure(),
            Fitted::Flow(f) => (!f.weights.train_loss.is_finite())
                .then(|| "the training loss is not finite".to_owned()),
            Fitted::QuantileMap(_) | Fitted::Identity => None,
        }
    }
}

/// A fitted version about to be stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewVersion {
    pub rubric: RubricName,
    pub anchor_count: i64,
    pub anchor_digest: String,
    pub fitted: Fitted,
    pub evaluation: Option<Comparison>,
    /// An `auto` job's choice for this cell: every candidate's figures and why this won.
    pub decision: Option<Decision>,
}

/// One immutable calibrator version of a cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibratorVersion {
    pub id: CalibratorId,
    pub key: CellKey,
    pub version: i64,
    pub job_id: Option<JobId>,
    pub anchor_count: i64,
    pub anchor_digest: String,
    pub fitted: Fitted,
    /// Held-out figures beside the raw judge's; `None` when the cell had too few anchors.
    pub evaluation: Option<Comparison>,
    /// An `auto` job's choice for this cell.
    pub decision: Option<Decision>,
    pub failure: Option<String>,
    pub created_at_ms: i64,
    pub active: bool,
}

impl CalibratorVersion {
    pub fn method(&self) -> Method {
        self.fitted.method()
    }

    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_refuse_unknown_keys_and_bad_values() {
        let e = serde_json::from_str::<TrainingOptions>(r#"{"draw": 10}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `draw`"), "{e}");
        let o: TrainingOptions = serde_json::from_str(r#"{"draws": 5}"#).unwrap();
        assert_eq!(o.check().unwrap_err()[0].field, "options");
        let o: TrainingOptions = serde_json::from_str(r#"{"holdout": 1.5}"#).unwrap();
        assert_eq!(o.check().unwrap_err()[0].field, "options.holdout");
        // Options of the other method are refused too.
        let flow_only = serde_json::json!({"epochs": 10});
        assert!(MethodOptions::parse(Method::Bayes, &flow_only).is_err());
        assert!(MethodOptions::parse(Method::Flow, &flow_only).is_ok());
        assert!(TrainingOptions::default().check().is_ok());
    }

    #[test]
    fn methods_parse_by_name() {
        assert_eq!(Method::parse("bayes"), Ok(Method::Bayes));
        assert_eq!(Method::parse("flow"), Ok(Method::Flow));
        assert!(Method::parse("Bayes").unwrap_err().contains("bayes"));
    }
}
