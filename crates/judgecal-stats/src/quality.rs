//! How a corrector is judged: the paper's three questions, always together.
//!
//! 1. Population mean: `mean_error` = mean(ŷ) − mean(y).
//! 2. Per item: `mae` and `pearson`.
//! 3. Shape: the Kullback–Leibler divergence between Gaussian KDEs of ŷ and y on a 500-point
//!    grid over the rubric's scale, in each direction (`kl_corrected_reference` = KL(ŷ‖y), the
//!    paper's column; `kl_reference_corrected` = KL(y‖ŷ)) and `kl_mean`, their mean; and `w1`,
//!    the Wasserstein-1 distance between the two empirical distributions.
//!
//! Each KDE takes Scott's bandwidth (σ̂·n^(−1/5)), but never narrower than the reference's level
//! spacing (the median gap between its distinct values). A reference that only takes values a
//! third of a point apart (the mean of three raters' integer scores) says nothing about shape
//! at finer scales: with Scott's bandwidth alone its KDE is a row of spikes, the density
//! between them underflows to the floor, and the floor, not the data, sets the KL. On a
//! continuous reference the median gap is far below Scott's bandwidth and changes nothing.

use serde::{Deserialize, Serialize};

use super::cv::Scheme;
use super::stats::{mean, sample_variance};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    pub n: usize,
    pub mean_error: f64,
    pub mae: f64,
    pub pearson: f64,
    /// KL(corrected ‖ reference), the paper's KL(p̂‖y). Versions stored before the KL was
    /// reported per direction read it as NaN (null in JSON).
    #[serde(default = "unknown", with = "super::nullable_f64")]
    pub kl_corrected_reference: f64,
    /// KL(reference ‖ corrected).
    #[serde(default = "unknown", with = "super::nullable_f64")]
    pub kl_reference_corrected: f64,
    /// The mean of the two directions.
    #[serde(default = "unknown", with = "super::nullable_f64")]
    pub kl_mean: f64,
    pub w1: f64,
}

fn unknown() -> f64 {
    f64::NAN
}

/// Grid points of the KDE comparison.
pub const KDE_GRID: usize = 500;

fn sd(xs: &[f64]) -> f64 {
    sample_variance(xs).sqrt()
}

pub fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let (ma, mb) = (mean(a), mean(b));
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    if va <= 0.0 || vb <= 0.0 {
        0.0
    } else {
        cov / (va * vb).sqrt()
    }
}

/// The median gap between the distinct values of `xs`: the spacing of its levels when it takes
/// few (0 with fewer than two distinct values).
pub fn level_spacing(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    let mut gaps: Vec<f64> = v.windows(2).map(|w| w[1] - w[0]).collect();
    if gaps.is_empty() {
        return 0.0;
    }
    gaps.sort_by(f64::total_cmp);
    gaps[gaps.len() / 2]
}

/// A Gaussian KDE with Scott's bandwidth (σ̂·n^(−1/5)), but at least `min_h` and 1% of the
/// grid's width, evaluated on `grid` and normalised to sum to 1 there.
pub fn kde_on_grid(xs: &[f64], grid: &[f64], min_h: f64) -> Vec<f64> {
    kde_with_floor(xs, grid, min_h, DENSITY_FLOOR)
}

/// Densities below this (relative to the grid's total) are raised to it, so log(p/q) stays
/// finite where one density underflows.
const DENSITY_FLOOR: f64 = 1e-12;

fn kde_with_floor(xs: &[f64], grid: &[f64], min_h: f64, floor: f64) -> Vec<f64> {
    let width = grid[grid.len() - 1] - grid[0];
    let h = (sd(xs) * (xs.len() as f64).powf(-0.2))
        .max(0.01 * width)
        .max(min_h);
    let mut dens = kernel_sums(xs, grid, h);
    let total: f64 = dens.iter().sum();
    dens.iter_mut().for_each(|d| *d = (*d / total).max(floor));
    let total: f64 = dens.iter().sum();
    dens.iter_mut().for_each(|d| *d /= total);
    dens
}

/// Up to this many values a KDE sums every value's kernel at every grid point.
const EXACT_KDE_MAX: usize = 2_000;
/// Bins of the binned KDE.
const KDE_BINS: usize = 4_096;

