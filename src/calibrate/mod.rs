//! The statistics: correctors and how they are judged. Pure computation: no I/O, no HTTP, no
//! database; everything here is testable on its own.

pub mod bayes;
pub mod flow;
pub mod metrics;
pub mod quantile;
pub mod select;

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

/// One standard normal variate (Box–Muller), for the draws both correctors make from their
/// own seeded generators.
pub(crate) fn standard_normal(rng: &mut nuts_rs::rand::rngs::ChaCha8Rng) -> f64 {
    use nuts_rs::rand::RngExt;
    let u1: f64 = rng.random::<f64>().max(1e-300);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}
