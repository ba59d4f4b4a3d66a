//! /v1/estimate and /v1/compare over HTTP, on both backends: answers with known values (an
//! identity version's estimate is the raw mean plus the anchors' mean residual; a fully
//! labelled run's estimate is its reference mean, exactly), pairing, the support check,
//! planning, refusals that name the field, and the metric.

use serde_json::{Value, json};

use super::*;
use crate::common::{Backend, TestApp, assert_error};

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn var(xs: &[f64]) -> f64 {
    let m = mean(xs);
    xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() as f64 - 1.0)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// An app whose cell j1/coherence has 120 anchors and an identity version.
async fn identity_version(backend: Backend) -> TestApp {
    let app = TestApp::new(backend).await;
    upload(&app, "j1", "coherence", 120, 0.5, 0.8).await;
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "identity"})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    app
}

async fn an_identity_estimate_is_the_raw_mean_shifted_by_the_anchors_residual(backend: Backend) {
    let app = identity_version(backend).await;
    // What the anchors say: reference − judge.
    let residuals: Vec<f64> = anchors(120, 0.5, 0.8)
        .iter()
        .map(|a| f(&a["reference_score"]) - f(&a["judge_score"]))
        .collect();
    let scores: Vec<f64> = (0..400).map(|i| 1.5 + 3.0 * (i as f64) / 400.0).collect();
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "scores": scores}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let b = &res.body;
    assert_eq!(
        (b["method"].clone(), b["path"].clone()),
        (json!("identity"), json!("plain"))
    );
    assert_eq!(b["corrector_term"], "anchor_offset");
    let expected = mean(&scores) + mean(&residuals);
    assert!((f(&b["estimate"]) - expected).abs() < 1e-9, "{b}");
    // Its variance: the anchors' residual variance over 120 (the offset) and over 400 (the
    // run's own noise).
    let v = var(&residuals);
    assert!(
        (f(&b["variance"]["corrector"]) - v / 120.0).abs() < 1e-12,
        "{b}"
    );
    assert!(
        (f(&b["variance"]["sampling"]) - v / 400.0).abs() < 1e-12,
        "{b}"
    );
    let half = 1.959964 * (v / 120.0 + v / 400.0).sqrt();
    assert!((f(&b["interval"][1]) - expected - half).abs() < 1e-5, "{b}");
    assert_eq!(b["support"]["extrapolated"], false);
    // The anchors name no groups: the one thing to know is that system-specific bias is not
    // accounted for.
    let warnings = b["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{b}");
    assert_eq!(warnings[0]["code"], "groups_unmeasured", "{b}");
    assert!(
        warnings[0]["message"]
            .as_str()
            .unwrap()
            .contains("fewer than two groups"),
        "{b}"
    );
    assert_eq!(b["group"]["term"], "unmeasured", "{b}");

    // Every item labelled: PPI's estimate is the reference mean itself, with no variance.
    let items: Vec<Value> = scores
        .iter()
        .enumerate()
        .map(|(i, &s)| json!({"id": format!("p{i}"), "score": s, "reference": s + 0.25}))
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "items": items, "level": 0.9}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let b = &res.body;
    assert_eq!(
        (b["path"].clone(), b["labelled"].clone()),
        (json!("labelled"), json!(400))
    );
    assert!(
        (f(&b["estimate"]) - (mean(&scores) + 0.25)).abs() < 1e-9,
        "{b}"
    );
    assert!(f(&b["variance"]["total"]).abs() < 1e-12, "{b}");
    // The transport check: the raw judge is off by exactly 0.25 on this run.
    assert!(
        (f(&b["transport"]["mean_residual"]) - 0.25).abs() < 1e-9,
        "{b}"
    );
    assert_eq!(b["level"], 0.9);

    // Paired runs: B is A shifted by 1 on every item; over the population of prompts the
    // offset cancels in the difference, which is exactly 1 with no variance at all.
    let run = |shift: f64| -> Vec<Value> {
        scores
            .iter()
            .enumerate()
            .map(|(i, &s)| json!({"id": format!("p{i}"), "score": s + shift}))
            .collect()
    };
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j1", "rubric": "coherence", "a": {"items": run(1.0)}, "b": {"items": run(0.0)}, "estimand": "population"}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let b = &res.body;
    assert_eq!(
        (b["paired"].clone(), b["pairs"].clone()),
        (json!(true), json!(400))
    );
    assert_eq!(b["estimand"], "population");
    assert!((f(&b["difference"]) - 1.0).abs() < 1e-9, "{b}");
    assert!(f(&b["variance"]["total"]).abs() < 1e-12, "{b}");
    assert!(f(&b["p_value"]) < 1e-9, "{b}");
    // The runs' own difference (the default): what labelling every item of both runs would
    // show still carries each run's residual noise, paired or not, v/400 each.
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j1", "rubric": "coherence", "a": {"items": run(1.0)}, "b": {"items": run(0.0)}}),
        )
        .await;
    let b = &res.body;
    assert_eq!(
        (b["estimand"].clone(), b["paired"].clone()),
        (json!("runs"), json!(true)),
        "{b}"
    );
    assert!(
        (f(&b["variance"]["sampling"]) - 2.0 * v / 400.0).abs() < 1e-12,
        "{b}"
    );
    // Unpaired (bare scores), the runs' noise adds up and the interval is wide.
    let bare = |shift: f64| scores.iter().map(|s| s + shift).collect::<Vec<_>>();
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j1", "rubric": "coherence", "a": {"scores": bare(0.02)}, "b": {"scores": bare(0.0)}}),
        )
        .await;
    let b = &res.body;
    assert_eq!(b["paired"], false, "{b}");
    assert!(
        (f(&b["variance"]["sampling"]) - 2.0 * v / 400.0).abs() < 1e-12,
        "{b}"
    );
    // 0.02 apart with a standard error of √(2·v/400) ≈ 0.026: far from significant, and the
    // interval covers 0.
    assert!(f(&b["p_value"]) > 0.3, "{b}");
    assert!(
        f(&b["interval"][0]) < 0.0 && f(&b["interval"][1]) > 0.02,
        "{b}"
    );
    let counted = metrics(&app).await;
    assert_eq!(
        metric(
            &counted,
            "judgecal_estimates_total{judge=\"j1\",kind=\"estimate\",rubric=\"coherence\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        metric(
            &counted,
            "judgecal_estimates_total{judge=\"j1\",kind=\"compare\",rubric=\"coherence\"}"
        ),
        Some(3.0)
    );
}

