//! /v1/rank and its sessions over HTTP, on both backends: on an identity version (whose plain
//! estimates are the raw means shifted by one offset, so every difference is the raw one), a
//! run far above two tied runs is ranked first with certainty and the tie is left open; a
//! session's label plan goes to the tied runs only, by id; refusals name the field; sessions
//! bind their looks, labels and runs; the metric counts the answers.

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

/// Opens a ranking session of `rounds` looks on j1/coherence, its labels seeded by `seed`: the
/// session as answered.
async fn open_session(app: &TestApp, rounds: usize, seed: u64) -> Value {
    let res = app
        .json(
            "POST",
            "/v1/rank/sessions",
            &json!({"judge": "j1", "rubric": "coherence", "rounds": rounds, "seed": seed}),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    res.body
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
    // A label plan is for a later look: the looks are planned in a session.
    let open = |rounds: usize| {
        let app = &app;
        async move {
            let id = open_session(app, rounds, 3).await["id"].clone();
            format!("/v1/rank/sessions/{}/looks", id.as_str().unwrap())
        }
    };
    let looks = open(2).await;
    let body = json!({"labels": {"min_gap": 0.05},
    "runs": [
        {"name": "b", "items": items(&shifted(0.0))},
        {"name": "a", "items": items(&shifted(1.0))},
        {"name": "c", "items": items(&shifted(0.001))},
    ]});
    let res = app.json("POST", &looks, &body).await;
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
    // The labels come back, each run's as its plan drew them: the second look uses them (b's
    // and c's plain and labelled answers combined).
    let drawn = |k: usize| -> std::collections::HashSet<String> {
        runs[k]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let with_refs = |d: f64, labelled: &std::collections::HashSet<String>| -> Vec<Value> {
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
    let second = json!({
    "runs": [
        {"name": "b", "items": with_refs(0.0, &drawn(0))},
        {"name": "a", "items": items(&shifted(1.0))},
        {"name": "c", "items": with_refs(0.001, &drawn(1))},
    ]});
    let res = app.json("POST", &looks, &second).await;
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
        json!(short.len()),
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
    // The runs belong to that session now: another session's look at them is refused.
    let again = open(4).await;
    assert_error(&app.json("POST", &again, &body).await, 409, "conflict");
    // With two looks to spare or more and nothing labelled, the plan is a first sample: 20
    // items of each run in an open pair, the same ids. (Other runs: the same scores under
    // other ids, which no session holds.)
    let items = |scores: &[f64]| -> Vec<Value> {
        items(scores)
            .into_iter()
            .map(|mut it| {
                it["id"] = json!(it["id"].as_str().unwrap().replace('p', "q"));
                it
            })
            .collect()
    };
    let four = json!({"labels": {"min_gap": 0.05},
    "runs": [
        {"name": "b", "items": items(&shifted(0.0))},
        {"name": "a", "items": items(&shifted(1.0))},
        {"name": "c", "items": items(&shifted(0.001))},
    ]});
    let res = app.json("POST", &again, &four).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["round"], 1);
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
    // next look, with one look to spare and the same labels, asks (both at one family level,
    // 1 − 0.05/4).
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
    let labelled = json!({"labels": {"min_gap": 0.05},
    "runs": [
        {"name": "b", "items": noisy(0.0, 0)},
        {"name": "a", "items": items(&shifted(1.0))},
        {"name": "c", "items": noisy(0.001, 1)},
    ]});
    let step = app.json("POST", &again, &labelled).await;
    let whole = app.json("POST", &again, &labelled).await;
    assert_eq!(
        (&step.body["round"], &whole.body["round"]),
        (&json!(2), &json!(3))
    );
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
    let bad = json!({"judge": "j1", "rubric": "coherence", "error": "some", "labels": {"min_gap": -1}, "round": 1,
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
        "round",
        "rounds",
        "labels.min_gap",
    ] {
        assert!(fields.contains(&want), "{want} not in {fields:?}");
    }
}

/// A ranking session binds the looks: each look is round k of the planned rounds (its family
/// level 1 − 0.05/rounds), a look must keep every label seen and label only items the
/// session's plans drew, a look past the plan is refused, a refused look spends nothing, the
/// runs it looked at belong to it (a second session's look at them is refused), and a plain
/// /v1/rank says its guarantee is for one look and takes no `round` or `rounds`.
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
    // b is a again but 0.01 higher: the pair stays open, so the plans draw items to label.
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
                "runs": [run("a", 0.0, &[]), run("b", 0.01, &[])]}),
        )
        .await;
    assert_eq!(plain.status, 200, "{}", plain.body);
    assert!(plain.body.get("session").is_none());
    let w = plain.body["warnings"].to_string();
    assert!(
        w.contains("one look") && w.contains("/v1/rank/sessions"),
        "{w}"
    );
    let opened = open_session(&app, 3, 5).await;
    let id = opened["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (opened["looks"].clone(), opened["looks_left"].clone()),
        (json!(0), json!(3))
    );
    let look = |id: String, body: Value| {
        let app = &app;
        async move {
            app.json("POST", &format!("/v1/rank/sessions/{id}/looks"), &body)
                .await
        }
    };
    // Labels no plan drew (the user chose them): 409 naming the run; no look spent.
    let chosen = [(0, 3.0), (1, 2.5), (2, 4.0)];
    let res = look(
        id.clone(),
        json!({"runs": [run("a", 0.0, &chosen), run("b", 0.01, &[])]}),
    )
    .await;
    let d = assert_error(&res, 409, "conflict");
    assert_eq!(d[0]["field"], "runs[0].items", "{d:?}");
    assert!(
        d[0]["problem"].as_str().unwrap().contains("not drawn"),
        "{d:?}"
    );
    let first = look(
        id.clone(),
        json!({"runs": [run("a", 0.0, &[]), run("b", 0.01, &[])],
            "labels": {"min_gap": 0.05}}),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["round"], 1);
    assert_eq!(first.body["rounds"], 3);
    assert!((f(&first.body["family_level"]) - (1.0 - 0.05 / 3.0)).abs() < 1e-12);
    assert_eq!(first.body["session"]["looks"], 1);
    assert_eq!(
        first.body["labels"]["seed"], 5,
        "the session's seed plans the labels"
    );
    assert!(!first.body["warnings"].to_string().contains("one look"));
    // The plan's draw, as positions of a's and b's items (ids p0, p1, ...).
    let drawn = |k: usize| -> Vec<usize> {
        first.body["labels"]["runs"][k]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap()[1..].parse().unwrap())
            .collect()
    };
    let (in_a, in_b) = (drawn(0), drawn(1));
    assert!(
        in_a.len() >= 4 && in_b.len() >= 3,
        "{}",
        first.body["labels"]
    );
    let labels: Vec<(usize, f64)> = in_a[..3].iter().map(|&i| (i, 3.0)).collect();
    let second = look(
        id.clone(),
        json!({"runs": [run("a", 0.0, &labels), run("b", 0.01, &[])]}),
    )
    .await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(second.body["round"], 2);
    assert_eq!(second.body["session"]["labels_seen"], 3);
    // A look that changes one label and drops another: 409 naming run and item; no look spent.
    let changed = [(in_a[0], 3.5), (in_a[2], 3.0), (in_a[3], 3.0)];
    let res = look(
        id.clone(),
        json!({"runs": [run("a", 0.0, &changed), run("b", 0.01, &[])]}),
    )
    .await;
    let d = assert_error(&res, 409, "conflict");
    let text = serde_json::to_string(&d).unwrap();
    assert!(
        text.contains(&format!("item p{}", in_a[0])) && text.contains("labels it 3.5"),
        "{text}"
    );
    assert!(
        text.contains(&format!("item p{}", in_a[1])) && text.contains("without a reference"),
        "{text}"
    );
    assert_eq!(d[0]["field"], "runs[0].items");
    // A bad look is refused whole and spends nothing either.
    let res = look(id.clone(), json!({"runs": [run("a", 0.0, &labels)]})).await;
    assert_error(&res, 422, "invalid_input");
    let got = app.get(&format!("/v1/rank/sessions/{id}")).await;
    assert_eq!(got.body["looks"], 2, "{}", got.body);
    // Another session on the same runs (a user re-asking with a fresh error budget): its look
    // is refused, naming the session that holds them, and spends nothing.
    let other = open_session(&app, 3, 6).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = look(
        other.clone(),
        json!({"runs": [run("a", 0.0, &labels), run("b", 0.01, &[])]}),
    )
    .await;
    assert_error(&res, 409, "conflict");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&id) && message.contains("run \"a\""),
        "{message}"
    );
    assert_eq!(
        app.get(&format!("/v1/rank/sessions/{other}")).await.body["looks"],
        0
    );
    // The third look, with every label and more (of drawn items): round 3 of 3.
    let mut more = labels.clone();
    more.push((in_a[3], 3.3));
    let b_labels: Vec<(usize, f64)> = in_b[..3].iter().map(|&i| (i, 3.1)).collect();
    let third = look(
        id.clone(),
        json!({"runs": [run("a", 0.0, &more), run("b", 0.01, &b_labels)]}),
    )
    .await;
    assert_eq!(third.status, 200, "{}", third.body);
    assert_eq!(third.body["round"], 3);
    assert_eq!(third.body["session"]["looks_left"], 0);
    assert_eq!(third.body["session"]["labels_seen"], 7);
    // Past the plan: refused, saying why.
    let res = look(
        id.clone(),
        json!({"runs": [run("a", 0.0, &more), run("b", 0.01, &b_labels)]}),
    )
    .await;
    assert_error(&res, 409, "conflict");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("planned 3 looks")
    );
    // A plain ranking takes no round or rounds: looks are bound only in a session.
    let d = assert_error(
        &app.json(
            "POST",
            "/v1/rank",
            &json!({"judge": "j1", "rubric": "coherence", "round": 2, "rounds": 2,
                "runs": [run("a", 0.0, &[]), run("b", 0.01, &[])]}),
        )
        .await,
        422,
        "invalid_input",
    );
    let fields: Vec<&str> = d.iter().map(|p| p["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["round", "rounds"], "{d:?}");
    assert!(
        d[0]["problem"]
            .as_str()
            .unwrap()
            .contains("/v1/rank/sessions")
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
