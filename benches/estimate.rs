//! /v1/estimate and /v1/compare speed, server-side (in-process through the router: JSON parse,
//! the estimate, JSON response; embedded SQLite, whose anchors are read once per version):
//!
//! 1. a run of 100,000 scores on a Bayesian version (the corrector's term in closed form);
//! 2. the same run on an isotonic version (the term from 200 refits on resampled anchors);
//! 3. two paired runs of 100,000 scores each, on both;
//! 4. the same on versions fitted on 200,000 anchors (bayes and quantile_map): the corrector
//!    term's cost must not grow with the anchors beyond what its precision needs.
//!
//!     cargo bench --bench estimate

mod common;

use serde_json::{Value, json};

const RUN: usize = 100_000;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let (_, router) = common::start_server_with(
        dir.path(),
        vec![
            ("bench", json!({"method": "bayes"}), 1500),
            ("benchiso", json!({"method": "isotonic"}), 1500),
            ("big", json!({"method": "bayes"}), 200_000),
            ("bigqm", json!({"method": "quantile_map"}), 200_000),
        ],
    );
    let scores: Vec<f64> = (0..RUN).map(|i| 1.0 + (i % 4001) as f64 / 1000.0).collect();
    let ok = |bytes: &[u8]| {
        let v: Value = serde_json::from_slice(bytes).expect("JSON");
        assert!(v["interval"].is_array(), "{v}");
    };
    for (judge, term) in [
        ("bench", "posterior"),
        ("benchiso", "resampled"),
        ("big", "posterior, 200,000 anchors"),
        ("bigqm", "resampled, 200,000 anchors"),
    ] {
        let body = json!({"judge": judge, "rubric": "coherence", "scores": scores}).to_string();
        // The first request reads the version's anchors; the figures are of the ones after.
        common::time_requests(&router, "/v1/estimate", &body, 1, ok);
        let times = common::time_requests(&router, "/v1/estimate", &body, 11, ok);
        common::report(
            &format!("estimate, 100,000 scores, {judge} ({term} corrector term)"),
            &times,
        );
        let items: Vec<Value> = scores
            .iter()
            .enumerate()
            .map(|(i, s)| json!({"id": format!("p{i}"), "score": s}))
            .collect();
        let shifted: Vec<Value> = scores
            .iter()
            .enumerate()
            .map(|(i, s)| json!({"id": format!("p{i}"), "score": (s + 0.1).min(5.0)}))
            .collect();
        let body = json!({"judge": judge, "rubric": "coherence",
                          "a": {"items": shifted}, "b": {"items": items}})
        .to_string();
        let times = common::time_requests(&router, "/v1/compare", &body, 5, ok);
        common::report(
            &format!("compare, two paired runs of 100,000 items, {judge} ({term} corrector term)"),
            &times,
        );
    }
}
