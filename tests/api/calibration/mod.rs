//! Training jobs, calibrator versions and /v1/correct on both backends, and the job queue
//! shared by several processes on one database. The helpers here are shared by the modules.

mod agreement;
mod assumptions;
mod covariates;
mod covariates_default;
mod coverage;
mod estimates;
mod jobs;
mod judge_versions;
mod methods;
mod new_user;
mod pages;
mod panels;
mod rank;
mod repeats;
mod training;
mod unnamed_labellers;
mod walkthroughs;

use std::time::{Duration, Instant};

use crate::common::TestApp;
use serde_json::{Value, json};

/// A seeded stream of standard normals (xorshift and Box–Muller).
pub(super) struct Normals(pub(super) u64);

impl Normals {
    pub(super) fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    pub(super) fn next(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// Each problem's (row, field) of a 4xx's `details`.
pub(super) fn named(details: &[Value]) -> Vec<(u64, &str)> {
    details
        .iter()
        .map(|d| (d["row"].as_u64().unwrap_or(0), d["field"].as_str().unwrap()))
        .collect()
}

/// `n` anchors of y = a + b·j + noise, j spread over [1, 5]. The noise is a fixed,
/// deterministic pattern with mean ≈ 0 and sd ≈ 0.29 (uniform on ±0.5).
pub(super) fn anchors(n: usize, a: f64, b: f64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let j = 1.0 + 4.0 * ((i * 7919) % n) as f64 / n as f64;
            let noise = ((i * 104_729) % 1000) as f64 / 1000.0 - 0.5;
            let y: f64 = (a + b * j + noise).clamp(1.0, 5.0);
            json!({"item_id": format!("item-{i:05}"), "judge_score": j, "reference_score": y})
        })
        .collect()
}

pub(super) async fn upload(app: &TestApp, judge: &str, rubric: &str, n: usize, a: f64, b: f64) {
    upload_as(app, judge, rubric, "", n, a, b).await;
}

/// Uploads `anchors(n, a, b)` with item ids prefixed by `prefix` (so a batch can follow one
/// with the same ids); returns the cell's part of the response.
pub(super) async fn upload_as(
    app: &TestApp,
    judge: &str,
    rubric: &str,
    prefix: &str,
    n: usize,
    a: f64,
    b: f64,
) -> Value {
    let rows: Vec<Value> = anchors(n, a, b)
        .into_iter()
        .map(|mut r| {
            r["item_id"] = json!(format!("{prefix}{}", r["item_id"].as_str().unwrap()));
            r
        })
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": judge, "rubric": rubric, "anchors": rows}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    res.body["cells"][0].clone()
}

/// Quick sampler settings: tests check behaviour, not the defaults' precision.
pub(super) fn quick() -> Value {
    json!({"warmup": 300, "draws": 500})
}

pub(super) async fn train(app: &TestApp, judge: &str, body: Value) -> String {
    let res = app
        .json("POST", &format!("/v1/judges/{judge}/calibrations"), &body)
        .await;
    assert_eq!(res.status, 202, "{}", res.body);
    let id = res.body["id"].as_str().unwrap().to_owned();
    assert_eq!(
        res.headers["location"].to_str().unwrap(),
        format!("/v1/jobs/{id}")
    );
    id
}

/// Polls the job until it has finished; panics after 90 s.
pub(super) async fn finished(app: &TestApp, id: &str) -> Value {
    finished_within(app, id, Duration::from_secs(90)).await
}

/// Polls the job until it has finished; panics after `limit` (a job of many cells, whose time
/// two test lanes sharing two cores can triple).
pub(super) async fn finished_within(app: &TestApp, id: &str, limit: Duration) -> Value {
    let started = Instant::now();
    loop {
        let job = app.get(&format!("/v1/jobs/{id}")).await;
        assert_eq!(job.status, 200, "{}", job.body);
        if ["succeeded", "failed", "cancelled"].contains(&job.body["state"].as_str().unwrap_or(""))
        {
            return job.body;
        }
        assert!(started.elapsed() < limit, "job still {}", job.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Trains `judge` with `body` and waits for the job, which must succeed.
/// Posts an anchor batch (a `/v1/anchors` JSON body), which must be stored whole.
pub(super) async fn stored(app: &TestApp, body: Value) -> Value {
    let res = app.json("POST", "/v1/anchors", &body).await;
    assert_eq!(res.status, 200, "{}", res.body);
    res.body
}

/// The mean absolute error of `/v1/correct`'s `results` against the references `truth`.
pub(super) fn mae(results: &Value, truth: &[f64]) -> f64 {
    let results = results.as_array().unwrap();
    assert_eq!(results.len(), truth.len());
    results
        .iter()
        .zip(truth)
        .map(|(r, y)| (r["corrected"].as_f64().unwrap() - y).abs())
        .sum::<f64>()
        / truth.len() as f64
}

/// Defines a panel, which must be accepted.
pub(super) async fn defined(app: &TestApp, name: &str, judges: Value) {
    let res = app
        .json(
            "POST",
            "/v1/panels",
            &json!({"name": name, "judges": judges}),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
}

pub(super) async fn trained(app: &TestApp, judge: &str, body: Value) -> Value {
    let job = finished(app, &train(app, judge, body).await).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    job
}

pub(super) async fn correct(app: &TestApp, body: Value) -> crate::common::Response {
    app.json("POST", "/v1/correct", &body).await
}

pub(super) fn metric(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name_and_labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Metrics text once `name_and_labels` reads `value`: a job's state is visible in the store a
/// moment before its process has counted it. Panics after 5 s.
pub(super) async fn metrics_once(app: &TestApp, name_and_labels: &str, value: f64) -> String {
    let started = Instant::now();
    loop {
        let text = metrics(app).await;
        if metric(&text, name_and_labels) == Some(value) {
            return text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{name_and_labels} never read {value}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(super) async fn metrics(app: &TestApp) -> String {
    match app.get("/metrics").await.body {
        Value::String(s) => s,
        other => panic!("metrics are text: {other}"),
    }
}
