//! /v1/rank over HTTP, on both backends: on an identity version (whose plain estimates are the
//! raw means shifted by one offset, so every difference is the raw one), a run far above two
//! tied runs is ranked first with certainty and the tie is left open; the label plan goes to
//! the tied runs only, by id; refusals name the field; the metric counts the answer.

use serde_json::{Value, json};

use super::*;
use crate::common::{Backend, TestApp, assert_error};

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn items(scores: &[f64]) -> Vec<Value> {
    scores
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"id": format!("p{i}"), "score": s}))
        .collect()
}

async fn a_clear_leader_is_ranked_first_and_labels_go_to_the_tie(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j1", "coherence", 120, 0.5, 0.8).await;
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "identity"})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let base: Vec<f64> = (0..400)
        .map(|i| 2.0 + ((i * 37) % 100) as f64 / 50.0)
        .collect();
    let shifted = |d: f64| -> Vec<f64> { base.iter().map(|s| s + d).collect() };
    let body = json!({"judge": "j1", "rubric": "coherence", "rounds": 2,
    "labels": {"min_gap": 0.05, "seed": 3},
    "runs": [
        {"name": "b", "items": items(&shifted(0.0))},
        {"name": "a", "items": items(&shifted(1.0))},
        {"name": "c", "items": items(&shifted(0.001))},
    ]});
    let res = app.json("POST", "/v1/rank", &body).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let b = &res.body;
    assert_eq!(b["order"], json!(["a", "c", "b"]), "{b}");
    assert_eq!(b["top"], json!(["a"]), "{b}");
    assert!((f(&b["family_level"]) - 0.975).abs() < 1e-12, "{b}");
    // Each difference is the raw one: the identity's offset cancels.
    let pairs = b["pairs"].as_array().unwrap();
    let ab = pairs
        .iter()
        .find(|p| p["a"] == "b" && p["b"] == "a")
        .unwrap();
    assert!((f(&ab["difference"]) + 1.0).abs() < 1e-9, "{ab}");
    assert_eq!(ab["higher"], "a");
    let bc = pairs
        .iter()
        .find(|p| p["a"] == "b" && p["b"] == "c")
        .unwrap();
    assert_eq!(bc["resolved"], false, "{bc}");
    // Three pairs of independent normal errors: the max-t critical value lies between the
    // single pair's 97.5% point (2.24) and Bonferroni's over three (2.64).
    let c = f(&b["critical"]);
    assert!((2.24..2.64).contains(&c), "critical {c}");
    // The pair's standard error is the two runs' residual noise over their 400 items (the
    // anchors' offset, shared, cancels), within the draws' Monte Carlo error (20,000 draws:
    // about 1%).
    let se = f(&bc["standard_error"]);
    let own = |k: usize| f(&b["runs"][k]["variance"]["sampling"]);
    assert!((se / (own(0) + own(2)).sqrt() - 1.0).abs() < 0.03, "{se}");
    let rank = |k: usize| b["runs"][k]["rank"].clone();
    assert_eq!(
        (rank(1), rank(0), rank(2)),
        (json!([1, 1]), json!([2, 3]), json!([2, 3]))
    );
    // The plan labels the tied runs only, the same ids in both.
    let plan = &b["labels"];
    assert_eq!(plan["next_round"], 2);
    assert_eq!(plan["open_pairs"], 1, "{plan}");
    let runs = plan["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["b", "c"], "{plan}");
    // On the same items: the run with fewer labels labels a prefix of the other's.
    let (x, y) = (
        runs[0]["items"].as_array().unwrap(),
        runs[1]["items"].as_array().unwrap(),
    );
    let (short, long) = if x.len() <= y.len() { (x, y) } else { (y, x) };
    assert_eq!(short[..], long[..short.len()], "{plan}");
    assert_eq!(plan["paired"], true);
    assert!(f(&plan["total"]) >= 20.0, "{plan}");
    // The labels come back: the second look uses them (b's and c's plain and labelled
    // answers combined).
    let labelled: std::collections::HashSet<String> = runs[0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let with_refs = |d: f64| -> Vec<Value> {
        items(&shifted(d))
            .into_iter()
            .map(|mut it| {
                if labelled.contains(it["id"].as_str().unwrap()) {
                    it["reference"] = json!(f(&it["score"]));
                }
                it
            })
            .collect()
    };
    let second = json!({"judge": "j1", "rubric": "coherence", "rounds": 2, "round": 2,
    "runs": [
        {"name": "b", "items": with_refs(0.0)},
        {"name": "a", "items": items(&shifted(1.0))},
        {"name": "c", "items": with_refs(0.001)},
    ]});
    let res = app.json("POST", "/v1/rank", &second).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["runs"][0]["path"], "combined", "{}", res.body);
    assert_eq!(res.body["runs"][1]["path"], "plain");
    // b and c labelled the same items: their pair is answered on them (its own labelled
    // answer on the per-item differences), a pair with the unlabelled a is not.
    let pair = |x: &str, y: &str| {
        res.body["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["a"] == x && p["b"] == y)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        pair("b", "c")["labelled"],
        json!(labelled.len()),
        "{}",
        res.body
    );
    assert_eq!(pair("b", "a")["labelled"], 0);
    // The combined answer is never less sure than either of its parts: b's interval is no
    // wider than its plain one from the first look.
    let width = |r: &Value| f(&r["interval"][1]) - f(&r["interval"][0]);
    assert!(
        width(&res.body["runs"][0]) <= width(&b["runs"][0]) * 1.01,
        "{} vs {}",
        res.body["runs"][0],
        b["runs"][0]
    );
    let adds = |plan: &Value| -> Vec<(String, u64)> {
        plan["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_owned(),
                    r["add"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    // With two looks to spare and nothing labelled, the plan is a first sample: 20 items of
    // each run in an open pair, the same ids.
    let mut three = body.clone();
    three["rounds"] = json!(3);
    let res = app.json("POST", "/v1/rank", &three).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let pilot = &res.body["labels"];
    assert_eq!(pilot["pilot"], true, "{pilot}");
    assert_eq!(
        adds(pilot),
        [("b".to_owned(), 20), ("c".to_owned(), 20)],
        "{pilot}"
    );
    // With the first sample back (references that differ from the scores by up to ±0.4, not
    // alike in b and c, so that the tie stays open) and two looks to spare, a step: a tenth
    // of what the whole plan asks of each run (at least 10), the whole plan being what the
    // next look, with one look to spare, would ask (both at one family level, 1 − 0.05/4).
    let sampled: std::collections::HashSet<String> = pilot["runs"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let noisy = |d: f64, k: usize| -> Vec<Value> {
        items(&shifted(d))
            .into_iter()
            .enumerate()
            .map(|(i, mut it)| {
                if sampled.contains(it["id"].as_str().unwrap()) {
                    let e = 0.4 * (((i * 53 + 7 * k) % 17) as f64 / 8.0 - 1.0);
                    it["reference"] = json!(f(&it["score"]) + e);
                }
                it
            })
            .collect()
    };
    let at = |round: usize| {
        json!({"judge": "j1", "rubric": "coherence", "rounds": 4, "round": round,
        "labels": {"min_gap": 0.05, "seed": 3},
        "runs": [
            {"name": "b", "items": noisy(0.0, 0)},
            {"name": "a", "items": items(&shifted(1.0))},
            {"name": "c", "items": noisy(0.001, 1)},
        ]})
    };
    let (step, whole) = (at(2), at(3));
    let step = app.json("POST", "/v1/rank", &step).await;
    let whole = app.json("POST", "/v1/rank", &whole).await;
    assert_eq!(step.status, 200, "{}", step.body);
    assert_eq!(whole.status, 200, "{}", whole.body);
    let (step, whole) = (&step.body["labels"], &whole.body["labels"]);
    assert_eq!(
        (&step["step"], &step["pilot"]),
        (&json!(true), &json!(false))
    );
    assert_eq!(whole["step"], false, "{whole}");
    let expected: Vec<(String, u64)> = adds(whole)
        .into_iter()
        .filter_map(|(name, a)| match (a as f64 / 10.0).round() as u64 {
            0 => None,
            x => Some((name, x.max(10).min(a))),
        })
        .collect();
    assert!(!expected.is_empty(), "{whole}");
    assert_eq!(adds(step), expected, "{step} vs {whole}");
    assert_eq!(step["targets_reached"], whole["targets_reached"]);
    let counted = metrics(&app).await;
    assert_eq!(
        metric(
            &counted,
            "judgecal_estimates_total{judge=\"j1\",kind=\"rank\",rubric=\"coherence\"}"
        ),
        Some(5.0)
    );
}

async fn ranking_requests_are_refused_whole_naming_the_field(backend: Backend) {
    let app = TestApp::new(backend).await;
    let one =
        json!({"judge": "j1", "rubric": "coherence", "runs": [{"name": "a", "scores": [3.0]}]});
    let d = assert_error(
        &app.json("POST", "/v1/rank", &one).await,
        422,
        "invalid_input",
    );
    assert_eq!(d[0]["field"], "runs", "{d:?}");
    let bad = json!({"judge": "j1", "rubric": "coherence", "error": "some", "labels": {"min_gap": -1},
        "runs": [{"name": "a", "scores": [3.0]}, {"name": "a", "scores": [f64::MAX, 2.0], "group": "no spaces"}]});
    let d = assert_error(
        &app.json("POST", "/v1/rank", &bad).await,
        422,
        "invalid_input",
    );
    let fields: Vec<&str> = d.iter().map(|p| p["field"].as_str().unwrap()).collect();
    for want in [
        "runs[1].name",
        "runs[1].group",
        "error",
        "rounds",
        "labels.min_gap",
    ] {
        assert!(fields.contains(&want), "{want} not in {fields:?}");
    }
}

/// A ranking session binds the looks: each look is round k of the planned rounds (its family
/// level 1 − 0.05/rounds), a look must keep every label seen, a look past the plan is refused,
/// a refused look spends nothing, and a plain /v1/rank says its guarantee is for one look.
async fn a_ranking_session_binds_its_looks_and_labels(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j1", "coherence", 120, 0.5, 0.8).await;
    finished(
        &app,
        &train(&app, "j1", json!({"method": "identity"})).await,
    )
    .await;
    let base: Vec<f64> = (0..200)
        .map(|i| 2.0 + ((i * 37) % 100) as f64 / 50.0)
        .collect();
    let run = |name: &str, d: f64, labels: &[(usize, f64)]| {
        let mut it = items(&base.iter().map(|s| s + d).collect::<Vec<_>>());
        for &(k, y) in labels {
            it[k]["reference"] = json!(y);
        }
        json!({"name": name, "items": it})
    };
    let plain = app
        .json(
            "POST",
            "/v1/rank",
            &json!({"judge": "j1", "rubric": "coherence",
                "runs": [run("a", 0.0, &[]), run("b", 0.5, &[])]}),
        )
        .await;
    assert_eq!(plain.status, 200, "{}", plain.body);
    assert!(plain.body.get("session").is_none());
    let w = plain.body["warnings"].to_string();
    assert!(
        w.contains("one look") && w.contains("/v1/rank/sessions"),
        "{w}"
    );
    let open = app
        .json(
            "POST",
            "/v1/rank/sessions",
            &json!({"judge": "j1", "rubric": "coherence", "rounds": 2, "seed": 5}),
        )
        .await;
    assert_eq!(open.status, 201, "{}", open.body);
    let id = open.body["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (open.body["looks"].clone(), open.body["looks_left"].clone()),
        (json!(0), json!(2))
    );
    let look = |body: Value| {
        let (app, id) = (&app, id.clone());
        async move {
            app.json("POST", &format!("/v1/rank/sessions/{id}/looks"), &body)
                .await
        }
    };
    let labels = [(0, 3.0), (1, 2.5), (2, 4.0)];
    let first = look(json!({"runs": [run("a", 0.0, &labels), run("b", 0.5, &[])],
        "labels": {"min_gap": 0.05}}))
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["round"], 1);
    assert_eq!(first.body["rounds"], 2);
    assert!((f(&first.body["family_level"]) - 0.975).abs() < 1e-12);
    assert_eq!(first.body["session"]["looks"], 1);
    assert_eq!(first.body["session"]["labels_seen"], 3);
    assert_eq!(
        first.body["labels"]["seed"], 5,
        "the session's seed plans the labels"
    );
    assert!(!first.body["warnings"].to_string().contains("one look"));
    // A look that changes one label and drops another: 409 naming run and item; no look spent.
    let changed = [(0, 3.5), (2, 4.0), (3, 3.0)];
    let res = look(json!({"runs": [run("a", 0.0, &changed), run("b", 0.5, &[])]})).await;
    let d = assert_error(&res, 409, "conflict");
    let text = serde_json::to_string(&d).unwrap();
    assert!(
        text.contains("item p0") && text.contains("labels it 3.5"),
        "{text}"
    );
    assert!(
        text.contains("item p1") && text.contains("without a reference"),
        "{text}"
    );
    assert_eq!(d[0]["field"], "runs[0].items");
    // A bad look is refused whole and spends nothing either.
    let res = look(json!({"runs": [run("a", 0.0, &labels)]})).await;
    assert_error(&res, 422, "invalid_input");
    let got = app.get(&format!("/v1/rank/sessions/{id}")).await;
    assert_eq!(got.body["looks"], 1, "{}", got.body);
    // The second look, with every label and more: round 2 of 2.
    let more = [(0, 3.0), (1, 2.5), (2, 4.0), (3, 3.3)];
    let b_labels = [(0, 3.6), (1, 3.1), (2, 3.9)];
    let second = look(json!({"runs": [run("a", 0.0, &more), run("b", 0.5, &b_labels)]})).await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(second.body["round"], 2);
    assert_eq!(second.body["session"]["looks_left"], 0);
    assert_eq!(second.body["session"]["labels_seen"], 7);
    // Past the plan: refused, saying why.
    let res = look(json!({"runs": [run("a", 0.0, &more), run("b", 0.5, &b_labels)]})).await;
    assert_error(&res, 409, "conflict");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("planned 2 looks")
    );
    // A session on a cell with no calibrator is refused before any look.
    let untrained = json!({"judge": "j9", "rubric": "coherence", "rounds": 2});
    assert_error(
        &app.json("POST", "/v1/rank/sessions", &untrained).await,
        404,
        "not_found",
    );
    // Unknown and malformed sessions.
    let none = "00000000-0000-4000-8000-000000000000";
    assert_error(
        &app.get(&format!("/v1/rank/sessions/{none}")).await,
        404,
        "not_found",
    );
    assert_error(
        &app.get("/v1/rank/sessions/nope").await,
        422,
        "invalid_input",
    );
    let d = assert_error(
        &app.json(
            "POST",
            "/v1/rank/sessions",
            &json!({"judge": "j1", "rubric": "coherence", "rounds": 11, "error": "x",
                "seed": u64::MAX}),
        )
        .await,
        422,
        "invalid_input",
    );
    let fields: Vec<&str> = d.iter().map(|p| p["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["rounds", "error", "seed"]);
}

on_both_backends!(
    a_clear_leader_is_ranked_first_and_labels_go_to_the_tie,
    ranking_requests_are_refused_whole_naming_the_field,
    a_ranking_session_binds_its_looks_and_labels,
);
