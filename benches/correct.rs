//! /v1/correct speed on a trained Bayesian version and a flow version (embedded SQLite; the
//! store is not on the correction path):
//!
//! 1. one request with 100,000 scores, server-side: through the router in-process (JSON
//!    parse, correction, JSON response), no socket; for the flow, with K = 40 MC-dropout σ
//!    from its tabulated sub-networks;
//! 2. single-score requests from a bounded load run on loopback: `CONNECTIONS` keep-alive
//!    clients for `SECONDS` seconds against the server listening on 127.0.0.1, client and
//!    server in one process on separate runtimes (2 threads each) sharing the machine.
//!
//!     cargo bench --bench correct

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use judgecal::config::Settings;
use judgecal::startup::Application;
use serde_json::{Value, json};
use tower::ServiceExt;

const BATCH: usize = 100_000;
const CONNECTIONS: usize = 32;
const SECONDS: u64 = 10;

async fn call(router: &axum::Router, method: &str, path: &str, body: String) -> Value {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let res = router.clone().oneshot(req).await.unwrap();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

/// An application with one trained cell, serving on a port of its own runtime.
fn start_server(dir: &std::path::Path) -> (std::net::SocketAddr, axum::Router) {
    let mut settings =
        Settings::defaults_with_database(&format!("sqlite://{}/judgecal.db", dir.display()));
    settings.server.bind = "127.0.0.1:0".into();
    settings.auth.disabled = true;
    settings.log.level = "warn".into();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Application::build(settings).await.expect("app");
            let router = app.router();
            let anchors: Vec<Value> = (0..1500)
                .map(|i| {
                    let j = 1.0 + (i % 400) as f64 / 100.0;
                    json!({"item_id": format!("i{i}"), "judge_score": j,
                           "reference_score": (0.6 + 0.8 * j + ((i * 7919) % 100) as f64 / 250.0 - 0.2).clamp(1.0, 5.0)})
                })
                .collect();
            for judge in ["bench", "benchflow"] {
                call(&router, "POST", "/v1/anchors",
                     json!({"judge": judge, "rubric": "coherence", "anchors": anchors}).to_string()).await;
            }
            // The flow's correction speed does not depend on how long it trained.
            for (judge, body) in [
                ("bench", json!({"method": "bayes"})),
                ("benchflow", json!({"method": "flow", "options": {"epochs": 200}})),
            ] {
                let job = call(&router, "POST", &format!("/v1/judges/{judge}/calibrations"),
                               body.to_string()).await;
                let id = job["id"].as_str().expect("job id").to_owned();
                loop {
                    let j = call(&router, "GET", &format!("/v1/jobs/{id}"), String::new()).await;
                    if j["state"] == "succeeded" {
                        break;
                    }
                    assert_ne!(j["state"], "failed", "{j}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            tx.send((app.address(), router)).unwrap();
            app.run_until_stopped(std::future::pending()).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

fn batch_in_process(router: &axum::Router, judge: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let scores: Vec<f64> = (0..BATCH)
        .map(|i| 1.0 + (i % 4001) as f64 / 1000.0)
        .collect();
    let body = json!({"judge": judge, "rubric": "coherence", "scores": scores}).to_string();
    let mut times = Vec::new();
    rt.block_on(async {
        for _ in 0..11 {
            let req = Request::post("/v1/correct")
                .header("content-type", "application/json")
                .body(Body::from(body.clone()))
                .unwrap();
            let started = Instant::now();
            let res = router.clone().oneshot(req).await.unwrap();
            let bytes = res.into_body().collect().await.unwrap().to_bytes();
            times.push(started.elapsed().as_secs_f64() * 1e3);
            assert!(bytes.len() > BATCH * 50, "a full response");
        }
    });
    times.sort_by(f64::total_cmp);
    println!(
        "correct 100,000 scores in one request, {judge} (in-process, request bytes to response bytes): median {:.1} ms, best {:.1} ms, worst {:.1} ms over 11",
        times[5], times[0], times[10]
    );
}

fn load_run(address: std::net::SocketAddr) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url = format!("http://{address}/v1/correct");
    let stop = Arc::new(AtomicBool::new(false));
    let (latencies, errors) = rt.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(CONNECTIONS)
            .build()
            .unwrap();
        let mut tasks = Vec::new();
        for c in 0..CONNECTIONS {
            let (client, url, stop) = (client.clone(), url.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut errors = 0usize;
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    let body = format!(
                        r#"{{"judge":"bench","rubric":"coherence","scores":[{}]}}"#,
                        1.0 + (i % 400) as f64 / 100.0
                    );
                    i += CONNECTIONS;
                    let started = Instant::now();
                    match client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await
                    {
                        Ok(r) if r.status().is_success() => {
                            let _ = r.bytes().await;
                            lat.push(started.elapsed().as_secs_f64() * 1e3);
                        }
                        _ => errors += 1,
                    }
                }
                (lat, errors)
            }));
        }
        tokio::time::sleep(Duration::from_secs(SECONDS)).await;
        stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        let mut errors = 0;
        for t in tasks {
            let (l, e) = t.await.unwrap();
            all.extend(l);
            errors += e;
        }
        (all, errors)
    });
    let mut lat = latencies;
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat[((lat.len() as f64 - 1.0) * p) as usize];
    println!(
        "correct, single-score requests, {CONNECTIONS} keep-alive connections for {SECONDS} s on loopback: {:.0} requests/s, p50 {:.2} ms, p99 {:.2} ms, {} ok, {errors} errors",
        lat.len() as f64 / SECONDS as f64,
        q(0.5),
        q(0.99),
        lat.len()
    );
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let (address, router) = start_server(dir.path());
    batch_in_process(&router, "bench");
    batch_in_process(&router, "benchflow");
    load_run(address);
}
