//! The docs' walk-throughs, run from a fresh database on both backends with the real HANNA
//! slice the demo serves (`demo/hanna/anchors.csv`): the judge change of
//! docs/judge-versions.md ("HANNA, end to end") and the panel of docs/panels.md ("HANNA's five
//! judges, end to end"). Each prints the lines the docs show and asserts their answers.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{defined, mae, stored, trained};
use crate::common::{Backend, TestApp};

/// One story of the slice: each judge's score by judge, its human mean and its system.
#[derive(Default)]
struct Story {
    scores: BTreeMap<String, f64>,
    human: f64,
    system: String,
}

/// The demo slice's stories of `rubric`, by item id.
fn stories(rubric: &str) -> BTreeMap<String, Story> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/hanna/anchors.csv");
    let text = std::fs::read_to_string(path).expect("the demo's anchors");
    let mut out: BTreeMap<String, Story> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[1] != rubric {
            continue;
        }
        let story = out.entry(f[2].to_owned()).or_default();
        story.scores.insert(f[0].to_owned(), f[3].parse().unwrap());
        story.human = f[4].parse().unwrap();
        story.system = f[5].to_owned();
    }
    out
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

const OLD: &str = "mistral-7b@p1";
const NEW: &str = "chatgpt@p1";

async fn the_judge_change_walk_through_on_hanna(backend: Backend) {
    let app = TestApp::new(backend).await;
    // Stories both judges scored; every other one (in item-id order) an anchor, the rest
    // held out.
    let all = stories("coherence");
    let both: Vec<(&String, &Story)> = all
        .iter()
        .filter(|(_, s)| s.scores.contains_key("Mistral-7B") && s.scores.contains_key("ChatGPT"))
        .collect();
    let anchors: Vec<_> = both.iter().step_by(2).collect();
    let held: Vec<_> = both.iter().skip(1).step_by(2).collect();
    let judge_of = |v: &str| if v == OLD { "Mistral-7B" } else { "ChatGPT" };
    let truth: Vec<f64> = held.iter().map(|(_, s)| s.human).collect();

    // 1. The old version's anchors and its calibration.
    let rows: Vec<Value> = anchors
        .iter()
        .map(|(id, s)| {
            json!({"item_id": id, "judge_score": s.scores["Mistral-7B"],
                   "reference_score": s.human, "group": s.system})
        })
        .collect();
    stored(&app, json!({"judge": "story-judge", "rubric": "coherence", "judge_version": OLD, "anchors": rows})).await;
    trained(&app, "story-judge", json!({"method": "isotonic"})).await;
    let versions = app.get("/v1/cells/story-judge/coherence/calibrators").await;
    assert_eq!(versions.body["versions"][0]["judge_version"], OLD);
    eprintln!(
        "1. {} anchors of {OLD}; version 1 trained on judge_version {OLD}",
        rows.len()
    );
    let held_out = |version: &'static str| {
        let scores: Vec<f64> = held
            .iter()
            .map(|(_, s)| s.scores[judge_of(version)])
            .collect();
        let app = &app;
        let truth = &truth;
        async move {
            let body = json!({"judge": "story-judge", "rubric": "coherence",
                              "scores": scores, "judge_version": version});
            let c = app.json("POST", "/v1/correct", &body).await;
            assert_eq!(c.status, 200, "{}", c.body);
            let e = app.json("POST", "/v1/estimate", &body).await;
            assert_eq!(e.status, 200, "{}", e.body);
            let error = e.body["estimate"].as_f64().unwrap() - mean(truth);
            (
                mae(&c.body["results"], truth),
                error,
                c.body["warnings"].clone(),
            )
        }
    };
    let (m_old, bias_old, warnings) = held_out(OLD).await;
    eprintln!(
        "   held out ({} stories): MAE {m_old:.3}, error of the run mean {bias_old:+.3}",
        held.len()
    );
    assert_eq!(warnings, json!([]), "{warnings}");

    // 2. The platform switches the judge: its scores name the new version, and are corrected
    // by the old calibration with a warning that says so.
    let (m_stale, bias_stale, warnings) = held_out(NEW).await;
    let raw: Vec<f64> = held.iter().map(|(_, s)| s.scores["ChatGPT"]).collect();
    let raw_mae = raw
        .iter()
        .zip(&truth)
        .map(|(j, y)| (j - y).abs())
        .sum::<f64>()
        / raw.len() as f64;
    assert_eq!(warnings[0]["code"], "judge_version_mismatch", "{warnings}");
    let warning = warnings[0]["message"].as_str().unwrap();
    eprintln!(
        "2. {NEW} scores through the old calibration: MAE {m_stale:.3}, error of the run mean {bias_stale:+.3}; raw MAE {raw_mae:.3}\n   warning: {warning}"
    );
    assert!(
        warning.contains("has no calibration of its own") && warning.contains(OLD),
        "{warning}"
    );
    assert!(raw_mae > 2.0 * m_stale, "{raw_mae} vs {m_stale}");

    // 3. What to re-score, then the new version's scores of the anchor items: no labels.
    let plan = app
        .get(&format!(
            "/v1/cells/story-judge/coherence/rescore?judge_version={NEW}"
        ))
        .await;
    assert_eq!(plan.status, 200, "{}", plan.body);
    assert_eq!(plan.body["remaining"].as_u64(), Some(anchors.len() as u64));
    eprintln!(
        "3. re-score {} anchor items; the bridge needs about {} (tolerance {})",
        plan.body["remaining"], plan.body["bridge_items"], plan.body["tolerance"]
    );
    // In the list's order: each system's items in a seeded order, the systems in turn.
    let order: Vec<&str> = plan.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(order.len(), anchors.len());
    let chatgpt = |id: &str| all[id].scores["ChatGPT"];
    let mut verdicts = Vec::new();
    for size in [50, 100, 200, anchors.len()] {
        let rows: Vec<Value> = order[..size]
            .iter()
            .map(|id| json!({"item_id": id, "judge_score": chatgpt(id)}))
            .collect();
        stored(&app, json!({"judge": "story-judge", "rubric": "coherence", "judge_version": NEW, "anchors": rows})).await;
        let b = app
            .get(&format!(
                "/v1/cells/story-judge/coherence/bridge?from={OLD}&to={NEW}"
            ))
            .await;
        assert_eq!(b.status, 200, "{}", b.body);
        let b = b.body;
        let f = |v: &Value| v.as_f64().unwrap();
        let bands: Vec<String> = b["bands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                format!(
                    "{} {:+.3}",
                    x["group"].as_str().unwrap(),
                    f(&x["shift"]["mean"])
                )
            })
            .collect();
        let moved: Vec<&str> = b["groups"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["moved"] == true)
            .map(|g| g["group"].as_str().unwrap())
            .collect();
        eprintln!(
            "   bridge on {} items: raw shift {:+.3} (slope {:.2}, rank correlation {:.2}); corrected shift {:+.3} [{:+.3}, {:+.3}]; bands {}; groups moved {} -> {}",
            b["items"],
            f(&b["raw"]["mean"]),
            f(&b["raw"]["slope"]),
            f(&b["raw"]["rank_correlation"]),
            f(&b["corrected"]["mean"]),
            f(&b["corrected"]["lo"]),
            f(&b["corrected"]["hi"]),
            bands.join(", "),
            if moved.is_empty() {
                "none".to_owned()
            } else {
                moved.join(", ")
            },
            b["verdict"].as_str().unwrap()
        );
        assert_eq!(b["items"].as_u64(), Some(size as u64));
        // ChatGPT scores coherence about 0.7 below Mistral, more than its calibration can
        // carry: the corrected mean moves by more than the tolerance, beyond its interval.
        assert!(f(&b["raw"]["mean"]) < -0.5, "{b}");
        assert!(f(&b["corrected"]["hi"]) < -0.1, "{b}");
        verdicts.push(b["verdict"].as_str().unwrap().to_owned());
    }
    assert!(verdicts.iter().all(|v| v == "refit"), "{verdicts:?}");

    // 4. The refit on the re-scored anchors (the newest version, by default).
    trained(&app, "story-judge", json!({"method": "isotonic"})).await;
    let (m_new, bias_new, warnings) = held_out(NEW).await;
    eprintln!(
        "4. version 2 on {NEW}: MAE {m_new:.3}, error of the run mean {bias_new:+.3}, warnings {}",
        if warnings == json!([]) {
            "none".to_owned()
        } else {
            warnings.to_string()
        }
    );
    assert_eq!(warnings, json!([]), "{warnings}");
    assert!(
        m_new < m_stale && bias_new.abs() < bias_stale.abs(),
        "{m_new} {bias_new}"
    );

    // 5. A silent change: 200 items of the list re-scored under the same label, the judge
    // unchanged, then its scores moved half a point down (a provider's edit behind the name).
    let check = |shift: f64| {
        let items: Vec<Value> = order[..200]
            .iter()
            .map(|id| json!({"item_id": id, "judge_score": (chatgpt(id) + shift).clamp(1.0, 5.0)}))
            .collect();
        let app = &app;
        async move {
            let res = app
                .json(
                    "POST",
                    "/v1/cells/story-judge/coherence/checks",
                    &json!({"items": items, "judge_version": NEW}),
                )
                .await;
            assert_eq!(res.status, 200, "{}", res.body);
            res.body
        }
    };
    let same = check(0.0).await;
    let moved = check(-0.5).await;
    eprintln!(
        "5. silent-change check on 200 items: unchanged -> {} (changed {}); scores half a point lower under the same label -> corrected shift {:+.3} -> {} (changed {})",
        same["verdict"].as_str().unwrap(),
        same["changed"],
        moved["corrected"]["mean"].as_f64().unwrap(),
        moved["verdict"].as_str().unwrap(),
        moved["changed"]
    );
    assert_eq!(same["verdict"], "carry_over", "{same}");
    eprintln!("   {}", moved["reason"].as_str().unwrap());
    assert_eq!(moved["verdict"], "refit", "{moved}");
    assert_eq!(moved["changed"], true, "{moved}");
}

