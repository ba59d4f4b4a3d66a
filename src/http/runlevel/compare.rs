//! POST /v1/compare: is model A better than model B?

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{GroupTermDto, RunBody, VarianceDto, group, variance};
use super::{PlanDto, RunEstimateDto, identify, name_span, plan, run_dto};
use crate::domain::runlevel::RawSettings;
use crate::http::AppState;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Authorized, CorrectScope, Json};
use crate::http::schema;
use crate::service::CompareRequest;
use judgecal_stats::runlevel::RunComparison;
use judgecal_stats::runlevel::warnings;

/// The body of POST /v1/compare: two runs of one cell.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareBody {
    #[schema(schema_with = schema::judge_name)]
    judge: String,
    #[schema(schema_with = schema::rubric_name)]
    rubric: String,
    /// Run A (for example model A's outputs).
    a: RunBody,
    /// Run B. Items with the same ids as A's are paired (the same prompts answered by two
    /// models); the pairing needs both runs to have the same set of ids.
    b: RunBody,
    #[schema(minimum = 1)]
    version: Option<i64>,
    /// Covariates to hold at one value for every item (`{"length": 500}`): the answer is then
    /// what the runs would score at that value, the judge's reward for it taken out (a
    /// length-controlled estimate). Only for a version trained with those covariates.
    #[schema(schema_with = schema::covariates)]
    hold: Option<std::collections::BTreeMap<String, f64>>,
    /// A panel's runs only: take the members' missing scores as missing at random (their
    /// absence depends on nothing, or only on what the other members scored) without testing
    /// it. By default a run whose members score its partial items differently from its
    /// complete ones (a judge that fails on hard items) is refused, naming the member.
    #[serde(default)]
    assume_missing_at_random: Option<bool>,
    #[schema(minimum = 0.5, maximum = 0.999, example = 0.95)]
    level: Option<f64>,
    #[schema(exclusive_minimum = 0.0, example = 0.05)]
    target_half_width: Option<f64>,
    /// What the difference estimates: `runs` (default), the runs' own mean reference
    /// difference, what these very items would show if all were labelled; or `population`,
    /// the mean difference over the prompts the paired items were drawn from.
    #[schema(value_type = Option<String>, example = "runs", pattern = "^(runs|population)$")]
    estimand: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct CompareResponse {
    judge: String,
    rubric: String,
    version: i64,
    method: String,
    level: f64,
    /// Each run's own estimate.
    a: RunEstimateDto,
    b: RunEstimateDto,
    /// mean(A) − mean(B), de-biased.
    difference: f64,
    interval: [f64; 2],
    /// Two-sided, against no difference.
    p_value: f64,
    /// The probability that A's mean is the higher, from the interval's own distribution (the
    /// t or normal centred on `difference` with its standard error): an approximation, not a
    /// posterior; on every path.
    #[serde(skip_serializing_if = "Option::is_none")]
    prob_a_greater: Option<f64>,
    /// `plain` or `labelled` (either run has labelled items).
    path: &'static str,
    /// Whether the items were paired by id.
    paired: bool,
    /// `runs` (the runs' own difference) or `population` (over the prompts).
    estimand: &'static str,
    /// Items paired.
    pairs: usize,
    variance: VarianceDto,
    corrector_term: &'static str,
    /// The group term of the difference: cancelled where both runs name one group.
    group: GroupTermDto,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<PlanDto>,
    #[serde(flatten)]
    reading: super::RunReading,
}

/// Is model A better than model B? The difference of two runs' de-biased means.
///
/// By default (`estimand`: `runs`) the difference of the two runs' own mean references: its
/// sampling variance is each run's residual noise (reference around corrected score), paired
/// or not. `population` asks for the mean difference over the prompts the paired items were
/// drawn from, whose sampling variance is the per-item corrected differences'. The
/// corrector's uncertainty, which both runs share, enters the difference once; the runs'
/// groups add their bias difference (cancelled for one group on both sides). Items of either
/// run may carry a `reference`; then the labelled path applies (on the per-item differences
/// where the same items of paired runs are labelled; otherwise a Welch t on the two runs'
/// own answers).
#[utoipa::path(
    post, path = "/v1/compare", tag = "correction",
    request_body = CompareBody,
    responses(
        (status = 200, body = CompareResponse),
        (status = 404, description = "No active calibrator (the message says how to train one), or no such version", body = ErrorBody),
        (status = 409, description = "The version cannot answer (too few anchors), or runs of different judge versions meet a calibration trained with covariates", body = ErrorBody),
        (status = 422, description = "Bad judge, rubric, score, reference, id, cluster, level or target; too few labelled items; too many scores", body = ErrorBody),
    ),
    security(("api_key" = ["correct"]))
)]
pub async fn compare(
    State(state): State<AppState>,
    _auth: Authorized<CorrectScope>,
    Json(body): Json<CompareBody>,
) -> Result<axum::Json<CompareResponse>, ApiError> {
    name_span(&body.judge, &body.rubric);
    let request = CompareRequest::parse(
        &body.judge,
        &body.rubric,
        body.a.raw("a."),
        body.b.raw("b."),
        body.version,
        RawSettings {
            level: body.level,
            target_half_width: body.target_half_width,
            estimand: body.estimand,
            hold: body.hold,
            assume_missing_at_random: body.assume_missing_at_random,
        },
    )
    .map_err(|p| ApiError::invalid("the comparison request was refused", p))?;
    let settings = request.settings;
    let (served, c): (_, RunComparison) = state.service.runs().compare(request).await?;
    let (judge, rubric, version, method) = identify(&served.loaded);
    let notes = warnings::of_runs(&[&c.a, &c.b], Some(&c.group), settings.level);
    let mut notes = warnings::rendered(&notes, |k| format!("run {}: ", ["a", "b"][k]));
    notes.dedup();
    let d = &c.difference;
    Ok(axum::Json(CompareResponse {
        judge,
        rubric,
        version,
        method,
        level: settings.level,
        a: run_dto(&c.a).corrected_by(&served, 0),
        b: run_dto(&c.b).corrected_by(&served, 1),
        difference: d.estimate,
        interval: [d.interval.0, d.interval.1],
        p_value: d.p_value,
        prob_a_greater: Some(c.prob_a_greater),
        path: c.path.as_str(),
        paired: d.paired,
        estimand: c.estimand.as_str(),
        pairs: c.pairs,
        variance: variance(d.variance),
        corrector_term: c.term.as_str(),
        group: group(&c.group),
        plan: plan(c.advice, settings.target),
        reading: super::RunReading::of(&served, notes),
    }))
}
