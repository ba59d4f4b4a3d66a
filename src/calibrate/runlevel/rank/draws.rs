//! Joint draws of the runs' errors behind the pairs' intervals: each plain run's own noise
//! (independent between runs), the corrector's error and the groups' bias (shared as the model
//! says), and the labelled runs' sampling errors (correlated through the items they both
//! labelled, by their chain where they lie on one).

use rand_distr::{ChiSquared, Distribution};

use super::super::{Anchored, Path, RunEstimate, RunItems, Settings, chain};
use crate::calibrate::MeanUncertainty;
use crate::calibrate::error::Result;
use crate::calibrate::rng::{Rng, RngExt};
use crate::calibrate::stats::{cholesky, covariance, mean, sample_variance, standard_normal};

/// The labelled runs' errors (draw × run; 0 for a plain run), with what the pairs and the
/// plan need of them.
pub(super) struct LabelledDraws {
    pub errors: Vec<f64>,
    /// The correlation of two runs' residuals on the items both labelled, pooled.
    pub rho: Option<f64>,
    /// The chain's own draws, for the pairs answered on it.
    pub chain: Option<chain::Draws>,
}

/// The labelled runs' errors: on one chain of nested label sets, drawn with every pair's own
/// (`chain`); otherwise each run's alone.
pub(super) fn labelled_draws(
    anchored: &Anchored,
    runs: &[RunItems],
    estimates: &[RunEstimate],
    chain: Option<&chain::Chain>,
    draws: usize,
    rng: &mut Rng,
) -> Result<LabelledDraws> {
    let k = runs.len();
    let mut errors = vec![0.0; draws * k];
    Ok(match chain {
        Some(c) => {
            let d = c.draws(draws, rng);
            for i in 0..k {
                if let Some(column) = c.run_errors(i, &d, rng) {
                    for (x, e) in column.into_iter().enumerate() {
                        errors[x * k + i] = e;
                    }
                }
            }
            LabelledDraws {
                errors,
                rho: c.correlation(),
                chain: Some(d),
            }
        }
        None => {
            let rho = labelled_errors(anchored, runs, estimates, &mut errors, k, rng)?;
            LabelledDraws {
                errors,
                rho,
                chain: None,
            }
        }
    })
}

/// `draws` joint draws of every run's plain error (its plain estimate − truth), row-major
/// (draw × run): each run's own noise (independent between runs), the corrector's error and
/// the groups' bias (shared as the model says).
pub(super) fn joint_plain_errors(
    anchored: &Anchored,
    runs: &[RunItems],
    plains: &[RunEstimate],
    settings: &Settings,
    draws: usize,
    rng: &mut Rng,
) -> Result<Vec<f64>> {
    let k = runs.len();
    let mut errors = vec![0.0; draws * k];
    let all: Vec<usize> = (0..k).collect();
    for (i, p) in plains.iter().enumerate() {
        let sd = p.mean.variance.sampling.max(0.0).sqrt();
        for d in 0..draws {
            errors[d * k + i] += sd * standard_normal(rng);
        }
    }
    corrector_errors(anchored, runs, &all, settings, &mut errors, k, rng)?;
    if let Some(g) = anchored.basis.groups {
        let names: Vec<Option<&str>> = runs.iter().map(|r| r.group.as_deref()).collect();
        for (d, row) in g.joint_errors(&names, draws, rng).iter().enumerate() {
            for (i, e) in row.iter().enumerate() {
                errors[d * k + i] += e;
            }
        }
    }
    Ok(errors)
}

