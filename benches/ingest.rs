//! Ingest speed: one upload of 100,000 anchors, through the router (JSON parse, validation,
//! one transaction), on Postgres and on the embedded SQLite; and a labelling team's batch of
//! 100 into a watched cell (one with an active version, so each upload is checked against its
//! bands and the drift alarm replayed) while many other cells are watched too. Prints
//! figures; never fails on speed.
//!
//!     cargo bench --bench ingest
//!     cargo bench --bench ingest -- --growing   # ten 100k batches into one cell
//!
//! Postgres is JUDGECAL_TEST_POSTGRES_URL (default: the local server, database `test`); the
//! benchmark makes its own database there.

use std::time::Instant;

use axum::body::Body;
use axum::http::Request;
use judgecal::config::Settings;
use judgecal::startup::Application;
use serde_json::json;
use sqlx::Connection;
use tower::ServiceExt;

const N: usize = 100_000;
const RUNS: usize = 3;

/// Watched cells, the batches of 100 each has had checked, and the uploads timed.
const WATCHED: usize = 30;
const CHECKED: usize = 20;
const TIMED: usize = 20;

/// The same rows as a CSV file.
fn csv_body(judge: &str) -> String {
    let mut csv = String::from("judge,rubric,item_id,judge_score,reference_score\n");
    for i in 0..N {
        csv.push_str(&format!(
            "{judge},coherence,item-{i:06},{},{}\n",
            1.0 + (i % 400) as f64 / 100.0,
            1.0 + (i % 397) as f64 / 99.25
        ));
    }
    csv
}

fn body(judge: &str) -> String {
    let anchors: Vec<_> = (0..N)
        .map(|i| {
            json!({"item_id": format!("item-{i:06}"), "judge_score": 1.0 + (i % 400) as f64 / 100.0,
                   "reference_score": 1.0 + (i % 397) as f64 / 99.25})
        })
        .collect();
    json!({"judge": judge, "rubric": "coherence", "anchors": anchors}).to_string()
}

async fn postgres_url() -> String {
    sqlx::any::install_default_drivers();
    let base = std::env::var("JUDGECAL_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let mut conn = sqlx::AnyConnection::connect(&base)
        .await
        .expect("Postgres reachable");
    let name = format!("jc_bench_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap();
    format!("{}/{name}", &base[..base.rfind('/').unwrap()])
}

async fn bench(label: &str, url: &str) {
    let mut settings = Settings::defaults_with_database(url);
    settings.server.bind = "127.0.0.1:0".into();
    settings.auth.disabled = true;
    let app = Application::build(settings).await.expect("app");
    let upload_as = |judge: String, csv: bool| {
        let router = app.router();
        async move {
            let (kind, text) = if csv {
                ("text/csv", csv_body(&judge))
            } else {
                ("application/json", body(&judge))
            };
            let req = Request::post("/v1/anchors")
                .header("content-type", kind)
                .body(Body::from(text))
                .unwrap();
            let started = Instant::now();
            let res = router.oneshot(req).await.unwrap();
            assert_eq!(res.status(), 200);
            started.elapsed().as_secs_f64()
        }
    };
    let upload = |judge: String| upload_as(judge, false);
    let mut times = Vec::new();
    for run in 0..RUNS {
        times.push(upload(format!("bench-{run}")).await);
    }
    // The same batch again: every anchor found unchanged.
    let retry = upload("bench-0".to_owned()).await;
    let csv = upload_as("bench-csv".to_owned(), true).await;
    times.sort_by(f64::total_cmp);
    println!(
        "ingest {label:8} {N} anchors in one batch: median {:.3} s, best {:.3} s, worst {:.3} s over {RUNS} new cells; \
         identical retry (all unchanged) {:.3} s; as CSV, a new cell {:.3} s",
        times[RUNS / 2],
        times[0],
        times[RUNS - 1],
        retry,
        csv
    );
}

/// One request through the router: its status, body and time.
async fn send(
    app: &Application,
    method: &str,
    path: &str,
    body: serde_json::Value,
) -> (u16, serde_json::Value, f64) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(if body.is_null() {
            Body::empty()
        } else {
            Body::from(body.to_string())
        })
        .unwrap();
    let started = Instant::now();
    let res = app.router().oneshot(req).await.unwrap();
    let status = res.status().as_u16();
    let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .unwrap();
    let took = started.elapsed().as_secs_f64();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or_default(),
        took,
    )
}

