//! The posterior summary of any case of the multi-input linear model (`crate::linear`): per
//! rubric, the coefficients' mean and covariance over the kept draws, σ's moments, one
//! coefficient vector drawn per kept draw (for quantiles) and the convergence of every
//! coefficient and σ. The line (`bayes`) reads α and β and its canary from it; a panel its
//! members' weights.

use nalgebra::allocator::Allocator;
use nalgebra::{DefaultAllocator, OMatrix, OVector};

use super::{Chains, FitDiagnostics, diagnose, diagnostics};
use crate::linear::{StackDraw, StackModel, Width};
use crate::rng::{Rng, SeedableRng};
use crate::stats::{self, standard_normal};

/// One rubric's coefficients over every kept draw.
#[derive(Debug, Clone, PartialEq)]
pub struct CoefficientPosterior<D: Width>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    /// Posterior mean and covariance of the coefficients (intercept first): the conditionals'
    /// moments, Rao–Blackwellised, which is exact and less noisy than the drawn vectors'.
    pub mean: OVector<f64, D>,
    pub cov: OMatrix<f64, D, D>,
    pub sigma_mean: f64,
    /// E[σ²], the noise part of a new item's predictive variance.
    pub sigma2_mean: f64,
    /// Each kept draw's conditional of the coefficients, chains one after the other.
    pub draws: Vec<StackDraw<D>>,
    /// One coefficient vector drawn from each of those conditionals, in the same order.
    pub sampled: Vec<OVector<f64, D>>,
}

impl<D: Width> CoefficientPosterior<D>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    /// Pr(coefficient `i` < `floor`), averaged over the draws' normal conditionals (a
    /// conditional with no spread counts its mean).
    pub fn below(&self, i: usize, scale: f64, floor: f64) -> f64 {
        stats::mean_of(self.draws.iter().map(|d| {
            let sd = d.cov[(i, i)].max(0.0).sqrt() * scale;
            let m = d.mean[i] * scale;
            if sd > 0.0 {
                stats::normal_cdf((floor - m) / sd)
            } else {
                f64::from(u8::from(m < floor))
            }
        }))
    }

    /// The 95% central interval of coefficient `i` over the drawn vectors.
    pub fn interval(&self, i: usize) -> (f64, f64) {
        let v: Vec<f64> = self.sampled.iter().map(|s| s[i]).collect();
        (stats::quantile(&v, 0.025), stats::quantile(&v, 0.975))
    }
}

/// Every rubric's coefficients and the sampler's diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary<D: Width>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    pub rubrics: Vec<CoefficientPosterior<D>>,
    /// Per rubric: its coefficients and σ with the shared scales τ.
    pub rubric_diagnostics: Vec<FitDiagnostics>,
    pub diagnostics: FitDiagnostics,
}

/// A quantity of one draw: from the rubrics' conditionals, the coefficients drawn from them
/// and the sampler's coordinates.
type DrawFn<'a, D> = dyn Fn(&Vec<StackDraw<D>>, &Vec<OVector<f64, D>>, &[f64]) -> f64 + 'a;

/// The coefficients' posterior mean and covariance over draws of their conditional laws, by
/// the law of total covariance: the conditionals' mean covariance plus the means' spread.
fn total_moments<D: Width>(all: &[StackDraw<D>]) -> (OVector<f64, D>, OMatrix<f64, D, D>)
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    let n = all.len() as f64;
    let (rows, _) = all[0].cov.shape_generic();
    let mean = all.iter().fold(
        OVector::<f64, D>::zeros_generic(rows, nalgebra::U1),
        |acc, d| acc + &d.mean,
    ) / n;
    let mut cov = OMatrix::<f64, D, D>::zeros_generic(rows, rows);
    for d in all {
        let e = &d.mean - &mean;
        cov += &d.cov / n;
        cov.ger(1.0 / (n - 1.0).max(1.0), &e, &e, 1.0);
    }
    (mean, cov)
}

/// Summarises `model`'s kept draws (`chains`, in sampler coordinates), drawing one coefficient
/// vector per draw with a generator seeded from `seed`.
pub fn summarise<D: Width>(
    model: &StackModel<D>,
    chains: &Chains,
    divergences: u64,
    seed: u64,
) -> Summary<D>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    // draws[chain][draw][rubric]
    let draws: Vec<Vec<Vec<StackDraw<D>>>> = chains
        .iter()
        .map(|c| c.iter().map(|x| model.params(x)).collect())
        .collect();
    let mut rng = Rng::seed_from_u64(seed ^ 0x5EED_CAFE);
    let sampled: Vec<Vec<Vec<OVector<f64, D>>>> = draws
        .iter()
        .map(|chain| {
            chain
                .iter()
                .map(|rubrics| {
                    rubrics
                        .iter()
                        .map(|d| {
                            let (rows, _) = d.cov.shape_generic();
                            let z =
                                OVector::<f64, D>::from_fn_generic(rows, nalgebra::U1, |_, _| {
                                    standard_normal(&mut rng)
                                });
                            let l = crate::stats::cholesky(d.cov.clone()).map_or_else(
                                || OMatrix::<f64, D, D>::zeros_generic(rows, rows),
                                |c| c.l(),
                            );
                            &d.mean + l * z
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let series = |f: &DrawFn<'_, D>| super::series(chains, &draws, &sampled, f);
    let p = model.coefficients();
    let mut own_conv = Vec::with_capacity(model.rubrics());
    let mut rubrics = Vec::with_capacity(model.rubrics());
    for k in 0..model.rubrics() {
        let mut conv: Vec<diagnostics::Convergence> = (0..p)
            .map(|i| diagnostics::convergence(&series(&|_, v, _| v[k][i])))
            .collect();
        conv.push(diagnostics::convergence(&series(&|d, _, _| d[k].sigma)));
        own_conv.push(conv);
        let all: Vec<StackDraw<D>> = draws.iter().flatten().map(|d| d[k].clone()).collect();
        let (mean, cov) = total_moments(&all);
        rubrics.push(CoefficientPosterior {
            sigma_mean: stats::mean_of(all.iter().map(|d| d.sigma)),
            sigma2_mean: stats::mean_of(all.iter().map(|d| d.sigma * d.sigma)),
            sampled: sampled.iter().flatten().map(|v| v[k].clone()).collect(),
            draws: all,
            mean,
            cov,
        });
    }
    // The population scales τ when pooled (none for one rubric); μ is integrated out with the
    // rubric effects, whose draws carry its uncertainty.
    let hyper: Vec<diagnostics::Convergence> = (0..model.hyperparameters(&chains[0][0]).len())
        .map(|i| diagnostics::convergence(&series(&|_, _, x| model.hyperparameters(x)[i])))
        .collect();
    let (rubric_diagnostics, diagnostics) = diagnose(&own_conv, &hyper, divergences);
    Summary {
        rubrics,
        rubric_diagnostics,
        diagnostics,
    }
}
