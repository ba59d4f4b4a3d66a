//! Training jobs, calibrator versions and /v1/correct on both backends, and the job queue
//! shared by several processes on one database.

use std::time::{Duration, Instant};

use crate::common::{Backend, TestApp, assert_error};
use axum::body::Body;
use judgecal::auth::Scope;
use judgecal::domain::calibration::JobId;
use serde_json::{Value, json};

/// `n` anchors of y = a + b·j + noise, j spread over [1, 5]. The noise is a fixed,
/// deterministic pattern with mean ≈ 0 and sd ≈ 0.29 (uniform on ±0.5).
fn anchors(n: usize, a: f64, b: f64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let j = 1.0 + 4.0 * ((i * 7919) % n) as f64 / n as f64;
            let noise = ((i * 104_729) % 1000) as f64 / 1000.0 - 0.5;
            let y: f64 = (a + b * j + noise).clamp(1.0, 5.0);
            json!({"item_id": format!("item-{i:05}"), "judge_score": j, "reference_score": y})
        })
        .collect()
}

async fn upload(app: &TestApp, judge: &str, rubric: &str, n: usize, a: f64, b: f64) {
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": judge, "rubric": rubric, "anchors": anchors(n, a, b)}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
}

/// Quick sampler settings: tests check behaviour, not the defaults' precision.
fn quick() -> Value {
    json!({"warmup": 300, "draws": 500})
}

