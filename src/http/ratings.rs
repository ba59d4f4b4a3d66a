//! POST /v1/ratings: Bradley–Terry ratings of a run's systems by the people's preference,
//! from a pairwise judge's verdicts and the cell's labelled comparisons.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::comparisons::{
    preference_schema, rater_schema, swapped_schema, system_schema, verdict_schema,
};
use super::error::{ApiError, ErrorBody};
use super::extract::{Authorized, CorrectScope, Json};
use super::schema;
use crate::domain::ratings;
use crate::error::Error;
use crate::service::{RatingsAnswer, WinRateAnswer};
use judgecal_stats::warning::Warning;

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

/// The labels that bring every rating's half-width to `target_half_width`.
#[derive(Serialize, ToSchema)]
pub struct PairwiseLabelPlanDto {
    /// `reached`; `more_labelled` (label `needed` more of the run's comparisons: those in
    /// `label`); `out_of_reach` (labelling every unlabelled comparison of the run would not
    /// do it: the predictions' own noise, or too few comparisons of some system; send a
    /// larger run).
    pub outcome: String,
    pub needed: Option<usize>,
    /// The item ids to send to people: a seeded uniform draw among the run's unlabelled
    /// comparisons, so that labelled they are drawn as the run is. Upload them with their
    /// `preference` (or send them in the next request) and rate again.
    pub label: Vec<String>,
    /// The widest rating half-width now, and the one expected with `needed` more labels
    /// (the labelled term's variance falls as 1/labels, the prediction weight held).
    pub widest_half_width: f64,
    pub expected_half_width: Option<f64>,
}

fn baseline_schema() -> utoipa::openapi::schema::Object {
    schema::group_name("The system whose rating is 0; one of the run's systems.")
}

#[derive(Serialize, ToSchema)]
pub struct SystemRatingDto {
    pub system: String,
    /// Bradley–Terry rating on the natural log-odds scale: people prefer a over b with
    /// probability σ(rating_a − rating_b).
    pub rating: f64,
    pub standard_error: f64,
    /// At `level`; [0, 0] for the baseline.
    #[schema(min_items = 2, max_items = 2)]
    pub interval: [f64; 2],
    /// [best, worst] ranks (1 the highest rating); every system's hold at once at `level`.
    #[schema(value_type = Vec<i64>, min_items = 2, max_items = 2, example = json!([1, 3]))]
    pub rank_interval: [usize; 2],
    /// The run's comparisons of this system.
    pub comparisons: usize,
    /// The share of its comparisons with the baseline whose answer people prefer (a tie
    /// counts ½), with its interval at `level`; null for the baseline, and where fewer than
    /// 30 labelled comparisons of the pair correct the judge's.
    pub win_rate: Option<WinRateDto>,
    /// The same over every comparison of the system (its rate against the field).
    pub field_win_rate: Option<WinRateDto>,
}

#[derive(Serialize, ToSchema)]
pub struct WinRateDto {
    pub estimate: f64,
    #[schema(min_items = 2, max_items = 2)]
    pub interval: [f64; 2],
    /// The run's comparisons it is over.
    pub comparisons: usize,
    /// The labelled comparisons (the cell's and the run's) correcting the judge's.
    pub labelled: usize,
}

