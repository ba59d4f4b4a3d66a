//! A pairwise judge that changes (issue 56, item 6), on both backends: the judge versions a
//! pairwise cell's comparisons carry, which comparisons a new version should re-judge, the
//! bridge between two versions on the calibrated preference, and the silent-change check,
//! through the routes a cell of scores uses.

use crate::calibration::{finished, metric, metrics, train};
use crate::common::{Backend, TestApp, assert_error};
use crate::ratings::world;
use serde_json::{Value, json};

fn upload(version: &str, rows: Vec<Value>) -> Value {
    json!({"judge": "pair-judge", "rubric": "overall", "judge_version": version, "comparisons": rows})
}

/// The rows re-judged: unchanged, or by a judge that now calls every comparison for a (in
/// both orders), which moves the calibrated preference of every comparison it called for b.
fn rejudged(rows: &[Value], always_a: bool) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            let (verdict, swapped) = if always_a {
                (json!("a"), json!("a"))
            } else {
                (r["verdict"].clone(), r["verdict_swapped"].clone())
            };
            json!({"item_id": r["item_id"], "a": r["a"], "b": r["b"], "verdict": verdict,
                "verdict_swapped": swapped})
        })
        .collect()
}

/// The (row, field) of each problem of a refused (422) POST of `body` to `path`.
async fn refused_rows(app: &TestApp, path: &str, body: Value) -> Vec<(Value, Value)> {
    assert_error(&app.json("POST", path, &body).await, 422, "invalid_input")
        .iter()
        .map(|d| (d["row"].clone(), d["field"].clone()))
        .collect()
}

/// POSTs comparisons that must be stored.
async fn stored(app: &TestApp, body: Value) {
    let res = app.json("POST", "/v1/comparisons", &body).await;
    assert_eq!(res.status, 200, "{}", res.body);
}

fn check_items(rows: &[Value]) -> Vec<Value> {
    rows.iter()
        .map(|r| json!({"item_id": r["item_id"], "verdict": r["verdict"], "verdict_swapped": r["verdict_swapped"]}))
        .collect()
}

