//! The crate's random numbers: one seeded generator type and the traits that draw from it.
//! Every resample, bootstrap, simulation and study takes its generator from here, not from the
//! sampler's re-export (`nuts_rs::rand`, whose version moves with nuts-rs), so the choice of
//! generator is made once. ChaCha8 is fast, reproducible across platforms from a `u64` seed,
//! and the one nuts-rs itself draws with.

pub use rand::seq::SliceRandom;
pub use rand::{RngExt, SeedableRng};

/// The generator behind every seeded draw in judgecal.
pub type Rng = rand::rngs::ChaCha8Rng;
