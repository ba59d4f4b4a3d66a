//! Pairwise judges: the calibrated preference's training (`auto` over its candidates, with
//! per-system terms) on 10,000 labelled comparisons of 50 systems (aim: under 5 s), and
//! `POST /v1/ratings` rating 50 systems over a run of 100,000 comparisons against 2,000
//! stored labelled ones, request bytes to response bytes (aim: under 1 s), with the
//! statistics alone beside it, and again once the cell is trained (its version's choice
//! fitted again instead of `auto` over every candidate); and training a cell of 10,000
//! labelled comparisons through a job (aim: under 5 s); and uploading 10,000 labelled
//! comparisons into the trained cell (stored, then checked by its drift alarm); and a
//! three-member panel's training on the same 10,000 (its maps and each member's alone).
//!
//!     cargo bench --bench pairwise

mod common;

use judgecal_stats::pairwise::choice;
use judgecal_stats::pairwise::preference::{Labelled, Verdicts};
use judgecal_stats::pairwise::rate::{self, Compared, FOLDS};
use judgecal_stats::rng::{Rng, RngExt, SeedableRng};
use serde_json::{Value, json};

const SYSTEMS: usize = 50;

/// One comparison of a world where system i's rating is 0.05·i, the judge sees the gap with
/// noise and favours the answer shown first.
fn comparison(rng: &mut Rng) -> (usize, usize, f64, f64, f64) {
    let a = rng.random_range(0..SYSTEMS);
    let b = (a + rng.random_range(1..SYSTEMS)) % SYSTEMS;
    let u: f64 = rng.random::<f64>().clamp(1e-9, 1.0 - 1e-9);
    let z = 0.05 * (a as f64 - b as f64) + (u / (1.0 - u)).ln();
    let noise: f64 = rng.random::<f64>() - 0.5;
    let seen = z + 2.0 * noise;
    let call = |x: f64| f64::from(u8::from(x > 0.0));
    (a, b, call(seen + 0.5), call(seen - 0.5), call(z))
}

fn name(s: usize) -> String {
    format!("model-{s:02}")
}

fn rows(n: usize, from: usize, labelled: bool, rng: &mut Rng) -> Vec<Value> {
    let side = |x: f64| if x > 0.5 { "a" } else { "b" };
    (0..n)
        .map(|i| {
            let (a, b, v, s, y) = comparison(rng);
            let mut row = json!({"item_id": format!("p{:06}", from + i), "a": name(a), "b": name(b),
                "verdict": side(v), "verdict_swapped": side(s)});
            if labelled {
                row["preference"] = json!(side(y));
            }
            row
        })
        .collect()
}

