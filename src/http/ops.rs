//! Liveness, readiness and metrics: for operators and their probes. No API key.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ErrorBody};

#[derive(Serialize, ToSchema)]
pub struct Status {
    #[schema(example = "ok")]
    pub status: &'static str,
}

/// Alive: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, body = Status)))]
pub async fn healthz() -> axum::Json<Status> {
    axum::Json(Status { status: "ok" })
}

/// Ready: the store answers and every migration is applied.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, body = Status),
        (status = 503, description = "Store unreachable or migrations pending", body = ErrorBody),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<axum::Json<Status>, ApiError> {
    match state.service.store().ready().await {
        Ok(true) => Ok(axum::Json(Status { status: "ready" })),
        Ok(false) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "migrations are pending: run `judgecal migrate`",
        )),
        Err(e) => {
            tracing::warn!(error = ?e, "readiness check failed");
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                "the store does not answer",
            ))
        }
    }
}

/// Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain")))]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.service.metrics().render(),
    )
}
