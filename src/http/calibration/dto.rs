//! What the calibration routes answer, and the schema of a training request composed from the
//! real option types.

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::panel_dto::PanelVersionDto;
use crate::calibrate::Method;
use crate::calibrate::bayes::RubricPosterior;
use crate::calibrate::conformal::{Intervals, Source};
use crate::calibrate::cv::Scheme;
use crate::calibrate::drift::BOUND_DELTA;
use crate::calibrate::flow::{FlowSummary, Schedule};
use crate::calibrate::quality::{Comparison, Figures};
use crate::calibrate::select::Decision;
use crate::domain::calibration::{CalibratorVersion, Job};
use crate::domain::training;
use crate::http::rfc3339;

/// The body of `POST /v1/judges/{judge}/calibrations`: one alternative per method, each with
/// its own options (every field optional; unknown fields are refused). A method's options are
/// the job's (`force`, `folds`, `holdout`, `seed`) and the method's own; `auto` takes its rule
/// and each candidate's options under the candidate's name.
pub struct TrainingRequestDoc;

fn merged(parts: &[&str], extra: Value) -> Value {
    // One object schema with the properties of the named component schemas.
    let sets = training::options_schemas();
    let mut properties = serde_json::Map::new();
    for name in parts {
        if let Some((_, schema, _)) = sets.iter().find(|(n, _, _)| n == name) {
            let schema = serde_json::to_value(schema).unwrap_or_default();
            if let Some(p) = schema.get("properties").and_then(Value::as_object) {
                properties.extend(p.clone());
            }
        }
    }
    if let Value::Object(extra) = extra {
        properties.extend(extra);
    }
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

fn request_schema() -> Value {
    let rubrics = json!({
        "type": ["array", "null"], "minItems": 1,
        "description": "Rubrics to train (default: every cell of the judge with at least jobs.min_anchors anchors). All rubrics of one job are fitted together and share strength.",
        "items": crate::http::schema::name_json(),
    });
    let mut judge_version =
        serde_json::to_value(crate::http::schema::judge_version()).unwrap_or_default();
    judge_version["description"] = json!(
        "Fit this judge version's anchors only (default: the judge's newest version with anchors, the one whose first anchor arrived last). Anchors of different judge versions are never fitted together."
    );
    let member_versions = json!({
        "type": ["object", "null"],
        "description": "A panel's: the judge version of a member's anchors to fit, by member (null: its anchors uploaded without a version). A member not named fits the anchors its unversioned requests are served by: its unversioned anchors where it has any, else its only judge version, else the one its active calibrations were trained on. The job's request shows every member's, resolved.",
        "additionalProperties": crate::http::schema::judge_version(),
    });
    // Each alternative, its method and its options are titled (`BayesTraining`,
    // `BayesMethod`, `BayesTrainingOptions`) so that generated clients name them.
    let alternative = |method: &str, description: String, mut options: Value| {
        let title: String = method
            .split('_')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect();
        options["title"] = json!(format!("{title}TrainingOptions"));
        json!({
            "type": "object",
            "title": format!("{title}Training"),
            "description": description,
            "required": ["method"],
            "additionalProperties": false,
            "properties": {
                "method": {"type": "string", "enum": [method], "title": format!("{title}Method")},
                "rubrics": rubrics,
                "judge_version": judge_version,
                "member_versions": member_versions,
                "options": options,
            },
        })
    };
    let mut alternatives: Vec<Value> = Method::ALL
        .iter()
        .map(|m| {
            let (name, _, _) = m.options_schema();
            alternative(
                m.as_str(),
                format!("{}: {}", m.as_str(), m.label()),
                merged(&["JobOptions", &name], json!({})),
            )
        })
        .collect();
    let candidates: serde_json::Map<String, Value> = Method::ALL
        .iter()
        .map(|m| {
            let (name, _, _) = m.options_schema();
            (
                m.as_str().to_owned(),
                json!({"$ref": format!("#/components/schemas/{name}")}),
            )
        })
        .collect();
    alternatives.push(alternative(
        "auto",
        "auto: every method on the same held-out folds, the winner served per cell".into(),
        merged(&["AutoSettings"], Value::Object(candidates)),
    ));
    json!({"oneOf": alternatives})
}

impl PartialSchema for TrainingRequestDoc {
    fn schema() -> RefOr<Schema> {
        serde_json::from_value(request_schema()).expect("a well-formed schema")
    }
}

impl ToSchema for TrainingRequestDoc {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        for (name, schema, refs) in training::options_schemas() {
            schemas.push((name, schema));
            schemas.extend(refs);
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct JobVersionDto {
    pub rubric: String,
    pub version: i64,
    /// Passed its diagnostics.
    pub passed: bool,
    /// The version the cell serves now.
    pub active: bool,
}

#[derive(Serialize, ToSchema)]
pub struct JobDto {
    pub id: String,
    pub judge: String,
    pub method: String,
    /// `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub state: String,
    /// 0 to 1.
    pub progress: f64,
    /// What the job last reported: for a flow, `{"epoch", "loss"}`; for auto, `{"step"}`; a
    /// panel's, `{"joined": {rubric: {"items", "member_anchors"}}}` (the items every member
    /// scored, and each member's anchors before the join) once done.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub detail: Option<serde_json::Value>,
    /// Times a process has taken the job (more than 1 after a process died running it).
    pub attempts: i64,
    /// The request with every default filled in.
    #[schema(value_type = Object)]
    pub request: serde_json::Value,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub versions: Vec<JobVersionDto>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

impl From<Job> for JobDto {
    fn from(j: Job) -> Self {
        Self {
            id: j.id.to_string(),
            judge: j.judge.to_string(),
            method: j.kind.to_string(),
            state: j.state.as_str().to_owned(),
            progress: j.progress,
            detail: serde_json::from_str(&j.detail).ok(),
            attempts: j.attempts,
            request: j.request,
            error: j.error,
            versions: j
                .versions
                .into_iter()
                .map(|v| JobVersionDto {
                    rubric: v.rubric.to_string(),
                    version: v.version,
                    passed: v.passed,
                    active: v.active,
                })
                .collect(),
            created_at: rfc3339(j.created_at_ms),
            started_at: j.started_at_ms.map(rfc3339),
            finished_at: j.finished_at_ms.map(rfc3339),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct PosteriorDto {
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

#[derive(Serialize, ToSchema)]
pub struct DiagnosticsDto {
    /// Largest rank-normalised split R-hat (null if undefined).
    pub rhat_max: Option<f64>,
    pub ess_bulk_min: Option<f64>,
    pub ess_tail_min: Option<f64>,
    pub divergences: u64,
    /// Rounds the sampler was extended by (longer runs, more chains) because an earlier round
    /// missed the gate; 0 where the first passed. At most 2.
    pub extensions: u32,
}

#[derive(Serialize, ToSchema)]
pub struct EvaluationDto {
    /// Held-out anchors evaluated.
    pub n: usize,
    /// mean(corrected) − mean(reference).
    pub mean_error: f64,
    pub mae: f64,
    pub pearson: f64,
    /// KL(corrected ‖ reference) between KDEs of the two (the paper's KL column); each KDE's
    /// bandwidth is at least the reference's level spacing. Null for versions trained before
    /// it was recorded per direction.
    pub kl_corrected_reference: Option<f64>,
    /// KL(reference ‖ corrected), the other direction.
    pub kl_reference_corrected: Option<f64>,
    /// The mean of the two directions (`auto`'s default tie-break).
    pub kl_mean: Option<f64>,
    /// Wasserstein-1 between corrected and reference scores.
    pub w1: f64,
}

impl From<Figures> for EvaluationDto {
    fn from(e: Figures) -> Self {
        Self {
            n: e.n,
            mean_error: e.mean_error,
            mae: e.mae,
            pearson: e.pearson,
            kl_corrected_reference: finite(e.kl_corrected_reference),
            kl_reference_corrected: finite(e.kl_reference_corrected),
            kl_mean: finite(e.kl_mean),
            w1: e.w1,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct ComparisonDto {
    /// `5-fold` or `holdout 0.2`.
    pub scheme: String,
    /// This version's held-out corrections.
    pub calibrated: EvaluationDto,
    /// The raw judge scores of the same anchors.
    pub raw: EvaluationDto,
}

impl From<Comparison> for ComparisonDto {
    fn from(c: Comparison) -> Self {
        Self {
            scheme: scheme_text(c.scheme),
            calibrated: c.calibrated.into(),
            raw: c.raw.into(),
        }
    }
}

/// How a flow version was trained.
#[derive(Serialize, ToSchema)]
pub struct RecipeDto {
    pub learning_rate: f64,
    pub schedule: Schedule,
    /// Anchors per optimiser step; absent for full-batch steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
    /// Epochs asked for (`epochs_run` says how many ran); absent when `steps` counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epochs: Option<u64>,
    /// Optimiser steps, when they counted in place of epochs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// The validation fraction, when early stopping was on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_stopping: Option<f64>,
}

#[derive(Serialize, ToSchema)]
pub struct FlowDto {
    pub recipe: RecipeDto,
    /// Anchors of the cell the flow was trained on (the rest were held out for evaluation).
    pub trained_on: usize,
    pub epochs_run: u64,
    pub stopped_early: bool,
    /// Mean squared error on the training anchors at the last epoch (score units²).
    pub train_loss: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_loss: Option<f64>,
    /// MC-dropout passes per correction.
    pub mc_passes: usize,
    /// σ above this routes a corrected score to review.
    pub review_sigma: f64,
    /// The judge scores the correction table covers; others are evaluated directly.
    pub table: [f64; 2],
    /// How well routing on sigma caught large errors on held-out anchors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_audit: Option<ReviewAuditDto>,
}

/// The review routing checked on held-out anchors. Sigma is the spread of the flow's own map
/// over dropout masks (its uncertainty about the mean reference at that judge score), not the
/// reference's noise, which makes most large errors.
#[derive(Serialize, ToSchema)]
pub struct ReviewAuditDto {
    pub held_out: usize,
    /// Share of them routed to review.
    pub routed: f64,
    /// Share of the largest 10% absolute errors that were routed; routing at random catches
    /// `routed`.
    pub large_errors_routed: f64,
    /// The same when as many are routed by the widest 95% interval instead.
    pub large_errors_routed_by_width: Option<f64>,
}

impl From<FlowSummary> for FlowDto {
    fn from(f: FlowSummary) -> Self {
        Self {
            recipe: RecipeDto {
                learning_rate: f.config.learning_rate,
                schedule: f.config.schedule,
                batch_size: f.config.batch_size,
                epochs: f.config.steps.is_none().then_some(f.config.epochs),
                steps: f.config.steps,
                early_stopping: f.config.early_stopping,
            },
            trained_on: f.trained_on,
            epochs_run: f.epochs_run,
            stopped_early: f.stopped_early,
            train_loss: f.train_loss,
            validation_loss: f.validation_loss,
            mc_passes: f.mc_passes,
            review_sigma: f.review_sigma,
            table: [f.table.0, f.table.1],
            review_audit: f.review_audit.map(|a| ReviewAuditDto {
                held_out: a.held_out,
                routed: a.routed,
                large_errors_routed: a.large_errors_routed,
                large_errors_routed_by_width: a.large_errors_routed_by_width,
            }),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct CandidateDto {
    /// identity (the raw judge), quantile_map, bayes or flow.
    pub method: String,
    /// Its held-out figures on the same anchors as every other candidate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<EvaluationDto>,
    /// Why it was not considered for this cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
}

/// What an `auto` job saw and chose for this cell.
#[derive(Serialize, ToSchema)]
pub struct DecisionDto {
    /// `5-fold` or `holdout 0.2`: the anchors every candidate was evaluated on.
    pub scheme: String,
    /// The figure that picked the winner (lower is better), and the tie-break.
    pub objective: String,
    pub tie_break: String,
    /// Candidates within this fraction of the best objective were tied.
    pub tie_tolerance: f64,
    pub candidates: Vec<CandidateDto>,
    pub chosen: String,
    pub reason: String,
    /// The Bayesian fit's beta posterior on every anchor (kept whichever method won, for the
    /// canary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta: Option<PosteriorDto>,
    /// The held-out figures of the choice itself, which the version's `evaluation` records:
    /// each held-out anchor predicted by the method chosen on the other anchors (five groups).
    /// The winner's entry in `candidates` is optimistic: it won on those anchors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nested: Option<EvaluationDto>,
}

/// One bin of the judge score and its interval.
#[derive(Serialize, ToSchema)]
pub struct IntervalBinDto {
    /// Judge scores from `from` (inclusive) to `to` (exclusive); null is open-ended.
    pub from: Option<f64>,
    pub to: Option<f64>,
    /// Held-out anchors in the bin.
    pub anchors: usize,
    /// The band of held-out residuals (reference − corrected) added to the corrected score
    /// (`conformal`), or the factors the method's own half-width is scaled by (`scaled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<[f64; 2]>,
    /// Share of the bin's held-out anchors inside their interval.
    pub held_out_coverage: Option<f64>,
}

/// A version's 95% predictive intervals and how often they covered anchors it did not see.
#[derive(Serialize, ToSchema)]
pub struct IntervalsDto {
    pub level: f64,
    /// `conformal` (the corrected score plus the band of held-out residuals of the judge
    /// score's bin), `scaled` (the Bayesian posterior predictive, its half-width scaled by the
    /// band of the bin's held-out residuals in units of it) or `method` (the posterior
    /// predictive as is: versions trained before bands were conformalised).
    pub source: String,
    /// Held-out anchors the coverage was measured on (conformal: each checked against bands
    /// made without its fifth of them).
    pub held_out: usize,
    pub held_out_coverage: Option<f64>,
    /// A bound on the share of new anchors the intervals miss, which holds given this
    /// version's training anchors except for one version in 1,000: the miss rate the drift
    /// alarm tests against (the nominal 0.05 for `method`).
    pub miss_bound: f64,
    pub bins: Vec<IntervalBinDto>,
    /// The units (raters, or uploads naming none) this version's training anchors came in,
    /// checked against these intervals: where the drift alarm's estimate of how alike one
    /// unit's misses are starts. Absent for versions trained before units were kept, and where
    /// the anchors came in fewer than two units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training_units: Option<TrainingUnitsDto>,
}

/// The training anchors' units, as the drift alarm starts from them.
#[derive(Serialize, ToSchema)]
pub struct TrainingUnitsDto {
    pub units: usize,
    pub anchors: usize,
    /// Training anchors outside their interval.
    pub misses: usize,
    /// The intra-unit correlation of misses the alarm starts betting with (estimated from
    /// these units, shrunk towards 0.05 and widened by 1.25; a declared
    /// `calibrators.drift_max_rho` caps it).
    pub rho: f64,
}

impl From<Intervals> for IntervalsDto {
    fn from(i: Intervals) -> Self {
        Self {
            level: i.level,
            source: match i.source {
                Source::Conformal => "conformal",
                Source::Scaled => "scaled",
                Source::Method => "method",
            }
            .to_owned(),
            miss_bound: i.miss_bound(BOUND_DELTA),
            held_out: i.held_out,
            held_out_coverage: i.held_out_coverage,
            bins: i
                .bins
                .into_iter()
                .map(|b| IntervalBinDto {
                    from: b.from,
                    to: b.to,
                    anchors: b.anchors,
                    band: b.band.map(|(lo, hi)| [lo, hi]),
                    held_out_coverage: b.held_out_coverage,
                })
                .collect(),
            training_units: i.units.map(|u| TrainingUnitsDto {
                units: u.units.round() as usize,
                anchors: u.anchors.round() as usize,
                misses: u.misses.round() as usize,
                rho: u.rho(),
            }),
        }
    }
}

fn scheme_text(s: Scheme) -> String {
    match s {
        Scheme::Folds(k) => format!("{k}-fold"),
        Scheme::Holdout(f) => format!("holdout {f}"),
    }
}

fn posterior_dto(p: &RubricPosterior) -> PosteriorDto {
    PosteriorDto {
        alpha_mean: p.alpha_mean,
        beta_mean: p.beta_mean,
        sigma_mean: p.sigma_mean,
        beta_interval: [p.beta_lo, p.beta_hi],
        beta_collapse_probability: p.beta_collapse_probability,
        canary: p.canary,
    }
}

impl From<Decision> for DecisionDto {
    fn from(d: Decision) -> Self {
        Self {
            scheme: scheme_text(d.scheme),
            objective: d.rule.objective.as_str().to_owned(),
            tie_break: d.rule.tie_break.as_str().to_owned(),
            tie_tolerance: d.rule.tie_tolerance,
            candidates: d
                .candidates
                .into_iter()
                .map(|c| CandidateDto {
                    method: c.method.to_string(),
                    evaluation: c.evaluation.map(Into::into),
                    excluded: c.excluded,
                })
                .collect(),
            chosen: d.chosen.to_string(),
            reason: d.reason,
            beta: d.beta.as_ref().map(posterior_dto),
            nested: d.nested.map(Into::into),
        }
    }
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

#[derive(Serialize, ToSchema)]
pub struct VersionDto {
    pub judge: String,
    pub rubric: String,
    pub version: i64,
    pub method: String,
    /// The version the cell serves.
    pub active: bool,
    /// Passed its diagnostics.
    pub passed: bool,
    /// Why it did not pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The judge version whose anchors it was fitted on; absent for unversioned anchors. It
    /// serves requests naming that judge version (the newest passed one does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_version: Option<String>,
    /// Anchors the fit saw, and the SHA-256 of that snapshot.
    pub anchor_count: i64,
    pub anchor_digest: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    pub created_at: String,
    /// bayes versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub posterior: Option<PosteriorDto>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<DiagnosticsDto>,
    /// flow versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowDto>,
    /// Absent when the cell had too few anchors to hold some out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<ComparisonDto>,
    /// Versions made by an `auto` job: every candidate's figures and why this one won.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionDto>,
    /// Its 95% predictive intervals per bin of the judge score, with their held-out coverage;
    /// absent when none could be made (under 39 held-out anchors for a method without its
    /// own interval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<IntervalsDto>,
    /// How the version's held-out bias varies between the groups its anchors name (the
    /// systems whose outputs were judged): each group's mean residual with its standard
    /// error, and the between-group standard deviation τ that run-level answers use. Absent
    /// where the anchors name fewer than two groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<crate::calibrate::runlevel::groups::GroupBias>,
    /// A panel's version: how its members' scores are fused, and what each member is worth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub panel: Option<PanelVersionDto>,
}

impl From<CalibratorVersion> for VersionDto {
    fn from(v: CalibratorVersion) -> Self {
        let method = v.method().to_string();
        let posterior = v.model.posterior().map(posterior_dto);
        let diagnostics = v.model.diagnostics().map(|d| DiagnosticsDto {
            rhat_max: finite(d.rhat_max),
            ess_bulk_min: finite(d.ess_bulk_min),
            ess_tail_min: finite(d.ess_tail_min),
            divergences: d.divergences,
            extensions: d.extensions,
        });
        let flow = v.model.flow().map(FlowDto::from);
        Self {
            judge: v.key.judge.to_string(),
            rubric: v.key.rubric.to_string(),
            version: v.version,
            method,
            active: v.active,
            passed: v.failure.is_none(),
            failure: v.failure,
            judge_version: v.judge_version.map(String::from),
            anchor_count: v.anchor_count,
            anchor_digest: v.anchor_digest,
            job_id: v.job_id.map(|j| j.to_string()),
            created_at: rfc3339(v.created_at_ms),
            posterior,
            diagnostics,
            flow,
            evaluation: v.evaluation.map(Into::into),
            decision: v.decision.map(Into::into),
            intervals: v.intervals.map(Into::into),
            groups: v.groups,
            panel: v.fusion.map(Into::into),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct VersionsResponse {
    /// Newest first.
    pub versions: Vec<VersionDto>,
}
