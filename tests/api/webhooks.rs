//! Signed webhooks for alarms, against a real HTTP receiver on loopback that fails, hangs past
//! the timeout and then accepts: each alarm is delivered at least once, to the hooks that
//! subscribe to it, under one idempotency key, with a signature the receiver can verify, and no
//! request waits on a receiver.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use judgecal::auth::Scope;
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::Notify;

use crate::calibration::{anchors, quick, trained, upload_as};
use crate::common::{Backend, TestApp, assert_error};

/// What the receiver answers a request with.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Status(u16),
    /// No answer until the test releases it (past any attempt's timeout).
    Hang,
}

#[derive(Clone, Debug)]
struct Seen {
    id: String,
    timestamp: i64,
    signature: String,
    body: String,
}

#[derive(Clone, Default)]
struct Receiver {
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Answers in order; 204 once they run out.
    script: Arc<Mutex<VecDeque<Answer>>>,
    release: Arc<Notify>,
    hanging: Arc<Notify>,
}

impl Receiver {
    /// A receiver listening on loopback; returns it and its URL.
    async fn start(script: &[Answer]) -> (Self, String) {
        let receiver = Receiver {
            script: Arc::new(Mutex::new(script.iter().copied().collect())),
            ..Receiver::default()
        };
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, url)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    r.seen.lock().unwrap().push(Seen {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp").parse().unwrap_or(0),
        signature: header("webhook-signature"),
        body,
    });
    let answer = r.script.lock().unwrap().pop_front();
    match answer {
        Some(Answer::Status(s)) => StatusCode::from_u16(s).unwrap(),
        Some(Answer::Hang) => {
            r.hanging.notify_one();
            r.release.notified().await;
            StatusCode::NO_CONTENT
        }
        None => StatusCode::NO_CONTENT,
    }
}

/// The receiver's check, written from the Standard Webhooks specification: the base64
/// HMAC-SHA256 of "id.timestamp.body" under the secret's bytes, after `v1,`.
fn verifies(secret: &str, seen: &Seen) -> bool {
    let key = BASE64
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{}.{}.{}", seen.id, seen.timestamp, seen.body).as_bytes());
    let expected = format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()));
    seen.signature == expected
}

async fn app_with_fast_retries(backend: Backend) -> TestApp {
    app_timing_out_after(backend, 300).await
}

async fn app_timing_out_after(backend: Backend, timeout_millis: u64) -> TestApp {
    TestApp::with(backend, |s| {
        s.webhooks.timeout_millis = timeout_millis;
        s.webhooks.backoff_millis = 50;
        s.webhooks.max_backoff_millis = 200;
        s.webhooks.poll_millis = 50;
        s.webhooks.max_attempts = 5;
    })
    .await
}

/// A request made with `key` (not the app's admin key).
fn as_key(key: &str, method: &str, path: &str) -> axum::http::request::Builder {
    axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
}

