//! A run's de-biased mean with an interval: the statistical core of run-level estimates
//! (`runlevel` puts it together with a version's model for `/v1/estimate` and `/v1/compare`).
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-stats/src/runlevel/inference.rs".

use super::Advice;
use super::groups::{BiasShift, GroupTerm};
use crate::stats::{mean, normal_quantile, ppi_lambda, sample_variance, t_quantile, two_sided_p};

/// Below this many labelled items the labelled path does not tune λ (it is 1): tuned on the
/// same 10 or 20 items it weights, λ fits their noise and the interval covers about 92%
/// (`a_handful_of_labels_on_a_skewed_integer_scale_covers`).
pub const MIN_TUNED: usize = 30;

/// The parts of an estimate's variance.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Variance {
    /// From the run's own items: their residuals (plain), or the labelled sample (labelled).
    pub sampling: f64,
    /// From the corrector's finite anchors (plain path only: the labelled path does not rely
    /// on the corrector being right).
    pub corrector: f64,
    /// From the system-specific bias of the run's group (plain path, where the anchors carry
    /// groups): a known group's shrunk bias, or a new group's draw.
    pub group: f64,
}

impl Variance {
    pub fn total(&self) -> f64 {
        self.sampling.max(0.0) + self.corrector.max(0.0) + self.group.max(0.0)
    }

    pub fn plus(self, other: Variance) -> Variance {
        Variance {
            sampling: self.sampling + other.sampling,
            corrector: self.corrector + other.corrector,
            group: self.group + other.group,
        }
    }
}

/// The quantile of a two-sided interval at `level`: t on `df`, or normal where `None`.
pub fn quantile(level: f64, df: Option<f64>) -> f64 {
    match df {
        Some(df) if df.is_finite() => t_quantile(0.5 + level / 2.0, df),
        _ => normal_quantile(0.5 + level / 2.0),
    }
}

/// Welch–Satterthwaite degrees of freedom of a sum of variance estimates, each with its own
/// degrees of freedom (infinite for one treated as known): (Σ v)² / Σ (v² / df).
pub fn satterthwaite(parts: &[(f64, f64)]) -> f64 {
    let total: f64 = parts.iter().map(|p| p.0.max(0.0)).sum();
    let denominator: f64 = parts
        .iter()
        .filter(|p| p.1.is_finite() && p.0 > 0.0)
        .map(|p| p.0 * p.0 / p.1.max(1.0))
        .sum();
    if denominator > 0.0 {
        (total * total / denominator).max(1.0)
    } else {
        f64::INFINITY
    }
}

/// Degrees of freedom of a sum of variance parts, each `(variance, df)` with `None` for one
/// treated as known (Welch–Satterthwaite); `None` when every part is known.
pub fn combined_df(parts: &[(f64, Option<f64>)]) -> Option<f64> {
    let parts: Vec<(f64, f64)> = parts
        .iter()
        .map(|&(v, df)| (v, df.unwrap_or(f64::INFINITY)))
        .collect();
    Some(satterthwaite(&parts)).filter(|d| d.is_finite())
}

/// A run's mean with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanEstimate {
    pub estimate: f64,
    pub interval: (f64, f64),
    pub variance: Variance,
    /// Degrees of freedom of the t quantile; `None` for the normal one.
    pub df: Option<f64>,
    /// PPI++'s weight on the corrector (labelled path).
    pub lambda: Option<f64>,
    pub n: usize,
    pub labelled: usize,
}

/// Σ m_c² over the clusters of `clusters` (item → cluster id).
fn cluster_sizes_squared(clusters: &[u64]) -> f64 {
    let mut sorted = clusters.to_vec();
    sorted.sort_unstable();
    sorted
        .chunk_by(|a, b| a == b)
        .map(|c| (c.len() * c.len()) as f64)
        .sum()
}

/// The plain path: `corrected` are the run's corrected scores, `noise_var` the variance of a
/// reference around its corrected score, `corrector_var` the variance of the mean corrected
/// score from the corrector's own uncertainty; `level` e.g. 0.95.
pub fn plain(
    corrected: &[f64],
    noise_var: f64,
    corrector_var: f64,
    clusters: Option<&[u64]>,
    level: f64,
) -> Result<MeanEstimate, String> {
    let n = corrected.len();
    if n == 0 {
        return Err("the run has no scores".into());
    }
    let variance = Variance {
        sampling: noise_var.max(0.0) * mean_share(n, clusters),
        corrector: corrector_var.max(0.0),
        group: 0.0,
    };
    let estimate = mean(corrected);
    let half = normal_quantile(0.5 + level / 2.0) * variance.total().sqrt();
    Ok(MeanEstimate {
        estimate,
        interval: (estimate - half, estimate + half),
        variance,
        df: None,
        lambda: None,
        n,
        labelled: 0,
    })
}

