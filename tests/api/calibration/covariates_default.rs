//! Covariates on by default: a training that names none considers those every anchor
//! carries, keeps one only where it lowers held-out error, and a version that reads one
//! answers items sent without it from the same training's judge-score-only fit, said with
//! `covariates_missing`, instead of refusing them.

use serde_json::{Value, json};

use super::*;
use crate::common::{Backend, TestApp};

/// Quality q ~ N(3, 0.6²); log length in sd units u ~ N(0, 1) apart from it; the reference is
/// q + N(0, 0.1²). The judge scores q + `reward`·u + N(0, 0.2²): with reward 0.6 the length
/// explains most of the judge's error (the closed-form MAE with it is about half the MAE
/// without), with reward 0 it explains none.
struct Item {
    judge: f64,
    length: f64,
    reference: f64,
}

fn item(rng: &mut Normals, reward: f64) -> Item {
    let q = 3.0 + 0.6 * rng.next();
    let u = rng.next();
    Item {
        judge: q + reward * u + 0.2 * rng.next(),
        length: (400f64.ln() + 0.5 * u).exp().round(),
        reference: (q + 0.1 * rng.next()).clamp(1.0, 5.0),
    }
}

fn with_length(items: &[Item]) -> Vec<Value> {
    items
        .iter()
        .map(|it| json!({"score": it.judge, "covariates": {"length": it.length}}))
        .collect()
}

/// Held-out MAE against the references, and the share of references inside the predictive
/// band, of a /v1/correct answer.
fn figures(results: &Value, items: &[Item]) -> (f64, f64) {
    let results = results.as_array().unwrap();
    let (mut abs, mut inside) = (0.0, 0);
    for (r, it) in results.iter().zip(items) {
        abs += (r["corrected"].as_f64().unwrap() - it.reference).abs();
        let band = &r["predictive"];
        let (lo, hi) = (band[0].as_f64().unwrap(), band[1].as_f64().unwrap());
        inside += usize::from(lo <= it.reference && it.reference <= hi);
    }
    (abs / items.len() as f64, inside as f64 / items.len() as f64)
}

fn codes(body: &Value) -> Vec<String> {
    body["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|w| w["code"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn auto_keeps_a_covariate_the_judge_rewards_and_answers_bare_scores(backend: Backend) {
    let app = TestApp::new(backend).await;
    let mut rng = Normals(0x1e96_7a11);
    let mut jobs = Vec::new();
    for (judge, reward) in [("long", 0.6), ("plain", 0.0)] {
        let anchors: Vec<Value> = (0..400)
            .map(|i| {
                let it = item(&mut rng, reward);
                json!({"item_id": format!("a-{i}"), "judge_score": it.judge,
                       "reference_score": it.reference, "covariates": {"length": it.length}})
            })
            .collect();
        stored(
            &app,
            json!({"judge": judge, "rubric": "r", "anchors": anchors}),
        )
        .await;
        // Version 1 names no option; version 2 the same anchors with the judge score alone.
        jobs.push(trained(&app, judge, json!({"method": "auto"})).await);
        trained(&app, judge, json!({"method": "auto", "covariates": []})).await;
    }
    let listed = |judge: &'static str| {
        let app = &app;
        async move {
            app.get(&format!("/v1/cells/{judge}/r/calibrators"))
                .await
                .body
        }
    };
    // The rewarded length is kept (logged: the judge rewards log length); the ignored one is
    // considered and dropped, so that version reads the judge score alone.
    let long = listed("long").await;
    let v1 = &long["versions"][1];
    assert_eq!(v1["version"], 1, "{long}");
    assert_eq!(v1["covariates"]["inputs"][0]["name"], "length", "{v1}");
    assert_eq!(v1["covariates"]["inputs"][0]["transform"], "log", "{v1}");
    assert!(long["versions"][0]["covariates"].is_null(), "{long}");
    let plain = listed("plain").await;
    assert!(plain["versions"][1]["covariates"].is_null(), "{plain}");
    // The jobs say what they considered and kept.
    assert_eq!(
        jobs[0]["detail"]["covariates_considered"],
        json!(["length"]),
        "{}",
        jobs[0]
    );
    assert_eq!(
        jobs[0]["detail"]["kept"]["r"],
        json!(["log(length)"]),
        "{}",
        jobs[0]
    );
    assert_eq!(
        jobs[1]["detail"]["covariates_considered"],
        json!(["length"]),
        "{}",
        jobs[1]
    );
    assert_eq!(jobs[1]["detail"]["kept"], json!({}), "{}", jobs[1]);

    // Fresh items at their lengths: MAE with the kept length against without it, and each
    // version's bands.
    for (judge, reward) in [("long", 0.6), ("plain", 0.0)] {
        let fresh: Vec<Item> = (0..1500).map(|_| item(&mut rng, reward)).collect();
        let mut seen = Vec::new();
        for version in [1, 2] {
            let res = correct(
                &app,
                json!({"judge": judge, "rubric": "r", "version": version, "items": with_length(&fresh)}),
            )
            .await;
            assert_eq!(res.status, 200, "{}", res.body);
            seen.push(figures(&res.body["results"], &fresh));
        }
        let (ratio, bands) = (seen[0].0 / seen[1].0, seen[0].1);
        eprintln!(
            "{judge}: MAE {:.4} with no option named, {:.4} judge alone ({ratio:.3}×); bands {bands:.3}",
            seen[0].0, seen[1].0
        );
        if reward > 0.0 {
            assert!(ratio <= 0.70, "{judge}: {seen:?}");
        } else {
            assert!(ratio <= 1.02, "{judge}: {seen:?}");
        }
        assert!((0.93..=0.97).contains(&bands), "{judge}: {seen:?}");

        // Bare scores: the length version answers from its judge-score-only fit, the same
        // fit as version 2's (same anchors, plan and seed), and says so.
        let scores: Vec<f64> = fresh.iter().map(|it| it.judge).collect();
        let bare = correct(
            &app,
            json!({"judge": judge, "rubric": "r", "version": 1, "scores": scores}),
        )
        .await;
        assert_eq!(bare.status, 200, "{}", bare.body);
        let alone = correct(
            &app,
            json!({"judge": judge, "rubric": "r", "version": 2, "scores": scores}),
        )
        .await;
        assert_eq!(
            codes(&bare.body).contains(&"covariates_missing".to_owned()),
            reward > 0.0,
            "{}",
            bare.body["warnings"]
        );
        for (a, b) in bare.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .zip(alone.body["results"].as_array().unwrap())
        {
            assert!(
                (a["corrected"].as_f64().unwrap() - b["corrected"].as_f64().unwrap()).abs() < 1e-9,
                "{a} vs {b}"
            );
            assert_eq!(a["predictive"], b["predictive"]);
        }
        let (_, bare_bands) = figures(&bare.body["results"], &fresh);
        assert!(
            (0.93..=0.97).contains(&bare_bands),
            "{judge}: bare bands {bare_bands}"
        );

        // A run of bare scores too: the same estimate as version 2's, warned.
        let estimate = |version: i64| {
            let app = &app;
            let scores = scores[..300].to_vec();
            async move {
                let res = app
                    .json("POST", "/v1/estimate", &json!({"judge": judge, "rubric": "r", "version": version, "scores": scores}))
                    .await;
                assert_eq!(res.status, 200, "{}", res.body);
                res.body
            }
        };
        let (bare, alone) = (estimate(1).await, estimate(2).await);
        assert_eq!(bare["estimate"], alone["estimate"], "{bare}\n{alone}");
        assert_eq!(bare["interval"], alone["interval"], "{bare}\n{alone}");
        assert_eq!(
            codes(&bare).contains(&"covariates_missing".to_owned()),
            reward > 0.0,
            "{bare}"
        );
    }
}

