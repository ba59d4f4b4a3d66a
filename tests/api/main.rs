//! The integration tests: one binary with a module per feature, so the suite links libtorch
//! once. They drive the application in-process (`tower::ServiceExt::oneshot`) and as real
//! `judgecal` processes, on the embedded SQLite and on the Postgres at
//! JUDGECAL_TEST_POSTGRES_URL.

#[macro_use]
#[allow(dead_code)] // Each helper is used by some modules, not all.
mod common;

mod anchors;
mod calibration;
mod cli;
mod comparisons;
mod hostile;
mod http;
mod metamorphic;
mod pairwise_panels;
mod pairwise_versions;
mod preferences;
mod ratings;
mod replicas;
mod safety;
mod webhooks;
