//! The hierarchical Bayesian linear corrector: the model (`model`), NUTS sampling through
//! nuts-rs, convergence diagnostics (`diagnostics`), the posterior summary of any case of the
//! linear model (`summary`, which panels read too) and the line's posterior a correction needs.

mod corrector;
pub mod diagnostics;
pub mod model;
pub mod summary;

use std::collections::HashMap;

use crate::rng::Rng;
use crate::rng::SeedableRng;
use nuts_rs::{
    Chain, CpuLogpFunc, CpuMath, CpuMathError, DiagNutsSettings, HasDims, LogpError, Settings,
};
use serde::{Deserialize, Serialize};

pub use crate::linear::Target;
pub use crate::report::{FitDiagnostics, RubricPosterior};
pub use corrector::{Bayes, BayesModel, BayesOptions, BayesReport};
pub use model::{LineModel, Priors, SufficientStats};

/// Sampler settings; the defaults are the issue's: 2 chains × (500 warm-up + 1,000 draws),
/// target acceptance 0.9.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FitOptions {
    pub chains: u64,
    pub warmup: u64,
    pub draws: u64,
    pub target_accept: f64,
    /// Same anchors + same seed = same fit.
    pub seed: u64,
    pub priors: Priors,
    /// The canary: Pr(β < collapse_beta | anchors) > collapse_probability.
    pub collapse_beta: f64,
    pub collapse_probability: f64,
}

impl Default for FitOptions {
    fn default() -> Self {
        Self {
            chains: 2,
            warmup: 500,
            draws: 1000,
            target_accept: 0.9,
            seed: 0,
            priors: Priors::default(),
            collapse_beta: 0.3,
            collapse_probability: 0.05,
        }
    }
}

impl FitOptions {
    pub fn check(&self) -> Result<(), String> {
        if !(1..=16).contains(&self.chains) {
            return Err("chains must be between 1 and 16".into());
        }
        if !(10..=100_000).contains(&self.draws) || self.warmup > 100_000 {
            return Err("draws must be between 10 and 100000, warmup at most 100000".into());
        }
        if !(self.target_accept > 0.5 && self.target_accept < 1.0) {
            return Err("target_accept must lie in (0.5, 1)".into());
        }
        if !(self.collapse_probability > 0.0
            && self.collapse_probability < 1.0
            && self.collapse_beta.is_finite())
        {
            return Err(
                "collapse_probability must lie in (0, 1) and collapse_beta be finite".into(),
            );
        }
        self.priors.check()
    }
}

/// A corrected score with its intervals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineCorrected {
    pub score: f64,
    /// 95% credible interval of the mean corrected score α + β·j.
    pub credible: (f64, f64),
    /// 95% predictive interval of a new item's reference score (σ integrated).
    pub predictive: (f64, f64),
}

/// z of the central 95% of a normal.
const Z95: f64 = 1.959_963_984_540_054;

impl RubricPosterior {
    /// The corrected score at judge score `j`. α + β·j is linear in (α, β), whose posterior is
    /// close to normal; the intervals use its posterior mean and variance (and E[σ²] for the
    /// predictive one), which is what makes 100,000 corrections take milliseconds.
    pub fn correct(&self, j: f64) -> LineCorrected {
        let score = self.alpha_mean + self.beta_mean * j;
        let var_mean = self.alpha_var + j * j * self.beta_var + 2.0 * j * self.alpha_beta_cov;
        LineCorrected::of(score, var_mean, self.sigma2_mean)
    }
}