impl MeanEstimate {
    /// This plain estimate with `extra` more sampling variance (items noisier than the
    /// anchors), its interval widened to match.
    pub fn with_extra_sampling(mut self, extra: f64, level: f64) -> Self {
        if extra > 0.0 {
            self.variance.sampling += extra;
            let half = normal_quantile(0.5 + level / 2.0) * self.variance.total().sqrt();
            self.interval = (self.estimate - half, self.estimate + half);
        }
        self
    }

    /// This plain estimate with a group's bias term applied: the estimate moves by the term's
    /// mean, and the interval is the quantiles of the term's mixture plus the estimate's own
    /// normal error.
    pub fn with_group(mut self, shift: &BiasShift, level: f64) -> Self {
        if shift.term == GroupTerm::Unmeasured {
            return self;
        }
        let own = self.variance.sampling + self.variance.corrector;
        let base = self.estimate;
        self.estimate = base + shift.shift();
        self.variance.group = shift.variance();
        self.interval = (
            base + shift.quantile(0.5 - level / 2.0, own),
            base + shift.quantile(0.5 + level / 2.0, own),
        );
        self
    }
}

/// The variance of the mean of `r` (labelled items' values) and its degrees of freedom: the
/// sample variance over n, or, with `clusters`, the cluster-robust one.
fn mean_variance(r: &[f64], clusters: Option<&[u64]>) -> (f64, f64) {
    let n = r.len() as f64;
    let m = mean(r);
    match clusters {
        None => {
            let s2 = r.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
            (s2 / n, n - 1.0)
        }
        Some(c) => {
            let mut by: Vec<(u64, f64)> = c.iter().copied().zip(r.iter().map(|x| x - m)).collect();
            by.sort_by_key(|p| p.0);
            let sums: Vec<f64> = by
                .chunk_by(|a, b| a.0 == b.0)
                .map(|g| g.iter().map(|p| p.1).sum())
                .collect();
            let g = sums.len() as f64;
            let v = g / (g - 1.0).max(1.0) * sums.iter().map(|s| s * s).sum::<f64>() / (n * n);
            (v, (g - 1.0).max(1.0))
        }
    }
}

/// The number of distinct values of `clusters`.
fn cluster_count(clusters: &[u64]) -> usize {
    let mut c = clusters.to_vec();
    c.sort_unstable();
    c.dedup();
    c.len()
}

/// How the labelled items were drawn from the run: whole clusters (every item of each
/// labelled cluster labelled), with the labelled clusters and the run's clusters; or items.
fn whole_clusters(labelled: &[usize], clusters: Option<&[u64]>) -> Option<(usize, usize)> {
    let c = clusters?;
    let mut chosen: Vec<u64> = labelled.iter().map(|&i| c[i]).collect();
    chosen.sort_unstable();
    chosen.dedup();
    let in_chosen = c.iter().filter(|x| chosen.binary_search(x).is_ok()).count();
    (in_chosen == labelled.len()).then(|| (chosen.len(), cluster_count(c)))
}

/// The labelled path: `corrected[i]` for every item, `reference[i]` where item i is
/// labelled; `clusters[i]` its cluster when given; `spacing` the reference scale's level
/// spacing (0 for a continuous one). Needs at least 3 labelled items, and 2 clusters among
/// them.
pub fn labelled(
    corrected: &[f64],
    reference: &[Option<f64>],
    clusters: Option<&[u64]>,
    level: f64,
    spacing: f64,
) -> Result<MeanEstimate, String> {
    labelled_with(corrected, reference, clusters, level, spacing, None)
}