async fn train(app: &TestApp, judge: &str, body: Value) -> String {
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
async fn finished(app: &TestApp, id: &str) -> Value {
    let started = Instant::now();
    loop {
        let job = app.get(&format!("/v1/jobs/{id}")).await;
        assert_eq!(job.status, 200, "{}", job.body);
        if ["succeeded", "failed", "cancelled"].contains(&job.body["state"].as_str().unwrap_or(""))
        {
            return job.body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "job still {}",
            job.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn correct(app: &TestApp, body: Value) -> crate::common::Response {
    app.json("POST", "/v1/correct", &body).await
}

fn metric(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name_and_labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Metrics text once `name_and_labels` reads `value`: a job's state is visible in the store a
/// moment before its process has counted it. Panics after 5 s.
async fn metrics_once(app: &TestApp, name_and_labels: &str, value: f64) -> String {
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

async fn metrics(app: &TestApp) -> String {
    match app.get("/metrics").await.body {
        Value::String(s) => s,
        other => panic!("metrics are text: {other}"),
    }
}

async fn train_then_correct_with_intervals(backend: Backend) {
    let app = TestApp::new(backend).await;
    // Two rubrics of one judge, the same true line y = 0.5 + 0.8·j.
    upload(&app, "j1", "coherence", 400, 0.5, 0.8).await;
    upload(&app, "j1", "fluency", 300, 0.5, 0.8).await;
    // The default sampler settings, whose diagnostics must pass.
    let id = train(&app, "j1", json!({"method": "bayes"})).await;
    let job = finished(&app, &id).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["progress"], 1.0);
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["request"]["rubrics"], json!(["coherence", "fluency"]));
    let versions = job["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2);
    assert!(
        versions
            .iter()
            .all(|v| v["version"] == 1 && v["active"] == true),
        "{job}"
    );

    let list = app.get("/v1/cells/j1/coherence/calibrators").await;
    assert_eq!(list.status, 200, "{}", list.body);
    let v = &list.body["versions"][0];
    assert_eq!(v["method"], "bayes");
    assert_eq!(v["anchor_count"], 400);
    assert_eq!(v["anchor_digest"].as_str().unwrap().len(), 64);
    assert!(v["passed"] == true && v["active"] == true, "{v}");
    // The slope is recovered: its posterior sd at n = 400 is about 0.013.
    let beta = v["posterior"]["beta_mean"].as_f64().unwrap();
    assert!((beta - 0.8).abs() < 0.05, "{beta}");
    assert_eq!(v["posterior"]["canary"], false);
    // Held out, the corrected scores beat the raw judge, whose bias is 0.5 − 0.2·j.
    let eval = &v["evaluation"];
    assert_eq!(eval["scheme"], "5-fold");
    assert_eq!(eval["calibrated"]["n"], 400);
    assert!(
        eval["calibrated"]["mae"].as_f64().unwrap() + 0.03 < eval["raw"]["mae"].as_f64().unwrap(),
        "{eval}"
    );

    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "scores": [2.0, 4.0]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(
        (res.body["version"].clone(), res.body["method"].clone()),
        (json!(1), json!("bayes"))
    );
    for (r, j) in res.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .zip([2.0, 4.0])
    {
        let c = r["corrected"].as_f64().unwrap();
        assert!((c - (0.5 + 0.8 * j)).abs() < 0.06, "{r}");
        let (cl, ch) = (
            r["credible"][0].as_f64().unwrap(),
            r["credible"][1].as_f64().unwrap(),
        );
        let (pl, ph) = (
            r["predictive"][0].as_f64().unwrap(),
            r["predictive"][1].as_f64().unwrap(),
        );
        // The predictive interval adds the noise (sd ≈ 0.29): about ±0.57 around the mean.
        assert!(pl < cl && cl < c && c < ch && ch < ph, "{r}");
        assert!(((ph - pl) / 2.0 - 1.96 * 0.29).abs() < 0.08, "{r}");
    }
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "fluency", "items": [{"id": "a", "score": 3.0}, {"id": "b", "score": 1.5}]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["results"][1]["id"], "b");
    assert_eq!(res.body["results"][1]["judge_score"], 1.5);

    let text = metrics_once(
        &app,
        r#"judgecal_training_jobs_total{method="bayes",outcome="succeeded"}"#,
        1.0,
    )
    .await;
    let beta_metric = metric(
        &text,
        r#"judgecal_beta_posterior_mean{judge="j1",rubric="coherence"}"#,
    )
    .unwrap();
    assert!((beta_metric - beta).abs() < 1e-9);
    assert_eq!(
        metric(
            &text,
            r#"judgecal_beta_canary{judge="j1",rubric="coherence"}"#
        ),
        Some(0.0)
    );
    assert!(
        metric(
            &text,
            r#"judgecal_calibrator_rhat_max{judge="j1",rubric="coherence"}"#
        )
        .unwrap()
            < 1.01
    );
    assert!(
        metric(
            &text,
            r#"judgecal_calibrator_ess_min{judge="j1",rubric="coherence"}"#
        )
        .unwrap()
            >= 400.0
    );
    assert_eq!(
        metric(
            &text,
            r#"judgecal_corrections_total{judge="j1",method="bayes",rubric="coherence"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        metric(
            &text,
            r#"judgecal_training_jobs_total{method="bayes",outcome="succeeded"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &text,
            r#"judgecal_training_duration_seconds_count{method="bayes"}"#
        ),
        Some(1.0)
    );

    // After a restart on the same database: the version, the gauges and the job count return.
    let mut app = app;
    let settings = app.settings.clone();
    let dir = app.take_dir();
    drop(app);
    let restarted = TestApp::on(settings, dir).await;
    let res = correct(
        &restarted,
        json!({"judge": "j1", "rubric": "coherence", "scores": [2.0]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let text = metrics(&restarted).await;
    assert_eq!(
        metric(
            &text,
            r#"judgecal_beta_posterior_mean{judge="j1",rubric="coherence"}"#
        ),
        Some(beta_metric)
    );
    assert_eq!(
        metric(
            &text,
            r#"judgecal_training_jobs_total{method="bayes",outcome="succeeded"}"#
        ),
        Some(1.0)
    );
}

async fn without_a_calibrator_correct_says_how_to_train_one(backend: Backend) {
    let app = TestApp::new(backend).await;
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "scores": [3.0]}),
    )
    .await;
    assert_error(&res, 404, "not_found");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("POST /v1/anchors")
    );
    upload(&app, "j1", "coherence", 50, 0.5, 0.8).await;
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "scores": [3.0]}),
    )
    .await;
    assert_error(&res, 404, "not_found");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("POST /v1/judges/j1/calibrations"),
        "{message}"
    );
}

