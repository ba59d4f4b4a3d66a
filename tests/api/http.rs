//! Access control, the error shape of every kind of refusal, limits and operations endpoints.

use std::time::Duration;

use crate::common::{Backend, TestApp, assert_error};
use axum::body::Body;
use axum::http::Request;
use judgecal::auth::Scope;
use serde_json::json;

async fn keys_and_scopes_gate_every_v1_route(backend: Backend) {
    let app = TestApp::new(backend).await;
    let anonymous = Request::get("/v1/cells").body(Body::empty()).unwrap();
    let res = app.send(anonymous).await;
    assert_error(&res, 401, "unauthorized");
    assert_eq!(res.headers["www-authenticate"], "Bearer");

    let bad = Request::get("/v1/cells")
        .header("authorization", "Bearer jc_nope")
        .body(Body::empty())
        .unwrap();
    assert_error(&app.send(bad).await, 401, "unauthorized");

    let correct_only = app
        .service
        .operations()
        .create_key(&[Scope::Correct], "platform")
        .await
        .unwrap();
    let with = |key: &str, req: axum::http::request::Builder| {
        req.header("authorization", format!("Bearer {key}"))
            .header("content-type", "application/json")
    };
    let upload = json!({"judge": "j", "rubric": "r", "anchors": [{"item_id": "a", "judge_score": 1, "reference_score": 1}]});
    let res = app
        .send(
            with(&correct_only, Request::post("/v1/anchors"))
                .body(Body::from(upload.to_string()))
                .unwrap(),
        )
        .await;
    let details = assert_error(&res, 403, "forbidden");
    assert!(details.is_empty());
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ingest")
    );
    // Any valid key may list cells.
    let res = app
        .send(
            with(&correct_only, Request::get("/v1/cells"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(res.status, 200);

    let ingest = app
        .service
        .operations()
        .create_key(&[Scope::Ingest], "labellers")
        .await
        .unwrap();
    let res = app
        .send(
            with(&ingest, Request::post("/v1/anchors"))
                .body(Body::from(upload.to_string()))
                .unwrap(),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    // Rubric scales need admin.
    let res = app
        .send(
            with(&ingest, Request::put("/v1/rubrics/r"))
                .body(Body::from(r#"{"min":1,"max":5}"#))
                .unwrap(),
        )
        .await;
    assert_error(&res, 403, "forbidden");

    // Probes and scrapes need no key.
    for path in ["/healthz", "/readyz", "/metrics"] {
        let res = app
            .send(Request::get(path).body(Body::empty()).unwrap())
            .await;
        assert_eq!(res.status, 200, "{path}");
    }
}

async fn auth_disabled_lets_anonymous_callers_in(backend: Backend) {
    let app = TestApp::with(backend, |s| s.auth.disabled = true).await;
    let res = app
        .send(Request::get("/v1/cells").body(Body::empty()).unwrap())
        .await;
    assert_eq!(res.status, 200);
}

async fn every_refusal_has_the_error_shape(backend: Backend) {
    let app = TestApp::with(backend, |s| {
        s.server.max_body_bytes = 4096;
        s.server.max_upload_bytes = 4096;
    })
    .await;
    let res = app
        .send(
            app.request("POST", "/v1/anchors")
                .header("content-type", "application/json")
                .body(Body::from("{\"judge\": "))
                .unwrap(),
        )
        .await;
    assert_error(&res, 400, "malformed_json");
    let res = app
        .send(
            app.request("POST", "/v1/anchors")
                .header("content-type", "text/plain")
                .body(Body::from("x"))
                .unwrap(),
        )
        .await;
    assert_error(&res, 415, "unsupported_media_type");
    let res = app
        .send(
            app.request("PUT", "/v1/rubrics/r")
                .header("content-type", "text/plain")
                .body(Body::from("{}"))
                .unwrap(),
        )
        .await;
    assert_error(&res, 415, "unsupported_media_type");
    let big = format!("{{\"judge\": \"{}\"}}", "x".repeat(10_000));
    let res = app
        .send(
            app.request("POST", "/v1/anchors")
                .header("content-type", "application/json")
                .body(Body::from(big))
                .unwrap(),
        )
        .await;
    assert_error(&res, 413, "payload_too_large");
    assert_error(&app.get("/v2/nothing").await, 404, "not_found");
    let res = app
        .send(
            app.request("DELETE", "/v1/cells")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_error(&res, 405, "method_not_allowed");
    let res = app.get("/v1/cells/bad%20judge/r1/anchors").await;
    assert_eq!(
        assert_error(&res, 422, "invalid_input")[0]["field"],
        "judge"
    );
}

/// A request whose body never finishes keeps its handler in flight.
fn stalled_upload(
    app: &TestApp,
) -> (
    Request<Body>,
    tokio::sync::mpsc::Sender<Result<Vec<u8>, std::io::Error>>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let stream = tokio_stream_from(rx);
    let req = app
        .request("POST", "/v1/anchors")
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap();
    (req, tx)
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

async fn past_the_concurrency_limit_requests_get_429(backend: Backend) {
    let app = TestApp::with(backend, |s| s.server.max_concurrent_requests = 1).await;
    let (req, _keep_open) = stalled_upload(&app);
    let router = app.router.clone();
    let stalled = tokio::spawn(async move { tower::ServiceExt::oneshot(router, req).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let res = app.get("/v1/cells").await;
    assert_error(&res, 429, "too_many_requests");
    assert_eq!(res.headers["retry-after"], "1");
    // Operations routes stay outside the limit.
    assert_eq!(
        app.send(Request::get("/healthz").body(Body::empty()).unwrap())
            .await
            .status,
        200
    );
    stalled.abort();
}

async fn requests_past_the_timeout_get_503(backend: Backend) {
    let app = TestApp::with(backend, |s| s.server.request_timeout_secs = 1).await;
    let (req, _keep_open) = stalled_upload(&app);
    let res = app.send(req).await;
    assert_error(&res, 503, "timeout");
}

/// An upload's deadline covers receiving its body; once in, the batch is stored to the end
/// however long the store makes it wait (here another writer holds the anchors for 2.5 s,
/// past the 1 s timeout), rather than refused whole.
async fn an_upload_slow_to_store_is_stored_past_the_timeout(backend: Backend) {
    use sqlx::Connection;
    let app = TestApp::with(backend, |s| s.server.request_timeout_secs = 1).await;
    let mut other = sqlx::AnyConnection::connect(&app.settings.database.url)
        .await
        .unwrap();
    match backend {
        Backend::Sqlite => {
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut other)
                .await
                .unwrap();
        }
        Backend::Postgres => {
            sqlx::query("BEGIN").execute(&mut other).await.unwrap();
            sqlx::query("LOCK TABLE anchors IN EXCLUSIVE MODE")
                .execute(&mut other)
                .await
                .unwrap();
        }
    }
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    });
    let up = json!({"judge": "j1", "rubric": "r1", "anchors": [
        {"item_id": "a", "judge_score": 3, "reference_score": 4},
        {"item_id": "b", "judge_score": 2, "reference_score": 2}]});
    let started = std::time::Instant::now();
    let res = app.json("POST", "/v1/anchors", &up).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert!(
        started.elapsed() > Duration::from_secs(1),
        "the store made it wait"
    );
    assert_eq!(res.body["inserted"], 2);
    release.await.unwrap();
    assert_eq!(app.cell_count("j1", "r1").await, Some(2));
    // Other routes still answer 503 past the timeout (a stalled upload body too:
    // requests_past_the_timeout_get_503).
}

async fn metrics_count_routes_and_survive_a_restart(backend: Backend) {
    let mut app = TestApp::new(backend).await;
    let up = json!({"judge": "j1", "rubric": "r1", "anchors": [{"item_id": "a", "judge_score": 3, "reference_score": 4}]});
    assert_eq!(app.json("POST", "/v1/anchors", &up).await.status, 200);
    app.get("/v1/cells/j1/r1/anchors").await;
    let text = app
        .send(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .body;
    let text = text.as_str().unwrap();
    assert!(
        text.contains(
            r#"judgecal_http_requests_total{method="POST",route="/v1/anchors",status="200"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"route="/v1/cells/{judge}/{rubric}/anchors""#),
        "{text}"
    );
    assert!(text.contains("judgecal_http_request_duration_seconds_bucket"));
    assert!(
        text.contains(r#"judgecal_cell_anchors{judge="j1",rubric="r1"} 1"#),
        "{text}"
    );

    // A new process on the same store reports the same gauge before any upload.
    let settings = app.settings.clone();
    let dir = app.take_dir();
    let restarted = TestApp::on(settings, dir).await;
    let text = restarted
        .send(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .body;
    assert!(
        text.as_str()
            .unwrap()
            .contains(r#"judgecal_cell_anchors{judge="j1",rubric="r1"} 1"#)
    );
}

async fn readiness_needs_migrations(backend: Backend) {
    let (mut settings, _dir) = crate::common::fresh_settings(backend).await;
    settings.database.migrate_on_start = false;
    let app = judgecal::startup::Application::build(settings)
        .await
        .unwrap();
    let ready = || async {
        let req = Request::get("/readyz").body(Body::empty()).unwrap();
        tower::ServiceExt::oneshot(app.router(), req)
            .await
            .unwrap()
            .status()
    };
    assert_eq!(ready().await, 503);
    app.service().store().migrate().await.unwrap();
    assert_eq!(ready().await, 200);
}

on_both_backends!(
    keys_and_scopes_gate_every_v1_route,
    auth_disabled_lets_anonymous_callers_in,
    every_refusal_has_the_error_shape,
    past_the_concurrency_limit_requests_get_429,
    requests_past_the_timeout_get_503,
    an_upload_slow_to_store_is_stored_past_the_timeout,
    metrics_count_routes_and_survive_a_restart,
    readiness_needs_migrations,
);