async fn a_bayes_estimate_is_the_mean_correction_with_its_posterior_term(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j1", "coherence", 150, 0.5, 0.8).await;
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let scores: Vec<f64> = (0..300).map(|i| 2.0 + 2.0 * (i as f64) / 300.0).collect();
    let corrected = correct(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "scores": scores}),
    )
    .await;
    let corrected: Vec<f64> = corrected.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| f(&r["corrected"]))
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "scores": scores, "target_half_width": 0.001}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let b = &res.body;
    assert_eq!(b["corrector_term"], "posterior");
    assert!((f(&b["estimate"]) - mean(&corrected)).abs() < 1e-9, "{b}");
    assert!(f(&b["variance"]["corrector"]) > 0.0, "{b}");
    // ±0.001 is narrower than 300 items' own noise allows.
    assert_eq!(b["plan"]["outcome"], "run_size", "{b}");
    // A generous target is met already.
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "scores": scores, "target_half_width": 1.0}),
        )
        .await;
    assert_eq!(res.body["plan"]["outcome"], "reached", "{}", res.body);

    // Scores far above the anchors' range: the support check says so.
    let high: Vec<f64> = (0..100).map(|i| if i < 20 { 7.0 } else { 3.0 }).collect();
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "scores": high}),
        )
        .await;
    let b = &res.body;
    assert_eq!(b["support"]["extrapolated"], true, "{b}");
    assert!(
        (f(&b["support"]["outside_share"]) - 0.2).abs() < 1e-12,
        "{b}"
    );
    assert!(
        b["warnings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("20.0% of the judge scores"),
        "{b}"
    );

    // The same run twice, paired: no difference, and Pr(A > B) is a coin flip.
    let items: Vec<Value> = scores
        .iter()
        .enumerate()
        .map(|(i, &s)| json!({"id": format!("p{i}"), "score": s, "cluster": format!("c{}", i / 3)}))
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j1", "rubric": "coherence", "a": {"items": items}, "b": {"items": items}}),
        )
        .await;
    let b = &res.body;
    assert_eq!(res.status, 200, "{b}");
    assert_eq!(
        (b["paired"].clone(), b["difference"].clone()),
        (json!(true), json!(0.0)),
        "{b}"
    );
    assert!((f(&b["prob_a_greater"]) - 0.5).abs() < 1e-6, "{b}");
}

