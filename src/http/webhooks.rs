//! Webhooks for alarms: a key with the `metrics` scope makes hooks, lists them, asks a test
//! delivery and reads each hook's delivery log.

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::extract::{Authorized, Json, MetricsScope, Path, Query};
use super::rfc3339;
use crate::domain::Problem;
use crate::store::{CONFIGURED, Delivery, StoredWebhook};
use crate::webhooks::AlarmKind;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// Where alarms are posted: an http:// or https:// URL.
    #[schema(example = "https://hooks.example.com/judgecal")]
    pub url: String,
    /// The alarm types it receives; absent or empty: all of them.
    #[serde(default)]
    #[schema(value_type = Vec<AlarmKind>)]
    pub events: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct WebhookDto {
    pub id: String,
    pub url: String,
    /// The alarm types it receives; empty: all of them.
    pub events: Vec<String>,
    /// `configured` for the hook `webhooks.url` sets, `key` for one a key made.
    pub source: String,
    pub created_at: String,
}

#[derive(Serialize, ToSchema)]
pub struct CreatedWebhook {
    #[serde(flatten)]
    pub webhook: WebhookDto,
    /// The signing secret (Standard Webhooks: `whsec_` and base64), shown this once: verify
    /// each delivery's `webhook-signature` with it.
    pub secret: String,
}

#[derive(Serialize, ToSchema)]
pub struct WebhooksResponse {
    pub webhooks: Vec<WebhookDto>,
}

fn dto(h: StoredWebhook) -> WebhookDto {
    WebhookDto {
        // By id: without keys (auth.disabled) a hook made over the API has no owner either.
        source: if h.id == CONFIGURED {
            "configured"
        } else {
            "key"
        }
        .into(),
        id: h.id,
        url: h.url,
        events: h.events,
        created_at: rfc3339(h.created_at_ms),
    }
}

/// Make a webhook: alarms (drift, fleet alert, β canary, judge changed) are posted to it,
/// signed, until it is deleted or its key is revoked.
#[utoipa::path(
    post, path = "/v1/webhooks", tag = "webhooks", operation_id = "create_webhook",
    request_body = NewWebhook,
    responses(
        (status = 201, body = CreatedWebhook),
        (status = 422, description = "Bad URL or alarm type", body = ErrorBody),
    ),
    security(("api_key" = ["metrics"]))
)]
pub async fn create(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<MetricsScope>,
    Json(body): Json<NewWebhook>,
) -> Result<(StatusCode, axum::Json<CreatedWebhook>), ApiError> {
    let hook = state
        .service
        .webhooks()
        .create(&caller, &body.url, &body.events)
        .await?;
    let secret = hook.secret.clone();
    Ok((
        StatusCode::CREATED,
        axum::Json(CreatedWebhook {
            webhook: dto(hook),
            secret,
        }),
    ))
}

/// The webhooks this key made (all of them, with the admin scope).
#[utoipa::path(
    get, path = "/v1/webhooks", tag = "webhooks", operation_id = "list_webhooks",
    responses((status = 200, body = WebhooksResponse)),
    security(("api_key" = ["metrics"]))
)]
pub async fn list(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<MetricsScope>,
) -> Result<axum::Json<WebhooksResponse>, ApiError> {
    let hooks = state.service.webhooks().list(&caller).await?;
    Ok(axum::Json(WebhooksResponse {
        webhooks: hooks.into_iter().map(dto).collect(),
    }))
}

/// Delete a webhook: it receives nothing new, deliveries still queued are cancelled, and its
/// log stays readable.
#[utoipa::path(
    delete, path = "/v1/webhooks/{hook}", tag = "webhooks", operation_id = "delete_webhook",
    params(("hook" = String, Path, description = "The webhook's id (`configured` for the one `webhooks.url` sets)")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such webhook of this key", body = ErrorBody),
        (status = 409, description = "The configured webhook (change webhooks.url)", body = ErrorBody),
    ),
    security(("api_key" = ["metrics"]))
)]
pub async fn delete(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<MetricsScope>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.service.webhooks().delete(&caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize, ToSchema)]
pub struct PingResponse {
    /// The test delivery's event id (its `webhook-id` header).
    pub event_id: String,
}

