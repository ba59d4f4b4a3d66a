//! What the HTTP benchmarks share: an application with trained cells on embedded SQLite,
//! serving on a runtime of its own, and timing of one large request through the router.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use judgecal::config::Settings;
use judgecal::startup::Application;
use serde_json::{Value, json};
use tower::ServiceExt;

pub async fn call(router: &axum::Router, method: &str, path: &str, body: String) -> Value {
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

/// An application whose judges (name, training body) each have 1,500 anchors of one line
/// with noise on `coherence` and a trained version, serving on a port of its own runtime.
#[allow(dead_code)] // the estimate bench sets each judge's anchor count
pub fn start_server(
    dir: &std::path::Path,
    judges: Vec<(&'static str, Value)>,
) -> (std::net::SocketAddr, axum::Router) {
    start_server_with(dir, judges.into_iter().map(|(j, b)| (j, b, 1500)).collect())
}

/// The same with each judge's own number of anchors (uploaded in batches of 50,000).
pub fn start_server_with(
    dir: &std::path::Path,
    judges: Vec<(&'static str, Value, usize)>,
) -> (std::net::SocketAddr, axum::Router) {
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
            let anchor = |i: usize| {
                let j = 1.0 + (i % 400) as f64 / 100.0;
                json!({"item_id": format!("i{i}"), "judge_score": j,
                       "reference_score": (0.6 + 0.8 * j + ((i * 7919) % 100) as f64 / 250.0 - 0.2).clamp(1.0, 5.0)})
            };
            for (judge, body, count) in judges {
                for from in (0..count).step_by(50_000) {
                    let anchors: Vec<Value> = (from..count.min(from + 50_000)).map(anchor).collect();
                    call(&router, "POST", "/v1/anchors",
                         json!({"judge": judge, "rubric": "coherence", "anchors": anchors}).to_string()).await;
                }
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

/// `times` requests of `body` to `path` through the router in-process (request bytes to
/// response bytes), in milliseconds, sorted; each response checked by `check`.
#[allow(dead_code)] // the flow bench times jobs, not requests
pub fn time_requests(
    router: &axum::Router,
    path: &str,
    body: &str,
    times: usize,
    check: impl Fn(&[u8]),
) -> Vec<f64> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut out = Vec::new();
    rt.block_on(async {
        for _ in 0..times {
            let req = Request::post(path)
                .header("content-type", "application/json")
                .body(Body::from(body.to_owned()))
                .unwrap();
            let started = Instant::now();
            let res = router.clone().oneshot(req).await.unwrap();
            let bytes = res.into_body().collect().await.unwrap().to_bytes();
            out.push(started.elapsed().as_secs_f64() * 1e3);
            check(&bytes);
        }
    });
    out.sort_by(f64::total_cmp);
    out
}

/// Prints sorted request times (ms) as median, best and worst.
#[allow(dead_code)] // the flow benchmark prints its own
pub fn report(what: &str, times: &[f64]) {
    println!(
        "{what}: median {:.1} ms, best {:.1} ms, worst {:.1} ms over {}",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        times.len()
    );
}
