//! The other methods as services: the flow, isotonic regression, and auto choosing among
//! them all.

use serde_json::{Value, json};

use super::*;
use crate::common::{Backend, TestApp, assert_error};

async fn a_flow_version_corrects_with_sigma_and_review(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j1", "coherence", 300, 0.5, 0.8).await;
    // Options of the other method are refused, naming the field.
    let res = app
        .json(
            "POST",
            "/v1/judges/j1/calibrations",
            &json!({"method": "flow", "options": {"chains": 2}}),
        )
        .await;
    let d = assert_error(&res, 422, "invalid_input");
    assert!(
        d[0]["problem"].as_str().unwrap().contains("chains"),
        "{d:?}"
    );

    // The default recipe: 220 steps on minibatches of 128; 240 training anchors make 2 steps
    // an epoch, so 110 epochs.
    let id = train(&app, "j1", json!({"method": "flow"})).await;
    let job = finished(&app, &id).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["detail"]["epoch"], 110, "{job}");
    // A finished job cannot be cancelled.
    assert_error(
        &app.json("POST", &format!("/v1/jobs/{id}/cancel"), &json!({}))
            .await,
        409,
        "conflict",
    );
    let v = &app.get("/v1/cells/j1/coherence/calibrators").await.body["versions"][0];
    assert_eq!(
        (v["method"].clone(), v["active"].clone()),
        (json!("flow"), json!(true)),
        "{v}"
    );
    // 20% held out: trained on 240, evaluated on 60, where it beats the raw judge.
    assert_eq!(v["flow"]["trained_on"], 240);
    assert_eq!(
        v["flow"]["recipe"],
        json!({"learning_rate": 0.02, "schedule": "cosine", "batch_size": 128, "steps": 220}),
        "{v}"
    );
    assert_eq!(v["evaluation"]["scheme"], "holdout 0.2");
    assert_eq!(v["evaluation"]["calibrated"]["n"], 60);
    assert!(
        v["evaluation"]["calibrated"]["mae"].as_f64().unwrap()
            < v["evaluation"]["raw"]["mae"].as_f64().unwrap(),
        "{v}"
    );
    // Its 95% interval is the held-out conformal band (60 residuals: one bin), and its review
    // routing is audited on the same held-out anchors.
    assert_eq!(v["intervals"]["source"], "conformal", "{v}");
    assert_eq!(v["intervals"]["held_out"], 60, "{v}");
    assert_eq!(v["flow"]["review_audit"]["held_out"], 60, "{v}");

    // New anchors are checked against that interval at once, before any correction has
    // been asked of the version.
    let cell = upload_as(&app, "j1", "coherence", "new-", 50, 0.5, 0.8).await;
    let checked = &cell["coverage"];
    assert_eq!(checked["checked"], 50, "{cell}");
    assert!(checked["share"].as_f64().unwrap() >= 0.8, "{cell}");
    assert_eq!(
        metric(
            &metrics(&app).await,
            r#"judgecal_anchor_coverage_anchors{judge="j1",rubric="coherence"}"#
        ),
        Some(50.0)
    );

    // 8.5 is off the anchors (and off the table), though within one range width of them (30
    // would be refused): evaluated directly, with a large σ, and flagged.
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "coherence", "scores": [2.0, 4.0, 8.5]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["method"], "flow");
    assert!(res.body.get("canary").is_none());
    let r = res.body["results"].as_array().unwrap();
    for (item, j) in r.iter().zip([2.0, 4.0]) {
        assert!(item.get("credible").is_none(), "{item}");
        let c = item["corrected"].as_f64().unwrap();
        assert!((c - (0.5 + 0.8 * j)).abs() < 0.2, "{item}");
        let p = &item["predictive"];
        assert!(
            p[0].as_f64().unwrap() < c && c < p[1].as_f64().unwrap(),
            "{item}"
        );
    }
    let sigma = |i: usize| r[i]["sigma"].as_f64().unwrap();
    assert!(sigma(2) > sigma(0) && sigma(2) > sigma(1), "{r:?}");
    assert_eq!(r[2]["review"], true, "{r:?}");
    assert_eq!(r[2]["outside_anchors"], true, "{r:?}");
    assert!(res.body["review_count"].as_u64().unwrap() >= 1);
    let text = metrics(&app).await;
    assert_eq!(
        metric(
            &text,
            r#"judgecal_dropout_sigma_count{judge="j1",rubric="coherence"}"#
        ),
        Some(3.0)
    );
    // Another process on the same database (here: a restart) loads the version from the
    // store and gives the same numbers, bit for bit: the weights round-trip exactly and the
    // MC-dropout masks are seeded.
    let mut app = app;
    let settings = app.settings.clone();
    let dir = app.take_dir();
    let other = TestApp::on(settings, dir).await;
    let again = correct(
        &other,
        json!({"judge": "j1", "rubric": "coherence", "scores": [2.0, 4.0, 8.5]}),
    )
    .await;
    assert_eq!(again.body["results"], res.body["results"]);
    // A run-level estimate from a flow version leaves the corrector's term out and says so.
    let est = other
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "scores": [2.0, 3.0, 4.0]}),
        )
        .await;
    assert_eq!(est.status, 200, "{}", est.body);
    assert_eq!(est.body["corrector_term"], "omitted", "{}", est.body);
    assert_eq!(est.body["variance"]["corrector"], 0.0, "{}", est.body);
    assert!(
        est.body["warnings"][0]["message"]
            .as_str()
            .is_some_and(|w| w.contains("leaves the corrector's uncertainty out")),
        "{}",
        est.body
    );
    assert!(
        metric(
            &text,
            r#"judgecal_review_routed_total{judge="j1",rubric="coherence"}"#
        )
        .unwrap()
            >= 1.0
    );
}