/// Queue a test delivery (`type: ping`) to a webhook, to check its receiver and signature.
#[utoipa::path(
    post, path = "/v1/webhooks/{hook}/ping", tag = "webhooks", operation_id = "ping_webhook",
    params(("hook" = String, Path, description = "The webhook's id (`configured` for the one `webhooks.url` sets)")),
    responses(
        (status = 202, body = PingResponse),
        (status = 404, description = "No such webhook of this key", body = ErrorBody),
    ),
    security(("api_key" = ["metrics"]))
)]
pub async fn ping(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<MetricsScope>,
    Path(id): Path<String>,
) -> Result<(StatusCode, axum::Json<PingResponse>), ApiError> {
    let event_id = state.service.webhooks().ping(&caller, &id).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(PingResponse { event_id })))
}

// The schema of `state`: the parameter is read as text and the service names the field where
// it is none of these.
/// A delivery's state.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Queued, or failed and waiting for its next attempt.
    Pending,
    Delivered,
    /// Its attempts ran out.
    Failed,
    /// Its webhook was deleted before it was delivered.
    Cancelled,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeliveryParams {
    /// Only deliveries in this state.
    #[param(value_type = Option<DeliveryState>, inline)]
    state: Option<String>,
    /// At most this many, newest first (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

#[derive(Serialize, ToSchema)]
pub struct DeliveryDto {
    pub id: String,
    /// The alarm's id: the `webhook-id` header of every attempt, the receiver's idempotency key.
    pub event_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// pending (queued, or failed and waiting for its next attempt), delivered, failed (its
    /// attempts ran out) or cancelled (the webhook was deleted).
    pub state: String,
    pub attempts: i64,
    /// The receiver's HTTP status at the last attempt, where it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
    /// When a pending delivery is next sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
    /// The body as sent.
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
}

#[derive(Serialize, ToSchema)]
pub struct DeliveriesResponse {
    pub deliveries: Vec<DeliveryDto>,
}

fn delivery_dto(d: Delivery) -> DeliveryDto {
    DeliveryDto {
        next_attempt_at: (d.state == "pending").then(|| rfc3339(d.next_attempt_at_ms)),
        payload: serde_json::from_str(&d.payload).unwrap_or(serde_json::Value::Null),
        id: d.id,
        event_id: d.event_id,
        kind: d.event,
        state: d.state,
        attempts: d.attempts,
        last_status: d.last_status,
        last_error: d.last_error,
        created_at: rfc3339(d.created_at_ms),
        delivered_at: d.delivered_at_ms.map(rfc3339),
    }
}

/// A webhook's delivery log, newest first: every alarm queued to it, its attempts and what
/// the receiver last answered.
#[utoipa::path(
    get, path = "/v1/webhooks/{hook}/deliveries", tag = "webhooks", operation_id = "webhook_deliveries",
    params(("hook" = String, Path, description = "The webhook's id (`configured` for the one `webhooks.url` sets)"), DeliveryParams),
    responses(
        (status = 200, body = DeliveriesResponse),
        (status = 404, description = "No such webhook of this key", body = ErrorBody),
        (status = 422, description = "Bad state or limit", body = ErrorBody),
    ),
    security(("api_key" = ["metrics"]))
)]
pub async fn deliveries(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<MetricsScope>,
    Path(id): Path<String>,
    Query(params): Query<DeliveryParams>,
) -> Result<axum::Json<DeliveriesResponse>, ApiError> {
    let limit = params.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid(
            "the log cannot be read",
            vec![Problem::at(
                None,
                "limit",
                format!("{limit} is not between 1 and 1000"),
            )],
        ));
    }
    let limit = i64::from(limit);
    let log = state
        .service
        .webhooks()
        .deliveries(&caller, &id, params.state.as_deref(), limit)
        .await?;
    Ok(axum::Json(DeliveriesResponse {
        deliveries: log.into_iter().map(delivery_dto).collect(),
    }))
}
