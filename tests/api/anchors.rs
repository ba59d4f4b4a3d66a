//! The anchors API on both backends: whole-batch validation, idempotent retries, conflicts,
//! replace, CSV, paging and deletion.

use crate::common::{Backend, TestApp, assert_error};
use serde_json::{Value, json};

fn batch(judge: &str, rubric: &str, n: usize, bad_row: Option<usize>) -> Value {
    let anchors: Vec<Value> = (1..=n)
        .map(|row| {
            let y = if Some(row) == bad_row { json!("oops") } else { json!(1.0 + (row % 9) as f64 * 0.5) };
            json!({"item_id": format!("item-{row:05}"), "judge_score": 2.0 + (row % 7) as f64 * 0.25, "reference_score": y})
        })
        .collect();
    json!({"judge": judge, "rubric": rubric, "anchors": anchors})
}

async fn one_bad_row_in_ten_thousand_refuses_the_whole_batch(backend: Backend) {
    let app = TestApp::new(backend).await;
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &batch("j1", "coherence", 10_000, Some(7_321)),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(details.len(), 1);
    assert_eq!(details[0]["row"], 7_321);
    assert_eq!(details[0]["field"], "reference_score");
    // Nothing was stored: the cell does not exist.
    assert_eq!(app.cell_count("j1", "coherence").await, None);
    let page = app.get("/v1/cells/j1/coherence/anchors").await;
    assert_error(&page, 404, "not_found");
}

async fn a_retried_batch_changes_nothing(backend: Backend) {
    let app = TestApp::new(backend).await;
    let body = batch("j1", "coherence", 10_000, None);
    let first = app.json("POST", "/v1/anchors", &body).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["inserted"], 10_000);
    let before = app.get("/v1/cells").await.body;
    let again = app.json("POST", "/v1/anchors", &body).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(
        (
            again.body["inserted"].clone(),
            again.body["unchanged"].clone()
        ),
        (json!(0), json!(10_000))
    );
    // Same count, same last-change time.
    assert_eq!(app.get("/v1/cells").await.body, before);
}

async fn changed_scores_conflict_unless_replaced(backend: Backend) {
    let app = TestApp::new(backend).await;
    let first = json!({"judge": "j1", "rubric": "r1", "anchors": [
        {"item_id": "a", "judge_score": 3.0, "reference_score": 4.0},
        {"item_id": "b", "judge_score": 2.0, "reference_score": 2.0}
    ]});
    assert_eq!(app.json("POST", "/v1/anchors", &first).await.status, 200);
    let changed = json!({"judge": "j1", "rubric": "r1", "anchors": [
        {"item_id": "c", "judge_score": 1.0, "reference_score": 1.0},
        {"item_id": "a", "judge_score": 3.5, "reference_score": 4.0},
        {"item_id": "b", "judge_score": 2.0, "reference_score": 2.0}
    ]});
    let res = app.json("POST", "/v1/anchors", &changed).await;
    let details = assert_error(&res, 409, "conflict");
    assert_eq!(details.len(), 1);
    assert_eq!(details[0]["row"], 2);
    assert!(details[0]["problem"].as_str().unwrap().contains("\"a\""));
    // The new item "c" was not stored either.
    assert_eq!(app.cell_count("j1", "r1").await, Some(2));

    let res = app.json("POST", "/v1/anchors?replace=true", &changed).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(
        (
            res.body["inserted"].clone(),
            res.body["unchanged"].clone(),
            res.body["replaced"].clone()
        ),
        (json!(1), json!(1), json!(1))
    );
    let page = app.get("/v1/cells/j1/r1/anchors").await.body;
    assert_eq!(
        page["anchors"][0],
        json!({"item_id": "a", "judge_score": 3.5, "reference_score": 4.0})
    );
    assert_eq!(app.cell_count("j1", "r1").await, Some(3));
}

