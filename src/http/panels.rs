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
use crate::domain::panel::{NewPanel, Panel};

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PanelRequest {
    /// The panel's name: a judge name no judge's anchors use.
    #[schema(schema_with = schema::judge_name)]
    name: String,
    /// Its members, 2 to 6 judges, in order. Each member's anchors of an item must carry the
    /// same reference score.
    #[schema(example = json!(["gpt-4o-mini", "claude-haiku", "llama-3-8b"]), min_items = 2, max_items = 6)]
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

fn name_of(raw: &str) -> Result<JudgeName, ApiError> {
    JudgeName::parse(raw).map_err(|e| {
        ApiError::invalid(
            "the panel name was refused",
            vec![crate::domain::Problem::at(None, "name", e)],
        )
    })
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
        (status = 409, description = "The name is a panel already or a judge with anchors, or a member is a panel", body = ErrorBody),
        (status = 422, description = "Bad name, or not 2 to 6 distinct judges", body = ErrorBody),
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
    let panel = state.service.create_panel(&new).await?;
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
    let panels = state.service.panels().await?;
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
        (status = 422, description = "Bad name", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn get_panel(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path(name): Path<String>,
) -> Result<axum::Json<PanelDto>, ApiError> {
    let panel = state.service.panel(&name_of(&name)?).await?;
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
        (status = 422, description = "Bad name", body = ErrorBody),
    ),
    security(("api_key" = ["train"]))
)]
pub async fn delete_panel(
    State(state): State<AppState>,
    _auth: Authorized<TrainScope>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.service.delete_panel(&name_of(&name)?).await?;
    Ok(StatusCode::NO_CONTENT)
}
