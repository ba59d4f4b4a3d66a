//! Anchor coverage: new anchors checked against the active version's 95% interval.

use serde_json::{Value, json};

use super::*;
use crate::common::{Backend, TestApp};

/// Uploads a batch to j1/coherence under item ids starting with `prefix`.
async fn upload_to(app: &TestApp, prefix: &str, n: usize, a: f64, b: f64) -> Value {
    upload_as(app, "j1", "coherence", &format!("{prefix}-"), n, a, b).await
}

async fn anchors_off_the_active_intervals_lower_the_coverage(backend: Backend) {
    const COVERAGE: &str = r#"judgecal_anchor_coverage{judge="j1",rubric="coherence"}"#;
    const CHECKED: &str = r#"judgecal_anchor_coverage_anchors{judge="j1",rubric="coherence"}"#;
    const ALARM: &str = r#"judgecal_drift_alarm{judge="j1",rubric="coherence"}"#;
    const EVALUE: &str = r#"judgecal_drift_evalue{judge="j1",rubric="coherence"}"#;
    const DRIFT_ANCHORS: &str = r#"judgecal_drift_anchors{judge="j1",rubric="coherence"}"#;
    let app = TestApp::new(backend).await;
    // No version yet: nothing to check against.
    let first = upload_to(&app, "fit", 200, 0.5, 0.8).await;
    assert!(first.get("coverage").is_none(), "{first}");
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");

    // The same relation: the noise (uniform ±0.5) lies inside the ±1.96·0.29 interval.
    let same = upload_to(&app, "same", 100, 0.5, 0.8).await;
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
    // Healthy so far: no drift alarm, and the e-value has not grown.
    assert_eq!(metric(&text, ALARM), Some(0.0));
    assert!(metric(&text, EVALUE).unwrap() <= 1.0, "{text}");
    assert_eq!(metric(&text, DRIFT_ANCHORS), Some(100.0));

    // The judge has turned 1.2 points too strict: most references are above the interval.
    let shifted = upload_to(&app, "shifted", 100, 1.7, 0.8).await;
    let c = &shifted["coverage"];
    assert!(c["share"].as_f64().unwrap() < 0.5, "{shifted}");
    let inside = inside_same + c["inside"].as_i64().unwrap();
    let text = metrics(&app).await;
    assert_eq!(metric(&text, COVERAGE), Some(inside as f64 / 200.0));
    assert_eq!(metric(&text, CHECKED), Some(200.0));
    // Most of a hundred anchors missed: the e-process passes 1/δ = 100 and raises the alarm.
    assert_eq!(metric(&text, ALARM), Some(1.0), "{text}");
    assert!(metric(&text, EVALUE).unwrap() >= 100.0, "{text}");
    assert_eq!(metric(&text, DRIFT_ANCHORS), Some(200.0));
    // A re-sent batch stores nothing new and is not counted twice.
    let again = upload_to(&app, "shifted", 100, 1.7, 0.8).await;
    assert!(again.get("coverage").is_none(), "{again}");

    // A method without a noise model is checked against its held-out conformal band; a new
    // version starts a new window and resets the drift alarm.
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "quantile_map"})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let later = upload_to(&app, "later", 100, 0.5, 0.8).await;
    let c = &later["coverage"];
    assert_eq!(
        (c["version"].as_i64(), c["checked"].as_i64()),
        (Some(2), Some(100)),
        "{later}"
    );
    assert!(c["share"].as_f64().unwrap() >= 0.9, "{later}");
    let text = metrics(&app).await;
    assert_eq!(metric(&text, CHECKED), Some(100.0));
    assert_eq!(metric(&text, ALARM), Some(0.0), "{text}");
    assert_eq!(metric(&text, DRIFT_ANCHORS), Some(100.0));
    // The version records its intervals: conformal, with their held-out coverage.
    let list = app.get("/v1/cells/j1/coherence/calibrators").await;
    let v = &list.body["versions"][0];
    assert_eq!(v["version"], 2, "{}", list.body);
    let iv = &v["intervals"];
    assert_eq!(iv["source"], "conformal", "{v}");
    assert_eq!(iv["held_out"].as_u64(), Some(400));
    let recorded = iv["held_out_coverage"].as_f64().unwrap();
    assert!((0.85..=1.0).contains(&recorded), "{iv}");
    assert!(!iv["bins"].as_array().unwrap().is_empty());
}

on_both_backends!(anchors_off_the_active_intervals_lower_the_coverage,);
