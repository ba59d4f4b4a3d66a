//! The hierarchical Bayesian line as a calibration method: its options, the model a version
//! stores per cell, and corrections with credible and predictive intervals.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{FitDiagnostics, FitOptions, Priors, RubricPosterior, SufficientStats};
use crate::corrector::{Cell, CellModel, Corrected, Corrector, MeanUncertainty, Run};
use crate::report::{DiagnosticsReport, MethodReport, PosteriorReport};

/// Sampler, priors and canary. The defaults are the paper's: 2 chains × (500 warm-up + 1,000
/// draws), target acceptance 0.9.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BayesOptions {
    /// NUTS chains, each on its own thread.
    #[schema(minimum = 1, maximum = 16)]
    pub chains: u64,
    /// Warm-up iterations per chain.
    #[schema(minimum = 0, maximum = 100000)]
    pub warmup: u64,
    /// Kept draws per chain.
    #[schema(minimum = 10, maximum = 100000)]
    pub draws: u64,
    /// NUTS target acceptance.
    #[schema(exclusive_minimum = 0.5, exclusive_maximum = 1)]
    pub target_accept: f64,
    pub priors: Priors,
    /// The canary fires when Pr(β < collapse_beta | anchors) > collapse_probability.
    pub collapse_beta: f64,
    #[schema(exclusive_minimum = 0, exclusive_maximum = 1)]
    pub collapse_probability: f64,
}

impl Default for BayesOptions {
    fn default() -> Self {
        let f = FitOptions::default();
        Self {
            chains: f.chains,
            warmup: f.warmup,
            draws: f.draws,
            target_accept: f.target_accept,
            priors: f.priors,
            collapse_beta: f.collapse_beta,
            collapse_probability: f.collapse_probability,
        }
    }
}

impl BayesOptions {
    /// The sampler's settings with `seed`.
    pub fn fit_options(&self, seed: u64) -> FitOptions {
        FitOptions {
            chains: self.chains,
            warmup: self.warmup,
            draws: self.draws,
            target_accept: self.target_accept,
            seed,
            priors: self.priors,
            collapse_beta: self.collapse_beta,
            collapse_probability: self.collapse_probability,
        }
    }
}

/// What a Bayesian version stores for its cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BayesModel {
    pub posterior: RubricPosterior,
    pub diagnostics: FitDiagnostics,
}

/// The hierarchical Bayesian linear corrector (NUTS).
pub struct Bayes;

fn corrected(p: &RubricPosterior, j: f64) -> Corrected {
    let c = p.correct(j);
    Corrected {
        credible: Some(c.credible),
        predictive: Some(c.predictive),
        ..Corrected::score(c.score)
    }
}

impl Corrector for Bayes {
    const LABEL: &'static str = "Bayesian linear";
    type Options = BayesOptions;
    type Fit = super::Fit;
    type Model = BayesModel;

    fn fit(
        options: &BayesOptions,
        cells: &[Cell],
        seed: u64,
        run: &Run,
    ) -> Result<super::Fit, String> {
        let stats: Vec<SufficientStats> = cells
            .iter()
            .map(|c| SufficientStats::from_pairs(c.pairs.iter().copied()))
            .collect();
        super::fit_extending(
            &stats,
            &options.fit_options(seed),
            &|p| run.report(p),
            &|round, why| {
                tracing::info!(round, why, "NUTS missed its gate: extending the sampler");
            },
        )
    }

    fn predict(fit: &super::Fit, r: usize, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        Ok(scores
            .iter()
            .map(|&j| corrected(&fit.rubrics[r], j))
            .collect())
    }

    fn model(
        fit: &super::Fit,
        r: usize,
        _: &Cell,
        _: &[Option<Corrected>],
        _: usize,
    ) -> Result<BayesModel, String> {
        Ok(BayesModel {
            posterior: fit.rubrics[r],
            diagnostics: fit.rubric_diagnostics[r],
        })
    }
}

impl CellModel for BayesModel {
    type Report = BayesReport;

    fn correct(&self, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        Ok(scores
            .iter()
            .map(|&j| corrected(&self.posterior, j))
            .collect())
    }

    fn failure(&self) -> Option<String> {
        self.diagnostics.failure()
    }

    fn report(&self) -> BayesReport {
        BayesReport {
            posterior: PosteriorReport::from(&self.posterior),
            diagnostics: DiagnosticsReport::from(&self.diagnostics),
        }
    }

    fn mean_uncertainty(&self) -> MeanUncertainty<'_> {
        MeanUncertainty::Line(&self.posterior)
    }
}

/// A bayes version's report: its answer's `posterior` and `diagnostics` fields.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct BayesReport {
    /// bayes versions: the line's posterior and the canary.
    pub posterior: PosteriorReport,
    /// bayes versions: the sampler's convergence.
    pub diagnostics: DiagnosticsReport,
}

impl MethodReport for BayesReport {
    fn posterior(&self) -> Option<&PosteriorReport> {
        Some(&self.posterior)
    }

    fn diagnostics(&self) -> Option<&DiagnosticsReport> {
        Some(&self.diagnostics)
    }

    fn headline(&self) -> Option<String> {
        Some(self.posterior.headline())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use crate::rng::Rng;
    use crate::rng::SeedableRng;

    use super::*;
    use crate::cv::{self, Folds, Scheme, Split};
    use crate::quality::Comparison;

    #[test]
    fn cross_validation_predicts_every_anchor_from_a_fit_that_did_not_see_it() {
        // y = 0.5 + 0.8·j + N(0, 0.3²): the best possible MAE is the noise's, 0.3·√(2/π) =
        // 0.239; with 400 held-out anchors its standard error is about 0.009, so ±0.03 is over
        // 3 standard errors. The raw judge is off by 0.5 − 0.2·j, about 0.1 on average in
        // absolute terms plus the noise, so it must do clearly worse.
        let mut rng = Rng::seed_from_u64(11);
        let cells: Vec<Cell> = (0..2)
            .map(|_| Cell {
                pairs: super::super::tests::simulate(&mut rng, 200, 0.5, 0.8, 0.3),
                scale: (1.0, 5.0),
            })
            .collect();
        let opts = BayesOptions {
            warmup: 300,
            draws: 500,
            ..BayesOptions::default()
        };
        let never = AtomicBool::new(false);
        let run = Run::new(&never, &|_| {});
        let validate = |scheme: Scheme| {
            let split = Split { scheme, seed: 0 };
            let folds = Folds::new(split, &[200, 200]);
            cv::cross_validate::<Bayes>(&opts, &cells, &folds, 0, &run)
                .unwrap()
                .0
        };
        let pred = validate(Scheme::Folds(5));
        assert!(pred.iter().flatten().all(Option::is_some));
        for (p, c) in pred.iter().zip(&cells) {
            let c = Comparison::of(Scheme::Folds(5), &cv::scores(p), &c.pairs, 1.0, 5.0).unwrap();
            let best = 0.3 * (2.0 / std::f64::consts::PI).sqrt();
            assert!((c.calibrated.mae - best).abs() < 0.03, "{c:?}");
            assert!(c.raw.mae > c.calibrated.mae + 0.03, "{c:?}");
            assert!(c.calibrated.mean_error.abs() < 0.05, "{c:?}");
        }
        // A holdout predicts only its fraction.
        let pred = validate(Scheme::Holdout(0.25));
        assert_eq!(pred[0].iter().filter(|p| p.is_some()).count(), 50);
    }
}
