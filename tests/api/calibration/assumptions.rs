//! No silent wrong answer (issue 83), on both backends: the edges where a request departs
//! from what an answer rests on, replayed through the API with known truth. Each is answered
//! right, or refused by row and field, or warned by a stable code that names what is off. The
//! covariate beyond the anchors' range is in `covariates.rs`, beside the version it needs; the
//! panel trained on a member version its members are not served by, in `panels.rs`.

use serde_json::{Value, json};

use super::*;
use crate::common::{Backend, TestApp, assert_error};
use crate::ratings::{run, world};

/// The systems' true ratings in `crate::ratings::world`.
const TRUTH: [(&str, f64); 4] = [("s0", 0.0), ("s1", 1.0), ("s2", 2.0), ("s3", -1.0)];

fn codes(answer: &Value) -> Vec<&str> {
    answer["warnings"]
        .as_array()
        .unwrap_or_else(|| panic!("no warnings list in {answer}"))
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect()
}

fn warning<'a>(answer: &'a Value, code: &str) -> &'a Value {
    answer["warnings"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["code"] == code))
        .unwrap_or_else(|| panic!("no {code} in {}", answer["warnings"]))
}

fn rating(answer: &Value, system: &str) -> (f64, f64, f64) {
    let s = answer["systems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["system"] == system)
        .unwrap_or_else(|| panic!("{system} is not rated: {answer}"));
    (
        s["rating"].as_f64().unwrap(),
        s["interval"][0].as_f64().unwrap(),
        s["standard_error"].as_f64().unwrap(),
    )
}

/// Each row with its verdicts turned: a for b and b for a, in both orders.
fn flipped(rows: &[Value]) -> Vec<Value> {
    let turn = |v: &Value| match v.as_str() {
        Some("a") => json!("b"),
        Some("b") => json!("a"),
        _ => v.clone(),
    };
    rows.iter()
        .map(|r| {
            let mut r = r.clone();
            r["verdict"] = turn(&r["verdict"]);
            r["verdict_swapped"] = turn(&r["verdict_swapped"]);
            r
        })
        .collect()
}

/// A pairwise cell's ratings where the run departs from the labelled comparisons: without
/// the swapped verdict the map reads, of all ties, with systems nobody labelled or the judge
/// puts beyond every comparison, and labelled by one rater.
async fn ratings_say_where_the_run_departs_from_the_labels(backend: Backend) {
    let app = TestApp::new(backend).await;
    let anchors = app
        .json("POST", "/v1/comparisons", &run(world(800, 10_000, 800, 7)))
        .await;
    assert_eq!(anchors.status, 200, "{}", anchors.body);
    let rate = |body: Value| {
        let app = &app;
        async move {
            let res = app.json("POST", "/v1/ratings", &body).await;
            assert_eq!(res.status, 200, "{}", res.body);
            res.body
        }
    };

    // A run drawn like the labels says nothing, and the map reads both orders (the judge
    // favours the answer shown first).
    let rows = world(4_000, 0, 0, 11);
    let plain = rate(run(rows.clone())).await;
    assert_eq!(codes(&plain), Vec::<&str>::new(), "{}", plain["warnings"]);
    assert!(
        plain["calibration"]["chosen"]
            .as_str()
            .unwrap()
            .starts_with("both orders"),
        "{}",
        plain["calibration"]
    );

    // The same run without verdict_swapped: rated by the map on the first verdict alone (not
    // as if the swapped verdict were missing at random, which shrank every rating toward 0),
    // and said. Every rating within three standard errors of its truth.
    let first_only: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().unwrap().remove("verdict_swapped");
            r
        })
        .collect();
    let answer = rate(run(first_only)).await;
    let w = warning(&answer, "input_missing");
    assert_eq!(w["field"], "comparisons.verdict_swapped", "{w}");
    assert!(
        answer["calibration"]["chosen"]
            .as_str()
            .unwrap()
            .starts_with("verdict"),
        "{}",
        answer["calibration"]
    );
    for (system, truth) in TRUTH {
        let (r, _, se) = rating(&answer, system);
        assert!(
            (r - truth).abs() <= 3.0 * se.max(1e-9) || system == "s0",
            "{system}: {r} ± {se} against {truth}"
        );
    }

    // A run of all ties is unlike the labels.
    let ties: Vec<Value> = rows[..400]
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r["verdict"] = json!("tie");
            r["verdict_swapped"] = json!("tie");
            r
        })
        .collect();
    let answer = rate(run(ties)).await;
    let w = warning(&answer, "run_unlike_labelled");
    assert!(
        w["message"].as_str().unwrap().contains("\"tie\" in 100%"),
        "{w}"
    );

    // Two systems no label compares: s4, judged at random, and s5, which the judge calls the
    // winner of all 300 of its comparisons.
    let mut wider = rows[..2_000].to_vec();
    for i in 0..300 {
        let other = TRUTH[i % 4].0;
        let call = if i % 2 == 0 { "a" } else { "b" };
        wider.push(json!({"item_id": format!("n4-{i}"), "a": "s4", "b": other,
            "verdict": call, "verdict_swapped": call}));
        wider.push(json!({"item_id": format!("n5-{i}"), "a": "s5", "b": other,
            "verdict": "a", "verdict_swapped": "a"}));
    }
    let answer = rate(run(wider)).await;
    assert_eq!(
        warning(&answer, "unlabelled_systems")["systems"],
        json!(["s4", "s5"])
    );
    assert_eq!(
        warning(&answer, "unbounded_systems")["systems"],
        json!(["s5"])
    );

    // A mirrored judge (every verdict of a re-judge turned, a for b) is a change, though the
    // mean preference hardly moves; the check says why.
    trained(&app, "pair-judge", json!({"method": "auto"})).await;
    let labelled = world(800, 10_000, 800, 7);
    let items: Vec<Value> = flipped(&labelled[..400])
        .iter()
        .map(|r| json!({"item_id": r["item_id"], "verdict": r["verdict"], "verdict_swapped": r["verdict_swapped"]}))
        .collect();
    let check = app
        .json(
            "POST",
            "/v1/cells/pair-judge/overall/checks",
            &json!({"items": items}),
        )
        .await;
    assert_eq!(check.status, 200, "{}", check.body);
    assert_eq!(check.body["changed"], true, "{}", check.body);
    assert_eq!(codes(&check.body), ["judge_reversed"]);
}

