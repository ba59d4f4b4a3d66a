//! Panels of pairwise judges on both backends: two judges' verdicts on the same comparisons,
//! each uploaded under its own name, joined by a panel whose calibrated preference reads both;
//! its ratings of a run whose comparisons carry `verdicts` ({member: verdict}), with known
//! truth; refusals that name the row and field.

use crate::calibration::{Normals, trained};
use crate::common::{Backend, TestApp, assert_error};
use serde_json::{Value, json};

/// The systems' true ratings (log-odds against `s0`).
const TRUTH: [(&str, f64); 4] = [("s0", 0.0), ("s1", 1.0), ("s2", 2.0), ("s3", -1.0)];
const MEMBERS: [&str; 2] = ["pj-a", "pj-b"];

/// `n` comparisons of the world (people prefer a with chance σ(θ_a − θ_b)), each judged by
/// both members: each sees the logistic gap through its own noise (sd 1.2), `pj-a` favours
/// the answer shown first and judges both orders, `pj-b` one order. Gives each member's rows
/// and the panel's (its `verdicts`); the first `labelled` carry the people's preference.
fn world(n: usize, from: usize, labelled: usize, seed: u64) -> [Vec<Value>; 3] {
    let mut rng = Normals(seed);
    let call = |x: f64| if x > 0.0 { "a" } else { "b" };
    let mut out: [Vec<Value>; 3] = Default::default();
    for i in 0..n {
        let a = (rng.uniform() * 4.0) as usize % 4;
        let b = (a + 1 + (rng.uniform() * 3.0) as usize % 3) % 4;
        let u = rng.uniform();
        let z = TRUTH[a].1 - TRUTH[b].1 + (u / (1.0 - u)).ln();
        let (first, second) = (z + 1.2 * rng.next(), z + 1.2 * rng.next());
        let row = |verdict: &str| {
            let mut row = json!({"item_id": format!("q{:05}", from + i), "a": TRUTH[a].0,
                "b": TRUTH[b].0, "verdict": verdict});
            if i < labelled {
                row["preference"] = json!(call(z));
            }
            row
        };
        let mut of_a = row(call(first + 0.8));
        of_a["verdict_swapped"] = json!(call(first - 0.8));
        let of_b = row(call(second));
        let mut panel = row("a");
        let object = panel.as_object_mut().unwrap();
        object.remove("verdict");
        object.insert(
            "verdicts".into(),
            json!({"pj-a": of_a["verdict"], "pj-b": of_b["verdict"]}),
        );
        object.insert(
            "verdicts_swapped".into(),
            json!({"pj-a": of_a["verdict_swapped"]}),
        );
        out[0].push(of_a);
        out[1].push(of_b);
        out[2].push(panel);
    }
    out
}

fn body(judge: &str, rows: &[Value]) -> Value {
    json!({"judge": judge, "rubric": "overall", "comparisons": rows})
}

/// The sum of the non-baseline ratings' interval widths, and whether each holds its truth.
fn widths(answer: &Value) -> (f64, bool) {
    let mut total = 0.0;
    let mut cover = true;
    for s in answer["systems"].as_array().expect("systems") {
        let (lo, hi) = (
            s["interval"][0].as_f64().unwrap(),
            s["interval"][1].as_f64().unwrap(),
        );
        let truth = TRUTH.iter().find(|t| s["system"] == t.0).unwrap().1;
        cover &= lo <= truth && truth <= hi;
        total += hi - lo;
    }
    (total, cover)
}

