//! Joint draws of the runs' errors behind the pairs' intervals: each plain run's own noise
//! (independent between runs), the corrector's error and the groups' bias (shared as the model
//! says), and the labelled runs' sampling errors (correlated through the items they both
//! labelled, by their chain where they lie on one).

use rand_distr::{ChiSquared, Distribution};

use super::super::source::same;
use super::super::{AnswerPath, AnswerSettings, RunEstimate, RunItems, Source, chain};
use crate::error::Result;
use crate::rng::{Rng, SeedableRng};
use crate::stats::{cholesky_rows, covariance, sample_variance, standard_normal};

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
    sources: &[&dyn Source],
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
            let rho = labelled_errors(sources, runs, estimates, &mut errors, k, rng)?;
            LabelledDraws {
                errors,
                rho,
                chain: None,
            }
        }
    })
}

/// `draws` joint draws of every run's plain error (its plain estimate − truth), row-major
/// (draw × run): each run's own noise (independent between runs), then each source's
/// corrector and groups' error, shared by its runs as its model says, and between sources
/// correlated `shared` (0: independent). Correlated, each source draws √ρ of its error from a
/// stream every source starts alike (so that sources of one model draw the same normals in
/// the same order) and √(1 − ρ) from its own.
pub(super) fn joint_plain_errors(
    sources: &[&dyn Source],
    runs: &[RunItems],
    plains: &[RunEstimate],
    settings: &AnswerSettings,
    (draws, shared): (usize, f64),
    rng: &mut Rng,
) -> Result<Vec<f64>> {
    let k = runs.len();
    let mut errors = vec![0.0; draws * k];
    for (i, p) in plains.iter().enumerate() {
        // A covariate layer's share is drawn below, shared between the runs it reads.
        let own = p.mean.variance.sampling - runs[i].input_variance();
        let sd = own.max(0.0).sqrt();
        for d in 0..draws {
            errors[d * k + i] += sd * standard_normal(rng);
        }
    }
    let width = runs
        .iter()
        .map(|r| r.input_loading.len())
        .max()
        .unwrap_or(0);
    if width > 0 {
        for d in 0..draws {
            let z: Vec<f64> = (0..width).map(|_| standard_normal(rng)).collect();
            for (i, r) in runs.iter().enumerate() {
                errors[d * k + i] += r
                    .input_loading
                    .iter()
                    .zip(&z)
                    .map(|(u, z)| u * z)
                    .sum::<f64>();
            }
        }
    }
    let sources = by_source(sources);
    // Errors moving apart (ρ < 0) are drawn for two sources, the second taking the shared
    // stream with its sign turned; with more, no one stream can make every pair move apart,
    // and they are drawn independent.
    let rho = shared.clamp(-1.0, 1.0);
    if sources.len() < 2 || rho == 0.0 || (rho < 0.0 && sources.len() > 2) {
        for (source, columns) in sources {
            source.add_shared_errors(runs, &columns, settings, &mut errors, rng)?;
        }
        return Ok(errors);
    }
    let common_seed = settings.seed ^ 0xC0DE;
    for (s, (source, columns)) in sources.into_iter().enumerate() {
        let mut common = vec![0.0; draws * k];
        let mut own = vec![0.0; draws * k];
        let mut stream = Rng::seed_from_u64(common_seed);
        source.add_shared_errors(runs, &columns, settings, &mut common, &mut stream)?;
        source.add_shared_errors(runs, &columns, settings, &mut own, rng)?;
        let sign = if rho < 0.0 && s == 1 { -1.0 } else { 1.0 };
        for ((e, c), o) in errors.iter_mut().zip(&common).zip(&own) {
            *e += sign * rho.abs().sqrt() * c + (1.0 - rho.abs()).sqrt() * o;
        }
    }
    Ok(errors)
}

/// The distinct sources, in order of first appearance, each with the runs it corrects.
pub(super) fn by_source<'a>(sources: &[&'a dyn Source]) -> Vec<(&'a dyn Source, Vec<usize>)> {
    let mut out: Vec<(&dyn Source, Vec<usize>)> = Vec::new();
    for (i, &s) in sources.iter().enumerate() {
        match out.iter_mut().find(|(t, _)| same(*t, s)) {
            Some((_, columns)) => columns.push(i),
            None => out.push((s, vec![i])),
        }
    }
    out
}

/// One labelled run's PPI residuals (reference − λ·corrected) on its labelled items, by item.
pub(super) struct LabelledRun {
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
    sources: &[&dyn Source],
    runs: &[RunItems],
    estimates: &[RunEstimate],
    errors: &mut [f64],
    k: usize,
    rng: &mut Rng,
) -> Result<Option<f64>> {
    let draws = errors.len() / k;
    let block = labelled_block(sources, runs, estimates)?;
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
    let factor = cholesky_rows(&cov, l).unwrap_or_else(|| {
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

/// The labelled runs, each with its residuals (reference − λ·corrected) and its answer's
/// variance and degrees of freedom.
fn labelled_block(
    sources: &[&dyn Source],
    runs: &[RunItems],
    estimates: &[RunEstimate],
) -> Result<Vec<LabelledRun>> {
    let mut block: Vec<LabelledRun> = Vec::new();
    for (i, (run, e)) in runs.iter().zip(estimates).enumerate() {
        if e.path != AnswerPath::Labelled {
            continue;
        }
        let lambda = e.mean.lambda.unwrap_or(1.0);
        let corrected = sources[i].corrected(&run.scores)?;
        let residual = run
            .references()
            .iter()
            .zip(&corrected)
            .map(|(y, f)| y.map(|y| y - lambda * f))
            .collect();
        block.push(LabelledRun {
            run: i,
            residual,
            n: e.mean.labelled,
            big_n: e.mean.n,
            variance: e.mean.variance.total(),
            df: e.mean.df,
        });
    }
    Ok(block)
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
pub(super) fn labelled_covariance(
    a: &LabelledRun,
    b: &LabelledRun,
    runs: &[RunItems],
) -> Option<Shared> {
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
