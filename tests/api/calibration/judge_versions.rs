//! When the judge changes, end to end on both backends: versioned anchors and training, the
//! stale-calibration warning (and the refusal a judge may ask for), re-anchoring without new
//! labels, the bridge, runs of two judge versions compared, and the silent-change check.

use serde_json::{Value, json};

use super::{anchors, correct, metric, metrics, trained};
use crate::common::{Backend, TestApp, assert_error};

/// `anchors(n, a, b)` of `version`; `shift` is added to every judge score and `references`
/// false leaves the reference out (a re-scored item).
fn rows(n: usize, shift: f64, references: bool) -> Vec<Value> {
    anchors(n, 0.5, 0.8)
        .into_iter()
        .map(|mut r| {
            r["judge_score"] = json!(r["judge_score"].as_f64().unwrap() + shift);
            if !references {
                r.as_object_mut().unwrap().remove("reference_score");
            }
            r
        })
        .collect()
}

async fn upload(app: &TestApp, version: &str, rows: Vec<Value>) -> crate::common::Response {
    app.json(
        "POST",
        "/v1/anchors",
        &json!({"judge": "j", "rubric": "r", "judge_version": version, "anchors": rows}),
    )
    .await
}

async fn a_judge_change_end_to_end(backend: Backend) {
    let app = TestApp::new(backend).await;
    let res = upload(&app, "v1", rows(200, 0.0, true)).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["cells"][0]["judge_version"], "v1");
    trained(&app, "j", json!({"method": "isotonic"})).await;
    let versions = app.get("/v1/cells/j/r/calibrators").await;
    assert_eq!(
        versions.body["versions"][0]["judge_version"], "v1",
        "{}",
        versions.body
    );

    // The door: the same version is served silently, another one with a warning and a count.
    let same = correct(
        &app,
        json!({"judge": "j", "rubric": "r", "scores": [3.0], "judge_version": "v1"}),
    )
    .await;
    assert_eq!(same.status, 200, "{}", same.body);
    assert!(same.body["warnings"] == json!([]), "{}", same.body);
    let stale = correct(
        &app,
        json!({"judge": "j", "rubric": "r", "scores": [3.0], "judge_version": "v2"}),
    )
    .await;
    assert_eq!(stale.status, 200, "{}", stale.body);
    let warning = stale.body["warnings"][0]["message"].as_str().unwrap();
    assert!(
        warning.contains("\"v2\"") && warning.contains("\"v1\""),
        "{warning}"
    );
    let text = metrics(&app).await;
    assert_eq!(
        metric(
            &text,
            "judgecal_judge_version_mismatch_total{judge=\"j\",rubric=\"r\"}"
        ),
        Some(1.0)
    );
    // A judge that refuses mismatches gets 409 instead.
    let put = app
        .json(
            "PUT",
            "/v1/judges/j/settings",
            &json!({"on_version_mismatch": "refuse"}),
        )
        .await;
    assert_eq!(put.status, 200, "{}", put.body);
    let refused = correct(
        &app,
        json!({"judge": "j", "rubric": "r", "scores": [3.0], "judge_version": "v2"}),
    )
    .await;
    assert_error(&refused, 409, "conflict");
    app.json(
        "PUT",
        "/v1/judges/j/settings",
        &json!({"on_version_mismatch": "warn"}),
    )
    .await;

    // Re-anchoring: what to re-score, then the new version's scores with no references.
    let plan = app.get("/v1/cells/j/r/rescore?judge_version=v2").await;
    assert_eq!(plan.status, 200, "{}", plan.body);
    assert_eq!(plan.body["remaining"], 200);
    assert!(
        plan.body["bridge_items"].as_u64().unwrap() >= 10,
        "{}",
        plan.body
    );
    // A row of an item with no stored reference is refused by row and field; nothing stored.
    let mut bad = rows(200, 0.6, false);
    bad.push(json!({"item_id": "never-labelled", "judge_score": 3.0}));
    let res = upload(&app, "v2", bad).await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(details.len(), 1, "{}", res.body);
    assert_eq!(details[0]["row"], 201);
    assert_eq!(details[0]["field"], "reference_score");
    assert_eq!(app.cell_count("j", "r").await, Some(200));
    // A reference that differs from the stored one is a conflict.
    let mut clash = rows(1, 0.6, true);
    clash[0]["reference_score"] = json!(4.5);
    let res = upload(&app, "v2", clash).await;
    let details = assert_error(&res, 409, "conflict");
    assert_eq!(details[0]["field"], "reference_score", "{}", res.body);
    let res = upload(&app, "v2", rows(200, 0.6, false)).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["inserted"], 200);
    assert_eq!(app.cell_count("j", "r").await, Some(400));
    let page = app
        .get("/v1/cells/j/r/anchors?judge_version=v2&limit=1")
        .await;
    let stored = &page.body["anchors"][0];
    let original = &anchors(200, 0.5, 0.8)[0];
    assert_eq!(stored["reference_score"], original["reference_score"]);
    assert_eq!(stored["judge_version"], "v2");

    // The bridge: +0.6 on the judge's scale moves the corrected mean far past 0.1.
    let bridge = app.get("/v1/cells/j/r/bridge?from=v1&to=v2").await;
    assert_eq!(bridge.status, 200, "{}", bridge.body);
    assert_eq!(bridge.body["items"], 200);
    assert_eq!(bridge.body["verdict"], "refit", "{}", bridge.body);
    assert!((bridge.body["raw"]["mean"].as_f64().unwrap() - 0.6).abs() < 1e-9);
    assert!((bridge.body["raw"]["rank_correlation"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    assert!((bridge.body["tolerance"].as_f64().unwrap() - 0.1).abs() < 1e-12);
    // The cell's page lists both judge versions and the same bridge.
    let page = app.get("/ui/cells/j/r").await;
    let html = page.body.as_str().unwrap();
    let part = &html[html
        .find("<h2>Judge versions and bridges</h2>")
        .expect("a bridges section")..];
    let c = &bridge.body["corrected"];
    let shift = format!(
        "{:.3} [{:.3}, {:.3}]",
        c["mean"].as_f64().unwrap(),
        c["lo"].as_f64().unwrap(),
        c["hi"].as_f64().unwrap()
    );
    assert!(
        part.contains("<td>v1 → v2</td><td>200</td><td>0.600</td>")
            && part.contains(&shift)
            && part.contains("<td>refit</td>"),
        "{shift}: {part}"
    );
    // A version the cell's anchors do not carry (a typo, or a `#` cut off a URL) is a 404
    // naming those that exist, not a bridge of no items.
    let unknown = app.get("/v1/cells/j/r/bridge?from=v1&to=v9").await;
    let _ = assert_error(&unknown, 404, "not_found");
    let message = unknown.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"v9\"")
            && message.contains("\"v1\" (200 anchors)")
            && message.contains("\"v2\""),
        "{message}"
    );
    let versions = app.get("/v1/cells/j/r/judge-versions").await;
    assert_eq!(
        versions.body["judge_versions"][1]["judge_version"], "v2",
        "{}",
        versions.body
    );
    assert!(
        versions.body["judge_versions"][1]
            .get("calibrated_by")
            .is_none()
    );

    // The refit fits the newest version by default, and each version is served by its own.
    trained(&app, "j", json!({"method": "isotonic"})).await;
    let versions = app.get("/v1/cells/j/r/calibrators").await;
    assert_eq!(
        versions.body["versions"][0]["judge_version"], "v2",
        "{}",
        versions.body
    );
    for (v, served) in [("v1", 1), ("v2", 2)] {
        let res = correct(
            &app,
            json!({"judge": "j", "rubric": "r", "scores": [3.0], "judge_version": v}),
        )
        .await;
        assert_eq!(res.body["version"], served, "{}", res.body);
        assert!(res.body["warnings"] == json!([]), "{}", res.body);
    }
    // The same item scored 3.0 by v1 and 3.6 by v2 is corrected alike by the two versions.
    let by = |v: &str, j: f64| {
        correct(
            &app,
            json!({"judge": "j", "rubric": "r", "scores": [j], "judge_version": v}),
        )
    };
    let (c1, c2) = (by("v1", 3.0).await, by("v2", 3.6).await);
    let (c1, c2) = (
        c1.body["results"][0]["corrected"].as_f64().unwrap(),
        c2.body["results"][0]["corrected"].as_f64().unwrap(),
    );
    assert!((c1 - c2).abs() < 0.15, "{c1} vs {c2}");

    // Runs of two judge versions: each through its own calibration.
    let run = |v: &str, shift: f64| json!({"scores": (0..60).map(|i| 1.5 + (i % 30) as f64 / 10.0 + shift).collect::<Vec<_>>(), "judge_version": v});
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j", "rubric": "r", "a": run("v1", 0.0), "b": run("v2", 0.6)}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["a"]["calibrator"], 1);
    assert_eq!(res.body["b"]["calibrator"], 2);
    let (lo, hi) = (
        res.body["interval"][0].as_f64().unwrap(),
        res.body["interval"][1].as_f64().unwrap(),
    );
    assert!(
        lo < 0.0 && 0.0 < hi,
        "the same items, shifted with the judge: {}",
        res.body
    );
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j", "rubric": "r", "a": run("v1", 0.0), "b": run("v3", 0.0)}),
        )
        .await;
    let _ = assert_error(&res, 409, "conflict");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"v3\"")
    );
    let ranked = app
        .json(
            "POST",
            "/v1/rank",
            &json!({"judge": "j", "rubric": "r", "runs": [
                {"name": "old", "scores": run("v1", 0.0)["scores"], "judge_version": "v1"},
                {"name": "new", "scores": run("v2", 0.6)["scores"], "judge_version": "v2"},
            ]}),
        )
        .await;
    assert_eq!(ranked.status, 200, "{}", ranked.body);
    assert_eq!(ranked.body["runs"][1]["calibrator"], 2);

    // A silent change: v2's items re-scored under the same label. Unchanged, it is no change;
    // shifted, it is, and the gauge says so. The anchors stay as they were.
    let rescored = |shift: f64| -> Vec<Value> {
        rows(200, 0.6 + shift, false)
            .into_iter()
            .take(100)
            .map(|r| json!({"item_id": r["item_id"], "judge_score": r["judge_score"]}))
            .collect()
    };
    let check = app
        .json(
            "POST",
            "/v1/cells/j/r/checks",
            &json!({"judge_version": "v2", "items": rescored(0.0)}),
        )
        .await;
    assert_eq!(check.status, 200, "{}", check.body);
    assert_eq!(check.body["changed"], false, "{}", check.body);
    assert_eq!(check.body["verdict"], "carry_over");
    assert_eq!(
        metric(
            &metrics(&app).await,
            "judgecal_judge_changed{judge=\"j\",rubric=\"r\"}"
        ),
        Some(0.0)
    );
    let check = app
        .json(
            "POST",
            "/v1/cells/j/r/checks",
            &json!({"judge_version": "v2", "items": rescored(0.5)}),
        )
        .await;
    assert_eq!(check.body["changed"], true, "{}", check.body);
    // Read back by its id, as it was answered; another cell's or no check is a 404.
    let id = check.body["id"].as_str().unwrap();
    let read = app.get(&format!("/v1/cells/j/r/checks/{id}")).await;
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.body, check.body);
    assert_error(
        &app.get(&format!("/v1/cells/j/other/checks/{id}")).await,
        404,
        "not_found",
    );
    assert_error(
        &app.get("/v1/cells/j/r/checks/00000000-0000-4000-8000-000000000000")
            .await,
        404,
        "not_found",
    );
    let details = assert_error(
        &app.get("/v1/cells/j/r/checks/nope").await,
        422,
        "invalid_input",
    );
    assert_eq!(details[0]["field"], "id", "{details:?}");
    assert_eq!(
        metric(
            &metrics(&app).await,
            "judgecal_judge_changed{judge=\"j\",rubric=\"r\"}"
        ),
        Some(1.0)
    );
    let unknown = app
        .json(
            "POST",
            "/v1/cells/j/r/checks",
            &json!({"judge_version": "v2", "items": [{"item_id": "nope", "judge_score": 3}]}),
        )
        .await;
    let details = assert_error(&unknown, 422, "invalid_input");
    assert_eq!(
        (details[0]["row"].as_u64(), details[0]["field"].as_str()),
        (Some(1), Some("item_id"))
    );
    assert_eq!(app.cell_count("j", "r").await, Some(400));
}