/// [`labelled`] with λ given (`Some`: fixed, tuned on other items, no degree of freedom spent
/// on it here) or left to the labelled items (`None`).
pub fn labelled_with(
    corrected: &[f64],
    reference: &[Option<f64>],
    clusters: Option<&[u64]>,
    level: f64,
    spacing: f64,
    given: Option<f64>,
) -> Result<MeanEstimate, String> {
    let big_n = corrected.len();
    let idx: Vec<usize> = (0..big_n).filter(|&i| reference[i].is_some()).collect();
    let n = idx.len();
    if n < 3 {
        return Err(format!(
            "{n} labelled items; the labelled path needs at least 3"
        ));
    }
    let labelled_clusters: Option<Vec<u64>> = clusters.map(|c| idx.iter().map(|&i| c[i]).collect());
    if let Some(c) = &labelled_clusters
        && cluster_count(c) < 2
    {
        return Err(
            "the labelled items lie in one cluster; a cluster-robust interval needs labelled items in at least 2"
                .into(),
        );
    }
    let f: Vec<f64> = idx.iter().map(|&i| corrected[i]).collect();
    let y: Vec<f64> = idx
        .iter()
        .map(|&i| reference[i].unwrap_or_default())
        .collect();
    let tuned = given.is_none() && n >= MIN_TUNED;
    let lambda = if let Some(lambda) = given {
        lambda
    } else if tuned {
        let pairs: Vec<(f64, f64)> = f.iter().copied().zip(y.iter().copied()).collect();
        ppi_lambda([pairs.as_slice()])
    } else {
        1.0
    };
    let r: Vec<f64> = f.iter().zip(&y).map(|(f, y)| y - lambda * f).collect();
    // Items drawn from the run are a simple random sample of it whatever its clusters (the
    // estimand is this run's mean); whole clusters drawn are a cluster sample.
    let (var, df, factor) = match whole_clusters(&idx, clusters) {
        Some((g, big_g)) => {
            let (v, df) = mean_variance(&r, labelled_clusters.as_deref());
            (v, df, 1.0 - g as f64 / big_g as f64)
        }
        None => {
            let (v, df) = mean_variance(&r, None);
            (v, df, 1.0 - n as f64 / big_n as f64)
        }
    };
    // One degree of freedom goes to λ where it was tuned on these items.
    let df = if tuned { (df - 1.0).max(1.0) } else { df };
    let nf = n as f64;
    let floor = spacing * spacing * nf / ((nf + 1.0) * (nf + 1.0)) / nf;
    let sampling = factor * var.max(floor);
    let estimate = lambda * mean(corrected) + mean(&r);
    let half = t_quantile(0.5 + level / 2.0, df) * sampling.sqrt();
    Ok(MeanEstimate {
        estimate,
        interval: (estimate - half, estimate + half),
        variance: Variance {
            sampling,
            ..Variance::default()
        },
        df: Some(df),
        lambda: Some(lambda),
        n: big_n,
        labelled: n,
    })
}

/// The difference of two runs' de-biased means, A − B.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Difference {
    pub estimate: f64,
    pub interval: (f64, f64),
    /// Two-sided, against a difference of 0.
    pub p_value: f64,
    pub variance: Variance,
    /// Degrees of freedom of the t quantile; `None` for the normal one.
    pub df: Option<f64>,
    /// Whether the items were paired (the same ids in both runs).
    pub paired: bool,
    /// The probability that A's mean is the higher, from the interval's own distribution: an
    /// approximation to a posterior, not a posterior.
    pub prob_a_greater: f64,
}

impl Difference {
    /// The difference `estimate` with variance `variance` (t on `df` degrees of freedom, or
    /// normal), its interval at `level` and its p-value against 0.
    pub fn new(
        estimate: f64,
        variance: Variance,
        df: Option<f64>,
        level: f64,
        paired: bool,
    ) -> Self {
        let se = variance.total().sqrt();
        let q = quantile(level, df);
        let p_value = if se > 0.0 {
            two_sided_p(estimate / se, df)
        } else if estimate == 0.0 {
            1.0
        } else {
            0.0
        };
        let tail = p_value / 2.0;
        Difference {
            estimate,
            interval: (estimate - q * se, estimate + q * se),
            p_value,
            variance,
            df,
            paired,
            prob_a_greater: if estimate >= 0.0 { 1.0 - tail } else { tail },
        }
    }

    /// Two independent estimates' difference, A − B: their variances add, and the degrees of
    /// freedom follow Welch–Satterthwaite (normal where both are known).
    pub fn of_independent(a: &MeanEstimate, b: &MeanEstimate, level: f64) -> Self {
        let df = combined_df(&[(a.variance.total(), a.df), (b.variance.total(), b.df)]);
        Difference::new(
            a.estimate - b.estimate,
            a.variance.plus(b.variance),
            df,
            level,
            false,
        )
    }

    /// This plain difference with the groups' bias contrast applied: the interval, p-value
    /// and Pr(A > B) from the contrast's mixture plus the difference's own normal error.
    pub fn with_group(self, shift: &BiasShift, level: f64) -> Self {
        if shift.term == GroupTerm::Unmeasured {
            return self;
        }
        let own = self.variance.sampling + self.variance.corrector;
        let base = self.estimate;
        let mut variance = self.variance;
        variance.group = shift.variance();
        // The estimate's distribution: base + the mixture, centred so that its mean is the
        // corrected estimate; P(difference ≤ 0) under it gives the tail.
        let below_zero = shift.cdf(-base, own);
        let p_value = (2.0 * below_zero.min(1.0 - below_zero)).clamp(0.0, 1.0);
        Difference {
            estimate: base + shift.shift(),
            interval: (
                base + shift.quantile(0.5 - level / 2.0, own),
                base + shift.quantile(0.5 + level / 2.0, own),
            ),
            p_value,
            variance,
            df: self.df,
            paired: self.paired,
            prob_a_greater: 1.0 - below_zero,
        }
    }
}

