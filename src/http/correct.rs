//! Corrections: what the eval platform calls, one score or 100,000 at a time.

use axum::extract::State;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::extract::{Authorized, CorrectScope, Json, ScoresOrItems};
use super::schema;
use crate::domain::ItemId;
use crate::domain::correction::CorrectionRequest;
use crate::domain::inputs::{RawItem, RawRun};
use crate::service::CorrectedItem;
use judgecal_stats::warning::Warning;

/// The body of POST /v1/correct: `scores`, or `items` to get ids back (not both).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CorrectRequest {
    #[schema(schema_with = schema::judge_name)]
    judge: String,
    #[schema(schema_with = schema::rubric_name)]
    rubric: String,
    /// Raw judge scores.
    #[schema(example = json!([2.5, 3.0]), min_items = 1)]
    scores: Option<Vec<f64>>,
    /// Raw judge scores with ids echoed back in the results; for a panel, each item's
    /// members' scores (`scores`).
    #[schema(min_items = 1)]
    items: Option<Vec<ItemScore>>,
    /// A version of the cell to use instead of the active one.
    #[schema(minimum = 1)]
    version: Option<i64>,
    /// The judge version that gave the scores (model snapshot, prompt hash, decoding: the
    /// platform's label). Served by the newest passed calibration trained on it (left out: on
    /// the unversioned anchors), the active one where it is one; where there is none, by the
    /// active one with a warning (or 409 where the judge refuses mismatches).
    #[schema(schema_with = schema::judge_version)]
    judge_version: Option<String>,
}

/// One item: a judge's `score`, or a panel's `scores` (each member's score by name), and an
/// optional id echoed back (every item an id, or none).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemScore {
    #[schema(
        example = "story-17",
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001F\\u007F]+$"
    )]
    id: Option<String>,
    /// A judge's raw score.
    #[schema(example = 2.5)]
    score: Option<f64>,
    /// A panel item: each member's raw score, by judge name. Members that did not score the
    /// item are left out; the item is then corrected from the members present.
    #[schema(schema_with = schema::member_scores)]
    scores: Option<BTreeMap<String, f64>>,
    /// A judge's item: its covariates, for a version trained with them (`length`, …).
    #[schema(schema_with = schema::covariates)]
    covariates: Option<BTreeMap<String, f64>>,
}

impl From<ItemScore> for RawItem {
    fn from(i: ItemScore) -> Self {
        RawItem {
            id: i.id,
            score: i.score,
            members: i.scores,
            covariates: i.covariates,
            repeats: None,
            reference: None,
            cluster: None,
        }
    }
}

/// One corrected score. Which fields appear depends on the version's `method`: every method
/// gives `predictive` (where the version has intervals); `bayes` also gives `credible`;
/// `flow` gives `sigma` and `review`.
#[derive(Serialize, ToSchema)]
pub struct CorrectedDto {
    /// The item's id, when the request gave `items`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The raw judge score; for a panel, the fused score of the members' scores (what the
    /// version's corrector read, or the sub-panel's score where members were missing).
    pub judge_score: f64,
    /// A version trained with covariates: the layer's score of the judge score and the item's
    /// covariates (the reference expected there, before the corrector), which the corrector read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer_score: Option<f64>,
    /// A panel item that some of the served members did not score: the members it was
    /// corrected from (their sub-panel's fit, with its own wider intervals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<String>>,
    /// bayes: the posterior mean of alpha + beta·judge_score; flow: the mean over the
    /// MC-dropout passes; quantile_map: the reference quantile at the judge score's level;
    /// identity: the judge score.
    pub corrected: f64,
    /// bayes: 95% credible interval of the corrected (mean) score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credible: Option<[f64; 2]>,
    /// 95% interval for a new item's reference score. bayes: the posterior predictive (adds
    /// the rubric's noise sigma); every other method: the corrected score plus the band of
    /// held-out residuals (reference − corrected) in the judge score's bin, which the version
    /// lists under `intervals` with how often it covered anchors the fit did not see.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predictive: Option<[f64; 2]>,
    /// flow: sd of the corrected score over the MC-dropout passes (the flow's uncertainty
    /// about its own map, not the reference's noise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
    /// flow: sigma is above the cell's review threshold; route the item to a person.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<bool>,
    /// True where the score lies outside the judge scores the version was trained on (but
    /// within one range width of them; farther is refused): the correction extrapolates
    /// (bayes) or holds the end value, and its interval was not measured there.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub outside_anchors: bool,
}

