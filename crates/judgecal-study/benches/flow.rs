//! The flow's speed and quality, run alone (a concurrent build slows libtorch tenfold):
//!
//!     source scripts/setup.sh && cargo bench -p judgecal-study --bench flow
//!
//! 1. Time to quality: on `judgecal-study experiment`'s split (seeds 0–4, the flow trained on the
//!    1,500-anchor pool, scored on the held-out test items), the default recipe beside the
//!    paper preset: training seconds and held-out MAE of each.
//! 2. Training threads: the default recipe on seed 0 with 1 and 2 libtorch threads, idle and
//!    beside a second CPU-bound process.
//! 3. A flow job for 1,500 anchors through the service, `POST` to `succeeded`.
//! 4. `auto` for one judge with 6 rubrics × 1,000 anchors, 5 folds, the flow included, `POST`
//!    to `succeeded`.
//! 5. Tabulation and 100,000 corrections through the table.
//! 6. `auto` on one cell of 200,000 anchors from the paper's synthetic judge (`FLOW_BIG`
//!    changes the count), 5 folds, the flow included: where the time goes (each step of
//!    `select::auto` called directly, timed from its progress details), then the same through
//!    the service, `POST` to `succeeded` (`FLOW_BIG_JOB=0` skips the job).
//!
//! `FLOW_SECTIONS=1,3` runs some of them (default 1 to 5; 6 takes minutes, so name it); `FLOW_SEEDS` and `FLOW_TEST` change section 1's
//! seeds (default 5) and test items (default the experiment's 200); `FLOW_OPTIONS` (the
//! options' JSON) replaces the default recipe there, `FLOW_PAPER=0` skips the paper preset;
//! `FLOW_THREADS` sets libtorch's threads for all of them.

// The server benches' helpers (a router on a temporary SQLite store), shared with the root
// package's benches.
#[path = "../../../benches/common/mod.rs"]
mod common;

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use judgecal_stats::flow::{Flow, FlowOptions, Table, set_threads, threads};
use judgecal_stats::{Cell, Corrector, Run};
use judgecal_study::experiment::{Source, Split, StudyOptions, synthesise};
use judgecal_study::synthetic::JudgeModel;
use serde_json::{Value, json};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The paper's synthetic judge on stand-in references: `test` items, then a pool of `pool`.
fn options(seed: u64, test: usize, pool: usize) -> StudyOptions {
    StudyOptions {
        source: Source::StandIn,
        judge: JudgeModel::default(),
        scale: (1.0, 5.0),
        seed,
        seeds: 1,
        test,
        pool,
        budgets: vec![pool],
        sweep: vec![],
        methods: vec![],
        settings: Default::default(),
        flow_preset: Default::default(),
        flow_epochs: None,
    }
}

fn split(seed: u64, test: usize) -> Split {
    synthesise(&options(seed, test, 1500), None, seed).expect("split")
}

/// Trains on the split's pool and scores its test items: (training seconds, held-out MAE).
fn fit(split: &Split, options: &FlowOptions, seed: u64) -> (f64, f64) {
    let never = AtomicBool::new(false);
    let quiet = |_: f64| {};
    let run = Run::new(&never, &quiet);
    let cells = [Cell {
        pairs: split.pool.clone(),
        scale: (1.0, 5.0),
    }];
    let started = Instant::now();
    let weights = Flow::fit(options, &cells, seed, &run).expect("training");
    let seconds = started.elapsed().as_secs_f64();
    let (tj, ty): (Vec<f64>, Vec<f64>) = split.test.iter().copied().unzip();
    let pred = Flow::predict(&weights, 0, &tj).expect("prediction");
    let mae = pred
        .iter()
        .zip(&ty)
        .map(|(p, y)| (p.score - y).abs())
        .sum::<f64>()
        / ty.len() as f64;
    (seconds, mae)
}