/// Σᵢ exp(−½((g − xᵢ)/h)²) at each grid point g. Above [`EXACT_KDE_MAX`] values, the values
/// within 8h of the grid are first shared linearly between the two nearest of [`KDE_BINS`]
/// evenly spaced bins (Wand's linear binning), and the kernel is summed over the bins: the
/// cost no longer grows with the anchors (200,000 of them made each KDE 10⁸ kernel
/// evaluations). The bins are at most (1 + 0.16)/4,096 of the grid's width apart, under 3%
/// of the bandwidth (never below 1% of that width), so binning moves each density by about
/// (δ/h)²/8 < 10⁻⁴ of itself; values further out are summed exactly.
fn kernel_sums(xs: &[f64], grid: &[f64], h: f64) -> Vec<f64> {
    let kernel = |g: f64, x: f64| (-0.5 * ((g - x) / h).powi(2)).exp();
    if xs.len() <= EXACT_KDE_MAX {
        return grid
            .iter()
            .map(|&g| xs.iter().map(|&x| kernel(g, x)).sum())
            .collect();
    }
    let (a, b) = (grid[0] - 8.0 * h, grid[grid.len() - 1] + 8.0 * h);
    let delta = (b - a) / (KDE_BINS - 1) as f64;
    let mut weights = vec![0.0; KDE_BINS];
    let mut outside = Vec::new();
    for &x in xs {
        if !(a..=b).contains(&x) {
            outside.push(x);
            continue;
        }
        let t = (x - a) / delta;
        let i = (t.floor() as usize).min(KDE_BINS - 2);
        let f = t - i as f64;
        weights[i] += 1.0 - f;
        weights[i + 1] += f;
    }
    let bins: Vec<(f64, f64)> = weights
        .iter()
        .enumerate()
        .filter(|(_, w)| **w > 0.0)
        .map(|(k, &w)| (a + k as f64 * delta, w))
        .collect();
    grid.iter()
        .map(|&g| {
            bins.iter().map(|&(c, w)| w * kernel(g, c)).sum::<f64>()
                + outside.iter().map(|&x| kernel(g, x)).sum::<f64>()
        })
        .collect()
}

/// KL(p̂‖q̂) and KL(q̂‖p̂) between KDEs of `pred` (p̂) and `truth` (q̂) on [lo, hi], both with a
/// bandwidth no narrower than `truth`'s level spacing.
pub fn kl_divergences(pred: &[f64], truth: &[f64], lo: f64, hi: f64) -> (f64, f64) {
    let grid: Vec<f64> = (0..KDE_GRID)
        .map(|i| lo + (hi - lo) * i as f64 / (KDE_GRID - 1) as f64)
        .collect();
    let min_h = level_spacing(truth);
    let p = kde_on_grid(pred, &grid, min_h);
    let q = kde_on_grid(truth, &grid, min_h);
    let kl = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(a, b)| a * (a / b).ln()).sum::<f64>();
    (kl(&p, &q), kl(&q, &p))
}

/// W1 between two empirical distributions: ∫|F_a − F_b|.
pub fn wasserstein1(a: &[f64], b: &[f64]) -> f64 {
    let mut xs: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    xs.sort_by(|p, q| p.0.total_cmp(&q.0));
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (mut fa, mut fb, mut total) = (0.0, 0.0, 0.0);
    for w in xs.windows(2) {
        if w[0].1 {
            fa += 1.0 / na
        } else {
            fb += 1.0 / nb
        }
        total += (fa - fb).abs() * (w[1].0 - w[0].0);
    }
    total
}

/// All three questions for predictions `pred` against references `truth`, the KDEs on the
/// rubric's scale [lo, hi].
pub fn evaluate(pred: &[f64], truth: &[f64], lo: f64, hi: f64) -> Figures {
    let (forward, reverse) = kl_divergences(pred, truth, lo, hi);
    Figures {
        n: pred.len(),
        mean_error: mean(pred) - mean(truth),
        mae: pred
            .iter()
            .zip(truth)
            .map(|(p, t)| (p - t).abs())
            .sum::<f64>()
            / pred.len() as f64,
        pearson: pearson(pred, truth),
        kl_corrected_reference: forward,
        kl_reference_corrected: reverse,
        kl_mean: (forward + reverse) / 2.0,
        w1: wasserstein1(pred, truth),
    }
}

/// A version's figures on held-out anchors beside the raw judge's on the same anchors.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub scheme: Scheme,
    pub calibrated: Figures,
    pub raw: Figures,
}