async fn bad_requests_name_the_field(backend: Backend) {
    let app = TestApp::with(backend, |s| s.limits.max_correct_batch = 3).await;
    upload(&app, "j1", "coherence", 50, 0.5, 0.8).await;
    let train = |body: Value| {
        let app = &app;
        async move { app.json("POST", "/v1/judges/j1/calibrations", &body).await }
    };
    let d = assert_error(
        &train(json!({"method": "magic"})).await,
        422,
        "invalid_input",
    );
    assert_eq!(d[0]["field"], "method");
    let res = train(json!({"method": "bayes", "options": {"draw": 10}})).await;
    let d = assert_error(&res, 422, "invalid_input");
    assert_eq!(d[0]["field"], "options");
    assert!(d[0]["problem"].as_str().unwrap().contains("draw"), "{d:?}");
    let d = assert_error(
        &train(json!({"method": "bayes", "options": {"folds": 1}})).await,
        422,
        "invalid_input",
    );
    assert_eq!(d[0]["field"], "options.folds");
    let d = assert_error(
        &train(json!({"method": "bayes", "rubrics": ["coherence", "fluency"]})).await,
        422,
        "invalid_input",
    );
    assert_eq!(d[0]["field"], "rubrics[1]");
    let res = app
        .json(
            "POST",
            "/v1/judges/nobody/calibrations",
            &json!({"method": "bayes"}),
        )
        .await;
    assert_error(&res, 404, "not_found");
    // Nothing of the refused requests was queued.
    let d = assert_error(&app.get("/v1/jobs/not-a-uuid").await, 422, "invalid_input");
    assert_eq!(d[0]["field"], "id");
    assert_error(
        &app.get(&format!("/v1/jobs/{}", JobId::new())).await,
        404,
        "not_found",
    );

    let c = |body: Value| {
        let app = &app;
        async move { correct(app, body).await }
    };
    let d = assert_error(
        &c(json!({"judge": "j1", "rubric": "coherence", "scores": [1.0], "items": []})).await,
        422,
        "invalid_input",
    );
    assert_eq!(d[0]["field"], "scores");
    let d = assert_error(
        &c(json!({"judge": "j1", "rubric": "coherence", "scores": [1.0, 2.0, 3.0, 4.0]})).await,
        422,
        "invalid_input",
    );
    assert!(
        d[0]["problem"]
            .as_str()
            .unwrap()
            .contains("limits.max_correct_batch")
    );
    let d = assert_error(
        &c(json!({"judge": "j1", "rubric": "coherence", "scores": []})).await,
        422,
        "invalid_input",
    );
    assert_eq!(d[0]["field"], "scores");
    let d = assert_error(
        &c(json!({"judge": "j1", "rubric": "coherence", "items": [{"id": "ok", "score": 1.0}, {"id": "", "score": 2.0}]})).await,
        422,
        "invalid_input",
    );
    assert_eq!(
        (d[0]["row"].clone(), d[0]["field"].clone()),
        (json!(2), json!("id"))
    );
    let d = assert_error(
        &c(json!({"judge": "j 1", "rubric": "coherence", "scores": [1.0]})).await,
        422,
        "invalid_input",
    );
    assert_eq!(d[0]["field"], "judge");
    assert_error(
        &c(json!({"judge": "j1", "rubric": "coherence", "scores": ["3"]})).await,
        422,
        "invalid_input",
    );
    // Scopes: correcting needs `correct`, training needs `train`.
    let ingest_only = app.service.create_key(&[Scope::Ingest], "t").await.unwrap();
    let req = |path: &str, body: Value| {
        axum::http::Request::builder()
            .method("POST")
            .uri(path)
            .header("authorization", format!("Bearer {ingest_only}"))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let res = app
        .send(req(
            "/v1/correct",
            json!({"judge": "j1", "rubric": "coherence", "scores": [1.0]}),
        ))
        .await;
    assert_error(&res, 403, "forbidden");
    let res = app
        .send(req(
            "/v1/judges/j1/calibrations",
            json!({"method": "bayes"}),
        ))
        .await;
    assert_error(&res, 403, "forbidden");
}

async fn a_fit_that_fails_its_diagnostics_is_kept_but_not_served_unless_forced(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j1", "coherence", 200, 0.5, 0.8).await;
    // 20 draws per chain cannot reach a bulk ESS of 400.
    let short = json!({"warmup": 50, "draws": 20});
    let id = train(&app, "j1", json!({"method": "bayes", "options": short})).await;
    let job = finished(&app, &id).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["versions"][0]["passed"], false);
    assert_eq!(job["versions"][0]["active"], false);
    let v = &app.get("/v1/cells/j1/coherence/calibrators").await.body["versions"][0];
    assert!(v["failure"].as_str().unwrap().contains("bulk ESS"), "{v}");
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "scores": [3.0]}),
    )
    .await;
    assert_error(&res, 404, "not_found");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("failed its diagnostics")
    );
    // Asking for the version by number works: it is stored.
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "scores": [3.0], "version": 1}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let res = app
        .json(
            "POST",
            "/v1/cells/j1/coherence/calibrators/1/activate",
            &json!({}),
        )
        .await;
    assert_error(&res, 409, "conflict");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("force=true")
    );
    let res = app
        .json(
            "POST",
            "/v1/cells/j1/coherence/calibrators/1/activate?force=true",
            &json!({}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["active"], true);
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "scores": [3.0]}),
    )
    .await;
    assert_eq!(res.body["version"], 1, "{}", res.body);
    // A forced training activates its version whatever the diagnostics say.
    let id = train(
        &app,
        "j1",
        json!({"method": "bayes", "options": {"warmup": 50, "draws": 20, "force": true}}),
    )
    .await;
    let job = finished(&app, &id).await;
    assert_eq!(
        job["versions"][0],
        json!({"rubric": "coherence", "version": 2, "passed": false, "active": true})
    );
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "scores": [3.0]}),
    )
    .await;
    assert_eq!(res.body["version"], 2, "{}", res.body);
    assert_error(
        &app.json(
            "POST",
            "/v1/cells/j1/coherence/calibrators/9/activate",
            &json!({}),
        )
        .await,
        404,
        "not_found",
    );
}

