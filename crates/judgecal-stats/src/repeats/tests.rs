//! Repeat noise by simulation with known truth: a judge with item-level error and within-item
//! noise of 0.2–1.0 reference sd, items scored 1, 3 and 5 times.

use super::*;
use crate::rng::{Rng, RngExt, SeedableRng};
use crate::runlevel::inference;
use crate::stats::{least_squares, standard_normal};

/// The world: reference y ~ N(0, 1); the item's own judge score 0.5 + 0.8·y + u, u ~ N(0, 0.5²)
/// (the judge's item-level error); each asking adds noise of sd `noise`.
const SLOPE: f64 = 0.8;
const ITEM_SD: f64 = 0.5;

/// One item: its reference and `k` scores.
fn item(noise: f64, k: usize, rng: &mut Rng) -> (f64, Vec<f64>) {
    let y = standard_normal(rng);
    let own = 0.5 + SLOPE * y + ITEM_SD * standard_normal(rng);
    (
        y,
        (0..k).map(|_| own + noise * standard_normal(rng)).collect(),
    )
}

/// The one-score judge's true variance and the one-score residual variance at `k` scores.
fn truth(noise: f64, k: f64) -> (f64, f64) {
    let var_one = SLOPE * SLOPE + ITEM_SD * ITEM_SD + noise * noise;
    let var_k = SLOPE * SLOPE + ITEM_SD * ITEM_SD + noise * noise / k;
    (var_one, 1.0 - SLOPE * SLOPE / var_k)
}

fn covers(interval: [f64; 2], truth: f64) -> bool {
    interval[0] <= truth && truth <= interval[1]
}

#[test]
fn one_score_per_item_measures_nothing() {
    let w = WithinItem::of([[1.0].as_slice(), &[2.0], &[3.0, 3.0]]);
    assert_eq!(w.items(), 1);
    assert!(w.estimate(0.95).is_none());
}

#[test]
fn the_within_variance_is_the_pooled_item_variance() {
    // Items (1, 3): variance 2 on 1 df; (2, 2, 5): variance 3 on 2 df. Pooled: (2 + 6)/3.
    let w = WithinItem::of([[1.0, 3.0].as_slice(), &[2.0, 2.0, 5.0]]);
    let e = w.estimate(0.95).unwrap();
    assert!((e.variance - 8.0 / 3.0).abs() < 1e-12);
    assert_eq!((e.items, e.scores), (2, 5));
    // Repeats that never differ: 0, and an upper end one step's disagreement would give.
    let same = WithinItem::of([[2.0, 2.0].as_slice(), &[3.0, 3.0], &[1.0, 2.0, 2.0]]);
    let only = WithinItem::of([[2.0, 2.0].as_slice(), &[3.0, 3.0]]);
    assert_eq!(only.estimate(0.95).unwrap().interval, [0.0, 3.0 / 4.0]);
    assert!(same.estimate(0.95).unwrap().variance > 0.0);
}

/// How often the within-variance interval covers, over `reps` samples of `items` items of `k`
/// scores each (`draw` gives one item's scores), against the true within variance `truth`.
fn within_coverage(
    reps: usize,
    items: usize,
    truth: f64,
    seed: u64,
    draw: impl Fn(&mut Rng) -> Vec<f64>,
) -> f64 {
    let mut rng = Rng::seed_from_u64(seed);
    let hits = (0..reps)
        .filter(|_| {
            let mut w = WithinItem::default();
            for _ in 0..items {
                w.add(&draw(&mut rng));
            }
            covers(w.estimate(0.95).unwrap().interval, truth)
        })
        .count();
    hits as f64 / reps as f64
}

#[test]
fn the_within_variance_interval_covers() {
    let reps = 2000;
    for (case, &noise) in [0.2, 0.5, 1.0].iter().enumerate() {
        for &k in &[3usize, 5] {
            for &items in &[30usize, 200] {
                let seed = 58_200 + (case * 100 + k * 10 + items) as u64;
                let rate = within_coverage(reps, items, noise * noise, seed, |rng| {
                    item(noise, k, rng).1
                });
                eprintln!("normal noise {noise}, k = {k}, {items} items: {rate:.3}");
                assert!((0.93..=0.97).contains(&rate), "{noise} {k} {items}: {rate}");
            }
        }
    }
    // Noise that differs between items (borderline items noisier: sd uniform on 0.25–1.75
    // times 0.5, so E σ² = 0.25·(1 + 0.75²/3)) and is not normal (Laplace).
    let truth = 0.25 * (1.0 + 0.75 * 0.75 / 3.0);
    for &k in &[3usize, 5] {
        let rate = within_coverage(reps, 200, truth, 58_300 + k as u64, |rng| {
            let sd = 0.5 * (0.25 + 1.5 * rng.random::<f64>());
            (0..k)
                .map(|_| {
                    let u: f64 = rng.random::<f64>() - 0.5;
                    // Laplace with variance sd²: scale sd/√2.
                    -u.signum() * (1.0 - 2.0 * u.abs()).ln() * sd / 2f64.sqrt()
                })
                .collect()
        });
        eprintln!("uneven Laplace noise, k = {k}: {rate:.3}");
        assert!((0.93..=0.97).contains(&rate), "uneven {k}: {rate}");
    }
}

