//! Safe to run (issue 87): no input stops a deployment, reads are scoped to what a key may
//! list, keys can be revoked, connections and uploads are bounded, every stored batch is
//! checked once, and an unreachable store answers 503 at once.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use judgecal::auth::Scope;
use serde_json::{Value, json};
use sqlx::Connection;

use crate::calibration::{
    anchors, correct, defined, metrics, named, quick, stored, trained, upload,
};
use crate::common::{Backend, TestApp, assert_error, fresh_settings};

on_both_backends!(
    huge_numbers_are_refused_at_the_door,
    a_version_that_cannot_be_read_never_stops_a_start,
    a_picture_of_an_extreme_stored_scale_is_drawn,
    a_key_without_ingest_reads_no_item,
    revoked_and_expired_keys_are_refused_by_every_replica,
    identical_training_requests_make_one_job,
    a_batch_stored_but_not_checked_is_checked_once_at_the_next_start,
    uploads_are_bounded_by_bytes_and_rows_before_they_are_read,
    one_key_cannot_take_every_slot,
    one_item_typed_two_ways_is_one_item,
);

fn rows(n: usize) -> Vec<Value> {
    anchors(n, 0.5, 0.9)
}

/// `rows(n)` with item ids `{prefix}-item-…`, a batch after the first.
fn prefixed(prefix: &str, n: usize) -> Vec<Value> {
    rows(n)
        .into_iter()
        .map(|mut r| {
            r["item_id"] = json!(format!("{prefix}-{}", r["item_id"].as_str().unwrap()));
            r
        })
        .collect()
}

/// `POST /v1/anchors` of `rows` to cell (j, r).
async fn post_anchors(app: &TestApp, rows: &[Value]) -> crate::common::Response {
    app.json(
        "POST",
        "/v1/anchors",
        &json!({"judge": "j", "rubric": "r", "anchors": rows}),
    )
    .await
}

async fn huge_numbers_are_refused_at_the_door(backend: Backend) {
    let app = TestApp::new(backend).await;
    let mut batch = rows(60);
    batch.push(json!({"item_id": "huge-1", "judge_score": 1e308, "reference_score": 3.0}));
    batch.push(json!({"item_id": "huge-2", "judge_score": -2e9, "reference_score": 3.0}));
    let res = post_anchors(&app, &batch).await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(
        named(&details),
        [(61, "judge_score"), (62, "judge_score")],
        "{details:?}"
    );
    // The number is shown as a number, not 309 digits.
    assert!(
        details[0]["problem"].as_str().unwrap().contains("1e308"),
        "{details:?}"
    );
    assert_eq!(app.cell_count("j", "r").await, None, "nothing is stored");
    // A scale is bounded the same way.
    let res = app
        .json(
            "PUT",
            "/v1/rubrics/r",
            &json!({"min": -1e308, "max": 1e308}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(named(&details), [(0, "min"), (0, "max")], "{details:?}");
    // Repeats and run scores too.
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j", "rubric": "r", "anchors": [
                {"item_id": "a", "judge_score": 3, "reference_score": 3, "repeats": [3, 1e300]}]}),
        )
        .await;
    assert_eq!(
        named(&assert_error(&res, 422, "invalid_input")),
        [(1, "repeats")]
    );
}

/// The store reached by a raw connection of its own, for what the API refuses to write.
async fn raw_execute(app: &TestApp, sql: &str) {
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&app.settings.database.url)
        .await
        .expect("the test's database");
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .expect("raw statement");
}

async fn raw_count(app: &TestApp, sql: &str) -> i64 {
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&app.settings.database.url)
        .await
        .expect("the test's database");
    sqlx::Row::try_get(
        &sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut conn)
            .await
            .expect("raw count"),
        0,
    )
    .unwrap()
}