/// Nothing existing changes meaning: anchors and requests without a judge version work as
/// before, and a training request naming a version with no anchors is refused by field.
async fn unversioned_requests_are_served_as_before(backend: Backend) {
    let app = TestApp::new(backend).await;
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j", "rubric": "r", "anchors": rows(100, 0.0, true)}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert!(res.body["cells"][0].get("judge_version").is_none());
    trained(&app, "j", json!({"method": "isotonic"})).await;
    let res = correct(&app, json!({"judge": "j", "rubric": "r", "scores": [3.0]})).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert!(res.body["warnings"] == json!([]) && res.body.get("judge_version").is_none());
    let res = app
        .json(
            "POST",
            "/v1/judges/j/calibrations",
            &json!({"method": "isotonic", "judge_version": "v7"}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(details[0]["field"], "judge_version");
    let page = app.get("/v1/cells/j/r/anchors?limit=1").await;
    assert!(page.body["anchors"][0].get("judge_version").is_none());
}

/// Re-anchoring costs no labels and loses nothing: a new version's re-scores of N anchor
/// items with no references train the same fit, with the same held-out figures, as N newly
/// labelled anchors of that version would (they are the same items and references).
async fn rescored_items_train_what_new_labels_would(backend: Backend) {
    let app = TestApp::new(backend).await;
    assert_eq!(upload(&app, "v1", rows(150, 0.0, true)).await.status, 200);
    assert_eq!(upload(&app, "v2", rows(150, 0.6, false)).await.status, 200);
    trained(
        &app,
        "j",
        json!({"method": "isotonic", "judge_version": "v2"}),
    )
    .await;
    let labelled = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "fresh", "rubric": "r", "judge_version": "v2", "anchors": rows(150, 0.6, true)}),
        )
        .await;
    assert_eq!(labelled.status, 200, "{}", labelled.body);
    trained(&app, "fresh", json!({"method": "isotonic"})).await;
    let rescored = app.get("/v1/cells/j/r/calibrators").await.body["versions"][0].clone();
    let fresh = app.get("/v1/cells/fresh/r/calibrators").await.body["versions"][0].clone();
    assert_eq!(rescored["judge_version"], "v2");
    assert_eq!(rescored["anchor_digest"], fresh["anchor_digest"]);
    assert!(rescored["evaluation"].is_object(), "{rescored}");
    assert_eq!(rescored["evaluation"], fresh["evaluation"]);
}