async fn a_panel_of_pairwise_judges_rates_a_run_better_than_either_member(backend: Backend) {
    let app = TestApp::new(backend).await;
    let [a, b, _] = world(800, 10_000, 800, 7);
    for (judge, rows) in MEMBERS.iter().zip([&a, &b]) {
        let res = app
            .json("POST", "/v1/comparisons", &body(judge, rows))
            .await;
        assert_eq!(res.status, 200, "{}", res.body);
    }
    let res = app
        .json(
            "POST",
            "/v1/panels",
            &json!({"name": "pair-jury", "judges": MEMBERS}),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    let [run_a, run_b, run_panel] = world(3_000, 0, 0, 11);
    // Before training, a panel's run has no calibrated preference to read.
    let res = app
        .json("POST", "/v1/ratings", &body("pair-jury", &run_panel))
        .await;
    assert_error(&res, 404, "not_found");
    assert!(
        res.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("POST /v1/judges/pair-jury/calibrations"),
        "{}",
        res.body
    );
    // A scalar method is refused; `auto` trains the panel's calibrated preference.
    let res = app
        .json(
            "POST",
            "/v1/judges/pair-jury/calibrations",
            &json!({"method": "bayes"}),
        )
        .await;
    assert_eq!(
        assert_error(&res, 422, "invalid_input")[0]["field"],
        "method"
    );
    trained(&app, "pair-jury", json!({"method": "auto"})).await;
    let res = app.get("/v1/cells/pair-jury/overall/preferences").await;
    assert_eq!(res.status, 200, "{}", res.body);
    let v = &res.body["versions"][0];
    let members = v["panel"].as_array().expect("the panel's members");
    let names: Vec<&str> = members
        .iter()
        .map(|m| m["judge"].as_str().unwrap())
        .collect();
    assert_eq!(names, MEMBERS);
    assert_eq!(members[0]["comparisons"], 800);
    // Held out on the same labelled comparisons, the panel beats each member alone.
    let chosen = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["inputs"] == v["chosen"])
        .unwrap()["log_loss"]
        .as_f64()
        .unwrap();
    for m in members {
        let alone = m["alone"]["log_loss"].as_f64().unwrap();
        assert!(chosen < alone - 0.01, "panel {chosen} vs {m}");
    }
    // The report picture of the panel's cell draws.
    let svg = app.get("/v1/cells/pair-jury/overall/report.svg").await;
    assert_eq!(svg.status, 200);
    // The pages show the panel's trained version, not "none" and a cell of scores' report.
    let index = app.get("/ui/").await.body.as_str().unwrap().to_owned();
    let row = index
        .split("<tr>")
        .find(|r| r.contains("/ui/cells/pair-jury/overall"))
        .unwrap_or_else(|| panic!("no panel row in {index}"));
    assert!(
        row.contains("<td>1</td>") && row.contains("comparisons (its members')"),
        "{row}"
    );
    let page = app.get("/ui/cells/pair-jury/overall").await;
    let page = page.body.as_str().unwrap();
    assert!(page.contains("<td>serves</td>"), "{page}");
    assert!(
        !page.contains("No agreement report") && !page.contains("No picture"),
        "{page}"
    );

    // The panel's ratings hold the truth and are narrower than either member's alone on the
    // same run (each member rated from its own labelled comparisons).
    let res = app
        .json("POST", "/v1/ratings", &body("pair-jury", &run_panel))
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["anchors"], 800);
    let (panel, covers) = widths(&res.body);
    assert!(covers, "{}", res.body);
    for (judge, rows) in MEMBERS.iter().zip([&run_a, &run_b]) {
        let res = app.json("POST", "/v1/ratings", &body(judge, rows)).await;
        assert_eq!(res.status, 200, "{}", res.body);
        let (alone, _) = widths(&res.body);
        eprintln!("interval widths: panel {panel:.3}, {judge} alone {alone:.3}");
        assert!(panel < 0.97 * alone, "panel {panel} vs {judge} {alone}");
    }

    // Rows that lack a member, name a judge that is not one, or give one judge's verdict are
    // refused whole, each named by row and field.
    let mut bad = run_panel[..5].to_vec();
    bad[1]["verdicts"].as_object_mut().unwrap().remove("pj-b");
    bad[2]["verdicts"]["zed"] = json!("a");
    bad[3] = run_a[3].clone();
    let res = app
        .json("POST", "/v1/ratings", &body("pair-jury", &bad))
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    let named: Vec<(Value, Value)> = details
        .iter()
        .map(|d| (d["row"].clone(), d["field"].clone()))
        .collect();
    assert_eq!(
        named,
        [
            (json!(2), json!("verdicts.pj-b")),
            (json!(3), json!("verdicts.zed")),
            (json!(4), json!("verdicts")),
        ],
        "{details:?}"
    );
    // A judge's run with a panel's verdicts, and both kinds in one row.
    let res = app
        .json("POST", "/v1/ratings", &body("pj-a", &run_panel))
        .await;
    assert_eq!(
        assert_error(&res, 422, "invalid_input")[0]["field"],
        "verdicts"
    );
    let mut both = run_panel[..3].to_vec();
    both[0]["verdict"] = json!("a");
    let res = app
        .json("POST", "/v1/ratings", &body("pair-jury", &both))
        .await;
    let details = assert_error(&res, 422, "invalid_input");
    assert_eq!(
        (details[0]["row"].clone(), details[0]["field"].clone()),
        (json!(1), json!("verdict"))
    );

    // A member whose comparison of an item names other systems: the join is refused naming
    // the item.
    let mut c = b.clone();
    c[0]["a"] = b[0]["b"].clone();
    c[0]["b"] = b[0]["a"].clone();
    let res = app.json("POST", "/v1/comparisons", &body("pj-c", &c)).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let res = app
        .json(
            "POST",
            "/v1/panels",
            &json!({"name": "pair-jury-2", "judges": ["pj-a", "pj-c"]}),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    let res = app
        .json(
            "POST",
            "/v1/judges/pair-jury-2/calibrations",
            &json!({"method": "auto"}),
        )
        .await;
    let details = assert_error(&res, 409, "conflict");
    let item = c[0]["item_id"].as_str().unwrap();
    assert_eq!(details[0]["field"], format!("item {item}"), "{details:?}");
}

on_both_backends!(a_panel_of_pairwise_judges_rates_a_run_better_than_either_member);