async fn a_version_that_cannot_be_read_never_stops_a_start(backend: Backend) {
    let mut app = TestApp::new(backend).await;
    upload(&app, "j", "good", 60, 0.5, 0.9).await;
    upload(&app, "j", "bad", 60, 0.5, 0.9).await;
    trained(&app, "j", json!({"method": "identity"})).await;
    // Versions stored by an older build: one whose model cannot be read, one whose held-out
    // figures overflowed to null.
    raw_execute(
        &app,
        "UPDATE calibrators SET params = '[broken' WHERE cell_id =
             (SELECT id FROM cells WHERE rubric = 'bad')",
    )
    .await;
    raw_execute(
        &app,
        "UPDATE calibrators SET evaluation = '{\"raw\": null}' WHERE cell_id =
             (SELECT id FROM cells WHERE rubric = 'good')",
    )
    .await;
    let (settings, dir) = (app.settings.clone(), app.take_dir());
    drop(app);
    // The restart skips the unreadable version, reports it, and serves the other cell without
    // its unreadable figures.
    let app = TestApp::on(settings, dir).await;
    let text = metrics(&app).await;
    assert!(
        text.contains("judgecal_calibrator_unreadable{judge=\"j\",rubric=\"bad\"} 1"),
        "{text}"
    );
    assert!(!text.contains("judgecal_calibrator_unreadable{judge=\"j\",rubric=\"good\"}"));
    let res = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "j", "rubric": "good", "scores": [3.0]}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let versions = app.get("/v1/cells/j/good/calibrators").await;
    assert_eq!(versions.status, 200, "{}", versions.body);
}

async fn a_picture_of_an_extreme_stored_scale_is_drawn(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j", "r", 60, 0.5, 0.9).await;
    trained(&app, "j", json!({"method": "identity"})).await;
    // A scale an older build accepted.
    raw_execute(
        &app,
        "UPDATE rubrics SET scale_min = -1e308, scale_max = 1e308 WHERE name = 'r'",
    )
    .await;
    let (settings, dir) = (app.settings.clone(), None);
    let restarted = TestApp::on(settings, dir).await;
    let started = Instant::now();
    let res = restarted.get("/v1/cells/j/r/report.svg").await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert!(res.body.as_str().is_some_and(|s| s.contains("<svg")));
    assert!(started.elapsed() < Duration::from_secs(60));
    drop(app);
}

