//! The resampled corrector term: refits of a flexible corrector on resampled anchors, each
//! averaged over the runs' shared histograms, whose spread is the corrector's own uncertainty
//! in a run's mean and whose mean less the fit's estimates the fit's bias.

use crate::stats::{mean, sample_variance};

/// The groups of neighbouring judge scores every run of a version is summarised on, fixed by
/// the version's anchors: at most `bins` groups of about equal anchor counts (never splitting
/// tied scores: a discrete scale's levels each get their own where they fit), each standing
/// at its anchors' mean score. Every run is a histogram on these groups, whatever runs it is
/// asked with, so the corrector term of a combination of runs (A − B) is that combination of
/// the runs' own (an estimate's difference is the compare's, and a ranking's pairs are
/// differences of estimates), and two runs compare the corrector at the same points, so a step
/// of a refit that falls between two runs' own means does not pass for a difference. Scores
/// outside the anchors' range fall in the end groups.
#[derive(Debug, Clone, PartialEq)]
pub struct Bins {
    /// Each group's largest anchor score and its anchors' mean score, in order.
    groups: Vec<(f64, f64)>,
}

impl Bins {
    /// From the anchors' judge scores, sorted.
    pub fn of_anchors(sorted: &[f64], bins: usize) -> Self {
        let per = sorted.len().div_ceil(bins.max(1)).max(1);
        let mut groups = Vec::new();
        let mut start = 0;
        while start < sorted.len() {
            let mut end = (start + per).min(sorted.len());
            // Ties stay together.
            while end < sorted.len() && sorted[end] == sorted[end - 1] {
                end += 1;
            }
            let chunk = &sorted[start..end];
            groups.push((chunk[chunk.len() - 1], mean(chunk)));
            start = end;
        }
        if groups.is_empty() {
            groups.push((0.0, 0.0));
        }
        Bins { groups }
    }

    /// The group a score falls in (scores outside the anchors' range: the end groups).
    pub fn index(&self, x: f64) -> usize {
        let g = self.groups.partition_point(|&(upper, _)| upper < x);
        g.min(self.groups.len() - 1)
    }

    /// `run`'s histogram on the groups: (group's score, the run's share in it).
    pub fn histogram(&self, run: &[f64]) -> Vec<(f64, f64)> {
        let mut counts = vec![0usize; self.groups.len()];
        for &x in run {
            counts[self.index(x)] += 1;
        }
        self.groups
            .iter()
            .zip(counts)
            .map(|(&(_, centre), k)| (centre, k as f64 / run.len().max(1) as f64))
            .collect()
    }
}

/// What refitting a corrector on resampled anchors gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Resampled {
    /// `means[b][k]`: refit b's mean corrected score of run k, on a bootstrap sample of the
    /// anchors (the refits' mean less the fit's own estimates the fit's bias).
    pub means: Vec<Vec<f64>>,
    /// The same on half-samples drawn without replacement, each bias-corrected by its own
    /// inner bootstrap as an answer is by the outer one, and scaled so that their variance
    /// ([`Self::variance`]) estimates that of an answer on every anchor.
    pub half_means: Vec<Vec<f64>>,
    /// The half-samples' plain fits, scaled alike: the floor of that variance.
    pub half_plain: Vec<Vec<f64>>,
    /// The share of the anchors a half-sample holds (m/n).
    pub half_share: f64,
    /// Per half-sample, its inner refits' means times the bias correction's weight and the
    /// half-samples' scale: their spread over [`INNER_REFITS`] is the Monte Carlo noise
    /// `half_means` carry beyond the answer's own.
    pub half_inner: Vec<Vec<Vec<f64>>>,
    /// What the bootstrap's spread and bias are multiplied by to stand for a fit on every
    /// anchor: m/n where the bootstrap drew m < n anchors (1 up to [`RESAMPLE_CAP`]).
    pub bootstrap_scale: f64,
    /// The mean squared residual (reference − corrected) of anchors a refit did not draw, over
    /// every refit: the noise of a reference around a corrected score out of sample, which
    /// in-sample residuals understate for a flexible fit.
    pub out_of_bag_mean_square: Option<f64>,
}