async fn make_hook(app: &TestApp, key: &str, url: &str, events: Value) -> (String, String) {
    let res = app
        .send(
            as_key(key, "POST", "/v1/webhooks")
                .body(json!({"url": url, "events": events}).to_string().into())
                .unwrap(),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    (
        res.body["id"].as_str().unwrap().to_owned(),
        res.body["secret"].as_str().unwrap().to_owned(),
    )
}

/// The hook's log once `done` holds of it; panics after 30 s.
async fn log_until(app: &TestApp, hook: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let res = app.get(&format!("/v1/webhooks/{hook}/deliveries")).await;
        assert_eq!(res.status, 200, "{}", res.body);
        let log = res.body["deliveries"].as_array().unwrap().clone();
        if done(&log) {
            return log;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the log never got there: {log:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn of_type<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|d| d["type"] == kind).collect()
}

/// A ping through a receiver that answers 500, then hangs past the timeout, then accepts: three
/// attempts, one idempotency key, every one signed; the log says so.
async fn a_delivery_survives_a_failure_and_a_timeout_and_is_signed(backend: Backend) {
    let app = app_with_fast_retries(backend).await;
    let (receiver, url) = Receiver::start(&[Answer::Status(500), Answer::Hang]).await;
    let (hook, secret) = make_hook(&app, &app.admin_key, &url, json!([])).await;
    assert!(secret.starts_with("whsec_"), "{secret}");
    let listed = app.get("/v1/webhooks").await;
    assert_eq!(
        listed.body["webhooks"][0]["id"],
        hook.as_str(),
        "{}",
        listed.body
    );
    assert!(listed.body["webhooks"][0].get("secret").is_none());
    assert_eq!(listed.body["webhooks"][0]["source"], "key");

    let res = app
        .send(
            app.request("POST", &format!("/v1/webhooks/{hook}/ping"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(res.status, 202, "{}", res.body);
    let event = res.body["event_id"].as_str().unwrap().to_owned();
    let log = log_until(&app, &hook, |log| {
        log.iter().any(|d| d["state"] == "delivered")
    })
    .await;
    receiver.release.notify_waiters();
    let d = &log[0];
    assert_eq!(
        (
            d["event_id"].as_str(),
            d["type"].as_str(),
            d["attempts"].as_i64()
        ),
        (Some(event.as_str()), Some("ping"), Some(3)),
        "{d}"
    );
    assert_eq!(d["last_status"], 204, "{d}");
    assert_eq!(d["payload"]["type"], "ping", "{d}");

    let seen = receiver.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    let now = judgecal::domain::now_ms() / 1000;
    for s in &seen {
        assert_eq!(s.id, event, "one idempotency key across attempts");
        assert!(verifies(&secret, s), "{s:?}");
        assert!((now - s.timestamp).abs() < 300, "{s:?}");
        assert_eq!(
            serde_json::from_str::<Value>(&s.body).unwrap()["id"],
            event.as_str()
        );
    }
    // A body changed in transit, or another hook's secret, does not verify.
    let mut forged = seen[2].clone();
    forged.body = forged.body.replace("ping", "drift");
    assert!(!verifies(&secret, &forged));
    let (_, other) = make_hook(&app, &app.admin_key, &url, json!([])).await;
    assert!(!verifies(&other, &seen[2]));
}

/// Drift and β-canary alarms reach the hooks that subscribe to them, once each however often
/// the alarm stands; a receiver that hangs (within a long timeout) holds up neither the uploads
/// that raise them nor another delivery.
async fn alarms_reach_their_subscribers_once_and_wait_for_no_receiver(backend: Backend) {
    let app = app_timing_out_after(backend, 60_000).await;
    let (drift_rx, drift_url) = Receiver::start(&[Answer::Hang]).await;
    let (canary_rx, canary_url) = Receiver::start(&[]).await;
    let (drift_hook, drift_secret) =
        make_hook(&app, &app.admin_key, &drift_url, json!(["drift"])).await;
    let (canary_hook, _) =
        make_hook(&app, &app.admin_key, &canary_url, json!(["beta_canary"])).await;

    // The drift hook's receiver hangs on its first request (a ping) until released.
    let ping = app
        .send(
            app.request("POST", &format!("/v1/webhooks/{drift_hook}/ping"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(ping.status, 202);
    drift_rx.hanging.notified().await;

    // j1 tracks the references; then it turns 1.2 points too strict (as in the coverage test):
    // the drift alarm rises while the receiver still hangs, and every upload is answered.
    upload_as(&app, "j1", "coherence", "fit-", 200, 0.5, 0.8).await;
    trained(&app, "j1", json!({"method": "bayes", "options": quick()})).await;
    for k in 0..12 {
        upload_as(
            &app,
            "j1",
            "coherence",
            &format!("shifted{k}-"),
            20,
            1.7,
            0.8,
        )
        .await;
    }
    // The drift alarm is delivered while the ping still hangs.
    let log = log_until(&app, &drift_hook, |log| {
        of_type(log, "drift")
            .iter()
            .any(|d| d["state"] == "delivered")
    })
    .await;
    assert_eq!(of_type(&log, "drift").len(), 1, "{log:?}");
    let pings = of_type(&log, "ping");
    assert_eq!(
        (pings[0]["state"].as_str(), pings[0]["attempts"].as_i64()),
        (Some("pending"), Some(0)),
        "{log:?}"
    );
    drift_rx.release.notify_waiters();
    log_until(&app, &drift_hook, |log| {
        of_type(log, "ping")[0]["state"] == "delivered"
    })
    .await;
    let drift = of_type(&log, "drift")[0].clone();
    let p = &drift["payload"];
    assert_eq!(
        (
            p["judge"].as_str(),
            p["rubric"].as_str(),
            p["version"].as_i64()
        ),
        (Some("j1"), Some("coherence"), Some(1)),
        "{p}"
    );
    let f = &p["figures"];
    assert!(
        f["peak"].as_f64().unwrap() >= f["threshold"].as_f64().unwrap(),
        "{p}"
    );
    assert!(f["miss_bound"].as_f64().unwrap() > 0.05, "{p}");
    assert_eq!(p["link"], "/ui/cells/j1/coherence");
    let sent = drift_rx
        .seen()
        .into_iter()
        .find(|s| s.id == drift["event_id"].as_str().unwrap())
        .expect("the drift alarm was posted");
    assert!(verifies(&drift_secret, &sent));

    // j2 does not track the references at all: its Bayesian version's canary is up.
    upload_as(&app, "j2", "coherence", "flat-", 200, 3.0, 0.0).await;
    trained(&app, "j2", json!({"method": "bayes", "options": quick()})).await;
    let list = app.get("/v1/cells/j2/coherence/calibrators").await;
    let v = &list.body["versions"][0];
    assert!(
        v["posterior"]["canary"] == true && v["active"] == true,
        "{v}"
    );
    let log = log_until(&app, &canary_hook, |log| {
        of_type(log, "beta_canary")
            .iter()
            .any(|d| d["state"] == "delivered")
    })
    .await;
    assert_eq!(
        log.len(),
        1,
        "the canary hook gets the canary alone: {log:?}"
    );
    let p = &log[0]["payload"];
    assert_eq!(
        (p["judge"].as_str(), p["version"].as_i64()),
        (Some("j2"), Some(1)),
        "{p}"
    );
    assert!(
        p["figures"]["beta_collapse_probability"].as_f64().unwrap() > 0.05,
        "{p}"
    );
    // More uploads to the alarmed cell, and refreshes, queue nothing more.
    upload_as(&app, "j1", "coherence", "more-", 20, 1.7, 0.8).await;
    app.service.operations().refresh_coverage().await.unwrap();
    let log = app
        .get(&format!("/v1/webhooks/{drift_hook}/deliveries"))
        .await;
    assert_eq!(
        of_type(log.body["deliveries"].as_array().unwrap(), "drift").len(),
        1
    );
    assert_eq!(canary_rx.seen().len(), 1);
    assert!(
        drift_rx
            .seen()
            .iter()
            .all(|s| !s.body.contains("beta_canary"))
    );
}

/// A hook belongs to the key that made it: other keys neither see nor delete it, a key without
/// the metrics scope makes none, and once its key is revoked it gets no new alarm; bad input is
/// refused by field.
async fn a_hook_is_its_keys_and_stops_with_it(backend: Backend) {
    let app = app_with_fast_retries(backend).await;
    let ops = app.service.operations();
    let (mine, theirs) = (
        ops.create_key(&[Scope::Metrics], "ops").await.unwrap(),
        ops.create_key(&[Scope::Metrics], "other").await.unwrap(),
    );
    let ingest = ops.create_key(&[Scope::Ingest], "labellers").await.unwrap();
    let (rx, url) = Receiver::start(&[]).await;
    let (hook, _) = make_hook(&app, &mine, &url, json!(["beta_canary"])).await;
    let (admin_rx, admin_url) = Receiver::start(&[]).await;
    make_hook(&app, &app.admin_key, &admin_url, json!(["beta_canary"])).await;
    let listed = app
        .send(
            as_key(&theirs, "GET", "/v1/webhooks")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(listed.body["webhooks"], json!([]), "{}", listed.body);
    let gone = app
        .send(
            as_key(&theirs, "DELETE", &format!("/v1/webhooks/{hook}"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_error(&gone, 404, "not_found");
    let listed = app
        .send(
            as_key(&mine, "GET", "/v1/webhooks")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(
        listed.body["webhooks"][0]["id"],
        hook.as_str(),
        "{}",
        listed.body
    );
    let refused = app
        .send(
            as_key(&ingest, "POST", "/v1/webhooks")
                .body(json!({"url": url}).to_string().into())
                .unwrap(),
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let bad = app
        .send(
            as_key(&mine, "POST", "/v1/webhooks")
                .body(
                    json!({"url": "ftp://example.com/x", "events": ["drift", "weather"]})
                        .to_string()
                        .into(),
                )
                .unwrap(),
        )
        .await;
    let details = assert_error(&bad, 422, "invalid_input");
    let fields: Vec<&str> = details
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["url", "events"], "{details:?}");
    // The issue's name for the drift alarm is pointed to it, not silently dropped.
    let coverage = app
        .send(
            as_key(&mine, "POST", "/v1/webhooks")
                .body(
                    json!({"url": url, "events": ["coverage_below_band"]})
                        .to_string()
                        .into(),
                )
                .unwrap(),
        )
        .await;
    let details = assert_error(&coverage, 422, "invalid_input");
    assert_eq!(details[0]["field"], "events", "{details:?}");
    assert!(
        details[0]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("subscribe to \"drift\"")),
        "{details:?}"
    );
    assert_eq!(
        app.get("/v1/webhooks").await.body["webhooks"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Revoked: the key's hook gets nothing new; the admin's still does.
    let prefix = &mine[..11];
    ops.revoke_key(prefix).await.unwrap();
    upload_as(&app, "j2", "coherence", "flat-", 200, 3.0, 0.0).await;
    trained(&app, "j2", json!({"method": "bayes", "options": quick()})).await;
    let admin_hooks = app.get("/v1/webhooks").await;
    let admin_hook = admin_hooks.body["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] != hook.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    log_until(&app, &admin_hook, |log| {
        log.iter().any(|d| d["state"] == "delivered")
    })
    .await;
    assert_eq!(admin_rx.seen().len(), 1);
    let log = app.get(&format!("/v1/webhooks/{hook}/deliveries")).await;
    assert_eq!(log.body["deliveries"], json!([]), "{}", log.body);
    assert!(rx.seen().is_empty());
    let bad_state = app
        .get(&format!("/v1/webhooks/{hook}/deliveries?state=lost"))
        .await;
    let details = assert_error(&bad_state, 422, "invalid_input");
    assert_eq!(details[0]["field"], "state");
}

/// One hook of every type gets each alarm once: a drift alarm and the fleet's alert (the fleet
/// sized for one cell at δ = 0.5, so its threshold is 4), a β canary, and a silent-change check
/// that finds the judge changed under its version label.
async fn a_hook_of_every_type_gets_each_alarm_once(backend: Backend) {
    let app = TestApp::with(backend, |s| {
        s.webhooks.backoff_millis = 50;
        s.webhooks.poll_millis = 50;
        s.calibrators.fleet_cells = 1;
        s.calibrators.fleet_delta = 0.5;
    })
    .await;
    let (rx, url) = Receiver::start(&[]).await;
    let (hook, secret) = make_hook(&app, &app.admin_key, &url, json!([])).await;

    upload_as(&app, "j1", "coherence", "fit-", 200, 0.5, 0.8).await;
    trained(&app, "j1", json!({"method": "bayes", "options": quick()})).await;
    for k in 0..12 {
        upload_as(
            &app,
            "j1",
            "coherence",
            &format!("shifted{k}-"),
            20,
            1.7,
            0.8,
        )
        .await;
    }
    upload_as(&app, "j2", "coherence", "flat-", 200, 3.0, 0.0).await;
    trained(&app, "j2", json!({"method": "bayes", "options": quick()})).await;
    let versioned = json!({"judge": "j3", "rubric": "r", "judge_version": "v1", "anchors": anchors(200, 0.5, 0.8)});
    assert_eq!(
        app.json("POST", "/v1/anchors", &versioned).await.status,
        200
    );
    trained(&app, "j3", json!({"method": "quantile_map"})).await;
    let shifted: Vec<Value> = anchors(200, 0.5, 0.8)
        .into_iter()
        .take(100)
        .map(|r| json!({"item_id": r["item_id"], "judge_score": r["judge_score"].as_f64().unwrap() + 0.5}))
        .collect();
    let check = app
        .json(
            "POST",
            "/v1/cells/j3/r/checks",
            &json!({"judge_version": "v1", "items": shifted}),
        )
        .await;
    assert_eq!(check.body["changed"], true, "{}", check.body);

    let kinds = ["drift", "fleet_alert", "beta_canary", "judge_changed"];
    let log = log_until(&app, &hook, |log| {
        kinds
            .iter()
            .all(|k| of_type(log, k).iter().any(|d| d["state"] == "delivered"))
    })
    .await;
    app.service.operations().refresh_coverage().await.unwrap();
    for kind in kinds {
        assert_eq!(of_type(&log, kind).len(), 1, "{kind}: {log:?}");
    }
    let changed = &of_type(&log, "judge_changed")[0]["payload"];
    assert_eq!(changed["figures"]["check"], check.body["id"], "{changed}");
    assert_eq!(changed["figures"]["verdict"], "refit", "{changed}");
    assert_eq!(
        changed["link"],
        format!(
            "/v1/cells/j3/r/checks/{}",
            check.body["id"].as_str().unwrap()
        )
    );
    let fleet = &of_type(&log, "fleet_alert")[0]["payload"]["figures"];
    assert_eq!(fleet["threshold"], 4.0, "{fleet}");
    assert!(rx.seen().iter().all(|s| verifies(&secret, s)));
    let again = app.get(&format!("/v1/webhooks/{hook}/deliveries")).await;
    assert_eq!(
        again.body["deliveries"].as_array().unwrap().len(),
        4,
        "{}",
        again.body
    );
}

/// The hook `webhooks.url` configures: listed to admin keys as `configured`, signed with the
/// configured secret, changed only through the settings (a restart without it deletes it).
async fn the_configured_hook_is_set_by_the_settings(backend: Backend) {
    let (rx, url) = Receiver::start(&[]).await;
    let secret = judgecal::webhooks::new_secret();
    let (hook_url, hook_secret) = (url.clone(), secret.clone());
    let mut app = TestApp::with(backend, move |s| {
        s.webhooks.url = hook_url;
        s.webhooks.secret = hook_secret;
        s.webhooks.events = "drift, beta_canary".into();
        s.webhooks.poll_millis = 50;
    })
    .await;
    let listed = app.get("/v1/webhooks").await;
    let hook = &listed.body["webhooks"][0];
    assert_eq!(
        (
            hook["id"].as_str(),
            hook["source"].as_str(),
            hook["url"].as_str()
        ),
        (Some("configured"), Some("configured"), Some(url.as_str())),
        "{}",
        listed.body
    );
    assert_eq!(hook["events"], json!(["drift", "beta_canary"]));
    let ping = app
        .send(
            app.request("POST", "/v1/webhooks/configured/ping")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(ping.status, 202, "{}", ping.body);
    log_until(&app, "configured", |log| {
        log.iter().any(|d| d["state"] == "delivered")
    })
    .await;
    assert!(verifies(&secret, &rx.seen()[0]));
    let refused = app
        .send(
            app.request("DELETE", "/v1/webhooks/configured")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_error(&refused, 409, "conflict");
    // Started again without it: gone from the list, its log kept.
    let mut settings = app.settings.clone();
    settings.webhooks.url = String::new();
    let dir = app.take_dir();
    let again = TestApp::on(settings, dir).await;
    assert_eq!(again.get("/v1/webhooks").await.body["webhooks"], json!([]));
    let log = again.get("/v1/webhooks/configured/deliveries").await;
    assert_eq!(log.body["deliveries"][0]["type"], "ping", "{}", log.body);
    assert_eq!(
        log.body["deliveries"][0]["state"], "delivered",
        "{}",
        log.body
    );
}

on_both_backends!(
    a_delivery_survives_a_failure_and_a_timeout_and_is_signed,
    alarms_reach_their_subscribers_once_and_wait_for_no_receiver,
    a_hook_is_its_keys_and_stops_with_it,
    a_hook_of_every_type_gets_each_alarm_once,
    the_configured_hook_is_set_by_the_settings,
);
