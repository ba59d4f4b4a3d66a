//! Training jobs and calibrator versions: what the people who own a judge's calibration use.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{AnyKey, Authorized, Json, Path, Query, TrainScope, cell_key};
use super::{AppState, rfc3339};
use crate::calibrate::bayes::RubricPosterior;
use crate::calibrate::metrics::{Comparison, Evaluation, Scheme};
use crate::calibrate::select::Decision;
use crate::domain::Problem;
use crate::domain::calibration::{CalibratorVersion, Fitted, Job, JobId, Method};
use crate::service::TrainingBody;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingRequestBody {
    method: String,
    rubrics: Option<Vec<String>>,
    #[serde(default = "empty_object")]
    options: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

/// Start training calibrators for a judge's cells.
#[derive(ToSchema)]
#[allow(dead_code)] // Documents the body; the handler reads `TrainingRequestBody`.
pub struct TrainingRequestDoc {
    /// `bayes`: the hierarchical Bayesian linear corrector; `flow`: the neural-ODE score
    /// transport with MC-dropout σ; `quantile_map`: the marginal optimal-transport map;
    /// `identity`: the raw judge; `auto`: fits them on the same held-out folds and
    /// activates the winner per cell (the version records the decision).
    #[schema(example = "bayes")]
    method: String,
    /// Rubrics to train (default: every cell of the judge with at least jobs.min_anchors
    /// anchors). All rubrics of one job are fitted together and share strength.
    rubrics: Option<Vec<String>>,
    options: Option<TrainingOptionsDoc>,
}

/// Every field is optional; fields the method does not know are refused. `force` for `bayes`
/// and `flow`; `folds`, `holdout` and the sampler fields for `bayes`; `holdout` (default 0.2)
/// and the network fields for `flow`; `folds`, `holdout` and `seed` for `quantile_map` and
/// `identity`; for `auto`: `folds`, `holdout`, `seed`, `objective`, `tie_break`,
/// `tie_tolerance`, `flow_min_anchors`, and the candidates' settings as objects `bayes`
/// (sampler fields) and `flow` (network fields).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct TrainingOptionsDoc {
    /// Activate the new versions even if they fail their diagnostics (default false).
    force: Option<bool>,
    /// k of k-fold cross-validation for the evaluation (default 5, 2 to 20).
    folds: Option<usize>,
    /// Evaluate on this held-out fraction instead of k folds (0 to 1).
    holdout: Option<f64>,
    /// NUTS chains (default 2).
    chains: Option<u64>,
    /// Warm-up iterations per chain (default 500).
    warmup: Option<u64>,
    /// Kept draws per chain (default 1000).
    draws: Option<u64>,
    /// NUTS target acceptance (default 0.9).
    target_accept: Option<f64>,
    /// Same anchors + same seed = same fit (default 0).
    seed: Option<u64>,
    /// `alpha_mean` (0), `alpha_sd` (2), `beta_mean` (1), `beta_sd` (2), `sigma_scale` (1),
    /// `tau_scale` (1).
    priors: Option<serde_json::Value>,
    /// The canary fires when Pr(beta < collapse_beta) > collapse_probability (0.3, 0.05).
    collapse_beta: Option<f64>,
    collapse_probability: Option<f64>,
    /// flow: hidden width (64), rubric embedding size (4), dropout (0.1), RK4 step (0.1),
    /// Adam learning rate (0.003), full-batch epochs (1500).
    hidden: Option<i64>,
    embedding_dim: Option<i64>,
    dropout: Option<f64>,
    step: Option<f64>,
    learning_rate: Option<f64>,
    epochs: Option<u64>,
    /// flow: hold out this fraction for early stopping (off by default), with `patience`
    /// epochs (100).
    early_stopping: Option<f64>,
    patience: Option<u64>,
    /// flow: MC-dropout passes at inference (40).
    mc_passes: Option<usize>,
    /// flow: `{"top_percent": 5}` (default: the 5% highest σ on the anchors) or
    /// `{"sigma_above": 0.3}`.
    #[schema(value_type = Object)]
    review: Option<serde_json::Value>,
    /// auto: the held-out figure that picks the winner per cell: `mae` (default), `kl_sym`,
    /// `w1` or `mean_error` (absolute). A candidate worse than the raw judge on it never wins.
    objective: Option<String>,
    /// auto: breaks ties on the objective (default `kl_sym`).
    tie_break: Option<String>,
    /// auto: candidates within this fraction of the best objective are tied (default 0.01).
    tie_tolerance: Option<f64>,
    /// auto: a cell needs this many anchors for the flow to be a candidate (default 1000).
    flow_min_anchors: Option<usize>,
    /// auto: the Bayesian candidate's sampler fields, as for `bayes`.
    #[schema(value_type = Object)]
    bayes: Option<serde_json::Value>,
    /// auto: the flow candidate's network fields, as for `flow`.
    #[schema(value_type = Object)]
    flow: Option<serde_json::Value>,
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
    /// What the running job last reported: for a flow, `{"epoch", "loss"}`; for auto,
    /// `{"step"}`.
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
            method: j.method.to_string(),
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

/// Train calibrators for a judge.
///
/// Queues a durable job and answers at once with its id (and `Location: /v1/jobs/{id}`). Each
/// trained cell gets a new numbered version, evaluated on held-out anchors beside the raw
/// judge. A version that passes its diagnostics (R-hat < 1.01, bulk ESS ≥ 400, no
/// divergences) becomes the one the cell serves; one that fails is kept, with the reason,
/// but not activated unless `options.force` is set.
#[utoipa::path(
    post, path = "/v1/judges/{judge}/calibrations", tag = "calibration",
    params(("judge" = String, Path)),
    request_body = TrainingRequestDoc,
    responses(
        (status = 202, description = "Queued", body = JobDto),
        (status = 400, description = "Body is not valid JSON, or has unknown fields", body = ErrorBody),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "Key lacks the train scope", body = ErrorBody),
        (status = 404, description = "The judge has no anchors", body = ErrorBody),
        (status = 422, description = "Bad method, rubric or option", body = ErrorBody),
    ),
    security(("api_key" = ["train"]))
)]
pub async fn train(
    State(state): State<AppState>,
    _auth: Authorized<TrainScope>,
    Path(judge): Path<String>,
    Json(body): Json<TrainingRequestBody>,
) -> Result<impl IntoResponse, ApiError> {
    tracing::Span::current().record("judge", judge.as_str());
    let job = state
        .service
        .submit_training(
            &judge,
            TrainingBody {
                method: body.method,
                rubrics: body.rubrics,
                options: body.options,
            },
        )
        .await?;
    let location = format!("/v1/jobs/{}", job.id);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        axum::Json(JobDto::from(job)),
    ))
}

