//! Training a Bayesian version, correcting with it, and the refusals on the way.

use axum::body::Body;
use judgecal::auth::Scope;
use judgecal::domain::calibration::JobId;
use serde_json::{Value, json};

use super::*;
use crate::common::{Backend, TestApp, assert_error};

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
    assert_eq!(v["diagnostics"]["divergences"], 0, "{v}");
    assert!(v.get("flow").is_none(), "{v}");
    // The report picture prints what the method reports: β's mean and interval.
    let svg = app.get("/v1/cells/j1/coherence/report.svg").await;
    let [lo, hi] = [0, 1].map(|k| v["posterior"]["beta_interval"][k].as_f64().unwrap());
    let headline = format!("beta {beta:.2} [{lo:.2}, {hi:.2}]");
    assert!(
        svg.body.as_str().unwrap().contains(&headline),
        "{headline} missing from the report"
    );
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
        // The predictive interval adds the noise: the posterior predictive (normal, sd ≈
        // 0.29: ±0.57) conformalised on held-out anchors, where the noise is uniform on ±0.5,
        // so 95% of references lie within ±0.475 of the line.
        assert!(pl < cl && cl < c && c < ch && ch < ph, "{r}");
        assert!(((ph - pl) / 2.0 - 0.475).abs() < 0.05, "{r}");
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
    let ingest_only = app
        .service
        .operations()
        .create_key(&[Scope::Ingest], "t")
        .await
        .unwrap();
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
    // None of its versions passed (after the sampler's extensions): the job failed, saying
    // why and what to do; the version is stored all the same.
    assert_eq!(job["state"], "failed", "{job}");
    let error = job["error"].as_str().unwrap();
    assert!(
        error.contains("coherence: ") && error.contains("bulk ESS") && error.contains("force=true"),
        "{job}"
    );
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

/// A Bayesian version stored before migration 6 (posterior in `params`, diagnostics in
/// `diagnostics`) reads back the same after it: the migration's statement turns the old row
/// into the one stored form, and a restarted process serves it.
async fn a_version_stored_in_the_old_form_reads_back_after_migration_6(backend: Backend) {
    use sqlx::Connection;
    let app = TestApp::new(backend).await;
    upload(&app, "j1", "coherence", 100, 0.5, 0.8).await;
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let before = app.get("/v1/cells/j1/coherence/calibrators").await.body["versions"][0].clone();
    let scores = json!({"judge": "j1", "rubric": "coherence", "scores": [2.0, 4.0]});
    let corrected = correct(&app, scores.clone()).await.body["results"].clone();
    // Put the row back in the form earlier builds stored.
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&app.settings.database.url)
        .await
        .unwrap();
    let params: String = sqlx::query_scalar("SELECT params FROM calibrators")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let params: Value = serde_json::from_str(&params).unwrap();
    sqlx::query("UPDATE calibrators SET params = $1, diagnostics = $2")
        .bind(params["posterior"].to_string())
        .bind(params["diagnostics"].to_string())
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query(include_str!(
        "../../../migrations/20261123000006_bayes_params.sql"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    let mut app = app;
    let settings = app.settings.clone();
    let dir = app.take_dir();
    drop(app);
    let restarted = TestApp::on(settings, dir).await;
    let after = restarted
        .get("/v1/cells/j1/coherence/calibrators")
        .await
        .body["versions"][0]
        .clone();
    assert_eq!(after, before);
    assert_eq!(correct(&restarted, scores).await.body["results"], corrected);
}

on_both_backends!(
    a_version_stored_in_the_old_form_reads_back_after_migration_6,
    train_then_correct_with_intervals,
    without_a_calibrator_correct_says_how_to_train_one,
    bad_requests_name_the_field,
    a_fit_that_fails_its_diagnostics_is_kept_but_not_served_unless_forced,
);
