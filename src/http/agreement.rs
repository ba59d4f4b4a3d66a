//! GET /v1/cells/{judge}/{rubric}/agreement: how well the judge agrees with the reference,
//! raw and corrected, where it is biased and the items it misses most (issue 58).

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::anchors::judge_version;
use super::error::{ApiError, ErrorBody};
use super::extract::{AnyKey, Authorized, Path, Query, cell_key};
use super::schema;
use crate::auth::Scope;
use crate::domain::{GroupName, Problem};
use crate::service::agreement::AgreementQuery;
use judgecal_stats::agreement::report::AgreementReport;

/// Disagreements listed when the request names no `top`.
const DEFAULT_TOP: usize = 20;
/// The most a request may list.
const MAX_TOP: usize = 1000;

fn group_param() -> utoipa::openapi::schema::Object {
    schema::group_name("Only the anchors of this group (system).")
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AgreementParams {
    /// A version to report instead of the active one.
    version: Option<i64>,
    /// Instead, the newest version trained on this judge version.
    #[param(schema_with = schema::judge_version)]
    judge_version: Option<String>,
    #[param(schema_with = group_param)]
    group: Option<String>,
    /// Disagreements to list, 0 to 1000 (default 20). They name items with their references:
    /// only a key that may list anchors (`ingest` or `admin`) gets them; for other keys the
    /// default is 0 and a larger `top` is refused with 403.
    #[param(minimum = 0, maximum = 1000)]
    top: Option<usize>,
}

/// The agreement report of one calibrator version, over the anchors it was fitted on.
#[derive(Serialize, ToSchema)]
pub struct AgreementResponse {
    pub judge: String,
    pub rubric: String,
    /// The version read, its method and the judge version it was trained on.
    pub version: i64,
    pub method: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_version: Option<String>,
    /// The group the report is restricted to, where the request named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The report: `n`, `held_out`, `levels`, `raw` and `corrected` (the judge score and the
    /// held-out corrected score against the reference), `bias`, `by_level`, `by_group`,
    /// `disagreements` and `warnings`.
    #[serde(flatten)]
    pub report: AgreementReport,
}

/// How well the judge agrees with the reference on the anchors a version was fitted on: the
/// raw judge and the cross-fitted (held-out) corrections side by side, each with Pearson's,
/// Spearman's and Kendall's correlations and, on a discrete reference scale, Cohen's and the
/// quadratic-weighted κ with the confusion matrix; every figure with its 95% interval. Then
/// the bias by judge-score level and by system with 95% intervals, and the items the
/// reference disagrees with most. The active version's, or `version`'s, or the newest of
/// `judge_version`'s; over one `group` where named.
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/agreement", tag = "calibration",
    params(("judge" = String, Path), ("rubric" = String, Path), AgreementParams),
    responses(
        (status = 200, body = AgreementResponse),
        (status = 403, description = "top > 0 from a key without the `ingest` scope", body = ErrorBody),
        (status = 404, description = "No such cell, version, judge version or group; or no active calibrator", body = ErrorBody),
        (status = 409, description = "The version was trained before versions kept their held-out corrections", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn agreement(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<AnyKey>,
    Path((judge, rubric)): Path<(String, String)>,
    Query(params): Query<AgreementParams>,
) -> Result<axum::Json<AgreementResponse>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    // Item-level rows (ids, groups, references) are what `GET .../anchors` lists: only for a
    // key that may list anchors.
    let items_allowed = caller.allows(Scope::Ingest);
    if !items_allowed && params.top.is_some_and(|t| t > 0) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "key {} lacks the `ingest` scope that listing items needs (top > 0 names anchors \
                 with their references); ask with top=0 for the report without them",
                caller.label()
            ),
        ));
    }
    let mut problems = Vec::new();
    let top = params
        .top
        .unwrap_or(if items_allowed { DEFAULT_TOP } else { 0 });
    if top > MAX_TOP {
        problems.push(Problem::at(
            None,
            "top",
            format!("{top} is more than the {MAX_TOP} a report lists"),
        ));
    }
    let group = params
        .group
        .as_deref()
        .map(GroupName::parse)
        .transpose()
        .map_err(|e| problems.push(Problem::at(None, "group", e)))
        .ok()
        .flatten();
    if !problems.is_empty() {
        return Err(ApiError::invalid("the request was refused", problems));
    }
    let query = AgreementQuery {
        version: params.version,
        judge_version: judge_version(params.judge_version.as_deref(), "judge_version")?,
        group,
        top,
    };
    let a = state.service.scores().agreement(&key, &query).await?;
    Ok(axum::Json(AgreementResponse {
        judge: key.judge.to_string(),
        rubric: key.rubric.to_string(),
        version: a.version.version,
        method: a.version.method().as_str().to_owned(),
        judge_version: a.version.judge_version.map(String::from),
        group: query.group.map(String::from),
        report: a.report,
    }))
}