async fn a_job_abandoned_by_a_dead_process_is_finished_by_another(backend: Backend) {
    // The first process only queues: its workers are off.
    let mut first = TestApp::with(backend, |s| s.jobs.enabled = false).await;
    upload(&first, "j1", "coherence", 100, 0.5, 0.8).await;
    let id = train(&first, "j1", json!({"method": "bayes", "options": quick()})).await;
    // A process claims it under a 1 ms lease and dies: nothing renews the lease.
    let claimed = first
        .service
        .store()
        .claim_job("dead-process", 1)
        .await
        .unwrap()
        .expect("the queued job");
    assert_eq!(claimed.id.to_string(), id);
    assert_eq!(
        first.get(&format!("/v1/jobs/{id}")).await.body["state"],
        "running"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    // A second process takes it over once the lease has run out.
    let mut settings = first.settings.clone();
    settings.jobs.enabled = true;
    let dir = first.take_dir();
    let second = TestApp::on(settings.clone(), dir).await;
    let job = finished(&second, &id).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["attempts"], 2);
    assert_eq!(job["versions"][0]["version"], 1);
}

async fn a_job_that_keeps_killing_its_process_fails_after_max_attempts(backend: Backend) {
    let mut first = TestApp::with(backend, |s| s.jobs.enabled = false).await;
    upload(&first, "j1", "coherence", 100, 0.5, 0.8).await;
    let id = train(&first, "j1", json!({"method": "bayes", "options": quick()})).await;
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        first
            .service
            .store()
            .claim_job("dead-process", 1)
            .await
            .unwrap()
            .expect("claimable");
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut settings = first.settings.clone();
    settings.jobs.enabled = true;
    settings.jobs.max_attempts = 2;
    let dir = first.take_dir();
    let second = TestApp::on(settings, dir).await;
    let job = finished(&second, &id).await;
    assert_eq!(job["state"], "failed", "{job}");
    assert!(
        job["error"]
            .as_str()
            .unwrap()
            .contains("gave up after 2 attempts"),
        "{job}"
    );
    assert_eq!(job["versions"], json!([]));
    metrics_once(
        &second,
        r#"judgecal_training_jobs_total{method="bayes",outcome="failed"}"#,
        1.0,
    )
    .await;
}

