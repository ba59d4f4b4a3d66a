//! `POST /v1/ratings` on both backends: Bradley–Terry ratings of a run's systems from a
//! pairwise judge's verdicts and the cell's labelled comparisons, with known truth; the run's
//! own labels; refusals that name the field.

use crate::calibration::Normals;
use crate::common::{Backend, TestApp, assert_error};
use serde_json::{Value, json};

/// The systems' true ratings (log-odds against `s0`).
const TRUTH: [(&str, f64); 4] = [("s0", 0.0), ("s1", 1.0), ("s2", 2.0), ("s3", -1.0)];

/// `n` comparisons of the world: people prefer a with chance σ(θ_a − θ_b) (a logistic gap
/// z); the judge sees z with noise, favours the answer shown first by 1 and system s3 by 1.5
/// (a judge that likes one family), and judges both orders. `labelled` rows carry the
/// people's preference.
pub(super) fn world(n: usize, from: usize, labelled: usize, seed: u64) -> Vec<Value> {
    let mut rng = Normals(seed);
    (0..n)
        .map(|i| {
            let a = (rng.uniform() * 4.0) as usize % 4;
            let b = (a + 1 + (rng.uniform() * 3.0) as usize % 3) % 4;
            let u = rng.uniform();
            let z = TRUTH[a].1 - TRUTH[b].1 + (u / (1.0 - u)).ln();
            let favour = 1.5 * (f64::from(u8::from(a == 3)) - f64::from(u8::from(b == 3)));
            let seen = z + 0.7 * rng.next() + favour;
            let call = |x: f64| if x > 0.0 { "a" } else { "b" };
            let mut row = json!({"item_id": format!("p{:05}", from + i), "a": TRUTH[a].0,
                "b": TRUTH[b].0, "verdict": call(seen + 1.0), "verdict_swapped": call(seen - 1.0)});
            if i < labelled {
                row["preference"] = json!(call(z));
            }
            row
        })
        .collect()
}

pub(super) fn run(rows: Vec<Value>) -> Value {
    json!({"judge": "pair-judge", "rubric": "overall", "comparisons": rows})
}

fn rating(answer: &Value, system: &str) -> (f64, f64, f64, Value) {
    let s = answer["systems"]
        .as_array()
        .expect("systems")
        .iter()
        .find(|s| s["system"] == system)
        .expect("the system is rated");
    (
        s["rating"].as_f64().unwrap(),
        s["interval"][0].as_f64().unwrap(),
        s["interval"][1].as_f64().unwrap(),
        s["rank_interval"].clone(),
    )
}

