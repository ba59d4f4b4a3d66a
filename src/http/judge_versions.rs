//! When the judge changes: a cell's judge versions, the items a new version should re-score,
//! the bridge between two versions, silent-change checks, and the judge's setting for
//! requests naming a version with no calibration.

use axum::extract::State;
use judgecal_stats::warning::Warning;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::anchors::{judge_version, required_version};
use super::error::{ApiError, ErrorBody};
use super::extract::{AnyKey, Authorized, IngestScope, Json, Path, Query, TrainScope, cell_key};
use super::{rfc3339, schema};
use crate::domain::calibration::OnMismatch;
use crate::domain::pairwise::comparisons::outcome_of;
use crate::domain::{ItemId, JudgeName, JudgeVersion, Problem};
use crate::service::bridges::{BridgeAnswer, Rescored};
use judgecal_stats::bridge::Bridge;

fn version_text(v: Option<&JudgeVersion>) -> Option<String> {
    v.map(|v| v.as_str().to_owned())
}

#[derive(Serialize, ToSchema)]
pub struct JudgeVersionDto {
    /// Absent for the anchors uploaded without a version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_version: Option<String>,
    pub anchor_count: i64,
    /// When its first anchor arrived (RFC 3339): the newest version is the default a training
    /// job fits.
    pub first_anchor_at: String,
    /// The newest passed calibrator version trained on it, which serves requests naming it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibrated_by: Option<i64>,
}

#[derive(Serialize, ToSchema)]
pub struct JudgeVersionsResponse {
    /// Oldest first.
    pub judge_versions: Vec<JudgeVersionDto>,
}

