//! Panels: several judges of one rubric set whose scores of an item are fused into one
//! calibrated score. Once defined, a panel's name serves wherever a judge's does.

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{AnyKey, Authorized, Json, Path, TrainScope};
use super::{AppState, rfc3339, schema};
use crate::domain::JudgeName;
use crate::domain::panel::{NewPanel, Panel, PlanRequest};
use judgecal_stats::panel::plan::SubPanelPlan;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PanelRequest {
    /// The panel's name: a judge name no judge's anchors use.
    #[schema(schema_with = schema::judge_name)]
    name: String,
    /// Its members, 2 to 12 judges, in order. Each member's anchors of an item must carry the
    /// same reference score.
    #[schema(example = json!(["gpt-4o-mini", "claude-haiku", "llama-3-8b"]), min_items = 2, max_items = 12)]
    judges: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct PanelDto {
    pub name: String,
    pub judges: Vec<String>,
    /// RFC 3339.
    pub created_at: String,
}

impl From<Panel> for PanelDto {
    fn from(p: Panel) -> Self {
        Self {
            name: p.name.to_string(),
            judges: p.judges.iter().map(JudgeName::to_string).collect(),
            created_at: rfc3339(p.created_at_ms),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct PanelsResponse {
    pub panels: Vec<PanelDto>,
}

/// The panel a path names: a name no judge could have names no panel (404).
fn name_of(raw: &str) -> Result<JudgeName, ApiError> {
    JudgeName::parse(raw)
        .map_err(|_| ApiError::not_found(format!("no panel {raw:?}; see GET /v1/panels")))
}

/// Define a panel.
///
/// From then on its name serves wherever a judge's does: train it with
/// `POST /v1/judges/{name}/calibrations` (its members' anchors join on `item_id`), then send
/// items with `scores` ({member: score}) to `/v1/correct`, `/v1/estimate`, `/v1/compare` and
/// `/v1/rank`.
#[utoipa::path(
    post, path = "/v1/panels", tag = "panels",
    request_body = PanelRequest,
    responses(
        (status = 201, body = PanelDto),
        (status = 409, description = "The name is a panel already or a judge with anchors, a member is a panel, or a member holds pairwise comparisons (panels of pairwise judges are not built)", body = ErrorBody),
        (status = 422, description = "Bad name, or not 2 to 12 distinct judges", body = ErrorBody),
    ),
    security(("api_key" = ["train"]))
)]
pub async fn create_panel(
    State(state): State<AppState>,
    _auth: Authorized<TrainScope>,
    Json(body): Json<PanelRequest>,
) -> Result<(StatusCode, axum::Json<PanelDto>), ApiError> {
    let new = NewPanel::parse(&body.name, &body.judges)
        .map_err(|p| ApiError::invalid("the panel was refused", p))?;
    let panel = state.service.panels().create_panel(&new).await?;
    Ok((StatusCode::CREATED, axum::Json(panel.into())))
}

/// Every panel.
#[utoipa::path(
    get, path = "/v1/panels", tag = "panels",
    responses((status = 200, body = PanelsResponse)),
    security(("api_key" = []))
)]
pub async fn list_panels(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
) -> Result<axum::Json<PanelsResponse>, ApiError> {
    let panels = state.service.panels().list().await?;
    Ok(axum::Json(PanelsResponse {
        panels: panels.into_iter().map(PanelDto::from).collect(),
    }))
}