async fn run_level_requests_are_refused_whole_naming_the_field(backend: Backend) {
    let app = TestApp::new(backend).await;
    // No version for the cell: 404 saying how to get one.
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "scores": [3.0]}),
        )
        .await;
    assert_error(&res, 404, "not_found");
    let bad = json!({
        "judge": "j1", "rubric": "coherence", "level": 1.5,
        "items": [
            {"id": "x", "score": 3.0, "reference": 3.5},
            {"id": "x", "score": 2.0},
            {"score": 2.0, "reference": 2.5},
        ]
    });
    let d = assert_error(
        &app.json("POST", "/v1/estimate", &bad).await,
        422,
        "invalid_input",
    );
    let named: Vec<(Value, Value)> = d
        .iter()
        .map(|p| (p["row"].clone(), p["field"].clone()))
        .collect();
    for want in [
        (json!(2), json!("id")),
        (json!(3), json!("id")),
        (Value::Null, json!("reference")),
        (Value::Null, json!("level")),
    ] {
        assert!(named.contains(&want), "{want:?} not in {named:?}");
    }
    let d = assert_error(
        &app.json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j1", "rubric": "coherence", "a": {"scores": []}, "b": {"items": [{"score": 1.0, "cluster": ""}]}}),
        )
        .await,
        422,
        "invalid_input",
    );
    let fields: Vec<&str> = d.iter().map(|p| p["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["a.scores", "b.cluster"], "{d:?}");
    // Both shapes of a run at once is not a run.
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "scores": [3.0], "items": [{"score": 3.0}]}),
        )
        .await;
    assert_eq!(res.status.as_u16(), 422, "{}", res.body);
}

/// Anchors of eight systems, system k's references `0.1·k − 0.35` above the rest at the same
/// judge score.
fn grouped_anchors() -> Vec<Value> {
    anchors(400, 0.5, 0.8)
        .into_iter()
        .enumerate()
        .map(|(i, mut a)| {
            let k = i % 8;
            let y = f(&a["reference_score"]) + 0.1 * k as f64 - 0.35;
            a["reference_score"] = json!(y.clamp(1.0, 5.0));
            a["group"] = json!(format!("sys-{k}"));
            a
        })
        .collect()
}

