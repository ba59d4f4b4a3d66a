//! Panels over HTTP, on both backends: defined, trained from their members' anchors joined on
//! item id, served by `/v1/correct` and `/v1/estimate` with `scores` items (also items some
//! member did not score), their members' weights and canaries as gauges, and every refusal
//! naming what to fix.

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};

use super::*;
use crate::common::{Backend, TestApp, assert_error};

/// An item: the three judges' scores and the reference. The quality has sd 0.6; judge `a` sees
/// it through noise of sd 0.3, `b` squeezed and offset with noise of sd 0.15 (also 0.3 in
/// quality units), and `noise` not at all; the reference is the quality plus noise of sd 0.18.
fn item(rng: &mut Normals) -> ([f64; 3], f64) {
    let q = 0.6 * rng.next();
    let js = [
        3.0 + q + 0.3 * rng.next(),
        2.0 + 0.5 * q + 0.15 * rng.next(),
        3.0 + 0.6 * rng.next(),
    ];
    (js, (3.0 + q + 0.18 * rng.next()).clamp(1.0, 5.0))
}

const JUDGES: [&str; 3] = ["a", "b", "noise"];

/// 160 anchor items per rubric, each scored by every judge.
async fn upload_members(app: &TestApp, rng: &mut Normals) {
    for rubric in ["r1", "r2"] {
        let items: Vec<([f64; 3], f64)> = (0..160).map(|_| item(rng)).collect();
        for (m, judge) in JUDGES.iter().enumerate() {
            let rows: Vec<Value> = items
                .iter()
                .enumerate()
                .map(|(i, (js, y))| {
                    json!({"item_id": format!("it-{i}"), "judge_score": js[m], "reference_score": y})
                })
                .collect();
            stored(
                app,
                json!({"judge": judge, "rubric": rubric, "anchors": rows}),
            )
            .await;
        }
    }
}

fn width(r: &Value) -> f64 {
    r["predictive"][1].as_f64().unwrap() - r["predictive"][0].as_f64().unwrap()
}

