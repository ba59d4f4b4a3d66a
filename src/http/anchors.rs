//! Anchor uploads, cells and their anchors: what labelling teams use.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::extract::{AnchorUpload, AnyKey, Authorized, IngestScope, Path, Query, cell_key};
use super::{rfc3339, schema};
use crate::domain::{JudgeVersion, Problem};

/// One cell's anchors as JSON. CSV uploads (`text/csv`) carry the columns
/// `judge,rubric,item_id,judge_score,reference_score` (and optionally `group`, `rater`,
/// `judge_version` and `covariate.<name>` per covariate) instead, for any number of cells.
#[derive(ToSchema)]
#[allow(dead_code)] // Documents the body: the handler reads rows itself to report every problem.
pub struct AnchorBatchRequest {
    #[schema(schema_with = schema::judge_name)]
    judge: String,
    #[schema(schema_with = schema::rubric_name)]
    rubric: String,
    /// The judge version of every row that names none of its own.
    #[schema(schema_with = schema::judge_version)]
    judge_version: Option<String>,
    #[schema(min_items = 1)]
    anchors: Vec<AnchorRow>,
}

/// One uploaded anchor row.
#[derive(ToSchema)]
#[allow(dead_code)] // Documents the body, as above.
pub struct AnchorRow {
    #[schema(schema_with = schema::item_id)]
    item_id: String,
    /// The LLM judge's score; a finite number within ±1e9.
    #[schema(example = 3.25, minimum = -1e9, maximum = 1e9)]
    judge_score: f64,
    /// The trusted score; inside the rubric's scale (1–5 unless set with PUT /v1/rubrics).
    /// Leave it out (in CSV, empty) on an item the cell already holds a reference for (an
    /// anchor item re-scored by a new judge version): the stored reference is used, and its
    /// group when the row names none. An item has one reference whichever version scored it.
    #[schema(example = 4.0)]
    reference_score: Option<f64>,
    #[schema(schema_with = group_schema)]
    group: Option<String>,
    #[schema(schema_with = rater_schema)]
    rater: Option<String>,
    #[schema(schema_with = schema::judge_version)]
    judge_version: Option<String>,
    /// A re-scored row that gives none takes its item's stored covariates.
    #[schema(schema_with = schema::covariates)]
    covariates: Option<std::collections::BTreeMap<String, f64>>,
    /// Further scores of the item by the same judge version (the judge asked again), at most
    /// 100; in CSV one column of scores separated by `;`, e.g. `3;4`. They measure the judge's
    /// repeat (test–retest) noise, shown by the agreement report and used when runs carry
    /// repeats; `judge_score` alone is what the corrector is fitted on. A row's own: a
    /// re-scored row does not take its item's.
    #[schema(example = json!([3.0, 3.5]), max_items = 100)]
    repeats: Option<Vec<f64>>,
}

#[derive(Serialize, ToSchema)]
pub struct AnchorDto {
    #[schema(schema_with = schema::item_id)]
    pub item_id: String,
    /// The LLM judge's score.
    #[schema(example = 3.25)]
    pub judge_score: f64,
    /// The trusted score; inside the rubric's scale (1–5 unless set with PUT /v1/rubrics).
    #[schema(example = 4.0)]
    pub reference_score: f64,
    #[schema(schema_with = group_schema)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[schema(schema_with = rater_schema)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rater: Option<String>,
    /// The judge version that gave `judge_score`; absent for an unversioned anchor.
    #[schema(schema_with = schema::judge_version)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_version: Option<String>,
    #[schema(schema_with = schema::covariates)]
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub covariates: std::collections::BTreeMap<String, f64>,
    /// Further scores of the item by the same judge version; absent where it has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<f64>,
}

fn group_schema() -> utoipa::openapi::schema::Object {
    schema::group_name(
        "Optional: the system (model) whose output was judged, named like judges. Versions then \
         measure how the judge's bias varies between systems, and run-level answers account for it.",
    )
}

