//! POST /v1/ratings: Bradley–Terry ratings of a run's systems by the people's preference,
//! from a pairwise judge's verdicts and the cell's labelled comparisons.

use axum::extract::State;
use utoipa::ToSchema;

use crate::domain::pairwise::ratings;
use crate::error::Error;
use crate::http::AppState;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Authorized, CorrectScope, Json};
use crate::http::pairwise::comparisons::{
    preference_schema, rater_schema, swapped_schema, system_schema, verdict_schema,
};
use crate::http::schema;
use crate::service::RatingsAnswer;

/// A run of comparisons to rate. The rows are comparison rows (`POST /v1/comparisons`);
/// those with `preference` are labelled and enter the ratings prediction-powered.
#[derive(ToSchema)]
#[allow(dead_code)] // Documents the body: the handler reads rows itself to report every problem.
pub struct RatingsRequestBody {
    #[schema(schema_with = schema::judge_name)]
    judge: String,
    #[schema(schema_with = schema::rubric_name)]
    rubric: String,
    /// The judge version that gave the run's verdicts: the cell's labelled comparisons of
    /// this version calibrate them (absent: those stored without a version).
    #[schema(schema_with = schema::judge_version)]
    judge_version: Option<String>,
    /// The run (at most 500,000 comparisons).
    #[schema(min_items = 1)]
    comparisons: Vec<RatedComparison>,
    /// The system rated 0 (default: the first of the run's systems by name).
    #[schema(schema_with = baseline_schema)]
    baseline: Option<String>,
    /// Of the intervals (default 0.95).
    #[schema(minimum = 0.5, maximum = 0.999, example = 0.95)]
    level: Option<f64>,
    /// Covariates (`covariates.<name>` of every row) the ratings control for, as Arena's
    /// style control puts the length difference beside the ratings: each gets a coefficient.
    #[schema(example = json!(["length"]))]
    control: Option<Vec<String>>,
    /// The widest rating half-width wanted (log-odds, at `level`): the answer's `plan` says
    /// how many of the run's comparisons to label to reach it, and which.
    #[schema(exclusive_minimum = 0.0, example = 0.15)]
    target_half_width: Option<f64>,
}

/// One comparison of the run: a comparison row (`POST /v1/comparisons`) of a judge, with
/// `verdict`; of a pairwise panel, with `verdicts` and `verdicts_swapped` in its place.
#[derive(ToSchema)]
#[allow(dead_code)] // Documents the body, as above.
pub struct RatedComparison {
    #[schema(schema_with = schema::item_id)]
    item_id: String,
    #[schema(schema_with = system_schema)]
    a: String,
    #[schema(schema_with = system_schema)]
    b: String,
    /// A judge's run: its verdict (required there).
    #[schema(schema_with = verdict_schema)]
    verdict: Option<serde_json::Value>,
    #[schema(schema_with = swapped_schema)]
    verdict_swapped: Option<serde_json::Value>,
    /// A pairwise panel's run: every member's verdict, by name (`{"gpt-4o": "a", "claude":
    /// 0.3}`), each an outcome as `verdict` is; required there, in place of `verdict`.
    #[schema(example = json!({"gpt-4o": "a", "claude": "b"}))]
    verdicts: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    /// A pairwise panel's run: the members' verdicts with b shown first, mapped back, by name
    /// (any members; each also in `verdicts`).
    verdicts_swapped: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    #[schema(schema_with = preference_schema)]
    preference: Option<serde_json::Value>,
    #[schema(schema_with = rater_schema)]
    rater: Option<String>,
    #[schema(schema_with = schema::covariates)]
    covariates: Option<std::collections::BTreeMap<String, f64>>,
}

fn baseline_schema() -> utoipa::openapi::schema::Object {
    schema::group_name("The system whose rating is 0; one of the run's systems.")
}

/// Rate a run's systems by the people's preference.
///
/// Bradley–Terry ratings on the natural log-odds scale, the baseline at 0, from the judge's
/// verdicts on the run: the calibrated preference (chosen by held-out log-loss on the cell's
/// labelled comparisons of the run's judge version, with per-system terms where the judge
/// favours a system) predicts each comparison, and the labelled comparisons (the cell's, and
/// the run's own with `preference`) correct the predictions' bias, prediction-powered. Ties
/// count one half for each side. Intervals hold at `level`; rank intervals hold jointly.
#[utoipa::path(
    post, path = "/v1/ratings", tag = "correction",
    request_body = RatingsRequestBody,
    responses(
        (status = 200, description = "The ratings", body = RatingsAnswer),
        (status = 404, description = "No such cell", body = ErrorBody),
        (status = 409, description = "Fewer than 20 labelled comparisons of the run's systems (the cell's of the judge version and the run's), or a cell of judge scores", body = ErrorBody),
        (status = 422, description = "Invalid rows or settings, or systems the run does not join; every problem named", body = ErrorBody),
    ),
    security(("api_key" = ["correct"]))
)]
pub async fn rate(
    State(state): State<AppState>,
    _auth: Authorized<CorrectScope>,
    Json(body): Json<serde_json::Value>,
) -> Result<axum::Json<RatingsAnswer>, ApiError> {
    let request =
        ratings::parse(body).map_err(|p| Error::rejected("the ratings request was refused", p))?;
    let answer = state.service.pairwise().rate(request).await?;
    Ok(axum::Json(answer))
}