async fn a_flow_version_corrects_with_sigma_and_review(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j1", "coherence", 300, 0.5, 0.8).await;
    // Options of the other method are refused, naming the field.
    let res = app
        .json(
            "POST",
            "/v1/judges/j1/calibrations",
            &json!({"method": "flow", "options": {"chains": 2}}),
        )
        .await;
    let d = assert_error(&res, 422, "invalid_input");
    assert!(
        d[0]["problem"].as_str().unwrap().contains("chains"),
        "{d:?}"
    );

    let id = train(
        &app,
        "j1",
        json!({"method": "flow", "options": {"epochs": 150, "learning_rate": 0.01}}),
    )
    .await;
    let job = finished(&app, &id).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["detail"]["epoch"], 150, "{job}");
    // A finished job cannot be cancelled.
    assert_error(
        &app.json("POST", &format!("/v1/jobs/{id}/cancel"), &json!({}))
            .await,
        409,
        "conflict",
    );
    let v = &app.get("/v1/cells/j1/coherence/calibrators").await.body["versions"][0];
    assert_eq!(
        (v["method"].clone(), v["active"].clone()),
        (json!("flow"), json!(true)),
        "{v}"
    );
    // 20% held out: trained on 240, evaluated on 60, where it beats the raw judge.
    assert_eq!(v["flow"]["trained_on"], 240);
    assert_eq!(v["evaluation"]["scheme"], "holdout 0.2");
    assert_eq!(v["evaluation"]["calibrated"]["n"], 60);
    assert!(
        v["evaluation"]["calibrated"]["mae"].as_f64().unwrap()
            < v["evaluation"]["raw"]["mae"].as_f64().unwrap(),
        "{v}"
    );

    // 30 is far off the anchors (and off the table): evaluated directly, with a large σ.
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "scores": [2.0, 4.0, 30.0]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["method"], "flow");
    assert!(res.body.get("canary").is_none());
    let r = res.body["results"].as_array().unwrap();
    for (item, j) in r.iter().zip([2.0, 4.0]) {
        assert!(item.get("credible").is_none(), "{item}");
        let c = item["corrected"].as_f64().unwrap();
        assert!((c - (0.5 + 0.8 * j)).abs() < 0.2, "{item}");
    }
    let sigma = |i: usize| r[i]["sigma"].as_f64().unwrap();
    assert!(sigma(2) > sigma(0) && sigma(2) > sigma(1), "{r:?}");
    assert_eq!(r[2]["review"], true, "{r:?}");
    assert!(res.body["review_count"].as_u64().unwrap() >= 1);
    let text = metrics(&app).await;
    assert_eq!(
        metric(
            &text,
            r#"judgecal_dropout_sigma_count{judge="j1",rubric="coherence"}"#
        ),
        Some(3.0)
    );
    // Another process on the same database (here: a restart) loads the version from the
    // store and gives the same numbers, bit for bit: the weights round-trip exactly and the
    // MC-dropout masks are seeded.
    let mut app = app;
    let settings = app.settings.clone();
    let dir = app.take_dir();
    let other = TestApp::on(settings, dir).await;
    let again = correct(
        &other,
        json!({"judge": "j1", "rubric": "coherence", "scores": [2.0, 4.0, 30.0]}),
    )
    .await;
    assert_eq!(again.body["results"], res.body["results"]);
    assert!(
        metric(
            &text,
            r#"judgecal_review_routed_total{judge="j1",rubric="coherence"}"#
        )
        .unwrap()
            >= 1.0
    );
}