/// A skewed integer judge on 1–10: the item's own score piles up high, each asking rounds.
fn skewed_integer(noise: f64, k: usize, rng: &mut Rng) -> (f64, Vec<f64>) {
    let y = standard_normal(rng);
    let own = 7.5 + 1.6 * y - 0.4 * y * y + standard_normal(rng);
    let scores = (0..k)
        .map(|_| {
            (own + 2.0 * noise * standard_normal(rng))
                .round()
                .clamp(1.0, 10.0)
        })
        .collect();
    (y, scores)
}

#[test]
fn the_within_variance_interval_covers_on_a_skewed_integer_scale() {
    // The truth: the within-item variance of the rounded scores themselves, from 400,000 items.
    for (case, &noise) in [0.2, 1.0].iter().enumerate() {
        let mut rng = Rng::seed_from_u64(58_400 + case as u64);
        let mut big = WithinItem::default();
        for _ in 0..400_000 {
            big.add(&skewed_integer(noise, 2, &mut rng).1);
        }
        let truth = big.estimate(0.95).unwrap().variance;
        let rate = within_coverage(2000, 200, truth, 58_410 + case as u64, |rng| {
            skewed_integer(noise, 3, rng).1
        });
        eprintln!("skewed integers, noise {noise} (σ_w² = {truth:.3}): {rate:.3}");
        assert!((0.93..=0.97).contains(&rate), "{noise}: {rate}");
    }
}

#[test]
fn the_one_score_equivalent_is_the_conditional_mean_of_a_linear_judge() {
    let mut rng = Rng::seed_from_u64(58_500);
    let (noise, k) = (1.0, 3);
    let items: Vec<(f64, Vec<f64>)> = (0..200_000).map(|_| item(noise, k, &mut rng)).collect();
    let one: Vec<(f64, f64)> = items.iter().map(|(y, s)| (s[0], *y)).collect();
    let averaged: Vec<(f64, f64)> = items
        .iter()
        .map(|(y, s)| (mean_of(s.iter().copied()), *y))
        .collect();
    let within = WithinItem::of(items.iter().map(|(_, s)| s.as_slice()))
        .estimate(0.95)
        .unwrap();
    let repeats = Repeats::new(within.variance, OneScore::of(&one).unwrap());
    let (a1, b1) = least_squares(&one).unwrap();
    let (ak, bk) = least_squares(&averaged).unwrap();
    // The one-score line read at the one-score equivalent is the line of y on the mean.
    let stretch = repeats.stretch(k as f64);
    assert!(
        (b1 * stretch / bk - 1.0).abs() < 0.02,
        "{} {bk}",
        b1 * stretch
    );
    for j in [-1.0, 0.5, 2.0] {
        let via = a1 + b1 * repeats.expand(j, k as f64);
        assert!(
            (via - (ak + bk * j)).abs() < 0.02,
            "{j}: {via} {}",
            ak + bk * j
        );
    }
    let residual = |pairs: &[(f64, f64)], (a, b): (f64, f64)| {
        pairs
            .iter()
            .map(|(j, y)| (y - a - b * j).powi(2))
            .sum::<f64>()
            / pairs.len() as f64
    };
    let ratio = residual(&averaged, (ak, bk)) / residual(&one, (a1, b1));
    let (_, r1) = truth(noise, 1.0);
    let (_, rk) = truth(noise, k as f64);
    assert!((repeats.residual_ratio(k as f64) - ratio).abs() < 0.01);
    assert!((ratio - rk / r1).abs() < 0.01, "{ratio} {}", rk / r1);
    assert_eq!(repeats.residual_ratio(1.0), 1.0);
    assert_eq!(repeats.expand(0.7, 1.0), 0.7);
}