async fn csv_uploads_span_cells_and_name_bad_rows(backend: Backend) {
    let app = TestApp::new(backend).await;
    let good = "judge,rubric,item_id,judge_score,reference_score\n\
                j1,r1,a,3,4\nj1,r2,a,2.5,1\nj2,r1,\"x, quoted\",4,5\n";
    let res = app.csv("/v1/anchors", good).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["inserted"], 3);
    assert_eq!(res.body["cells"].as_array().unwrap().len(), 3);

    let bad = "item_id,judge,rubric,judge_score,reference_score\n\
               b,j1,r1,3,4\nc,j1,r1,,4\nd,j1,r1,inf,4\nb,j1,r1,3,4\n";
    let res = app.csv("/v1/anchors", bad).await;
    let details = assert_error(&res, 422, "invalid_input");
    let got: Vec<(i64, &str)> = details
        .iter()
        .map(|d| (d["row"].as_i64().unwrap(), d["field"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![(2, "judge_score"), (3, "judge_score"), (4, "item_id")]
    );
    assert_eq!(app.cell_count("j1", "r1").await, Some(1));
}

async fn rubric_scales_bound_reference_scores(backend: Backend) {
    let app = TestApp::new(backend).await;
    let res = app
        .json(
            "PUT",
            "/v1/rubrics/pct",
            &json!({"min": 0, "max": 100, "description": "percent"}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let up = json!({"judge": "j1", "rubric": "pct", "anchors": [{"item_id": "a", "judge_score": 50, "reference_score": 80}]});
    assert_eq!(app.json("POST", "/v1/anchors", &up).await.status, 200);
    // Narrowing the scale below a stored score is refused, and the scale stays.
    let res = app
        .json("PUT", "/v1/rubrics/pct", &json!({"min": 0, "max": 10}))
        .await;
    assert_error(&res, 409, "conflict");
    let rubrics = app.get("/v1/rubrics").await.body;
    assert_eq!(rubrics["rubrics"][0]["max"], 100.0);
    // An inverted scale names the field.
    let res = app
        .json("PUT", "/v1/rubrics/pct", &json!({"min": 5, "max": 1}))
        .await;
    assert_eq!(assert_error(&res, 422, "invalid_input")[0]["field"], "max");
    // A missing field in the body is a 422 too.
    let res = app.json("PUT", "/v1/rubrics/pct", &json!({"min": 5})).await;
    assert_error(&res, 422, "invalid_input");
}

async fn pages_cover_every_anchor_once_and_deletes_count(backend: Backend) {
    let app = TestApp::new(backend).await;
    assert_eq!(
        app.json("POST", "/v1/anchors", &batch("j1", "r1", 25, None))
            .await
            .status,
        200
    );
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/cells/j1/r1/anchors?limit=10&cursor={c}"),
            None => "/v1/cells/j1/r1/anchors?limit=10".to_owned(),
        };
        let page = app.get(&path).await;
        assert_eq!(page.status, 200, "{}", page.body);
        for a in page.body["anchors"].as_array().unwrap() {
            seen.push(a["item_id"].as_str().unwrap().to_owned());
        }
        match page.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    let expected: Vec<String> = (1..=25).map(|i| format!("item-{i:05}")).collect();
    assert_eq!(seen, expected);

    let refused = app.get("/v1/cells/j1/r1/anchors?limit=0").await;
    assert_error(&refused, 422, "invalid_input");
    // A read stores nothing, so its refusal does not say that nothing was stored.
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(!message.contains("stored"), "{message}");
    assert_error(
        &app.get("/v1/cells/j1/r1/anchors?cursor=zz").await,
        422,
        "invalid_input",
    );
    assert_error(
        &app.get("/v1/cells/j1/r1/anchors?limit=abc").await,
        422,
        "invalid_input",
    );

    let del = |id: &str| app.request("DELETE", &format!("/v1/cells/j1/r1/anchors/{id}"));
    let res = app
        .send(del("item-00003").body(axum::body::Body::empty()).unwrap())
        .await;
    assert_eq!(
        (res.status.as_u16(), res.body["anchor_count"].clone()),
        (200, json!(24))
    );
    let res = app
        .send(del("item-00003").body(axum::body::Body::empty()).unwrap())
        .await;
    assert_error(&res, 404, "not_found");
    assert_eq!(app.cell_count("j1", "r1").await, Some(24));
}

/// A small batch into a larger cell looks its items up by id rather than reading the cell
/// (on Postgres through one JSON array of the ids): found unchanged, conflicting or replaced
/// by id, ids with quotes, backslashes, commas and non-ASCII letters included; the cell's count
/// follows what was written.
async fn a_small_batch_into_a_large_cell_finds_its_items_by_id(backend: Backend) {
    let app = TestApp::new(backend).await;
    let id = |i: usize| format!("odd \"{i}\" \\ ü,{i}");
    let row =
        |i: usize, j: f64| json!({"item_id": id(i), "judge_score": j, "reference_score": 3.0});
    let all: Vec<Value> = (0..40).map(|i| row(i, 2.0)).collect();
    let body = |anchors: Vec<Value>| json!({"judge": "j1", "rubric": "r1", "anchors": anchors});
    let res = app.json("POST", "/v1/anchors", &body(all)).await;
    assert_eq!(res.body["inserted"], 40, "{}", res.body);

    let same = body([3, 7, 11, 19].map(|i| row(i, 2.0)).to_vec());
    let res = app.json("POST", "/v1/anchors", &same).await;
    assert_eq!(
        (res.body["inserted"].clone(), res.body["unchanged"].clone()),
        (json!(0), json!(4)),
        "{}",
        res.body
    );
    let changed = body(vec![row(3, 4.0), row(7, 4.5), row(40, 1.0)]);
    let res = app.json("POST", "/v1/anchors", &changed).await;
    let details = assert_error(&res, 409, "conflict");
    let rows: Vec<&Value> = details.iter().map(|d| &d["row"]).collect();
    assert_eq!(rows, [&json!(1), &json!(2)], "{details:?}");
    assert_eq!(app.cell_count("j1", "r1").await, Some(40));

    let res = app.json("POST", "/v1/anchors?replace=true", &changed).await;
    assert_eq!(
        (
            res.body["inserted"].clone(),
            res.body["unchanged"].clone(),
            res.body["replaced"].clone()
        ),
        (json!(1), json!(0), json!(2)),
        "{}",
        res.body
    );
    assert_eq!(app.cell_count("j1", "r1").await, Some(41));
    let page = app.get("/v1/cells/j1/r1/anchors?limit=100").await.body;
    let scores: Vec<f64> = page["anchors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["item_id"] == id(3) || a["item_id"] == id(7))
        .map(|a| a["judge_score"].as_f64().unwrap())
        .collect();
    assert_eq!(scores.len(), 2, "{page}");
    assert!(scores.contains(&4.0) && scores.contains(&4.5), "{scores:?}");
}

on_both_backends!(
    one_bad_row_in_ten_thousand_refuses_the_whole_batch,
    a_small_batch_into_a_large_cell_finds_its_items_by_id,
    a_retried_batch_changes_nothing,
    changed_scores_conflict_unless_replaced,
    csv_uploads_span_cells_and_name_bad_rows,
    rubric_scales_bound_reference_scores,
    pages_cover_every_anchor_once_and_deletes_count,
);