/// A training job: state, progress, the versions it made, or why it failed.
#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "calibration",
    params(("id" = String, Path)),
    responses(
        (status = 200, body = JobDto),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn job(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path(id): Path<String>,
) -> Result<axum::Json<JobDto>, ApiError> {
    let id = JobId::parse(&id).ok_or_else(|| {
        ApiError::invalid(
            "the URL names no job",
            vec![Problem::at(
                None,
                "id",
                format!("{id:?} is not a job id (a UUID)"),
            )],
        )
    })?;
    Ok(axum::Json(state.service.job(id).await?.into()))
}

/// Cancel a job: a queued one at once; a running one stops within a lease renewal
/// (jobs.lease_secs / 3) and ends `cancelled`, storing nothing.
#[utoipa::path(
    post, path = "/v1/jobs/{id}/cancel", tag = "calibration",
    params(("id" = String, Path)),
    responses(
        (status = 200, description = "Cancelled, or cancelling (state still running)", body = JobDto),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "Key lacks the train scope", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job has already finished", body = ErrorBody),
    ),
    security(("api_key" = ["train"]))
)]
pub async fn cancel(
    State(state): State<AppState>,
    _auth: Authorized<TrainScope>,
    Path(id): Path<String>,
) -> Result<axum::Json<JobDto>, ApiError> {
    let id = job_id(&id)?;
    Ok(axum::Json(state.service.cancel(id).await?.into()))
}

fn job_id(raw: &str) -> Result<JobId, ApiError> {
    JobId::parse(raw).ok_or_else(|| {
        ApiError::invalid(
            "the URL names no job",
            vec![Problem::at(
                None,
                "id",
                format!("{raw:?} is not a job id (a UUID)"),
            )],
        )
    })
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
}

#[derive(Serialize, ToSchema)]
pub struct EvaluationDto {
    /// Held-out anchors evaluated.
    pub n: usize,
    /// mean(corrected) − mean(reference).
    pub mean_error: f64,
    pub mae: f64,
    pub pearson: f64,
    /// Symmetrised KL between KDEs of corrected and reference scores.
    pub kl_sym: f64,
    /// Wasserstein-1 between corrected and reference scores.
    pub w1: f64,
}