impl Comparison {
    /// `pred[i]` is the held-out prediction of anchor i (`None` where it was not held out);
    /// `pairs[i]` its (judge, reference) scores; [lo, hi] the rubric's scale.
    pub fn of(
        scheme: Scheme,
        pred: &[Option<f64>],
        pairs: &[(f64, f64)],
        lo: f64,
        hi: f64,
    ) -> Option<Self> {
        let (mut p, mut j, mut y) = (Vec::new(), Vec::new(), Vec::new());
        for (pred, (judge, truth)) in pred.iter().zip(pairs) {
            if let Some(pred) = pred {
                p.push(*pred);
                j.push(*judge);
                y.push(*truth);
            }
        }
        (p.len() >= 2).then(|| Self {
            scheme,
            calibrated: evaluate(&p, &y, lo, hi),
            raw: evaluate(&j, &y, lo, hi),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference values computed independently in Python 3.11: statistics.correlation for
    // Pearson, and for W1 the equal-size-sample formula mean(|sort(a) − sort(b)|), a different
    // route from the CDF integral used here.
    #[test]
    fn point_metrics_match_independent_values() {
        let pred = [1.0, 2.0, 3.0, 4.0, 5.5];
        let truth = [1.5, 2.0, 2.5, 4.5, 5.0];
        let e = evaluate(&pred, &truth, 1.0, 5.0);
        assert!(e.mean_error.abs() < 1e-12);
        assert!((e.mae - 0.4).abs() < 1e-12);
        assert!(
            (e.pearson - 0.960_617_530_666_126_1).abs() < 1e-12,
            "{}",
            e.pearson
        );
        assert!((e.w1 - 0.4).abs() < 1e-12, "{}", e.w1);
    }

    #[test]
    fn w1_of_a_shift_is_the_shift() {
        let a: Vec<f64> = (0..100).map(|i| i as f64 * 0.03).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 0.7).collect();
        assert!((wasserstein1(&a, &b) - 0.7).abs() < 1e-9);
    }

    #[test]
    fn kl_of_two_normal_kdes_matches_the_closed_form() {
        // Large samples from N(3, 0.5²) and N(3.5, 0.5²) (normal quantiles on an even grid):
        // their KDEs are N(μ, 0.5² + h²) and the KL of two normals with equal variance s² is
        // (Δμ)²/(2s²) in each direction. With n = 2000, h = 0.5·2000^(−0.2) = 0.0978.
        let q = |p: f64| crate::stats::normal_quantile(p);
        let n = 2000;
        let a: Vec<f64> = (0..n)
            .map(|i| 3.0 + 0.5 * q((i as f64 + 0.5) / n as f64))
            .collect();
        let b: Vec<f64> = a.iter().map(|x| x + 0.5).collect();
        let h = 0.5 * (n as f64).powf(-0.2);
        let expected = 0.25 / (2.0 * (0.25 + h * h));
        let (forward, reverse) = kl_divergences(&a, &b, -1.0, 8.0);
        for got in [forward, reverse] {
            assert!(
                (got - expected).abs() < 0.02 * expected,
                "{got} vs {expected}"
            );
        }
        let e = evaluate(&a, &b, -1.0, 8.0);
        assert!((e.kl_mean - (forward + reverse) / 2.0).abs() < 1e-15);
        assert_eq!(kl_divergences(&a, &a, -1.0, 8.0), (0.0, 0.0));
    }

    /// Every value's kernel at every grid point, summed: what binning approximates.
    fn exact_sums(xs: &[f64], grid: &[f64], h: f64) -> Vec<f64> {
        grid.iter()
            .map(|&g| {
                xs.iter()
                    .map(|&x| (-0.5 * ((g - x) / h).powi(2)).exp())
                    .sum()
            })
            .collect()
    }

    #[test]
    fn the_binned_kde_matches_the_exact_sum() {
        // 20,000 values, continuous (a skewed mixture, some off the grid) and on thirds of a
        // point: each grid density within 1e-3 of the exact sum's, and the KL within 1%.
        use crate::rng::Rng;
        use crate::rng::SeedableRng;
        let mut rng = Rng::seed_from_u64(11);
        let mut normal = || crate::stats::standard_normal(&mut rng);
        let continuous: Vec<f64> = (0..20_000)
            .map(|i| {
                if i % 5 == 0 {
                    1.5 + 2.0 * normal().abs()
                } else {
                    4.2 + 0.4 * normal()
                }
            })
            .collect();
        let thirds: Vec<f64> = continuous
            .iter()
            .map(|x| (x.clamp(1.0, 5.0) * 3.0).round() / 3.0)
            .collect();
        let grid: Vec<f64> = (0..KDE_GRID)
            .map(|i| 1.0 + 4.0 * i as f64 / (KDE_GRID - 1) as f64)
            .collect();
        for (xs, min_h) in [(&continuous, 0.0), (&thirds, 1.0 / 3.0)] {
            let h = (sd(xs) * (xs.len() as f64).powf(-0.2)).max(0.04).max(min_h);
            let binned = kernel_sums(xs, &grid, h);
            let exact = exact_sums(xs, &grid, h);
            let (tb, te): (f64, f64) = (binned.iter().sum(), exact.iter().sum());
            for (b, e) in binned.iter().zip(&exact) {
                assert!(
                    (b / tb - e / te).abs() <= 1e-3 * (e / te) + 1e-12,
                    "{b} {e}"
                );
            }
        }
        let exact_kl = {
            let q = |xs: &[f64]| {
                let h = (sd(xs) * (xs.len() as f64).powf(-0.2))
                    .max(0.04)
                    .max(1.0 / 3.0);
                let d = exact_sums(xs, &grid, h);
                let t: f64 = d.iter().sum();
                d.iter()
                    .map(|d| (d / t).max(DENSITY_FLOOR))
                    .collect::<Vec<f64>>()
            };
            let (p, r) = (q(&continuous), q(&thirds));
            let (tp, tr): (f64, f64) = (p.iter().sum(), r.iter().sum());
            p.iter()
                .zip(&r)
                .map(|(p, r)| p / tp * ((p / tp) / (r / tr)).ln())
                .sum::<f64>()
        };
        let (binned_kl, _) = kl_divergences(&continuous, &thirds, 1.0, 5.0);
        assert!(
            (binned_kl - exact_kl).abs() < 0.01 * exact_kl,
            "{binned_kl} {exact_kl}"
        );
    }

    #[test]
    fn a_reference_on_few_levels_gets_a_kl_set_by_the_data_not_the_floor() {
        // A HANNA-like cell: 211 references, the mean of three raters (thirds), sd 0.9 about
        // 3; corrected scores shrunk to the mean (3 ± 0.25), as a line does when the judge
        // barely tracks the reference. With Scott's bandwidth alone the corrected scores'
        // KDE is so narrow that at the reference's ends it underflows to the density floor,
        // and KL(y‖ŷ) is set by the floor: moving the floor from 1e-12 to 1e-24 changes it
        // by more than half. With the level spacing as the least bandwidth it does not move.
        let q = |p: f64| crate::stats::normal_quantile(p);
        let n = 211;
        let z: Vec<f64> = (0..n).map(|i| q((i as f64 + 0.5) / n as f64)).collect();
        let reference: Vec<f64> = z
            .iter()
            .map(|z| ((3.0 + 0.9 * z).clamp(1.0, 5.0) * 3.0).round() / 3.0)
            .collect();
        let corrected: Vec<f64> = z.iter().map(|z| 3.0 + 0.25 * z).collect();
        assert!((level_spacing(&reference) - 1.0 / 3.0).abs() < 1e-9);
        assert!(level_spacing(&corrected) < 0.05);
        let grid: Vec<f64> = (0..KDE_GRID)
            .map(|i| 1.0 + 4.0 * i as f64 / (KDE_GRID - 1) as f64)
            .collect();
        let reverse = |min_h: f64, floor: f64| {
            let p = kde_with_floor(&corrected, &grid, min_h, floor);
            let r = kde_with_floor(&reference, &grid, min_h, floor);
            r.iter().zip(&p).map(|(r, p)| r * (r / p).ln()).sum::<f64>()
        };
        let (scott, scott_lower) = (reverse(0.0, 1e-12), reverse(0.0, 1e-24));
        let h = level_spacing(&reference);
        let (spaced, spaced_lower) = (reverse(h, 1e-12), reverse(h, 1e-24));
        eprintln!(
            "KL(y‖ŷ): Scott's bandwidth alone {scott:.3} (floor 1e-12), {scott_lower:.3} (floor 1e-24); at least the level spacing {spaced:.3} and {spaced_lower:.3}"
        );
        assert!(scott_lower > 1.5 * scott, "{scott} {scott_lower}");
        assert!(
            (spaced_lower - spaced).abs() < 1e-6 * spaced,
            "{spaced} {spaced_lower}"
        );
        assert_eq!(kl_divergences(&corrected, &reference, 1.0, 5.0).1, spaced);
    }
}