async fn jobs_can_be_cancelled_queued_or_running(backend: Backend) {
    // Queued: a process that does not train.
    let mut idle = TestApp::with(backend, |s| s.jobs.enabled = false).await;
    upload(&idle, "j1", "coherence", 200, 0.5, 0.8).await;
    let id = train(&idle, "j1", json!({"method": "flow"})).await;
    let res = idle
        .json("POST", &format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["state"], "cancelled");
    // Cancelling again is harmless.
    let again = idle
        .json("POST", &format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    assert_eq!(again.body["state"], "cancelled", "{}", again.body);
    // Running: a worker renewing its lease every ~330 ms sees the request.
    let mut settings = idle.settings.clone();
    settings.jobs.enabled = true;
    settings.jobs.lease_secs = 1;
    let dir = idle.take_dir();
    drop(idle);
    let app = TestApp::on(settings, dir).await;
    let id = train(
        &app,
        "j1",
        json!({"method": "flow", "options": {"epochs": 100000}}),
    )
    .await;
    let started = Instant::now();
    while app.get(&format!("/v1/jobs/{id}")).await.body["state"] != "running" {
        assert!(started.elapsed() < Duration::from_secs(30), "never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let res = app
        .json("POST", &format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let job = finished(&app, &id).await;
    assert_eq!(job["state"], "cancelled", "{job}");
    assert_eq!(job["versions"], json!([]));
    assert_error(
        &correct(
            &app,
            json!({"judge": "j1", "rubric": "coherence", "scores": [1.0]}),
        )
        .await,
        404,
        "not_found",
    );
}

/// `auto` on two cells of one judge: on a linear bias a corrector wins; on a ceiling (a third
/// of the references pinned at 5, the rest equal to the judge score) every corrector loses
/// to the raw judge on MAE, so the raw judge is served.
async fn auto_picks_the_held_out_winner_and_never_loses_to_the_raw_judge(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j1", "linear", 300, 0.5, 0.8).await;
    let ceiling: Vec<Value> = (0..200)
        .map(|i| {
            let j = 1.0 + 4.0 * ((i * 7919) % 200) as f64 / 200.0;
            let y = if i % 3 == 0 { 5.0 } else { j };
            json!({"item_id": format!("item-{i:05}"), "judge_score": j, "reference_score": y})
        })
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j1", "rubric": "ceiling", "anchors": ceiling}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    // Unknown objectives are refused, naming the field.
    let res = app
        .json(
            "POST",
            "/v1/judges/j1/calibrations",
            &json!({"method": "auto", "options": {"objective": "rmse"}}),
        )
        .await;
    assert!(
        assert_error(&res, 422, "invalid_input")[0]["problem"]
            .as_str()
            .unwrap()
            .contains("rmse")
    );
    let id = train(
        &app,
        "j1",
        json!({"method": "auto", "options": {
            "flow_min_anchors": 250,
            "bayes": {"warmup": 300, "draws": 500},
            "flow": {"epochs": 60, "learning_rate": 0.01},
        }}),
    )
    .await;
    let job = finished(&app, &id).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["method"], "auto");

    let version = |rubric: &'static str| {
        let app = &app;
        async move {
            app.get(&format!("/v1/cells/j1/{rubric}/calibrators"))
                .await
                .body["versions"][0]
                .clone()
        }
    };
    let mae = |e: &Value| e["mae"].as_f64().unwrap();
    let linear = version("linear").await;
    let d = &linear["decision"];
    assert_eq!(d["scheme"], "5-fold", "{d}");
    let candidates = d["candidates"].as_array().unwrap();
    let methods: Vec<&str> = candidates
        .iter()
        .map(|c| c["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        ["identity", "quantile_map", "bayes", "flow", "isotonic"]
    );
    // Every candidate was evaluated on the same 300 held-out anchors.
    assert!(
        candidates.iter().all(|c| c["evaluation"]["n"] == 300),
        "{d}"
    );
    assert_ne!(d["chosen"], "identity", "{d}");
    assert_eq!(linear["method"], d["chosen"]);
    assert_eq!(linear["active"], true);
    let best = candidates
        .iter()
        .map(|c| mae(&c["evaluation"]))
        .fold(f64::INFINITY, f64::min);
    assert!(
        mae(&linear["evaluation"]["calibrated"]) <= best * 1.01 + 1e-12,
        "{d}"
    );
    assert!(mae(&linear["evaluation"]["calibrated"]) < mae(&linear["evaluation"]["raw"]));

    let ceiling = version("ceiling").await;
    let d = &ceiling["decision"];
    assert_eq!(d["chosen"], "identity", "{d}");
    assert_eq!(ceiling["method"], "identity");
    let raw = mae(&d["candidates"][0]["evaluation"]);
    assert!(
        mae(&d["candidates"][2]["evaluation"]) > raw,
        "the line loses: {d}"
    );
    assert!(
        d["candidates"][3]["excluded"]
            .as_str()
            .unwrap()
            .contains("flow_min_anchors"),
        "{d}"
    );
    // The β canary is kept from the Bayesian fit although the line did not win.
    assert!(d["beta"]["beta_mean"].is_number(), "{d}");
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "ceiling", "scores": [2.0, 4.5]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["method"], "identity");
    assert_eq!(res.body["results"][1]["corrected"], 4.5);
    let text = metrics(&app).await;
    assert!(
        metric(
            &text,
            r#"judgecal_beta_canary{judge="j1",rubric="ceiling"}"#
        )
        .is_some(),
        "{text}"
    );

    // A quantile map on its own: the corrected scores follow the reference distribution.
    let id = train(
        &app,
        "j1",
        json!({"method": "quantile_map", "rubrics": ["linear"]}),
    )
    .await;
    assert_eq!(finished(&app, &id).await["state"], "succeeded");
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "linear", "scores": [1.0, 3.0, 5.0]}),
    )
    .await;
    assert_eq!(res.body["method"], "quantile_map", "{}", res.body);
    let c: Vec<f64> = res.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["corrected"].as_f64().unwrap())
        .collect();
    assert!(c[0] < c[1] && c[1] < c[2], "{c:?}");
    assert!((c[1] - (0.5 + 0.8 * 3.0)).abs() < 0.2, "{c:?}");

    // The report draws the active version for a person.
    let res = app.get("/v1/cells/j1/linear/report.svg").await;
    assert_eq!(res.status, 200);
    assert_eq!(res.headers["content-type"], "image/svg+xml");
    let svg = res.body.as_str().unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("version 2 (quantile_map), 300 anchors"),
        "{}",
        &svg[..400.min(svg.len())]
    );
    // 300 corrected points and 300 raw crosses per panel.
    assert!(svg.matches("<circle").count() >= 600);
    assert_error(
        &app.get("/v1/cells/j1/nothing/report.svg").await,
        404,
        "not_found",
    );
}

