//! Metamorphic tests through the API, on both backends: a request changed in a way whose
//! effect on the answer is known in closed form must change the answer exactly so, whatever
//! the answer is. They need no truth, so they hold for the next feature too.
//!
//! - Renaming the systems permutes the ratings.
//! - Writing every comparison the other way round (a and b swapped, each outcome with the other
//!   answer shown first) is the same data: the same ratings.
//! - Reversing every outcome, the labels' and the judge's, negates every rating.
//! - A judge version scoring every item a constant higher, with a calibration trained on it,
//!   corrects its scores as the old one corrects the old scores; and a silent-change check of
//!   a mirrored judge says it changed (`calibration::assumptions`).
//! - A run without an input the map reads is warned, not silently different
//!   (`calibration::assumptions`).

use serde_json::{Value, json};

use crate::calibration::trained;
use crate::common::{Backend, TestApp};
use crate::ratings::world;

fn cell(rubric: &str, rows: Vec<Value>) -> Value {
    json!({"judge": "pair-judge", "rubric": rubric, "comparisons": rows})
}

/// Each row of `rows` with every system renamed by `to`.
fn renamed(rows: &[Value], to: &dyn Fn(&str) -> String) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            let mut r = r.clone();
            for side in ["a", "b"] {
                r[side] = json!(to(r[side].as_str().unwrap()));
            }
            r
        })
        .collect()
}

fn complement(v: &Value) -> Value {
    match v.as_str() {
        Some("a") => json!("b"),
        Some("b") => json!("a"),
        _ => v.clone(),
    }
}

/// Each row written the other way round: b first, the swapped verdict as the verdict.
fn turned(rows: &[Value]) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            let mut t = r.clone();
            t["a"] = r["b"].clone();
            t["b"] = r["a"].clone();
            t["verdict"] = complement(&r["verdict_swapped"]);
            t["verdict_swapped"] = complement(&r["verdict"]);
            if let Some(p) = r.get("preference") {
                t["preference"] = complement(p);
            }
            t
        })
        .collect()
}

/// Each row with every outcome reversed: the judge's and the people's.
fn reversed(rows: &[Value]) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            let mut t = r.clone();
            for field in ["verdict", "verdict_swapped", "preference"] {
                if let Some(v) = r.get(field) {
                    t[field] = complement(v);
                }
            }
            t
        })
        .collect()
}

/// Each system's rating and standard error.
fn ratings(answer: &Value) -> Vec<(String, f64, f64)> {
    let mut out: Vec<(String, f64, f64)> = answer["systems"]
        .as_array()
        .unwrap_or_else(|| panic!("no systems in {answer}"))
        .iter()
        .map(|s| {
            (
                s["system"].as_str().unwrap().to_owned(),
                s["rating"].as_f64().unwrap(),
                s["standard_error"].as_f64().unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

async fn pairwise_ratings_follow_renames_turns_and_reversals(backend: Backend) {
    let app = TestApp::new(backend).await;
    let (anchors, run) = (world(600, 10_000, 600, 7), world(2_000, 0, 0, 11));
    // A permutation of the names, so that the systems' order by name changes too.
    let to = |s: &str| {
        match s {
            "s0" => "m3",
            "s1" => "m0",
            "s2" => "m2",
            _ => "m1",
        }
        .to_owned()
    };
    let worlds: [(&str, Vec<Value>, Vec<Value>, &str); 4] = [
        ("plain", anchors.clone(), run.clone(), "s0"),
        ("renamed", renamed(&anchors, &to), renamed(&run, &to), "m3"),
        ("turned", turned(&anchors), turned(&run), "s0"),
        ("reversed", reversed(&anchors), reversed(&run), "s0"),
    ];
    let mut answers = Vec::new();
    for (rubric, anchors, run, baseline) in worlds {
        let res = app
            .json("POST", "/v1/comparisons", &cell(rubric, anchors))
            .await;
        assert_eq!(res.status, 200, "{}", res.body);
        let mut body = cell(rubric, run);
        body["baseline"] = json!(baseline);
        let res = app.json("POST", "/v1/ratings", &body).await;
        assert_eq!(res.status, 200, "{rubric}: {}", res.body);
        answers.push(res.body);
    }
    let plain = ratings(&answers[0]);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * (1.0 + a.abs());
    let same = |other: &[(String, f64, f64)], name: &dyn Fn(&str) -> String, sign: f64| {
        for (system, rating, se) in &plain {
            let (_, r, s) = other
                .iter()
                .find(|o| o.0 == name(system))
                .unwrap_or_else(|| panic!("{system} missing from {other:?}"));
            assert!(
                close(*r, sign * rating) && close(*s, *se),
                "{system}: {r} ± {s} against {} ± {se}",
                sign * rating
            );
        }
    };
    same(&ratings(&answers[1]), &to, 1.0);
    same(&ratings(&answers[2]), &|s| s.to_owned(), 1.0);
    same(&ratings(&answers[3]), &|s| s.to_owned(), -1.0);
}

/// A judge version scoring every item 0.5 higher, calibrated on its own anchors, corrects
/// its scores as the old version's calibration corrects the old scores (isotonic regression
/// is equivariant to a shift of its input).
async fn a_shifted_judge_with_its_own_calibration_corrects_alike(backend: Backend) {
    let app = TestApp::new(backend).await;
    let rows = |shift: f64| -> Vec<Value> {
        (0..300)
            .map(|i| {
                let j = 1.0 + 4.0 * ((i * 7919) % 300) as f64 / 300.0;
                let y = (0.4 + 0.85 * j + ((i * 104_729) % 1000) as f64 / 1000.0 - 0.5)
                    .clamp(1.0, 5.0);
                json!({"item_id": format!("it-{i}"), "judge_score": j + shift, "reference_score": y})
            })
            .collect()
    };
    for (version, shift) in [("v1", 0.0), ("v2", 0.5)] {
        let res = app
            .json(
                "POST",
                "/v1/anchors",
                &json!({"judge": "sj", "rubric": "r1", "judge_version": version, "anchors": rows(shift)}),
            )
            .await;
        assert_eq!(res.status, 200, "{}", res.body);
        trained(
            &app,
            "sj",
            json!({"method": "isotonic", "judge_version": version}),
        )
        .await;
    }
    let scores = [1.3, 2.0, 2.75, 3.5, 4.2, 4.9];
    let corrected = |version: &'static str, shift: f64| {
        let app = &app;
        async move {
            let shifted: Vec<f64> = scores.iter().map(|s| s + shift).collect();
            let res = app
                .json(
                    "POST",
                    "/v1/correct",
                    &json!({"judge": "sj", "rubric": "r1", "judge_version": version, "scores": shifted}),
                )
                .await;
            assert_eq!(res.status, 200, "{}", res.body);
            assert_eq!(res.body["warnings"], json!([]), "{}", res.body);
            res.body["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["corrected"].as_f64().unwrap())
                .collect::<Vec<f64>>()
        }
    };
    let (old, new) = (corrected("v1", 0.0).await, corrected("v2", 0.5).await);
    for (a, b) in old.iter().zip(&new) {
        assert!((a - b).abs() < 1e-9, "{old:?} against {new:?}");
    }
}

on_both_backends!(
    pairwise_ratings_follow_renames_turns_and_reversals,
    a_shifted_judge_with_its_own_calibration_corrects_alike,
);
