//! judgecal: de-biases LLM-as-a-judge scores against trusted anchors.
//!
//! Dependencies point one way: `http` -> `service` -> (`store`, `domain`) -> `judgecal_stats`
//! (the statistics, a package of its own). `main.rs` only parses the command line and calls
//! [`cli::run`]. The research harnesses are the `judgecal-study` package, which uses this one.

pub mod auth;
pub mod cli;
pub mod config;
pub mod domain;
pub mod error;
pub mod evaluate;
mod family;
pub mod http;
pub mod jobs;
pub mod metrics;
pub mod otel;
pub mod plots;
pub mod progress;
pub mod serve;
pub mod service;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod webhooks;

pub use error::{Error, Result};