fn rater_schema() -> utoipa::openapi::schema::Object {
    schema::rater_name(
        "Optional: who labelled the reference (the labeller or labelling session), named like \
         judges. The drift alarm treats each rater as one independent unit across batches (a \
         rater's anchors may miss together); rows naming none count their upload batch as one.",
    )
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UploadParams {
    /// Overwrite rows stored with different values instead of answering 409.
    #[serde(default)]
    pub(super) replace: bool,
}

#[derive(Serialize, ToSchema)]
pub struct IngestResponse {
    /// New anchors stored.
    pub inserted: usize,
    /// Anchors already stored with the same scores (a retried upload is safe).
    pub unchanged: usize,
    /// Anchors overwritten (only with `replace=true`).
    pub replaced: usize,
    pub cells: Vec<CellIngestDto>,
}

#[derive(Serialize, ToSchema)]
pub struct CellIngestDto {
    pub judge: String,
    pub rubric: String,
    /// The judge version of these rows; absent for unversioned ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_version: Option<String>,
    pub inserted: usize,
    pub unchanged: usize,
    pub replaced: usize,
    /// The cell's anchors after this upload.
    pub anchor_count: i64,
    /// How this batch's new anchors fared against the 95% predictive interval of the version
    /// the cell serves; absent when it serves none. A share well below 0.95 means the judge or
    /// the raters have shifted since that version was fitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<CoverageDto>,
}

#[derive(Serialize, ToSchema)]
pub struct CoverageDto {
    /// The active version the anchors were checked against.
    pub version: i64,
    /// Anchors checked (a flow skips judge scores far outside its anchors).
    pub checked: i64,
    /// Of those, inside the interval.
    pub inside: i64,
    /// inside / checked.
    pub share: f64,
}

/// Upload a batch of anchors.
///
/// The whole batch is checked before anything is stored; any problem refuses all of it with
/// 422, listing every problem by row and field. An item already stored with the same scores
/// counts as unchanged; with different scores the batch is refused with 409 unless
/// `replace=true`.
#[utoipa::path(
    post, path = "/v1/anchors", tag = "anchors", operation_id = "upload_anchors",
    params(UploadParams),
    request_body(content(
        (AnchorBatchRequest = "application/json"),
        (String = "text/csv", example = "judge,rubric,item_id,judge_score,reference_score,group\ngpt-4o-mini,coherence,story-17,3.25,4,BART\n"),
    )),
    responses(
        (status = 200, description = "Stored (or found unchanged)", body = IngestResponse),
        (status = 409, description = "Anchors stored with other scores; nothing stored", body = ErrorBody),
        (status = 413, description = "Body over server.max_upload_bytes", body = ErrorBody),
        (status = 415, description = "Neither JSON nor CSV", body = ErrorBody),
        (status = 422, description = "Invalid rows; nothing stored", body = ErrorBody),
    ),
    security(("api_key" = ["ingest"]))
)]
pub async fn upload(
    State(state): State<AppState>,
    _auth: Authorized<IngestScope>,
    Query(params): Query<UploadParams>,
    AnchorUpload(rows): AnchorUpload,
) -> Result<axum::Json<IngestResponse>, ApiError> {
    let report = state.service.scores().ingest(rows, params.replace).await?;
    tracing::info!(
        inserted = report.inserted,
        unchanged = report.unchanged,
        replaced = report.replaced,
        cells = report.cells.len(),
        "anchors stored"
    );
    Ok(axum::Json(IngestResponse {
        inserted: report.inserted,
        unchanged: report.unchanged,
        replaced: report.replaced,
        cells: report
            .cells
            .into_iter()
            .map(|c| CellIngestDto {
                judge: c.key.judge.to_string(),
                rubric: c.key.rubric.to_string(),
                judge_version: c.judge_version.map(String::from),
                inserted: c.inserted,
                unchanged: c.unchanged,
                replaced: c.replaced,
                anchor_count: c.anchor_count,
                coverage: c.coverage.map(|v| CoverageDto {
                    version: v.version,
                    checked: v.checked,
                    inside: v.inside,
                    share: v.inside as f64 / v.checked as f64,
                }),
            })
            .collect(),
    }))
}

#[derive(Serialize, ToSchema)]
pub struct CellDto {
    pub judge: String,
    pub rubric: String,
    pub anchor_count: i64,
    /// Its pairwise comparisons (`POST /v1/comparisons`); a cell holds these or anchors.
    pub comparison_count: i64,
    /// When an anchor of the cell last changed (RFC 3339).
    pub updated_at: String,
}

#[derive(Serialize, ToSchema)]
pub struct CellsResponse {
    pub cells: Vec<CellDto>,
}

