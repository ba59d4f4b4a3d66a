//! Drift beyond β: each anchor batch that reaches a cell with an active version is checked
//! against that version's 95% predictive interval (its method's own, or the held-out
//! conformal band per bin of the judge score: `judgecal_stats::conformal`). Each anchor either
//! falls inside or misses, and two figures watch the misses:
//! - `judgecal_anchor_coverage`, the share inside over the newest batches (about 200 anchors),
//!   a picture of the recent past with no error rate of its own;
//! - the drift alarm (`judgecal_stats::drift`), a betting e-process over every anchor checked since
//!   the version was activated, against the miss rate the version's bands are bounded by
//!   given its training anchors, with raters (or batches naming none) as its independent
//!   units: the chance that it ever fires while the cell stays healthy is at most
//!   `calibrators.drift_delta` + `drift::BOUND_DELTA`, however long the version serves;
//! - the fleet's e-process, the same bet against the version's bound at
//!   `fleet_delta`/(2·`fleet_cells`), alarmed at 2·`fleet_cells`/`fleet_delta`: across at most
//!   `fleet_cells` cells the chance of any false fleet alarm, bound failures included, is at
//!   most `fleet_delta`.
//!
//! All are recomputed from the store, so every replica reports the same.

use std::collections::HashMap;

use super::families::{Operations, Versions, Webhooks};
use super::versions::Loaded;
use crate::domain::{Anchor, CellKey, now_ms};
use crate::error::{Error, Result};
use crate::metrics::GaugeScope;
use crate::store::{BatchCoverage, CellIngest, CellMisses};
use crate::webhooks::{Alarm, AlarmKind};
use judgecal_stats::conformal::{Intervals, tie_break};
use judgecal_stats::drift::{
    BOUND_DELTA, CheckedBatch, Dependence, Drift, Watch, drift, drift_path,
};

/// `judgecal_anchor_coverage` covers the newest checks of a cell's active version, whole
/// batches, until at least this many anchors.
pub const COVERAGE_WINDOW: i64 = 200;

/// How long a stored batch's check is left to its upload's process before the refresh of any
/// replica takes it over.
pub const PENDING_CHECK_GRACE_MS: i64 = 30_000;

/// The fleet-wide drift alert's size and rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetAlert {
    /// K: the most cells watched at once.
    pub cells: usize,
    pub delta: f64,
}

impl FleetAlert {
    /// The level of each version's bound, and each cell's false-alarm chance: δ/(2K), so that
    /// K cells' bound failures and K cells' alarms add to at most δ.
    pub fn per_cell(&self) -> f64 {
        self.delta / (2.0 * self.cells as f64)
    }
}

/// A version's bounds on its miss rate: at `drift::BOUND_DELTA` (its own alarm's) and at the
/// fleet alert's level per cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Bounds {
    pub cell: f64,
    pub fleet: f64,
}

/// A version's drift alarms as last replayed by this process, and what they replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Replayed {
    pub activated_at_ms: i64,
    pub batches: i64,
    pub watch: Watch,
}