fn time_to_quality() {
    let seeds: u64 = env("FLOW_SEEDS", 5);
    let test: usize = env("FLOW_TEST", 200);
    println!(
        "1. time to quality: experiment split, 1,500 training anchors, {test} test items, {} threads",
        threads()
    );
    println!("seed  default s  default MAE  paper s  paper MAE  MAE ratio");
    let (mut fast_s, mut paper_s, mut worst) = (Vec::new(), Vec::new(), 0.0f64);
    let default: FlowOptions = std::env::var("FLOW_OPTIONS")
        .map(|j| serde_json::from_str(&j).expect("FLOW_OPTIONS: flow options as JSON"))
        .unwrap_or_default();
    let paper = env("FLOW_PAPER", 1) == 1;
    for seed in 0..seeds {
        let split = split(seed, test);
        let (fs, fm) = fit(&split, &default, seed);
        let (ps, pm) = if paper {
            fit(&split, &FlowOptions::paper(), seed)
        } else {
            (f64::NAN, f64::NAN)
        };
        worst = worst.max(fm / pm);
        fast_s.push(fs);
        paper_s.push(ps);
        println!(
            "{seed:>4}  {fs:>9.2}  {fm:>11.4}  {ps:>7.1}  {pm:>9.4}  {:>9.4}",
            fm / pm
        );
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!(
        "default recipe: training {:.2} s on average (at most {:.2} s); paper preset {:.1} s; worst MAE ratio {worst:.4}",
        mean(&fast_s),
        fast_s.iter().copied().fold(0.0, f64::max),
        mean(&paper_s)
    );
}

/// A child process that keeps one core busy until dropped.
struct Busy(std::process::Child);

impl Busy {
    fn start() -> Self {
        Busy(
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("a busy loop"),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn training_threads() {
    println!(
        "2. training seconds, default recipe, seed 0 (1,500 anchors): idle / beside a busy process"
    );
    let split = split(0, 200);
    let chosen = threads();
    for n in [1, 2] {
        set_threads(n);
        let (idle, _) = fit(&split, &FlowOptions::default(), 0);
        let busy = Busy::start();
        let (loaded, _) = fit(&split, &FlowOptions::default(), 0);
        drop(busy);
        println!("{n} thread(s): {idle:.2} s / {loaded:.2} s");
    }
    set_threads(chosen);
}

/// Posts `body` as a calibration of `judge` and waits for it: seconds from `POST` to
/// `succeeded`.
async fn job(router: &axum::Router, judge: &str, body: Value) -> f64 {
    let started = Instant::now();
    let job = common::call(
        router,
        "POST",
        &format!("/v1/judges/{judge}/calibrations"),
        body.to_string(),
    )
    .await;
    let id = job["id"].as_str().expect("job id").to_owned();
    loop {
        let j = common::call(router, "GET", &format!("/v1/jobs/{id}"), String::new()).await;
        if j["state"] == "succeeded" {
            return started.elapsed().as_secs_f64();
        }
        assert!(j["state"] != "failed" && j["state"] != "cancelled", "{j}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `n` anchors of a curved bias with noise for `rubric`.
fn anchors(rubric: usize, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let j = 1.0 + 4.0 * ((i * 7919) % n) as f64 / n as f64;
            let noise = (((i * 104_729 + rubric * 31) % 997) as f64 / 997.0 - 0.5) * 0.6;
            let y =
                (j + 0.1 * rubric as f64 + 0.4 * (0.9 * (j - 3.0)).tanh() + noise).clamp(1.0, 5.0);
            json!({"item_id": format!("i{i}"), "judge_score": j, "reference_score": y})
        })
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn jobs(sections: &[u32]) {
    let dir = tempfile::tempdir().unwrap();
    let (_, router) = common::start_server(dir.path(), vec![]);
    let rt = runtime();
    rt.block_on(async {
        if sections.contains(&3) {
            common::call(
                &router,
                "POST",
                "/v1/anchors",
                json!({"judge": "one", "rubric": "r0", "anchors": anchors(0, 1500)}).to_string(),
            )
            .await;
            let mut times = Vec::new();
            for _ in 0..3 {
                times.push(job(&router, "one", json!({"method": "flow"})).await);
            }
            times.sort_by(f64::total_cmp);
            println!(
                "3. a flow job, 1,500 anchors, default recipe, POST to succeeded: median {:.2} s of 3 ({:.2}–{:.2})",
                times[1], times[0], times[2]
            );
        }
        if sections.contains(&4) {
            println!("4. auto, 6 rubrics x 1,000 anchors, 5 folds, flow included, step by step:");
            let cells: Vec<Cell> = (0..6)
                .map(|r| Cell {
                    pairs: anchors(r, 1000)
                        .iter()
                        .map(|a| {
                            (
                                a["judge_score"].as_f64().unwrap(),
                                a["reference_score"].as_f64().unwrap(),
                            )
                        })
                        .collect(),
                    scale: (1.0, 5.0),
                })
                .collect();
            timed_auto(&cells);
            for r in 0..6 {
                common::call(
                    &router,
                    "POST",
                    "/v1/anchors",
                    json!({"judge": "six", "rubric": format!("r{r}"), "anchors": anchors(r, 1000)})
                        .to_string(),
                )
                .await;
            }
            let seconds = job(&router, "six", json!({"method": "auto", "options": {"folds": 5}})).await;
            println!(
                "   the same as a job, POST to succeeded: {seconds:.1} s"
            );
        }
    });
}

fn tabulation() {
    let split = split(0, 200);
    let never = AtomicBool::new(false);
    let quiet = |_: f64| {};
    let cells = [Cell {
        pairs: split.pool.clone(),
        scale: (1.0, 5.0),
    }];
    let weights = Flow::fit(
        &FlowOptions::default(),
        &cells,
        0,
        &Run::new(&never, &quiet),
    )
    .expect("training");
    let started = Instant::now();
    let table = Table::build(&weights, 0, -3.0, 9.0, 1025).expect("table");
    println!(
        "5. tabulating K = 40 sub-networks on 1,025 points: {:.0} ms",
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
        "   100,000 corrections with σ from the table: median {:.1} ms",
        times[2]
    );
}

fn main() {
    if let Ok(n) = std::env::var("FLOW_THREADS") {
        set_threads(n.parse().expect("FLOW_THREADS: a number"));
    }
    let sections: Vec<u32> = std::env::var("FLOW_SECTIONS")
        .unwrap_or_else(|_| "1,2,3,4,5".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    if sections.contains(&1) {
        time_to_quality();
    }
    if sections.contains(&2) {
        training_threads();
    }
    if sections.contains(&3) || sections.contains(&4) {
        jobs(&sections);
    }
    if sections.contains(&5) {
        tabulation();
    }
    if sections.contains(&6) {
        big_auto(env("FLOW_BIG", 200_000));
    }
}

/// `select::auto` on `cells` (5 folds, every candidate, the flow from 1,000 anchors), each
/// step timed from its progress details: where the time goes.
fn timed_auto(cells: &[Cell]) {
    use judgecal_stats::cv::{Scheme, Split};
    use judgecal_stats::select::{AutoOptions, auto};
    let options = AutoOptions {
        split: Split {
            scheme: Scheme::Folds(5),
            seed: 0,
        },
        rule: Default::default(),
        flow_min_anchors: 1000,
        candidates: Default::default(),
    };
    let never = AtomicBool::new(false);
    let quiet = |_: f64| {};
    let started = Instant::now();
    let last = std::sync::Mutex::new((0.0f64, String::from("start")));
    let detail = |d: String| {
        let Ok(v) = serde_json::from_str::<Value>(&d) else {
            return;
        };
        let Some(step) = v["step"].as_str() else {
            return;
        };
        let now = started.elapsed().as_secs_f64();
        let mut last = last.lock().unwrap();
        println!("   {:<40} {:>7.1} s", last.1, now - last.0);
        *last = (now, step.to_owned());
    };
    let run = Run::new(&never, &quiet).with_detail(&detail);
    let chosen = auto(cells, &options, &run).expect("auto");
    let total = started.elapsed().as_secs_f64();
    let last = last.lock().unwrap();
    println!(
        "   {:<40} {:>7.1} s (to the end: each cell's choice and nested figures)",
        last.1,
        total - last.0
    );
    let won: Vec<String> = chosen
        .iter()
        .map(|c| c.decision.chosen.to_string())
        .collect();
    println!(
        "   select::auto in all: {total:.1} s; chose {}",
        won.join(", ")
    );
}

/// Section 6: `auto` on one cell of `n` anchors, step by step and as a job.
fn big_auto(n: usize) {
    let pairs = synthesise(&options(0, 0, n), None, 0).expect("split").pool;
    println!(
        "6. auto, one cell of {n} anchors (the paper's synthetic judge), 5 folds, flow included"
    );
    timed_auto(&[Cell {
        pairs: pairs.clone(),
        scale: (1.0, 5.0),
    }]);
    if env("FLOW_BIG_JOB", 1) == 0 {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, router) = common::start_server(dir.path(), vec![]);
    let rt = runtime();
    rt.block_on(async {
        for chunk in pairs.chunks(50_000).enumerate() {
            let anchors: Vec<Value> = chunk
                .1
                .iter()
                .enumerate()
                .map(|(i, (j, y))| {
                    json!({"item_id": format!("c{}-{i}", chunk.0), "judge_score": j, "reference_score": y})
                })
                .collect();
            common::call(
                &router,
                "POST",
                "/v1/anchors",
                json!({"judge": "big", "rubric": "r0", "anchors": anchors}).to_string(),
            )
            .await;
        }
        let seconds = job(&router, "big", json!({"method": "auto", "options": {"folds": 5}})).await;
        println!("   the same as a job, POST to succeeded: {seconds:.1} s");
    });
}
