//! Training a pairwise cell (`POST /v1/judges/{judge}/calibrations` with `auto`) on both
//! backends, and what its version shows: the calibrated preference `auto` chose against the
//! raw verdict, and the bias diagnostics of a judge with known biases, in the report route,
//! the picture and the metrics.

use crate::calibration::{finished, metrics, train};
use crate::common::{Backend, TestApp, assert_error};
use crate::ratings::{run, world};
use serde_json::{Value, json};

/// The world's rows with a length difference that says nothing of quality: the judge of
/// `world` has no length bias, so neither it nor people prefer the longer answer.
fn with_lengths(mut rows: Vec<Value>) -> Vec<Value> {
    for (i, r) in rows.iter_mut().enumerate() {
        r["covariates"] = json!({"length_diff": ((i * 7919) % 200) as f64 - 99.5});
    }
    rows
}

fn contains(interval: &Value, x: f64) -> bool {
    interval[0].as_f64().unwrap() <= x && x <= interval[1].as_f64().unwrap()
}

async fn a_pairwise_cell_trains_with_auto_and_reports_its_judges_biases(backend: Backend) {
    let app = TestApp::new(backend).await;
    let judge = "/v1/judges/pair-judge/calibrations";
    // Unlabelled verdicts only: training needs labels, and says how many there are.
    let res = app
        .json(
            "POST",
            "/v1/comparisons",
            &run(with_lengths(world(30, 50_000, 0, 5))),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let details = assert_error(
        &app.json("POST", judge, &json!({"method": "auto"})).await,
        422,
        "invalid_input",
    );
    let problem = details[0]["problem"].as_str().unwrap();
    assert!(problem.contains("0 labelled comparisons"), "{problem}");
    // A judge version it has no comparisons of: named, with the ones it has.
    let details = assert_error(
        &app.json(
            "POST",
            judge,
            &json!({"method": "auto", "judge_version": "v9"}),
        )
        .await,
        422,
        "invalid_input",
    );
    assert_eq!(details[0]["field"], "judge_version");
    let problem = details[0]["problem"].as_str().unwrap();
    assert!(problem.contains("its versions: (none)"), "{problem}");
    let res = app.get("/v1/cells/pair-judge/overall/preferences").await;
    assert_error(&res, 404, "not_found");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"method\": \"auto\""),
        "{}",
        res.body
    );

    let res = app
        .json(
            "POST",
            "/v1/comparisons",
            &run(with_lengths(world(1_000, 0, 1_000, 7))),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    // A pairwise cell corrects no scores: /v1/correct says where its runs go.
    let res = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "pair-judge", "rubric": "overall", "scores": [3.0]}),
        )
        .await;
    assert_error(&res, 404, "not_found");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("POST /v1/ratings"), "{message}");
    // A scalar method reads judge scores: refused, naming the field.
    let details = assert_error(
        &app.json("POST", judge, &json!({"method": "bayes"})).await,
        422,
        "invalid_input",
    );
    assert_eq!(details[0]["field"], "method");

    let id = train(&app, "pair-judge", json!({"method": "auto"})).await;
    let job = finished(&app, &id).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(
        job["versions"],
        json!([{"rubric": "overall", "version": 1, "passed": true, "active": true}])
    );
    let res = app.get("/v1/cells/pair-judge/overall/preferences").await;
    assert_eq!(res.status, 200, "{}", res.body);
    let v = &res.body["versions"][0];
    assert_eq!(
        (v["version"].clone(), v["comparisons"].clone()),
        (json!(1), json!(1_030))
    );
    assert_eq!(v["labelled"], 1_000);
    assert_eq!(v["systems"], json!(["s0", "s1", "s2", "s3"]));
    // The judge favours s3 by 1.5 log-odds: `auto` keeps a term per system, and the chosen
    // map predicts people better than the raw verdict does.
    let chosen = v["chosen"].as_str().unwrap();
    assert!(chosen.ends_with("per-system terms"), "{chosen}");
    let loss = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["inputs"] == chosen)
        .unwrap()["log_loss"]
        .as_f64()
        .unwrap();
    assert!(loss < v["raw"]["log_loss"].as_f64().unwrap(), "{v}");
    let b = &v["biases"];
    // The answer shown first gets a log-odds push of 1: the judge's share is well above a
    // half; people's preference for a (a and b drawn alike) is a half.
    assert!(
        b["judge_first"]["interval"][0].as_f64().unwrap() > 0.55,
        "{b}"
    );
    assert!(contains(&b["people_first"]["interval"], 0.5), "{b}");
    assert!(b["flips"]["estimate"].as_f64().unwrap() > 0.1, "{b}");
    assert_eq!(b["length_covariate"], "length_diff");
    // The judge agrees with people on 1,000 labelled comparisons, better than a coin and
    // short of always.
    assert_eq!(b["agreement"]["comparisons"], 1_000);
    let agree = b["agreement"]["estimate"].as_f64().unwrap();
    assert!((0.55..0.95).contains(&agree), "{b}");
    // A pairwise cell's agreement report is its biases: /agreement says where.
    let elsewhere = app.get("/v1/cells/pair-judge/overall/agreement").await;
    assert_eq!(elsewhere.status, 409, "{}", elsewhere.body);
    assert!(
        elsewhere.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/preferences"),
        "{}",
        elsewhere.body
    );
    assert!(contains(&b["judge_longer"]["interval"], 0.5), "{b}");
    assert!(contains(&b["people_longer"]["interval"], 0.5), "{b}");
    let favour = |system: &str| {
        b["favouritism"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["system"] == system)
            .unwrap()["interval"]
            .clone()
    };
    assert!(favour("s3")[0].as_f64().unwrap() > 0.05, "{b}");
    assert!(favour("s1")[1].as_f64().unwrap() < 0.0, "{b}");

    // The picture and the metrics show the same version.
    let svg = app.get("/v1/cells/pair-judge/overall/report.svg").await;
    assert_eq!(svg.status, 200);
    assert_eq!(svg.headers["content-type"], "image/svg+xml");
    let text = svg.body.as_str().unwrap();
    for label in [
        "Held-out calibration",
        "Favouritism by system",
        "s3",
        "version 1",
    ] {
        assert!(text.contains(label), "{label} missing from the picture");
    }
    let m = metrics(&app).await;
    for line in [
        r#"judgecal_pairwise_version{judge="pair-judge",rubric="overall"} 1"#,
        r#"judgecal_pairwise_favoured{judge="pair-judge",rubric="overall",system="s3"} 1"#,
        r#"judgecal_pairwise_bias{diagnostic="flip",judge="pair-judge",rubric="overall",source="judge"}"#,
    ] {
        assert!(m.contains(line), "{line} missing from the metrics");
    }

    // Ratings now read the version's choice, fitted again on the anchors: one candidate.
    let res = app
        .json(
            "POST",
            "/v1/ratings",
            &run(with_lengths(world(2_000, 20_000, 0, 9))),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let calibration = &res.body["calibration"];
    assert_eq!(calibration["version"], 1, "{calibration}");
    assert_eq!(calibration["chosen"], chosen);
    assert_eq!(calibration["candidates"].as_array().unwrap().len(), 1);

    // A second training numbers the next version; the picture of the first is still drawn.
    let id = train(&app, "pair-judge", json!({"method": "auto"})).await;
    assert_eq!(finished(&app, &id).await["state"], "succeeded");
    let res = app.get("/v1/cells/pair-judge/overall/preferences").await;
    assert_eq!(res.body["versions"][0]["version"], 2);
    assert_eq!(res.body["versions"][1]["version"], 1);
    let svg = app
        .get("/v1/cells/pair-judge/overall/report.svg?version=1")
        .await;
    assert_eq!(svg.status, 200);
    assert_error(
        &app.get("/v1/cells/pair-judge/overall/report.svg?version=9")
            .await,
        404,
        "not_found",
    );
}

on_both_backends!(a_pairwise_cell_trains_with_auto_and_reports_its_judges_biases);