/// The judge versions a cell's anchors carry, with their calibrations.
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/judge-versions", tag = "judge versions", operation_id = "judge_versions",
    params(("judge" = String, Path), ("rubric" = String, Path)),
    responses(
        (status = 200, body = JudgeVersionsResponse),
        (status = 404, description = "No such cell", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn list(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path((judge, rubric)): Path<(String, String)>,
) -> Result<axum::Json<JudgeVersionsResponse>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let versions = state.service.versions().judge_versions(&key).await?;
    Ok(axum::Json(JudgeVersionsResponse {
        judge_versions: versions
            .into_iter()
            .map(|v| JudgeVersionDto {
                judge_version: version_text(v.anchors.judge_version.as_ref()),
                anchor_count: v.anchors.anchor_count,
                first_anchor_at: rfc3339(v.anchors.first_at_ms),
                calibrated_by: v.calibrated,
            })
            .collect(),
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RescoreParams {
    /// The new judge version.
    #[param(
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$",
        example = "gpt-4o-2024-08-06#3f2a9c1b7d04"
    )]
    judge_version: String,
    /// The judge version whose calibration the bridge will test (default: the one the active
    /// calibration was trained on).
    #[param(schema_with = schema::judge_version)]
    from: Option<String>,
    /// Item ids listed: 1 to limits.max_page_size (the default).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

#[derive(Serialize, ToSchema)]
pub struct RescoreResponse {
    /// Items the cell holds a reference for that `judge_version` has not scored (at most
    /// `limit`), spread over the cell's systems: each system's in a fixed pseudo-random order,
    /// the systems in turn, so the first items of the list cover every system. Upload the new version's scores of them with `reference_score` left
    /// out: each becomes an anchor of the new version with the stored reference. In a pairwise
    /// cell: the labelled comparisons of `from` that `judge_version` has not judged, spread over
    /// their systems a; upload its verdicts with `preference` left out (POST /v1/comparisons):
    /// each takes the item's stored preference.
    pub items: Vec<String>,
    /// How many such items there are in all.
    pub remaining: i64,
    /// Items both versions have scored.
    pub shared: usize,
    /// Shared items the bridge needs for a verdict at the default tolerance. Before 10 items
    /// are shared it is planned, assuming nothing moved and the two versions' corrected scores
    /// correlate 0.9; after, it is the bridge's own estimate from the shift and spread seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bridge_items: Option<usize>,
    /// The default tolerance (reference units).
    pub tolerance: f64,
    /// The calibrator version the bridge will test (a pairwise cell's: its trained version),
    /// and its judge version.
    pub from_calibrator: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// The anchor items a new judge version should re-score, and how many the bridge needs.
///
/// An item's reference does not depend on the judge version: re-scoring the cell's anchor
/// items with the new version costs no new labels.
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/rescore", tag = "judge versions", operation_id = "rescore",
    params(("judge" = String, Path), ("rubric" = String, Path), RescoreParams),
    responses(
        (status = 200, body = RescoreResponse),
        (status = 404, description = "No such cell, or no active calibration", body = ErrorBody),
        (status = 409, description = "`from` has no calibration", body = ErrorBody),
        (status = 422, description = "Bad judge version or limit", body = ErrorBody),
    ),
    security(("api_key" = ["ingest"]))
)]
pub async fn rescore(
    State(state): State<AppState>,
    _auth: Authorized<IngestScope>,
    Path((judge, rubric)): Path<(String, String)>,
    Query(params): Query<RescoreParams>,
) -> Result<axum::Json<RescoreResponse>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let to = required_version(&params.judge_version, "judge_version")?;
    let from = judge_version(params.from.as_deref(), "from")?.map(Some);
    let plan = state
        .service
        .versions()
        .rescore(&key, &to, from.as_ref().map(Option::as_ref), params.limit)
        .await?;
    Ok(axum::Json(RescoreResponse {
        items: plan
            .items
            .into_iter()
            .map(|i| i.as_str().to_owned())
            .collect(),
        remaining: plan.total,
        shared: plan.shared,
        bridge_items: plan.bridge_items,
        tolerance: plan.tolerance,
        from_calibrator: plan.from_calibrator,
        from: version_text(plan.from.as_ref()),
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct BridgeParams {
    /// The old judge version (default: the anchors uploaded without a version). Its
    /// calibration is applied to both versions' scores.
    #[param(schema_with = schema::judge_version)]
    from: Option<String>,
    /// The new judge version.
    #[param(
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$",
        example = "gpt-4o-2024-08-06#3f2a9c1b7d04"
    )]
    to: String,
    /// How far the corrected mean may move for the old calibration to still serve, in
    /// reference units (default: 2.5% of the rubric's scale width, 0.1 on a 1–5 scale; in a
    /// pairwise cell, of the calibrated preference's 0–1 scale, 0.025).
    #[param(minimum = 0, exclusive_minimum = 0)]
    tolerance: Option<f64>,
}

#[derive(Serialize, ToSchema)]
pub struct BridgeResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The calibrator version (trained on `from`) applied to both versions' scores; in a
    /// pairwise cell, the newest trained version of `from` (GET .../preferences), whose
    /// calibrated preference is applied to both versions' verdicts.
    pub calibrator: i64,
    #[serde(flatten)]
    pub bridge: Bridge,
    /// What a reader of the verdict must know (`judge_reversed`); empty when nothing.
    pub warnings: Vec<Warning>,
}

impl From<BridgeAnswer> for BridgeResponse {
    fn from(a: BridgeAnswer) -> Self {
        Self {
            from: version_text(a.from.as_ref()),
            to: version_text(a.to.as_ref()),
            calibrator: a.calibrator,
            warnings: a.bridge.warnings(),
            bridge: a.bridge,
        }
    }
}

/// The bridge between two judge versions, on the items both scored.
///
/// Reports the paired shift of the raw scores (mean, slope of new on old, rank correlation),
/// the shift of the corrected mean when `from`'s calibration is applied to `to`'s scores, with
/// its 90% interval (two one-sided tests at 5%), per group where the items name groups, and a
/// `verdict`: `carry_over` (the interval lies inside ±tolerance: `from`'s calibration still
/// serves), `refit` (it lies outside, or a group's does: train on the re-scored anchors) or
/// `more_items` (with about how many more shared items would decide it).
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/bridge", tag = "judge versions", operation_id = "bridge",
    params(("judge" = String, Path), ("rubric" = String, Path), BridgeParams),
    responses(
        (status = 200, body = BridgeResponse),
        (status = 404, description = "No such cell", body = ErrorBody),
        (status = 409, description = "`from` has no calibration, or names the same version as `to` (a re-score under one label is a check: POST .../checks)", body = ErrorBody),
        (status = 422, description = "Bad version or tolerance", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn bridge(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path((judge, rubric)): Path<(String, String)>,
    Query(params): Query<BridgeParams>,
) -> Result<axum::Json<BridgeResponse>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let from = judge_version(params.from.as_deref(), "from")?;
    let to = required_version(&params.to, "to")?;
    let answer = state
        .service
        .versions()
        .bridge(&key, from.as_ref(), Some(&to), params.tolerance)
        .await?;
    Ok(axum::Json(answer.into()))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    /// The version label the items were re-scored under: one the cell's anchors carry
    /// (absent: the unversioned anchors).
    #[schema(schema_with = schema::judge_version)]
    judge_version: Option<String>,
    /// Anchor items of the cell, re-scored now.
    #[schema(min_items = 1)]
    items: Vec<CheckItem>,
    /// As for the bridge (default: 2.5% of the scale width).
    #[schema(minimum = 0, exclusive_minimum = 0)]
    tolerance: Option<f64>,
}

/// One re-scored anchor item (`judge_score`), or in a pairwise cell one re-judged comparison
/// (`verdict`, and `verdict_swapped` where the judge was asked in both orders).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckItem {
    #[schema(schema_with = schema::item_id)]
    item_id: String,
    /// The judge's new score of the anchor item (a cell of judge scores).
    #[schema(example = 3.0)]
    judge_score: Option<f64>,
    /// The judge's new verdict on the stored comparison (a pairwise cell).
    #[schema(schema_with = check_verdict_schema)]
    verdict: Option<serde_json::Value>,
    #[schema(schema_with = check_swapped_schema)]
    verdict_swapped: Option<serde_json::Value>,
}

fn check_verdict_schema() -> utoipa::openapi::schema::Schema {
    schema::outcome(
        "In a pairwise cell: the judge's new verdict on the stored comparison, a shown first (\"a\", \"b\", \"tie\" or the probability that a is better).",
        true,
    )
}

fn check_swapped_schema() -> utoipa::openapi::schema::Schema {
    schema::outcome(
        "In a pairwise cell, optional: the new verdict with b shown first, already mapped back.",
        true,
    )
}

#[derive(Serialize, ToSchema)]
pub struct CheckResponse {
    pub id: String,
    /// The corrected mean moved beyond the tolerance under the same label (verdict `refit`):
    /// the provider changed the model behind it. Sets `judgecal_judge_changed`.
    pub changed: bool,
    #[serde(flatten)]
    pub bridge: BridgeResponse,
}

/// A silent-change check: anchor items re-scored under the label they were stored with.
///
/// In a pairwise cell the items are stored comparisons re-judged (`verdict`, `verdict_swapped`),
/// tested on the calibrated preference of the label's newest trained version, whose
/// tolerance is on the preference's 0–1 scale (default 0.025).
///
/// Tested as a bridge against the stored scores, so the judge's own repeat noise (an LLM
/// judge need not give an item the same score twice) widens the interval instead of raising
/// an alarm. Needs no reference labels, so it can run daily. The scores are kept with the
/// check, never written over the anchors. `changed` sets `judgecal_judge_changed{judge,rubric}`.
#[utoipa::path(
    post, path = "/v1/cells/{judge}/{rubric}/checks", tag = "judge versions", operation_id = "check",
    params(("judge" = String, Path), ("rubric" = String, Path)),
    request_body = CheckRequest,
    responses(
        (status = 200, body = CheckResponse),
        (status = 404, description = "No such cell, or no calibration serves it", body = ErrorBody),
        (status = 409, description = "The judge refuses the version and it has no calibration", body = ErrorBody),
        (status = 422, description = "An item is not an anchor of that version, repeats, or has a bad score", body = ErrorBody),
    ),
    security(("api_key" = ["ingest"]))
)]
pub async fn check(
    State(state): State<AppState>,
    _auth: Authorized<IngestScope>,
    Path((judge, rubric)): Path<(String, String)>,
    Json(body): Json<CheckRequest>,
) -> Result<axum::Json<CheckResponse>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let version = judge_version(body.judge_version.as_deref(), "judge_version")?;
    let mut problems = Vec::new();
    let items: Vec<Rescored> = body
        .items
        .into_iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let row = i + 1;
            let item_id = ItemId::named(&item.item_id)
                .map_err(|e| problems.push(Problem::at(Some(row), "item_id", e)))
                .ok();
            let mut outcome = |name: &str, v: Option<&serde_json::Value>| {
                outcome_of(row, name, v).map_err(|p| problems.push(p)).ok()
            };
            let verdict = outcome("verdict", item.verdict.as_ref())?;
            let swapped = outcome("verdict_swapped", item.verdict_swapped.as_ref())?;
            if swapped.is_some() && verdict.is_none() {
                problems.push(Problem::at(
                    Some(row),
                    "verdict",
                    "is missing: verdict_swapped is given without it",
                ));
                return None;
            }
            Some(Rescored {
                item_id: item_id?,
                judge_score: item.judge_score,
                verdicts: verdict.map(|v| (v, swapped)),
            })
        })
        .collect();
    if !problems.is_empty() {
        return Err(ApiError::invalid("the check was refused", problems));
    }
    let check = state
        .service
        .versions()
        .check(&key, version.as_ref(), items, body.tolerance)
        .await?;
    Ok(axum::Json(CheckResponse {
        id: check.id.to_string(),
        changed: check.answer.bridge.verdict == judgecal_stats::bridge::Verdict::Refit,
        bridge: check.answer.into(),
    }))
}