/// A versioned training does not take over untagged traffic: requests naming no judge version
/// keep the calibration of the unversioned anchors, a compare of an untagged run against a
/// versioned one corrects each by its own, a pinned version says which calibration the named
/// judge version has, and a cell with only versioned calibrations says so to untagged requests.
async fn a_versioned_training_leaves_untagged_requests_alone(backend: Backend) {
    let app = TestApp::new(backend).await;
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j", "rubric": "r", "anchors": rows(200, 0.0, true)}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    trained(&app, "j", json!({"method": "isotonic"})).await;
    let untagged = |j: f64| correct(&app, json!({"judge": "j", "rubric": "r", "scores": [j]}));
    let before = untagged(2.0).await;
    assert_eq!(before.body["version"], 1, "{}", before.body);
    // The judge changes: re-scores shifted by +0.6 under v2, trained (the newest version).
    assert_eq!(upload(&app, "v2", rows(200, 0.6, false)).await.status, 200);
    trained(&app, "j", json!({"method": "isotonic"})).await;
    let versions = app.get("/v1/cells/j/r/calibrators").await;
    assert_eq!(versions.body["versions"][0]["judge_version"], "v2");
    assert_eq!(
        versions.body["versions"][0]["active"], true,
        "{}",
        versions.body
    );
    let after = untagged(2.0).await;
    assert_eq!(after.status, 200, "{}", after.body);
    assert_eq!(after.body["version"], 1, "{}", after.body);
    assert_eq!(
        after.body["results"][0]["corrected"], before.body["results"][0]["corrected"],
        "{}",
        after.body
    );
    assert!(after.body["warnings"] == json!([]), "{}", after.body);
    // Pinning the old version for v2's scores says v2 has its own (version 2), not that it has
    // none.
    let pinned = correct(
        &app,
        json!({"judge": "j", "rubric": "r", "scores": [3.0], "judge_version": "v2", "version": 1}),
    )
    .await;
    assert_eq!(pinned.body["version"], 1, "{}", pinned.body);
    let warning = pinned.body["warnings"][0]["message"].as_str().unwrap();
    assert!(
        warning.contains("version 2") && !warning.contains("no calibration of its own"),
        "{warning}"
    );
    // The same items, old scores untagged and new scores under v2: no difference.
    let scores = |shift: f64| {
        (0..60)
            .map(|i| 1.5 + (i % 30) as f64 / 10.0 + shift)
            .collect::<Vec<_>>()
    };
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j", "rubric": "r", "a": {"scores": scores(0.0)},
                    "b": {"scores": scores(0.6), "judge_version": "v2"}}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(
        (
            res.body["a"]["calibrator"].as_i64(),
            res.body["b"]["calibrator"].as_i64()
        ),
        (Some(1), Some(2))
    );
    let (lo, hi) = (
        res.body["interval"][0].as_f64().unwrap(),
        res.body["interval"][1].as_f64().unwrap(),
    );
    assert!(lo < 0.0 && 0.0 < hi, "{}", res.body);
    // Only versioned calibrations: an untagged request is served by the active one and told.
    assert_eq!(
        app.json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "k", "rubric": "r", "judge_version": "v1", "anchors": rows(100, 0.0, true)}),
        )
        .await
        .status,
        200
    );
    trained(&app, "k", json!({"method": "isotonic"})).await;
    let res = correct(&app, json!({"judge": "k", "rubric": "r", "scores": [3.0]})).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let warning = res.body["warnings"][0]["message"].as_str().unwrap();
    assert!(
        warning.contains("names no judge_version") && warning.contains("\"v1\""),
        "{warning}"
    );
}

