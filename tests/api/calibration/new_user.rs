//! What a new user hit (issue 54), on both backends: judge scores off the scale the version
//! was trained on, and bodies that fail to parse (wrong types, missing and unknown fields),
//! each refused naming the row and field, with nothing stored.

use serde_json::{Value, json};

use super::{correct, quick, trained, upload};
use crate::common::{Backend, TestApp, assert_error};

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Anchors span judge scores [1, 4.96] (width 3.96): 99 is far outside and refused by item
/// everywhere scores are corrected; 8.9 is outside but within one width, so it is corrected,
/// flagged, and no run-level answer built on it leaves the 1–5 scale (a bayes line would
/// read 0.5 + 0.8 · 8.9 = 7.6 there).
async fn scores_off_the_trained_range_are_refused_or_flagged(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j", "r", 150, 0.5, 0.8).await;
    trained(&app, "j", json!({"method": "bayes", "options": quick()})).await;
    let res = correct(
        &app,
        json!({"judge": "j", "rubric": "r", "scores": [3.0, 99.0, -40.0]}),
    )
    .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(details.len(), 2, "{}", res.body);
    assert_eq!(
        (details[0]["row"].as_u64(), details[0]["field"].as_str()),
        (Some(2), Some("scores"))
    );
    assert_eq!(details[1]["row"], 3);
    assert!(
        details[0]["problem"]
            .as_str()
            .unwrap()
            .contains("far outside"),
        "{}",
        res.body
    );
    // An anchor upload into the cell: the same judge scores are refused by row, nothing
    // stored; a new judge version (no calibration yet) may bring its own scale.
    let rows = json!([
        {"item_id": "new-1", "judge_score": 3.0, "reference_score": 3.0},
        {"item_id": "new-2", "judge_score": 99.0, "reference_score": 3.0},
    ]);
    let up = |version: Option<&str>| json!({"judge": "j", "rubric": "r", "judge_version": version, "anchors": rows.clone()});
    let res = app.json("POST", "/v1/anchors", &up(None)).await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(
        (details[0]["row"].as_u64(), details[0]["field"].as_str()),
        (Some(2), Some("judge_score")),
        "{}",
        res.body
    );
    assert_eq!(app.cell_count("j", "r").await, Some(150));
    let res = app.json("POST", "/v1/anchors", &up(Some("v2"))).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let items = json!([{"id": "a", "score": 3.0}, {"id": "b", "score": 99.0}]);
    let res = correct(&app, json!({"judge": "j", "rubric": "r", "items": items})).await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(
        (details[0]["row"].as_u64(), details[0]["field"].as_str()),
        (Some(2), Some("items"))
    );

    let res = correct(
        &app,
        json!({"judge": "j", "rubric": "r", "scores": [8.9, 3.0]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(
        res.body["results"][0]["outside_anchors"], true,
        "{}",
        res.body
    );
    assert!(
        res.body["results"][1].get("outside_anchors").is_none(),
        "{}",
        res.body
    );
    assert!(f(&res.body["results"][0]["corrected"]) <= 5.0);
    let warning = res.body["warnings"][0]["message"].as_str().unwrap();
    assert!(warning.contains("1 scores lie outside"), "{warning}");

    let app = &app;
    let estimate = |scores: Value| async move {
        app.json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j", "rubric": "r", "scores": scores}),
        )
        .await
    };
    let res = estimate(json!([99.0, 2.0, 3.0])).await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(
        (details[0]["row"].as_u64(), details[0]["field"].as_str()),
        (Some(1), Some("scores"))
    );
    let high = json!(vec![8.9; 50]);
    let res = estimate(high.clone()).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let b = &res.body;
    assert!(
        f(&b["estimate"]) <= 5.0 && f(&b["interval"][1]) <= 5.0,
        "{b}"
    );
    assert!(f(&b["interval"][0]) >= 1.0, "{b}");
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j", "rubric": "r", "a": {"scores": high}, "b": {"scores": [1.0, 1.0, 1.0, 99.0]}}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(
        (details[0]["row"].as_u64(), details[0]["field"].as_str()),
        (Some(4), Some("b.scores"))
    );
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j", "rubric": "r", "a": {"scores": high}, "b": {"scores": vec![1.0; 50]}}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let b = &res.body;
    assert!(
        f(&b["difference"]) <= 4.0 && f(&b["interval"][1]) <= 4.0,
        "{b}"
    );
    let res = app
        .json(
            "POST",
            "/v1/rank",
            &json!({"judge": "j", "rubric": "r", "runs": [
                {"name": "high", "scores": high},
                {"name": "low", "scores": vec![1.0; 50]},
                {"name": "typo", "scores": [3.0, 30.0]},
            ]}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(
        (details[0]["row"].as_u64(), details[0]["field"].as_str()),
        (Some(2), Some("runs[2].scores"))
    );
}

/// A body of the wrong shape names the field (and the row in an array) in `details`; an
/// unknown field is refused by name everywhere, anchor rows and CSV columns included, every
/// problem of a batch in one answer, and nothing is stored.
async fn bodies_that_fail_to_parse_name_the_field(backend: Backend) {
    let app = TestApp::new(backend).await;
    // The (row, field) of every problem of a 422.
    let refused = |res: &crate::common::Response, expected: &[(Option<u64>, &str)]| {
        let found: Vec<(Option<u64>, String)> = assert_error(res, 422, "invalid_input")
            .iter()
            .map(|d| (d["row"].as_u64(), d["field"].as_str().unwrap().to_owned()))
            .collect();
        let expected: Vec<(Option<u64>, String)> = expected
            .iter()
            .map(|(r, f)| (*r, (*f).to_owned()))
            .collect();
        assert_eq!(found, expected, "{}", res.body);
    };
    let rows = json!([
        {"item_id": "a", "judge_score": 3.0, "reference_score": 3.5, "judge_verison": "v9"},
        {"item_id": "b", "judge_score": 2.0, "reference_score": 9.0},
        {"item_id": "c", "judge_score": 2.0, "reference_score": 2.5, "lenght": 3},
    ]);
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j", "rubric": "r", "anchors": rows}),
        )
        .await;
    refused(
        &res,
        &[
            (Some(1), "judge_verison"),
            (Some(2), "reference_score"),
            (Some(3), "lenght"),
        ],
    );
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j", "rubric": "r", "judge_verison": "v9", "anchors": [
                {"item_id": "a", "judge_score": 3.0, "reference_score": 3.5}]}),
        )
        .await;
    refused(&res, &[(None, "judge_verison")]);
    let res = app
        .csv(
            "/v1/anchors",
            "judge,rubric,item_id,judge_score,reference_score,judge_verison\nj,r,a,3,3.5,v9\n",
        )
        .await;
    refused(&res, &[(None, "judge_verison")]);
    assert_eq!(app.cell_count("j", "r").await, None);

    let res = correct(
        &app,
        json!({"judge": "j", "rubric": "r", "scores": [1.0, "x"]}),
    )
    .await;
    refused(&res, &[(Some(2), "scores")]);
    let res = correct(&app, json!({"judge": "j", "scores": [1.0]})).await;
    refused(&res, &[(None, "rubric")]);
    let res = correct(
        &app,
        json!({"judge": "j", "rubric": "r", "scores": [1.0], "judge_verison": "v2"}),
    )
    .await;
    refused(&res, &[(None, "judge_verison")]);
    let res = correct(
        &app,
        json!({"judge": "j", "rubric": "r", "items": [{"score": 1.0}, {"score": 2.0, "scroe": 1}]}),
    )
    .await;
    refused(&res, &[(Some(2), "items.scroe")]);
    let res = app
        .json("POST", "/v1/compare", &json!({"judge": "j", "rubric": "r", "a": {"scores": [1.0]}, "b": {"scores": [1.0, null]}}))
        .await;
    refused(&res, &[(Some(2), "b.scores")]);
    // A batch with a changed reference and a re-score of an item with none: both problems
    // in one answer, nothing stored.
    let one = json!([{"item_id": "a", "judge_score": 3.0, "reference_score": 3.5}]);
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "k", "rubric": "r", "anchors": one}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let both = json!([
        {"item_id": "a", "judge_score": 3.0, "reference_score": 4.5},
        {"item_id": "never-labelled", "judge_score": 2.0},
    ]);
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "k", "rubric": "r", "anchors": both}),
        )
        .await;
    refused(&res, &[(Some(2), "reference_score"), (Some(1), "item_id")]);
    assert_eq!(app.cell_count("k", "r").await, Some(1));
    // A misspelt query parameter is refused by name, not read as left out.
    let res = app
        .send(
            app.request("DELETE", "/v1/cells/j/r/anchors/a?judge_verison=v2")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    refused(&res, &[(None, "judge_verison")]);
    // Malformed JSON stays a 400.
    let res = app
        .send(
            app.request("POST", "/v1/correct")
                .header("content-type", "application/json")
                .body(axum::body::Body::from("{\"judge\": "))
                .unwrap(),
        )
        .await;
    let _ = assert_error(&res, 400, "malformed_json");
}

on_both_backends!(
    scores_off_the_trained_range_are_refused_or_flagged,
    bodies_that_fail_to_parse_name_the_field,
);