/// A silent-change check, read back by its id: as it was answered.
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/checks/{id}", tag = "judge versions", operation_id = "get_check",
    params(("judge" = String, Path), ("rubric" = String, Path), ("id" = String, Path, description = "The check's id, from its answer")),
    responses(
        (status = 200, body = CheckResponse),
        (status = 404, description = "The cell holds no such check", body = ErrorBody),
        (status = 422, description = "Bad judge, rubric or id", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn get_check(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path((judge, rubric, id)): Path<(String, String, String)>,
) -> Result<axum::Json<CheckResponse>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let id = uuid::Uuid::parse_str(&id).map_err(|_| {
        ApiError::invalid(
            "the URL names no check",
            vec![Problem::at(
                None,
                "id",
                format!("{id:?} is not a check id (a UUID)"),
            )],
        )
    })?;
    let check = state.service.versions().stored_check(&key, id).await?;
    let version = version_text(check.judge_version.as_ref());
    Ok(axum::Json(CheckResponse {
        id: check.id.to_string(),
        changed: check.bridge.verdict == judgecal_stats::bridge::Verdict::Refit,
        bridge: BridgeResponse {
            from: version.clone(),
            to: version,
            calibrator: check.calibrator,
            warnings: check.bridge.warnings(),
            bridge: check.bridge,
        },
    }))
}

#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JudgeSettings {
    /// What a request gets when it names a judge version that has no calibration of its own:
    /// `warn` (the default: served by the active calibration, with a warning naming both
    /// versions) or `refuse` (409). Either way it counts
    /// `judgecal_judge_version_mismatch_total`.
    on_version_mismatch: OnMismatch,
}

