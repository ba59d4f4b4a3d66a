//! `POST /v1/comparisons` on both backends: pairwise verdicts stored whole or not at all,
//! idempotent retries, conflicts and replace, labels arriving after the verdicts, CSV, and a
//! cell holding scores or comparisons, never both.

use crate::common::{Backend, TestApp, assert_error};
use serde_json::{Value, json};

fn comparisons(rows: Value) -> Value {
    json!({"judge": "gpt-pair", "rubric": "helpfulness", "comparisons": rows})
}

/// The cell's entry in `GET /v1/cells`.
async fn cell(app: &TestApp, judge: &str, rubric: &str) -> Option<Value> {
    let cells = app.get("/v1/cells").await.body;
    cells["cells"]
        .as_array()
        .expect("cells array")
        .iter()
        .find(|c| c["judge"] == judge && c["rubric"] == rubric)
        .cloned()
}

async fn a_batch_is_stored_whole_or_refused_whole_naming_every_row(backend: Backend) {
    let app = TestApp::new(backend).await;
    // 1,000 good rows and two bad ones: nothing stored, both named.
    let mut rows: Vec<Value> = (0..1_000)
        .map(|i| {
            let verdict = ["a", "b", "tie"][i % 3];
            json!({"item_id": format!("p{i:04}"), "a": "model-x", "b": "model-y",
                "verdict": verdict, "verdict_swapped": 0.25,
                "preference": if i % 2 == 0 { json!("a") } else { Value::Null }})
        })
        .collect();
    rows[10]["b"] = json!("model-x");
    rows[500]["verdict"] = json!("left");
    let res = app
        .json("POST", "/v1/comparisons", &comparisons(json!(rows)))
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    let named: Vec<(i64, &str)> = details
        .iter()
        .map(|d| (d["row"].as_i64().unwrap(), d["field"].as_str().unwrap()))
        .collect();
    assert_eq!(named, [(11, "b"), (501, "verdict")]);
    assert!(cell(&app, "gpt-pair", "helpfulness").await.is_none());

    rows[10]["b"] = json!("model-z");
    rows[500]["verdict"] = json!(0.9);
    let body = comparisons(json!(rows));
    let first = app.json("POST", "/v1/comparisons", &body).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["inserted"], 1_000);
    assert_eq!(first.body["cells"][0]["comparison_count"], 1_000);
    let stored = cell(&app, "gpt-pair", "helpfulness").await.unwrap();
    assert_eq!(
        (
            stored["anchor_count"].clone(),
            stored["comparison_count"].clone()
        ),
        (json!(0), json!(1_000))
    );
    // A retry changes nothing, not even the cell's last change.
    let again = app.json("POST", "/v1/comparisons", &body).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(
        (
            again.body["inserted"].clone(),
            again.body["unchanged"].clone()
        ),
        (json!(0), json!(1_000))
    );
    assert_eq!(cell(&app, "gpt-pair", "helpfulness").await.unwrap(), stored);
    // A scalar method reads judge scores: training these comparisons with one is refused,
    // naming the field and pointing to `auto` (tests/api/preferences.rs trains them).
    let res = app
        .json(
            "POST",
            "/v1/judges/gpt-pair/calibrations",
            &json!({"method": "bayes"}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(details[0]["field"], "method");
    let problem = details[0]["problem"].as_str().unwrap();
    assert!(problem.contains(r#"{"method": "auto"}"#), "{problem}");
}

async fn changed_verdicts_conflict_unless_replaced_and_labels_may_come_later(backend: Backend) {
    let app = TestApp::new(backend).await;
    let first = comparisons(json!([
        {"item_id": "p1", "a": "x", "b": "y", "verdict": "a"},
        {"item_id": "p2", "a": "x", "b": "y", "verdict": "b"},
    ]));
    assert_eq!(
        app.json("POST", "/v1/comparisons", &first).await.status,
        200
    );
    // A changed verdict, and an item compared the other way round: 409, nothing stored.
    let changed = comparisons(json!([
        {"item_id": "p3", "a": "x", "b": "y", "verdict": "a"},
        {"item_id": "p1", "a": "x", "b": "y", "verdict": "tie"},
        {"item_id": "p2", "a": "y", "b": "x", "verdict": "a"},
    ]));
    let res = app.json("POST", "/v1/comparisons", &changed).await;
    let details = assert_error(&res, 409, "conflict");
    let named: Vec<(i64, &str)> = details
        .iter()
        .map(|d| (d["row"].as_i64().unwrap(), d["field"].as_str().unwrap()))
        .collect();
    assert_eq!(named, [(2, "verdict"), (3, "a")]);
    assert_eq!(
        cell(&app, "gpt-pair", "helpfulness").await.unwrap()["comparison_count"],
        2
    );
    // The people's preference of p1 arrives with another judge version's verdict: both of
    // p1's rows carry it, and the unversioned row is not counted as replaced.
    let labelled = json!({"judge": "gpt-pair", "rubric": "helpfulness", "judge_version": "v2",
        "comparisons": [{"item_id": "p1", "a": "x", "b": "y", "verdict": "b", "preference": "a"}]});
    let res = app.json("POST", "/v1/comparisons", &labelled).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(
        (res.body["inserted"].clone(), res.body["replaced"].clone()),
        (json!(1), json!(0))
    );
    // Re-sending p1's unversioned row without a preference is unchanged: a row without one
    // takes its item's.
    let unlabelled = comparisons(json!([{"item_id": "p1", "a": "x", "b": "y", "verdict": "a"}]));
    let res = app.json("POST", "/v1/comparisons", &unlabelled).await;
    assert_eq!(
        (res.status, res.body["unchanged"].clone()),
        (axum::http::StatusCode::OK, json!(1)),
        "{}",
        res.body
    );
    // Another preference for p1 is a conflict; with replace it is set on every row.
    let relabelled = comparisons(
        json!([{"item_id": "p1", "a": "x", "b": "y", "verdict": "a", "preference": 0.25}]),
    );
    let res = app.json("POST", "/v1/comparisons", &relabelled).await;
    let details = assert_error(&res, 409, "conflict");
    assert_eq!(details[0]["field"], "preference");
    let res = app
        .json("POST", "/v1/comparisons?replace=true", &relabelled)
        .await;
    assert_eq!(
        (res.status, res.body["replaced"].clone()),
        (axum::http::StatusCode::OK, json!(1)),
        "{}",
        res.body
    );
    let v2 = app.json("POST", "/v1/comparisons", &json!({"judge": "gpt-pair", "rubric": "helpfulness",
        "judge_version": "v2", "comparisons": [{"item_id": "p1", "a": "x", "b": "y", "verdict": "b", "preference": 0.25}]})).await;
    assert_eq!(
        (v2.status, v2.body["unchanged"].clone()),
        (axum::http::StatusCode::OK, json!(1)),
        "{}",
        v2.body
    );
}

async fn csv_uploads_span_cells_and_a_cell_holds_scores_or_comparisons(backend: Backend) {
    let app = TestApp::new(backend).await;
    let csv = "judge,rubric,item_id,a,b,verdict,verdict_swapped,preference,covariate.length_diff\n\
               gpt-pair,helpfulness,p1,x,y,a,b,a,120\n\
               gpt-pair,harmless,p1,x,y,tie,,,\n";
    let res = app.csv("/v1/comparisons", csv).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["cells"].as_array().unwrap().len(), 2);
    // A misspelt column is named, not dropped.
    let res = app
        .csv(
            "/v1/comparisons",
            "judge,rubric,item_id,a,b,verdict,preferense\n",
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(details[0]["field"], "preferense");
    // Scores into a cell of comparisons, and comparisons into a cell of scores: 409.
    let scores = json!({"judge": "gpt-pair", "rubric": "helpfulness", "anchors": [
        {"item_id": "s1", "judge_score": 3.0, "reference_score": 4.0}]});
    let res = app.json("POST", "/v1/anchors", &scores).await;
    let details = assert_error(&res, 409, "conflict");
    assert_eq!(
        (details[0]["row"].clone(), details[0]["field"].clone()),
        (json!(1), json!("judge"))
    );
    let scores = json!({"judge": "gpt-4o", "rubric": "helpfulness", "anchors": [
        {"item_id": "s1", "judge_score": 3.0, "reference_score": 4.0}]});
    assert_eq!(app.json("POST", "/v1/anchors", &scores).await.status, 200);
    let pairs = json!({"judge": "gpt-4o", "rubric": "helpfulness", "comparisons": [
        {"item_id": "p9", "a": "x", "b": "y", "verdict": "a"}]});
    let res = app.json("POST", "/v1/comparisons", &pairs).await;
    assert_error(&res, 409, "conflict");
    assert_eq!(
        cell(&app, "gpt-4o", "helpfulness").await.unwrap()["comparison_count"],
        0
    );
    // An unknown field in a row is refused by name.
    let typo = comparisons(
        json!([{"item_id": "p1", "a": "x", "b": "y", "verdict": "a", "verdit_swapped": "b"}]),
    );
    let details = assert_error(
        &app.json("POST", "/v1/comparisons", &typo).await,
        422,
        "invalid_input",
    );
    assert_eq!(
        (details[0]["row"].clone(), details[0]["field"].clone()),
        (json!(1), json!("verdit_swapped"))
    );
}

on_both_backends!(
    a_batch_is_stored_whole_or_refused_whole_naming_every_row,
    changed_verdicts_conflict_unless_replaced_and_labels_may_come_later,
    csv_uploads_span_cells_and_a_cell_holds_scores_or_comparisons,
);
