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

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

const BATCH: usize = 100_000;
const CONNECTIONS: usize = 32;
const SECONDS: u64 = 10;

fn batch_in_process(router: &axum::Router, judge: &str) {
    let scores: Vec<f64> = (0..BATCH)
        .map(|i| 1.0 + (i % 4001) as f64 / 1000.0)
        .collect();
    let body = json!({"judge": judge, "rubric": "coherence", "scores": scores}).to_string();
    let times = common::time_requests(router, "/v1/correct", &body, 11, |bytes| {
        assert!(bytes.len() > BATCH * 50, "a full response");
    });
    common::report(
        &format!(
            "correct 100,000 scores in one request, {judge} (in-process, request bytes to response bytes)"
        ),
        &times,
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
    // The flow's correction speed does not depend on how long it trained.
    let (address, router) = common::start_server(
        dir.path(),
        vec![
            ("bench", json!({"method": "bayes"})),
            (
                "benchflow",
                json!({"method": "flow", "options": {"epochs": 200}}),
            ),
        ],
    );
    batch_in_process(&router, "bench");
    batch_in_process(&router, "benchflow");
    load_run(address);
}
