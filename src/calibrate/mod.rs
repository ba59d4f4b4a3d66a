//! The statistics: correctors and how they are judged. Pure computation: no I/O, no HTTP, no
//! database; everything here is testable on its own.

pub mod bayes;
pub mod metrics;