on_both_backends!(auto_keeps_a_covariate_the_judge_rewards_and_answers_bare_scores);

/// A judge that rewards length only past the median: q ~ N(3, 0.6²), u ~ N(0, 1) the log
/// length in sd units, the judge q + 0.6·max(0, u) + N(0, 0.2²), the reference q + N(0, 0.1²).
/// A line in log length misses the bend: on runs of long answers it reads a reward the short
/// anchors do not have.
fn hinge_item(rng: &mut Normals, u: f64) -> (f64, f64, f64) {
    let q = 3.0 + 0.6 * rng.next();
    let judge = q + 0.6 * u.max(0.0) + 0.2 * rng.next();
    (
        (400f64.ln() + 0.5 * u).exp().round(),
        judge,
        (q + 0.1 * rng.next()).clamp(1.0, 5.0),
    )
}

/// 40 rubrics of 200 anchors each, the length carried and not named: each rubric's run of
/// 200 long answers (u ~ N(1, 0.5²)) is estimated at its items' lengths, and its interval
/// holds the run's mean reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_runs_under_a_hinge_in_length_cover() {
    let app = TestApp::new(Backend::Sqlite).await;
    let mut rng = Normals(0x41_4e_6e);
    const RUBRICS: usize = 40;
    for r in 0..RUBRICS {
        let anchors: Vec<Value> = (0..200)
            .map(|i| {
                let u = rng.next();
                let (length, judge, reference) = hinge_item(&mut rng, u);
                json!({"item_id": format!("a-{i}"), "judge_score": judge,
                       "reference_score": reference, "covariates": {"length": length}})
            })
            .collect();
        stored(
            &app,
            json!({"judge": "hinged", "rubric": format!("r{r}"), "anchors": anchors}),
        )
        .await;
    }
    let id = train(
        &app,
        "hinged",
        json!({"method": "bayes", "options": quick()}),
    )
    .await;
    let job = finished_within(&app, &id, std::time::Duration::from_secs(300)).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let (mut inside, mut spline, mut widened) = (0, 0, 0);
    for r in 0..RUBRICS {
        let rubric = format!("r{r}");
        let listed = app
            .get(&format!("/v1/cells/hinged/{rubric}/calibrators"))
            .await;
        let inputs = &listed.body["versions"][0]["covariates"]["inputs"];
        spline += usize::from(inputs.as_array().is_some_and(|i| i.len() > 1));
        let run: Vec<(f64, f64, f64)> = (0..200)
            .map(|_| {
                let u = 1.0 + 0.5 * rng.next();
                hinge_item(&mut rng, u)
            })
            .collect();
        let truth = run.iter().map(|it| it.2).sum::<f64>() / run.len() as f64;
        let items: Vec<Value> = run
            .iter()
            .map(|(length, judge, _)| json!({"score": judge, "covariates": {"length": length}}))
            .collect();
        let res = app
            .json(
                "POST",
                "/v1/estimate",
                &json!({"judge": "hinged", "rubric": rubric, "items": items}),
            )
            .await;
        assert_eq!(res.status, 200, "{}", res.body);
        let i = &res.body["interval"];
        let (lo, hi) = (i[0].as_f64().unwrap(), i[1].as_f64().unwrap());
        inside += usize::from(lo <= truth && truth <= hi);
        widened += usize::from(codes(&res.body).contains(&"covariate_misfit".to_owned()));
    }
    eprintln!(
        "hinge: {inside} of {RUBRICS} long runs covered; {spline} layers piecewise linear; {widened} widened by the residual check"
    );
    assert!(inside >= 36, "{inside} of {RUBRICS}");
}