async fn a_pairwise_judge_version_is_bridged_and_checked_on_its_calibrated_preference(
    backend: Backend,
) {
    let app = TestApp::new(backend).await;
    let cell = "/v1/cells/pair-judge/overall";
    let v1 = world(400, 0, 400, 7);
    assert_eq!(
        app.json("POST", "/v1/comparisons", &upload("v1", v1.clone()))
            .await
            .status,
        200
    );
    // A version the cell lacks is named beside those it has.
    let res = app.get(&format!("{cell}/bridge?from=v1&to=v2")).await;
    assert_error(&res, 404, "not_found");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"v1\" (400 comparisons)"), "{message}");
    let id = train(
        &app,
        "pair-judge",
        json!({"method": "auto", "judge_version": "v1"}),
    )
    .await;
    assert_eq!(finished(&app, &id).await["state"], "succeeded");

    let versions = app.get(&format!("{cell}/judge-versions")).await;
    assert_eq!(versions.status, 200, "{}", versions.body);
    assert_eq!(versions.body["judge_versions"][0]["judge_version"], "v1");
    assert_eq!(versions.body["judge_versions"][0]["anchor_count"], 400);
    assert_eq!(versions.body["judge_versions"][0]["calibrated_by"], 1);

    // What v2 should re-judge: every labelled comparison, none shared yet, a planned bridge.
    let plan = app
        .get(&format!("{cell}/rescore?judge_version=v2&limit=50"))
        .await;
    assert_eq!(plan.status, 200, "{}", plan.body);
    assert_eq!(plan.body["items"].as_array().unwrap().len(), 50);
    assert_eq!(plan.body["remaining"], 400);
    assert_eq!(plan.body["shared"], 0);
    assert_eq!(plan.body["from_calibrator"], 1);
    assert_eq!(plan.body["from"], "v1");
    assert_eq!(plan.body["tolerance"], 0.025);
    assert!(
        plan.body["bridge_items"].as_u64().unwrap() >= 30,
        "{}",
        plan.body
    );

    // v2 judges every item as v1 did: the calibrated preference does not move at all. Its
    // rows take the stored preferences, so v2 is labelled too.
    stored(&app, upload("v2", rejudged(&v1, false))).await;
    let bridge = app.get(&format!("{cell}/bridge?from=v1&to=v2")).await;
    assert_eq!(bridge.status, 200, "{}", bridge.body);
    assert_eq!(bridge.body["calibrator"], 1);
    assert_eq!(bridge.body["items"], 400);
    assert_eq!(bridge.body["corrected"]["mean"], 0.0, "{}", bridge.body);
    assert_eq!(bridge.body["verdict"], "carry_over", "{}", bridge.body);
    let plan = app.get(&format!("{cell}/rescore?judge_version=v2")).await;
    assert_eq!(
        (plan.body["remaining"].clone(), plan.body["shared"].clone()),
        (json!(0), json!(400))
    );
    // v3 calls every comparison for a: the preference of the ones called for b jumps.
    stored(&app, upload("v3", rejudged(&v1, true))).await;
    let bridge = app.get(&format!("{cell}/bridge?from=v1&to=v3")).await;
    assert_eq!(bridge.body["verdict"], "refit", "{}", bridge.body);
    assert!(bridge.body["corrected"]["lo"].as_f64().unwrap() > 0.025);
    let reason = bridge.body["reason"].as_str().unwrap();
    assert!(reason.contains("re-judged comparisons"), "{reason}");
    // v2 has no trained version to bridge from; a version the cell lacks is named.
    let res = app.get(&format!("{cell}/bridge?from=v2&to=v3")).await;
    assert_error(&res, 409, "conflict");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"judge_version\": \"v2\""), "{message}");
    let res = app.get(&format!("{cell}/bridge?from=v1&to=v9")).await;
    assert_error(&res, 404, "not_found");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("to: "), "{message}");

    // The silent-change check: v1's comparisons re-judged under v1. Unchanged is no change;
    // a judge now calling everything for a is, and the gauge says so.
    let gauge = r#"judgecal_judge_changed{judge="pair-judge",rubric="overall"}"#;
    let check = app
        .json(
            "POST",
            &format!("{cell}/checks"),
            &json!({"judge_version": "v1", "items": check_items(&v1[..200])}),
        )
        .await;
    assert_eq!(check.status, 200, "{}", check.body);
    assert_eq!(check.body["changed"], false, "{}", check.body);
    assert_eq!(check.body["verdict"], "carry_over");
    assert_eq!(metric(&metrics(&app).await, gauge), Some(0.0));
    let changed = check_items(&rejudged(&v1[..200], true));
    let check = app
        .json(
            "POST",
            &format!("{cell}/checks"),
            &json!({"judge_version": "v1", "items": changed}),
        )
        .await;
    assert_eq!(check.body["changed"], true, "{}", check.body);
    let reason = check.body["reason"].as_str().unwrap();
    assert!(reason.contains("POST /v1/comparisons"), "{reason}");
    assert_eq!(metric(&metrics(&app).await, gauge), Some(1.0));
    let id = check.body["id"].as_str().unwrap();
    let read = app.get(&format!("{cell}/checks/{id}")).await;
    assert_eq!(read.body, check.body);

    // Bad rows are named, and nothing is recorded: a score where a verdict belongs, an item
    // the version never judged, an outcome that is none.
    let checks = format!("{cell}/checks");
    let named = refused_rows(
        &app,
        &checks,
        json!({"judge_version": "v1", "items": [
            {"item_id": "p00000", "judge_score": 3.0},
            {"item_id": "nope", "verdict": "a"},
            {"item_id": "p00001", "verdict": "c"},
        ]}),
    )
    .await;
    // An unreadable outcome is refused before the rows are checked.
    assert_eq!(named, vec![(json!(3), json!("verdict"))]);
    let named = refused_rows(
        &app,
        &checks,
        json!({"judge_version": "v1", "items": [
            {"item_id": "p00000", "judge_score": 3.0},
            {"item_id": "nope", "verdict": "a"},
        ]}),
    )
    .await;
    assert_eq!(
        named,
        vec![
            (json!(1), json!("judge_score")),
            (json!(2), json!("item_id"))
        ]
    );
    assert_eq!(metric(&metrics(&app).await, gauge), Some(1.0));
}

on_both_backends!(a_pairwise_judge_version_is_bridged_and_checked_on_its_calibrated_preference);

async fn a_check_of_a_cell_of_scores_refuses_verdicts(backend: Backend) {
    let app = TestApp::new(backend).await;
    let anchors: Vec<Value> = (0..40)
        .map(|i| json!({"item_id": format!("i{i}"), "judge_score": f64::from(i % 5 + 1), "reference_score": f64::from(i % 5 + 1)}))
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j", "rubric": "r", "anchors": anchors}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let named = refused_rows(
        &app,
        "/v1/cells/j/r/checks",
        json!({"items": [{"item_id": "i1", "verdict": "a"}, {"item_id": "i2"}]}),
    )
    .await;
    assert_eq!(
        named,
        vec![
            (json!(1), json!("verdict")),
            (json!(2), json!("judge_score"))
        ]
    );
}

on_both_backends!(a_check_of_a_cell_of_scores_refuses_verdicts);

/// People's preference turned round: a judge they now overturn.
fn overturned(mut rows: Vec<Value>) -> Vec<Value> {
    for r in &mut rows {
        let p = if r["preference"] == "a" { "b" } else { "a" };
        r["preference"] = json!(p);
    }
    rows
}