impl Resampled {
    /// The variance of Σ_k `weights[k]`·(run k's mean) from the corrector's uncertainty. For a
    /// level (weights not summing to 0) it is taken over the half-samples, where the
    /// bootstrap's errs narrow. For a contrast of runs (A − B) it is taken over [`Self::draws`]:
    /// each run's spread the half-samples', their correlation the bootstrap's (how much of the
    /// difference cancels), as a ranking draws its pairs, so that a compare and a ranking's
    /// pair answer alike. The bootstrap's own spread of a contrast errs narrow where the runs
    /// sit in different parts of the scale (an isotonic fit's ends): within one isotonic
    /// version of 200 anchors, a top run against a middle one covered 92.7% and against a
    /// bottom one 91.3%; over the draws 94.2% and 94.4% (1,000 replications), while runs from
    /// the same population cover as before (`judgecal-study coverage`). Both are measured by
    /// `cargo test --workspace --lib compares_within_one_isotonic_version -- --nocapture`;
    /// with the bias correction's own noise counted ([`Self::half_variance`]) the three
    /// compares there cover 95.5%, 96.0% and 96.0% (600 replications; 93.7–95.2% without).
    /// The Monte Carlo noise of the answer's bias correction (the mean of the bootstrap refits)
    /// is added.
    pub fn variance(&self, weights: &[f64]) -> f64 {
        let contrast = weights.iter().sum::<f64>().abs() < 1e-12;
        let spread = if contrast {
            variance_of(weights, &self.draws())
        } else if self.half_means.len() >= 2 {
            self.half_variance(weights)
        } else {
            self.bootstrap_scale * variance_of(weights, &self.means)
        };
        let refits = self.means.len().max(1) as f64;
        spread + self.bootstrap_scale.powi(2) * variance_of(weights, &self.means) / refits
    }

    /// The half-samples' variance of Σ_k `weights[k]`·(run k's mean): of their bias-corrected
    /// means (an answer is the fit less the bootstrap's estimate of its bias, whose own
    /// sampling noise adds to the fit's: isotonic answers between the ends of the scale
    /// covered 1–2 points under their level while only the fit's was counted), less the Monte
    /// Carlo noise of each half-sample's few inner refits, and never under the plain fits'.
    /// What the correction adds is scaled by m/n beyond the half-samples' own scaling: a bias
    /// falls as 1/n (the bootstrap's bias is scaled so, above), so its estimate's noise has a
    /// variance falling as 1/n², where the fit's falls as 1/n. Unscaled, the added variance
    /// was 1.4–1.6 times what replications of a 200-anchor isotonic fit show, and compares
    /// between the ends of the scale covered 97%.
    fn half_variance(&self, weights: &[f64]) -> f64 {
        let plain = variance_of(weights, &self.half_plain);
        if self.half_inner.is_empty() {
            return plain;
        }
        let noise = mean(
            &self
                .half_inner
                .iter()
                .map(|inner| variance_of(weights, inner) / inner.len().max(1) as f64)
                .collect::<Vec<_>>(),
        );
        let corrected = variance_of(weights, &self.half_means) - noise;
        plain + self.half_share * (corrected - plain).max(0.0)
    }

    /// The refits a ranking draws its corrector errors from: the bootstrap refits' means,
    /// each run's spread about their centre set to the half-samples' (where there are
    /// half-samples; else at the bootstrap's scale). So each run's error is as wide as its
    /// estimate's (whose level variance is the half-samples'), and the runs' errors are
    /// correlated as the bootstrap's are (how much of a difference cancels). At the
    /// bootstrap's own scale, isotonic runs at opposite ends of the scale were ranked with
    /// families covering 85–89%; the bootstrap's spread of a level errs narrow for isotonic.
    pub fn draws(&self) -> Vec<Vec<f64>> {
        let k = self.means.first().map_or(0, Vec::len);
        let column = |m: &[Vec<f64>], h: usize| m.iter().map(|r| r[h]).collect::<Vec<_>>();
        let centre: Vec<f64> = (0..k).map(|h| mean(&column(&self.means, h))).collect();
        let factor: Vec<f64> = (0..k)
            .map(|h| {
                let boot = sample_variance(&column(&self.means, h));
                if self.half_means.len() >= 2 && boot > 0.0 {
                    let mut unit = vec![0.0; k];
                    unit[h] = 1.0;
                    (self.half_variance(&unit) / boot).sqrt()
                } else {
                    self.bootstrap_scale.sqrt()
                }
            })
            .collect();
        self.means
            .iter()
            .map(|m| {
                (0..k)
                    .map(|h| centre[h] + factor[h] * (m[h] - centre[h]))
                    .collect()
            })
            .collect()
    }
}

/// A refit draws at most this many anchors (a half-sample at most half as many): past it, the
/// spread of refits on m of n anchors, scaled by m/n, stands for a fit on all n (the m-out-of-n
/// bootstrap and the delete-d jackknife), so the term's cost stops growing with the anchors
/// while its precision, set by the number of refits, stays.
pub const RESAMPLE_CAP: usize = 20_000;

