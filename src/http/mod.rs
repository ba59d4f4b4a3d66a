//! The HTTP API: routes, middleware and the mapping of service results to responses. Nothing
//! else in the crate imports this module.

mod agreement;
mod anchors;
mod calibration;
mod correct;
pub mod error;
mod extract;
mod judge_versions;
pub mod openapi;
mod ops;
mod pairwise;
mod panels;
mod rubrics;
mod runlevel;
mod schema;
pub mod ui;
mod webhooks;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::{BoxError, ServiceBuilder};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use tracing::field::Empty;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::config::Settings;
use crate::metrics::Metrics;
use crate::service::Service;
use error::ApiError;

#[derive(Clone)]
pub struct AppState {
    pub service: Arc<Service>,
    /// `auth.protect_metrics`: `/metrics` needs a key with the `metrics` scope.
    pub protect_metrics: bool,
    /// What an anchor or comparison upload may bring.
    pub uploads: extract::UploadLimits,
}

/// Every route of the API, each with its OpenAPI operation (from the handler's
/// `#[utoipa::path]`): the router and the document are both made from these two lists. The
/// first holds the `/v1` routes, the second the operations routes.
fn routes() -> (OpenApiRouter<AppState>, OpenApiRouter<AppState>) {
    let v1 = OpenApiRouter::new()
        .routes(routes!(anchors::upload))
        .routes(routes!(anchors::list_cells))
        .routes(routes!(anchors::list_anchors))
        .routes(routes!(anchors::delete_anchor))
        .routes(routes!(pairwise::comparisons::upload))
        .routes(routes!(pairwise::ratings::rate))
        .routes(routes!(pairwise::versions::preferences))
        .routes(routes!(rubrics::list_rubrics))
        .routes(routes!(rubrics::put_rubric))
        .routes(routes!(calibration::train))
        .routes(routes!(calibration::job))
        .routes(routes!(calibration::cancel))
        .routes(routes!(calibration::versions))
        .routes(routes!(calibration::activate))
        .routes(routes!(calibration::report))
        .routes(routes!(agreement::agreement))
        .routes(routes!(judge_versions::list))
        .routes(routes!(judge_versions::rescore))
        .routes(routes!(judge_versions::bridge))
        .routes(routes!(judge_versions::check))
        .routes(routes!(judge_versions::get_check))
        .routes(routes!(
            judge_versions::settings,
            judge_versions::put_settings
        ))
        .routes(routes!(panels::create_panel, panels::list_panels))
        .routes(routes!(panels::get_panel, panels::delete_panel))
        .routes(routes!(panels::plan))
        .routes(routes!(correct::correct))
        .routes(routes!(runlevel::estimate::estimate))
        .routes(routes!(runlevel::compare::compare))
        .routes(routes!(runlevel::rank::rank))
        .routes(routes!(runlevel::rank_sessions::open_rank_session))
        .routes(routes!(runlevel::rank_sessions::rank_session))
        .routes(routes!(runlevel::rank_sessions::rank_look))
        .routes(routes!(webhooks::create, webhooks::list))
        .routes(routes!(webhooks::delete))
        .routes(routes!(webhooks::ping))
        .routes(routes!(webhooks::deliveries));
    let operations = OpenApiRouter::new()
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(ops::metrics));
    (v1, operations)
}

/// The API's paths and the schemas their operations name, from `routes`.
pub(crate) fn documented_routes() -> utoipa::openapi::OpenApi {
    let (v1, operations) = routes();
    v1.merge(operations).into_openapi()
}

/// The whole API. `/v1` routes are subject to the body limit, the request timeout and the
/// concurrency limit (429 past it); the operations routes are not, so probes and scrapes still
/// answer under load.
pub fn router(service: Arc<Service>, settings: &Settings) -> Router {
    let limits = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(middleware_error))
        .load_shed()
        .layer(GlobalConcurrencyLimitLayer::new(
            settings.server.max_concurrent_requests,
        ))
        .layer(middleware::from_fn_with_state(
            settings.request_timeout(),
            deadline,
        ));
    let shares = Arc::new(KeyShares::new(settings.server.max_concurrent_per_key));
    let (v1, operations) = routes();
    // The report pages (not API operations, so not in the document) share the API's limits.
    let pages = Router::new()
        .route("/ui", axum::routing::get(ui::index))
        .route("/ui/", axum::routing::get(ui::index))
        .route("/ui/cells/{judge}/{rubric}", axum::routing::get(ui::cell));
    let mut v1 = Router::from(v1).merge(pages).layer(limits);
    if !settings.auth.disabled {
        // Without keys every caller is the same one: the global limit is its share.
        v1 = v1.layer(middleware::from_fn_with_state(shares, per_key_share));
    }
    let v1 = v1.layer(DefaultBodyLimit::max(settings.server.max_body_bytes));
    // Shared, not cloned: the middleware's state is cloned for every request.
    let metrics = Arc::new(service.metrics().clone());
    Router::from(operations)
        .merge(v1)
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(metrics, track_request))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .with_state(AppState {
            service,
            protect_metrics: settings.auth.protect_metrics && !settings.auth.disabled,
            uploads: extract::UploadLimits {
                max_bytes: settings.server.max_upload_bytes,
                max_rows: settings.limits.max_batch_anchors,
            },
        })
}

