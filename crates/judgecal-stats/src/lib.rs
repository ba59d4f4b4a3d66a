//! The statistics: correctors and how they are judged. Pure computation: no I/O, no HTTP, no
//! database; everything here is testable on its own.
//!
//! - `corrector`: what a calibration method is; the registry below lists the methods and
//!   `method` says what it generates.
//! - One module per method: `identity`, `quantile`, `bayes`, `flow`, `isotonic`.
//! - `cv`: the one cross-validation routine; `train`: what a job of one method computes;
//!   `select`: how `auto` chooses among them.
//! - `conformal`: every version's predictive intervals from held-out residuals, per bin of the
//!   judge score; `drift`: the anytime-valid alarm on new anchors' misses of them.
//! - `runlevel`: a run's de-biased mean and the difference of runs, from a version's model;
//!   `error`: what can go wrong, by kind.
//! - `quality`: the three questions (mean error, MAE and Pearson, KL and W1); `stats`: shared
//!   numerical helpers.

pub mod agreement;
pub mod bayes;
pub mod bridge;
pub mod conformal;
pub mod corrector;
pub mod covariates;
pub mod cv;
pub mod drift;
pub mod error;
pub mod flow;
pub mod identity;
pub mod isotonic;
pub mod linear;
pub mod method;
pub mod pairwise;
pub mod panel;
pub mod quality;
pub mod quantile;
pub mod repeats;
pub mod report;
pub mod rng;
pub mod runlevel;
pub mod select;
pub mod stats;
pub mod train;
pub mod units;
pub mod warning;

pub use corrector::{Cell, CellModel, Corrected, Corrector, MeanUncertainty, Run};
pub use report::MethodReport;
// The registry: every calibration method, once. A line names the method (its variant and its
// serde name) and the type implementing `Corrector`; see `method` for what it generates.
method::registry! {
    Identity identity => identity::Identity,
    QuantileMap quantile_map => quantile::QuantileMapping,
    Bayes bayes => bayes::Bayes,
    Flow flow => flow::Flow,
    Isotonic isotonic => isotonic::Isotonic,
}

/// Serde for figures that may be NaN or infinite (an R̂ of a constant chain): JSON has no such
/// numbers, so they are written as `null` and read back as NaN.
pub mod nullable_f64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        if x.is_finite() {
            s.serialize_f64(*x)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}
