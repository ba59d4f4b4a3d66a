//! Covariates over HTTP, on both backends: anchors carry them (JSON `covariates`, CSV
//! `covariate.<name>`), stored and compared as part of a row; a training that names them fits
//! the input layer, whose coefficient covers its closed-form truth; `/v1/correct` corrects each
//! item at its own covariates; and every refusal names its row and field.

use serde_json::{Value, json};

use super::*;
use crate::common::{Backend, TestApp, assert_error};

/// The judge rewards length: quality q ~ N(3, 0.6²), log length ~ N(ln 400, 0.5²) apart from
/// it, and the judge scores q + 0.3·u + N(0, 0.3²), u the log length in sd units. The
/// reference is q + N(0, 0.15²). In closed form E[y | j, u] = 3 + 0.8·(j − 3 − 0.3·u): the
/// judge's weight is 0.8 and log length's −0.24 per sd.
const WEIGHT: f64 = 0.8;
const PER_SD: f64 = -0.24;

struct Item {
    judge: f64,
    length: f64,
    reference: f64,
    /// E[y | judge score, length].
    truth: f64,
}

fn item(rng: &mut Normals) -> Item {
    item_at(rng, 0.0)
}

/// An item whose log length sits `shift` sd from the anchors' centre, give or take 0.3 sd: the
/// closed form holds whatever the lengths' law, as length is drawn apart from quality.
fn item_at(rng: &mut Normals, shift: f64) -> Item {
    let q = 3.0 + 0.6 * rng.next();
    let u = if shift == 0.0 {
        rng.next()
    } else {
        shift + 0.3 * rng.next()
    };
    let judge = q + 0.3 * u + 0.3 * rng.next();
    Item {
        judge,
        length: (400f64.ln() + 0.5 * u).exp().round(),
        reference: q + 0.15 * rng.next(),
        truth: 3.0 + WEIGHT * (judge - 3.0) + PER_SD * u,
    }
}

/// The sd units of a rounded length (what the closed form's u is).
fn units(length: f64) -> f64 {
    (length.ln() - 400f64.ln()) / 0.5
}

/// `n` items as JSON anchor rows with ids `{prefix}{i}`, their length as a covariate.
fn rows(items: &[Item], prefix: &str) -> Vec<Value> {
    items
        .iter()
        .enumerate()
        .map(|(i, it)| {
            json!({"item_id": format!("{prefix}{i}"), "judge_score": it.judge,
                   "reference_score": it.reference.clamp(1.0, 5.0),
                   "covariates": {"length": it.length}})
        })
        .collect()
}