/// Whether each of `anchors` missed `loaded`'s 95% predictive interval as the drift alarm
/// counts (a tie at a band's edge broken by the anchor's own draw, `conformal::tie_break`),
/// with its rater, for those it has one for; and how many fell inside the interval served.
fn misses(loaded: &Loaded, anchors: &[Anchor]) -> Result<(CheckedBatch, i64)> {
    let version = &loaded.version;
    let Some(intervals) = &version.intervals else {
        return Ok((CheckedBatch::default(), 0));
    };
    // The score the version's corrector reads: the judge score, or with a covariate layer the
    // layer's score of the anchor's judge score and covariates (an anchor lacking one the layer
    // serves is not checked).
    let (read, scores): (Vec<&Anchor>, Vec<f64>) = anchors
        .iter()
        .filter_map(|a| {
            version
                .layer_score(a.judge_score, &a.covariates)
                .ok()
                .map(|s| (a, s))
        })
        .unzip();
    let raw = version
        .model
        .correct(&scores)
        .map_err(|e| Error::Internal(format!("correcting the batch's judge scores: {e}")))?;
    let salt = version.id.to_string();
    let (mut batch, mut inside) = (CheckedBatch::default(), 0);
    for ((a, c), &j) in read.iter().zip(&raw).zip(&scores) {
        let y = a.reference_score;
        let Some(missed) = intervals.misses(j, y, c, tie_break(a.item_id.as_str(), &salt)) else {
            continue;
        };
        let mut served = *c;
        intervals.apply(&[j], std::slice::from_mut(&mut served));
        inside += i64::from(
            served
                .predictive
                .is_some_and(|(lo, hi)| (lo..=hi).contains(&y)),
        );
        batch.misses.push(missed);
        batch
            .raters
            .push(a.rater.as_ref().map(|r| r.as_str().to_owned()));
    }
    Ok((batch, inside))
}

/// A cell's drift alarm after each batch checked against its active version since the version
/// was activated: the evidence over time.
#[derive(Debug, Clone, PartialEq)]
pub struct DriftEvidence {
    /// The active version's number.
    pub version: i64,
    /// The e-value at which the alarm fires, 1/δ.
    pub threshold: f64,
    /// Per batch: anchors checked and how many missed the interval.
    pub batches: Vec<(usize, usize)>,
    /// The alarm after each batch.
    pub path: Vec<Drift>,
}