async fn a_pairwise_cells_drift_alarm_watches_the_calibrated_preferences_misses(backend: Backend) {
    let app = TestApp::new(backend).await;
    let upload =
        |rows: Vec<Value>| json!({"judge": "pair-judge", "rubric": "overall", "comparisons": rows});
    stored(&app, upload(world(1_000, 0, 1_000, 7))).await;
    let id = train(&app, "pair-judge", json!({"method": "auto"})).await;
    assert_eq!(finished(&app, &id).await["state"], "succeeded");
    let labels = r#"{judge="pair-judge",rubric="overall"}"#;
    let gauge = |m: &str, name: &str| metric(m, &format!("{name}{labels}"));

    // New labelled comparisons of the same world: inside the band about 95% of the time, no
    // alarm.
    for batch in 0..3 {
        let rows = world(200, 10_000 + 200 * batch, 200, 20 + batch as u64);
        stored(&app, upload(rows)).await;
    }
    let m = metrics(&app).await;
    // The coverage gauge reads the newest whole uploads until 200 comparisons.
    assert_eq!(gauge(&m, "judgecal_anchor_coverage_anchors"), Some(200.0));
    let coverage = gauge(&m, "judgecal_anchor_coverage").unwrap();
    assert!((0.9..=0.99).contains(&coverage), "{coverage}");
    assert_eq!(gauge(&m, "judgecal_drift_alarm"), Some(0.0));
    assert_eq!(gauge(&m, "judgecal_drift_anchors"), Some(600.0));
    // Unlabelled verdicts are no evidence: nothing more is checked.
    stored(&app, upload(world(100, 30_000, 0, 30))).await;
    assert_eq!(
        gauge(&metrics(&app).await, "judgecal_drift_anchors"),
        Some(600.0)
    );
    // Their labels arrive later: the same verdicts sent back with the people's preference are
    // labelled, not refused, and checked.
    let res = app
        .json(
            "POST",
            "/v1/comparisons",
            &upload(world(100, 30_000, 100, 30)),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(
        (res.body["labelled"].clone(), res.body["inserted"].clone()),
        (json!(100), json!(0))
    );
    assert_eq!(
        gauge(&metrics(&app).await, "judgecal_drift_anchors"),
        Some(700.0)
    );
    // People now overturn the judge: the alarm fires.
    for batch in 0..10 {
        let rows = overturned(world(200, 40_000 + 200 * batch, 200, 40 + batch as u64));
        stored(&app, upload(rows)).await;
    }
    let m = metrics(&app).await;
    assert_eq!(gauge(&m, "judgecal_drift_alarm"), Some(1.0), "{m}");
    assert!(gauge(&m, "judgecal_anchor_coverage").unwrap() < 0.8);
}

on_both_backends!(a_pairwise_cells_drift_alarm_watches_the_calibrated_preferences_misses);

async fn a_panel_mixing_pairwise_and_scoring_judges_is_refused_naming_the_member(backend: Backend) {
    let app = TestApp::new(backend).await;
    // Defined before its members held anything, the panel trains into a refusal that says why.
    let res = app
        .json(
            "POST",
            "/v1/panels",
            &json!({"name": "pair-panel", "judges": ["pair-judge", "other"]}),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    stored(&app, upload("v1", world(40, 0, 40, 3))).await;
    let res = app
        .json(
            "POST",
            "/v1/judges/pair-panel/calibrations",
            &json!({"method": "auto"}),
        )
        .await;
    assert_error(&res, 409, "conflict");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("pair-judge hold pairwise comparisons")
            && message.contains("other has no comparisons"),
        "{message}"
    );
    // A judge of scores beside a pairwise judge: a new panel of both is not defined.
    let anchors: Vec<Value> = (0..30)
        .map(|i| json!({"item_id": format!("s{i}"), "judge_score": 1 + i % 5, "reference_score": 1 + i % 5}))
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "other", "rubric": "overall", "anchors": anchors}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let res = app
        .json(
            "POST",
            "/v1/panels",
            &json!({"name": "pair-panel-2", "judges": ["other", "pair-judge"]}),
        )
        .await;
    let details = assert_error(&res, 409, "conflict");
    assert_eq!(details[0]["field"], "judges[1]", "{details:?}");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("judge scores are held by other")
    );
    assert_error(&app.get("/v1/panels/pair-panel-2").await, 404, "not_found");
    // The first panel, trained again, names the member's scores.
    let res = app
        .json(
            "POST",
            "/v1/judges/pair-panel/calibrations",
            &json!({"method": "auto"}),
        )
        .await;
    assert_error(&res, 409, "conflict");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("other holds judge scores"), "{message}");
}

on_both_backends!(a_panel_mixing_pairwise_and_scoring_judges_is_refused_naming_the_member);
