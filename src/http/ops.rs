//! Liveness, readiness and metrics: for operators and their probes. No API key, but for
//! `/metrics` where `auth.protect_metrics` asks for one with the `metrics` scope.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
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

/// A readiness probe's answer comes within this long, whatever the store does.
const READY_WITHIN: Duration = Duration::from_millis(900);

/// Ready: the store answers (within a second) and every migration is applied.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, body = Status),
        (status = 503, description = "Store unreachable or migrations pending", body = ErrorBody),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<axum::Json<Status>, ApiError> {
    let not_ready = |why: &str| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", why);
    match tokio::time::timeout(READY_WITHIN, state.service.store().ready()).await {
        Ok(Ok(true)) => Ok(axum::Json(Status { status: "ready" })),
        Ok(Ok(false)) => Err(not_ready("migrations are pending: run `judgecal migrate`")),
        Ok(Err(e)) => {
            tracing::warn!(error = ?e, "readiness check failed");
            Err(not_ready("the store does not answer"))
        }
        Err(_) => {
            tracing::warn!("readiness check: the store did not answer within 0.9 s");
            Err(not_ready("the store did not answer within 0.9 s"))
        }
    }
}

/// Prometheus text exposition. Its labels name judges, rubrics, systems and covariates; with
/// `auth.protect_metrics` it needs a key with the `metrics` (or `admin`) scope.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Prometheus text format", body = String, content_type = "text/plain"),
        (status = 401, description = "auth.protect_metrics is on and no valid key was sent", body = ErrorBody),
        (status = 403, description = "auth.protect_metrics is on and the key lacks the `metrics` scope", body = ErrorBody),
    ))]
pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    if state.protect_metrics {
        let header = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        state
            .service
            .operations()
            .authorize(header, Some(crate::auth::Scope::Metrics))
            .await?;
    }
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.service.metrics().render(),
    ))
}
