//! Rubric scales.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{AdminScope, AnyKey, Authorized, Json, Path};
use super::{AppState, rfc3339};
use crate::domain::Rubric;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RubricRequest {
    #[schema(example = 1.0)]
    min: f64,
    #[schema(example = 5.0)]
    max: f64,
    #[serde(default)]
    #[schema(example = "How well the story hangs together")]
    description: String,
}

#[derive(Serialize, ToSchema)]
pub struct RubricDto {
    pub name: String,
    pub min: f64,
    pub max: f64,
    pub description: String,
    /// RFC 3339.
    pub updated_at: String,
}

impl From<Rubric> for RubricDto {
    fn from(r: Rubric) -> Self {
        Self {
            name: r.name.to_string(),
            min: r.scale.min,
            max: r.scale.max,
            description: r.description,
            updated_at: rfc3339(r.updated_at_ms),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct RubricsResponse {
    pub rubrics: Vec<RubricDto>,
}

/// Set a rubric's scale. Reference scores must lie inside it; a rubric first seen in an upload
/// gets 1–5. Refused with 409 if stored anchors fall outside the new scale.
#[utoipa::path(
    put, path = "/v1/rubrics/{rubric}", tag = "rubrics",
    params(("rubric" = String, Path)),
    request_body = RubricRequest,
    responses(
        (status = 200, body = RubricDto),
        (status = 409, description = "Stored anchors lie outside the new scale", body = ErrorBody),
        (status = 422, description = "Invalid name or scale", body = ErrorBody),
    ),
    security(("api_key" = ["admin"]))
)]
pub async fn put_rubric(
    State(state): State<AppState>,
    _auth: Authorized<AdminScope>,
    Path(rubric): Path<String>,
    Json(body): Json<RubricRequest>,
) -> Result<axum::Json<RubricDto>, ApiError> {
    tracing::Span::current().record("rubric", &rubric);
    let stored = state
        .service
        .scores()
        .put_rubric(&rubric, body.min, body.max, &body.description)
        .await?;
    tracing::info!(min = body.min, max = body.max, "rubric scale set");
    Ok(axum::Json(stored.into()))
}

/// Every rubric and its scale.
#[utoipa::path(
    get, path = "/v1/rubrics", tag = "rubrics",
    responses(
        (status = 200, body = RubricsResponse),
    ),
    security(("api_key" = []))
)]
pub async fn list_rubrics(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
) -> Result<axum::Json<RubricsResponse>, ApiError> {
    let rubrics = state.service.scores().rubrics().await?;
    Ok(axum::Json(RubricsResponse {
        rubrics: rubrics.into_iter().map(Into::into).collect(),
    }))
}
