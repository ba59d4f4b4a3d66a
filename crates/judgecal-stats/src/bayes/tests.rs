//! Known-answer tests of the Bayesian fit: least squares at large n, interval coverage over
//! simulated data sets, partial pooling, the canary, convergence and seeding.

use super::*;
use crate::rng::RngExt;
use crate::stats::standard_normal;

/// Anchors from y = a + b·j + N(0, s²), j uniform on [1, 5].
pub(super) fn simulate(rng: &mut Rng, n: usize, a: f64, b: f64, s: f64) -> Vec<(f64, f64)> {
    (0..n)
        .map(|_| {
            let j = 1.0 + 4.0 * rng.random::<f64>();
            (j, a + b * j + s * standard_normal(rng))
        })
        .collect()
}

fn ols(pairs: &[(f64, f64)]) -> (f64, f64) {
    crate::stats::least_squares(pairs).expect("judge scores that vary")
}

fn no_progress(_: f64) {}

#[test]
fn with_many_anchors_the_posterior_mean_is_least_squares() {
    let mut rng = Rng::seed_from_u64(1);
    let pairs = simulate(&mut rng, 2000, 1.2, 0.85, 0.5);
    let fit = fit(
        &[SufficientStats::from_pairs(pairs.iter().copied())],
        &FitOptions::default(),
        &no_progress,
    )
    .unwrap();
    let (a, b) = ols(&pairs);
    let p = fit.rubrics[0];
    // Monte-Carlo error of a posterior mean is sd/√ESS; with ESS ≥ 400 that is at most 5%
    // of the posterior sd. The prior's pull at n = 2000 is far smaller. Allow 4 MC errors.
    let mc = |var: f64| 4.0 * var.sqrt() / 400f64.sqrt();
    assert!(
        (p.alpha_mean - a).abs() < mc(p.alpha_var),
        "α {} vs OLS {a}",
        p.alpha_mean
    );
    assert!(
        (p.beta_mean - b).abs() < mc(p.beta_var),
        "β {} vs OLS {b}",
        p.beta_mean
    );
    assert!((p.sigma_mean - 0.5).abs() < 0.03);
    assert!(fit.diagnostics.failure().is_none(), "{:?}", fit.diagnostics);
    assert!(!p.canary);
}

#[test]
fn ninety_five_percent_intervals_cover_the_truth_about_95_percent_of_the_time() {
    // 200 simulated data sets of 40 anchors from a known line. At each, is the true mean at
    // j = 4.5 inside the 95% credible interval, and is a new item's reference score inside
    // the 95% predictive interval? With 200 replications the binomial sd of a 95% rate is
    // 1.5 points, so the band [90%, 99%] is ±3 sd around 95%, rounded outward.
    let (a, b, s, j0) = (0.8, 0.9, 0.45, 4.5);
    let mut rng = Rng::seed_from_u64(7);
    let opts = FitOptions {
        warmup: 300,
        draws: 500,
        ..FitOptions::default()
    };
    let (mut credible, mut predictive) = (0, 0);
    let reps = 200;
    for rep in 0..reps {
        let pairs = simulate(&mut rng, 40, a, b, s);
        let fit = fit(
            &[SufficientStats::from_pairs(pairs)],
            &FitOptions { seed: rep, ..opts },
            &no_progress,
        )
        .unwrap();
        let c = fit.rubrics[0].correct(j0);
        let truth = a + b * j0;
        credible += usize::from(c.credible.0 <= truth && truth <= c.credible.1);
        let new_item = simulate(&mut rng, 1, a, b, s)[0];
        let c = fit.rubrics[0].correct(new_item.0);
        predictive += usize::from(c.predictive.0 <= new_item.1 && new_item.1 <= c.predictive.1);
    }
    let rate = |k: usize| k as f64 / reps as f64;
    assert!(
        (0.90..=0.99).contains(&rate(credible)),
        "credible coverage {}",
        rate(credible)
    );
    assert!(
        (0.90..=0.99).contains(&rate(predictive)),
        "predictive coverage {}",
        rate(predictive)
    );
}

