//! Panels: a five-, a nine- and a twelve-judge panel on six rubrics × 1,000 items (embedded
//! SQLite).
//!
//! 1. Training with `auto`, `POST /v1/judges/{panel}/calibrations` to `succeeded`: the members'
//!    anchors joined, the fusion's cross-fits (the panel and each member alone, 5 folds), the
//!    sub-panels fitted by NUTS (all 31 of five members; of nine or twelve, each member alone
//!    and the full panel), then `auto` on the fused scores.
//! 2. `/v1/correct` of 10,000 panel items in one request, every member's score given, and the
//!    same with a fifth of the items missing a member (with nine or twelve, the sub-panels they
//!    need computed from the statistics on first use).
//! 3. `POST /v1/panels/{name}/plan`: every sub-panel weighed (4,095 of twelve judges).
//! 4. `/v1/estimate` of those 10,000 items with a fifth missing a member: with the run's test of
//!    whether its missing scores track the scores given, and without it
//!    (`assume_missing_at_random`, the path before the test), side by side.
//!
//!     cargo bench --bench panel

mod common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

const RUBRICS: [&str; 6] = ["r1", "r2", "r3", "r4", "r5", "r6"];
const ITEMS: usize = 1000;
const BATCH: usize = 10_000;

/// A deterministic normal-ish draw in (−1.7, 1.7): the sum of three hashed uniforms.
fn noise(i: usize, salt: usize) -> f64 {
    (0..3)
        .map(|k| ((i * 7919 + salt * 104_729 + k * 15_485_863) % 10_007) as f64 / 10_007.0 - 0.5)
        .sum::<f64>()
        * 1.15
}

/// Member m's score of item i: the quality seen through noise that grows with m, two members
/// sharing part of theirs.
fn score(i: usize, m: usize, r: usize) -> f64 {
    let q = noise(i, 1 + r);
    let shared = if m < 2 { 0.4 * noise(i, 50 + r) } else { 0.0 };
    (3.0 + 0.8 * q + shared + (0.3 + 0.15 * m as f64) * noise(i, 100 + 10 * r + m)).clamp(1.0, 5.0)
}

fn reference(i: usize, r: usize) -> f64 {
    (3.0 + 0.8 * noise(i, 1 + r) + 0.3 * noise(i, 900 + r)).clamp(1.0, 5.0)
}

fn main() {
    for members in [5, 9, 12] {
        bench(members);
    }
}

fn bench(count: usize) {
    let members: Vec<String> = (1..=count).map(|m| format!("m{m}")).collect();
    let dir = tempfile::tempdir().unwrap();
    let (_, router) = common::start_server_with(dir.path(), Vec::new());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let seconds = rt.block_on(async {
        for (m, judge) in members.iter().enumerate() {
            for (r, rubric) in RUBRICS.iter().enumerate() {
                let anchors: Vec<Value> = (0..ITEMS)
                    .map(|i| json!({"item_id": format!("i{i}"), "judge_score": score(i, m, r), "reference_score": reference(i, r)}))
                    .collect();
                let res = common::call(&router, "POST", "/v1/anchors",
                    json!({"judge": judge, "rubric": rubric, "anchors": anchors}).to_string()).await;
                assert!(res["inserted"].as_u64() == Some(ITEMS as u64), "{res}");
            }
        }
        let res = common::call(&router, "POST", "/v1/panels",
            json!({"name": "jury", "judges": members}).to_string()).await;
        assert_eq!(res["name"], "jury", "{res}");
        let started = Instant::now();
        let job = common::call(&router, "POST", "/v1/judges/jury/calibrations",
            json!({"method": "auto"}).to_string()).await;
        let id = job["id"].as_str().expect("job id").to_owned();
        loop {
            let j = common::call(&router, "GET", &format!("/v1/jobs/{id}"), String::new()).await;
            if j["state"] == "succeeded" {
                break;
            }
            assert!(j["state"] != "failed" && j["state"] != "cancelled", "{j}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        started.elapsed().as_secs_f64()
    });
    println!(
        "1. panel of {count} judges, 6 rubrics x {ITEMS} items, auto, POST to succeeded: {seconds:.1} s (issue: <= 60 s)"
    );
    let mut partial_run = Vec::new();
    for missing in [0usize, 5] {
        let items: Vec<Value> = (0..BATCH)
            .map(|i| {
                let scores: serde_json::Map<String, Value> = members
                    .iter()
                    .enumerate()
                    .filter(|(m, _)| {
                        !(missing > 0 && i % missing == 0 && *m == (i / missing) % count)
                    })
                    .map(|(m, j)| (j.clone(), json!(score(ITEMS + i, m, 0))))
                    .collect();
                json!({"scores": scores})
            })
            .collect();
        if missing > 0 {
            partial_run = items.clone();
        }
        let body = json!({"judge": "jury", "rubric": "r1", "items": items}).to_string();
        let times = common::time_requests(&router, "/v1/correct", &body, 11, |bytes| {
            assert!(bytes.len() > BATCH * 50, "a full response");
        });
        common::report(
            &format!(
                "2. correct {BATCH} items of a {count}-judge panel in one request, {} (in-process; issue: <= 50 ms)",
                if missing > 0 {
                    "a fifth missing a member"
                } else {
                    "every member scored"
                }
            ),
            &times,
        );
    }
    let body = json!({"rubric": "r1", "run_size": 2000, "target_half_width": 0.05,
                      "label_cost": 20})
    .to_string();
    let times = common::time_requests(&router, "/v1/panels/jury/plan", &body, 11, |bytes| {
        assert!(
            bytes.starts_with(b"{\"") && !bytes.starts_with(b"{\"error"),
            "a plan"
        );
    });
    common::report(
        &format!(
            "3. plan of a {count}-judge panel ({} sub-panels weighed, in-process)",
            (1usize << count) - 1
        ),
        &times,
    );
    for assume in [false, true] {
        let body = json!({"judge": "jury", "rubric": "r1", "items": partial_run,
                          "assume_missing_at_random": assume})
        .to_string();
        let times = common::time_requests(&router, "/v1/estimate", &body, 11, |bytes| {
            assert!(bytes.starts_with(b"{\"judge\""), "an estimate");
        });
        common::report(
            &format!(
                "4. estimate of {BATCH} items of a {count}-judge panel, a fifth missing a member, {} (in-process)",
                if assume {
                    "missing at random assumed (no test)"
                } else {
                    "missing scores tested"
                }
            ),
            &times,
        );
    }
}