/// Adds the corrector's error, shared by the plain runs `plain`, to each draw.
pub(super) fn corrector_errors(
    anchored: &Anchored,
    runs: &[RunItems],
    plain: &[usize],
    settings: &Settings,
    errors: &mut [f64],
    k: usize,
    rng: &mut Rng,
) -> Result<()> {
    let draws = errors.len() / k;
    // With a group term, a plain answer keeps only what the run's scores add beyond the
    // anchors' (`Anchored::plain`): the corrector at the run's scores less at the anchors'.
    let grouped = anchored.basis.groups.is_some();
    let anchor_mean = mean(&anchored.judge_scores);
    match anchored.basis.model.mean_uncertainty() {
        MeanUncertainty::Line(p) => {
            // (δα, δβ) ~ N(0, posterior covariance), by its Cholesky factor.
            let l11 = p.alpha_var.max(0.0).sqrt();
            let l21 = if l11 > 0.0 {
                p.alpha_beta_cov / l11
            } else {
                0.0
            };
            let l22 = (p.beta_var - l21 * l21).max(0.0).sqrt();
            let weights: Vec<(f64, f64)> = plain
                .iter()
                .map(|&i| {
                    let j = mean(&runs[i].scores);
                    if grouped {
                        (0.0, j - anchor_mean)
                    } else {
                        (1.0, j)
                    }
                })
                .collect();
            for d in 0..draws {
                let (z1, z2) = (standard_normal(rng), standard_normal(rng));
                let (da, db) = (l11 * z1, l21 * z1 + l22 * z2);
                for (&i, (wa, wb)) in plain.iter().zip(&weights) {
                    errors[d * k + i] += wa * da + wb * db;
                }
            }
        }
        MeanUncertainty::Offset => {
            // The anchors' mean residual, shared by every plain run (cancelled by a group
            // term, which carries it).
            let r = &anchored.residuals;
            if !grouped && r.len() >= 2 {
                let sd = (sample_variance(r) / r.len() as f64).sqrt();
                for d in 0..draws {
                    let e = sd * standard_normal(rng);
                    for &i in plain {
                        errors[d * k + i] += e;
                    }
                }
            }
        }
        MeanUncertainty::Omitted(_) => {}
        MeanUncertainty::Resample => {
            let mut scores: Vec<&[f64]> =
                plain.iter().map(|&i| runs[i].scores.as_slice()).collect();
            scores.push(&anchored.judge_scores);
            let (_, resampled) = anchored.resampled(&scores, settings)?;
            // One refit per draw, centred on the refits' mean, at the bootstrap's scale.
            let refits = &resampled.means;
            let centre: Vec<f64> = (0..scores.len())
                .map(|h| mean(&refits.iter().map(|m| m[h]).collect::<Vec<_>>()))
                .collect();
            let scale = resampled.bootstrap_scale.sqrt();
            let at_anchors = plain.len();
            for d in 0..draws {
                let m = &refits[rng.random_range(0..refits.len())];
                let base = if grouped {
                    m[at_anchors] - centre[at_anchors]
                } else {
                    0.0
                };
                for (h, &i) in plain.iter().enumerate() {
                    errors[d * k + i] += scale * (m[h] - centre[h] - base);
                }
            }
        }
    }
    Ok(())
}

/// One labelled run's PPI residuals (reference − λ·corrected) on its labelled items, by item.
pub(super) struct Labelled {
    run: usize,
    residual: Vec<Option<f64>>,
    n: usize,
    big_n: usize,
    variance: f64,
    df: Option<f64>,
}