/// One run-level case: anchors of one score each fit a line; a run of `run` items each scored
/// `k` times is corrected at its items' one-score equivalents (σ_w² from the run's repeats),
/// and the plain path's interval is checked against the run's mean reference.
/// Returns (coverage, mean half-width).
fn run_coverage(
    noise: f64,
    k: usize,
    reps: usize,
    seed: u64,
    draw: fn(f64, usize, &mut Rng) -> (f64, Vec<f64>),
) -> (f64, f64) {
    let (anchors, run) = (300, 100);
    let mut rng = Rng::seed_from_u64(seed);
    let (mut hits, mut width) = (0, 0.0);
    for _ in 0..reps {
        let pairs: Vec<(f64, f64)> = (0..anchors)
            .map(|_| {
                let (y, s) = draw(noise, 1, &mut rng);
                (s[0], y)
            })
            .collect();
        let (a, b) = least_squares(&pairs).unwrap();
        let n = pairs.len() as f64;
        let sigma2 = pairs
            .iter()
            .map(|(j, y)| (y - a - b * j).powi(2))
            .sum::<f64>()
            / (n - 2.0);
        let mx = mean_of(pairs.iter().map(|p| p.0));
        let sxx: f64 = pairs.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let items: Vec<(f64, Vec<f64>)> = (0..run).map(|_| draw(noise, k, &mut rng)).collect();
        let (at, ratio) = if k > 1 {
            let within = WithinItem::of(items.iter().map(|(_, s)| s.as_slice()))
                .estimate(0.95)
                .unwrap();
            let repeats = Repeats::new(within.variance, OneScore::of(&pairs).unwrap());
            let at: Vec<f64> = items
                .iter()
                .map(|(_, s)| repeats.expand(mean_of(s.iter().copied()), k as f64))
                .collect();
            (at, repeats.residual_ratio(k as f64))
        } else {
            (items.iter().map(|(_, s)| s[0]).collect(), 1.0)
        };
        let corrected: Vec<f64> = at.iter().map(|s| a + b * s).collect();
        let centre = mean_of(at.iter().copied());
        let corrector = sigma2 * (1.0 / n + (centre - mx).powi(2) / sxx);
        let e = inference::plain(&corrected, sigma2 * ratio, corrector, None, 0.95).unwrap();
        let truth = mean_of(items.iter().map(|(y, _)| *y));
        hits += usize::from(e.interval.0 <= truth && truth <= e.interval.1);
        width += (e.interval.1 - e.interval.0) / 2.0;
    }
    (hits as f64 / reps as f64, width / reps as f64)
}

#[test]
fn run_estimates_that_average_repeats_cover_and_narrow_as_the_noise_share_says() {
    let reps = 2000;
    for (case, &noise) in [0.2, 0.5, 1.0].iter().enumerate() {
        let mut widths = Vec::new();
        for &k in &[1usize, 3, 5] {
            let (rate, width) = run_coverage(noise, k, reps, 58_600 + (case * 10 + k) as u64, item);
            eprintln!("noise {noise}, k = {k}: covers {rate:.3}, half-width {width:.4}");
            assert!((0.93..=0.97).contains(&rate), "{noise} {k}: {rate}");
            widths.push(width);
        }
        // The variance the noise share predicts: the residual at k over the run, plus the
        // line's intercept error over the anchors.
        let (_, r1) = truth(noise, 1.0);
        let predicted = |k: f64| (truth(noise, k).1 / 100.0 + r1 / 300.0).sqrt();
        for (i, &k) in [3.0, 5.0].iter().enumerate() {
            let seen = widths[i + 1] / widths[0];
            let said = predicted(k) / predicted(1.0);
            eprintln!("noise {noise}, k = {k}: width ratio {seen:.3}, predicted {said:.3}");
            assert!(
                (seen / said - 1.0).abs() < 0.03,
                "{noise} {k}: {seen} {said}"
            );
        }
    }
}

#[test]
fn run_estimates_that_average_repeats_cover_on_a_skewed_integer_scale() {
    for (case, &noise) in [0.2, 1.0].iter().enumerate() {
        for &k in &[3usize, 5] {
            let (rate, _) = run_coverage(
                noise,
                k,
                2000,
                58_700 + (case * 10 + k) as u64,
                skewed_integer,
            );
            eprintln!("skewed integers, noise {noise}, k = {k}: covers {rate:.3}");
            assert!((0.93..=0.97).contains(&rate), "{noise} {k}: {rate}");
        }
    }
}

