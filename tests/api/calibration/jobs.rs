//! The durable job queue: dead processes, repeated deaths, cancellation, two processes.
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::common::{Backend, TestApp, assert_error};

async fn a_job_abandoned_by_a_dead_process_is_finished_by_another(backend: Backend) {
    // The first process only queues: its workers are off.
    let mut first = TestApp::with(backend, |s| s.jobs.enabled = false).await;
    upload(&first, "j1", "coherence", 100, 0.5, 0.8).await;
    let id = train(&first, "j1", json!({"method": "bayes", "options": quick()})).await;
    // A process claims it under a 1 ms lease and dies: nothing renews the lease.
    let claimed = first
        .service
        .store()
        .job_rows()
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
            .job_rows()
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

on_both_backends!(
    a_job_abandoned_by_a_dead_process_is_finished_by_another,
    a_job_that_keeps_killing_its_process_fails_after_max_attempts,
    jobs_can_be_cancelled_queued_or_running,
);