/// `auto` on two cells of one judge: on a linear bias a corrector wins; on a ceiling (a third
/// of the references pinned at 5, the rest equal to the judge score) every corrector loses
/// to the raw judge on MAE, so the raw judge is served.
async fn auto_picks_the_held_out_winner_and_never_loses_to_the_raw_judge(backend: Backend) {
    let app = TestApp::new(backend).await;
    upload(&app, "j1", "linear", 300, 0.5, 0.8).await;
    let ceiling: Vec<Value> = (0..200)
        .map(|i| {
            let j = 1.0 + 4.0 * ((i * 7919) % 200) as f64 / 200.0;
            let y = if i % 3 == 0 { 5.0 } else { j };
            json!({"item_id": format!("item-{i:05}"), "judge_score": j, "reference_score": y})
        })
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j1", "rubric": "ceiling", "anchors": ceiling}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    // Unknown objectives are refused, naming the field.
    let res = app
        .json(
            "POST",
            "/v1/judges/j1/calibrations",
            &json!({"method": "auto", "options": {"objective": "rmse"}}),
        )
        .await;
    assert!(
        assert_error(&res, 422, "invalid_input")[0]["problem"]
            .as_str()
            .unwrap()
            .contains("rmse")
    );
    let id = train(
        &app,
        "j1",
        json!({"method": "auto", "options": {
            "flow_min_anchors": 250,
            "bayes": {"warmup": 300, "draws": 500},
            "flow": {"preset": "paper", "epochs": 60, "learning_rate": 0.01},
        }}),
    )
    .await;
    let job = finished(&app, &id).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["method"], "auto");

    let version = |rubric: &'static str| {
        let app = &app;
        async move {
            app.get(&format!("/v1/cells/j1/{rubric}/calibrators"))
                .await
                .body["versions"][0]
                .clone()
        }
    };
    let mae = |e: &Value| e["mae"].as_f64().unwrap();
    let linear = version("linear").await;
    let d = &linear["decision"];
    assert_eq!(d["scheme"], "5-fold", "{d}");
    let candidates = d["candidates"].as_array().unwrap();
    let methods: Vec<&str> = candidates
        .iter()
        .map(|c| c["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        ["identity", "quantile_map", "bayes", "flow", "isotonic"]
    );
    // Every candidate was evaluated on the same 300 held-out anchors.
    assert!(
        candidates.iter().all(|c| c["evaluation"]["n"] == 300),
        "{d}"
    );
    assert_ne!(d["chosen"], "identity", "{d}");
    assert_eq!(linear["method"], d["chosen"]);
    assert_eq!(linear["active"], true);
    let best = candidates
        .iter()
        .map(|c| mae(&c["evaluation"]))
        .fold(f64::INFINITY, f64::min);
    assert!(
        mae(&linear["evaluation"]["calibrated"]) <= best * 1.01 + 1e-12,
        "{d}"
    );
    assert!(mae(&linear["evaluation"]["calibrated"]) < mae(&linear["evaluation"]["raw"]));

    let ceiling = version("ceiling").await;
    let d = &ceiling["decision"];
    assert_eq!(d["chosen"], "identity", "{d}");
    assert_eq!(ceiling["method"], "identity");
    let raw = mae(&d["candidates"][0]["evaluation"]);
    assert!(
        mae(&d["candidates"][2]["evaluation"]) > raw,
        "the line loses: {d}"
    );
    assert!(
        d["candidates"][3]["excluded"]
            .as_str()
            .unwrap()
            .contains("flow_min_anchors"),
        "{d}"
    );
    // The β canary is kept from the Bayesian fit although the line did not win.
    assert!(d["beta"]["beta_mean"].is_number(), "{d}");
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "ceiling", "scores": [2.0, 4.5]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["method"], "identity");
    assert_eq!(res.body["results"][1]["corrected"], 4.5);
    // The raw judge reports nothing of its own, yet the canary the correction carries is the
    // kept fit's, as the gauge's is.
    for field in ["posterior", "diagnostics", "flow"] {
        assert!(ceiling.get(field).is_none(), "{ceiling}");
    }
    assert_eq!(res.body["canary"], d["beta"]["canary"], "{}", res.body);
    let text = metrics(&app).await;
    assert!(
        metric(
            &text,
            r#"judgecal_beta_canary{judge="j1",rubric="ceiling"}"#
        )
        .is_some(),
        "{text}"
    );

    // A quantile map on its own: the corrected scores follow the reference distribution.
    let id = train(
        &app,
        "j1",
        json!({"method": "quantile_map", "rubrics": ["linear"]}),
    )
    .await;
    assert_eq!(finished(&app, &id).await["state"], "succeeded");
    let res = correct(
        &app,
        json!({"judge": "j1", "rubric": "linear", "scores": [1.0, 3.0, 5.0]}),
    )
    .await;
    assert_eq!(res.body["method"], "quantile_map", "{}", res.body);
    let c: Vec<f64> = res.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["corrected"].as_f64().unwrap())
        .collect();
    assert!(c[0] < c[1] && c[1] < c[2], "{c:?}");
    assert!((c[1] - (0.5 + 0.8 * 3.0)).abs() < 0.2, "{c:?}");

    // The report draws the active version for a person.
    let res = app.get("/v1/cells/j1/linear/report.svg").await;
    assert_eq!(res.status, 200);
    assert_eq!(res.headers["content-type"], "image/svg+xml");
    let svg = res.body.as_str().unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("version 2 (quantile_map), 300 anchors"),
        "{}",
        &svg[..400.min(svg.len())]
    );
    // The anchors, and their corrected residuals, as dots; the fitted curve and its band.
    assert!(svg.matches("<circle").count() >= 600);
    for text in ["fitted", "95% predictive band", "no correction"] {
        assert!(svg.contains(text), "{text} missing");
    }
    assert_error(
        &app.get("/v1/cells/j1/nothing/report.svg").await,
        404,
        "not_found",
    );
}

