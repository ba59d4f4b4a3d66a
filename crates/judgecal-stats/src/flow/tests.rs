//! Known-answer tests of the flow, at small sizes (few hundred anchors, a few hundred epochs):
//! the full-size run is a benchmark.

use std::sync::atomic::AtomicBool;

use crate::rng::Rng;
use crate::rng::{RngExt, SeedableRng};

use super::*;

/// n anchors of y = map(j) + N(0, noise²), j uniform on [lo, hi].
fn anchors(
    seed: u64,
    n: usize,
    lo: f64,
    hi: f64,
    noise: f64,
    map: impl Fn(f64) -> f64,
) -> Vec<(f64, f64)> {
    let mut rng = Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let j = lo + (hi - lo) * rng.random::<f64>();
            (j, map(j) + noise * crate::stats::standard_normal(&mut rng))
        })
        .collect()
}

fn s_curve(j: f64) -> f64 {
    j + 0.4 * (0.9 * (j - 3.0)).tanh()
}

fn quick() -> FlowConfig {
    FlowConfig {
        epochs: 400,
        learning_rate: 1e-2,
        ..FlowConfig::default()
    }
}

fn fit(data: &[Vec<(f64, f64)>], opts: &FlowConfig) -> FlowWeights {
    train(data, opts, &|_| {}, &AtomicBool::new(false)).expect("training")
}

fn mae(pred: &[f64], truth: &[f64]) -> f64 {
    pred.iter()
        .zip(truth)
        .map(|(p, t)| (p - t).abs())
        .sum::<f64>()
        / pred.len() as f64
}

/// Least-squares line through the pairs.
fn line(pairs: &[(f64, f64)]) -> impl Fn(f64) -> f64 {
    let (a, b) = crate::stats::least_squares(pairs).expect("judge scores that vary");
    move |j| a + b * j
}

/// Trains on 400 noisy points of the S curve and returns the MAE against the noiseless truth
/// on 200 held-out judge scores, of the flow and of the best line.
fn s_curve_mae(config: &FlowConfig) -> (f64, f64) {
    let train_set = anchors(1, 400, 1.0, 5.0, 0.05, s_curve);
    let flow = fit(std::slice::from_ref(&train_set), config);
    let test: Vec<f64> = (0..200)
        .map(|i| 1.0 + 4.0 * (i as f64 + 0.5) / 200.0)
        .collect();
    let truth: Vec<f64> = test.iter().map(|&j| s_curve(j)).collect();
    let flow_pred: Vec<f64> = flow
        .correct_direct(0, &test)
        .unwrap()
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    let best_line = line(&train_set);
    let line_pred: Vec<f64> = test.iter().map(|&j| best_line(j)).collect();
    (mae(&flow_pred, &truth), mae(&line_pred, &truth))
}

#[test]
fn the_flow_learns_a_curve_that_no_line_can() {
    let (flow_mae, line_mae) = s_curve_mae(&quick());
    // The best line misses the S by about 0.08 on average; the flow must halve that.
    assert!(
        flow_mae < 0.5 * line_mae,
        "flow MAE {flow_mae:.4}, best line {line_mae:.4}"
    );
}

#[test]
fn sigma_grows_far_outside_the_anchors() {
    let train_set = anchors(2, 300, 2.0, 4.0, 0.1, s_curve);
    let flow = fit(&[train_set], &quick());
    let inside = flow.correct_direct(0, &[2.5, 3.0, 3.5]).unwrap();
    let outside = flow.correct_direct(0, &[-3.0, 9.0]).unwrap();
    let max_inside = inside.iter().map(|p| p.1).fold(0.0, f64::max);
    let min_outside = outside.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    // tanh saturates far out, so σ grows by a bounded factor: require a quarter more.
    assert!(
        min_outside > 1.25 * max_inside,
        "σ inside {inside:?}, outside {outside:?}"
    );
}

