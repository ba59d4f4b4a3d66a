//! /v1/rank speed, server-side (in-process through the router: JSON parse, the 24 runs'
//! estimates, the joint draws and the pairs, JSON response; embedded SQLite): 24 runs of
//! 10,000 paired items each, on a Bayesian version (closed-form corrector term) and on an
//! isotonic one (refits on resampled anchors), then the same with a label plan, and with
//! [`LABELLED`] references on the same items of every run (each run's combined answer, and
//! every pair's own answer on the shared items); and on an isotonic version of 20,000 anchors
//! (1,500 for the others), whose refits cost the most. Then Bradley–Terry ratings of 50 systems
//! over 100,000 comparisons (`judgecal_stats::pairwise::ratings`: the fit, and the joint rank
//! intervals from 2,000 draws), the statistics behind ranking systems from pairwise verdicts
//! (aim: under 1 s).
//!
//!     cargo bench --bench rank              (everything)
//!     cargo bench --bench rank -- ratings   (the ratings alone: no server, no training)

mod common;

use serde_json::{Value, json};

const RUNS: usize = 24;
const ITEMS: usize = 10_000;
const LABELLED: usize = 200;

fn main() {
    if std::env::args().any(|a| a == "ratings") {
        return ratings();
    }
    runs();
    ratings();
}

/// Bradley–Terry ratings of 50 systems over 100,000 comparisons, a tenth of them ties.
fn ratings() {
    use judgecal_stats::pairwise::ratings::{Outcome, fit};
    use judgecal_stats::rng::{Rng, RngExt, SeedableRng};
    const SYSTEMS: usize = 50;
    const COMPARISONS: usize = 100_000;
    let mut rng = Rng::seed_from_u64(7);
    let outcomes: Vec<Outcome> = (0..COMPARISONS)
        .map(|_| {
            let a = rng.random_range(0..SYSTEMS);
            let b = (a + rng.random_range(1..SYSTEMS)) % SYSTEMS;
            let p = 1.0 / (1.0 + (-0.05 * (a as f64 - b as f64)).exp());
            let u: f64 = rng.random();
            let a_better = if u < 0.1 {
                0.5
            } else if u < 0.1 + 0.9 * p {
                1.0
            } else {
                0.0
            };
            Outcome { a, b, a_better }
        })
        .collect();
    let (mut fits, mut ranks) = (Vec::new(), Vec::new());
    for _ in 0..11 {
        let start = std::time::Instant::now();
        let ratings = fit(SYSTEMS, &outcomes, 0).expect("ratings");
        fits.push(start.elapsed().as_secs_f64() * 1e3);
        let start = std::time::Instant::now();
        let intervals = ratings.rank_intervals(0.95, 2_000, &mut rng);
        ranks.push(start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(intervals.ranks.len(), SYSTEMS);
    }
    fits.sort_by(f64::total_cmp);
    ranks.sort_by(f64::total_cmp);
    let what = format!("ratings, {SYSTEMS} systems over {COMPARISONS} comparisons");
    common::report(&format!("{what}: the fit"), &fits);
    common::report(
        &format!("{what}: joint rank intervals (2,000 draws)"),
        &ranks,
    );
}

/// /v1/rank on the four kinds of version.
fn runs() {
    let dir = tempfile::tempdir().unwrap();
    let (_, router) = common::start_server_with(
        dir.path(),
        vec![
            ("bench", json!({"method": "bayes"}), 1500),
            ("benchiso", json!({"method": "isotonic"}), 1500),
            ("benchiso20k", json!({"method": "isotonic"}), 20_000),
        ],
    );
    let runs = |labelled: usize| -> Vec<Value> {
        (0..RUNS)
            .map(|k| {
                let items: Vec<Value> = (0..ITEMS)
                    .map(|i| {
                        let s = 1.0 + ((i * 7 + k * 13) % 4001) as f64 / 1000.0;
                        let score = (s + 0.02 * k as f64).min(5.0);
                        let mut item = json!({"id": format!("p{i}"), "score": score});
                        if i < labelled {
                            let noise = ((i * 31 + k * 17) % 11) as f64 / 10.0 - 0.5;
                            item["reference"] = json!((score + noise).clamp(1.0, 5.0));
                        }
                        item
                    })
                    .collect();
                json!({"name": format!("model-{k}"), "items": items})
            })
            .collect()
    };
    let ok = |bytes: &[u8]| {
        let v: Value = serde_json::from_slice(bytes).expect("JSON");
        assert!(v["pairs"].is_array(), "{v}");
    };
    let cases = |judge| match judge {
        // A version of 20,000 anchors: its 400 refits each draw 20,000 (RESAMPLE_CAP).
        "benchiso20k" => vec![(0, false)],
        _ => vec![(0, false), (0, true), (LABELLED, false)],
    };
    for judge in ["bench", "benchiso", "benchiso20k"] {
        for (labelled, labels) in cases(judge) {
            // A label plan is a ranking session's: its looks (eight of ten planned, each
            // drawing a first sample) are timed, their binding of the runs included.
            let (path, body) = if labels {
                let id = std::sync::Mutex::new(String::new());
                let open = json!({"judge": judge, "rubric": "coherence", "rounds": 10});
                common::time_requests(&router, "/v1/rank/sessions", &open.to_string(), 1, |b| {
                    let v: Value = serde_json::from_slice(b).expect("JSON");
                    *id.lock().unwrap() = v["id"].as_str().expect("a session").to_owned();
                });
                let id = id.into_inner().unwrap();
                let body = json!({"runs": runs(labelled), "labels": {"min_gap": 0.1}});
                (format!("/v1/rank/sessions/{id}/looks"), body)
            } else {
                let body = json!({"judge": judge, "rubric": "coherence", "runs": runs(labelled)});
                ("/v1/rank".to_owned(), body)
            };
            let body = body.to_string();
            // The first request reads the version's anchors; the figures are of the ones after.
            common::time_requests(&router, &path, &body, 1, ok);
            let times = common::time_requests(&router, &path, &body, 7, ok);
            let plan = match (labelled, labels) {
                (0, false) => String::new(),
                (0, true) => ", a session's look with a label plan".into(),
                (m, _) => format!(", {m} labelled a run"),
            };
            common::report(
                &format!("rank, {RUNS} runs of {ITEMS} items, {judge}{plan}"),
                &times,
            );
        }
    }
}