#[test]
fn a_sparse_rubric_borrows_from_its_siblings_and_a_rich_one_does_not() {
    let mut rng = Rng::seed_from_u64(3);
    let mut stats: Vec<SufficientStats> = (0..3)
        .map(|k| {
            SufficientStats::from_pairs(simulate(&mut rng, 2000, 1.0 + 0.05 * k as f64, 0.8, 0.5))
        })
        .collect();
    // Five anchors whose own least-squares slope is far from the siblings' 0.8.
    let sparse = [(1.5, 1.0), (2.0, 2.2), (3.0, 3.6), (3.5, 4.4), (4.5, 5.0)];
    let (_, sparse_ols) = ols(&sparse);
    assert!(sparse_ols > 1.2, "{sparse_ols}");
    stats.push(SufficientStats::from_pairs(sparse));
    let fit = fit(&stats, &FitOptions::default(), &no_progress).unwrap();
    let pooled = fit.rubrics[3].beta_mean;
    // Pulled more than half-way from its own slope toward the siblings'.
    assert!(
        (pooled - 0.8).abs() < 0.5 * (sparse_ols - 0.8),
        "pooled β {pooled}, own {sparse_ols}"
    );
    // Alone, with the fixed priors, it stays near its own slope.
    let alone = fit_one(&sparse);
    assert!(
        (alone - sparse_ols).abs() < 0.15,
        "alone {alone}, own {sparse_ols}"
    );
    // A 2,000-anchor rubric keeps its own estimate.
    let rich = fit.rubrics[0];
    assert!((rich.beta_mean - 0.8).abs() < 0.03, "{}", rich.beta_mean);
}

fn fit_one(pairs: &[(f64, f64)]) -> f64 {
    fit(
        &[SufficientStats::from_pairs(pairs.iter().copied())],
        &FitOptions::default(),
        &no_progress,
    )
    .unwrap()
    .rubrics[0]
        .beta_mean
}

#[test]
fn the_canary_fires_when_the_judge_stops_tracking_the_reference() {
    let mut rng = Rng::seed_from_u64(5);
    let flat = simulate(&mut rng, 80, 3.0, 0.05, 0.8);
    let good = simulate(&mut rng, 80, 0.5, 0.9, 0.4);
    let fit = fit(
        &[
            SufficientStats::from_pairs(flat),
            SufficientStats::from_pairs(good),
        ],
        &FitOptions::default(),
        &no_progress,
    )
    .unwrap();
    assert!(fit.rubrics[0].canary, "{:?}", fit.rubrics[0]);
    assert!(fit.rubrics[0].beta_collapse_probability > 0.5);
    assert!(!fit.rubrics[1].canary, "{:?}", fit.rubrics[1]);
    assert!(fit.rubrics[1].beta_collapse_probability < 0.01);
}

#[test]
fn rich_rubrics_converge_whether_they_differ_or_agree() {
    // Rubrics that agree put τ near 0 (a funnel for centred slopes); rubrics that differ
    // make τ large (a curved ridge for non-centred ones). Both must pass the diagnostics
    // at the default settings.
    let mut rng = Rng::seed_from_u64(13);
    let agree: Vec<SufficientStats> = [400, 300]
        .iter()
        .map(|&n| SufficientStats::from_pairs(simulate(&mut rng, n, 0.5, 0.8, 0.3)))
        .collect();
    let differ: Vec<SufficientStats> = (0..6)
        .map(|k| {
            let (a, b) = (0.3 + 0.3 * k as f64, 0.95 - 0.05 * k as f64);
            SufficientStats::from_pairs(simulate(&mut rng, 1500, a, b, 0.4))
        })
        .collect();
    for stats in [agree, differ] {
        let fit = fit(&stats, &FitOptions::default(), &no_progress).unwrap();
        assert!(fit.diagnostics.failure().is_none(), "{:?}", fit.diagnostics);
    }
}