#[test]
fn one_flow_learns_two_rubrics_through_the_embedding() {
    let up = |j: f64| j + 0.6;
    let down = |j: f64| 0.5 * j + 1.2;
    let data = vec![
        anchors(3, 300, 1.0, 5.0, 0.05, up),
        anchors(4, 300, 1.0, 5.0, 0.05, down),
    ];
    let flow = fit(&data, &quick());
    let test = [1.5, 2.5, 3.5, 4.5];
    for (rubric, map) in [(0, &up as &dyn Fn(f64) -> f64), (1, &down)] {
        let pred = flow.correct_direct(rubric, &test).unwrap();
        for (&j, (m, _)) in test.iter().zip(&pred) {
            // The two maps differ by 0.1 to 1.1 here; each rubric must be within 0.1 of its own.
            assert!(
                (m - map(j)).abs() < 0.1,
                "rubric {rubric} at {j}: {m} vs {}",
                map(j)
            );
        }
    }
}

#[test]
fn a_stored_and_reloaded_flow_gives_the_same_numbers_and_the_table_matches() {
    let train_set = anchors(5, 200, 1.0, 5.0, 0.1, s_curve);
    let flow = fit(
        &[train_set],
        &FlowConfig {
            epochs: 100,
            ..quick()
        },
    );
    // "Same" means bit-for-bit: the weights round-trip through JSON exactly (serde_json's
    // float_roundtrip), and MC pass k uses the same seeded dropout mask in every process.
    let json = serde_json::to_string(&flow).unwrap();
    let reloaded: FlowWeights = serde_json::from_str(&json).unwrap();
    assert_eq!(reloaded, flow);
    let xs = [0.5, 1.7, 3.3, 4.9, 6.0];
    assert_eq!(
        flow.correct_direct(0, &xs).unwrap(),
        reloaded.correct_direct(0, &xs).unwrap()
    );
    // The table of 1,025 points over [−1, 7] stays within 1e-3 of direct evaluation, for the
    // mean and for σ, at points between its nodes.
    let table = Table::build(&reloaded, 0, -1.0, 7.0, 1025).unwrap();
    let probes: Vec<f64> = (0..997)
        .map(|i| -1.0 + 8.0 * (i as f64 + 0.37) / 997.0)
        .collect();
    let direct = reloaded.correct_direct(0, &probes).unwrap();
    let worst = probes
        .iter()
        .zip(&direct)
        .map(|(&x, &(m, s))| {
            let (tm, ts) = table.correct(x).unwrap();
            (tm - m).abs().max((ts - s).abs())
        })
        .fold(0.0, f64::max);
    assert!(worst <= 1e-3, "largest deviation {worst}");
    assert!(table.correct(7.5).is_none());
}

#[test]
fn early_stopping_keeps_the_best_epoch_and_cancel_stops() {
    let train_set = anchors(6, 200, 1.0, 5.0, 0.3, s_curve);
    let opts = FlowConfig {
        epochs: 2000,
        early_stopping: Some(0.2),
        patience: 50,
        learning_rate: 3e-2,
        ..FlowConfig::default()
    };
    let flow = fit(std::slice::from_ref(&train_set), &opts);
    assert!(flow.validation_loss.is_some());
    assert!(flow.epochs_run <= 2000);
    if flow.stopped_early {
        assert!(flow.epochs_run < 2000);
    }
    let err = train(&[train_set], &quick(), &|_| {}, &AtomicBool::new(true)).unwrap_err();
    assert_eq!(err, "cancelled");
}

#[test]
fn the_default_recipe_learns_the_curve_on_minibatches() {
    let (flow_mae, line_mae) = s_curve_mae(&FlowConfig::fast());
    assert!(
        flow_mae < 0.5 * line_mae,
        "flow MAE {flow_mae:.4}, best line {line_mae:.4}"
    );
}