impl From<CorrectedItem> for CorrectedDto {
    fn from(item: CorrectedItem) -> Self {
        let c = item.corrected;
        Self {
            id: item.id.map(ItemId::into_string),
            judge_score: item.judge_score,
            layer_score: item.layer_score,
            members: item.members,
            corrected: c.score,
            credible: c.credible.map(|(lo, hi)| [lo, hi]),
            predictive: c.predictive.map(|(lo, hi)| [lo, hi]),
            sigma: c.sigma,
            review: c.review,
            outside_anchors: item.outside_anchors,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct CorrectResponse {
    pub judge: String,
    pub rubric: String,
    /// The calibrator version that made every number below.
    pub version: i64,
    /// The method of that version: `bayes`, `flow`, `quantile_map` or `identity` (the raw
    /// judge score, served when an `auto` job found no corrector that beats it).
    pub method: String,
    /// The beta canary of that version (a bayes version's, or the Bayesian fit an auto job
    /// kept beside another winner); when true the judge no longer tracks the reference on
    /// this rubric and no linear correction can fix it. Absent where there is no such fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<bool>,
    /// flow: how many of the results are routed to review.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_count: Option<usize>,
    /// The judge version the calibration was trained on; absent for unversioned anchors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_version: Option<String>,
    /// What a reader of these numbers must know (a judge version the calibration was not
    /// trained on, scores or covariates outside the anchors', covariates not used); empty
    /// when there is nothing to say.
    pub warnings: Vec<Warning>,
    /// One per input score, in order.
    pub results: Vec<CorrectedDto>,
}

/// Correct raw judge scores.
///
/// Uses the cell's active calibrator version, or `version`. At most limits.max_correct_batch
/// (default 100,000) scores per request. The response says which method made the numbers:
/// every version gives a predictive interval (held-out, per bin of the judge score; bayes:
/// its posterior predictive), bayes also a credible interval, flow versions sigma and review.
#[utoipa::path(
    post, path = "/v1/correct", tag = "correction",
    request_body = CorrectRequest,
    responses(
        (status = 200, body = CorrectResponse),
        (status = 404, description = "No active calibrator (the message says how to train one), or no such version", body = ErrorBody),
        (status = 409, description = "The judge_version has no calibration and the judge refuses mismatched versions", body = ErrorBody),
        (status = 422, description = "Bad judge, rubric, score or id; a score far outside (more than the range's width beyond) the judge scores the version was trained on; or too many scores", body = ErrorBody),
    ),
    security(("api_key" = ["correct"]))
)]
pub async fn correct(
    State(state): State<AppState>,
    _auth: Authorized<CorrectScope>,
    Json(req): Json<CorrectRequest>,
) -> Result<axum::Json<CorrectResponse>, ApiError> {
    let span = tracing::Span::current();
    span.record("judge", req.judge.as_str());
    span.record("rubric", req.rubric.as_str());
    let refused = |p| ApiError::invalid("the correction request was refused", p);
    let items = match ScoresOrItems::of(
        req.scores,
        req.items,
        "",
        "{id?, score, covariates?} or, for a panel, {id?, scores}",
    )
    .map_err(|p| refused(vec![p]))?
    {
        ScoresOrItems::Scores(scores) => RawRun::Scores(scores),
        ScoresOrItems::Items(items) => RawRun::Items(items.into_iter().map(Into::into).collect()),
    };
    let request = CorrectionRequest::parse(
        &req.judge,
        &req.rubric,
        items,
        req.version,
        req.judge_version.as_deref(),
    )
    .map_err(refused)?;
    let correction = state.service.scores().correct(request).await?;
    let v = &correction.version.version;
    let reviewed = correction
        .items
        .iter()
        .any(|c| c.corrected.review.is_some());
    let routed = correction
        .items
        .iter()
        .filter(|c| c.corrected.review == Some(true))
        .count();
    Ok(axum::Json(CorrectResponse {
        judge: v.key.judge.to_string(),
        rubric: v.key.rubric.to_string(),
        version: v.version,
        method: v.method().to_string(),
        canary: v.beta().map(|p| p.canary),
        review_count: reviewed.then_some(routed),
        judge_version: v.judge_version.as_ref().map(|j| j.as_str().to_owned()),
        warnings: correction.warnings,
        results: correction
            .items
            .into_iter()
            .map(CorrectedDto::from)
            .collect(),
    }))
}
