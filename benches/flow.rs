//! Flow speed with the paper's settings: training on 1,500 anchors for 1,500 full-batch
//! epochs, and 100,000 MC-dropout corrections (K = 40) through the tabulated sub-networks.
//!
//!     source scripts/setup.sh && cargo bench --bench flow

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use judgecal::calibrate::flow::{FlowConfig, Table, train};

fn main() {
    let anchors: Vec<(f64, f64)> = (0..1500)
        .map(|i| {
            let j = 1.0 + 4.0 * ((i * 7919) % 1500) as f64 / 1500.0;
            let noise = (((i * 104_729) % 997) as f64 / 997.0 - 0.5) * 0.4;
            (j, j + 0.4 * (0.9 * (j - 3.0)).tanh() + noise)
        })
        .collect();
    if let Ok(n) = std::env::var("FLOW_THREADS") {
        tch::set_num_threads(n.parse().unwrap());
    }
    let opts = FlowConfig {
        epochs: std::env::var("FLOW_EPOCHS").map_or(1500, |e| e.parse().unwrap()),
        ..FlowConfig::default()
    };
    let started = Instant::now();
    let marks = std::sync::Mutex::new(Vec::new());
    let flow = train(
        &[anchors],
        &opts,
        &|e| {
            marks
                .lock()
                .unwrap()
                .push((e.epoch, started.elapsed().as_secs_f64()))
        },
        &AtomicBool::new(false),
    )
    .expect("training");
    let marks = marks.into_inner().unwrap();
    let per_epoch = |from: usize, to: usize| {
        (marks[to].1 - marks[from].1) / (marks[to].0 - marks[from].0) as f64 * 1e3
    };
    let last = marks.len() - 1;
    println!(
        "ms per epoch: first 100 {:.1}, last 100 {:.1}",
        per_epoch(0, 10.min(last)),
        per_epoch(last.saturating_sub(10), last)
    );
    println!(
        "flow training, 1,500 anchors x 1,500 epochs (RK4 step 0.1, hidden 64): {:.1} s, final loss {:.4}",
        started.elapsed().as_secs_f64(),
        flow.train_loss
    );
    let started = Instant::now();
    let table = Table::build(&flow, 0, -3.0, 9.0, 1025).expect("table");
    println!(
        "tabulating K = 40 sub-networks on 1,025 points: {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let scores: Vec<f64> = (0..100_000)
        .map(|i| 1.0 + (i % 4001) as f64 / 1000.0)
        .collect();
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let out: Vec<(f64, f64)> = scores.iter().map(|&x| table.correct(x).unwrap()).collect();
        times.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(out.len(), scores.len());
    }
    times.sort_by(f64::total_cmp);
    println!(
        "100,000 corrections with σ from the table: median {:.1} ms",
        times[2]
    );
}
