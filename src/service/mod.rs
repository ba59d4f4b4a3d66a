//! The service layer: what the HTTP handlers and the CLI call. It validates, talks to the
//! store, and keeps the metrics in step. No HTTP types here.

pub mod agreement;
pub mod bridges;
mod comparisons;
mod corrections;
pub mod coverage;
mod jobs;
mod keys;
mod layered;
pub mod pairwise_panels;
mod pairwise_versions;
mod panel_members;
pub mod panels;
mod preference_drift;
mod preferences;
mod rank_sessions;
mod ratings;
mod ratings_checks;
mod repeat_noise;
mod report;
mod runlevel;
mod training;
mod versions;

pub use crate::domain::runlevel::{CompareRequest, EstimateRequest, RankRequest};
pub use corrections::{CorrectedItem, Correction};
pub use coverage::{COVERAGE_WINDOW, PENDING_CHECK_GRACE_MS};
pub use jobs::Trained;
pub use keys::{AuthFailure, KeyInfo};
pub use ratings::{CandidateFigures, Control, RatingsAnswer, SystemRating, WinRateAnswer};
pub use repeat_noise::DesignAdvice;
pub use runlevel::Served;
pub use training::Progress;
pub use versions::{Loaded, Mismatch};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::auth::{self, KeyCache};
use crate::config::{JobSettings, LimitSettings, Settings};
use crate::domain::anchors::{self, RawAnchor};
use crate::domain::training::TrainingRequest;
use crate::domain::{
    Anchor, CellKey, CellSummary, JudgeName, JudgeVersion, Problem, Rubric, RubricName, Scale,
    now_ms,
};
use crate::error::{Error, Result, blocking};
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

    /// Checks and stores an upload (see `domain::anchors` for the checks and `Store::ingest`
    /// for what counts as unchanged or conflicting).
    pub async fn ingest(&self, rows: Vec<RawAnchor>, replace: bool) -> Result<IngestReport> {
        let scales = self.store.rubric_scales().await?;
        // A large batch takes a while to check: off the async runtime.
        let (checked, max) = (scales.clone(), self.limits.max_batch_anchors);
        let cells = blocking("checking an anchor batch", move || {
            anchors::validate(rows, &checked, max)
        })
        .await?
        .map_err(|p| Error::invalid("the anchor batch was refused", p))?;
        let mut judges: Vec<&JudgeName> = cells.iter().map(|c| &c.key.judge).collect();
        judges.sort();
        judges.dedup();
        for judge in judges {
            if self.store.panel(judge).await?.is_some() {
                let row = cells
                    .iter()
                    .find(|c| &c.key.judge == judge)
                    .and_then(|c| c.rows.first().copied());
                return Err(Error::conflict(
                    format!("the anchor batch was refused: {judge} is a panel"),
                    vec![Problem::at(
                        row,
                        "judge",
                        format!(
                            "{judge} is a panel, which holds no anchors of its own: upload each member's scores under the member's name; training the panel joins them on item_id"
                        ),
                    )],
                ));
            }
        }
        // A judge score far outside the range its judge version's calibration was trained on
        // is on another scale, or a typo: refused by row, as /v1/correct refuses it.
        let mut far = Vec::new();
        for c in &cells {
            if let Some(own) = self.own_calibration(&c.key, c.judge_version.as_ref()) {
                let scores: Vec<f64> = c.anchors.iter().map(|a| a.judge_score).collect();
                far.extend(
                    own.version
                        .far_scores(&scores, "judge_score")
                        .into_iter()
                        .map(|p| Problem {
                            row: p.row.and_then(|r| c.rows.get(r - 1).copied()),
                            ..p
                        }),
                );
            }
        }
        if !far.is_empty() {
            return Err(Error::invalid("the anchor batch was refused", far));
        }
        let mut outcomes = self.store.ingest(&cells, &scales, replace).await?;
        self.panel_memo.clear();
        for o in &outcomes {
            self.metrics.set_cell_anchors(&o.key, o.anchor_count);
        }
        self.check_coverage(&mut outcomes).await;
        Ok(IngestReport {
            inserted: outcomes.iter().map(|o| o.inserted).sum(),
            unchanged: outcomes.iter().map(|o| o.unchanged).sum(),
            replaced: outcomes.iter().map(|o| o.replaced).sum(),
            cells: outcomes,
        })
    }

    pub async fn put_rubric(
        &self,
        name: &str,
        min: f64,
        max: f64,
        description: &str,
    ) -> Result<Rubric> {
        let name = RubricName::parse(name).map_err(|e| {
            Error::invalid(
                "the rubric was refused",
                vec![Problem::at(None, "rubric", e)],
            )
        })?;
        let scale =
            Scale::new(min, max).map_err(|p| Error::invalid("the rubric was refused", p))?;
        if description.chars().count() > 2000 {
            return Err(Error::invalid(
                "the rubric was refused",
                vec![Problem::at(
                    None,
                    "description",
                    "longer than 2000 characters",
                )],
            ));
        }
        let rubric = self.store.put_rubric(&name, scale, description).await?;
        self.scales.put(name, scale);
        Ok(rubric)
    }

    pub async fn rubrics(&self) -> Result<Vec<Rubric>> {
        self.store.rubrics().await
    }

    pub async fn cells(&self) -> Result<Vec<CellSummary>> {
        self.store.cells().await
    }

    pub async fn anchors_page(
        &self,
        key: &CellKey,
        only: Option<&JudgeVersion>,
        cursor: Option<&str>,
        limit: Option<usize>,
    ) -> Result<AnchorPage> {
        let max = self.limits.max_page_size;
        let limit = limit.unwrap_or(max.min(100));
        if limit == 0 || limit > max {
            return Err(Error::rejected(
                "the page request was refused",
                vec![Problem::at(
                    None,
                    "limit",
                    format!("must be between 1 and {max}; got {limit}"),
                )],
            ));
        }
        let after = cursor
            .map(|c| {
                decode_cursor(c).ok_or_else(|| {
                    Error::rejected(
                        "the page request was refused",
                        vec![Problem::at(
                            None,
                            "cursor",
                            "is not a cursor this service gave out",
                        )],
                    )
                })
            })
            .transpose()?;
        let (anchors, more) = self
            .store
            .anchors_page(
                key,
                only,
                after
                    .as_deref()
                    .map(|a| a.split_once('\0').unwrap_or((a, ""))),
                limit,
            )
            .await?;
        // The cursor is the last row's item id and judge version, '\0' between (neither may
        // hold a control character).
        let next_cursor = more
            .then(|| {
                anchors.last().map(|a| {
                    let version = JudgeVersion::stored(a.judge_version.as_ref());
                    auth::hex(format!("{}\0{version}", a.item_id.as_str()).as_bytes())
                })
            })
            .flatten();
        Ok(AnchorPage {
            anchors,
            next_cursor,
        })
    }

    pub async fn delete_anchor(
        &self,
        key: &CellKey,
        item_id: &str,
        version: Option<&JudgeVersion>,
    ) -> Result<i64> {
        // The id as stored: in its composed form.
        let composed = crate::domain::ItemId::named(item_id);
        let item_id = composed.as_ref().map_or(item_id, |id| id.as_str());
        let count = self.store.delete_anchor(key, item_id, version).await?;
        self.panel_memo.clear();
        self.metrics.set_cell_anchors(key, count);
        Ok(count)
    }

    /// Sets the per-cell gauges from the store, loads the active calibrators and counts the
    /// finished training jobs: at start, so all of them survive restarts.
    pub async fn refresh_gauges(&self) -> Result<()> {
        for cell in self.store.cells().await? {
            self.metrics.set_cell_anchors(&cell.key, cell.anchor_count);
        }
        self.refresh_calibrators().await?;
        // Every batch stored and not yet checked: the process that stored it is gone. A failure
        // leaves them queued for the refresh timer; it never stops a start.
        if let Err(e) = self.drain_pending_checks(now_ms() + 1).await {
            tracing::warn!(error = ?e, "queued drift checks not drained at start");
        }
        self.refresh_coverage().await?;
        self.refresh_checks().await?;
        self.count_finished_jobs().await
    }

    /// Loads the bundled HANNA slice (idempotent: a second load finds every anchor unchanged).
    pub async fn load_demo(&self) -> Result<IngestReport> {
        let rows = anchors::rows_from_csv(DEMO_ANCHORS_CSV.as_bytes())
            .map_err(|p| Error::invalid("the bundled demo data", p))?;
        self.ingest(rows, false).await
    }

    /// Queues a Bayesian training job for every demo judge that has no calibrator yet;
    /// returns the jobs.
    pub async fn train_demo(&self) -> Result<Vec<crate::domain::calibration::JobId>> {
        let mut judges: Vec<_> = self
            .store
            .cells()
            .await?
            .into_iter()
            .map(|c| c.key.judge)
            .collect();
        judges.dedup();
        let active = self.store.active_calibrators().await?;
        let mut jobs = Vec::new();
        for judge in judges {
            if active.iter().any(|(key, _)| key.judge == judge) {
                continue;
            }
            let request =
                TrainingRequest::parse(judge.as_str(), "bayes", None, None, serde_json::json!({}))
                    .map_err(|p| Error::rejected("the demo's training request", p))?;
            jobs.push(self.submit_training(request).await?.id);
        }
        Ok(jobs)
    }
}

/// A cursor is the last item id of a page, hex-encoded. Any even run of hex digits is a
/// position (bytes that are not UTF-8 are read lossily: the page starts after them).
fn decode_cursor(c: &str) -> Option<String> {
    if !c.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..c.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(c.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let c = crate::auth::hex("story-é/1".as_bytes());
        assert_eq!(super::decode_cursor(&c).as_deref(), Some("story-é/1"));
        assert_eq!(super::decode_cursor("zz"), None);
        assert_eq!(super::decode_cursor("abc"), None);
        assert_eq!(super::decode_cursor("ff").as_deref(), Some("\u{fffd}"));
    }
}