/// What a comparison of two runs estimates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Estimand {
    /// The runs' own mean reference difference: what these items would show if every one of
    /// both runs were labelled. Its sampling error is the mean of the residual differences.
    #[default]
    Runs,
    /// The mean difference over the population of prompts the paired items were drawn from:
    /// its sampling error is that of the corrected differences.
    Population,
}

impl Estimand {
    pub fn as_str(self) -> &'static str {
        match self {
            Estimand::Runs => "runs",
            Estimand::Population => "population",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "runs" => Some(Estimand::Runs),
            "population" => Some(Estimand::Population),
            _ => None,
        }
    }
}

/// The share of the run's variance of a mean for independent items (1/N) or, with clusters,
/// errors shared within a cluster (Σ m_c² / N²).
pub fn mean_share(n: usize, clusters: Option<&[u64]>) -> f64 {
    let nf = n as f64;
    match clusters {
        Some(c) => cluster_sizes_squared(c) / (nf * nf),
        None => 1.0 / nf,
    }
}

/// The mean of `values` with its interval at `level` (t on n − 1 degrees of freedom, or on
/// G − 1 with cluster-robust variance when `clusters` are given).
pub fn mean_interval(values: &[f64], clusters: Option<&[u64]>, level: f64) -> (f64, (f64, f64)) {
    let m = mean(values);
    if values.len() < 2 {
        return (m, (f64::NEG_INFINITY, f64::INFINITY));
    }
    let (var, df) = mean_variance(values, clusters);
    let half = t_quantile(0.5 + level / 2.0, df) * var.sqrt();
    (m, (m - half, m + half))
}

/// The plain difference of runs A and B corrected by one corrector. For the runs' own
/// difference ([`Estimand::Runs`]) the error is the mean residual of A less B's, whose
/// variance is each run's residual noise times its [`mean_share`], paired or not: without
/// labelled pairs nothing estimates how the two runs' residuals correlate, and the corrected
/// differences do not see them (a weak judge corrects every item toward the middle). For the
/// population of prompts ([`Estimand::Population`]) paired runs (`pairs`: index in A, index in
/// B, for every item of both) take the spread of the corrected differences (cluster-robust
/// with A's `clusters`, t on n − 1 or G − 1 degrees of freedom), so what the runs share
/// cancels; unpaired runs each the spread of their corrected scores. `corrector_var` is the
/// variance of the difference from the corrector's uncertainty, which both runs share:
/// counted once, not twice.
#[allow(clippy::too_many_arguments)]
pub fn difference(
    a: &[f64],
    b: &[f64],
    pairs: Option<&[(usize, usize)]>,
    clusters: (Option<&[u64]>, Option<&[u64]>),
    noise_var: (f64, f64),
    corrector_var: f64,
    estimand: Estimand,
    level: f64,
) -> Result<Difference, String> {
    if a.is_empty() || b.is_empty() {
        return Err("both runs need scores".into());
    }
    let estimate = mean(a) - mean(b);
    let paired = pairs.is_some_and(|p| p.len() >= 2);
    let spread = |x: &[f64], c: Option<&[u64]>| sample_variance(x) * mean_share(x.len(), c);
    let (sampling, df) = match (estimand, pairs) {
        (Estimand::Population, Some(p)) if paired => {
            let d: Vec<f64> = p.iter().map(|&(i, k)| a[i] - b[k]).collect();
            let c: Option<Vec<u64>> = clusters.0.map(|c| p.iter().map(|&(i, _)| c[i]).collect());
            let (v, df) = mean_variance(&d, c.as_deref());
            (v, Some(df))
        }
        (Estimand::Population, _) => (spread(a, clusters.0) + spread(b, clusters.1), None),
        (Estimand::Runs, _) => (
            noise_var.0.max(0.0) * mean_share(a.len(), clusters.0)
                + noise_var.1.max(0.0) * mean_share(b.len(), clusters.1),
            None,
        ),
    };
    let variance = Variance {
        sampling,
        corrector: corrector_var.max(0.0),
        group: 0.0,
    };
    Ok(Difference::new(estimate, variance, df, level, paired))
}