/// The labelled path's mean half-width, by simulation, for every number of scores per item
/// `k` in 1..=`max_k` and labels n in `labels`: a run of `run` items (noise sd `noise`),
/// corrected by the line `line` at one-score equivalents of `repeats`.
fn half_widths(
    noise: f64,
    run: usize,
    max_k: usize,
    labels: &[usize],
    line: (f64, f64),
    repeats: &Repeats,
    reps: usize,
) -> Vec<Vec<f64>> {
    let mut rng = Rng::seed_from_u64(58_800);
    (1..=max_k)
        .map(|k| {
            let mut sums = vec![0.0; labels.len()];
            for _ in 0..reps {
                let items: Vec<(f64, Vec<f64>)> =
                    (0..run).map(|_| item(noise, k, &mut rng)).collect();
                let corrected: Vec<f64> = items
                    .iter()
                    .map(|(_, s)| {
                        line.0 + line.1 * repeats.expand(mean_of(s.iter().copied()), k as f64)
                    })
                    .collect();
                for (slot, &n) in sums.iter_mut().zip(labels) {
                    // The items are drawn independently: the first n are a random sample.
                    let reference: Vec<Option<f64>> = items
                        .iter()
                        .enumerate()
                        .map(|(i, (y, _))| (i < n).then_some(*y))
                        .collect();
                    let e = inference::labelled(&corrected, &reference, None, 0.95, 0.0).unwrap();
                    *slot += (e.interval.1 - e.interval.0) / 2.0;
                }
            }
            sums.iter().map(|s| s / reps as f64).collect()
        })
        .collect()
}

#[test]
fn the_plans_repeat_or_label_advice_matches_a_brute_force_search() {
    let (noise, run, target) = (0.8, 400, 0.08);
    // What the service would know: 2,000 anchors of one score, 500 of them asked twice.
    let mut rng = Rng::seed_from_u64(58_900);
    let anchors: Vec<(f64, Vec<f64>)> = (0..2000)
        .map(|i| item(noise, if i < 500 { 2 } else { 1 }, &mut rng))
        .collect();
    let pairs: Vec<(f64, f64)> = anchors.iter().map(|(y, s)| (s[0], *y)).collect();
    let line = least_squares(&pairs).unwrap();
    let s2_one = pairs
        .iter()
        .map(|(j, y)| (y - line.0 - line.1 * j).powi(2))
        .sum::<f64>()
        / 1998.0;
    let within = WithinItem::of(anchors.iter().map(|(_, s)| s.as_slice()))
        .estimate(0.95)
        .unwrap();
    let repeats = Repeats::new(within.variance, OneScore::of(&pairs).unwrap());
    // Brute force: every design of 1–8 scores per item and 5–400 labels, its half-width
    // simulated through the labelled path itself (λ tuned, t quantiles).
    let labels: Vec<usize> = (1..=80).map(|i| 5 * i).collect();
    let widths = half_widths(noise, run, 8, &labels, line, &repeats, 200);
    let brute = |costs: Costs| {
        let mut best: Option<Design> = None;
        for (k, row) in widths.iter().enumerate() {
            if let Some(i) = row.iter().position(|&w| w <= target) {
                let d = Design {
                    repeats: k + 1,
                    labels: labels[i],
                    cost: costs.judge * run as f64 * k as f64 + costs.label * labels[i] as f64,
                };
                if best.is_none_or(|b| d.cost < b.cost) {
                    best = Some(d);
                }
            }
        }
        best.unwrap()
    };
    let q = crate::stats::normal_quantile(0.975);
    for (judge, repeat_wins) in [(0.005, true), (0.1, false)] {
        let costs = Costs { judge, label: 1.0 };
        let (designs, best) = cheapest(&repeats, 1, s2_one, run, target, q, costs);
        let advice = designs[best];
        let found = brute(costs);
        eprintln!("judge call {judge}: advice {advice:?}, brute force {found:?}");
        assert_eq!(advice.repeats > 1, repeat_wins, "{advice:?}");
        assert_eq!(found.repeats > 1, repeat_wins, "{found:?}");
        assert!(
            advice.cost <= 1.05 * found.cost && found.cost <= 1.05 * advice.cost,
            "{advice:?} {found:?}"
        );
        // The advised design reaches the target when simulated (to the grid's step of 5).
        if advice.repeats <= 8 {
            let row = &widths[advice.repeats - 1];
            let at = labels.iter().position(|&n| n >= advice.labels).unwrap();
            assert!(row[at] <= target * 1.03, "{} at {advice:?}", row[at]);
        }
    }
}