/// `n` anchors of `cell`'s judge, item ids from `first`, references 0.3 + 0.9·j + noise.
fn batch(cell: usize, first: usize, n: usize) -> serde_json::Value {
    let anchors: Vec<_> = (first..first + n)
        .map(|i| {
            let j = 1.0 + (i * 7919 % 400) as f64 / 100.0;
            let noise = (i * 104_729 % 1000) as f64 / 1000.0 - 0.5;
            json!({"item_id": format!("item-{i:06}"), "judge_score": j,
                   "reference_score": (0.3 + 0.9 * j + noise).clamp(1.0, 5.0)})
        })
        .collect();
    json!({"judge": format!("watched-{cell}"), "rubric": "coherence", "anchors": anchors})
}

async fn watched(label: &str, url: &str) {
    let mut settings = Settings::defaults_with_database(url);
    settings.server.bind = "127.0.0.1:0".into();
    settings.auth.disabled = true;
    let app = Application::build(settings).await.expect("app");
    for cell in 0..WATCHED {
        let (status, _, _) = send(&app, "POST", "/v1/anchors", batch(cell, 0, 400)).await;
        assert_eq!(status, 200);
        let path = format!("/v1/judges/watched-{cell}/calibrations");
        let (status, job, _) = send(&app, "POST", &path, json!({"method": "quantile_map"})).await;
        assert_eq!(status, 202, "{job}");
        let id = job["id"].as_str().unwrap().to_owned();
        loop {
            let (_, job, _) = send(&app, "GET", &format!("/v1/jobs/{id}"), json!(null)).await;
            match job["state"].as_str() {
                Some("succeeded") => break,
                Some("failed" | "cancelled") => panic!("{job}"),
                _ => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
        for b in 0..CHECKED {
            let body = batch(cell, 400 + 100 * b, 100);
            let (status, _, _) = send(&app, "POST", "/v1/anchors", body).await;
            assert_eq!(status, 200);
        }
    }
    let mut times = Vec::new();
    for t in 0..TIMED {
        let body = batch(0, 400 + 100 * (CHECKED + t), 100);
        let (status, res, took) = send(&app, "POST", "/v1/anchors", body).await;
        assert_eq!(status, 200);
        assert!(res["cells"][0]["coverage"].is_object(), "{res}");
        times.push(took);
    }
    times.sort_by(f64::total_cmp);
    // The refresh timer's work (every calibrators.refresh_millis) when nothing was checked
    // since the last: every watched cell's gauges from the store, no cell replayed.
    let mut refreshes = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        app.service()
            .operations()
            .refresh_coverage()
            .await
            .expect("refresh");
        refreshes.push(started.elapsed().as_secs_f64());
    }
    refreshes.sort_by(f64::total_cmp);
    println!(
        "ingest {label:8} the refresh timer over {WATCHED} watched cells ({} checked anchors), none checked since the last: median {:.1} ms",
        WATCHED * CHECKED * 100 + TIMED * 100,
        1e3 * refreshes[2]
    );
    println!(
        "ingest {label:8} a batch of 100 into a watched cell, {WATCHED} cells watched with {CHECKED} checked batches each: \
         median {:.1} ms, best {:.1} ms, worst {:.1} ms over {TIMED} uploads",
        1e3 * times[TIMED / 2],
        1e3 * times[0],
        1e3 * times[TIMED - 1]
    );
}

/// Ten batches of 100,000 new anchors into one growing cell, each timed: an upload's cost
/// should follow its own rows, not the rows the cell already holds.
async fn growing(label: &str, url: &str) {
    let mut settings = Settings::defaults_with_database(url);
    settings.server.bind = "127.0.0.1:0".into();
    settings.auth.disabled = true;
    let app = Application::build(settings).await.expect("app");
    let mut times = Vec::new();
    for b in 0..GROWING {
        let (status, res, took) = send(&app, "POST", "/v1/anchors", batch(0, b * N, N)).await;
        assert_eq!(status, 200, "{res}");
        times.push(took);
    }
    let said: Vec<String> = times.iter().map(|t| format!("{t:.2}")).collect();
    println!(
        "ingest {label:8} {GROWING} batches of {N} into one growing cell: {} s (the last ÷ the first {:.2}; {:.1} s in all)",
        said.join(", "),
        times[GROWING - 1] / times[0],
        times.iter().sum::<f64>()
    );
}

/// The batches of `growing`.
const GROWING: usize = 10;

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--growing") {
        growing("postgres", &postgres_url().await).await;
        let dir = tempfile::tempdir().unwrap();
        growing(
            "sqlite",
            &format!("sqlite://{}/growing.db", dir.path().display()),
        )
        .await;
        return;
    }
    let watched_only = std::env::args().any(|a| a == "--watched");
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}/bench.db", dir.path().display());
    if !watched_only {
        bench("postgres", &postgres_url().await).await;
        bench("sqlite", &sqlite).await;
    }
    watched("postgres", &postgres_url().await).await;
    let sqlite = format!("sqlite://{}/watched.db", dir.path().display());
    watched("sqlite", &sqlite).await;
}
