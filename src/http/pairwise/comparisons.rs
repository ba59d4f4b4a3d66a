//! Pairwise comparison uploads (`POST /v1/comparisons`): what labelling teams send for a
//! pairwise judge, its verdicts on two systems' answers with the people's preference where
//! they labelled it.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::AppState;
use crate::http::anchors::UploadParams;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Authorized, ComparisonUpload, IngestScope, Query};
use crate::http::schema;

/// One cell's comparisons as JSON. CSV uploads (`text/csv`) carry the columns
/// `judge,rubric,item_id,a,b,verdict` (and optionally `verdict_swapped`, `preference`,
/// `rater`, `judge_version` and `covariate.<name>` per covariate) instead, for any number of
/// cells.
#[derive(ToSchema)]
#[allow(dead_code)] // Documents the body: the handler reads rows itself to report every problem.
pub struct ComparisonBatchRequest {
    #[schema(schema_with = schema::judge_name)]
    judge: String,
    #[schema(schema_with = schema::rubric_name)]
    rubric: String,
    /// The judge version of every row.
    #[schema(schema_with = schema::judge_version)]
    judge_version: Option<String>,
    #[schema(min_items = 1)]
    comparisons: Vec<ComparisonRow>,
}

/// One comparison: the judge's verdict on system a's answer against system b's, to one prompt.
#[derive(ToSchema)]
#[allow(dead_code)] // Documents the body, as above.
pub struct ComparisonRow {
    /// The compared pair's id (the prompt, or the prompt and the pair): one row per item,
    /// cell and judge version; an item compares one pair of systems, in one order.
    #[schema(schema_with = schema::item_id)]
    item_id: String,
    /// The system whose answer is `a`.
    #[schema(schema_with = system_schema)]
    a: String,
    /// The system whose answer is `b`; not `a`.
    #[schema(schema_with = system_schema)]
    b: String,
    #[schema(schema_with = verdict_schema)]
    verdict: serde_json::Value,
    #[schema(schema_with = swapped_schema)]
    verdict_swapped: Option<serde_json::Value>,
    #[schema(schema_with = preference_schema)]
    preference: Option<serde_json::Value>,
    #[schema(schema_with = rater_schema)]
    rater: Option<String>,
    #[schema(schema_with = schema::covariates)]
    covariates: Option<std::collections::BTreeMap<String, f64>>,
}

pub(in crate::http) fn system_schema() -> utoipa::openapi::schema::Object {
    let mut s =
        schema::group_name("A system (model) whose answer was compared, named like judges.");
    s.schema_type = utoipa::openapi::schema::Type::String.into();
    s
}

pub(in crate::http) fn verdict_schema() -> utoipa::openapi::schema::Schema {
    schema::outcome(
        "The judge's verdict, a shown first: \"a\", \"b\", \"tie\", or the probability that a's answer is the better (a judge's log-probabilities). A tie counts one half for each side.",
        false,
    )
}

pub(in crate::http) fn swapped_schema() -> utoipa::openapi::schema::Schema {
    schema::outcome(
        "Optional: the judge's verdict with b shown first, already mapped back (\"a\" still means a). Where the two orders disagree the judge favours a position.",
        true,
    )
}

pub(in crate::http) fn preference_schema() -> utoipa::openapi::schema::Schema {
    schema::outcome(
        "Optional: the people's preference (\"a\", \"b\", \"tie\", or a share of raters preferring a). A row without it is an unlabelled verdict, stored for later labels; an item has one preference whichever judge version judged it, and a later row's preference labels the item's rows stored without one.",
        true,
    )
}

pub(in crate::http) fn rater_schema() -> utoipa::openapi::schema::Object {
    schema::rater_name(
        "Optional: who gave the preference, named like judges. Ratings and win rates count \
         raters, not labels, as the independent units (one rater's taste moves all of their \
         labels); a label naming none is a rater of its own.",
    )
}

#[derive(Serialize, ToSchema)]
pub struct ComparisonIngestResponse {
    /// New comparisons stored.
    pub inserted: usize,
    /// Comparisons already stored with the same values (a retried upload is safe).
    pub unchanged: usize,
    /// Comparisons overwritten (only with `replace=true`).
    pub replaced: usize,
    /// Comparisons stored before without a preference that this upload labelled: the same
    /// verdicts sent again with the people's preference.
    pub labelled: usize,
    pub cells: Vec<ComparisonCellDto>,
}

#[derive(Serialize, ToSchema)]
pub struct ComparisonCellDto {
    pub judge: String,
    pub rubric: String,
    /// The judge version of these rows; absent for unversioned ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_version: Option<String>,
    pub inserted: usize,
    pub unchanged: usize,
    pub replaced: usize,
    pub labelled: usize,
    /// The cell's comparisons after this upload, of every judge version.
    pub comparison_count: i64,
}

/// Upload a batch of pairwise comparisons.
///
/// The whole batch is checked before anything is stored; any problem refuses all of it with
/// 422, listing every problem by row and field. A comparison already stored with the same
/// values counts as unchanged, and sent again with a preference it lacked is labelled
/// (`labelled`); with other values the batch is refused with 409 unless `replace=true`. A cell
/// holds judge scores (anchors) or comparisons, never both: 409. The labelled comparisons
/// train the cell (`POST /v1/judges/{judge}/calibrations` with `auto`) and calibrate
/// `POST /v1/ratings`; those arriving after training feed its drift alarm. `GET /v1/cells`
/// counts them.
#[utoipa::path(
    post, path = "/v1/comparisons", tag = "anchors", operation_id = "upload_comparisons",
    params(UploadParams),
    request_body(content(
        (ComparisonBatchRequest = "application/json"),
        (String = "text/csv", example = "judge,rubric,item_id,a,b,verdict,verdict_swapped,preference\ngpt-4o,helpfulness,prompt-17,model-x,model-y,a,b,a\n"),
    )),
    responses(
        (status = 200, description = "Stored (or found unchanged)", body = ComparisonIngestResponse),
        (status = 409, description = "Comparisons stored with other values, another pair or preference for an item, or a cell that holds judge scores; nothing stored", body = ErrorBody),
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
    ComparisonUpload(rows): ComparisonUpload,
) -> Result<axum::Json<ComparisonIngestResponse>, ApiError> {
    let cells = state
        .service
        .pairwise()
        .ingest_comparisons(rows, params.replace)
        .await?;
    let sum = |f: fn(&crate::store::ComparisonIngest) -> usize| cells.iter().map(f).sum();
    let response = ComparisonIngestResponse {
        inserted: sum(|c| c.inserted),
        unchanged: sum(|c| c.unchanged),
        replaced: sum(|c| c.replaced),
        labelled: sum(|c| c.newly_labelled),
        cells: cells
            .into_iter()
            .map(|c| ComparisonCellDto {
                judge: c.key.judge.to_string(),
                rubric: c.key.rubric.to_string(),
                judge_version: c.judge_version.map(String::from),
                inserted: c.inserted,
                unchanged: c.unchanged,
                replaced: c.replaced,
                labelled: c.newly_labelled,
                comparison_count: c.comparison_count,
            })
            .collect(),
    };
    tracing::info!(
        inserted = response.inserted,
        unchanged = response.unchanged,
        replaced = response.replaced,
        "comparisons stored"
    );
    Ok(axum::Json(response))
}