async fn a_panel_is_defined_trained_and_serves_its_members_fused(backend: Backend) {
    let app = TestApp::new(backend).await;
    let mut rng = Normals(0x9E37_79B9_7F4A_7C15);
    upload_members(&app, &mut rng).await;

    // Defined once, under a name no judge uses; read back and listed.
    let define = |name: &str, judges: Value| json!({"name": name, "judges": judges});
    let res = app
        .json("POST", "/v1/panels", &define("jury", json!(JUDGES)))
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    assert_eq!(res.body["judges"], json!(JUDGES));
    let again = app
        .json("POST", "/v1/panels", &define("jury", json!(["a", "b"])))
        .await;
    assert_error(&again, 409, "conflict");
    let judged = app
        .json("POST", "/v1/panels", &define("a", json!(["b", "noise"])))
        .await;
    assert_error(&judged, 409, "conflict");
    for (judges, field) in [
        (json!(["a"]), "judges"),
        (json!(["a", "b", "a"]), "judges[2]"),
    ] {
        let bad = app
            .json("POST", "/v1/panels", &define("solo", judges))
            .await;
        let details = assert_error(&bad, 422, "invalid_input");
        assert_eq!(details[0]["field"], field, "{details:?}");
    }
    assert_eq!(app.get("/v1/panels/jury").await.body["name"], "jury");
    assert_eq!(
        app.get("/v1/panels").await.body["panels"][0]["name"],
        "jury"
    );
    assert_error(&app.get("/v1/panels/nobody").await, 404, "not_found");

    // A panel holds no anchors of its own.
    let up = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "jury", "rubric": "r1", "anchors": [{"item_id": "x", "judge_score": 3, "reference_score": 3}]}),
        )
        .await;
    let details = assert_error(&up, 409, "conflict");
    assert_eq!(details[0]["field"], "judge", "{details:?}");

    // Trained with `auto`: the members' anchors join on item id.
    let job = finished(&app, &train(&app, "jury", json!({"method": "auto"})).await).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let single = finished(&app, &train(&app, "a", json!({"method": "auto"})).await).await;
    assert_eq!(single["state"], "succeeded", "{single}");
    for rubric in ["r1", "r2"] {
        let list = app
            .get(&format!("/v1/cells/jury/{rubric}/calibrators"))
            .await;
        assert_eq!(list.status, 200, "{}", list.body);
        let v = &list.body["versions"][0];
        assert_eq!(v["anchor_count"], 160, "{v}");
        let panel = &v["panel"];
        assert_eq!(panel["members"], json!(JUDGES), "{v}");
        // The two informative members together beat either alone on held-out error, so
        // `auto` serves the whole panel; the noise judge's weight is nothing.
        assert_eq!(panel["input"], json!(JUDGES), "{panel}");
        assert_eq!(panel["considered"].as_array().unwrap().len(), 4, "{panel}");
        let canaries: Vec<&Value> = panel["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| &w["canary"])
            .collect();
        assert_eq!(
            canaries,
            [&json!(false), &json!(false), &json!(true)],
            "{panel}"
        );
    }

    // The panel's picture is drawn from its fused anchors (its members' cells hold them, the
    // panel's none): 160 of them, with the fitted curve and its band.
    let report = app.get("/v1/cells/jury/r1/report.svg").await;
    assert_eq!(report.status, 200);
    let svg = report.body.as_str().unwrap();
    for text in [
        "panel jury/r1: version 1",
        "160 anchors",
        "fused score",
        "fitted",
        "95% predictive band",
    ] {
        assert!(
            svg.contains(text),
            "{text} missing: {}",
            &svg[..600.min(svg.len())]
        );
    }
    assert!(
        svg.matches("<circle").count() >= 320,
        "anchors and residuals drawn"
    );

    // Fresh items: the panel's corrected scores are closer to the references than judge a's
    // alone: the residual variance is 0.18² plus the quality's posterior variance given the
    // scores, 1/(1/0.36 + 2/0.09) ≈ 0.040 with a and b against 1/(1/0.36 + 1/0.09) ≈ 0.072
    // with a alone (residual sd 0.27 against 0.32).
    let fresh: Vec<([f64; 3], f64)> = (0..400).map(|_| item(&mut rng)).collect();
    let truth: Vec<f64> = fresh.iter().map(|(_, y)| *y).collect();
    let items: Vec<Value> = fresh
        .iter()
        .map(|(js, _)| json!({"scores": {"a": js[0], "b": js[1], "noise": js[2]}}))
        .collect();
    let panel = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "jury", "rubric": "r1", "items": items}),
        )
        .await;
    assert_eq!(panel.status, 200, "{}", panel.body);
    let alone = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "a", "rubric": "r1", "scores": fresh.iter().map(|(js, _)| js[0]).collect::<Vec<_>>()}),
        )
        .await;
    assert_eq!(alone.status, 200, "{}", alone.body);
    let (p, s) = (
        mae(&panel.body["results"], &truth),
        mae(&alone.body["results"], &truth),
    );
    assert!(p < s, "panel MAE {p} vs judge a's {s}");

    // Items missing a member are corrected from the members present, by their sub-panel's
    // own posterior: without b the band widens (residual sd about 0.32, as a's alone), without
    // the noise judge it hardly moves (about 0.27).
    let without = |judge: &str| -> Vec<Value> {
        let m = JUDGES.iter().position(|j| *j == judge).unwrap();
        fresh
            .iter()
            .map(|(js, _)| {
                let scores: serde_json::Map<String, Value> = JUDGES
                    .iter()
                    .zip(js)
                    .enumerate()
                    .filter(|(k, _)| *k != m)
                    .map(|(_, (j, s))| ((*j).to_owned(), json!(s)))
                    .collect();
                json!({"scores": scores})
            })
            .collect()
    };
    let mut widths = Vec::new();
    for (judge, present) in [("b", json!(["a", "noise"])), ("noise", json!(["a", "b"]))] {
        let part = app
            .json(
                "POST",
                "/v1/correct",
                &json!({"judge": "jury", "rubric": "r1", "items": without(judge)}),
            )
            .await;
        assert_eq!(part.status, 200, "{}", part.body);
        let results = part.body["results"].as_array().unwrap();
        assert_eq!(results[0]["members"], present);
        widths.push(results.iter().map(width).sum::<f64>() / results.len() as f64);
        // Never narrower than a complete item's band at the same fused score (the floor);
        // without the floor, items missing the noise judge got 2.34 against 2.91.
        let complete = panel.body["results"].as_array().unwrap();
        // Bands clipped at the scale's ends are not comparable by width.
        let inside = |r: &&Value| {
            let (lo, hi) = (
                r["predictive"][0].as_f64().unwrap(),
                r["predictive"][1].as_f64().unwrap(),
            );
            lo > 1.0 && hi < 5.0
        };
        let complete: Vec<&Value> = complete.iter().filter(inside).collect();
        for r in results.iter().filter(inside) {
            let s = r["judge_score"].as_f64().unwrap();
            let nearest = complete
                .iter()
                .copied()
                .min_by(|x, y| {
                    let d = |v: &Value| (v["judge_score"].as_f64().unwrap() - s).abs();
                    d(x).total_cmp(&d(y))
                })
                .unwrap();
            assert!(
                width(r) >= width(nearest) - 0.02,
                "without {judge}: {r} narrower than {nearest}"
            );
        }
    }
    assert!(widths[0] > 1.1 * widths[1], "{widths:?}");
    let whole = panel.body["results"].as_array().unwrap();
    assert!(whole[0].get("members").is_none(), "{}", whole[0]);

    // Refusals name the row and field.
    let stranger = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "jury", "rubric": "r1", "items": [{"scores": {"a": 3.0}}, {"scores": {"zed": 3.0}}]}),
        )
        .await;
    let details = assert_error(&stranger, 422, "invalid_input");
    assert_eq!(
        (details[0]["row"].clone(), details[0]["field"].clone()),
        (json!(2), json!("scores.zed")),
        "{details:?}"
    );
    let bare = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "jury", "rubric": "r1", "scores": [3.0]}),
        )
        .await;
    assert_error(&bare, 422, "invalid_input");
    let judge_items = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "a", "rubric": "r1", "items": [{"scores": {"a": 3.0}}]}),
        )
        .await;
    assert_error(&judge_items, 422, "invalid_input");

    // A run's de-biased mean from panel items: its interval holds the run's reference mean.
    let run: Vec<Value> = fresh[..200]
        .iter()
        .map(|(js, _)| json!({"scores": {"a": js[0], "b": js[1], "noise": js[2]}}))
        .collect();
    let est = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "jury", "rubric": "r1", "items": run}),
        )
        .await;
    assert_eq!(est.status, 200, "{}", est.body);
    let truth_mean = truth[..200].iter().sum::<f64>() / 200.0;
    let (lo, hi) = (
        est.body["interval"][0].as_f64().unwrap(),
        est.body["interval"][1].as_f64().unwrap(),
    );
    assert!(
        lo <= truth_mean && truth_mean <= hi,
        "{truth_mean} outside [{lo}, {hi}]"
    );
    // The same items without judge b: each carries its sub-panel's larger residual variance
    // (it was fed to the corrector as a whole item's, with a whole item's noise), so the
    // interval is wider, and it says what it assumes of the missing scores.
    let partial = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "jury", "rubric": "r1", "items": without("b")[..200].to_vec()}),
        )
        .await;
    assert_eq!(partial.status, 200, "{}", partial.body);
    let span = |v: &Value| v["interval"][1].as_f64().unwrap() - v["interval"][0].as_f64().unwrap();
    assert!(
        span(&partial.body) > 1.05 * span(&est.body),
        "{} vs {}",
        partial.body,
        est.body
    );
    let warned = partial.body["warnings"].to_string();
    assert!(warned.contains("missing at random"), "{warned}");

    // A compare pairs panel items by id: a run against itself differs by exactly 0; a ranking
    // puts the run every member scored a point higher first.
    let with_ids = |shift: f64| -> Vec<Value> {
        fresh[..200]
            .iter()
            .enumerate()
            .map(|(i, (js, _))| {
                json!({"id": format!("f{i}"), "scores": {"a": js[0] + shift, "b": js[1] + shift, "noise": js[2] + shift}})
            })
            .collect()
    };
    let same = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "jury", "rubric": "r1", "a": {"items": with_ids(0.0)}, "b": {"items": with_ids(0.0)}}),
        )
        .await;
    assert_eq!(same.status, 200, "{}", same.body);
    assert_eq!(
        (same.body["paired"].clone(), same.body["pairs"].clone()),
        (json!(true), json!(200))
    );
    assert!(
        same.body["difference"].as_f64().unwrap().abs() < 1e-9,
        "{}",
        same.body
    );
    let ranked = app
        .json(
            "POST",
            "/v1/rank",
            &json!({"judge": "jury", "rubric": "r1", "runs": [
                {"name": "low", "items": with_ids(0.0)}, {"name": "high", "items": with_ids(1.0)}]}),
        )
        .await;
    assert_eq!(ranked.status, 200, "{}", ranked.body);
    assert_eq!(
        ranked.body["order"],
        json!(["high", "low"]),
        "{}",
        ranked.body
    );

    // The members' weights and canaries are gauges.
    let text = app
        .send(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .body;
    let text = text.as_str().unwrap();
    assert!(
        text.contains(r#"judgecal_panel_member_canary{judge="jury",member="noise",rubric="r1"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"judgecal_panel_member_canary{judge="jury",member="a",rubric="r2"} 0"#),
        "{text}"
    );

    // Which judges to call: the noise judge only adds cost, so with labels dear the cheapest
    // sub-panel is a and b, which needs fewer labels than a or b alone.
    let ask = |costs: Value| {
        json!({"rubric": "r1", "run_size": 1000, "target_half_width": 0.03,
               "costs": costs, "label_cost": 50})
    };
    let plan = app
        .json("POST", "/v1/panels/jury/plan", &ask(json!({"noise": 1})))
        .await;
    assert_eq!(plan.status, 200, "{}", plan.body);
    assert_eq!(plan.body["sub_panels"].as_array().unwrap().len(), 7);
    assert_eq!(
        plan.body["cheapest"]["judges"],
        json!(["a", "b"]),
        "{}",
        plan.body
    );
    assert!(
        plan.body["labels_saved"].as_i64().unwrap() > 0,
        "{}",
        plan.body
    );
    let effective = plan.body["effective_judges"].as_f64().unwrap();
    assert!((1.0..=3.0).contains(&effective), "{}", plan.body);
    let stranger = app
        .json("POST", "/v1/panels/jury/plan", &ask(json!({"zed": 1})))
        .await;
    let details = assert_error(&stranger, 422, "invalid_input");
    assert_eq!(details[0]["field"], "costs.zed", "{details:?}");

    // Deleted, it serves no more.
    let gone = app
        .send(
            app.request("DELETE", "/v1/panels/jury")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(gone.status, 204);
    let after = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "jury", "rubric": "r1", "items": [{"scores": {"a": 3.0}}]}),
        )
        .await;
    assert_error(&after, 404, "not_found");
}