impl LineCorrected {
    /// A posterior mean `score` whose variance is `var_mean`, with E[σ²] = `sigma2` added for
    /// a new item: the normal 95% intervals of the mean and of a new item's reference.
    pub fn of(score: f64, var_mean: f64, sigma2: f64) -> Self {
        let var_mean = var_mean.max(0.0);
        let c = Z95 * var_mean.sqrt();
        let p = Z95 * (var_mean + sigma2).sqrt();
        Self {
            score,
            credible: (score - c, score + c),
            predictive: (score - p, score + p),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    pub rubrics: Vec<RubricPosterior>,
    /// Per rubric: its own α, β, σ with the shared hyperparameters (and the fit's
    /// divergences, which belong to the joint posterior).
    pub rubric_diagnostics: Vec<FitDiagnostics>,
    /// The whole fit: every parameter.
    pub diagnostics: FitDiagnostics,
}

#[derive(Debug, thiserror::Error)]
#[error("log density is not finite")]
pub struct NonFinite;

impl LogpError for NonFinite {
    fn is_recoverable(&self) -> bool {
        true
    }
}

struct Density<'a, T: Target>(&'a T);

impl<T: Target> HasDims for Density<'_, T> {
    fn dim_sizes(&self) -> HashMap<String, u64> {
        HashMap::from([("unconstrained_parameter".to_owned(), self.0.dim() as u64)])
    }
}

impl<T: Target> CpuLogpFunc for Density<'_, T> {
    type LogpError = NonFinite;
    type FlowParameters = ();
    type ExpandedVector = Vec<f64>;

    fn dim(&self) -> usize {
        self.0.dim()
    }

    fn logp(&mut self, x: &[f64], grad: &mut [f64]) -> Result<f64, NonFinite> {
        let lp = self.0.logp(x, grad);
        if lp.is_finite() && grad.iter().all(|g| g.is_finite()) {
            Ok(lp)
        } else {
            Err(NonFinite)
        }
    }

    fn expand_vector<R: nuts_rs::rand::Rng + ?Sized>(
        &mut self,
        _rng: &mut R,
        x: &[f64],
    ) -> Result<Vec<f64>, CpuMathError> {
        Ok(x.to_vec())
    }
}

/// One chain's kept draws (sampler coordinates) and its divergences after warm-up.
type ChainDraws = (Vec<Vec<f64>>, u64);

fn run_chain<T: Target>(
    model: &T,
    opts: &FitOptions,
    chain: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ChainDraws, String> {
    // A diagonal mass matrix suffices: pooled, the coefficients are integrated out
    // (`crate::linear`) and the sampler moves only in the scales; with one rubric, the shear
    // (`StackModel::natural`) has decorrelated the intercept from the other coefficients.
    let mut settings = DiagNutsSettings {
        num_tune: opts.warmup,
        num_draws: opts.draws,
        seed: opts.seed,
        ..DiagNutsSettings::default()
    };
    settings.adapt_options.step_size_settings.target_accept = opts.target_accept;
    let mut rng = Rng::seed_from_u64(opts.seed.wrapping_mul(0x9E37_79B9).wrapping_add(chain));
    let mut sampler = settings
        .new_chain(chain, CpuMath::new(Density(model)), &mut rng)
        .map_err(|e| format!("sampler settings: {e}"))?;
    let mut start = model.start();
    // Chains start from slightly different points so R̂ can see disagreement.
    for (i, x) in start.iter_mut().enumerate() {
        *x += 0.05 * ((chain as f64 + 1.0) * (i as f64 + 1.0)).sin();
    }
    sampler
        .set_position(&start)
        .map_err(|e| format!("sampler start: {e}"))?;
    let mut kept = Vec::with_capacity(opts.draws as usize);
    let mut divergences = 0;
    for i in 0..opts.warmup + opts.draws {
        let (draw, info) = sampler
            .draw()
            .map_err(|e| format!("sampling failed: {e}"))?;
        if !info.tuning {
            kept.push(draw.to_vec());
            divergences += u64::from(info.diverging);
        }
        if i % 100 == 0 {
            progress(i);
        }
    }
    Ok((kept, divergences))
}

/// Fits the model to the rubrics' sufficient statistics: `opts.chains` chains, each on its own
/// thread. `progress` receives the share of iterations done (0 to 1).
pub fn fit(
    stats: &[SufficientStats],
    opts: &FitOptions,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<Fit, String> {
    opts.check()?;
    // A rubric without anchors is allowed beside others (its posterior is the population's),
    // which cross-validation needs when a small rubric has nothing left in a round.
    if !stats.iter().any(|s| s.n >= 1.0) {
        return Err("no anchors to fit".into());
    }
    let model = LineModel::line(stats.to_vec(), opts.priors);
    let (chains, divergences) = sample(&model, opts, progress)?;
    Ok(summarise(&model, &chains, divergences, opts))
}

/// Per chain, its kept draws in the sampler's coordinates.
pub type Chains = Vec<Vec<Vec<f64>>>;

/// `opts.chains` chains of NUTS on `model`, each on its own thread: each chain's kept draws
/// (sampler coordinates) and the divergences after warm-up. `progress` receives the share of
/// iterations done (0 to 1).
pub fn sample<T: Target>(
    model: &T,
    opts: &FitOptions,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<(Chains, u64), String> {
    let total = (opts.warmup + opts.draws) * opts.chains;
    let done = std::sync::atomic::AtomicU64::new(0);
    let report = |_: u64| {
        let d = done.fetch_add(100, std::sync::atomic::Ordering::Relaxed) + 100;
        progress((d as f64 / total as f64).min(1.0));
    };
    let results: Vec<Result<ChainDraws, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..opts.chains)
            .map(|c| {
                let report = &report;
                s.spawn(move || run_chain(model, opts, c, report))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a sampler thread panicked".into()))
            })
            .collect()
    });
    let mut chains = Vec::new();
    let mut divergences = 0;
    for r in results {
        let (draws, div) = r?;
        chains.push(draws);
        divergences += div;
    }
    Ok((chains, divergences))
}

