//! Drift beyond β: each anchor batch that reaches a cell with an active version is checked
//! against that version's 95% predictive interval (its method's own, or the held-out
//! conformal band per bin of the judge score: `calibrate::conformal`). Each anchor either
//! falls inside or misses, and two figures watch the misses:
//! - `judgecal_anchor_coverage`, the share inside over the newest batches (about 200 anchors),
//!   a picture of the recent past with no error rate of its own;
//! - the drift alarm (`calibrate::drift`), a betting e-process over every batch checked since
//!   the version was activated, against the miss rate the version's bands are bounded by
//!   given its training anchors: the chance that it ever fires while the cell stays healthy
//!   is at most `calibrators.drift_delta` + `drift::BOUND_DELTA`, however long the version
//!   serves and however its anchors are batched.
//!
//! Both are recomputed from the store, so every replica reports the same.

use super::Service;
use super::versions::Loaded;
use crate::calibrate::drift::{BOUND_DELTA, drift};
use crate::domain::Anchor;
use crate::error::{Error, Result};
use crate::store::{BatchCoverage, CellIngest};

/// `judgecal_anchor_coverage` covers the newest checks of a cell's active version, whole
/// batches, until at least this many anchors.
pub const COVERAGE_WINDOW: i64 = 200;

/// Whether each of `anchors` missed `loaded`'s 95% predictive interval, for those it has one
/// for (a version with no interval checks none).
fn misses(loaded: &Loaded, anchors: &[Anchor]) -> Result<Vec<bool>> {
    let scores: Vec<f64> = anchors.iter().map(|a| a.judge_score).collect();
    let corrected = loaded
        .version
        .correct(&scores)
        .map_err(|e| Error::Internal(format!("correcting the batch's judge scores: {e}")))?;
    Ok(anchors
        .iter()
        .zip(corrected)
        .filter_map(|(a, c)| {
            c.predictive
                .map(|(lo, hi)| !(lo..=hi).contains(&a.reference_score))
        })
        .collect())
}

impl Service {
    /// Checks each cell's newly stored anchors against the version it serves, records the
    /// result and updates the gauges. The anchors are stored already: a failure here is
    /// logged, never returned.
    pub(super) async fn check_coverage(&self, outcomes: &mut [CellIngest]) {
        let mut touched = false;
        for outcome in outcomes.iter_mut() {
            if outcome.stored.is_empty() {
                continue;
            }
            // The version the store says is active, loaded now if this process has not yet
            // (a flow just trained here is still being tabulated by the refresh).
            let loaded = match self.corrector(&outcome.key, None).await {
                Ok(loaded) => loaded,
                Err(Error::NotFound(_)) => continue,
                Err(e) => {
                    tracing::warn!(cell = %outcome.key, error = ?e, "could not load the active version to check the batch");
                    continue;
                }
            };
            // Anchors of another judge version than the version was trained on are no evidence
            // about it: the bridge compares versions.
            if loaded.version.judge_version != outcome.judge_version {
                continue;
            }
            match self.check_batch(loaded, outcome.stored.clone()).await {
                Ok(Some(c)) => {
                    outcome.coverage = Some(c);
                    touched = true;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    cell = %outcome.key, error = ?e,
                    "could not check the batch against the active version's intervals"
                ),
            }
        }
        if touched && let Err(e) = self.refresh_coverage().await {
            tracing::warn!(error = ?e, "anchor coverage gauges not refreshed");
        }
    }

    async fn check_batch(
        &self,
        loaded: std::sync::Arc<Loaded>,
        anchors: Vec<Anchor>,
    ) -> Result<Option<BatchCoverage>> {
        if loaded.version.intervals.is_none() {
            return Ok(None);
        }
        // A flow's corrections off its table run libtorch: off the async runtime.
        let version = loaded.version.version;
        let id = loaded.version.id;
        let misses = crate::error::blocking("checking a batch's coverage", move || {
            misses(&loaded, &anchors)
        })
        .await??;
        if misses.is_empty() {
            return Ok(None);
        }
        self.store.record_coverage(id, &misses).await?;
        Ok(Some(BatchCoverage {
            version,
            checked: misses.len() as i64,
            inside: misses.iter().filter(|&&m| !m).count() as i64,
        }))
    }

    /// Sets `judgecal_anchor_coverage` and the drift alarm's gauges from the store for every
    /// cell, so each replica reports the same: after an upload here and on the refresh timer.
    pub async fn refresh_coverage(&self) -> Result<()> {
        let windows = self.store.coverage(COVERAGE_WINDOW).await?;
        self.metrics.set_coverage(&windows);
        let drifts: Vec<_> = self
            .store
            .misses_since_activation()
            .await?
            .into_iter()
            .map(|cell| {
                let nominal = 1.0 - crate::calibrate::conformal::LEVEL;
                let bound = cell
                    .intervals
                    .map_or(nominal, |i| i.miss_bound(BOUND_DELTA));
                (cell.key, drift(&cell.batches, bound, self.drift_delta))
            })
            .collect();
        self.metrics.set_drift(&drifts);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alarm_replays_the_batches_in_order_and_stays_raised() {
        // A run of missing batches raises it; healthy batches afterwards lower the e-value,
        // never the alarm.
        let mut batches = vec![vec![false; 50]; 6];
        batches.extend(vec![vec![true; 20]; 8]);
        let raised = drift(&batches, 0.05, 0.01);
        assert!(raised.alarm && raised.e_value >= 100.0, "{raised:?}");
        batches.extend(vec![vec![false; 50]; 40]);
        let later = drift(&batches, 0.05, 0.01);
        assert!(later.alarm && later.e_value < raised.e_value, "{later:?}");
        assert_eq!(later.anchors, 2460);
        let healthy = drift(&[vec![false; 1000]], 0.05, 0.01);
        assert!(!healthy.alarm && healthy.e_value <= 1.0, "{healthy:?}");
        // The same misses against a higher bound grow the wealth less.
        let bounded = drift(&batches[..14], 0.12, 0.01);
        assert!(bounded.e_value < raised.e_value, "{bounded:?}");
    }
}
