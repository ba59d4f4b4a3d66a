//! Anchor coverage: new anchors checked against the active version's 95% interval.

use serde_json::{Value, json};

use super::*;
use crate::common::{Backend, TestApp};

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

on_both_backends!(anchors_off_the_active_intervals_lower_the_coverage,);