const JUDGES: [&str; 5] = [
    "Beluga-13B",
    "ChatGPT",
    "Llama-13B",
    "Mistral-7B",
    "OrcaPlatypus",
];

async fn the_panel_walk_through_on_hanna(backend: Backend) {
    let app = TestApp::new(backend).await;
    // Stories every judge scored; every other one an anchor, the rest held out.
    let all = stories("coherence");
    let every: Vec<(&String, &Story)> = all
        .iter()
        .filter(|(_, s)| JUDGES.iter().all(|j| s.scores.contains_key(*j)))
        .collect();
    let anchors: Vec<_> = every.iter().step_by(2).collect();
    let held: Vec<_> = every.iter().skip(1).step_by(2).collect();
    let truth: Vec<f64> = held.iter().map(|(_, s)| s.human).collect();

    // 1. Each member's anchors under its own name, with the same item ids; each judge alone
    // calibrated too, to compare.
    for judge in JUDGES {
        let rows: Vec<Value> = anchors
            .iter()
            .map(|(id, s)| {
                json!({"item_id": id, "judge_score": s.scores[judge],
                       "reference_score": s.human, "group": s.system})
            })
            .collect();
        stored(
            &app,
            json!({"judge": judge, "rubric": "coherence", "anchors": rows}),
        )
        .await;
        trained(&app, judge, json!({"method": "bayes"})).await;
    }
    eprintln!(
        "1. {} anchors of each of {} judges",
        anchors.len(),
        JUDGES.len()
    );

    // 2. The panel, then its training.
    defined(&app, "jury", json!(JUDGES)).await;
    let job = trained(&app, "jury", json!({"method": "bayes"})).await;
    assert_eq!(
        job["detail"]["joined"]["coherence"]["items"].as_u64(),
        Some(anchors.len() as u64),
        "{job}"
    );
    let version = app.get("/v1/cells/jury/coherence/calibrators").await;
    let panel = &version.body["versions"][0]["panel"];
    let weights: Vec<String> = panel["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            format!(
                "{} {:.2}{}",
                w["judge"].as_str().unwrap(),
                w["standardised"].as_f64().unwrap(),
                if w["canary"] == true { " (canary)" } else { "" }
            )
        })
        .collect();
    eprintln!(
        "2. panel jury trained on {} joined items; input {}; standardised weights {}",
        job["detail"]["joined"]["coherence"]["items"],
        panel["input"],
        weights.join(", ")
    );

    // Mistral-7B adds nothing the others do not; ChatGPT carries the most.
    let canary = |judge: &str| {
        panel["weights"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["judge"] == judge)
            .map(|w| w["canary"] == true)
    };
    assert_eq!(canary("Mistral-7B"), Some(true), "{panel}");
    assert_eq!(canary("ChatGPT"), Some(false), "{panel}");

    // 3. Held-out stories: the panel against each judge alone, then with ChatGPT's score
    // missing from every item.
    let correct = |judge: &'static str, drop: Option<&'static str>| {
        let items: Vec<Value> = held
            .iter()
            .map(|(_, s)| {
                if judge == "jury" {
                    let scores: BTreeMap<&str, f64> = JUDGES
                        .iter()
                        .filter(|j| Some(**j) != drop)
                        .map(|j| (*j, s.scores[*j]))
                        .collect();
                    json!({"scores": scores})
                } else {
                    json!({"score": s.scores[judge]})
                }
            })
            .collect();
        let app = &app;
        async move {
            let res = app
                .json(
                    "POST",
                    "/v1/correct",
                    &json!({"judge": judge, "rubric": "coherence", "items": items}),
                )
                .await;
            assert_eq!(res.status, 200, "{}", res.body);
            res.body
        }
    };
    let mut singles = Vec::new();
    for judge in JUDGES {
        singles.push((judge, mae(&correct(judge, None).await["results"], &truth)));
    }
    let best = singles
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .copied()
        .unwrap();
    let whole = correct("jury", None).await;
    let partial = correct("jury", Some("ChatGPT")).await;
    let width = |body: &Value| {
        mean(
            &body["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    r["predictive"][1].as_f64().unwrap() - r["predictive"][0].as_f64().unwrap()
                })
                .collect::<Vec<_>>(),
        )
    };
    let (m_whole, m_partial) = (
        mae(&whole["results"], &truth),
        mae(&partial["results"], &truth),
    );
    eprintln!(
        "3. held out ({} stories): panel MAE {m_whole:.3}, band {:.2} wide; best judge alone {} MAE {:.3}; without ChatGPT: MAE {m_partial:.3}, band {:.2} wide, members {}",
        held.len(),
        width(&whole),
        best.0,
        best.1,
        width(&partial),
        partial["results"][0]["members"]
    );
    assert!(m_whole < best.1, "{m_whole} vs {singles:?}");
    assert!(whole["results"][0].get("members").is_none());
    assert_eq!(
        partial["results"][0]["members"].as_array().map(Vec::len),
        Some(4)
    );
    assert!(
        width(&partial) >= width(&whole),
        "a missing member never narrows the band"
    );

    // 4. Which judges to call, with ChatGPT five times dearer than the open models.
    let plan = app
        .json(
            "POST",
            "/v1/panels/jury/plan",
            &json!({"rubric": "coherence", "run_size": 2000, "target_half_width": 0.05,
                    "label_cost": 20, "costs": {"ChatGPT": 1.0, "Beluga-13B": 0.2,
                    "Llama-13B": 0.2, "Mistral-7B": 0.2, "OrcaPlatypus": 0.2}}),
        )
        .await;
    assert_eq!(plan.status, 200, "{}", plan.body);
    let p = &plan.body;
    eprintln!(
        "4. plan for 2,000 items to ±0.05: cheapest {} ({} labels, cost {:.0}); best single {} ({} labels); labels saved {}",
        p["cheapest"]["judges"],
        p["cheapest"]["labels"],
        p["cheapest"]["total_cost"].as_f64().unwrap(),
        p["best_single"]["judges"],
        p["best_single"]["labels"],
        p["labels_saved"]
    );
    assert_eq!(p["sub_panels"].as_array().unwrap().len(), 31);
    let cheapest = p["cheapest"]["total_cost"].as_f64().unwrap();
    assert!(
        p["sub_panels"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["total_cost"].as_f64().unwrap() >= cheapest - 1e-9)
    );
}

on_both_backends!(
    the_judge_change_walk_through_on_hanna,
    the_panel_walk_through_on_hanna,
);
