//! judgecal: de-biases LLM-as-a-judge scores against trusted anchors.
//!
//! Dependencies point one way: `http` -> `service` -> (`store`, `domain`). `main.rs` only parses
//! the command line and calls [`cli::run`].

pub mod auth;
pub mod calibrate;
pub mod cli;
pub mod config;
pub mod domain;
pub mod error;
pub mod http;
pub mod jobs;
pub mod metrics;
pub mod plots;
pub mod service;
pub mod startup;
pub mod store;
pub mod study;
pub mod telemetry;

pub use error::{Error, Result};