impl From<WinRateAnswer> for WinRateDto {
    fn from(w: WinRateAnswer) -> Self {
        Self {
            estimate: w.estimate,
            interval: pair(w.interval),
            comparisons: w.comparisons,
            labelled: w.labelled,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct ControlDto {
    pub covariate: String,
    /// Log-odds of people preferring a per unit of a's covariate value.
    pub coefficient: f64,
    #[schema(min_items = 2, max_items = 2)]
    pub interval: [f64; 2],
}

#[derive(Serialize, ToSchema)]
pub struct CalibrationCandidateDto {
    pub inputs: String,
    /// Held-out (5-fold) mean log-loss on the cell's labelled comparisons, in nats.
    pub log_loss: f64,
    /// Held-out share whose more likely side people preferred.
    pub accuracy: f64,
}

#[derive(Serialize, ToSchema)]
pub struct RatingsCalibrationDto {
    /// The calibrated preference: the choice of the cell's newest trained version of the
    /// run's judge version (`version`), fitted again on the labelled comparisons of now; with
    /// no such version, the one `auto` chose at this request (lowest held-out log-loss).
    pub chosen: String,
    /// The trained version whose choice it is; null where chosen at this request.
    pub version: Option<i64>,
    pub candidates: Vec<CalibrationCandidateDto>,
    /// The covariates it reads: those every comparison carries.
    pub covariates: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct RatingsResponse {
    pub baseline: String,
    pub level: f64,
    /// Highest rating first.
    pub systems: Vec<SystemRatingDto>,
    /// The controls' coefficients (empty without `control`).
    pub controls: Vec<ControlDto>,
    pub comparisons: usize,
    /// The run's comparisons with a preference.
    pub labelled: usize,
    /// The cell's labelled comparisons of both rated systems in the labelled set.
    pub anchors: usize,
    /// The weight the judge's calibrated verdicts got against the labels (PPI++'s λ: 0 the
    /// labels alone, 1 full weight).
    pub prediction_weight: f64,
    pub calibration: RatingsCalibrationDto,
    /// With `target_half_width` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PairwiseLabelPlanDto>,
    /// What the ratings rest on that the request departs from: systems with few or no
    /// labelled comparisons (`unlabelled_systems`, `underlabelled_systems`), a run unlike the
    /// labelled set (`run_unlike_labelled`, `input_missing`), systems the judge puts beyond
    /// every comparison (`unbounded_systems`), one rater (`single_rater`, `dominant_rater`).
    pub warnings: Vec<Warning>,
}

fn pair<T: Copy>((a, b): (T, T)) -> [T; 2] {
    [a, b]
}

impl From<RatingsAnswer> for RatingsResponse {
    fn from(a: RatingsAnswer) -> Self {
        Self {
            baseline: a.baseline.to_string(),
            level: a.level,
            systems: a
                .systems
                .into_iter()
                .map(|s| SystemRatingDto {
                    system: s.system.to_string(),
                    rating: s.rating,
                    standard_error: s.standard_error,
                    interval: pair(s.interval),
                    rank_interval: pair(s.rank_interval),
                    comparisons: s.comparisons,
                    win_rate: s.win_rate.map(Into::into),
                    field_win_rate: s.field_win_rate.map(Into::into),
                })
                .collect(),
            controls: a
                .controls
                .into_iter()
                .map(|c| ControlDto {
                    covariate: c.covariate.to_string(),
                    coefficient: c.coefficient,
                    interval: pair(c.interval),
                })
                .collect(),
            comparisons: a.comparisons,
            labelled: a.run_labelled,
            anchors: a.anchors,
            prediction_weight: a.prediction_weight,
            calibration: RatingsCalibrationDto {
                chosen: a.chosen,
                version: a.version,
                candidates: a
                    .candidates
                    .into_iter()
                    .map(|c| CalibrationCandidateDto {
                        inputs: c.inputs,
                        log_loss: c.log_loss,
                        accuracy: c.accuracy,
                    })
                    .collect(),
                covariates: a.covariates.iter().map(|c| c.to_string()).collect(),
            },
            plan: a.plan.map(|p| PairwiseLabelPlanDto {
                outcome: p.outcome.to_owned(),
                needed: p.needed,
                label: p.label.iter().map(|i| i.as_str().to_owned()).collect(),
                widest_half_width: p.widest_half_width,
                expected_half_width: p.expected_half_width,
            }),
            warnings: a.warnings,
        }
    }
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
        (status = 200, description = "The ratings", body = RatingsResponse),
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
) -> Result<axum::Json<RatingsResponse>, ApiError> {
    let request =
        ratings::parse(body).map_err(|p| Error::rejected("the ratings request was refused", p))?;
    let answer = state.service.pairwise().rate(request).await?;
    Ok(axum::Json(answer.into()))
}