/// The out-of-bag noise is measured on at most this many anchors (a seeded sample): its
/// precision at 5,000 residuals (a relative standard error of about 2%) is more than the
/// interval needs.
pub const OUT_OF_BAG_CAP: usize = 5_000;

/// Each half-sample's own bootstrap refits, which estimate its fit's bias as the outer
/// bootstrap estimates the answer's, so that the half-samples' spread counts the bias
/// correction's noise. Their Monte Carlo noise is measured and taken off; with four, the
/// refits cost about 2.3 times what they cost without (half-samples fit half the anchors).
pub const INNER_REFITS: usize = 4;

/// Past this many anchors the half-samples get no inner refits: the correction's noise has a
/// variance falling as 1/n² where the fit's falls as 1/n, so its share, about a fifth of the
/// variance for an isotonic fit on 200 anchors, is about 2% here and shrinking, less than the
/// half-samples' own precision (a relative standard error of 10% at 200 refits).
pub const INNER_CAP: usize = 2_000;

/// The corrector's uncertainty by resampling its anchors, for methods without a posterior:
/// `refits` fits of `options` on `anchors` drawn with replacement and `refits` on half of them
/// drawn without, each averaged over every run in `runs` (their histograms on one [`Bins`]). The variance
/// of any combination of runs (one run, or A − B) follows from the half-sample means with
/// [`variance_of`], so what the runs share is counted once.
pub fn resampled_means(
    options: &crate::MethodOptions,
    anchors: &crate::Cell,
    runs: &[Vec<(f64, f64)>],
    refits: usize,
    seed: u64,
) -> Result<Resampled, String> {
    Refits::new(options, anchors, refits, seed)?.means(runs)
}

/// The refits behind [`resampled_means`], fitted once and kept: which anchors they draw depends
/// only on the anchors, the number of refits and the seed, so a ranking's K runs (each run's
/// own answer, then the runs' joint draws) average the same fits over their own groups instead
/// of refitting K + 1 times. Each fit is kept compacted (`Corrector::compact`: an isotonic
/// refit keeps one knot per step, not one per distinct anchor score), so that 400 refits of a
/// version with continuous scores and 20,000 anchors hold kilobytes each, not 300 KB.
pub struct Refits {
    /// One fit per bootstrap sample.
    boot: Vec<crate::method::Predictor>,
    /// One fit per half-sample, and what its means are multiplied by.
    half: Vec<crate::method::Predictor>,
    half_share: f64,
    /// Per half-sample, [`INNER_REFITS`] fits on bootstrap samples of it.
    inner: Vec<Vec<crate::method::Predictor>>,
    half_scale: f64,
    bootstrap_scale: f64,
    out_of_bag_mean_square: Option<f64>,
}