/// A judge's settings.
#[utoipa::path(
    get, path = "/v1/judges/{judge}/settings", tag = "judge versions", operation_id = "judge_settings",
    params(("judge" = String, Path)),
    responses(
        (status = 200, body = JudgeSettings),
        (status = 422, description = "Bad judge name", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn settings(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path(judge): Path<String>,
) -> Result<axum::Json<JudgeSettings>, ApiError> {
    let judge = judge_name(&judge)?;
    Ok(axum::Json(JudgeSettings {
        on_version_mismatch: state.service.versions().on_mismatch(&judge),
    }))
}

/// Set a judge's settings.
#[utoipa::path(
    put, path = "/v1/judges/{judge}/settings", tag = "judge versions", operation_id = "put_judge_settings",
    params(("judge" = String, Path)),
    request_body = JudgeSettings,
    responses(
        (status = 200, body = JudgeSettings),
        (status = 422, description = "Bad judge name or setting", body = ErrorBody),
    ),
    security(("api_key" = ["train"]))
)]
pub async fn put_settings(
    State(state): State<AppState>,
    _auth: Authorized<TrainScope>,
    Path(judge): Path<String>,
    Json(body): Json<JudgeSettings>,
) -> Result<axum::Json<JudgeSettings>, ApiError> {
    let judge = judge_name(&judge)?;
    state
        .service
        .versions()
        .set_on_mismatch(&judge, body.on_version_mismatch)
        .await?;
    tracing::info!(%judge, on_version_mismatch = body.on_version_mismatch.as_str(), "judge settings changed");
    Ok(axum::Json(body))
}

fn judge_name(raw: &str) -> Result<JudgeName, ApiError> {
    tracing::Span::current().record("judge", raw);
    JudgeName::parse(raw).map_err(|e| {
        ApiError::invalid(
            "the URL names no valid judge",
            vec![Problem::at(None, "judge", e)],
        )
    })
}
