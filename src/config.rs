//! Layered settings: the built-in `config/default.toml`, then `<dir>/default.toml`, then
//! `<dir>/$JUDGECAL_ENV.toml` (required when JUDGECAL_ENV is set), then environment variables
//! `JUDGECAL__SECTION__KEY`. Validated once at start; every error names the key to fix.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use config::{Config, Environment, File, FileFormat};
use serde::Deserialize;

const BUILT_IN_DEFAULTS: &str = include_str!("../config/default.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub server: ServerSettings,
    pub database: DatabaseSettings,
    pub auth: AuthSettings,
    pub limits: LimitSettings,
    pub jobs: JobSettings,
    pub calibrators: CalibratorSettings,
    pub webhooks: WebhookSettings,
    pub otel: OtelSettings,
    pub log: LogSettings,
}

/// Where evaluation events are exported over OTLP/HTTP (config/default.toml says what each
/// key does).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtelSettings {
    pub endpoint: String,
    pub timeout_millis: u64,
    pub queue: usize,
    pub export_batch: usize,
    pub delay_millis: u64,
    pub events_per_span: usize,
}

/// Where alarms are posted besides `/metrics` (config/default.toml says what each key does).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    pub url: String,
    pub secret: String,
    pub events: String,
    pub public_url: String,
    pub timeout_millis: u64,
    pub max_attempts: i64,
    pub backoff_millis: u64,
    pub max_backoff_millis: u64,
    pub poll_millis: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    pub bind: String,
    pub request_timeout_secs: u64,
    pub max_body_bytes: usize,
    pub max_upload_bytes: usize,
    pub max_concurrent_requests: usize,
    pub max_concurrent_per_key: usize,
    pub max_connections: usize,
    pub header_read_timeout_secs: u64,
    pub shutdown_timeout_secs: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSettings {
    pub url: String,
    pub max_connections: u32,
    pub acquire_timeout_millis: u64,
    pub migrate_on_start: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    pub disabled: bool,
    pub key_cache_secs: u64,
    pub protect_metrics: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    pub max_batch_anchors: usize,
    pub max_page_size: usize,
    pub max_correct_batch: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSettings {
    pub enabled: bool,
    pub workers: usize,
    pub lease_secs: u64,
    pub poll_millis: u64,
    pub max_attempts: i64,
    pub min_anchors: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibratorSettings {
    pub refresh_millis: u64,
    /// The drift alarm's chance of ever firing on a healthy cell, per activation.
    pub drift_delta: f64,
    /// A declared bound on how alike one unit's anchors are in missing (their intra-unit
    /// correlation, 0 to 1): where set, the drift alarm bets with at most this correlation,
    /// so a large batch counts as its anchors from its first upload. Unset (the default): it
    /// is estimated from the units seen.
    #[serde(default)]
    pub drift_max_rho: Option<f64>,
    /// The fleet the fleet-wide drift alert is sized for: at most this many cells watched at
    /// once (K). Each cell's fleet e-process tests against its bound at
    /// `fleet_delta`/(2K) and alerts at 2K/`fleet_delta`.
    pub fleet_cells: usize,
    /// The fleet-wide drift alert's chance of any false alert across `fleet_cells` cells, the
    /// bounds' own failures included.
    pub fleet_delta: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    pub format: LogFormat,
    pub level: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, thiserror::Error)]
#[error("configuration: {0}")]
pub struct ConfigError(String);

impl Settings {
    /// Loads the layers from `dir` (normally `config/`) and the process environment.
    pub fn load(dir: &Path) -> Result<Self, ConfigError> {
        let env_name = std::env::var("JUDGECAL_ENV").ok().filter(|s| !s.is_empty());
        let mut builder = Config::builder()
            .add_source(File::from_str(BUILT_IN_DEFAULTS, FileFormat::Toml))
            .add_source(File::from(dir.join("default.toml")).required(false));
        if let Some(env_name) = &env_name {
            let path = dir.join(format!("{env_name}.toml"));
            if !path.exists() {
                return Err(ConfigError(format!(
                    "JUDGECAL_ENV={env_name} but {} does not exist",
                    path.display()
                )));
            }
            builder = builder.add_source(File::from(path));
        }
        let settings: Settings = builder
            .add_source(
                Environment::with_prefix("JUDGECAL")
                    .prefix_separator("__")
                    .separator("__")
                    .try_parsing(true),
            )
            .build()
            .and_then(Config::try_deserialize)
            .map_err(|e| ConfigError(e.to_string()))?;
        settings.validate()?;
        Ok(settings)
    }

    /// The checks serde cannot express; each message names its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |key: &str, why: String| Err(ConfigError(format!("{key}: {why}")));
        if let Err(e) = self.server.bind.parse::<SocketAddr>() {
            return fail(
                "server.bind",
                format!("{:?} is not an address:port ({e})", self.server.bind),
            );
        }
        let url = &self.database.url;
        if !(url.starts_with("postgres://")
            || url.starts_with("postgresql://")
            || url.starts_with("sqlite:"))
        {
            return fail(
                "database.url",
                format!("{url:?} must start with postgres:// or sqlite:"),
            );
        }
        let positive = [
            (
                "server.request_timeout_secs",
                self.server.request_timeout_secs as usize,
            ),
            ("server.max_body_bytes", self.server.max_body_bytes),
            ("server.max_upload_bytes", self.server.max_upload_bytes),
            (
                "server.max_concurrent_requests",
                self.server.max_concurrent_requests,
            ),
            (
                "server.max_concurrent_per_key",
                self.server.max_concurrent_per_key,
            ),
            ("server.max_connections", self.server.max_connections),
            (
                "server.header_read_timeout_secs",
                self.server.header_read_timeout_secs as usize,
            ),
            (
                "database.acquire_timeout_millis",
                self.database.acquire_timeout_millis as usize,
            ),
            (
                "database.max_connections",
                self.database.max_connections as usize,
            ),
            ("limits.max_batch_anchors", self.limits.max_batch_anchors),
            ("limits.max_page_size", self.limits.max_page_size),
            ("limits.max_correct_batch", self.limits.max_correct_batch),
            ("jobs.workers", self.jobs.workers),
            ("jobs.lease_secs", self.jobs.lease_secs as usize),
            ("jobs.poll_millis", self.jobs.poll_millis as usize),
            ("jobs.max_attempts", self.jobs.max_attempts.max(0) as usize),
            (
                "calibrators.refresh_millis",
                self.calibrators.refresh_millis as usize,
            ),
            ("calibrators.fleet_cells", self.calibrators.fleet_cells),
            (
                "webhooks.timeout_millis",
                self.webhooks.timeout_millis as usize,
            ),
            (
                "webhooks.max_attempts",
                self.webhooks.max_attempts.max(0) as usize,
            ),
            (
                "webhooks.backoff_millis",
                self.webhooks.backoff_millis as usize,
            ),
            (
                "webhooks.max_backoff_millis",
                self.webhooks.max_backoff_millis as usize,
            ),
            ("webhooks.poll_millis", self.webhooks.poll_millis as usize),
            ("otel.timeout_millis", self.otel.timeout_millis as usize),
            ("otel.queue", self.otel.queue),
            ("otel.export_batch", self.otel.export_batch),
            ("otel.delay_millis", self.otel.delay_millis as usize),
            ("otel.events_per_span", self.otel.events_per_span),
        ];
        for (key, value) in positive {
            if value == 0 {
                return fail(key, "must be greater than 0".into());
            }
        }
        for (key, delta) in [
            ("calibrators.drift_delta", self.calibrators.drift_delta),
            ("calibrators.fleet_delta", self.calibrators.fleet_delta),
        ] {
            if !(delta > 0.0 && delta < 1.0) {
                return fail(key, format!("must lie in (0, 1); got {delta}"));
            }
        }
        if let Some(rho) = self.calibrators.drift_max_rho
            && !(0.0..1.0).contains(&rho)
        {
            return fail(
                "calibrators.drift_max_rho",
                format!("must lie in [0, 1); got {rho}"),
            );
        }
        if self.jobs.min_anchors < 2 {
            return fail(
                "jobs.min_anchors",
                format!("must be at least 2; got {}", self.jobs.min_anchors),
            );
        }
        if let Err((key, why)) = crate::webhooks::check_settings(
            &self.webhooks.url,
            &self.webhooks.secret,
            &self.webhooks.events,
            &self.webhooks.public_url,
        ) {
            return fail(key, why);
        }
        if !self.otel.endpoint.is_empty()
            && let Err(e) = crate::webhooks::check_url(&self.otel.endpoint)
        {
            return fail("otel.endpoint", e);
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            return fail(
                "log.level",
                format!("{:?} is not a filter ({e})", self.log.level),
            );
        }
        Ok(())
    }

    pub fn bind_addr(&self) -> SocketAddr {
        self.server.bind.parse().expect("validated at load")
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.server.request_timeout_secs)
    }

    pub fn acquire_timeout(&self) -> Duration {
        Duration::from_millis(self.database.acquire_timeout_millis)
    }

    /// Settings for tests and tools: the built-in defaults with the given database.
    pub fn defaults_with_database(url: &str) -> Self {
        let mut settings: Settings = Config::builder()
            .add_source(File::from_str(BUILT_IN_DEFAULTS, FileFormat::Toml))
            .build()
            .and_then(Config::try_deserialize)
            .expect("built-in defaults parse");
        settings.database.url = url.to_owned();
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_defaults_are_valid() {
        let s = Settings::defaults_with_database("sqlite://data/judgecal.db");
        s.validate().unwrap();
        assert!(!s.auth.disabled);
    }

    #[test]
    fn bad_values_name_their_key() {
        let mut s = Settings::defaults_with_database("mysql://x");
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("database.url")
        );
        s.database.url = "sqlite://x.db".into();
        s.server.bind = "localhost".into();
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("server.bind")
        );
        s.server.bind = "127.0.0.1:0".into();
        s.limits.max_batch_anchors = 0;
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("limits.max_batch_anchors")
        );
        s.limits.max_batch_anchors = 10;
        s.calibrators.drift_max_rho = Some(1.5);
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("calibrators.drift_max_rho")
        );
        s.calibrators.drift_max_rho = Some(0.0);
        s.validate().unwrap();
    }

    #[test]
    fn files_layer_and_unknown_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("default.toml"),
            "[server]\nbind = \"127.0.0.1:9\"\n",
        )
        .unwrap();
        let s = Settings::load(dir.path()).unwrap();
        assert_eq!(s.server.bind, "127.0.0.1:9");
        assert_eq!(s.limits.max_batch_anchors, 100_000);
        std::fs::write(dir.path().join("default.toml"), "[server]\nbnd = \"x\"\n").unwrap();
        let err = Settings::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("bnd"), "{err}");
    }
}
