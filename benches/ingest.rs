//! Ingest speed: one upload of 100,000 anchors, through the router (JSON parse, validation,
//! one transaction), on Postgres and on the embedded SQLite. Prints figures; never fails on
//! speed.
//!
//!     cargo bench --bench ingest
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
    let upload = |judge: String| {
        let router = app.router();
        async move {
            let req = Request::post("/v1/anchors")
                .header("content-type", "application/json")
                .body(Body::from(body(&judge)))
                .unwrap();
            let started = Instant::now();
            let res = router.oneshot(req).await.unwrap();
            assert_eq!(res.status(), 200);
            started.elapsed().as_secs_f64()
        }
    };
    let mut times = Vec::new();
    for run in 0..RUNS {
        times.push(upload(format!("bench-{run}")).await);
    }
    // The same batch again: every anchor found unchanged.
    let retry = upload("bench-0".to_owned()).await;
    times.sort_by(f64::total_cmp);
    println!(
        "ingest {label:8} {N} anchors in one batch: median {:.3} s, best {:.3} s, worst {:.3} s over {RUNS} new cells; \
         identical retry (all unchanged) {:.3} s",
        times[RUNS / 2],
        times[0],
        times[RUNS - 1],
        retry
    );
}

#[tokio::main]
async fn main() {
    bench("postgres", &postgres_url().await).await;
    let dir = tempfile::tempdir().unwrap();
    bench(
        "sqlite",
        &format!("sqlite://{}/bench.db", dir.path().display()),
    )
    .await;
}
