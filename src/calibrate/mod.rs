//! The statistics: correctors and how they are judged. Pure computation: no I/O, no HTTP, no
//! database; everything here is testable on its own.
//!
//! - `corrector`: what a calibration method is; `method`: the registry of methods.
//! - One module per method: `identity`, `quantile`, `bayes`, `flow`.
//! - `cv`: the one cross-validation routine; `train`: what a job of one method computes;
//!   `select`: how `auto` chooses among them.
//! - `quality`: the three questions (mean error, MAE and Pearson, KL and W1); `stats`: shared
//!   numerical helpers.

pub mod bayes;
pub mod corrector;
pub mod cv;
pub mod flow;
pub mod identity;
pub mod method;
pub mod quality;
pub mod quantile;
pub mod select;
pub mod stats;
pub mod train;

pub use corrector::{Cell, CellModel, Corrected, Corrector, Run};
pub use method::{Candidates, Method, MethodOptions, Model};

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