/// Every labelled comparison one named rater's: the interval cannot be a point.
async fn one_rater_is_said_and_the_interval_keeps_its_width(backend: Backend) {
    let app = TestApp::new(backend).await;
    let solo =
        |rows: Vec<Value>| json!({"judge": "pair-judge", "rubric": "solo", "comparisons": rows});
    let labelled: Vec<Value> = world(600, 10_000, 600, 7)
        .into_iter()
        .map(|mut r| {
            r["rater"] = json!("ann");
            r
        })
        .collect();
    let res = app.json("POST", "/v1/comparisons", &solo(labelled)).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let res = app
        .json("POST", "/v1/ratings", &solo(world(2_000, 0, 0, 11)))
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(codes(&res.body), ["single_rater"]);
    for (system, _) in &TRUTH[1..] {
        let (_, _, se) = rating(&res.body, system);
        assert!(se > 0.02, "{system}: standard error {se}");
    }
}

/// A score cell: a mirrored re-score is a change; a repeat of 99 is refused as a score of 99
/// is; lenient verdicts are refused whole.
async fn a_mirror_is_a_change_and_inputs_pass_one_door(backend: Backend) {
    let app = TestApp::new(backend).await;
    let rows = anchors(300, 0.5, 0.8);
    stored(
        &app,
        json!({"judge": "mj", "rubric": "r1", "anchors": rows}),
    )
    .await;
    trained(&app, "mj", json!({"method": "bayes", "options": quick()})).await;
    let check = |mirror: bool| {
        let items: Vec<Value> = rows
            .iter()
            .map(|r| {
                let j = r["judge_score"].as_f64().unwrap();
                json!({"item_id": r["item_id"], "judge_score": if mirror { 6.0 - j } else { j }})
            })
            .collect();
        let app = &app;
        async move {
            let res = app
                .json("POST", "/v1/cells/mj/r1/checks", &json!({"items": items}))
                .await;
            assert_eq!(res.status, 200, "{}", res.body);
            res.body
        }
    };
    // Ratings of a cell of scores say what the cell holds.
    let res = app
        .json(
            "POST",
            "/v1/ratings",
            &json!({"judge": "mj", "rubric": "r1", "comparisons": [
                {"item_id": "x", "a": "m1", "b": "m2", "verdict": "a"}]}),
        )
        .await;
    assert_error(&res, 409, "conflict");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("holds judge scores"), "{message}");

    let same = check(false).await;
    assert_eq!(same["changed"], false, "{same}");
    assert_eq!(codes(&same), Vec::<&str>::new());
    // 6 − score keeps the mean (the scores are spread evenly over 1–5) and every band by the
    // mean of the two scores; the order reverses.
    let mirrored = check(true).await;
    assert_eq!(mirrored["changed"], true, "{mirrored}");
    assert_eq!(mirrored["verdict"], "refit", "{mirrored}");
    assert!(mirrored["raw"]["rank_correlation"].as_f64().unwrap() < -0.99);
    assert_eq!(codes(&mirrored), ["judge_reversed"]);

    // A repeat of 99 on a judge scoring 1–5 is refused by row and field, as a score of 99 is.
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "mj", "rubric": "r1", "items": [
                {"score": 3.0, "repeats": [3.0]}, {"score": 4.0, "repeats": [99.0]}]}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(named(&details), [(2, "repeats")], "{}", res.body);
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "mj", "rubric": "r1", "scores": [3.0, 99.0]}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(named(&details), [(2, "scores")], "{}", res.body);
    // Every estimating answer carries its warnings as a list of codes.
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "mj", "rubric": "r1", "scores": [3.0, 4.0]}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert!(res.body["warnings"].is_array(), "{}", res.body);
    let res = correct(
        &app,
        json!({"judge": "mj", "rubric": "r1", "scores": [3.0]}),
    )
    .await;
    assert_eq!(res.body["warnings"], json!([]), "{}", res.body);

    // Verdicts as the spec allows them, and nothing else: the batch is refused whole, each
    // row named, nothing stored.
    let lenient: Vec<Value> = ["A", "Tie", "1", "-0", "1e0"]
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"item_id": format!("v{i}"), "a": "m1", "b": "m2", "verdict": v}))
        .chain([json!({"item_id": "ok", "a": "m1", "b": "m2", "verdict": "a"})])
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/comparisons",
            &json!({"judge": "pj", "rubric": "r1", "comparisons": lenient}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(
        named(&details),
        (1..=5).map(|r| (r, "verdict")).collect::<Vec<_>>(),
        "{}",
        res.body
    );
    assert_eq!(app.cell_count("pj", "r1").await, None);
    let res = app
        .csv(
            "/v1/comparisons",
            "judge,rubric,item_id,a,b,verdict\npj,r1,c1,m1,m2,0\npj,r1,c2,m1,m2,1\n",
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert!(
        details[0]["problem"]
            .as_str()
            .unwrap()
            .contains("ambiguous"),
        "{details:?}"
    );
    assert_eq!(app.cell_count("pj", "r1").await, None);
}

on_both_backends!(
    ratings_say_where_the_run_departs_from_the_labels,
    one_rater_is_said_and_the_interval_keeps_its_width,
    a_mirror_is_a_change_and_inputs_pass_one_door,
);