#[test]
fn the_cosine_schedule_falls_from_the_rate_to_zero() {
    let rate = |step| Schedule::Cosine.rate(0.01, step, 100);
    assert!((rate(0) - 0.01).abs() < 1e-15);
    assert!((rate(50) - 0.005).abs() < 1e-12);
    assert!(rate(99) < 1e-5 && rate(99) > 0.0);
    assert!(rate(25) > rate(26));
    assert_eq!(Schedule::Constant.rate(0.01, 99, 100), 0.01);
}

#[test]
fn options_take_the_presets_recipe_unless_given() {
    let paper = FlowOptions::paper().config(7);
    assert_eq!(
        paper,
        FlowConfig {
            seed: 7,
            ..FlowConfig::default()
        }
    );
    let fast = FlowOptions::default().config(7);
    assert_eq!(
        fast,
        FlowConfig {
            seed: 7,
            ..FlowConfig::fast()
        }
    );
    assert!(fast.batch_size.is_some() && fast.schedule == Schedule::Cosine);
    let epochs = FlowOptions {
        epochs: Some(5),
        ..FlowOptions::default()
    }
    .config(0);
    assert_eq!(
        (epochs.epochs, epochs.steps),
        (5, None),
        "epochs given count epochs"
    );
    let given = FlowOptions {
        steps: Some(0),
        epochs: Some(5),
        batch_size: Some(0),
        early_stopping: Some(0.0),
        ..FlowOptions::default()
    }
    .config(0);
    assert_eq!(given.epochs, 5);
    assert_eq!(given.batch_size, None, "0 means full batches");
    assert_eq!(given.early_stopping, None, "0 turns early stopping off");
    assert_eq!(given.learning_rate, FlowConfig::fast().learning_rate);
    let json: FlowOptions =
        serde_json::from_value(serde_json::json!({"preset": "paper", "epochs": 300})).unwrap();
    assert_eq!(json.config(0).epochs, 300);
    assert_eq!(json.config(0).batch_size, None);
}

#[test]
fn steps_count_optimiser_steps_whatever_the_anchors() {
    let train_set = anchors(4, 50, 1.0, 5.0, 0.1, s_curve);
    let opts = FlowConfig {
        batch_size: Some(20),
        steps: Some(7),
        ..FlowConfig::fast()
    };
    // 3 steps an epoch (20, 20, 10): 7 steps end in the third epoch.
    let flow = fit(std::slice::from_ref(&train_set), &opts);
    assert_eq!(flow.epochs_run, 3);
    let flow = fit(
        &[train_set],
        &FlowConfig {
            steps: None,
            epochs: 5,
            ..opts
        },
    );
    assert_eq!(flow.epochs_run, 5);
}

#[test]
fn the_review_audit_routes_by_the_served_sigma_at_the_budget() {
    // 1,000 held-out anchors, each predicted at 3 by a fold model. The fold models that predicted them were less
    // sure than the served flow everywhere (σ 0.2 against the served 0.05 to 0.09): routed by
    // their own σ against the served threshold, every anchor would go to review. Routed by
    // the served σ at their judge scores, the default budget of 5% is what goes.
    use crate::Corrected;
    let pairs = anchors(3, 1000, 1.0, 5.0, 0.3, |j| 3.0 + 0.5 * (j - 3.0));
    let held_out: Vec<Option<Corrected>> = pairs
        .iter()
        .map(|_| {
            Some(Corrected {
                sigma: Some(0.2),
                ..Corrected::score(3.0)
            })
        })
        .collect();
    let served: Vec<f64> = pairs
        .iter()
        .map(|p| 0.05 + 0.02 * (p.0 - 3.0).abs())
        .collect();
    let threshold = crate::stats::quantile(&served, 0.95);
    let audit = corrector::review_audit(&pairs, &held_out, &served, threshold).unwrap();
    assert_eq!(audit.held_out, 1000);
    assert!((audit.routed - 0.05).abs() < 0.002, "{audit:?}");
    // The routed anchors are those at the ends of the scale, where a prediction of 3 misses
    // by about 1: they hold three times the share of the largest 10% of errors that routing
    // at random would (5%).
    assert!(audit.large_errors_routed > 0.15, "{audit:?}");
}
