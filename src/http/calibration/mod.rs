//! Training jobs and calibrator versions: what the people who own a judge's calibration use.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Deserialize;
use utoipa::IntoParams;

mod covariates_dto;
mod dto;
mod intervals_dto;
mod job_dto;
mod panel_dto;
mod report_dto;
mod training_doc;

pub use dto::*;
pub use intervals_dto::*;
pub use job_dto::*;
pub use report_dto::*;
pub use training_doc::*;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::extract::{AnyKey, Authorized, Json, Path, Query, TrainScope, cell_key};
use crate::domain::Problem;
use crate::domain::calibration::JobId;
use crate::domain::training::{self, TrainingRequest};

/// The body of a training request, as it arrives; its schema is [`TrainingRequestDoc`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingBody {
    method: String,
    rubrics: Option<Vec<String>>,
    judge_version: Option<String>,
    member_versions: Option<std::collections::BTreeMap<String, Option<String>>>,
    covariates: Option<Vec<String>>,
    #[serde(default = "empty_object")]
    options: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
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
        (status = 404, description = "The judge has no anchors", body = ErrorBody),
        (status = 409, description = "A panel whose member has no anchors (of the judge version named or served), or whose members give an item different reference scores (each such item named); or a judge that holds pairwise comparisons only, which no corrector reads yet", body = ErrorBody),
        (status = 422, description = "Bad method, rubric, option or member version (each named, a panel's by member and judge version)", body = ErrorBody),
    ),
    security(("api_key" = ["train"]))
)]
pub async fn train(
    State(state): State<AppState>,
    _auth: Authorized<TrainScope>,
    Path(judge): Path<String>,
    Json(body): Json<TrainingBody>,
) -> Result<impl IntoResponse, ApiError> {
    tracing::Span::current().record("judge", judge.as_str());
    let request = TrainingRequest::parse(
        &judge,
        &body.method,
        body.rubrics.as_deref(),
        body.judge_version.as_deref(),
        body.options,
    );
    let members = body
        .member_versions
        .map(training::parse_member_versions)
        .transpose();
    let covariates = training::parse_covariate_choice(body.covariates.as_deref());
    let request = match (request, members, covariates) {
        (Ok(r), Ok(m), Ok(c)) => Ok(TrainingRequest {
            member_versions: m.unwrap_or_default(),
            covariates: c,
            ..r
        }),
        (r, m, c) => Err([r.err(), m.err(), c.err()]
            .into_iter()
            .flatten()
            .flatten()
            .collect()),
    }
    .map_err(|p| ApiError::invalid("the training request was refused", p))?;
    let job = state.service.operations().submit_training(request).await?;
    let location = format!("/v1/jobs/{}", job.id);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        axum::Json(JobDto::from(job)),
    ))
}

/// A training job: state, progress, the versions it made, or why it failed. Once it reads
/// `succeeded`, the process that answered serves its versions: correct at once, through any
/// replica.
#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "calibration",
    params(("id" = String, Path)),
    responses(
        (status = 200, body = JobDto),
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
    Ok(axum::Json(state.service.operations().job(id).await?.into()))
}

/// Cancel a job: a queued one at once; a running one stops within a lease renewal
/// (jobs.lease_secs / 3) and ends `cancelled`, storing nothing.
#[utoipa::path(
    post, path = "/v1/jobs/{id}/cancel", tag = "calibration",
    params(("id" = String, Path)),
    responses(
        (status = 200, description = "Cancelled, or cancelling (state still running)", body = JobDto),
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
    Ok(axum::Json(
        state.service.operations().cancel(id).await?.into(),
    ))
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

/// A cell's calibrator versions, newest first, with their posterior, diagnostics and held-out
/// evaluation beside the raw judge.
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/calibrators", tag = "calibration",
    params(("judge" = String, Path), ("rubric" = String, Path)),
    responses(
        (status = 200, body = VersionsResponse),
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
    let versions = state.service.versions().list(&key).await?;
    Ok(axum::Json(VersionsResponse {
        versions: versions.into_iter().map(Into::into).collect(),
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ReportParams {
    /// A version to draw instead of the active one.
    version: Option<i64>,
}

/// A picture of the cell's active calibrator (or `version`), for a person: the anchors'
/// reference against judge scores (jittered where they pile up on a discrete scale) with the
/// fitted curve and its 95% predictive band; the residuals against the judge score, raw and
/// corrected; and, where the anchors name groups, each group's held-out bias with its 95%
/// interval. A panel's picture uses its fused anchors. The anchors are the ones the version
/// was fitted on, so the picture is in-sample; the title gives the held-out MAE beside the
/// raw judge's.
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/report.svg", tag = "calibration",
    params(("judge" = String, Path), ("rubric" = String, Path), ReportParams),
    responses(
        (status = 200, description = "An SVG image", content_type = "image/svg+xml", body = String),
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
    let svg = state
        .service
        .scores()
        .report_svg(&key, params.version)
        .await?;
    Ok(([(header::CONTENT_TYPE, "image/svg+xml")], svg))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
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
    let v = state
        .service
        .versions()
        .activate(&key, version, params.force)
        .await?;
    Ok(axum::Json(v.into()))
}