/// Uploads `anchors(n, a, b)` under item ids starting with `prefix`; returns the cell's part
/// of the response.
async fn upload_as(app: &TestApp, prefix: &str, n: usize, a: f64, b: f64) -> Value {
    let rows: Vec<Value> = anchors(n, a, b)
        .into_iter()
        .map(|mut r| {
            r["item_id"] = json!(format!("{prefix}-{}", r["item_id"].as_str().unwrap()));
            r
        })
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j1", "rubric": "coherence", "anchors": rows}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    res.body["cells"][0].clone()
}

async fn anchors_off_the_active_intervals_lower_the_coverage(backend: Backend) {
    const COVERAGE: &str = r#"judgecal_anchor_coverage{judge="j1",rubric="coherence"}"#;
    const CHECKED: &str = r#"judgecal_anchor_coverage_anchors{judge="j1",rubric="coherence"}"#;
    let app = TestApp::new(backend).await;
    // No version yet: nothing to check against.
    let first = upload_as(&app, "fit", 200, 0.5, 0.8).await;
    assert!(first.get("coverage").is_none(), "{first}");
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");

    // The same relation: the noise (uniform ±0.5) lies inside the ±1.96·0.29 interval.
    let same = upload_as(&app, "same", 100, 0.5, 0.8).await;
    let c = &same["coverage"];
    assert_eq!(
        (c["version"].as_i64(), c["checked"].as_i64()),
        (Some(1), Some(100)),
        "{same}"
    );
    assert!(c["share"].as_f64().unwrap() >= 0.9, "{same}");
    let inside_same = c["inside"].as_i64().unwrap();
    let text = metrics(&app).await;
    assert_eq!(metric(&text, COVERAGE), c["share"].as_f64());
    assert_eq!(metric(&text, CHECKED), Some(100.0));

    // The judge has turned 1.2 points too strict: most references are above the interval.
    let shifted = upload_as(&app, "shifted", 100, 1.7, 0.8).await;
    let c = &shifted["coverage"];
    assert!(c["share"].as_f64().unwrap() < 0.5, "{shifted}");
    let inside = inside_same + c["inside"].as_i64().unwrap();
    let text = metrics(&app).await;
    assert_eq!(metric(&text, COVERAGE), Some(inside as f64 / 200.0));
    assert_eq!(metric(&text, CHECKED), Some(200.0));
    // A re-sent batch stores nothing new and is not counted twice.
    let again = upload_as(&app, "shifted", 100, 1.7, 0.8).await;
    assert!(again.get("coverage").is_none(), "{again}");

    // A method without a noise model is checked against its residual band; a new version
    // starts a new window.
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "quantile_map"})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let later = upload_as(&app, "later", 100, 0.5, 0.8).await;
    let c = &later["coverage"];
    assert_eq!(
        (c["version"].as_i64(), c["checked"].as_i64()),
        (Some(2), Some(100)),
        "{later}"
    );
    assert!(c["share"].as_f64().unwrap() >= 0.9, "{later}");
    assert_eq!(metric(&metrics(&app).await, CHECKED), Some(100.0));
}

/// Isotonic regression as a method of its own: a job, a version, corrections with a predictive
/// interval from its held-out residuals, the same numbers after a restart.
async fn an_isotonic_version_corrects_with_a_held_out_interval(backend: Backend) {
    let app = TestApp::new(backend).await;
    // y = 1 + 4/(1 + e^(−2(j − 3))) plus the fixed noise of `anchors` (uniform ±0.5): monotone
    // and far from a line.
    let rows: Vec<Value> = anchors(400, 0.0, 0.0)
        .into_iter()
        .map(|mut r| {
            let j = r["judge_score"].as_f64().unwrap();
            let i: usize = r["item_id"].as_str().unwrap()[5..].parse().unwrap();
            let noise = ((i * 104_729) % 1000) as f64 / 1000.0 - 0.5;
            r["reference_score"] =
                json!((1.0 + 4.0 / (1.0 + (-2.0 * (j - 3.0)).exp()) + noise).clamp(1.0, 5.0));
            r
        })
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j1", "rubric": "coherence", "anchors": rows}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "isotonic"})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let v = &app.get("/v1/cells/j1/coherence/calibrators").await.body["versions"][0];
    assert_eq!(
        (v["method"].clone(), v["active"].clone()),
        (json!("isotonic"), json!(true)),
        "{v}"
    );
    let eval = &v["evaluation"];
    assert_eq!(
        (eval["scheme"].clone(), eval["calibrated"]["n"].clone()),
        (json!("5-fold"), json!(400))
    );
    assert!(
        eval["calibrated"]["mae"].as_f64().unwrap() + 0.1 < eval["raw"]["mae"].as_f64().unwrap(),
        "{eval}"
    );
    let body = json!({"judge": "j1", "rubric": "coherence", "scores": [1.5, 3.0, 4.5]});
    let res = correct(&app, body.clone()).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["method"], "isotonic");
    let r = res.body["results"].as_array().unwrap();
    let c: Vec<f64> = r.iter().map(|x| x["corrected"].as_f64().unwrap()).collect();
    assert!(c[0] < c[1] && c[1] < c[2], "{c:?}");
    for (item, j) in r.iter().zip([1.5, 3.0, 4.5]) {
        let truth = 1.0 + 4.0 / (1.0 + (-2.0 * (j - 3.0_f64)).exp());
        let corrected = item["corrected"].as_f64().unwrap();
        assert!((corrected - truth).abs() < 0.25, "{item}");
        let (lo, hi) = (
            item["predictive"][0].as_f64().unwrap(),
            item["predictive"][1].as_f64().unwrap(),
        );
        // The noise is uniform on ±0.5: a 95% band of residuals is about ±0.48, a little wider
        // for the fit's own error.
        assert!(lo < corrected && corrected < hi, "{item}");
        assert!((0.8..1.4).contains(&(hi - lo)), "{item}");
        assert!(
            item.get("credible").is_none() && item.get("sigma").is_none(),
            "{item}"
        );
    }
    let mut app = app;
    let settings = app.settings.clone();
    let dir = app.take_dir();
    drop(app);
    let restarted = TestApp::on(settings, dir).await;
    assert_eq!(
        correct(&restarted, body).await.body["results"],
        res.body["results"]
    );
}