/// Adds the labelled runs' errors: normal with the covariance their shared labelled items
/// give, each scaled by its own t draw. Returns the correlation of two runs' residuals on the
/// items both labelled, pooled over the pairs of labelled runs (weighted by the items shared;
/// `None` where no pair shares enough).
pub(super) fn labelled_errors(
    anchored: &Anchored,
    runs: &[RunItems],
    estimates: &[RunEstimate],
    errors: &mut [f64],
    k: usize,
    rng: &mut Rng,
) -> Result<Option<f64>> {
    let draws = errors.len() / k;
    let mut block: Vec<Labelled> = Vec::new();
    for (i, (run, e)) in runs.iter().zip(estimates).enumerate() {
        if e.path != Path::Labelled {
            continue;
        }
        let lambda = e.mean.lambda.unwrap_or(1.0);
        let corrected = anchored.corrected(&run.scores)?;
        let residual = run
            .references()
            .iter()
            .zip(&corrected)
            .map(|(y, f)| y.map(|y| y - lambda * f))
            .collect();
        block.push(Labelled {
            run: i,
            residual,
            n: e.mean.labelled,
            big_n: e.mean.n,
            variance: e.mean.variance.total(),
            df: e.mean.df,
        });
    }
    if block.is_empty() {
        return Ok(None);
    }
    let l = block.len();
    let mut cov = vec![0.0; l * l];
    let (mut pooled, mut weight) = (0.0, 0.0);
    for a in 0..l {
        cov[a * l + a] = block[a].variance;
        for b in 0..a {
            let Some(shared) = labelled_covariance(&block[a], &block[b], runs) else {
                continue;
            };
            cov[a * l + b] = shared.covariance;
            cov[b * l + a] = shared.covariance;
            pooled += shared.items as f64 * shared.correlation;
            weight += shared.items as f64;
        }
    }
    let factor = cholesky(&cov, l).unwrap_or_else(|| {
        // Not positive definite (covariances from few shared items): independent.
        let mut d = vec![0.0; l * l];
        for a in 0..l {
            d[a * l + a] = block[a].variance.max(0.0).sqrt();
        }
        d
    });
    let chi: Vec<Option<ChiSquared<f64>>> = block
        .iter()
        .map(|b| {
            b.df.filter(|df| df.is_finite() && *df < 200.0)
                .and_then(|df| ChiSquared::new(df).ok())
        })
        .collect();
    let mut z = vec![0.0; l];
    for d in 0..draws {
        for x in z.iter_mut() {
            *x = standard_normal(rng);
        }
        for a in 0..l {
            let x: f64 = (0..=a).map(|b| factor[a * l + b] * z[b]).sum();
            let t = match &chi[a] {
                Some(c) => {
                    let df = block[a].df.unwrap_or(f64::INFINITY);
                    (df / c.sample(rng).max(1e-12)).sqrt()
                }
                None => 1.0,
            };
            errors[d * k + block[a].run] += x * t;
        }
    }
    Ok((weight > 0.0).then(|| pooled / weight))
}

/// Two labelled runs' residuals on the items both labelled.
pub(super) struct Shared {
    /// Of the two runs' errors.
    covariance: f64,
    /// Of the residuals, item by item.
    correlation: f64,
    items: usize,
}

/// The covariance of two labelled runs' errors, from the items both labelled (runs paired by
/// id): (m/(n_a·n_b) − 1/N)·S_ab, S_ab the residuals' covariance on the m shared items; `None`
/// for runs not paired, sharing fewer than 3 items, or with clusters (whose errors the
/// single-run answers treat by cluster).
pub(super) fn labelled_covariance(a: &Labelled, b: &Labelled, runs: &[RunItems]) -> Option<Shared> {
    let (ra, rb) = (&runs[a.run], &runs[b.run]);
    if ra.clusters.is_some() || rb.clusters.is_some() || a.big_n != b.big_n {
        return None;
    }
    let pairs = super::super::pairing(ra, rb)?;
    let shared: Vec<(f64, f64)> = pairs
        .iter()
        .filter_map(|&(i, j)| a.residual[i].zip(b.residual[j]))
        .collect();
    let m = shared.len();
    if m < 3 {
        return None;
    }
    let s = covariance(&shared);
    let (xs, ys): (Vec<f64>, Vec<f64>) = shared.iter().copied().unzip();
    let (sx, sy) = (sample_variance(&xs), sample_variance(&ys));
    let c = (m as f64 / (a.n * b.n) as f64 - 1.0 / a.big_n as f64) * s;
    // Never beyond a correlation of 0.99.
    let bound = 0.99 * (a.variance * b.variance).max(0.0).sqrt();
    Some(Shared {
        covariance: c.clamp(-bound, bound),
        correlation: if sx > 0.0 && sy > 0.0 {
            (s / (sx * sy).sqrt()).clamp(-1.0, 1.0)
        } else {
            0.0
        },
        items: m,
    })
}
