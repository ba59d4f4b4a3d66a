//! The service layer: what the HTTP handlers and the CLI call. It validates, talks to the
//! store, and keeps the metrics in step. No HTTP types here.

pub mod agreement;
mod anchors;
mod bare_scores;
pub mod bridges;
mod corrections;
pub mod coverage;
mod families;
mod jobs;
mod keys;
mod layered;
pub mod pairwise;
mod panel_members;
pub mod panels;
mod rank_sessions;
mod repeat_noise;
mod report;
mod run_inputs;
mod runlevel;
mod training;
mod versions;
mod webhooks;

pub use crate::domain::runlevel::{CompareRequest, EstimateRequest, RankRequest};
pub use corrections::{CorrectedItem, Correction};
pub use coverage::{COVERAGE_WINDOW, PENDING_CHECK_GRACE_MS};
pub use families::{Operations, Pairwise, Panels, Runs, Scores, Versions, Webhooks};
pub use jobs::Trained;
pub use keys::{AuthFailure, KeyInfo};
pub use pairwise::answer::{
    CandidateFigures, Control, LabelPlan, RatingsAnswer, RatingsCalibration, SystemRating,
    WinRateAnswer,
};
pub use repeat_noise::DesignAdvice;
pub use run_inputs::Served;
pub use training::Progress;
pub use versions::{Loaded, Mismatch};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::auth::KeyCache;
use crate::config::{JobSettings, LimitSettings, Settings, WebhookSettings};
use crate::domain::Anchor;
use crate::metrics::Metrics;
use crate::store::{CellIngest, Store};

/// The HANNA slice bundled for the demo (MIT; see demo/hanna/README.md).
pub const DEMO_ANCHORS_CSV: &str = include_str!("../../demo/hanna/anchors.csv");

/// What an upload did, in total and per cell.
#[derive(Debug, Clone, PartialEq)]
pub struct IngestReport {
    pub inserted: usize,
    pub unchanged: usize,
    pub replaced: usize,
    pub cells: Vec<CellIngest>,
}

/// A page of anchors and the cursor of the next one.
#[derive(Debug, Clone, PartialEq)]
pub struct AnchorPage {
    pub anchors: Vec<Anchor>,
    pub next_cursor: Option<String>,
}

pub struct Service {
    store: Store,
    metrics: Metrics,
    limits: LimitSettings,
    jobs: JobSettings,
    auth_disabled: bool,
    keys: KeyCache,
    calibrators: versions::Cache,
    scales: versions::Scales,
    panel_memo: panel_members::Memo,
    /// Wakes this process's idle workers when a job is queued here.
    job_queued: Notify,
    /// Tells the background tasks to stop (true) at shutdown.
    stop: watch::Sender<bool>,
    /// The finished jobs already counted in the training metrics.
    jobs_counted: Mutex<jobs::JobWatermark>,
    /// The drift alarm's false-alarm probability (`calibrators.drift_delta`).
    drift_delta: f64,
    /// The declared bound on anchors' intra-unit correlation (`calibrators.drift_max_rho`).
    drift_max_rho: Option<f64>,
    /// The fleet alert's size and rate (`calibrators.fleet_cells`, `fleet_delta`).
    fleet: coverage::FleetAlert,
    /// Each version's miss bounds, its alarm's and at the fleet alert's level, by calibrator
    /// id (a bound at a small level takes many draws: computed once per version and process).
    bounds: Mutex<std::collections::HashMap<String, coverage::Bounds>>,
    /// Each active version's drift alarms as last replayed, by calibrator id.
    replays: Mutex<std::collections::HashMap<String, coverage::Replayed>>,
    /// Where alarms are posted, and how.
    webhook_settings: WebhookSettings,
    /// The alarms this process has queued for the webhooks (by id), so a standing alarm costs
    /// no store write at each refresh.
    raised: Mutex<std::collections::HashSet<String>>,
    /// Wakes this process's webhook sender when it queues a delivery.
    delivery_queued: Notify,
    /// The OTLP exporter of evaluation events, where `otel.endpoint` is set (the application
    /// starts it; tools that build a service have none).
    evaluations: std::sync::OnceLock<crate::otel::Evaluations>,
}

impl Service {
    pub fn new(store: Store, metrics: Metrics, settings: &Settings) -> Arc<Self> {
        Arc::new(Self {
            store,
            metrics,
            limits: settings.limits.clone(),
            jobs: settings.jobs.clone(),
            auth_disabled: settings.auth.disabled,
            keys: KeyCache::new(Duration::from_secs(settings.auth.key_cache_secs)),
            calibrators: versions::Cache::default(),
            scales: versions::Scales::default(),
            panel_memo: panel_members::Memo::default(),
            job_queued: Notify::new(),
            stop: watch::channel(false).0,
            jobs_counted: Mutex::new(jobs::JobWatermark::default()),
            drift_delta: settings.calibrators.drift_delta,
            drift_max_rho: settings.calibrators.drift_max_rho,
            fleet: coverage::FleetAlert {
                cells: settings.calibrators.fleet_cells,
                delta: settings.calibrators.fleet_delta,
            },
            bounds: Mutex::default(),
            replays: Mutex::default(),
            webhook_settings: settings.webhooks.clone(),
            raised: Mutex::default(),
            delivery_queued: Notify::new(),
            evaluations: std::sync::OnceLock::new(),
        })
    }

    pub fn job_settings(&self) -> &JobSettings {
        &self.jobs
    }

    /// Resolves when a job is queued through this process (or at once if one was queued
    /// since the last wait).
    pub async fn job_queued(&self) {
        self.job_queued.notified().await;
    }

    /// Resolves when a webhook delivery is queued through this process.
    pub async fn delivery_queued(&self) {
        self.delivery_queued.notified().await;
    }

    /// Sends every later correction's evaluation events through `e` (once, at start).
    pub fn export_evaluations(&self, e: crate::otel::Evaluations) {
        let _ = self.evaluations.set(e);
    }

    /// The exporter of evaluation events, where one was started.
    pub fn evaluations(&self) -> Option<&crate::otel::Evaluations> {
        self.evaluations.get().filter(|e| e.enabled())
    }

    pub fn webhook_settings(&self) -> &WebhookSettings {
        &self.webhook_settings
    }

    /// A receiver that turns true when the background tasks must stop.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Asks the background tasks (workers, cache refresh) to stop.
    pub fn stop_background(&self) {
        self.stop.send_replace(true);
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}