/// Isotonic regression as a method of its own: a job, a version, corrections with a predictive
/// interval from its held-out residuals, the same numbers after a restart.
async fn an_isotonic_version_corrects_with_a_held_out_interval(backend: Backend) {
    let app = TestApp::new(backend).await;
    // y = 1 + 4/(1 + e^(−2(j − 3))) plus the fixed noise of `anchors` (uniform ±0.5): monotone
    // and far from a line.
    let rows: Vec<Value> = anchors(400, 0.0, 0.0)
        .into_iter()
        .map(|mut r| {
            let j = r["judge_score"].as_f64().unwrap();
            let i: usize = r["item_id"].as_str().unwrap()[5..].parse().unwrap();
            let noise = ((i * 104_729) % 1000) as f64 / 1000.0 - 0.5;
            r["reference_score"] =
                json!((1.0 + 4.0 / (1.0 + (-2.0 * (j - 3.0)).exp()) + noise).clamp(1.0, 5.0));
            r
        })
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j1", "rubric": "coherence", "anchors": rows}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "isotonic"})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let v = &app.get("/v1/cells/j1/coherence/calibrators").await.body["versions"][0];
    assert_eq!(
        (v["method"].clone(), v["active"].clone()),
        (json!("isotonic"), json!(true)),
        "{v}"
    );
    let eval = &v["evaluation"];
    assert_eq!(
        (eval["scheme"].clone(), eval["calibrated"]["n"].clone()),
        (json!("5-fold"), json!(400))
    );
    assert!(
        eval["calibrated"]["mae"].as_f64().unwrap() + 0.1 < eval["raw"]["mae"].as_f64().unwrap(),
        "{eval}"
    );
    let body = json!({"judge": "j1", "rubric": "coherence", "scores": [1.5, 3.0, 4.5]});
    let res = correct(&app, body.clone()).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["method"], "isotonic");
    let r = res.body["results"].as_array().unwrap();
    let c: Vec<f64> = r.iter().map(|x| x["corrected"].as_f64().unwrap()).collect();
    assert!(c[0] < c[1] && c[1] < c[2], "{c:?}");
    for (item, j) in r.iter().zip([1.5, 3.0, 4.5]) {
        let truth = 1.0 + 4.0 / (1.0 + (-2.0 * (j - 3.0_f64)).exp());
        let corrected = item["corrected"].as_f64().unwrap();
        assert!((corrected - truth).abs() < 0.25, "{item}");
        let (lo, hi) = (
            item["predictive"][0].as_f64().unwrap(),
            item["predictive"][1].as_f64().unwrap(),
        );
        // The noise is uniform on ±0.5: a 95% band of residuals is about ±0.48, a little wider
        // for the fit's own error, and clipped to the 1–5 scale (at 1.5 the band would reach
        // about 0.7, at 4.5 about 5.3).
        assert!(lo < corrected && corrected < hi, "{item}");
        if j < 2.0 {
            assert!(
                lo == 1.0 && (0.4..0.7).contains(&(hi - corrected)),
                "{item}"
            );
        } else if j > 4.0 {
            assert!(
                hi == 5.0 && (0.4..0.7).contains(&(corrected - lo)),
                "{item}"
            );
        } else {
            assert!((0.8..1.4).contains(&(hi - lo)), "{item}");
        }
        assert!(
            item.get("credible").is_none() && item.get("sigma").is_none(),
            "{item}"
        );
    }
    // A run's estimate takes the corrector's uncertainty from refits on resampled anchors:
    // the truth is the curve's mean over the run, within the interval; the noise is uniform
    // on ±0.5 (variance 1/12), and its share of the variance is about that over the run size.
    let run: Vec<f64> = (0..500).map(|i| 1.2 + 3.6 * i as f64 / 500.0).collect();
    let truth = run
        .iter()
        .map(|j| 1.0 + 4.0 / (1.0 + (-2.0 * (j - 3.0_f64)).exp()))
        .sum::<f64>()
        / 500.0;
    let est = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j1", "rubric": "coherence", "scores": run}),
        )
        .await;
    let e = &est.body;
    assert_eq!(est.status, 200, "{e}");
    assert_eq!(e["corrector_term"], "resampled", "{e}");
    let (lo, hi) = (
        e["interval"][0].as_f64().unwrap(),
        e["interval"][1].as_f64().unwrap(),
    );
    assert!(lo < truth && truth < hi, "{truth} outside {e}");
    let corrector = e["variance"]["corrector"].as_f64().unwrap();
    let sampling = e["variance"]["sampling"].as_f64().unwrap();
    assert!(corrector > 0.0, "{e}");
    assert!((sampling * 500.0 - 1.0 / 12.0).abs() < 0.03, "{e}");
    let mut app = app;
    let settings = app.settings.clone();
    let dir = app.take_dir();
    drop(app);
    let restarted = TestApp::on(settings, dir).await;
    assert_eq!(
        correct(&restarted, body).await.body["results"],
        res.body["results"]
    );
}