async fn a_key_without_ingest_reads_no_item(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j", "r", 100, 0.5, 0.9).await;
    trained(&app, "j", json!({"method": "identity"})).await;
    let correct = app
        .service
        .operations()
        .create_key(&[Scope::Correct], "platform")
        .await
        .unwrap();
    let ingest = app
        .service
        .operations()
        .create_key(&[Scope::Ingest], "labellers")
        .await
        .unwrap();
    let get = |key: &str, path: &str| {
        Request::get(path)
            .header("authorization", format!("Bearer {key}"))
            .body(Body::empty())
            .unwrap()
    };
    let path = "/v1/cells/j/r/agreement";
    // A correct-only key: the report, without items; asking for items is refused.
    let res = app.send(get(&correct, &format!("{path}?top=1000"))).await;
    assert!(assert_error(&res, 403, "forbidden").is_empty());
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ingest")
    );
    let res = app.send(get(&correct, path)).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["disagreements"], json!([]), "{}", res.body);
    assert!(res.body["raw"]["pearson"]["value"].is_number());
    assert_eq!(
        app.send(get(&correct, "/v1/cells/j/r/anchors"))
            .await
            .status,
        403
    );
    // A key that may list anchors gets them.
    let res = app.send(get(&ingest, &format!("{path}?top=5"))).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["disagreements"].as_array().unwrap().len(), 5);
    // The page follows the same rule.
    let page = app.send(get(&correct, "/ui/cells/j/r")).await;
    let html = page.body.as_str().unwrap();
    assert!(!html.contains("item-0"), "a correct key's page lists items");
    assert!(html.contains("needs a key with the <code>ingest</code> scope"));
    let page = app.send(get(&ingest, "/ui/cells/j/r")).await;
    assert!(page.body.as_str().unwrap().contains("item-0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_be_put_behind_a_key() {
    let app = TestApp::with(Backend::Sqlite, |s| s.auth.protect_metrics = true).await;
    let scrape = |key: Option<&str>| {
        let mut req = Request::get("/metrics");
        if let Some(key) = key {
            req = req.header("authorization", format!("Bearer {key}"));
        }
        req.body(Body::empty()).unwrap()
    };
    assert_error(&app.send(scrape(None)).await, 401, "unauthorized");
    let correct = app
        .service
        .operations()
        .create_key(&[Scope::Correct], "c")
        .await
        .unwrap();
    assert_error(&app.send(scrape(Some(&correct))).await, 403, "forbidden");
    let scraper = app
        .service
        .operations()
        .create_key(&[Scope::Metrics], "m")
        .await
        .unwrap();
    let res = app.send(scrape(Some(&scraper))).await;
    assert_eq!(res.status, 200);
    assert!(res.body.as_str().unwrap().contains("judgecal_"));
    // Off (the default), a scrape needs no key.
    let open = TestApp::new(Backend::Sqlite).await;
    assert_eq!(open.send(scrape(None)).await.status, 200);
}

async fn revoked_and_expired_keys_are_refused_by_every_replica(backend: Backend) {
    let mut first = TestApp::new(backend).await;
    let (settings, dir) = (first.settings.clone(), first.take_dir());
    let second = TestApp::on(settings, None).await;
    let key = first
        .service
        .operations()
        .create_key(&[Scope::Correct], "platform")
        .await
        .unwrap();
    let cells = |key: &str| {
        Request::get("/v1/cells")
            .header("authorization", format!("Bearer {key}"))
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(second.send(cells(&key)).await.status, 200);
    let prefix = &key[..11];
    let revoked = first.service.operations().revoke_key(prefix).await.unwrap();
    assert_eq!(revoked.len(), 1);
    assert!(revoked[0].revoked_at_ms.is_some());
    // Revoking again names nothing live.
    assert!(first.service.operations().revoke_key(prefix).await.is_err());
    // The other replica, which cached the key, refuses it within auth.key_cache_secs.
    let started = Instant::now();
    loop {
        let res = second.send(cells(&key)).await;
        if res.status == 401 {
            assert!(
                res.body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("revoked")
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a revoked key still works after 5 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A key past its expiry is refused, naming it.
    let expiring = first
        .service
        .operations()
        .create_expiring_key(&[Scope::Correct], "contractor", Some(30))
        .await
        .unwrap();
    assert_eq!(second.send(cells(&expiring)).await.status, 200);
    raw_execute(
        &first,
        &format!(
            "UPDATE api_keys SET expires_at_ms = 1 WHERE prefix = '{}'",
            &expiring[..11]
        ),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let res = second.send(cells(&expiring)).await;
    assert_error(&res, 401, "unauthorized");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired")
    );
    let listed = first.service.operations().keys().await.unwrap();
    assert!(
        listed
            .iter()
            .any(|k| k.name == "platform" && k.revoked_at_ms.is_some())
    );
    drop(dir);
}

async fn identical_training_requests_make_one_job(backend: Backend) {
    // No worker here: every request finds the first still queued.
    let app = TestApp::with(backend, |s| s.jobs.enabled = false).await;
    upload(&app, "j", "r", 60, 0.5, 0.9).await;
    let body = json!({"method": "bayes", "options": {"warmup": 300, "draws": 500}});
    let requests = (0..10).map(|_| {
        let app = &app;
        let body = body.clone();
        async move { app.json("POST", "/v1/judges/j/calibrations", &body).await }
    });
    let answers = futures_util::future::join_all(requests).await;
    let ids: std::collections::BTreeSet<String> = answers
        .iter()
        .map(|r| {
            assert_eq!(r.status, 202, "{}", r.body);
            r.body["id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        ids.len(),
        1,
        "ten identical requests made {} jobs",
        ids.len()
    );
    assert_eq!(raw_count(&app, "SELECT COUNT(*) FROM jobs").await, 1);
    // Another request is another job.
    let other = app
        .json(
            "POST",
            "/v1/judges/j/calibrations",
            &json!({"method": "identity"}),
        )
        .await;
    assert_eq!(other.status, 202);
    assert!(!ids.contains(other.body["id"].as_str().unwrap()));
}

async fn a_batch_stored_but_not_checked_is_checked_once_at_the_next_start(backend: Backend) {
    let mut app = TestApp::new(backend).await;
    upload(&app, "j", "r", 80, 0.5, 0.9).await;
    trained(&app, "j", json!({"method": "identity"})).await;
    // A batch stored as an upload stores it, by a process that stops before its check: the
    // store's write alone.
    let batch: Vec<Value> = prefixed("late", 40);
    let rows = judgecal::domain::anchors::rows_from_json(
        &json!({"judge": "j", "rubric": "r", "anchors": batch}),
    )
    .unwrap();
    let store = app.service.store().clone();
    let scales = store.rubric_scales().await.unwrap();
    let cells = judgecal::domain::anchors::validate(rows, &scales, 100_000).unwrap();
    let stored = store.ingest(&cells, &scales, false).await.unwrap();
    assert_eq!(stored[0].inserted, 40);
    assert!(stored[0].pending.is_some());
    assert_eq!(
        raw_count(&app, "SELECT COUNT(*) FROM pending_checks").await,
        1
    );
    let coverage = "SELECT CAST(COALESCE(SUM(checked), 0) AS BIGINT) FROM anchor_coverage";
    assert_eq!(raw_count(&app, coverage).await, 0);
    // The client's retry finds the batch unchanged: it stores nothing and checks nothing.
    let res = post_anchors(&app, &batch).await;
    assert_eq!(res.body["unchanged"], 40, "{}", res.body);
    // The next start checks it, once.
    let (settings, dir) = (app.settings.clone(), app.take_dir());
    drop(app);
    let app = TestApp::on(settings.clone(), None).await;
    assert_eq!(
        raw_count(&app, "SELECT COUNT(*) FROM pending_checks").await,
        0
    );
    assert_eq!(raw_count(&app, coverage).await, 40);
    // And a second start finds nothing left to check.
    let again = TestApp::on(settings, None).await;
    assert_eq!(raw_count(&again, coverage).await, 40);
    // An upload checks its own batch: its coverage is in its answer, and nothing is queued.
    let fresh: Vec<Value> = prefixed("fresh", 30);
    let res = post_anchors(&again, &fresh).await;
    assert_eq!(
        res.body["cells"][0]["coverage"]["checked"], 30,
        "{}",
        res.body
    );
    assert_eq!(
        raw_count(&again, "SELECT COUNT(*) FROM pending_checks").await,
        0
    );
    assert_eq!(raw_count(&again, coverage).await, 70);
    drop(dir);
}

async fn uploads_are_bounded_by_bytes_and_rows_before_they_are_read(backend: Backend) {
    let app = TestApp::with(backend, |s| {
        s.limits.max_batch_anchors = 50;
        s.server.max_upload_bytes = 64 * 1024;
        s.server.max_body_bytes = 1024;
    })
    .await;
    // Over the row limit: refused on the count, naming it, in both formats.
    let res = post_anchors(&app, &rows(120)).await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(named(&details), [(0, "anchors")]);
    assert!(
        details[0]["problem"]
            .as_str()
            .unwrap()
            .contains("120 anchors")
    );
    let mut csv = String::from("judge,rubric,item_id,judge_score,reference_score\n");
    for i in 0..80 {
        csv.push_str(&format!("j,r,c{i},3,3\n"));
    }
    let details = assert_error(&app.csv("/v1/anchors", &csv).await, 422, "invalid_input");
    assert!(
        details[0]["problem"]
            .as_str()
            .unwrap()
            .contains("80 anchors")
    );
    // An upload within the rows is not held to the other routes' body limit.
    let res = post_anchors(&app, &rows(40)).await;
    assert_eq!(res.status, 200, "{}", res.body);
    // Over the upload's bytes: 413, whatever it holds.
    let big = json!({"judge": "j", "rubric": "r", "anchors": rows(40), "pad": "x".repeat(70_000)});
    assert_error(
        &app.json("POST", "/v1/anchors", &big).await,
        413,
        "payload_too_large",
    );
    // Other routes keep server.max_body_bytes.
    let scores: Vec<f64> = (0..400).map(|i| f64::from(i % 5) + 1.0).collect();
    let res = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "j", "rubric": "r", "scores": scores}),
        )
        .await;
    assert_error(&res, 413, "payload_too_large");
    // An unclosed quote says so, on its row.
    let res = app
        .csv(
            "/v1/anchors",
            "judge,rubric,item_id,judge_score,reference_score\nj,r,q1,3,3\nj,r,\"q2,3,3\nj,r,q3,3,3\n",
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(named(&details), [(2, "record")], "{details:?}");
    assert!(
        details[0]["problem"]
            .as_str()
            .unwrap()
            .contains("never closed")
    );
}

/// A request whose body never finishes keeps its handler (and its key's slot) in flight.
fn stalled(
    key: &str,
) -> (
    Request<Body>,
    tokio::sync::mpsc::Sender<Result<Vec<u8>, std::io::Error>>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let req = Request::post("/v1/anchors")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap();
    (req, tx)
}

async fn one_key_cannot_take_every_slot(backend: Backend) {
    let app = TestApp::with(backend, |s| s.server.max_concurrent_per_key = 2).await;
    let busy = app
        .service
        .operations()
        .create_key(&[Scope::Ingest], "busy")
        .await
        .unwrap();
    let mut held = Vec::new();
    for _ in 0..2 {
        let (req, keep) = stalled(&busy);
        let router = app.router.clone();
        held.push((
            tokio::spawn(async move { tower::ServiceExt::oneshot(router, req).await }),
            keep,
        ));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cells = |key: &str| {
        Request::get("/v1/cells")
            .header("authorization", format!("Bearer {key}"))
            .body(Body::empty())
            .unwrap()
    };
    let res = app.send(cells(&busy)).await;
    assert_error(&res, 429, "too_many_requests");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_concurrent_per_key")
    );
    // Every other key still gets in.
    assert_eq!(app.get("/v1/cells").await.status, 200);
    for (task, keep) in held {
        drop(keep);
        task.abort();
    }
}

async fn one_item_typed_two_ways_is_one_item(backend: Backend) {
    let app = TestApp::new(backend).await;
    let post = |id: &str| {
        json!({"judge": "j", "rubric": "r", "anchors": [
            {"item_id": id, "judge_score": 3.0, "reference_score": 4.0}]})
    };
    let res = app.json("POST", "/v1/anchors", &post("caf\u{e9}-1")).await;
    assert_eq!(res.body["inserted"], 1, "{}", res.body);
    let res = app
        .json("POST", "/v1/anchors", &post("cafe\u{301}-1"))
        .await;
    assert_eq!(
        res.body["unchanged"], 1,
        "the decomposed form is the same item: {}",
        res.body
    );
    for look_alike in [
        "caf\u{e9}\u{2010}1",
        "caf\u{e9}-1\u{200b}",
        " caf\u{e9}-1",
        "ｃａｆé-1",
        "caf\u{e9}\u{a0}1",
    ] {
        let res = app.json("POST", "/v1/anchors", &post(look_alike)).await;
        assert_eq!(
            named(&assert_error(&res, 422, "invalid_input")),
            [(1, "item_id")],
            "{look_alike:?}"
        );
    }
    assert_eq!(app.cell_count("j", "r").await, Some(1));
}

/// Settings of a server on a real socket, for what only a socket shows.
async fn serving(
    tweak: impl FnOnce(&mut judgecal::config::Settings),
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    Option<tempfile::TempDir>,
) {
    let (mut settings, dir) = fresh_settings(Backend::Sqlite).await;
    settings.auth.disabled = true;
    tweak(&mut settings);
    let app = judgecal::startup::Application::build(settings)
        .await
        .expect("builds");
    let address = app.address();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    (address, stop, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_header_is_closed_and_connections_are_capped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (address, stop, _dir) = serving(|s| {
        s.server.header_read_timeout_secs = 1;
        s.server.max_connections = 2;
    })
    .await;
    // Two connections that trickle a header hold both slots...
    let mut trickling = Vec::new();
    for _ in 0..2 {
        let mut c = tokio::net::TcpStream::connect(address).await.unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        trickling.push(c);
    }
    // ...so a third waits, and is served once the header timeout closes them.
    let started = Instant::now();
    let waiting = tokio::spawn(async move {
        let mut c = tokio::net::TcpStream::connect(address).await.unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).await.unwrap();
        answer
    });
    for mut c in trickling {
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut rest)).await;
        assert!(
            closed.is_ok(),
            "a partial header was not closed within 10 s"
        );
    }
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the third connection is served")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the cap let a third in at once"
    );
    let _ = stop.send(());
}

/// A TCP proxy to the local Postgres that can be cut: then it drops every connection and
/// takes new ones without ever answering, as a network partition does.
struct Proxy {
    address: std::net::SocketAddr,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut_now: tokio::sync::watch::Sender<bool>,
}

impl Proxy {
    async fn start(upstream: std::net::SocketAddr) -> Self {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (cut_now, watch) = tokio::sync::watch::channel(false);
        let flag = cut.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                if flag.load(Ordering::SeqCst) {
                    // Accepted, never answered.
                    held.push(client);
                    continue;
                }
                let mut watch = watch.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = watch.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        Self {
            address,
            cut,
            cut_now,
        }
    }

    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        self.cut_now.send_replace(true);
    }
}

/// An app on a fresh Postgres database reached through a proxy the test can cut, its settings
/// adjusted by `adjust`.
async fn behind_a_proxy(adjust: impl FnOnce(&mut judgecal::config::Settings)) -> (TestApp, Proxy) {
    let database = crate::common::fresh_postgres_database().await;
    let (rest, name) = database.rsplit_once('/').unwrap();
    let (scheme_user, host) = rest.rsplit_once('@').unwrap();
    let upstream = tokio::net::lookup_host(host).await.unwrap().next().unwrap();
    let proxy = Proxy::start(upstream).await;
    let through = format!("{scheme_user}@{}/{name}", proxy.address);
    let mut settings = judgecal::config::Settings::defaults_with_database(&through);
    settings.server.bind = "127.0.0.1:0".into();
    adjust(&mut settings);
    (TestApp::on(settings, None).await, proxy)
}

/// `/v1/correct` reads no store, a panel's included (its members' defaults and the version
/// its untagged requests stay with come from memory): with the store cut after the first
/// answers, a judge's and a panel's corrections answer the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrections_answer_with_the_store_cut() {
    let (app, proxy) = behind_a_proxy(|settings| {
        // Keys and the refresh timer read the store: neither is what this test is about.
        settings.auth.disabled = true;
        settings.calibrators.refresh_millis = 3_600_000;
    })
    .await;
    let rows = anchors(80, 0.2, 0.9);
    let b_rows: Vec<Value> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let j = r["judge_score"].as_f64().unwrap();
            let mut r = r.clone();
            r["judge_score"] = json!(0.5 + 0.8 * j + ((i * 31) % 7) as f64 * 0.05);
            r
        })
        .collect();
    stored(&app, json!({"judge": "a", "rubric": "r1", "anchors": rows})).await;
    stored(
        &app,
        json!({"judge": "b", "rubric": "r1", "anchors": b_rows}),
    )
    .await;
    defined(&app, "duo", json!(["a", "b"])).await;
    for judge in ["a", "duo"] {
        trained(&app, judge, json!({"method": "bayes", "options": quick()})).await;
    }
    let bodies = [
        json!({"judge": "a", "rubric": "r1", "scores": [3.0]}),
        json!({"judge": "duo", "rubric": "r1", "items": [{"scores": {"a": 3.0, "b": 3.2}}]}),
    ];
    let mut before = Vec::new();
    for body in &bodies {
        let res = correct(&app, body.clone()).await;
        assert_eq!(res.status, 200, "{}", res.body);
        before.push(res.body["items"].clone());
    }
    proxy.cut();
    for (body, was) in bodies.iter().zip(before) {
        let res = correct(&app, body.clone()).await;
        assert_eq!(res.status, 200, "{body}: {}", res.body);
        assert_eq!(res.body["items"], was, "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_store_answers_503_within_two_seconds() {
    let (app, proxy) = behind_a_proxy(|_| {}).await;
    assert_eq!(app.get("/v1/cells").await.status, 200);
    proxy.cut();
    for path in ["/v1/cells", "/readyz"] {
        let started = Instant::now();
        let res = app.get(path).await;
        let took = started.elapsed();
        assert_eq!(res.status, 503, "{path}: {}", res.body);
        assert!(took < Duration::from_secs(2), "{path} took {took:?}");
        if path == "/v1/cells" {
            assert_eq!(res.body["error"]["code"], "store_unavailable");
            assert_eq!(res.headers["retry-after"], "2");
        } else {
            assert!(took < Duration::from_secs(1), "/readyz took {took:?}");
        }
    }
}