on_both_backends!(
    an_isotonic_version_corrects_with_a_held_out_interval,
    anchors_off_the_active_intervals_lower_the_coverage,
    auto_picks_the_held_out_winner_and_never_loses_to_the_raw_judge,
    a_flow_version_corrects_with_sigma_and_review,
    jobs_can_be_cancelled_queued_or_running,
    train_then_correct_with_intervals,
    without_a_calibrator_correct_says_how_to_train_one,
    bad_requests_name_the_field,
    a_fit_that_fails_its_diagnostics_is_kept_but_not_served_unless_forced,
    a_job_abandoned_by_a_dead_process_is_finished_by_another,
    a_job_that_keeps_killing_its_process_fails_after_max_attempts,
);

/// Two processes on one Postgres: every job runs exactly once, versions are numbered without
/// gaps or duplicates, and an activation through one is served by the other within the
/// refresh period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_postgres_share_the_queue_and_the_active_versions() {
    let fast_refresh = |s: &mut judgecal::config::Settings| {
        s.calibrators.refresh_millis = 200;
        s.jobs.poll_millis = 50;
    };
    let a = TestApp::with(Backend::Postgres, fast_refresh).await;
    let mut settings = a.settings.clone();
    fast_refresh(&mut settings);
    let b = TestApp::on(settings, None).await;
    for judge in ["j1", "j2", "j3"] {
        upload(&a, judge, "coherence", 80, 0.5, 0.8).await;
    }
    // Two jobs per judge, queued alternately through both processes.
    let mut ids = Vec::new();
    for round in 0..2 {
        for judge in ["j1", "j2", "j3"] {
            let via = if ids.len() % 2 == 0 { &a } else { &b };
            let seed = round * 10;
            ids.push(train(via, judge, json!({"method": "bayes", "options": {"warmup": 200, "draws": 400, "seed": seed}})).await);
        }
    }
    for id in &ids {
        let job = finished(&a, id).await;
        assert_eq!(job["state"], "succeeded", "{job}");
        assert_eq!(job["attempts"], 1, "ran more than once: {job}");
    }
    for judge in ["j1", "j2", "j3"] {
        let list = b
            .get(&format!("/v1/cells/{judge}/coherence/calibrators"))
            .await
            .body;
        let numbers: Vec<i64> = list["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_i64().unwrap())
            .collect();
        assert_eq!(numbers, [2, 1], "{list}");
    }
    // Activate version 1 of j1 through A; B serves it within a few refresh periods.
    let res = a
        .json(
            "POST",
            "/v1/cells/j1/coherence/calibrators/1/activate?force=true",
            &json!({}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let started = Instant::now();
    loop {
        let res = correct(
            &b,
            json!({"judge": "j1", "rubric": "coherence", "scores": [3.0]}),
        )
        .await;
        assert_eq!(res.status, 200, "{}", res.body);
        if res.body["version"] == 1 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "B still serves {}",
            res.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