impl From<Evaluation> for EvaluationDto {
    fn from(e: Evaluation) -> Self {
        Self {
            n: e.n,
            mean_error: e.mean_error,
            mae: e.mae,
            pearson: e.pearson,
            kl_sym: e.kl_sym,
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

#[derive(Serialize, ToSchema)]
pub struct FlowDto {
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
                    method: Method::of(c.method).to_string(),
                    evaluation: c.evaluation.map(Into::into),
                    excluded: c.excluded,
                })
                .collect(),
            chosen: Method::of(d.chosen).to_string(),
            reason: d.reason,
            beta: d.beta.as_ref().map(posterior_dto),
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
}

impl From<CalibratorVersion> for VersionDto {
    fn from(v: CalibratorVersion) -> Self {
        let method = v.fitted.method().to_string();
        let (posterior, diagnostics, flow) = match v.fitted {
            Fitted::Bayes {
                posterior: p,
                diagnostics: d,
            } => (
                Some(posterior_dto(&p)),
                Some(DiagnosticsDto {
                    rhat_max: finite(d.rhat_max),
                    ess_bulk_min: finite(d.ess_bulk_min),
                    ess_tail_min: finite(d.ess_tail_min),
                    divergences: d.divergences,
                }),
                None,
            ),
            Fitted::Flow(f) => (
                None,
                None,
                Some(FlowDto {
                    trained_on: f.trained_on,
                    epochs_run: f.weights.epochs_run,
                    stopped_early: f.weights.stopped_early,
                    train_loss: f.weights.train_loss,
                    validation_loss: f.weights.validation_loss,
                    mc_passes: f.weights.options.mc_passes,
                    review_sigma: f.review_sigma,
                    table: [f.table_lo, f.table_hi],
                }),
            ),
            Fitted::QuantileMap(_) | Fitted::Identity => (None, None, None),
        };
        Self {
            judge: v.key.judge.to_string(),
            rubric: v.key.rubric.to_string(),
            version: v.version,
            method,
            active: v.active,
            passed: v.failure.is_none(),
            failure: v.failure,
            anchor_count: v.anchor_count,
            anchor_digest: v.anchor_digest,
            job_id: v.job_id.map(|j| j.to_string()),
            created_at: rfc3339(v.created_at_ms),
            posterior,
            diagnostics,
            flow,
            evaluation: v.evaluation.map(Into::into),
            decision: v.decision.map(Into::into),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct VersionsResponse {
    /// Newest first.
    pub versions: Vec<VersionDto>,
}

/// A cell's calibrator versions, newest first, with their posterior, diagnostics and held-out
/// evaluation beside the raw judge.
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/calibrators", tag = "calibration",
    params(("judge" = String, Path), ("rubric" = String, Path)),
    responses(
        (status = 200, body = VersionsResponse),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "No such cell", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn versions(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path((judge, rubric)): Path<(String, String)>,
) -> Result<axum::Json<VersionsResponse>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let versions = state.service.versions(&key).await?;
    Ok(axum::Json(VersionsResponse {
        versions: versions.into_iter().map(Into::into).collect(),
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportParams {
    /// A version to draw instead of the active one.
    version: Option<i64>,
}

/// A picture of the cell's active calibrator (or `version`), for a person: corrected against
/// reference scores on the cell's anchors (the raw judge in grey), and the residuals against
/// the judge score. The anchors are the ones the version was fitted on, so the picture is
/// in-sample; the title gives the held-out MAE beside the raw judge's.
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/report.svg", tag = "calibration",
    params(("judge" = String, Path), ("rubric" = String, Path), ReportParams),
    responses(
        (status = 200, description = "An SVG image", content_type = "image/svg+xml", body = String),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 404, description = "No such cell, no active calibrator, or no such version", body = ErrorBody),
        (status = 422, description = "Bad judge or rubric name", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn report(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path((judge, rubric)): Path<(String, String)>,
    Query(params): Query<ReportParams>,
) -> Result<impl IntoResponse, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let svg = state.service.report_svg(&key, params.version).await?;
    Ok(([(header::CONTENT_TYPE, "image/svg+xml")], svg))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ActivateParams {
    /// Activate even a version that failed its diagnostics.
    #[serde(default)]
    force: bool,
}

/// Make a version the one the cell serves (every process picks it up within
/// calibrators.refresh_millis). A version that failed its diagnostics needs `force=true`.
#[utoipa::path(
    post, path = "/v1/cells/{judge}/{rubric}/calibrators/{version}/activate", tag = "calibration",
    params(("judge" = String, Path), ("rubric" = String, Path), ("version" = i64, Path), ActivateParams),
    responses(
        (status = 200, body = VersionDto),
        (status = 401, description = "No or unknown API key", body = ErrorBody),
        (status = 403, description = "Key lacks the train scope", body = ErrorBody),
        (status = 404, description = "No such cell or version", body = ErrorBody),
        (status = 409, description = "The version failed its diagnostics and force is not set", body = ErrorBody),
    ),
    security(("api_key" = ["train"]))
)]
pub async fn activate(
    State(state): State<AppState>,
    _auth: Authorized<TrainScope>,
    Path((judge, rubric, version)): Path<(String, String, i64)>,
    Query(params): Query<ActivateParams>,
) -> Result<axum::Json<VersionDto>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let v = state.service.activate(&key, version, params.force).await?;
    Ok(axum::Json(v.into()))
}