fn route_of(req: &Request) -> String {
    req.extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned())
}

fn request_span(req: &Request) -> tracing::Span {
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    tracing::info_span!(
        "request",
        method = %req.method(),
        route = %route_of(req),
        request_id,
        judge = Empty,
        rubric = Empty,
        key = Empty,
    )
}

/// Counts and times every answer by route template, method and status.
async fn track_request(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let route = route_of(&req);
    let method = match *req.method() {
        Method::GET
        | Method::POST
        | Method::PUT
        | Method::DELETE
        | Method::HEAD
        | Method::OPTIONS
        | Method::PATCH => req.method().as_str().to_owned(),
        _ => "other".to_owned(),
    };
    let started = Instant::now();
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    let labels = [route.as_str(), method.as_str(), status.as_str()];
    metrics.http_requests.with_label_values(&labels).inc();
    metrics
        .http_duration
        .with_label_values(&labels)
        .observe(started.elapsed().as_secs_f64());
    response
}

/// Requests in flight per caller, by a hash of the `Authorization` header as sent (a key costs
/// no store look-up here and is not kept; callers without one share one count).
struct KeyShares {
    limit: usize,
    in_flight: std::sync::Mutex<std::collections::HashMap<u64, usize>>,
    /// Keyed at random per process.
    hasher: std::collections::hash_map::RandomState,
}

impl KeyShares {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            in_flight: std::sync::Mutex::default(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// A slot for `caller`, or `None` where it holds its share already.
    fn take(self: &Arc<Self>, caller: u64) -> Option<KeySlot> {
        let mut counts = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let count = counts.entry(caller).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(KeySlot {
            shares: self.clone(),
            caller,
        })
    }
}

/// One request's place in its caller's share, given back when the request ends.
struct KeySlot {
    shares: Arc<KeyShares>,
    caller: u64,
}

impl Drop for KeySlot {
    fn drop(&mut self) {
        let mut counts = self
            .shares
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(count) = counts.get_mut(&self.caller) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.caller);
            }
        }
    }
}

/// 429 for a caller past `server.max_concurrent_per_key` requests in flight, so that one
/// client's trickling uploads cannot take every other client's share of the global limit.
async fn per_key_share(State(shares): State<Arc<KeyShares>>, req: Request, next: Next) -> Response {
    let caller = std::hash::BuildHasher::hash_one(
        &shares.hasher,
        req.headers()
            .get(axum::http::header::AUTHORIZATION)
            .map(|v| v.as_bytes()),
    );
    let Some(_slot) = shares.take(caller) else {
        return ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_requests",
            "this API key has server.max_concurrent_per_key requests in flight; retry shortly",
        )
        .into_response();
    };
    next.run(req).await
}

/// The time an anchor upload has to arrive: its body, not its storing (`deadline`).
#[derive(Clone, Copy)]
pub(crate) struct BodyDeadline(pub std::time::Duration);

/// The request timeout (503 past it). An anchor upload's deadline covers receiving its body:
/// once the batch is in, it is checked and stored to the end, all or nothing, however busy the
/// machine, rather than refused whole for being slow to store (a 100,000-row upload on a busy
/// machine ran past 60 s). Its size is bounded by `server.max_body_bytes`.
async fn deadline(
    State(limit): State<std::time::Duration>,
    mut req: Request,
    next: Next,
) -> Response {
    let upload = req.method() == Method::POST
        && req
            .extensions()
            .get::<MatchedPath>()
            .is_some_and(|p| p.as_str() == "/v1/anchors");
    if upload {
        req.extensions_mut().insert(BodyDeadline(limit));
        return next.run(req).await;
    }
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => timed_out().into_response(),
    }
}

pub(crate) fn timed_out() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "timeout",
        "the request took longer than server.request_timeout_secs",
    )
}

async fn middleware_error(err: BoxError) -> ApiError {
    if err.is::<tower::load_shed::error::Overloaded>() {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_requests",
            "too many requests in flight (server.max_concurrent_requests); retry shortly",
        )
    } else {
        tracing::error!(error = %err, "middleware failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; it has been logged",
        )
    }
}

async fn unknown_route(req: Request) -> ApiError {
    ApiError::not_found(format!(
        "no route {} {}; see openapi.yaml",
        req.method(),
        req.uri().path()
    ))
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::from_status(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    )
}

pub(crate) use crate::domain::rfc3339;