/// Rounds a fit that misses its gate (on any rubric: R̂ ≥ 1.01, bulk ESS < 400 or a divergent
/// transition) gets before it reports failure. Each round starts afresh with twice the warm-up
/// and draws of the last, at least 4 chains and, after divergences, half the distance of the
/// target acceptance to 1 (0.9 → 0.95 → 0.975). The budget: at most 4× the requested warm-up
/// and draws per chain, on at most max(4, requested) chains.
pub const EXTENSIONS: u32 = 2;

/// [`fit`], extended by up to [`EXTENSIONS`] rounds while it misses its gate: a fit that misses
/// R̂ by a hair (1.0124 on a real 550-anchor cell) is one longer run away from passing, and a
/// version that fails is not served. Progress is reported for the first round; an extension
/// round is one more run of the sampler, reported when it starts (`on_extension`).
pub fn fit_extending(
    stats: &[SufficientStats],
    opts: &FitOptions,
    progress: &(dyn Fn(f64) + Sync),
    on_extension: &dyn Fn(u32, &str),
) -> Result<Fit, String> {
    let mut fit = fit(stats, opts, progress)?;
    let mut o = *opts;
    for round in 1..=EXTENSIONS {
        let Some(why) = fit.gate_failure() else {
            break;
        };
        on_extension(round, &why);
        o = extended(&o, round, fit.diagnostics.divergences > 0);
        fit = fit_extended(stats, &o, round)?;
    }
    Ok(fit)
}

/// The sampler's settings for extension `round` of a fit with settings `o` that missed its
/// gate: at least 4 chains, twice the warm-up and the draws, a target acceptance halfway to 1
/// where it diverged, and a seed of its own.
pub fn extended(o: &FitOptions, round: u32, diverged: bool) -> FitOptions {
    FitOptions {
        chains: o.chains.max(4),
        warmup: (o.warmup.max(100) * 2).min(100_000),
        draws: (o.draws * 2).min(100_000),
        target_accept: if diverged {
            1.0 - (1.0 - o.target_accept) / 2.0
        } else {
            o.target_accept
        },
        seed: o.seed.wrapping_add(u64::from(round) * 0x9E37_79B9),
        ..*o
    }
}