fn main() {
    let mut rng = Rng::seed_from_u64(5);
    // Training: the choice among the candidates on 10,000 labelled comparisons.
    let labelled: Vec<Labelled> = (0..10_000)
        .map(|_| {
            let (a, b, v, s, y) = comparison(&mut rng);
            Labelled {
                verdicts: Verdicts {
                    systems: Some((a, b)),
                    ..Verdicts::of(v, Some(s))
                },
                preference: y,
            }
        })
        .collect();
    let mut times = Vec::new();
    for _ in 0..3 {
        let start = std::time::Instant::now();
        let choice = choice::choose(&labelled, Some(SYSTEMS), FOLDS, 0).expect("choice");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(!choice.candidates.is_empty());
    }
    times.sort_by(f64::total_cmp);
    common::report(
        "pairwise training: auto over 10,000 labelled comparisons of 50 systems",
        &times,
    );

    // A panel of three: the judge above, and two more whose verdicts differ from its first
    // order on 20% and 30% of comparisons; `auto` weighs the panel's maps and each member's.
    let flip = |v: f64, p: f64, rng: &mut Rng| if rng.random::<f64>() < p { 1.0 - v } else { v };
    let panel: Vec<Labelled> = labelled
        .iter()
        .map(|r| {
            let (v, s) = (r.verdicts.verdict, r.verdicts.swapped);
            let members = vec![
                (v, s),
                (flip(v, 0.2, &mut rng), None),
                (flip(v, 0.3, &mut rng), None),
            ];
            Labelled {
                verdicts: Verdicts::of_panel(members).with_inputs(&r.verdicts),
                preference: r.preference,
            }
        })
        .collect();
    let mut times = Vec::new();
    for _ in 0..3 {
        let start = std::time::Instant::now();
        let choice = choice::choose(&panel, Some(SYSTEMS), FOLDS, 0).expect("choice");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(choice.candidates.len() > 6);
    }
    times.sort_by(f64::total_cmp);
    common::report(
        "pairwise panel training: auto over 10,000 labelled comparisons of 50 systems, 3 members (the panel's maps and each member's alone)",
        &times,
    );

    // The statistics of one rating: 2,000 anchors, a run of 100,000.
    let compared = |labelled: bool, rng: &mut Rng| {
        let (a, b, v, s, y) = comparison(rng);
        Compared {
            verdicts: Verdicts {
                systems: Some((a, b)),
                ..Verdicts::of(v, Some(s))
            },
            controls: vec![],
            preference: labelled.then_some(y),
            rater: None,
        }
    };
    let anchors: Vec<Compared> = (0..2_000).map(|_| compared(true, &mut rng)).collect();
    let run: Vec<Compared> = (0..100_000).map(|_| compared(false, &mut rng)).collect();
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = std::time::Instant::now();
        let rated = rate::rate(
            SYSTEMS,
            SYSTEMS,
            &anchors,
            &run,
            &rate::RateOptions::default(),
        )
        .expect("rated");
        rated.powered.ratings.rank_intervals(0.95, 4_000, &mut rng);
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    common::report(
        "ratings statistics: 50 systems, 100,000 comparisons, 2,000 anchors (with rank intervals)",
        &times,
    );

    // Through the service.
    let dir = tempfile::tempdir().unwrap();
    let (_, router) = common::start_server_with(dir.path(), vec![]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let upload = json!({"judge": "pair-bench", "rubric": "overall",
        "comparisons": rows(2_000, 900_000, true, &mut rng)});
    let stored = rt.block_on(common::call(
        &router,
        "POST",
        "/v1/comparisons",
        upload.to_string(),
    ));
    assert_eq!(stored["inserted"], 2_000, "{stored}");
    let body = json!({"judge": "pair-bench", "rubric": "overall",
        "comparisons": rows(100_000, 0, false, &mut rng)})
    .to_string();
    drop(rt);
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = std::time::Instant::now();
        let value: Value = serde_json::from_slice(body.as_bytes()).expect("JSON");
        let request = judgecal::domain::pairwise::ratings::parse(value).expect("a good run");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(request.batch.comparisons.len(), 100_000);
    }
    times.sort_by(f64::total_cmp);
    common::report("of which reading and checking the body", &times);
    let times = common::time_requests(&router, "/v1/ratings", &body, 5, |bytes| {
        let v: Value = serde_json::from_slice(bytes).expect("JSON");
        assert_eq!(v["systems"].as_array().map(Vec::len), Some(SYSTEMS), "{v}");
    });
    common::report(
        &format!(
            "POST /v1/ratings: 50 systems, 100,000 comparisons ({:.1} MB), 2,000 anchors",
            body.len() as f64 / 1e6
        ),
        &times,
    );

    // Training pairwise cells through jobs: the ratings' cell, then one of 10,000.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let upload = json!({"judge": "pair-train", "rubric": "overall",
        "comparisons": rows(10_000, 0, true, &mut rng)});
    let stored = rt.block_on(common::call(
        &router,
        "POST",
        "/v1/comparisons",
        upload.to_string(),
    ));
    assert_eq!(stored["inserted"], 10_000, "{stored}");
    let train = |judge: &str| {
        let started = std::time::Instant::now();
        rt.block_on(async {
            let job = common::call(
                &router,
                "POST",
                &format!("/v1/judges/{judge}/calibrations"),
                json!({"method": "auto"}).to_string(),
            )
            .await;
            let id = job["id"].as_str().expect("job id").to_owned();
            loop {
                let j =
                    common::call(&router, "GET", &format!("/v1/jobs/{id}"), String::new()).await;
                if j["state"] == "succeeded" {
                    break;
                }
                assert_ne!(j["state"], "failed", "{j}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        });
        started.elapsed().as_secs_f64() * 1e3
    };
    train("pair-bench");
    let mut times: Vec<f64> = (0..3).map(|_| train("pair-train")).collect();
    times.sort_by(f64::total_cmp);
    common::report(
        "training a pairwise cell through a job (POST /v1/judges/{judge}/calibrations auto, polled every 10 ms): 10,000 labelled comparisons of 50 systems",
        &times,
    );
    // Labelled comparisons into the trained cell: stored, then checked against its newest
    // version's band by the drift alarm (the path an upload to a trained cell takes).
    let mut times: Vec<f64> = (0..3)
        .map(|k| {
            let body = json!({"judge": "pair-train", "rubric": "overall",
                "comparisons": rows(10_000, 100_000 * (k + 1), true, &mut rng)})
            .to_string();
            let started = std::time::Instant::now();
            let stored = rt.block_on(common::call(&router, "POST", "/v1/comparisons", body));
            assert_eq!(stored["inserted"], 10_000, "{stored}");
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    common::report(
        "POST /v1/comparisons: 10,000 labelled comparisons into the trained cell",
        &times,
    );
    drop(rt);
    let times = common::time_requests(&router, "/v1/ratings", &body, 5, |bytes| {
        let v: Value = serde_json::from_slice(bytes).expect("JSON");
        assert_eq!(v["calibration"]["version"], 1, "{}", v["calibration"]);
    });
    common::report(
        "POST /v1/ratings as above, the cell trained (its version's choice fitted again)",
        &times,
    );
}