async fn a_length_biased_judge_is_corrected_at_each_items_length(backend: Backend) {
    let app = TestApp::new(backend).await;
    let mut rng = Normals(0x5eed_c0de);
    // Rubric r1 as JSON, r2 as CSV with a covariate column: both feed one pooled fit.
    let r1: Vec<Item> = (0..400).map(|_| item(&mut rng)).collect();
    stored(
        &app,
        json!({"judge": "j", "rubric": "r1", "anchors": rows(&r1, "a-")}),
    )
    .await;
    let r2: Vec<Item> = (0..200).map(|_| item(&mut rng)).collect();
    let mut csv =
        String::from("judge,rubric,item_id,judge_score,reference_score,covariate.length\n");
    for (i, it) in r2.iter().enumerate() {
        csv.push_str(&format!(
            "j,r2,b-{i},{},{},{}\n",
            it.judge,
            it.reference.clamp(1.0, 5.0),
            it.length
        ));
    }
    let res = app.csv("/v1/anchors", &csv).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let listed = app.get("/v1/cells/j/r2/anchors?limit=1").await;
    assert_eq!(
        listed.body["anchors"][0]["covariates"]["length"].as_f64(),
        Some(r2[0].length),
        "{}",
        listed.body
    );

    // Without covariates (version 1), then with them (version 2).
    trained(
        &app,
        "j",
        json!({"method": "bayes", "covariates": [], "options": quick()}),
    )
    .await;
    trained(
        &app,
        "j",
        json!({"method": "bayes", "covariates": ["length"], "options": quick()}),
    )
    .await;
    let versions = app.get("/v1/cells/j/r1/calibrators").await;
    assert_eq!(versions.status, 200, "{}", versions.body);
    let v2 = &versions.body["versions"][0];
    assert_eq!(v2["version"], 2);
    let layer = &v2["covariates"];
    assert_eq!(layer["inputs"][0]["name"], "length", "{layer}");
    assert_eq!(layer["inputs"][0]["transform"], "log", "{layer}");
    let c = &layer["coefficients"][0];
    let (lo, hi) = (
        c["per_sd_lo"].as_f64().unwrap(),
        c["per_sd_hi"].as_f64().unwrap(),
    );
    // The layer standardises log length by the anchors' sd (about the world's 0.5).
    let scale = layer["inputs"][0]["scale"].as_f64().unwrap();
    let truth = PER_SD * scale / 0.5;
    assert!(lo <= truth && truth <= hi && hi < 0.0, "{truth} vs {c}");
    let (wlo, whi) = (
        layer["judge_weight_lo"].as_f64().unwrap(),
        layer["judge_weight_hi"].as_f64().unwrap(),
    );
    assert!(wlo <= WEIGHT && WEIGHT <= whi, "{layer}");
    assert!(versions.body["versions"][1]["covariates"].is_null());

    // /v1/correct at each item's own length: a longer answer of the same judge score is worth
    // less, by the closed form's amount.
    let at = |length: f64| json!({"score": 3.5, "covariates": {"length": length}});
    let res = correct(
        &app,
        json!({"judge": "j", "rubric": "r1", "items": [at(200.0), at(800.0)]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["version"], 2);
    let short = res.body["results"][0]["corrected"].as_f64().unwrap();
    let long = res.body["results"][1]["corrected"].as_f64().unwrap();
    let expected = PER_SD * (units(800.0) - units(200.0));
    assert!(
        ((long - short) - expected).abs() < 0.15,
        "{} against {expected}: {}",
        long - short,
        res.body
    );
    assert_eq!(res.body["results"][0]["judge_score"], 3.5);
    assert!(res.body["results"][0]["layer_score"].is_f64());
    assert!(res.body["results"][0]["predictive"].is_array());

    // A length outside the anchors' is corrected and named by its covariate (not blamed on
    // the judge score); one 150 times the typical length, far beyond, is refused by row and
    // field, as a judge score far outside is.
    let range = &layer["inputs"][0]["range"];
    let (shortest, longest) = (range[0].as_f64().unwrap(), range[1].as_f64().unwrap());
    assert!(shortest < 400.0 && 400.0 < longest, "{layer}");
    let res = correct(
        &app,
        json!({"judge": "j", "rubric": "r1", "items": [
            {"id": "inside", "score": 3.5, "covariates": {"length": 400.0}},
            {"id": "beyond", "score": 3.5, "covariates": {"length": longest + 0.5 * (longest - shortest)}},
        ]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let w = &res.body["warnings"];
    assert_eq!(w[0]["code"], "covariate_outside_anchors", "{w}");
    assert_eq!(w[0]["field"], "items.covariates.length", "{w}");
    assert_eq!(w[0]["items"], json!(["beyond"]), "{w}");
    let far = correct(
        &app,
        json!({"judge": "j", "rubric": "r1", "items": [at(400.0), at(150.0 * 400.0)]}),
    )
    .await;
    let details = assert_error(&far, 422, "invalid_input");
    assert_eq!(
        named(&details),
        [(2, "items.covariates.length")],
        "{}",
        far.body
    );

    // Fresh items: the covariate version is closer to E[y | j, length] than the judge-only one.
    let fresh: Vec<Item> = (0..300).map(|_| item(&mut rng)).collect();
    let items: Vec<Value> = fresh
        .iter()
        .map(|it| json!({"score": it.judge, "covariates": {"length": it.length}}))
        .collect();
    let truth: Vec<f64> = fresh.iter().map(|it| it.truth).collect();
    let mut maes = Vec::new();
    for version in [1, 2] {
        let res = correct(
            &app,
            json!({"judge": "j", "rubric": "r1", "version": version, "items": items}),
        )
        .await;
        assert_eq!(res.status, 200, "{}", res.body);
        maes.push(mae(&res.body["results"], &truth));
        // Version 1 was not trained with covariates: it says it did not use them.
        assert_eq!(
            res.body["warnings"].as_array().is_some_and(|w| w
                .iter()
                .any(|w| w["message"].as_str().unwrap().contains("covariates length"))),
            version == 1,
            "{}",
            res.body["warnings"]
        );
    }
    assert!(maes[1] < 0.6 * maes[0], "MAE {maes:?}");

    // The coefficient is a gauge.
    let text = metrics(&app).await;
    let gauge = metric(
        &text,
        r#"judgecal_covariate_coefficient{input="log(length)",judge="j",rubric="r1"}"#,
    )
    .unwrap_or_else(|| panic!("no coefficient gauge in {text}"));
    assert!(gauge < 0.0);

    // New anchors with their lengths are checked against the version's band by the drift
    // alarm (read at their own lengths); one lacking its length is not checked.
    let more: Vec<Item> = (0..40).map(|_| item(&mut rng)).collect();
    let mut batch = rows(&more, "c-");
    batch[0].as_object_mut().unwrap().remove("covariates");
    let res = app
        .json(
            "POST",
            "/v1/anchors",
            &json!({"judge": "j", "rubric": "r1", "anchors": batch}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let coverage = &res.body["cells"][0]["coverage"];
    assert_eq!(coverage["version"], 2, "{}", res.body);
    assert_eq!(coverage["checked"], 39, "{}", res.body);
    assert!(coverage["share"].as_f64().unwrap() > 0.8, "{coverage}");

    // Items without the covariate among items with it, or with a length its log cannot take,
    // are refused by row and field.
    let res = correct(
        &app,
        json!({"judge": "j", "rubric": "r1", "items": [at(300.0), {"score": 3.0}, at(0.0)]}),
    )
    .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(
        named(&details),
        [(2, "covariates.length"), (3, "covariates.length")],
        "{}",
        res.body
    );
    // Bare scores are answered by the same training's judge-score-only fit: the same bayes
    // fit of the same anchors as version 1, warned `covariates_missing`.
    let bare = correct(
        &app,
        json!({"judge": "j", "rubric": "r1", "scores": [3.0, 4.0]}),
    )
    .await;
    assert_eq!(bare.status, 200, "{}", bare.body);
    assert_eq!(bare.body["version"], 2, "{}", bare.body);
    assert_eq!(
        bare.body["warnings"][0]["code"], "covariates_missing",
        "{}",
        bare.body
    );
    let alone = correct(
        &app,
        json!({"judge": "j", "rubric": "r1", "version": 1, "scores": [3.0, 4.0]}),
    )
    .await;
    assert_eq!(bare.body["results"], alone.body["results"]);

    // Run-level: a run of long answers. The judge-only version reads their inflated scores as
    // better; the covariate version at each item's own length estimates what people would
    // give; held at 400 tokens the length term is set to its centre (length-controlled).
    let run: Vec<Item> = (0..300).map(|_| item_at(&mut rng, 1.5)).collect();
    let items: Vec<Value> = run
        .iter()
        .map(|it| json!({"score": it.judge, "covariates": {"length": it.length}}))
        .collect();
    let own: f64 = run.iter().map(|it| it.truth).sum::<f64>() / run.len() as f64;
    let held: f64 = run
        .iter()
        .map(|it| 3.0 + WEIGHT * (it.judge - 3.0))
        .sum::<f64>()
        / run.len() as f64;
    let estimate = |body: Value| {
        let app = &app;
        async move {
            let res = app.json("POST", "/v1/estimate", &body).await;
            assert_eq!(res.status, 200, "{}", res.body);
            let i = &res.body["interval"];
            (
                res.body["estimate"].as_f64().unwrap(),
                (i[0].as_f64().unwrap(), i[1].as_f64().unwrap()),
                res.body.clone(),
            )
        }
    };
    let (judge_only, _, _) = estimate(
        json!({"judge": "j", "rubric": "r1", "version": 1, "scores": run.iter().map(|it| it.judge).collect::<Vec<_>>()}),
    )
    .await;
    assert!(judge_only - own > 0.2, "{judge_only} against {own}");
    let (e, (lo, hi), body) = estimate(json!({"judge": "j", "rubric": "r1", "items": items})).await;
    assert!(lo <= own && own <= hi, "{own} outside {body}");
    assert!((e - own).abs() < 0.1, "{e} against {own}");
    assert_eq!(body["covariates"], "as_given", "{body}");
    assert!(body["warnings"].as_array().is_none_or(|w| {
        w.iter()
            .all(|w| !w["message"].as_str().unwrap().contains("does not read"))
    }));
    // A covariate the version does not read (here a second one it was not trained with) does
    // not change the answer, and the answer says it was not used.
    let extra: Vec<Value> = run
        .iter()
        .map(|it| json!({"score": it.judge, "covariates": {"length": it.length, "markdown": 3}}))
        .collect();
    let (same, _, body) = estimate(json!({"judge": "j", "rubric": "r1", "items": extra})).await;
    assert!((same - e).abs() < 1e-9, "{same} against {e}");
    assert!(
        body["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| {
                let w = w["message"].as_str().unwrap();
                w.contains("does not read covariates markdown") && w.contains("not used")
            })),
        "{body}"
    );
    let (e, (lo, hi), body) =
        estimate(json!({"judge": "j", "rubric": "r1", "items": items, "hold": {"length": 400}}))
            .await;
    assert!(lo <= held && held <= hi, "{held} outside {body}");
    assert_eq!(body["covariates"], "held", "{body}");
    // A misspelt held covariate would hold nothing: refused, naming it.
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j", "rubric": "r1", "items": items, "hold": {"lenght": 400}}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(details[0]["field"], "hold.lenght", "{}", res.body);
    // Held, the items need no covariates of their own.
    let (bare, _, _) = estimate(
        json!({"judge": "j", "rubric": "r1", "hold": {"length": 400},
        "scores": run.iter().map(|it| it.judge).collect::<Vec<_>>()}),
    )
    .await;
    assert!((bare - e).abs() < 1e-9, "{bare} against {e}");
    // Without them and without `hold`, read by the judge-score-only fit, as version 1 reads
    // them, and said.
    let (bare, _, body) = estimate(
        json!({"judge": "j", "rubric": "r1", "scores": run.iter().map(|it| it.judge).collect::<Vec<_>>()}),
    )
    .await;
    assert!(
        (bare - judge_only).abs() < 1e-9,
        "{bare} against {judge_only}"
    );
    assert!(
        body["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["code"] == "covariates_missing")),
        "{body}"
    );
    // A comparison of two runs at their own lengths: long answers are not better by length.
    let short: Vec<Item> = (0..300).map(|_| item_at(&mut rng, -1.5)).collect();
    let short_items: Vec<Value> = short
        .iter()
        .map(|it| json!({"score": it.judge, "covariates": {"length": it.length}}))
        .collect();
    let truth_short: f64 = short.iter().map(|it| it.truth).sum::<f64>() / short.len() as f64;
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j", "rubric": "r1", "a": {"items": items}, "b": {"items": short_items}}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let (lo, hi) = (
        res.body["interval"][0].as_f64().unwrap(),
        res.body["interval"][1].as_f64().unwrap(),
    );
    let d = own - truth_short;
    assert!(lo <= d && d <= hi, "{d} outside {}", res.body);
    // A ranking of the two runs reads both at their own lengths, their shared layer error drawn
    // jointly.
    let res = app
        .json(
            "POST",
            "/v1/rank",
            &json!({"judge": "j", "rubric": "r1", "runs": [
                {"name": "long", "items": items}, {"name": "short", "items": short_items}]}),
        )
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["covariates"], "as_given", "{}", res.body);
    // A held answer has no labelled path: the references are at the items' own lengths.
    let mut labelled = items.clone();
    for (row, it) in labelled.iter_mut().zip(&run).take(5) {
        row["reference"] = json!(it.reference.clamp(1.0, 5.0));
    }
    let res = app
        .json(
            "POST",
            "/v1/estimate",
            &json!({"judge": "j", "rubric": "r1", "items": labelled, "hold": {"length": 400}}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(details[0]["field"], "hold", "{}", res.body);
    // A new judge version re-scores the anchors 0.6 higher, giving no lengths: its rows take
    // their items', and the bridge reads both scores at them. The layer weighs the judge score
    // 0.8, so the corrected mean moves about 0.48, far past the tolerance.
    let rescored: Vec<Value> = r1
        .iter()
        .enumerate()
        .take(200)
        .map(|(i, it)| json!({"item_id": format!("a-{i}"), "judge_score": it.judge + 0.6}))
        .collect();
    stored(
        &app,
        json!({"judge": "j", "rubric": "r1", "judge_version": "v2", "anchors": rescored}),
    )
    .await;
    let plan = app.get("/v1/cells/j/r1/rescore?judge_version=v2").await;
    assert_eq!(plan.status, 200, "{}", plan.body);
    assert_eq!(plan.body["shared"], 200, "{}", plan.body);
    let bridge = app.get("/v1/cells/j/r1/bridge?to=v2").await;
    assert_eq!(bridge.status, 200, "{}", bridge.body);
    assert_eq!(bridge.body["items"], 200, "{}", bridge.body);
    assert_eq!(bridge.body["verdict"], "refit", "{}", bridge.body);
    // Read through the layer (weight 0.8): 0.48; the corrector alone on raw scores would say
    // about 0.6.
    let shift = bridge.body["corrected"]["mean"].as_f64().unwrap();
    assert!((shift - WEIGHT * 0.6).abs() < 0.08, "{}", bridge.body);
    // Runs of two judge versions, one trained with covariates: refused, saying why.
    let res = app
        .json(
            "POST",
            "/v1/compare",
            &json!({"judge": "j", "rubric": "r1", "a": {"items": items},
                    "b": {"items": short_items, "judge_version": "v2"}}),
        )
        .await;
    assert!(
        res.status == 409
            && res.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("trained with covariates"),
        "{}",
        res.body
    );
}

async fn anchors_carry_covariates_as_part_of_a_row_and_every_problem_is_named(backend: Backend) {
    let app = TestApp::new(backend).await;
    let mut rng = Normals(7);
    let items: Vec<Item> = (0..30).map(|_| item(&mut rng)).collect();
    let body = json!({"judge": "k", "rubric": "r", "anchors": rows(&items, "i-")});

    // Bad covariates refuse the batch whole, each by row and field.
    let mut bad = body.clone();
    bad["anchors"][1]["covariates"] = json!({"length": "long"});
    bad["anchors"][2]["covariates"] = json!([812]);
    bad["anchors"][3]["covariates"] = json!({"bad name": 1});
    let res = app.json("POST", "/v1/anchors", &bad).await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(
        named(&details),
        [
            (2, "covariates.length"),
            (3, "covariates"),
            (4, "covariates.bad name")
        ],
        "{}",
        res.body
    );
    assert_eq!(app.cell_count("k", "r").await, None, "nothing stored");
    let csv = "judge,rubric,item_id,judge_score,reference_score,covariate.length\nk,r,x,3,3,many\n";
    let res = app.csv("/v1/anchors", csv).await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(details[0]["row"], 1);
    assert_eq!(details[0]["field"], "covariates.length");
    let csv = "judge,rubric,item_id,judge_score,reference_score,covariate.\nk,r,x,3,3,1\n";
    assert_error(&app.csv("/v1/anchors", csv).await, 422, "invalid_input");

    // Stored, then sent again: unchanged. Another length for one row: a conflict that says so,
    // stored with replace.
    stored(&app, body.clone()).await;
    let again = stored(&app, body.clone()).await;
    assert_eq!(again["unchanged"], 30);
    let mut moved = body.clone();
    moved["anchors"][4]["covariates"]["length"] = json!(99_999);
    let res = app.json("POST", "/v1/anchors", &moved).await;
    let details = assert_error(&res, 409, "conflict");
    assert!(
        details[0]["problem"]
            .as_str()
            .unwrap()
            .contains("this batch's {length: 99999}"),
        "{}",
        res.body
    );
    let res = app.json("POST", "/v1/anchors?replace=true", &moved).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["replaced"], 1);

    // A training naming a covariate some anchors lack fails, naming the cell, the covariate
    // and the items.
    let mut lacking = json!({"judge": "k", "rubric": "r", "anchors": rows(&items, "z-")});
    for row in lacking["anchors"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .take(3)
    {
        row.as_object_mut().unwrap().remove("covariates");
    }
    stored(&app, lacking).await;
    let job = finished(
        &app,
        &train(
            &app,
            "k",
            json!({"method": "bayes", "covariates": ["length"], "options": quick()}),
        )
        .await,
    )
    .await;
    assert_eq!(job["state"], "failed", "{job}");
    let error = job["error"].as_str().unwrap();
    assert!(
        error.contains("covariates[0]")
            && error.contains("3 of the 60 anchors of cell k/r")
            && error.contains("z-0"),
        "{error}"
    );
    // A name no anchor carries (a typo) fails naming those they do carry.
    let job = finished(
        &app,
        &train(
            &app,
            "k",
            json!({"method": "bayes", "covariates": ["lenght"], "options": quick()}),
        )
        .await,
    )
    .await;
    assert_eq!(job["state"], "failed", "{job}");
    let error = job["error"].as_str().unwrap();
    assert!(
        error.contains(
            "none of the 60 anchors of cell k/r carry covariate lenght; they carry length"
        ),
        "{error}"
    );
    // A re-scored row of a new judge version, with no reference and no covariates, takes its
    // item's.
    stored(
        &app,
        json!({"judge": "k", "rubric": "r", "judge_version": "v2",
               "anchors": [{"item_id": "i-0", "judge_score": 2.0}]}),
    )
    .await;
    let listed = app.get("/v1/cells/k/r/anchors?judge_version=v2").await;
    assert_eq!(
        listed.body["anchors"][0]["covariates"]["length"].as_f64(),
        Some(items[0].length),
        "{}",
        listed.body
    );

    // A misspelt or repeated name is refused when the job is asked for.
    let res = app
        .json(
            "POST",
            "/v1/judges/k/calibrations",
            &json!({"method": "bayes", "covariates": ["length", "length", "bad name"]}),
        )
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    let fields: Vec<&str> = details
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["covariates[1]", "covariates[2]"], "{}", res.body);
}

on_both_backends!(
    a_length_biased_judge_is_corrected_at_each_items_length,
    anchors_carry_covariates_as_part_of_a_row_and_every_problem_is_named,
);