impl Operations<'_> {
    /// The drift alarm's evidence over time for `key`'s active version (`None` where no batch
    /// has been checked against it since its activation).
    pub async fn drift_evidence(&self, key: &CellKey) -> Result<Option<DriftEvidence>> {
        let Some(cell) = self
            .store
            .drift_rows()
            .misses_since_activation(Some(key))
            .await?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        let version = Versions(self).corrector(key, None).await?.version.version;
        let known = self
            .bounds
            .lock()
            .ok()
            .and_then(|b| b.get(&cell.calibrator).copied());
        let (delta, max_rho) = (self.drift_delta, self.drift_max_rho);
        let nominal = 1.0 - judgecal_stats::conformal::LEVEL;
        let evidence = crate::error::blocking("replaying the drift alarm", move || {
            let bound = known.map_or_else(
                || {
                    cell.intervals
                        .as_ref()
                        .map_or(nominal, |i| i.miss_bound(BOUND_DELTA))
                },
                |b| b.cell,
            );
            let dependence = Dependence {
                max_rho,
                history: cell.intervals.as_ref().and_then(|i| i.units.as_ref()),
            };
            DriftEvidence {
                version,
                threshold: 1.0 / delta,
                batches: cell
                    .batches
                    .iter()
                    .map(|b| (b.misses.len(), b.misses.iter().filter(|m| **m).count()))
                    .collect(),
                path: drift_path(&cell.batches, bound, delta, dependence),
            }
        })
        .await?;
        Ok(Some(evidence))
    }

    /// Checks each cell's newly stored anchors against the version it serves, records the
    /// result and updates the gauges. The anchors are stored already, with their check queued
    /// in the same transaction: a failure here is logged, never returned, and the check is
    /// left queued for the next refresh (`drain_pending_checks`).
    pub(super) async fn check_coverage(&self, outcomes: &mut [CellIngest]) {
        let mut touched = Vec::new();
        for outcome in outcomes.iter_mut() {
            let Some(pending) = outcome.pending.clone() else {
                continue;
            };
            let checked = self
                .check_stored(
                    &outcome.key,
                    outcome.judge_version.as_ref(),
                    &pending,
                    outcome.stored.clone(),
                )
                .await;
            match checked {
                Ok(Some(c)) => {
                    outcome.coverage = Some(c);
                    touched.push(outcome.key.clone());
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    cell = %outcome.key, error = ?e,
                    "could not check the batch against the active version's intervals; left queued for the next refresh"
                ),
            }
        }
        self.refresh_touched(&touched).await;
    }

    /// Checks the batches whose upload stored them but did not record their check (its process
    /// stopped between the two), stored before `before_ms`: at start and on the refresh timer.
    /// Returns how many it recorded.
    pub async fn drain_pending_checks(&self, before_ms: i64) -> Result<usize> {
        let mut touched = Vec::new();
        for check in self.store.drift_rows().pending_checks(before_ms).await? {
            let anchors = self.store.drift_rows().pending_anchors(&check).await?;
            let judge_version = check.judge_version.clone();
            if self
                .check_stored(&check.key, judge_version.as_ref(), &check.id, anchors)
                .await?
                .is_some()
            {
                tracing::info!(cell = %check.key, "checked a batch stored by an upload that stopped before its check");
                touched.push(check.key);
            }
        }
        self.refresh_touched(&touched).await;
        Ok(touched.len())
    }

    /// Only the cells an upload touched: the others' gauges have not moved, and the refresh
    /// timer keeps every cell's (an upload's cost does not grow with the fleet).
    async fn refresh_touched(&self, touched: &[CellKey]) {
        for key in touched {
            if let Err(e) = self.refresh_coverage_of(Some(key)).await {
                tracing::warn!(cell = %key, error = ?e, "anchor coverage gauges not refreshed");
            }
        }
    }

    /// Checks `anchors`, stored in `key` under `judge_version`, against the version the cell
    /// serves, and records the check while taking `pending` off the outbox. `None` where there
    /// is nothing to record (no version serves, it was trained on another judge version, it has
    /// no intervals, or another process recorded the check first).
    async fn check_stored(
        &self,
        key: &CellKey,
        judge_version: Option<&crate::domain::JudgeVersion>,
        pending: &str,
        anchors: Vec<Anchor>,
    ) -> Result<Option<BatchCoverage>> {
        // The version the store says is active, loaded now if this process has not yet (a
        // flow just trained here is still being tabulated by the refresh).
        let loaded = match Versions(self).corrector(key, None).await {
            Ok(loaded) => loaded,
            Err(Error::NotFound(_)) => {
                self.store
                    .drift_rows()
                    .complete_check(pending, None)
                    .await?;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        // Anchors of another judge version than the version was trained on are no evidence
        // about it: the bridge compares versions.
        if loaded.version.judge_version.as_ref() != judge_version
            || loaded.version.intervals.is_none()
        {
            self.store
                .drift_rows()
                .complete_check(pending, None)
                .await?;
            return Ok(None);
        }
        // A flow's corrections off its table run libtorch: off the async runtime.
        let (version, id) = (loaded.version.version, loaded.version.id);
        let (batch, inside) = crate::error::blocking("checking a batch's coverage", move || {
            misses(&loaded, &anchors)
        })
        .await??;
        if batch.misses.is_empty() {
            self.store
                .drift_rows()
                .complete_check(pending, None)
                .await?;
            return Ok(None);
        }
        let recorded = self
            .store
            .drift_rows()
            .complete_check(pending, Some((id, &batch, inside)))
            .await?;
        Ok(recorded.then_some(BatchCoverage {
            version,
            checked: batch.misses.len() as i64,
            inside,
        }))
    }

    /// Sets `judgecal_anchor_coverage` and the drift alarm's gauges from the store for every
    /// cell, so each replica reports the same: at start and on the refresh timer. (A cell whose
    /// checks are as this process last replayed them keeps that replay.)
    pub async fn refresh_coverage(&self) -> Result<()> {
        self.refresh_coverage_of(None).await
    }

    /// The same for every cell, or `only` one (after an upload to it); pairwise cells'
    /// newest versions beside the active versions of cells of scores.
    pub(super) async fn refresh_coverage_of(&self, only: Option<&CellKey>) -> Result<()> {
        let scope = if only.is_some() {
            GaugeScope::These
        } else {
            GaugeScope::All
        };
        let mut windows = self
            .store
            .drift_rows()
            .coverage(COVERAGE_WINDOW, only)
            .await?;
        let (pairwise_windows, pairwise) = self
            .store
            .drift_rows()
            .preference_misses(COVERAGE_WINDOW, only)
            .await?;
        windows.extend(pairwise_windows);
        self.metrics.set_coverage(&windows, scope);
        let Replay {
            mut cells,
            mut kept,
            active,
        } = self.cells_to_replay(only, &pairwise).await?;
        // Pairwise cells are replayed on every refresh (their checks are not counted ahead).
        cells.extend(pairwise);
        let bounds = self.bounds_of(&cells, active.as_deref()).await?;
        let drifts = self.replay(cells, bounds).await?;
        if let Ok(mut cache) = self.replays.lock() {
            for (_, calibrator, replayed) in &drifts {
                cache.insert(calibrator.clone(), *replayed);
            }
            if let Some(active) = &active {
                cache.retain(|id, _| active.contains(id));
            }
        }
        kept.extend(drifts.into_iter().map(|(key, id, r)| (key, id, r.watch)));
        Webhooks(self).raise(self.drift_alarms(&kept)).await;
        let kept: Vec<(CellKey, Watch)> = kept.into_iter().map(|(k, _, w)| (k, w)).collect();
        self.metrics.set_drift(&kept, scope);
        Ok(())
    }

    /// The alarms standing in `watched` (cell, calibrator id, watch): each cell's own and the
    /// fleet's, one alarm per version (an alarm stays raised until the next activation).
    fn drift_alarms(&self, watched: &[(CellKey, String, Watch)]) -> Vec<Alarm> {
        let mut alarms = Vec::new();
        for (key, calibrator, watch) in watched {
            // The version's number, where this process serves it (a pairwise cell's has none).
            let version = self
                .calibrators
                .active(key)
                .filter(|l| l.version.id.to_string() == *calibrator)
                .map(|l| l.version.version);
            for (kind, d, threshold) in [
                (AlarmKind::Drift, &watch.cell, 1.0 / self.drift_delta),
                (
                    AlarmKind::FleetAlert,
                    &watch.fleet,
                    1.0 / self.fleet.per_cell(),
                ),
            ] {
                if !d.alarm {
                    continue;
                }
                let what = match kind {
                    AlarmKind::Drift => "drift alarm",
                    _ => "fleet-wide drift alert",
                };
                alarms.push(Alarm {
                    kind,
                    id: format!("{}:{calibrator}", kind.as_str()),
                    cell: Some(key.clone()),
                    version,
                    figures: serde_json::json!({
                        "anchors": d.anchors,
                        "units": d.units,
                        "miss_bound": d.miss_bound,
                        "e_value": d.e_value,
                        "peak": d.peak,
                        "threshold": threshold,
                        "rho": d.rho,
                        "clustered": d.clustered,
                    }),
                    link: format!("/ui/cells/{}/{}", key.judge, key.rubric),
                    summary: format!(
                        "{key}: the {what} is raised: the anchors since the active version's activation miss its intervals more often than its bound {:.3} allows (e-value peak {:.1} past {threshold:.0}, over {} anchors in {} units)",
                        d.miss_bound, d.peak, d.anchors, d.units
                    ),
                });
            }
        }
        alarms
    }

    /// The cells to replay. A refresh of every cell keeps the replay of each version whose
    /// checks this process has replayed before and that has none since (checks are only
    /// added): the timer's cost follows the cells that moved, not every anchor watched.
    async fn cells_to_replay(
        &self,
        only: Option<&CellKey>,
        pairwise: &[CellMisses],
    ) -> Result<Replay> {
        if only.is_some() {
            let cells = self
                .store
                .drift_rows()
                .misses_since_activation(only)
                .await?;
            return Ok(Replay {
                cells,
                kept: Vec::new(),
                active: None,
            });
        }
        let replayed = self.replays.lock().map(|r| r.clone()).unwrap_or_default();
        let counts = self.store.drift_rows().check_counts().await?;
        let (mut kept, mut moved) = (Vec::new(), Vec::new());
        for count in &counts {
            match replayed.get(&count.calibrator) {
                Some(r)
                    if r.activated_at_ms == count.activated_at_ms && r.batches == count.batches =>
                {
                    kept.push((count.key.clone(), count.calibrator.clone(), r.watch));
                }
                _ => moved.push(&count.key),
            }
        }
        // Every cell moved (the first refresh, or a busy fleet): one query for all, not one
        // per cell.
        let cells = if kept.is_empty() {
            self.store
                .drift_rows()
                .misses_since_activation(None)
                .await?
        } else {
            let mut cells = Vec::new();
            for key in moved {
                cells.extend(
                    self.store
                        .drift_rows()
                        .misses_since_activation(Some(key))
                        .await?,
                );
            }
            cells
        };
        let active = counts
            .into_iter()
            .map(|c| c.calibrator)
            .chain(pairwise.iter().map(|c| c.calibrator.clone()))
            .collect();
        Ok(Replay {
            cells,
            kept,
            active: Some(active),
        })
    }

    /// Each version's two bounds on its miss rate. They take many draws: once per version and
    /// process; versions no longer `active` leave the cache (after a refresh of every cell).
    async fn bounds_of(
        &self,
        cells: &[CellMisses],
        active: Option<&[String]>,
    ) -> Result<HashMap<String, Bounds>> {
        let fleet = self.fleet;
        let known = self.bounds.lock().map(|b| b.clone()).unwrap_or_default();
        let needed: Vec<(String, Option<Intervals>)> = cells
            .iter()
            .filter(|c| !known.contains_key(&c.calibrator))
            .map(|c| (c.calibrator.clone(), c.intervals.clone()))
            .collect();
        let nominal = 1.0 - judgecal_stats::conformal::LEVEL;
        let fresh: Vec<(String, Bounds)> =
            crate::error::blocking("bounding the versions' miss rates", move || {
                needed
                    .into_iter()
                    .map(|(id, i)| {
                        let bound = |delta| i.as_ref().map_or(nominal, |i| i.miss_bound(delta));
                        let bounds = Bounds {
                            cell: bound(BOUND_DELTA),
                            fleet: bound(fleet.per_cell()),
                        };
                        (id, bounds)
                    })
                    .collect()
            })
            .await?;
        let mut bounds = known;
        if let Ok(mut cache) = self.bounds.lock() {
            cache.extend(fresh.iter().cloned());
            if let Some(active) = active {
                cache.retain(|id, _| active.contains(id));
            }
        }
        bounds.extend(fresh);
        Ok(bounds)
    }

    /// Every version's anchors replayed through two e-processes: CPU work, off the async
    /// runtime.
    async fn replay(
        &self,
        cells: Vec<CellMisses>,
        bounds: HashMap<String, Bounds>,
    ) -> Result<Vec<(CellKey, String, Replayed)>> {
        let (delta, max_rho, fleet) = (self.drift_delta, self.drift_max_rho, self.fleet);
        let nominal = 1.0 - judgecal_stats::conformal::LEVEL;
        crate::error::blocking("replaying the drift alarms", move || {
            cells
                .into_iter()
                .map(|cell| {
                    let Bounds {
                        cell: bound,
                        fleet: fleet_bound,
                    } = bounds.get(&cell.calibrator).copied().unwrap_or(Bounds {
                        cell: nominal,
                        fleet: nominal,
                    });
                    let dependence = Dependence {
                        max_rho,
                        history: cell.intervals.as_ref().and_then(|i| i.units.as_ref()),
                    };
                    let watch = Watch {
                        cell: drift(&cell.batches, bound, delta, dependence),
                        fleet: drift(&cell.batches, fleet_bound, fleet.per_cell(), dependence),
                    };
                    let replayed = Replayed {
                        activated_at_ms: cell.activated_at_ms,
                        batches: cell.batches.len() as i64,
                        watch,
                    };
                    (cell.key, cell.calibrator, replayed)
                })
                .collect()
        })
        .await
    }
}

/// The cells a refresh replays, the replays it keeps, and (a refresh of every cell) the
/// versions now active.
struct Replay {
    cells: Vec<CellMisses>,
    kept: Vec<(CellKey, String, Watch)>,
    active: Option<Vec<String>>,
}

impl Operations<'_> {
    /// Sets the per-cell gauges from the store, loads the active calibrators and counts the
    /// finished training jobs: at start, so all of them survive restarts.
    pub async fn refresh_gauges(&self) -> Result<()> {
        for cell in self.store.cells().await? {
            self.metrics.set_cell_anchors(&cell.key, cell.anchor_count);
        }
        Versions(self).refresh_calibrators().await?;
        // Every batch stored and not yet checked: the process that stored it is gone. A failure
        // leaves them queued for the refresh timer; it never stops a start.
        if let Err(e) = self.drain_pending_checks(now_ms() + 1).await {
            tracing::warn!(error = ?e, "queued drift checks not drained at start");
        }
        self.refresh_coverage().await?;
        Versions(self).refresh_checks().await?;
        self.count_finished_jobs().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alarm_replays_the_batches_in_order_and_stays_raised() {
        // A run of missing batches raises it; healthy batches afterwards lower the e-value,
        // never the alarm.
        let batch = |n: usize, miss: bool| CheckedBatch::unrated(vec![miss; n]);
        let mut batches = vec![batch(50, false); 6];
        batches.extend(vec![batch(20, true); 8]);
        let raised = drift(&batches, 0.05, 0.01, Dependence::default());
        assert!(raised.alarm && raised.e_value >= 100.0, "{raised:?}");
        assert_eq!(raised.units, 14);
        batches.extend(vec![batch(50, false); 40]);
        let later = drift(&batches, 0.05, 0.01, Dependence::default());
        assert!(later.alarm && later.e_value < raised.e_value, "{later:?}");
        assert_eq!(later.anchors, 2460);
        let healthy = drift(&[batch(1000, false)], 0.05, 0.01, Dependence::default());
        assert!(!healthy.alarm && healthy.e_value <= 1.0, "{healthy:?}");
        // The same misses against a higher bound grow the wealth less.
        let bounded = drift(&batches[..14], 0.12, 0.01, Dependence::default());
        assert!(bounded.e_value < raised.e_value, "{bounded:?}");
    }

    #[test]
    fn a_named_rater_is_one_unit_across_batches() {
        // Two batches of one rater, and one batch naming none: two units.
        let named = |miss: bool| CheckedBatch {
            misses: vec![miss; 10],
            raters: vec![Some("ann".to_owned()); 10],
        };
        let d = drift(
            &[
                named(false),
                CheckedBatch::unrated(vec![false; 5]),
                named(true),
            ],
            0.05,
            0.01,
            Dependence::default(),
        );
        assert_eq!((d.anchors, d.units), (25, 2));
        // A rater who misses in every batch is one harsh rater: the alarm learns her rate
        // and bets less on her later anchors than on as many misses from new raters.
        let one: Vec<CheckedBatch> = (0..6).map(|_| named(true)).collect();
        let many: Vec<CheckedBatch> = (0..6)
            .map(|k| CheckedBatch {
                misses: vec![true; 10],
                raters: vec![Some(format!("r{k}")); 10],
            })
            .collect();
        let (one, many) = (
            drift(&one, 0.05, 0.01, Dependence::default()),
            drift(&many, 0.05, 0.01, Dependence::default()),
        );
        assert!(one.peak < many.peak, "{one:?} {many:?}");
    }
}