async fn a_panel_whose_members_are_not_in_name_order_fits_each_members_own_scores(
    backend: Backend,
) {
    // The job stores the members' versions by name; a panel listed in another order once
    // fitted each column to another member's scores and served them under the wrong names.
    let app = TestApp::new(backend).await;
    let mut rng = Normals(0x0DDB_A11C_0FFE_E123);
    upload_members(&app, &mut rng).await;
    defined(&app, "jury", json!(["noise", "b", "a"])).await;
    let job = finished(
        &app,
        &train(&app, "jury", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(
        job["request"]["member_versions"],
        json!({"a": null, "b": null, "noise": null})
    );
    let versions = app.get("/v1/cells/jury/r1/calibrators").await;
    let panel = &versions.body["versions"][0]["panel"];
    assert_eq!(panel["members"], json!(["noise", "b", "a"]), "{panel}");
    for w in panel["weights"].as_array().unwrap() {
        assert_eq!(w["canary"], w["judge"] == "noise", "{panel}");
    }
    // Served by name: items whose `noise` score is wild get the same corrected score.
    let correct = |noise: f64| {
        let app = &app;
        async move {
            let res = app
                .json(
                    "POST",
                    "/v1/correct",
                    &json!({"judge": "jury", "rubric": "r1",
                            "items": [{"scores": {"a": 3.4, "b": 2.2, "noise": noise}}]}),
                )
                .await;
            assert_eq!(res.status, 200, "{}", res.body);
            res.body["results"][0]["corrected"].as_f64().unwrap()
        }
    };
    let (low, high) = (correct(1.5).await, correct(4.5).await);
    assert!((low - high).abs() < 0.15, "{low} vs {high}");
}

async fn members_whose_references_disagree_are_refused_naming_the_items(backend: Backend) {
    let app = TestApp::new(backend).await;
    for (judge, y) in [("a", 3.0), ("b", 3.5)] {
        let rows: Vec<Value> = (0..40)
            .map(|i| {
                let y = if i == 7 { y } else { 3.0 };
                json!({"item_id": format!("it-{i}"), "judge_score": 2.0 + (i % 5) as f64 * 0.5, "reference_score": y})
            })
            .collect();
        stored(
            &app,
            json!({"judge": judge, "rubric": "r1", "anchors": rows}),
        )
        .await;
    }
    defined(&app, "pair", json!(["a", "b"])).await;
    let refused = app
        .json(
            "POST",
            "/v1/judges/pair/calibrations",
            &json!({"method": "bayes"}),
        )
        .await;
    let details = assert_error(&refused, 409, "conflict");
    assert_eq!(details.len(), 1, "{details:?}");
    assert!(
        details[0]["problem"]
            .as_str()
            .unwrap()
            .contains(r#"item "it-7""#),
        "{details:?}"
    );
}

/// A member's partial re-score under a new judge version leaves the panel on the anchors its
/// members are served with (the unversioned ones); the request may name a member's version,
/// and every refusal names the member and version.
async fn a_panel_fits_the_judge_versions_its_members_are_served_by(backend: Backend) {
    let app = TestApp::new(backend).await;
    let mut rng = Normals(0x2545_F491_4F6C_DD1D);
    let items: Vec<([f64; 3], f64)> = (0..60).map(|_| item(&mut rng)).collect();
    let rows = |m: usize, n: usize| -> Vec<Value> {
        items[..n]
            .iter()
            .enumerate()
            .map(|(i, (js, y))| json!({"item_id": format!("it-{i}"), "judge_score": js[m], "reference_score": y}))
            .collect()
    };
    for (judge, version, m, n) in [
        ("a", None, 0, 60),
        ("b", None, 1, 60),
        ("b", Some("v2"), 1, 2),
    ] {
        stored(&app, json!({"judge": judge, "rubric": "r1", "judge_version": version, "anchors": rows(m, n)})).await;
    }
    defined(&app, "duo", json!(["a", "b"])).await;

    // By default each member's unversioned anchors, as its untagged requests are served: the
    // join keeps all 60 items (b's newest version, 2 re-scored items, would keep 2).
    let job = finished(
        &app,
        &train(&app, "duo", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(
        job["request"]["member_versions"],
        json!({"a": null, "b": null}),
        "{job}"
    );
    assert_eq!(
        job["detail"]["joined"]["r1"],
        json!({"items": 60, "member_anchors": [60, 60]}),
        "{job}"
    );
    let v = &app.get("/v1/cells/duo/r1/calibrators").await.body["versions"][0];
    assert_eq!(v["anchor_count"], 60, "{v}");
    assert_eq!(v["panel"]["member_versions"], json!([null, null]), "{v}");
    assert_eq!(v["panel"]["member_anchors"], json!([60, 60]), "{v}");

    // Named per member: b's v2 joins 2 items, too few, and the refusal says whose anchors.
    let refuse = |body: Value| {
        let app = &app;
        async move { app.json("POST", "/v1/judges/duo/calibrations", &body).await }
    };
    let few = refuse(json!({"method": "bayes", "member_versions": {"b": "v2"}})).await;
    let details = assert_error(&few, 422, "invalid_input");
    let text = details[0]["problem"].as_str().unwrap();
    assert!(
        text.contains("has 2 items")
            && text.contains("a (unversioned): 60, b (judge version v2): 2"),
        "{details:?}"
    );
    for (body, field, says) in [
        (
            json!({"method": "bayes", "member_versions": {"zed": null}}),
            "member_versions.zed",
            "its members: a, b",
        ),
        (
            json!({"method": "bayes", "member_versions": {"b": "v9"}}),
            "member_versions.b",
            r#"it has: (none), "v2""#,
        ),
        (
            json!({"method": "bayes", "judge_version": "v2"}),
            "judge_version",
            "member_versions",
        ),
    ] {
        let res = refuse(body).await;
        let details = assert_error(&res, 422, "invalid_input");
        assert_eq!(details[0]["field"], field, "{details:?}");
        assert!(
            details[0]["problem"].as_str().unwrap().contains(says),
            "{details:?}"
        );
    }

    // b re-scores every item under v2, and the panel is trained on it by name. The panel's
    // requests name no member version, and b's untagged scores are read as its unversioned
    // anchors' (as a training by default fits them): untagged requests stay with version 1,
    // trained on those, as a judge's stay with its unversioned calibration (before, version 2
    // took them over silently). Pinned, version 2 answers and says what it assumed.
    stored(
        &app,
        json!({"judge": "b", "rubric": "r1", "judge_version": "v2", "anchors": rows(1, 60)}),
    )
    .await;
    let item = json!({"judge": "duo", "rubric": "r1", "items": [{"scores": {"a": 3.0, "b": 3.2}}]});
    let before = correct(&app, item.clone()).await;
    assert_eq!(before.status, 200, "{}", before.body);
    assert_eq!(before.body["warnings"], json!([]), "{}", before.body);
    trained(
        &app,
        "duo",
        json!({"method": "bayes", "options": quick(), "member_versions": {"b": "v2"}}),
    )
    .await;
    let after = correct(&app, item.clone()).await;
    assert_eq!(after.status, 200, "{}", after.body);
    assert_eq!(after.body["version"], 1, "{}", after.body);
    assert_eq!(after.body["warnings"], json!([]), "{}", after.body);
    assert_eq!(
        after.body["items"][0]["corrected"], before.body["items"][0]["corrected"],
        "{}",
        after.body
    );
    let mut pinned = item;
    pinned["version"] = json!(2);
    let pinned = correct(&app, pinned).await;
    assert_eq!(pinned.status, 200, "{}", pinned.body);
    assert_eq!(pinned.body["version"], 2, "{}", pinned.body);
    let w = &pinned.body["warnings"][0];
    assert_eq!(w["code"], "member_version_mismatch", "{}", pinned.body);
    let text = w["message"].as_str().unwrap();
    assert!(
        text.contains("b: trained on judge_version v2, its untagged scores read as (none)"),
        "{text}"
    );
}

/// Twelve judges seeing a quality of sd 0.6 through noise of sd 0.3 to 0.85; the reference is
/// the quality plus noise of sd 0.2. 400 anchor items.
fn twelve(rng: &mut Normals) -> (Vec<f64>, f64) {
    let q = 0.6 * rng.next();
    let js = (0..12)
        .map(|k| 3.0 + q + (0.3 + 0.05 * k as f64) * rng.next())
        .collect();
    (js, 3.0 + q + 0.2 * rng.next())
}

async fn a_twelve_member_panel_is_trained_and_serves_items_missing_any_members(backend: Backend) {
    let app = TestApp::new(backend).await;
    let mut rng = Normals(0x1234_5678_9abc);
    let judges: Vec<String> = (0..12).map(|k| format!("m{k}")).collect();
    let items: Vec<(Vec<f64>, f64)> = (0..400).map(|_| twelve(&mut rng)).collect();
    for (k, judge) in judges.iter().enumerate() {
        let rows: Vec<Value> = items
            .iter()
            .enumerate()
            .map(|(i, (js, y))| json!({"item_id": format!("it-{i}"), "judge_score": js[k], "reference_score": y}))
            .collect();
        stored(
            &app,
            json!({"judge": judge, "rubric": "r1", "anchors": rows}),
        )
        .await;
    }
    let mut thirteen = judges.clone();
    thirteen.push("m12".into());
    let refused = app
        .json(
            "POST",
            "/v1/panels",
            &json!({"name": "big", "judges": thirteen}),
        )
        .await;
    let details = assert_error(&refused, 422, "invalid_input");
    assert!(
        details[0]["problem"].as_str().unwrap().contains("2 to 12"),
        "{details:?}"
    );
    defined(&app, "jury", json!(judges)).await;
    let job = finished(
        &app,
        &train(&app, "jury", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");

    // Fresh items, each member's score missing with probability 1/4: every item is served by
    // the members present, its band at least a complete item's at the same score, and the
    // bands cover about 95%.
    let fresh: Vec<(Vec<f64>, f64)> = (0..400).map(|_| twelve(&mut rng)).collect();
    let mut partial = 0;
    let scores: Vec<Value> = fresh
        .iter()
        .map(|(js, _)| {
            let kept: serde_json::Map<String, Value> = judges
                .iter()
                .zip(js)
                .filter(|_| rng.uniform() > 0.25)
                .map(|(j, s)| (j.clone(), json!(s)))
                .collect();
            partial += usize::from(kept.len() < 12);
            json!({"scores": kept})
        })
        .filter(|v| !v["scores"].as_object().unwrap().is_empty())
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "jury", "rubric": "r1", "items": scores}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let results = res.body["results"].as_array().unwrap();
    assert_eq!(results.len(), scores.len());
    let mut inside = 0;
    for (r, (sent, (_, y))) in results.iter().zip(scores.iter().zip(&fresh)) {
        let present = sent["scores"].as_object().unwrap().len();
        if present < 12 {
            assert_eq!(r["members"].as_array().map(Vec::len), Some(present), "{r}");
        }
        let (lo, hi) = (
            r["predictive"][0].as_f64().unwrap(),
            r["predictive"][1].as_f64().unwrap(),
        );
        inside += usize::from((lo..=hi).contains(y));
    }
    assert!(partial > 350, "{partial}");
    // The same items with every member's score: the version's own band.
    let complete: Vec<Value> = fresh
        .iter()
        .map(|(js, _)| json!({"scores": judges.iter().zip(js).map(|(j, s)| (j.clone(), json!(s))).collect::<serde_json::Map<_, _>>()}))
        .collect();
    let res = app
        .json(
            "POST",
            "/v1/correct",
            &json!({"judge": "jury", "rubric": "r1", "items": complete}),
        )
        .await;
    let whole_inside = res.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&fresh)
        .filter(|(r, (_, y))| {
            r["predictive"][0].as_f64().unwrap() <= *y && *y <= r["predictive"][1].as_f64().unwrap()
        })
        .count();
    let whole_rate = whole_inside as f64 / fresh.len() as f64;
    eprintln!("complete items: {:.1}% covered", 100.0 * whole_rate);
    assert!((0.93..=0.99).contains(&whole_rate), "{whole_rate}");
    let rate = inside as f64 / results.len() as f64;
    eprintln!(
        "12 members: {} fresh items, {partial} missing some member, {:.1}% covered",
        results.len(),
        100.0 * rate
    );
    // Partial items' bands are their sub-panel's stretched as the version's complete band
    // stretches the full panel's, and floored at it: never narrow, and here about 3 points
    // wide (the stretch carries the cross-fitting's extra noise to sub-panels that need less).
    assert!((0.93..=0.995).contains(&rate), "{rate}");

    // The plan weighs every sub-panel and lists each member alone, the cheapest of each size
    // and the full panel.
    let plan = app
        .json(
            "POST",
            "/v1/panels/jury/plan",
            &json!({"rubric": "r1", "run_size": 1000, "target_half_width": 0.03, "label_cost": 20}),
        )
        .await;
    assert_eq!(plan.status, 200, "{}", plan.body);
    let listed = plan.body["sub_panels"].as_array().unwrap();
    assert!((13..=24).contains(&listed.len()), "{}", plan.body);
    let cheapest = plan.body["cheapest"]["total_cost"].as_f64().unwrap();
    assert!(
        listed
            .iter()
            .all(|s| s["total_cost"].as_f64().unwrap() >= cheapest - 1e-9)
    );
}

/// An item of system `g`: the quality has sd 0.6; member `biased` sees it through noise of sd
/// 0.2 and over-rates each system by its own amount, `b` and `c` through noise of sd 0.4
/// without; the reference is the quality plus noise of sd 0.2.
fn of_system(rng: &mut Normals, g: usize) -> ([f64; 3], f64) {
    let bias = [-0.6, -0.2, 0.2, 0.6];
    let q = 0.6 * rng.next();
    let js = [
        3.0 + q + bias[g] + 0.2 * rng.next(),
        3.0 + q + 0.4 * rng.next(),
        3.0 + 0.8 * q + 0.4 * rng.next(),
    ];
    (js, (3.0 + q + 0.2 * rng.next()).clamp(1.0, 5.0))
}

async fn a_run_missing_the_member_biased_per_system_keeps_its_systems_shift(backend: Backend) {
    let app = TestApp::new(backend).await;
    let mut rng = Normals(0x51ED_2701_AB3C_99E1);
    let members = ["biased", "b", "c"];
    let items: Vec<(usize, [f64; 3], f64)> = (0..4)
        .flat_map(|g| (0..100).map(move |_| g))
        .map(|g| {
            let (js, y) = of_system(&mut rng, g);
            (g, js, y)
        })
        .collect();
    for (m, judge) in members.iter().enumerate() {
        let rows: Vec<Value> = items
            .iter()
            .enumerate()
            .map(|(i, (g, js, y))| {
                json!({"item_id": format!("it-{i}"), "judge_score": js[m],
                       "reference_score": y, "group": format!("s{g}")})
            })
            .collect();
        stored(
            &app,
            json!({"judge": judge, "rubric": "r1", "anchors": rows}),
        )
        .await;
    }
    defined(&app, "jury", json!(members)).await;
    let job = finished(
        &app,
        &train(&app, "jury", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    // One run of the most over-rated system, sent whole and then without `biased`'s scores:
    // the partial run's items lack that member's bias, and the answer puts it back.
    let run: Vec<([f64; 3], f64)> = (0..400).map(|_| of_system(&mut rng, 3)).collect();
    let estimate = |drop: bool| {
        let items: Vec<Value> = run
            .iter()
            .map(|(js, _)| {
                let mut scores = json!({"b": js[1], "c": js[2]});
                if !drop {
                    scores["biased"] = json!(js[0]);
                }
                json!({"scores": scores})
            })
            .collect();
        let app = &app;
        async move {
            let res = app
                .json(
                    "POST",
                    "/v1/estimate",
                    &json!({"judge": "jury", "rubric": "r1", "items": items, "group": "s3"}),
                )
                .await;
            assert_eq!(res.status, 200, "{}", res.body);
            res.body
        }
    };
    let truth = run.iter().map(|(_, y)| y).sum::<f64>() / run.len() as f64;
    let (whole, partial) = (estimate(false).await, estimate(true).await);
    let (w, p) = (
        whole["estimate"].as_f64().unwrap(),
        partial["estimate"].as_f64().unwrap(),
    );
    eprintln!("system s3: truth {truth:.3}, whole run {w:.3}, run without `biased` {p:.3}");
    // Without the shift the partial run reads about 0.3 low (the whole panel's group term
    // takes off a bias its fused scores no longer carry).
    assert!((p - w).abs() < 0.08, "whole {w} vs partial {p}");
    for body in [&whole, &partial] {
        let (lo, hi) = (
            body["interval"][0].as_f64().unwrap(),
            body["interval"][1].as_f64().unwrap(),
        );
        assert!(lo <= truth && truth <= hi, "{truth} outside {body}");
    }
}

async fn a_panel_run_missing_a_member_where_it_would_score_low_is_refused_naming_it(
    backend: Backend,
) {
    let app = TestApp::new(backend).await;
    let mut rng = Normals(0x2545_F491_4F6C_DD1D);
    upload_members(&app, &mut rng).await;
    defined(&app, "jury", json!(JUDGES)).await;
    let job = finished(
        &app,
        &train(&app, "jury", json!({"method": "bayes", "options": quick()})).await,
    )
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let fresh: Vec<([f64; 3], f64)> = (0..200).map(|_| item(&mut rng)).collect();
    // Judge a's score dropped where `keep` says no (the other two always sent).
    let run = |keep: &dyn Fn(usize, f64) -> bool| -> Vec<Value> {
        fresh
            .iter()
            .enumerate()
            .map(|(i, (js, _))| {
                let mut scores = json!({"b": js[1], "noise": js[2]});
                if keep(i, js[0]) {
                    scores["a"] = json!(js[0]);
                }
                json!({"id": format!("f{i}"), "scores": scores})
            })
            .collect()
    };
    // a fails on hard items: four in five of its scores below 3 are missing. On those items
    // b, which tracks the same quality, scores lower too: the run is refused, naming a.
    let low = run(&|i, a| a >= 3.0 || i % 5 == 0);
    let estimate = |items: &Vec<Value>, assume: bool| {
        let mut body = json!({"judge": "jury", "rubric": "r1", "items": items});
        if assume {
            body["assume_missing_at_random"] = json!(true);
        }
        let app = &app;
        async move { app.json("POST", "/v1/estimate", &body).await }
    };
    let refused = estimate(&low, false).await;
    let details = assert_error(&refused, 422, "invalid_input");
    assert_eq!(details[0]["field"], "items", "{details:?}");
    let message = details[0]["problem"].as_str().unwrap();
    assert!(message.starts_with("a's scores look missing"), "{message}");
    assert!(message.contains("assume_missing_at_random"), "{message}");
    // In a compare the run is named by its side.
    let whole = run(&|_, _| true);
    let compared = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "jury", "rubric": "r1", "a": {"items": whole}, "b": {"items": low}}),
        )
        .await;
    let details = assert_error(&compared, 422, "invalid_input");
    assert_eq!(details[0]["field"], "b.items", "{details:?}");
    // Told that the absence depends only on what the others scored, the service answers,
    // saying what it assumed.
    let assumed = estimate(&low, true).await;
    assert_eq!(assumed.status, 200, "{}", assumed.body);
    assert!(
        assumed.body["warnings"]
            .to_string()
            .contains("missing at random"),
        "{}",
        assumed.body
    );
    // a's scores missing on every third item, whatever they are: answered.
    let at_random = estimate(&run(&|i, _| i % 3 != 0), false).await;
    assert_eq!(at_random.status, 200, "{}", at_random.body);
}

on_both_backends!(
    a_panel_run_missing_a_member_where_it_would_score_low_is_refused_naming_it,
    a_panel_whose_members_are_not_in_name_order_fits_each_members_own_scores,
    a_run_missing_the_member_biased_per_system_keeps_its_systems_shift,
    a_twelve_member_panel_is_trained_and_serves_items_missing_any_members,
    a_panel_is_defined_trained_and_serves_its_members_fused,
    a_panel_fits_the_judge_versions_its_members_are_served_by,
    members_whose_references_disagree_are_refused_naming_the_items,
);