impl Refits {
    pub fn new(
        options: &crate::MethodOptions,
        anchors: &crate::Cell,
        refits: usize,
        seed: u64,
    ) -> Result<Self, String> {
        use crate::rng::Rng;
        use crate::rng::RngExt;
        use crate::rng::SeedableRng;
        let mut rng = Rng::seed_from_u64(seed ^ 0xB007);
        let n = anchors.pairs.len();
        let never = std::sync::atomic::AtomicBool::new(false);
        let run = crate::Run::new(&never, &|_| {});
        // The anchors the out-of-bag residuals are measured on: all, or a seeded sample.
        let checked: Vec<usize> = if n <= OUT_OF_BAG_CAP {
            (0..n).collect()
        } else {
            use crate::rng::SliceRandom;
            let mut all: Vec<usize> = (0..n).collect();
            all.shuffle(&mut rng);
            all.truncate(OUT_OF_BAG_CAP);
            all
        };
        let at_checked: Vec<f64> = checked.iter().map(|&i| anchors.pairs[i].0).collect();
        let (mut oob_sum, mut oob_count) = (0.0, 0usize);
        let mut boot = Vec::with_capacity(refits);
        let draws = n.min(RESAMPLE_CAP);
        for b in 0..refits {
            let mut drawn = vec![false; n];
            let cell = crate::Cell {
                pairs: (0..draws)
                    .map(|_| {
                        let i = rng.random_range(0..n);
                        drawn[i] = true;
                        anchors.pairs[i]
                    })
                    .collect(),
                scale: anchors.scale,
            };
            let fit = options.fit_rubric(&[cell], seed.wrapping_add(b as u64), 0, &run)?;
            for (&i, c) in checked.iter().zip(fit(&at_checked)?) {
                if !drawn[i] {
                    oob_sum += (anchors.pairs[i].1 - c.score).powi(2);
                    oob_count += 1;
                }
            }
            boot.push(fit);
        }
        // Half-samples without replacement, for the variance: (m / (n − m))·Var over them
        // estimates the variance of a fit on all n (the delete-d jackknife with d = n − m,
        // which errs on the wide side by the Efron–Stein inequality; the bootstrap's variance
        // errs on the narrow side for isotonic regression on 100 anchors).
        let m = (n / 2).min(RESAMPLE_CAP / 2);
        let mut half = Vec::new();
        let mut inner = Vec::new();
        if m >= 2 {
            let mut order: Vec<usize> = (0..n).collect();
            for b in 0..refits {
                use crate::rng::SliceRandom;
                order.shuffle(&mut rng);
                let cell = crate::Cell {
                    pairs: order[..m].iter().map(|&i| anchors.pairs[i]).collect(),
                    scale: anchors.scale,
                };
                let inner_refits = if n <= INNER_CAP { INNER_REFITS } else { 0 };
                let own = (0..inner_refits)
                    .map(|i| {
                        let drawn = crate::Cell {
                            pairs: (0..m).map(|_| cell.pairs[rng.random_range(0..m)]).collect(),
                            scale: anchors.scale,
                        };
                        let seed = seed.wrapping_add((refits * (1 + i) + b) as u64);
                        options.fit_rubric(&[drawn], seed, 0, &run)
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                half.push(options.fit_rubric(&[cell], seed.wrapping_add(b as u64), 0, &run)?);
                inner.push(own);
            }
        }
        Ok(Self {
            boot,
            half,
            inner,
            half_share: m as f64 / n.max(1) as f64,
            half_scale: if m >= 2 {
                (m as f64 / (n - m) as f64).sqrt()
            } else {
                0.0
            },
            bootstrap_scale: draws as f64 / n.max(1) as f64,
            out_of_bag_mean_square: (oob_count > 0).then(|| oob_sum / oob_count as f64),
        })
    }

    /// Each refit's mean corrected score of every run in `runs` (groups of judge scores with
    /// their shares).
    pub fn means(&self, runs: &[Vec<(f64, f64)>]) -> Result<Resampled, String> {
        let grid: Vec<f64> = runs.iter().flatten().map(|p| p.0).collect();
        let averaged = |fits: &[crate::method::Predictor], scale: f64| {
            fits.iter()
                .map(|fit| {
                    let corrected = fit(&grid)?;
                    let mut at = corrected.iter().map(|c| c.score);
                    Ok(runs
                        .iter()
                        .map(|h| {
                            scale
                                * h.iter()
                                    .map(|&(_, w)| w * at.next().unwrap_or(f64::NAN))
                                    .sum::<f64>()
                        })
                        .collect())
                })
                .collect::<Result<Vec<Vec<f64>>, String>>()
        };
        // A half-sample's answer as an answer on every anchor is made: its fit less its own
        // bootstrap's estimate of its bias, (1 + s)·fit − s·(inner refits' mean). Without
        // inner refits (past INNER_CAP anchors), its plain fit.
        let s = self.bootstrap_scale;
        let half_plain = averaged(&self.half, self.half_scale)?;
        let half_inner = if self.inner.iter().any(Vec::is_empty) {
            Vec::new()
        } else {
            self.inner
                .iter()
                .map(|fits| averaged(fits, s * self.half_scale))
                .collect::<Result<Vec<_>, String>>()?
        };
        let half_means = if half_inner.is_empty() {
            half_plain.clone()
        } else {
            half_plain
                .iter()
                .zip(&half_inner)
                .map(|(fit, inner)| {
                    (0..fit.len())
                        .map(|k| {
                            let refitted = mean(&inner.iter().map(|r| r[k]).collect::<Vec<_>>());
                            (1.0 + s) * fit[k] - refitted
                        })
                        .collect()
                })
                .collect()
        };
        Ok(Resampled {
            means: averaged(&self.boot, 1.0)?,
            half_means,
            half_plain,
            half_share: self.half_share,
            half_inner,
            bootstrap_scale: self.bootstrap_scale,
            out_of_bag_mean_square: self.out_of_bag_mean_square,
        })
    }
}

/// The variance over refits of Σ_k `weights[k]`·means[b][k].
pub fn variance_of(weights: &[f64], means: &[Vec<f64>]) -> f64 {
    let values: Vec<f64> = means
        .iter()
        .map(|m| m.iter().zip(weights).map(|(x, w)| x * w).sum())
        .collect();
    sample_variance(&values)
}