fn fit_extended(stats: &[SufficientStats], opts: &FitOptions, round: u32) -> Result<Fit, String> {
    let mut fit = fit(stats, opts, &|_| {})?;
    for d in fit
        .rubric_diagnostics
        .iter_mut()
        .chain([&mut fit.diagnostics])
    {
        d.extensions = round;
    }
    Ok(fit)
}

impl Fit {
    /// Why some rubric's version would fail its gate, naming the first such rubric by index.
    pub fn gate_failure(&self) -> Option<String> {
        self.rubric_diagnostics
            .iter()
            .enumerate()
            .find_map(|(r, d)| d.failure().map(|why| format!("rubric {r}: {why}")))
    }
}

/// A quantity `f` of every kept draw, per chain: from the draw's rubric conditionals
/// (`draws`), the coefficients sampled from them (`sampled`) and the sampler's coordinates.
fn series<D, S>(
    chains: &[Vec<Vec<f64>>],
    draws: &[Vec<D>],
    sampled: &[Vec<S>],
    f: &dyn Fn(&D, &S, &[f64]) -> f64,
) -> Vec<Vec<f64>> {
    (0..chains.len())
        .map(|c| {
            (0..chains[c].len())
                .map(|i| f(&draws[c][i], &sampled[c][i], &chains[c][i]))
                .collect()
        })
        .collect()
}

/// The line's posterior per rubric, from the linear model's summary: α and β are its two
/// coefficients, and the canary the chance that β lies below `collapse_beta`.
fn summarise(model: &LineModel, chains: &Chains, divergences: u64, opts: &FitOptions) -> Fit {
    let summary = summary::summarise(model, chains, divergences, opts.seed);
    let rubrics = summary
        .rubrics
        .iter()
        .map(|c| {
            let below = c.below(1, 1.0, opts.collapse_beta);
            let (beta_lo, beta_hi) = c.interval(1);
            RubricPosterior {
                alpha_mean: c.mean[0],
                beta_mean: c.mean[1],
                sigma_mean: c.sigma_mean,
                alpha_var: c.cov[(0, 0)],
                beta_var: c.cov[(1, 1)],
                alpha_beta_cov: c.cov[(0, 1)],
                sigma2_mean: c.sigma2_mean,
                beta_lo,
                beta_hi,
                beta_collapse_probability: below,
                canary: below > opts.collapse_probability,
            }
        })
        .collect();
    Fit {
        rubrics,
        rubric_diagnostics: summary.rubric_diagnostics,
        diagnostics: summary.diagnostics,
    }
}

/// Per rubric, the worst of its own parameters' and the shared ones' (`hyper`) convergence;
/// and the whole fit's. Divergences belong to the joint posterior, so every figure carries them.
fn diagnose(
    own: &[Vec<diagnostics::Convergence>],
    hyper: &[diagnostics::Convergence],
    divergences: u64,
) -> (Vec<FitDiagnostics>, FitDiagnostics) {
    let worst = |conv: &mut dyn Iterator<Item = &diagnostics::Convergence>| {
        let mut d = FitDiagnostics {
            rhat_max: f64::NEG_INFINITY,
            ess_bulk_min: f64::INFINITY,
            ess_tail_min: f64::INFINITY,
            divergences,
            extensions: 0,
        };
        for c in conv {
            d.rhat_max = d.rhat_max.max(c.rhat);
            d.ess_bulk_min = d.ess_bulk_min.min(c.ess_bulk);
            d.ess_tail_min = d.ess_tail_min.min(c.ess_tail);
        }
        d
    };
    let rubrics = own
        .iter()
        .map(|o| worst(&mut o.iter().chain(hyper)))
        .collect();
    (rubrics, worst(&mut own.iter().flatten().chain(hyper)))
}

#[cfg(test)]
pub(super) mod tests;