async fn groups_are_stored_measured_and_used_by_run_level_answers(backend: Backend) {
    let app = TestApp::new(backend).await;
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j1", "rubric": "coherence", "anchors": grouped_anchors()}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    // Listed back with their group.
    let page = app.get("/v1/cells/j1/coherence/anchors?limit=2").await;
    assert_eq!(page.body["anchors"][0]["group"], "sys-0", "{}", page.body);
    // The same anchor with another group is a conflict, like other scores.
    let mut moved = grouped_anchors()[0].clone();
    moved["group"] = json!("sys-7");
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j1", "rubric": "coherence", "anchors": [moved]}),
        )
        .await;
    assert_eq!(res.status, 409, "{}", res.body);
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let versions = app.get("/v1/cells/j1/coherence/calibrators").await;
    let groups = &versions.body["versions"][0]["groups"];
    assert_eq!(groups["groups"].as_array().unwrap().len(), 8, "{groups}");
    assert_eq!(groups["rule"], "random_effects");
    // The biases span 0.7: τ is clearly above 0, and the highest group's mean residual is the
    // largest.
    assert!(f(&groups["tau"]) > 0.1, "{groups}");
    let residual = |k: usize| f(&groups["groups"][k]["mean_residual"]);
    assert!(residual(7) > residual(0) + 0.4, "{groups}");
    // Each group's own residual variance, and evenly spread biases: none lies far from the rest.
    assert!(f(&groups["groups"][0]["variance"]) > 0.0, "{groups}");
    assert!(
        (0..8).all(|k| groups["groups"][k]["outlying"] == false),
        "{groups}"
    );

    let scores: Vec<f64> = (0..300).map(|i| 2.0 + 2.0 * (i as f64) / 300.0).collect();
    let estimate = |group: Value| {
        let app = &app;
        let scores = scores.clone();
        async move {
            let res = app
                .json(
                    "POST",
                    "/v1/estimate",
                    &json!({"judge": "j1", "rubric": "coherence", "scores": scores, "group": group}),
                )
                .await;
            assert_eq!(res.status, 200, "{}", res.body);
            res.body
        }
    };
    let high = estimate(json!("sys-7")).await;
    let low = estimate(json!("sys-0")).await;
    let new = estimate(json!("sys-new")).await;
    let none = estimate(Value::Null).await;
    assert_eq!(
        (high["group"]["term"].clone(), new["group"]["term"].clone()),
        (json!("known"), json!("new"))
    );
    assert_eq!(none["group"]["term"], "new", "{none}");
    // A group the anchors do not name (a new system, or a typo) is said; a known one, or
    // none named, is not.
    let said = |b: &Value| {
        b["warnings"].as_array().is_some_and(|w| {
            w.iter().any(|w| {
                w["message"]
                    .as_str()
                    .unwrap()
                    .contains("is not among the systems")
            })
        })
    };
    assert!(said(&new), "{new}");
    assert!(
        new["warnings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("\"sys-new\""),
        "{new}"
    );
    assert_eq!(new["warnings"][0]["code"], "new_group", "{new}");
    assert_eq!(new["warnings"][0]["systems"], json!(["sys-new"]), "{new}");
    assert!(!said(&high) && !said(&none), "{high} {none}");
    assert!(
        !new.to_string().contains("further from the others"),
        "{new}"
    );
    // A known group's own bias moves its estimate; a new one's is a wider draw.
    assert!(
        f(&high["estimate"]) > f(&low["estimate"]) + 0.4,
        "{high} {low}"
    );
    let width = |b: &Value| f(&b["interval"][1]) - f(&b["interval"][0]);
    assert!(width(&new) > 1.5 * width(&high), "{new} {high}");
    assert!(f(&new["variance"]["group"]) > 0.0);
    assert_eq!(new["group"]["groups"], 8);
    // Compare: the same group on both sides cancels its bias; two known groups differ by it.
    let compare = |a: &str, b: &str| {
        let app = &app;
        let scores = scores.clone();
        let (a, b) = (a.to_owned(), b.to_owned());
        async move {
            let res = app
                .json(
                    "POST",
                    "/v1/compare",
                    &json!({"judge": "j1", "rubric": "coherence",
                        "a": {"scores": scores, "group": a}, "b": {"scores": scores, "group": b}}),
                )
                .await;
            assert_eq!(res.status, 200, "{}", res.body);
            res.body
        }
    };
    let same = compare("sys-3", "sys-3").await;
    assert_eq!(f(&same["variance"]["group"]), 0.0, "{same}");
    assert!(f(&same["difference"]).abs() < 1e-9, "{same}");
    let apart = compare("sys-7", "sys-0").await;
    assert!(f(&apart["difference"]) > 0.4, "{apart}");
    assert!(f(&apart["prob_a_greater"]) > 0.99, "{apart}");
    // A bad group is named.
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j1", "rubric": "coherence",
                "a": {"scores": [3.0], "group": "no spaces"}, "b": {"scores": [3.0]}}),
        )
        .await;
    let d = assert_error(&res, 422, "invalid_input");
    assert_eq!(d[0]["field"], "a.group", "{d:?}");
}

async fn labelled_items_in_one_cluster_are_refused_naming_the_field(backend: Backend) {
    let app = identity_version(backend).await;
    let items: Vec<Value> = (0..20)
        .map(|i| {
            let mut item = json!({"score": 3.0, "cluster": if i < 10 { "c1" } else { "c2" }});
            if i < 5 {
                item["reference"] = json!(3.5);
            }
            item
        })
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "items": items}),
        )
        .await;
    let d = assert_error(&res, 422, "invalid_input");
    assert_eq!(d[0]["field"], "cluster", "{d:?}");
    // Five labels of one integer value: the interval keeps a floor, not a zero width.
    let items: Vec<Value> = (0..20)
        .map(|i| {
            if i < 5 {
                json!({"score": 3.0, "reference": 4.0})
            } else {
                json!({"score": 3.0})
            }
        })
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "items": items}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert!(f(&res.body["variance"]["sampling"]) > 0.0, "{}", res.body);
}

on_both_backends!(
    groups_are_stored_measured_and_used_by_run_level_answers,
    labelled_items_in_one_cluster_are_refused_naming_the_field,
    an_identity_estimate_is_the_raw_mean_shifted_by_the_anchors_residual,
    a_bayes_estimate_is_the_mean_correction_with_its_posterior_term,
    run_level_requests_are_refused_whole_naming_the_field,
);