async fn ratings_recover_a_known_world_despite_a_judge_that_favours_one_system(backend: Backend) {
    let app = TestApp::new(backend).await;
    // No cell yet: 404; a cell with verdicts but no labels: 409.
    let res = app
        .json("POST", "/v1/ratings", &run(world(50, 0, 0, 3)))
        .await;
    assert_error(&res, 404, "not_found");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("POST /v1/comparisons"), "{message}");
    let unlabelled = app
        .json("POST", "/v1/comparisons", &run(world(20, 90_000, 0, 5)))
        .await;
    assert_eq!(unlabelled.status, 200, "{}", unlabelled.body);
    let res = app
        .json("POST", "/v1/ratings", &run(world(50, 0, 0, 3)))
        .await;
    assert_error(&res, 409, "conflict");

    let anchors = app
        .json("POST", "/v1/comparisons", &run(world(800, 10_000, 800, 7)))
        .await;
    assert_eq!(anchors.status, 200, "{}", anchors.body);
    let body = run(world(4_000, 0, 0, 11));
    let res = app.json("POST", "/v1/ratings", &body).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let plain = res.body;
    assert_eq!(plain["baseline"], "s0");
    assert_eq!(plain["comparisons"], 4_000);
    assert_eq!(
        (plain["labelled"].clone(), plain["anchors"].clone()),
        (json!(0), json!(800))
    );
    // The baseline is 0 exactly; every other interval holds its true rating, though the judge
    // favours s3 by 1.5 log-odds (its raw win rate would rate it far too high).
    assert_eq!(rating(&plain, "s0").0, 0.0);
    for (system, truth) in TRUTH {
        let (_, lo, hi, _) = rating(&plain, system);
        assert!(
            lo <= truth && truth <= hi,
            "{system}: [{lo}, {hi}] misses {truth}: {plain}"
        );
    }
    // Highest first, and the gaps of 1 log-odds are resolved: each rank is known.
    let order: Vec<&str> = plain["systems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["system"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["s2", "s1", "s0", "s3"]);
    assert_eq!(rating(&plain, "s2").3, json!([1, 1]));
    assert_eq!(rating(&plain, "s3").3, json!([4, 4]));
    // Win rates: each system's against the baseline (none for the baseline itself) and over
    // the field, near their truth (no ties: σ of the rating gap).
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    for (system, truth) in TRUTH {
        let s = plain["systems"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["system"] == system)
            .unwrap();
        let field: f64 = TRUTH
            .iter()
            .filter(|(o, _)| *o != system)
            .map(|(_, t)| sigmoid(truth - t))
            .sum::<f64>()
            / 3.0;
        let wins = [
            (&s["win_rate"], sigmoid(truth)),
            (&s["field_win_rate"], field),
        ];
        for (rate, truth) in wins {
            if system == "s0" && std::ptr::eq(rate, &s["win_rate"]) {
                assert!(rate.is_null(), "{s}");
                continue;
            }
            // Within three standard errors (the grid counts the 95% intervals' coverage).
            let (lo, hi) = (
                rate["interval"][0].as_f64().unwrap(),
                rate["interval"][1].as_f64().unwrap(),
            );
            let se = (hi - lo) / (2.0 * 1.96);
            let estimate = rate["estimate"].as_f64().unwrap();
            assert!(
                (estimate - truth).abs() < 3.0 * se && se < 0.05,
                "{system}: {estimate} ± {se} is far from {truth}: {s}"
            );
        }
    }
    // With no trained version, the calibrated preference was chosen at this request among
    // candidates, and names them.
    assert!(
        plain["calibration"]["candidates"].as_array().unwrap().len() >= 3,
        "{plain}"
    );
    assert_eq!(plain["calibration"]["version"], Value::Null);

    // Labelling 400 of the run's comparisons: counted, and no interval is wider.
    let mut labelled = run(world(4_000, 0, 400, 11));
    labelled["baseline"] = json!("s1");
    let res = app.json("POST", "/v1/ratings", &labelled).await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["labelled"], 400);
    assert_eq!(res.body["baseline"], "s1");
    assert_eq!(rating(&res.body, "s1").0, 0.0);
    let width = |a: &Value| -> f64 {
        a["systems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["interval"][1].as_f64().unwrap() - s["interval"][0].as_f64().unwrap())
            .sum()
    };
    labelled["baseline"] = Value::Null;
    let same_baseline = app.json("POST", "/v1/ratings", &labelled).await.body;
    assert!(
        width(&same_baseline) <= 1.01 * width(&plain),
        "{} vs {}",
        width(&same_baseline),
        width(&plain)
    );
    // The same labels naming their raters (four, a hundred labels each) reach the statistics:
    // the labelled part of the covariance is taken over raters, so the intervals move (here
    // the raters do not differ, so not by much), and each still holds its truth.
    let mut named = labelled.clone();
    for (i, row) in named["comparisons"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
        .take(400)
    {
        row["rater"] = json!(format!("rater-{}", i % 4));
    }
    let by_rater = app.json("POST", "/v1/ratings", &named).await;
    assert_eq!(by_rater.status, 200, "{}", by_rater.body);
    let (w, w0) = (width(&by_rater.body), width(&same_baseline));
    assert!(
        (w - w0).abs() > 1e-9 && (w / w0 - 1.0).abs() < 0.3,
        "{w} vs {w0}"
    );
    for (system, truth) in TRUTH {
        let (_, lo, hi, _) = rating(&by_rater.body, system);
        assert!(
            lo <= truth && truth <= hi,
            "{system}: [{lo}, {hi}] misses {truth}"
        );
    }
}

/// The widest half-width of an answer's non-baseline ratings.
fn widest(answer: &Value) -> f64 {
    answer["systems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["interval"][1].as_f64().unwrap() - s["interval"][0].as_f64().unwrap()) / 2.0)
        .fold(0.0, f64::max)
}

async fn a_label_plan_names_the_comparisons_that_reach_a_target_width(backend: Backend) {
    let app = TestApp::new(backend).await;
    let anchors = app
        .json("POST", "/v1/comparisons", &run(world(300, 10_000, 300, 7)))
        .await;
    assert_eq!(anchors.status, 200, "{}", anchors.body);
    let mut body = run(world(4_000, 0, 0, 11));
    let plain = app.json("POST", "/v1/ratings", &body).await.body;
    assert!(plain.get("plan").is_none(), "no plan unless asked: {plain}");
    let now = widest(&plain);
    // A target already met; one no labelling of this run can meet.
    body["target_half_width"] = json!(now * 1.01);
    let met = app.json("POST", "/v1/ratings", &body).await.body;
    assert_eq!(met["plan"]["outcome"], "reached", "{}", met["plan"]);
    assert_eq!(met["plan"]["label"], json!([]));
    body["target_half_width"] = json!(0.001);
    let far = app.json("POST", "/v1/ratings", &body).await.body;
    assert_eq!(far["plan"]["outcome"], "out_of_reach", "{}", far["plan"]);
    // Two thirds of today's width: the plan names that many of the run's comparisons.
    let target = now * 2.0 / 3.0;
    body["target_half_width"] = json!(target);
    let res = app.json("POST", "/v1/ratings", &body).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let plan = &res.body["plan"];
    assert_eq!(plan["outcome"], "more_labelled", "{plan}");
    let needed = plan["needed"].as_u64().unwrap() as usize;
    let label: Vec<&str> = plan["label"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(label.len(), needed);
    assert!((100..4_000).contains(&needed), "{plan}");
    assert!(plan["expected_half_width"].as_f64().unwrap() <= target);
    // Labelled as the plan says (people's preferences from the same world), the widest
    // half-width is near the target.
    let truth = world(4_000, 0, 4_000, 11);
    let mut rows = world(4_000, 0, 0, 11);
    for (row, known) in rows.iter_mut().zip(&truth) {
        if label.contains(&row["item_id"].as_str().unwrap()) {
            row["preference"] = known["preference"].clone();
        }
    }
    let after = app.json("POST", "/v1/ratings", &run(rows)).await.body;
    assert_eq!(after["labelled"], needed);
    let got = widest(&after);
    assert!(
        (got / target - 1.0).abs() < 0.15,
        "planned {target:.3}, got {got:.3} with {needed} labels"
    );
    // A bad target is named.
    body["target_half_width"] = json!(-1);
    let details = assert_error(
        &app.json("POST", "/v1/ratings", &body).await,
        422,
        "invalid_input",
    );
    assert_eq!(details[0]["field"], "target_half_width");
}

async fn a_bad_request_is_refused_naming_what_to_fix(backend: Backend) {
    let app = TestApp::new(backend).await;
    // Five labelled comparisons are too few to correct a judge: 409, saying how many it takes.
    let few =
        |rows: Vec<Value>| json!({"judge": "pair-judge", "rubric": "few", "comparisons": rows});
    let res = app
        .json("POST", "/v1/comparisons", &few(world(5, 0, 5, 7)))
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    let res = app
        .json("POST", "/v1/ratings", &few(world(100, 100, 0, 9)))
        .await;
    assert_error(&res, 409, "conflict");
    let message = res.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("at least 20"), "{message}");
    let anchors = app
        .json("POST", "/v1/comparisons", &run(world(300, 10_000, 300, 7)))
        .await;
    assert_eq!(anchors.status, 200, "{}", anchors.body);
    // A misspelt setting is named against the ratings request's fields, settings included.
    let mut body = run(world(30, 0, 0, 13));
    body["baselin"] = json!("s0");
    let details = assert_error(
        &app.json("POST", "/v1/ratings", &body).await,
        422,
        "invalid_input",
    );
    assert_eq!(details[0]["field"], "baselin");
    let problem = details[0]["problem"].as_str().unwrap();
    assert!(
        problem.contains("a ratings request") && problem.contains("baseline, level"),
        "{problem}"
    );
    // A baseline outside the run, a level out of range and a bad verdict: all named at once.
    let mut rows = world(100, 0, 0, 13);
    rows[4]["verdict"] = json!("left");
    let mut body = run(rows);
    body["baseline"] = json!("s9");
    body["level"] = json!(1.5);
    let details = assert_error(
        &app.json("POST", "/v1/ratings", &body).await,
        422,
        "invalid_input",
    );
    let named: Vec<(Value, &str)> = details
        .iter()
        .map(|d| (d["row"].clone(), d["field"].as_str().unwrap()))
        .collect();
    assert!(named.contains(&(Value::Null, "level")), "{named:?}");
    assert!(named.contains(&(json!(5), "verdict")), "{named:?}");
    // Controlling for a covariate some rows lack names those rows.
    let mut body = run(world(3, 0, 0, 13));
    body["control"] = json!(["length"]);
    let details = assert_error(
        &app.json("POST", "/v1/ratings", &body).await,
        422,
        "invalid_input",
    );
    assert_eq!(details[0]["field"], "covariates.length");
    // Two parts the run never joins: named, not rated.
    let apart = run(vec![
        json!({"item_id": "q1", "a": "s0", "b": "s1", "verdict": "a"}),
        json!({"item_id": "q2", "a": "s2", "b": "s3", "verdict": "b"}),
    ]);
    let details = assert_error(
        &app.json("POST", "/v1/ratings", &apart).await,
        422,
        "invalid_input",
    );
    let problem = details[0]["problem"].as_str().unwrap();
    assert!(problem.contains("s2, s3"), "{problem}");
}

on_both_backends!(
    ratings_recover_a_known_world_despite_a_judge_that_favours_one_system,
    a_bad_request_is_refused_naming_what_to_fix,
    a_label_plan_names_the_comparisons_that_reach_a_target_width,
);