/// A delete touches the row it names and no other: without `judge_version` the unversioned
/// row, and a re-scored row of another version keeps its score and its reference.
async fn a_delete_touches_only_the_row_it_names(backend: Backend) {
    let app = TestApp::new(backend).await;
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j", "rubric": "r", "anchors": rows(10, 0.0, true)}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(upload(&app, "v2", rows(10, 0.6, false)).await.status, 200);
    assert_eq!(app.cell_count("j", "r").await, Some(20));
    let original = &rows(10, 0.0, true)[3];
    let id = original["item_id"].as_str().unwrap().to_owned();
    let delete = |query: &str| {
        app.send(
            app.request("DELETE", &format!("/v1/cells/j/r/anchors/{id}{query}"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
    };
    let res = delete("").await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["anchor_count"], 19);
    let kept = app
        .get("/v1/cells/j/r/anchors?judge_version=v2&limit=100")
        .await;
    let row = kept.body["anchors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["item_id"] == id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("v2's row of {id} is gone: {}", kept.body));
    assert_eq!(row["reference_score"], original["reference_score"]);
    assert_eq!(row["judge_score"], rows(10, 0.6, false)[3]["judge_score"]);
    let again = delete("").await;
    let _ = assert_error(&again, 404, "not_found");
    assert!(
        again.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("judge_version"),
        "{}",
        again.body
    );
    let res = delete("?judge_version=v2").await;
    assert_eq!(res.body["anchor_count"], 18, "{}", res.body);
}

on_both_backends!(
    a_judge_change_end_to_end,
    a_delete_touches_only_the_row_it_names,
    a_versioned_training_leaves_untagged_requests_alone,
    unversioned_requests_are_served_as_before,
    rescored_items_train_what_new_labels_would,
);
