//! POST /v1/estimate: a run's de-biased mean.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    DesignDto, PlanDto, RunEstimateDto, RunItemDto, group_schema, identify, name_span, plan,
    raw_run, run_dto,
};
use crate::domain::runlevel::{RawRunWithGroup, RawSettings};
use crate::http::AppState;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Authorized, CorrectScope, Json};
use crate::http::schema;
use crate::service::EstimateRequest;
use judgecal_stats::repeats::Costs;
use judgecal_stats::runlevel::warnings;

/// The body of POST /v1/estimate: the cell, the run (`scores` or `items`, not both) and how
/// to answer.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EstimateBody {
    #[schema(schema_with = schema::judge_name)]
    judge: String,
    #[schema(schema_with = schema::rubric_name)]
    rubric: String,
    /// Raw judge scores, one per item of the run.
    #[schema(example = json!([2.5, 3.0, 4.0]), min_items = 1)]
    scores: Option<Vec<f64>>,
    /// The run's items, with ids, reference scores or clusters.
    #[schema(min_items = 1)]
    items: Option<Vec<RunItemDto>>,
    #[schema(schema_with = group_schema)]
    group: Option<String>,
    /// A version of the cell to use instead of the active one.
    #[schema(minimum = 1)]
    version: Option<i64>,
    /// The judge version that scored the run: served by the newest passed calibration trained
    /// on it; where there is none, by the active one with a warning (or 409 where the judge
    /// refuses mismatches).
    #[schema(schema_with = schema::judge_version)]
    judge_version: Option<String>,
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
    /// Of the interval (default 0.95).
    #[schema(minimum = 0.5, maximum = 0.999, example = 0.95)]
    level: Option<f64>,
    /// A half-width to plan for: the answer says whether more anchors (or labelled items)
    /// would reach it, and about how many, or that the run's own size is the limit.
    #[schema(exclusive_minimum = 0.0, example = 0.05)]
    target_half_width: Option<f64>,
    /// With `target_half_width`: what one more score of one item by the judge (`judge`) and
    /// one label (`label`) cost, in any one unit. The plan then weighs re-asking the judge
    /// against labelling (`plan.design`): every item scored k times and n of them labelled at
    /// random, the cheapest k. Needs the judge's repeat noise measured (anchors or this run's
    /// items with `repeats`).
    costs: Option<Costs>,
}

#[derive(Serialize, ToSchema)]
pub struct EstimateResponse {
    judge: String,
    rubric: String,
    /// The calibrator version that made every number.
    version: i64,
    method: String,
    level: f64,
    #[serde(flatten)]
    run: RunEstimateDto,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<PlanDto>,
    #[serde(flatten)]
    reading: super::RunReading,
}

/// A run's de-biased mean with its interval.
///
/// The estimand is the mean reference score the run's items would get if every one were
/// labelled. With judge scores only, the estimate is the mean corrected score of the cell's
/// version (active, or `version`); its interval adds the corrector's own uncertainty from its
/// finite anchors to the run's noise, and assumes that the reference given the judge score is
/// distributed on the run as on the anchors' groups, up to a group bias drawn as theirs were.
/// Where the anchors name groups (systems), a run of a known `group` gets that group's shrunk
/// bias and a run of a new one (or none) the between-group variance; where they do not,
/// `warnings` says that system-specific bias is not accounted for. Items that carry a
/// `reference` (a random sample of the run, at least 3) switch to the labelled path, which
/// needs no such assumption, and add a transport check of the corrector on this run.
#[utoipa::path(
    post, path = "/v1/estimate", tag = "correction",
    request_body = EstimateBody,
    responses(
        (status = 200, body = EstimateResponse),
        (status = 404, description = "No active calibrator (the message says how to train one), or no such version", body = ErrorBody),
        (status = 409, description = "The version cannot answer (too few anchors)", body = ErrorBody),
        (status = 422, description = "Bad judge, rubric, score, reference, id, cluster, level or target; too few labelled items; too many scores", body = ErrorBody),
    ),
    security(("api_key" = ["correct"]))
)]
pub async fn estimate(
    State(state): State<AppState>,
    _auth: Authorized<CorrectScope>,
    Json(body): Json<EstimateBody>,
) -> Result<axum::Json<EstimateResponse>, ApiError> {
    name_span(&body.judge, &body.rubric);
    let request = EstimateRequest::parse(
        &body.judge,
        &body.rubric,
        RawRunWithGroup {
            run: raw_run(body.scores, body.items, ""),
            group: body.group,
            judge_version: body.judge_version,
        },
        body.version,
        RawSettings {
            level: body.level,
            target_half_width: body.target_half_width,
            estimand: None,
            hold: body.hold,
            assume_missing_at_random: body.assume_missing_at_random,
        },
    )
    .map_err(|p| ApiError::invalid("the estimate request was refused", p))?;
    let settings = request.settings;
    if let Some(c) = body.costs {
        check_costs(c, settings.target)
            .map_err(|p| ApiError::invalid("the estimate request was refused", p))?;
    }
    let (served, e) = state.service.runs().estimate(request).await?;
    let mut plan = plan(e.advice, settings.target);
    if let (Some(costs), Some(target), Some(p)) = (body.costs, settings.target, plan.as_mut())
        && p.outcome != "reached"
    {
        let advice = state
            .service
            .runs()
            .design(
                (&served.loaded, served.repeats),
                &e,
                target,
                settings.level,
                costs,
            )
            .await?;
        p.design = Some(DesignDto::of(advice, target));
    }
    let (judge, rubric, version, method) = identify(&served.loaded);
    let notes = warnings::of_runs(&[&e], None, settings.level);
    Ok(axum::Json(EstimateResponse {
        judge,
        rubric,
        version,
        method,
        level: settings.level,
        run: run_dto(&e),
        plan,
        reading: super::RunReading::of(&served, warnings::rendered(&notes, |_| String::new())),
    }))
}

/// Costs that can be planned with: each finite and not negative, not both 0, and a target.
fn check_costs(c: Costs, target: Option<f64>) -> Result<(), Vec<crate::domain::Problem>> {
    use crate::domain::Problem;
    let mut problems = Vec::new();
    for (field, x) in [("costs.judge", c.judge), ("costs.label", c.label)] {
        if !(x.is_finite() && x >= 0.0) {
            problems.push(Problem::at(
                None,
                field,
                format!("must be a finite number ≥ 0, got {x}"),
            ));
        }
    }
    if problems.is_empty() && c.judge == 0.0 && c.label == 0.0 {
        problems.push(Problem::at(
            None,
            "costs",
            "a judge call and a label cannot both cost nothing",
        ));
    }
    if target.is_none() {
        problems.push(Problem::at(
            None,
            "costs",
            "plans for a target: give target_half_width too",
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}