#[test]
fn the_same_seed_gives_the_same_fit() {
    let mut rng = Rng::seed_from_u64(9);
    let stats = [SufficientStats::from_pairs(simulate(
        &mut rng, 100, 1.0, 0.9, 0.5,
    ))];
    let opts = FitOptions {
        seed: 42,
        ..FitOptions::default()
    };
    let a = fit(&stats, &opts, &no_progress).unwrap();
    let b = fit(&stats, &opts, &no_progress).unwrap();
    assert_eq!(a, b);
    let c = fit(&stats, &FitOptions { seed: 43, ..opts }, &no_progress).unwrap();
    assert_ne!(a.rubrics[0].beta_mean, c.rubrics[0].beta_mean);
}

#[test]
fn a_fit_that_misses_its_gate_extends_itself_within_its_budget() {
    let mut rng = Rng::seed_from_u64(21);
    let stats = [SufficientStats::from_pairs(simulate(
        &mut rng, 300, 1.0, 0.9, 0.5,
    ))];
    let rounds = std::cell::RefCell::new(Vec::new());
    let note = |round: u32, why: &str| rounds.borrow_mut().push((round, why.to_owned()));
    // 2 chains × 150 draws cannot reach a bulk ESS of 400; 4 × 300 can.
    let short = FitOptions {
        warmup: 300,
        draws: 150,
        ..FitOptions::default()
    };
    let first = fit(&stats, &short, &no_progress).unwrap();
    assert!(first.gate_failure().unwrap().contains("bulk ESS"));
    let extended = fit_extending(&stats, &short, &no_progress, &note).unwrap();
    assert!(
        extended.gate_failure().is_none(),
        "{:?}",
        extended.diagnostics
    );
    assert_eq!(extended.diagnostics.extensions, 1);
    assert_eq!(extended.rubric_diagnostics[0].extensions, 1);
    assert_eq!(rounds.borrow().len(), 1);
    assert!(
        rounds.borrow()[0].1.starts_with("rubric 0: min bulk ESS"),
        "{:?}",
        rounds.borrow()
    );
    // A fit that passes at once is the plain fit.
    let plain = fit_extending(&stats, &FitOptions::default(), &no_progress, &note).unwrap();
    assert_eq!(
        plain,
        fit(&stats, &FitOptions::default(), &no_progress).unwrap()
    );
    // 10 draws a chain stay short after both rounds (4 × 40 draws): failure, reported.
    let tiny = FitOptions { draws: 10, ..short };
    let failed = fit_extending(&stats, &tiny, &no_progress, &note).unwrap();
    assert_eq!(failed.diagnostics.extensions, EXTENSIONS);
    assert!(failed.gate_failure().is_some());
    assert_eq!(rounds.borrow().len(), 1 + EXTENSIONS as usize);
}

#[test]
fn references_exactly_on_a_line_give_a_proper_posterior() {
    // y = 0.5 + 0.8·j with no noise at all: without a floor on σ's prior the likelihood grows
    // as σ^−n toward σ = 0, the posterior is improper, and NUTS chased σ down at its longest
    // trees (about 40 s a cell, and no convergence). With it, one rubric and two pooled ones
    // converge, recover the line, and put σ far below any real noise (its mode is near
    // 10⁻³/√n).
    let exact = |n: usize, a: f64, b: f64| {
        SufficientStats::from_pairs((0..n).map(|i| {
            let j = 1.0 + 4.0 * (i as f64 + 0.5) / n as f64;
            (j, a + b * j)
        }))
    };
    for stats in [
        vec![exact(200, 0.5, 0.8)],
        vec![exact(200, 0.5, 0.8), exact(150, 0.3, 0.9)],
    ] {
        let fit = fit(&stats, &FitOptions::default(), &no_progress).unwrap();
        assert!(fit.diagnostics.failure().is_none(), "{:?}", fit.diagnostics);
        let p = fit.rubrics[0];
        assert!((p.alpha_mean - 0.5).abs() < 1e-3, "α {}", p.alpha_mean);
        assert!((p.beta_mean - 0.8).abs() < 1e-3, "β {}", p.beta_mean);
        assert!(p.sigma_mean < 1e-3, "σ {}", p.sigma_mean);
    }
}