/// Corrections are clipped to the rubric's scale, which the service keeps in memory: a scale
/// widened after the version is served applies to the next request, without a restart.
async fn a_widened_scale_clips_the_next_correction(backend: Backend) {
    let app = TestApp::new(backend).await;
    let res = app
        .json("PUT", "/v1/rubrics/pct", &json!({"min": 0, "max": 100}))
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let rows: Vec<Value> = (0..60)
        .map(|i| {
            let j = 10.0 + i as f64;
            json!({"item_id": format!("p{i}"), "judge_score": j, "reference_score": j + 2.0})
        })
        .collect();
    let up = json!({"judge": "j1", "rubric": "pct", "anchors": rows});
    assert_eq!(app.json("POST", "/v1/anchors", &up).await.status, 200);
    let job = finished(
        &app,
        &train(&app, "j1", json!({"method": "identity"})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    // 120 lies outside the anchors' judge scores (10–69) but within one width of them.
    let body = json!({"judge": "j1", "rubric": "pct", "scores": [120.0]});
    let corrected = |res: &crate::common::Response| res.body["results"][0]["corrected"].clone();
    let res = correct(&app, body.clone()).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(corrected(&res), json!(100.0), "{}", res.body);
    let res = app
        .json("PUT", "/v1/rubrics/pct", &json!({"min": 0, "max": 200}))
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    // The identity version serves the raw score; its band (the anchors' residuals, all 2)
    // now fits inside the scale too.
    let res = correct(&app, body).await;
    assert_eq!(corrected(&res), json!(120.0), "{}", res.body);
    assert_eq!(res.body["results"][0]["predictive"], json!([122.0, 122.0]));
}

on_both_backends!(
    a_flow_version_corrects_with_sigma_and_review,
    a_widened_scale_clips_the_next_correction,
    auto_picks_the_held_out_winner_and_never_loses_to_the_raw_judge,
    an_isotonic_version_corrects_with_a_held_out_interval,
);