/// Every (judge, rubric) cell with its anchor count and last change.
#[utoipa::path(
    get, path = "/v1/cells", tag = "anchors",
    responses(
        (status = 200, body = CellsResponse),
    ),
    security(("api_key" = []))
)]
pub async fn list_cells(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
) -> Result<axum::Json<CellsResponse>, ApiError> {
    let cells = state.service.scores().cells().await?;
    Ok(axum::Json(CellsResponse {
        cells: cells
            .into_iter()
            .map(|c| CellDto {
                judge: c.key.judge.to_string(),
                rubric: c.key.rubric.to_string(),
                anchor_count: c.anchor_count,
                comparison_count: c.comparison_count,
                updated_at: rfc3339(c.updated_at_ms),
            })
            .collect(),
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PageParams {
    /// Anchors per page: 1 to limits.max_page_size (1000 unless configured; default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
    /// `next_cursor` of the previous page.
    #[param(pattern = "^([0-9a-fA-F]{2})+$")]
    cursor: Option<String>,
    /// Only the anchors of this judge version.
    #[param(schema_with = schema::judge_version)]
    judge_version: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct AnchorPageResponse {
    /// In (item_id, judge_version) order.
    pub anchors: Vec<AnchorDto>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// A page of a cell's anchors.
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/anchors", tag = "anchors",
    params(("judge" = String, Path), ("rubric" = String, Path), PageParams),
    responses(
        (status = 200, body = AnchorPageResponse),
        (status = 404, description = "No such cell", body = ErrorBody),
        (status = 422, description = "Bad limit or cursor", body = ErrorBody),
    ),
    security(("api_key" = ["ingest"]))
)]
pub async fn list_anchors(
    State(state): State<AppState>,
    _auth: Authorized<IngestScope>,
    Path((judge, rubric)): Path<(String, String)>,
    Query(page): Query<PageParams>,
) -> Result<axum::Json<AnchorPageResponse>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let page = state
        .service
        .scores()
        .anchors_page(
            &key,
            judge_version(page.judge_version.as_deref(), "judge_version")?.as_ref(),
            page.cursor.as_deref(),
            page.limit,
        )
        .await?;
    Ok(axum::Json(AnchorPageResponse {
        anchors: page
            .anchors
            .into_iter()
            .map(|a| AnchorDto {
                item_id: a.item_id.as_str().to_owned(),
                judge_score: a.judge_score,
                reference_score: a.reference_score,
                group: a.group.map(String::from),
                rater: a.rater.map(String::from),
                judge_version: a.judge_version.map(String::from),
                covariates: a
                    .covariates
                    .into_iter()
                    .map(|(k, v)| (String::from(k), v))
                    .collect(),
                repeats: a.repeats,
            })
            .collect(),
        next_cursor: page.next_cursor,
    }))
}

#[derive(Serialize, ToSchema)]
pub struct DeleteResponse {
    /// The cell's anchors after the deletion.
    pub anchor_count: i64,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteParams {
    /// The judge version whose row of the item to remove; left out, the unversioned row. Rows
    /// of other judge versions are never touched: each keeps its score and reference.
    #[param(schema_with = schema::judge_version)]
    judge_version: Option<String>,
}

/// A judge version from the request's `field`, or 422 naming it.
pub(super) fn judge_version(
    raw: Option<&str>,
    field: &str,
) -> Result<Option<JudgeVersion>, ApiError> {
    raw.map(|v| required_version(v, field)).transpose()
}

/// A judge version the request must give in `field`, or 422 naming it.
pub(super) fn required_version(raw: &str, field: &str) -> Result<JudgeVersion, ApiError> {
    JudgeVersion::parse(raw).map_err(|e| {
        ApiError::invalid("the request was refused", vec![Problem::at(None, field, e)])
    })
}

/// Remove an anchor item's row (to fix a label, delete it and upload it again, or upload with
/// `replace=true`): the unversioned row, or the row of `judge_version`; no other row.
#[utoipa::path(
    delete, path = "/v1/cells/{judge}/{rubric}/anchors/{item_id}", tag = "anchors",
    params(("judge" = String, Path), ("rubric" = String, Path), ("item_id" = String, Path), DeleteParams),
    responses(
        (status = 200, body = DeleteResponse),
        (status = 404, description = "No such cell or anchor", body = ErrorBody),
    ),
    security(("api_key" = ["ingest"]))
)]
pub async fn delete_anchor(
    State(state): State<AppState>,
    _auth: Authorized<IngestScope>,
    Path((judge, rubric, item_id)): Path<(String, String, String)>,
    Query(params): Query<DeleteParams>,
) -> Result<axum::Json<DeleteResponse>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let version = judge_version(params.judge_version.as_deref(), "judge_version")?;
    let anchor_count = state
        .service
        .scores()
        .delete_anchor(&key, &item_id, version.as_ref())
        .await?;
    tracing::info!(item_id, anchor_count, "anchor deleted");
    Ok(axum::Json(DeleteResponse { anchor_count }))
}
