//! How a corrector is judged: the paper's three questions, always together.
//!
//! 1. Population mean: `mean_error` = mean(ŷ) − mean(y).
//! 2. Per item: `mae` and `pearson`.
//! 3. Shape: `kl_sym`, the symmetrised Kullback–Leibler divergence KL(p‖q) + KL(q‖p) between
//!    Gaussian KDEs of ŷ and y (Scott's bandwidth) on a 500-point grid over the rubric's scale,
//!    and `w1`, the Wasserstein-1 distance between the two empirical distributions.

use serde::{Deserialize, Serialize};

use super::cv::Scheme;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    pub n: usize,
    pub mean_error: f64,
    pub mae: f64,
    pub pearson: f64,
    pub kl_sym: f64,
    pub w1: f64,
}

/// Grid points of the KDE comparison.
pub const KDE_GRID: usize = 500;

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn sd(xs: &[f64]) -> f64 {
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() as f64 - 1.0).max(1.0)).sqrt()
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

/// A Gaussian KDE with Scott's bandwidth (σ̂·n^(−1/5)), evaluated on `grid` and normalised to
/// sum to 1 there. A sample with no spread gets a bandwidth of 1% of the grid's width.
pub fn kde_on_grid(xs: &[f64], grid: &[f64]) -> Vec<f64> {
    let width = grid[grid.len() - 1] - grid[0];
    let h = (sd(xs) * (xs.len() as f64).powf(-0.2)).max(0.01 * width);
    let mut dens: Vec<f64> = grid
        .iter()
        .map(|g| {
            xs.iter()
                .map(|x| (-0.5 * ((g - x) / h).powi(2)).exp())
                .sum::<f64>()
        })
        .collect();
    let total: f64 = dens.iter().sum();
    // A floor keeps log(p/q) finite where one density underflows.
    dens.iter_mut().for_each(|d| *d = (*d / total).max(1e-12));
    let total: f64 = dens.iter().sum();
    dens.iter_mut().for_each(|d| *d /= total);
    dens
}

pub fn kl_symmetric(a: &[f64], b: &[f64], lo: f64, hi: f64) -> f64 {
    let grid: Vec<f64> = (0..KDE_GRID)
        .map(|i| lo + (hi - lo) * i as f64 / (KDE_GRID - 1) as f64)
        .collect();
    let p = kde_on_grid(a, &grid);
    let q = kde_on_grid(b, &grid);
    p.iter().zip(&q).map(|(p, q)| (p - q) * (p / q).ln()).sum()
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
        kl_sym: kl_symmetric(pred, truth, lo, hi),
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
        // their KDEs are N(μ, 0.5² + h²) and the symmetrised KL of two normals with equal
        // variance s² is (Δμ)²/s². With n = 2000, h = 0.5·2000^(−0.2) = 0.0978.
        let q = |p: f64| crate::calibrate::stats::normal_quantile(p);
        let n = 2000;
        let a: Vec<f64> = (0..n)
            .map(|i| 3.0 + 0.5 * q((i as f64 + 0.5) / n as f64))
            .collect();
        let b: Vec<f64> = a.iter().map(|x| x + 0.5).collect();
        let h = 0.5 * (n as f64).powf(-0.2);
        let expected = 0.25 / (0.25 + h * h);
        let got = kl_symmetric(&a, &b, -1.0, 8.0);
        assert!(
            (got - expected).abs() < 0.02 * expected,
            "{got} vs {expected}"
        );
        assert!(kl_symmetric(&a, &a, -1.0, 8.0).abs() < 1e-12);
    }
}