/// One panel.
#[utoipa::path(
    get, path = "/v1/panels/{name}", tag = "panels",
    params(("name" = String, Path)),
    responses(
        (status = 200, body = PanelDto),
        (status = 404, description = "No such panel", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn get_panel(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path(name): Path<String>,
) -> Result<axum::Json<PanelDto>, ApiError> {
    let panel = state.service.panels().panel(&name_of(&name)?).await?;
    Ok(axum::Json(panel.into()))
}

/// Delete a panel's definition. Its versions stay, as every version does; they serve again
/// only if a panel of that name and the same members is defined.
#[utoipa::path(
    delete, path = "/v1/panels/{name}", tag = "panels",
    params(("name" = String, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such panel", body = ErrorBody),
    ),
    security(("api_key" = ["train"]))
)]
pub async fn delete_panel(
    State(state): State<AppState>,
    _auth: Authorized<TrainScope>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    state
        .service
        .panels()
        .delete_panel(&name_of(&name)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PanelPlanRequest {
    #[schema(schema_with = schema::rubric_name)]
    rubric: String,
    /// Items in the run to be scored.
    #[schema(example = 2000, minimum = 1, maximum = 100_000_000)]
    run_size: i64,
    /// The half-width the run's interval must reach, in reference units.
    #[schema(example = 0.05, exclusive_minimum = 0.0)]
    target_half_width: f64,
    /// Of the interval; 0.95 unless given.
    #[schema(example = 0.95, minimum = 0.5, maximum = 0.999)]
    level: Option<f64>,
    /// Each member's cost per item scored (any unit); members left out cost 1.
    #[serde(default)]
    #[schema(example = json!({"gpt-4o-mini": 0.2, "claude-haiku": 0.3, "llama-3-8b": 0.05}))]
    costs: std::collections::BTreeMap<String, f64>,
    /// The cost of one human label, in the same unit.
    #[schema(example = 20.0, minimum = 0.0)]
    label_cost: f64,
}

#[derive(Serialize, ToSchema)]
pub struct SubPanelPlanDto {
    pub judges: Vec<String>,
    /// The sum of its members' costs per item.
    pub cost_per_item: f64,
    /// The sd of a reference about this sub-panel's fused score (its posterior E[σ²], rooted).
    pub residual_sd: f64,
    /// Labels a run of `run_size` items needs to reach the target on the labelled path.
    pub labels: usize,
    /// Judge calls for the run plus those labels.
    pub total_cost: f64,
}

#[derive(Serialize, ToSchema)]
pub struct PanelPlanDto {
    pub panel: String,
    pub rubric: String,
    /// The panel's version the plan is read from (the active one).
    pub version: i64,
    /// How many independent judges the members are worth: 1ᵀR⁻¹1 for R the correlation of
    /// their errors (the number of members where the errors are independent, 1 where they
    /// are one judge's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_judges: Option<f64>,
    /// Every sub-panel, the full panel last. A panel of more than six members lists each
    /// member alone, the cheapest sub-panel of each size and the full panel: all 2^M − 1 are
    /// weighed, the thousands are not listed.
    pub sub_panels: Vec<SubPanelPlanDto>,
    /// The sub-panel with the lowest total cost.
    pub cheapest: SubPanelPlanDto,
    /// The single judge that needs the fewest labels.
    pub best_single: SubPanelPlanDto,
    /// Labels the best single judge needs, less the cheapest sub-panel's: what the panel is
    /// worth in human labels for this run.
    pub labels_saved: i64,
}

/// Which judges to call.
///
/// For a run of `run_size` items whose mean must be known to ±`target_half_width`, every
/// sub-panel of the panel's active version in `rubric`: the human labels it needs on the
/// labelled path (a random sample of the run labelled; `L = ⌈1 / (h²/(z²σ²) + 1/n)⌉`, σ² the
/// residual variance of a reference about the sub-panel's fused score), and its cost (judge
/// calls plus labels); the cheapest sub-panel, and the labels it saves against the best
/// single judge.
#[utoipa::path(
    post, path = "/v1/panels/{name}/plan", tag = "panels",
    params(("name" = String, Path)),
    request_body = PanelPlanRequest,
    responses(
        (status = 200, body = PanelPlanDto),
        (status = 404, description = "No such panel, or no trained version in the rubric", body = ErrorBody),
        (status = 409, description = "The panel's members changed since its version was trained", body = ErrorBody),
        (status = 422, description = "Bad rubric, size, width, level or cost, or a cost for a judge that is not a member", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn plan(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path(name): Path<String>,
    Json(body): Json<PanelPlanRequest>,
) -> Result<axum::Json<PanelPlanDto>, ApiError> {
    let name = name_of(&name)?;
    let request = PlanRequest::parse(
        name.as_str(),
        &body.rubric,
        body.run_size,
        body.target_half_width,
        body.level,
        body.costs,
        body.label_cost,
    )
    .map_err(|p| ApiError::invalid("the plan request was refused", p))?;
    let (loaded, plan) = state.service.panels().plan_panel(&request).await?;
    let v = &loaded.version;
    let members = v
        .fusion
        .as_ref()
        .map(|f| f.members.clone())
        .unwrap_or_default();
    let dto = |s: &SubPanelPlan| SubPanelPlanDto {
        judges: s.members.iter().map(|&m| members[m].clone()).collect(),
        cost_per_item: s.cost_per_item,
        residual_sd: s.residual_sd,
        labels: s.labels,
        total_cost: s.total_cost,
    };
    let pick = |i: Option<usize>| {
        i.and_then(|i| plan.sub_panels.get(i))
            .map(dto)
            .ok_or_else(|| ApiError::from(crate::error::Error::Internal("an empty plan".into())))
    };
    Ok(axum::Json(PanelPlanDto {
        panel: v.key.judge.to_string(),
        rubric: v.key.rubric.to_string(),
        version: v.version,
        effective_judges: plan.effective_judges,
        sub_panels: plan.sub_panels.iter().map(dto).collect(),
        cheapest: pick(plan.cheapest)?,
        best_single: pick(plan.best_single)?,
        labels_saved: plan.labels_saved.unwrap_or(0),
    }))
}