/// The plan for an estimate with `variance` whose corrector saw `anchors` anchors.
pub fn plan(variance: Variance, anchors: usize, target: f64, level: f64) -> Advice {
    let z = normal_quantile(0.5 + level / 2.0);
    let room = (target / z).powi(2) - variance.sampling - variance.group;
    if variance.total().sqrt() * z <= target {
        Advice::Reached
    } else if room <= 0.0 || variance.corrector <= 0.0 {
        Advice::RunSize
    } else {
        Advice::Anchors((variance.corrector * anchors as f64 / room).ceil() as usize)
    }
}

/// The share of `scores` outside the range of the anchors' judge scores `[lo, hi]`.
pub fn outside_support(scores: &[f64], lo: f64, hi: f64) -> f64 {
    scores.iter().filter(|&&j| j < lo || j > hi).count() as f64 / scores.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::super::resample::{Bins, resampled_means, variance_of};
    use crate::rng::Rng;
    use crate::rng::SliceRandom;
    use crate::rng::{RngExt, SeedableRng};
    use crate::stats::{least_squares, mean_of};

    use super::*;
    use crate::stats::standard_normal;

    #[test]
    fn a_runs_extra_noise_adds_its_share_to_the_sampling_variance() {
        let e = plain(&[1.0, 2.0, 3.0, 4.0], 0.5, 0.01, None, 0.95).unwrap();
        // Four items, two of them 0.16 noisier: 0.32 / 16 more sampling variance.
        let run = super::super::RunItems {
            extra_noise: 0.32,
            ..super::super::RunItems::scores(vec![1.0, 2.0, 3.0, 4.0])
        };
        assert!((run.extra_sampling() - 0.02).abs() < 1e-12);
        let w = e.with_extra_sampling(run.extra_sampling(), 0.95);
        assert!((w.variance.sampling - e.variance.sampling - 0.02).abs() < 1e-12);
        let half = normal_quantile(0.975) * w.variance.total().sqrt();
        assert!((w.interval.1 - w.estimate - half).abs() < 1e-12);
        assert_eq!(e.with_extra_sampling(0.0, 0.95), e);
    }

    #[test]
    fn t_quantiles_match_tables() {
        // Student t 97.5% points from standard tables.
        for (df, t) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (3.0, 3.182),
            (4.0, 2.776),
            (5.0, 2.571),
            (9.0, 2.262),
            (49.0, 2.010),
            (199.0, 1.972),
        ] {
            assert!(
                (t_quantile(0.975, df) - t).abs() < 0.0015,
                "df {df}: {}",
                t_quantile(0.975, df)
            );
        }
    }

    /// The paper's synthetic judge on a uniform-ish reference: j = −0.5 + 0.85y +
    /// 0.4·tanh(0.9(y − 3)) + N(0, (0.3 + 0.18|y − 3|)²).
    fn judge(rng: &mut Rng, y: f64) -> f64 {
        let d = y - 3.0;
        -0.5 + 0.85 * y + 0.4 * (0.9 * d).tanh() + (0.3 + 0.18 * d.abs()) * standard_normal(rng)
    }

    fn reference(rng: &mut Rng) -> f64 {
        (1.0 + 4.0 * rng.random::<f64>().powf(0.6)).min(5.0)
    }

    /// Over `reps` runs of 2,000 items with `n` labelled at random, how often the 95%
    /// interval of the labelled path covers the run's true mean, with the raw judge as the
    /// corrector (biased by about 0.7).
    fn labelled_coverage(n: usize, reps: usize, seed: u64) -> f64 {
        let mut rng = Rng::seed_from_u64(seed);
        let mut covered = 0;
        for _ in 0..reps {
            let y: Vec<f64> = (0..2000).map(|_| reference(&mut rng)).collect();
            let j: Vec<f64> = y.iter().map(|&y| judge(&mut rng, y)).collect();
            let mut order: Vec<usize> = (0..2000).collect();
            order.shuffle(&mut rng);
            let mut refs = vec![None; 2000];
            for &i in &order[..n] {
                refs[i] = Some(y[i]);
            }
            let e = labelled(&j, &refs, None, 0.95, 0.0).unwrap();
            let truth = mean(&y);
            covered += usize::from(e.interval.0 <= truth && truth <= e.interval.1);
        }
        covered as f64 / reps as f64
    }

    #[test]
    fn the_labelled_path_covers_with_the_raw_judge_as_corrector() {
        // 500 runs: the binomial sd of a 95% rate is 1 point, so [0.93, 0.97] is ±2 sd.
        for n in [50, 200] {
            let c = labelled_coverage(n, 500, n as u64);
            eprintln!("labelled path, raw judge, {n} of 2,000 labelled: coverage {c:.3}");
            assert!((0.93..=0.97).contains(&c), "n = {n}: coverage {c}");
        }
    }

    /// How often the labelled path's 95% interval covers a run's mean with `n` labels, on
    /// references on an integer 1–5 scale skewed to the top (a third are 5) and an integer
    /// judge of slope 0.5, the raw judge as the corrector; 2,000 runs of 400 items.
    fn few_labels_coverage(n: usize, seed: u64) -> f64 {
        let mut rng = Rng::seed_from_u64(seed);
        let reps = 2000;
        let mut covered = 0;
        for _ in 0..reps {
            let q: Vec<f64> = (0..400)
                .map(|_| 1.0 + 4.0 * (1.0 - rng.random::<f64>().powi(2)))
                .collect();
            let y: Vec<f64> = q.iter().map(|q| q.round().clamp(1.0, 5.0)).collect();
            let j: Vec<f64> = q
                .iter()
                .map(|q| (3.0 + 0.5 * (q - 3.0) + 0.8 * standard_normal(&mut rng)).round())
                .collect();
            let mut order: Vec<usize> = (0..400).collect();
            order.shuffle(&mut rng);
            let mut refs = vec![None; 400];
            for &i in &order[..n] {
                refs[i] = Some(y[i]);
            }
            let e = labelled(&j, &refs, None, 0.95, 1.0).unwrap();
            let truth = mean(&y);
            covered += usize::from(e.interval.0 <= truth && truth <= e.interval.1);
        }
        covered as f64 / reps as f64
    }

    #[test]
    fn a_handful_of_labels_on_a_skewed_integer_scale_covers() {
        // Below 30 labels λ is 1 (n − 1 degrees of freedom), from 30 it is tuned (n − 2); S²
        // is floored on the integer scale. 2,000 runs: binomial sd 0.5 points. Tuned on the
        // same 10 or 20 items, λ covered 91.9% and 92.1% here: hence the threshold of 30.
        for n in [3, 5, 10, 20, 30, 50] {
            let c = few_labels_coverage(n, 40 + n as u64);
            eprintln!("labelled path, {n} labels, skewed integer scale: coverage {c:.3}");
            assert!((0.93..=0.99).contains(&c), "{n} labels: {c}");
        }
    }

    #[test]
    fn a_better_corrector_gives_a_narrower_labelled_interval_and_a_useless_one_costs_little() {
        let mut rng = Rng::seed_from_u64(3);
        let y: Vec<f64> = (0..2000).map(|_| reference(&mut rng)).collect();
        let j: Vec<f64> = y.iter().map(|&y| judge(&mut rng, y)).collect();
        let refs: Vec<Option<f64>> = (0..2000).map(|i| (i % 10 == 0).then_some(y[i])).collect();
        let width = |f: &[f64]| {
            let e = labelled(f, &refs, None, 0.95, 0.0).unwrap();
            e.interval.1 - e.interval.0
        };
        let noise: Vec<f64> = (0..2000).map(|_| 3.0 + standard_normal(&mut rng)).collect();
        let labelled_only = width(&vec![3.0; 2000]);
        assert!(width(&j) < 0.8 * labelled_only);
        // Pure noise as the corrector: λ goes to about 0, so the width is about the labelled
        // mean's.
        assert!(width(&noise) < 1.1 * labelled_only);
    }

    #[test]
    fn clusters_widen_the_labelled_interval_when_their_items_share_errors() {
        // 100 prompts × 20 outputs; the judge's error is shared within a prompt. Treating the
        // outputs as independent covers too rarely; the cluster-robust interval covers.
        let mut rng = Rng::seed_from_u64(9);
        let (mut robust, mut naive) = (0, 0);
        let reps = 400;
        for _ in 0..reps {
            let prompt_error: Vec<f64> =
                (0..100).map(|_| 0.6 * standard_normal(&mut rng)).collect();
            let y: Vec<f64> = (0..2000).map(|_| reference(&mut rng)).collect();
            let j: Vec<f64> = (0..2000)
                .map(|i| y[i] - 0.5 + prompt_error[i / 20] + 0.2 * standard_normal(&mut rng))
                .collect();
            let clusters: Vec<u64> = (0..2000).map(|i| (i / 20) as u64).collect();
            // 10 whole prompts labelled.
            let mut prompts: Vec<usize> = (0..100).collect();
            prompts.shuffle(&mut rng);
            let refs: Vec<Option<f64>> = (0..2000)
                .map(|i| prompts[..10].contains(&(i / 20)).then_some(y[i]))
                .collect();
            let truth = mean(&y);
            let inside =
                |e: MeanEstimate| usize::from(e.interval.0 <= truth && truth <= e.interval.1);
            robust += inside(labelled(&j, &refs, Some(&clusters), 0.95, 0.0).unwrap());
            naive += inside(labelled(&j, &refs, None, 0.95, 0.0).unwrap());
        }
        let (robust, naive) = (robust as f64 / reps as f64, naive as f64 / reps as f64);
        eprintln!("clustered labels: cluster-robust {robust:.3}, independent {naive:.3}");
        assert!(robust >= 0.92, "cluster-robust {robust}");
        assert!(naive < 0.85, "independent {naive}");
    }

    #[test]
    fn the_plain_path_covers_with_a_line_whose_uncertainty_is_known() {
        // Anchors and runs from one population, y = 0.8 + 0.7·j + N(0, 0.4²) given j; the
        // corrector is least squares on 100 anchors with its exact sampling covariance (what
        // the Bayesian posterior gives at this n). 500 runs of 200 items.
        let mut rng = Rng::seed_from_u64(5);
        let (a, b, s) = (0.8, 0.7, 0.4);
        let mut covered = 0;
        let reps = 500;
        for _ in 0..reps {
            let anchors: Vec<(f64, f64)> = (0..100)
                .map(|_| {
                    let j = 1.0 + 4.0 * rng.random::<f64>();
                    (j, a + b * j + s * standard_normal(&mut rng))
                })
                .collect();
            let n = anchors.len() as f64;
            let mj = mean_of(anchors.iter().map(|p| p.0));
            let sxx: f64 = anchors.iter().map(|p| (p.0 - mj).powi(2)).sum();
            let (ah, bh) = least_squares(&anchors).unwrap();
            let s2 = anchors
                .iter()
                .map(|p| (p.1 - ah - bh * p.0).powi(2))
                .sum::<f64>()
                / (n - 2.0);
            let run_j: Vec<f64> = (0..200).map(|_| 1.0 + 4.0 * rng.random::<f64>()).collect();
            let run_y: Vec<f64> = run_j
                .iter()
                .map(|&j| a + b * j + s * standard_normal(&mut rng))
                .collect();
            let corrected: Vec<f64> = run_j.iter().map(|&j| ah + bh * j).collect();
            let jbar = mean(&run_j);
            let corrector_var = s2 * (1.0 / n + (jbar - mj).powi(2) / sxx);
            let e = plain(&corrected, s2, corrector_var, None, 0.95).unwrap();
            let truth = mean(&run_y);
            covered += usize::from(e.interval.0 <= truth && truth <= e.interval.1);
        }
        let c = covered as f64 / reps as f64;
        eprintln!("plain path, least-squares line on 100 anchors, runs of 200: coverage {c:.3}");
        assert!((0.93..=0.97).contains(&c), "coverage {c}");
    }

    #[test]
    fn paired_runs_of_the_same_items_cover_a_zero_difference() {
        // The same 1,000 items judged twice (the judge's noise drawn twice), corrected by a
        // fixed line: the true difference is exactly 0. Paired, the 95% interval covers 0 in
        // 93-97% of 2,000 runs (binomial sd 0.5 points) and p < 0.05 in 3-7%. Treated as
        // independent runs with the residual variance of a reference around the line (0.25
        // here), the interval is wider: what the runs share does not cancel.
        let mut rng = Rng::seed_from_u64(17);
        let (mut covered, mut rejected) = (0, 0);
        let (mut paired_width, mut independent_width) = (0.0, 0.0);
        let reps = 2000;
        let pairs: Vec<(usize, usize)> = (0..1000).map(|i| (i, i)).collect();
        for _ in 0..reps {
            let y: Vec<f64> = (0..1000).map(|_| reference(&mut rng)).collect();
            let line = |j: f64| 1.2 + 0.9 * j;
            let a: Vec<f64> = y.iter().map(|&y| line(judge(&mut rng, y))).collect();
            let b: Vec<f64> = y.iter().map(|&y| line(judge(&mut rng, y))).collect();
            let d = difference(
                &a,
                &b,
                Some(&pairs),
                (None, None),
                (0.25, 0.25),
                0.0,
                Estimand::Population,
                0.95,
            )
            .unwrap();
            covered += usize::from(d.interval.0 <= 0.0 && 0.0 <= d.interval.1);
            rejected += usize::from(d.p_value < 0.05);
            let u = difference(
                &a,
                &b,
                None,
                (None, None),
                (0.25, 0.25),
                0.0,
                Estimand::Runs,
                0.95,
            )
            .unwrap();
            assert!(d.paired && !u.paired);
            paired_width += d.interval.1 - d.interval.0;
            independent_width += u.interval.1 - u.interval.0;
        }
        let rate = |k: usize| k as f64 / reps as f64;
        eprintln!(
            "paired difference, true 0: coverage {:.4}, p < 0.05 in {:.4}",
            rate(covered),
            rate(rejected)
        );
        assert!((0.93..=0.97).contains(&rate(covered)), "{}", rate(covered));
        assert!(
            (0.03..=0.07).contains(&rate(rejected)),
            "{}",
            rate(rejected)
        );
        assert!(
            independent_width > 1.1 * paired_width,
            "{independent_width} vs {paired_width}"
        );
    }

    #[test]
    fn plans_say_whether_anchors_or_the_run_limit_the_interval() {
        let v = Variance {
            sampling: 0.0001,
            corrector: 0.0008,
            group: 0.0,
        };
        // Half-width now 1.96·0.03 = 0.059.
        assert_eq!(plan(v, 100, 0.1, 0.95), Advice::Reached);
        // To ±0.03: corrector variance must fall to (0.03/1.96)² − 0.0001 = 0.000134, from
        // 0.0008 at 100 anchors: about 597 anchors.
        match plan(v, 100, 0.03, 0.95) {
            Advice::Anchors(n) => assert!((590..=605).contains(&n), "{n}"),
            other => panic!("{other:?}"),
        }
        // ±0.015 is narrower than the run's own ±0.0196.
        assert_eq!(plan(v, 100, 0.015, 0.95), Advice::RunSize);
        assert_eq!(outside_support(&[0.5, 1.0, 3.0, 5.5], 1.0, 5.0), 0.5);
        // Groups of the anchors' scores: {1, 2} and {3, 4}; a run outside them falls in the
        // end groups.
        let bins = Bins::of_anchors(&[1.0, 2.0, 3.0, 4.0], 2);
        assert_eq!(
            bins.histogram(&[3.0, 1.0, 2.0, 4.0]),
            vec![(1.5, 0.5), (3.5, 0.5)]
        );
        assert_eq!(bins.histogram(&[0.0, 9.0]), vec![(1.5, 0.5), (3.5, 0.5)]);
        // Ties stay in one group: {1, 1, 1, 1} and {2}, not {1, 1, 1} and {1, 2}.
        let tied = Bins::of_anchors(&[1.0, 1.0, 1.0, 1.0, 2.0], 2);
        assert_eq!(tied.histogram(&[1.0, 2.0]), vec![(1.0, 0.5), (2.0, 0.5)]);
    }

    #[test]
    fn resampling_the_anchors_measures_the_correctors_own_uncertainty() {
        // Isotonic regression on 150 anchors of a monotone curve with noise sd 0.4; the run is
        // a fixed grid of judge scores. The truth is the spread of the run's mean corrected
        // score over 300 independent anchor sets; resampling one anchor set 300 times must
        // find it within a factor of 1.6 either way (averaged over 4 anchor sets; the
        // variance of a 300-draw variance estimate alone is about ±8%).
        let mut rng = Rng::seed_from_u64(31);
        let curve = |j: f64| 1.0 + 3.0 / (1.0 + (-1.5 * (j - 3.0)).exp());
        let draw = |rng: &mut Rng| crate::Cell {
            pairs: (0..150)
                .map(|_| {
                    let j = 1.0 + 4.0 * rng.random::<f64>();
                    (j, curve(j) + 0.4 * standard_normal(rng))
                })
                .collect(),
            scale: (1.0, 5.0),
        };
        let run: Vec<f64> = (0..200)
            .map(|i| 1.0 + 4.0 * (i as f64 + 0.5) / 200.0)
            .collect();
        let h = vec![Bins::of_anchors(&run, 64).histogram(&run)];
        let options = crate::Method::Isotonic.default_options();
        let never = std::sync::atomic::AtomicBool::new(false);
        let fit_run = crate::Run::new(&never, &|_| {});
        let truth_means: Vec<f64> = (0..300)
            .map(|_| {
                let cell = draw(&mut rng);
                mean(
                    &options
                        .fit_predict(&[cell], 0, 0, &run, &fit_run)
                        .unwrap()
                        .iter()
                        .map(|c| c.score)
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        let truth = variance_of(
            &[1.0],
            &truth_means.iter().map(|m| vec![*m]).collect::<Vec<_>>(),
        );
        let estimated: f64 = (0..4)
            .map(|k| {
                let cell = draw(&mut rng);
                resampled_means(&options, &cell, &h, 300, k)
                    .unwrap()
                    .variance(&[1.0])
            })
            .sum::<f64>()
            / 4.0;
        let ratio = estimated / truth;
        eprintln!("resampled corrector variance / true: {ratio:.3}");
        assert!(
            (1.0 / 1.6..=1.6).contains(&ratio),
            "resampled {estimated}, true {truth}"
        );
    }
}
