//! Drift beyond β: each anchor batch that reaches a cell with an active version is checked
//! against that version's 95% predictive interval. A judge (or its raters) that has shifted
//! since the fit shows as a share well below 95%, before any retraining.
//!
//! The interval: the posterior predictive one for a Bayesian version; for the others, which
//! have no noise model, the corrected score plus the 2.5% and 97.5% quantiles of the residuals
//! (reference − corrected) on the anchors the version could have been fitted on. Those
//! residuals are in-sample, so a flow that fits its anchors closely gets a narrow band.

use super::Service;
use super::versions::Loaded;
use crate::calibrate::stats::quantile;
use crate::domain::Anchor;
use crate::error::Result;
use crate::store::{BatchCoverage, CellIngest};

/// `judgecal_anchor_coverage` covers the newest checks of a cell's active version, whole
/// batches, until at least this many anchors.
pub const COVERAGE_WINDOW: i64 = 200;

/// Below this many fitted anchors a residual band is too rough to check against.
const MIN_BAND_ANCHORS: usize = 20;

/// The residual band of a version without a noise model, from the anchors it was fitted on.
fn residual_band(loaded: &Loaded, fitted_on: &[(f64, f64)]) -> Option<(f64, f64)> {
    let residuals: Vec<f64> = fitted_on
        .iter()
        .filter_map(|&(j, y)| loaded.score(j).map(|s| y - s))
        .collect();
    (residuals.len() >= MIN_BAND_ANCHORS)
        .then(|| (quantile(&residuals, 0.025), quantile(&residuals, 0.975)))
}

/// The 95% predictive interval `loaded` gives judge score `j`: its method's own, or the
/// residual band around its corrected score; `None` for a flow score off its table.
fn interval(loaded: &Loaded, band: Option<(f64, f64)>, j: f64) -> Option<(f64, f64)> {
    let model = &loaded.version.model;
    if model.heavy(&[j]) {
        return None;
    }
    let c = model.correct(&[j]).ok()?[0];
    c.predictive
        .or_else(|| band.map(|(lo, hi)| (c.score + lo, c.score + hi)))
}

/// How many of `anchors` fall inside `loaded`'s 95% predictive interval, of how many it could
/// check (a flow skips scores off its table).
fn count_inside(loaded: &Loaded, band: Option<(f64, f64)>, anchors: &[Anchor]) -> (i64, i64) {
    let mut checked = 0;
    let mut inside = 0;
    for a in anchors {
        let interval = interval(loaded, band, a.judge_score);
        if let Some((lo, hi)) = interval {
            checked += 1;
            inside += i64::from((lo..=hi).contains(&a.reference_score));
        }
    }
    (checked, inside)
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
            let Some(loaded) = self.calibrators.active_version(&outcome.key) else {
                continue;
            };
            match self.check_batch(&loaded, &outcome.stored).await {
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
        loaded: &Loaded,
        anchors: &[Anchor],
    ) -> Result<Option<BatchCoverage>> {
        // A method with its own predictive interval (bayes) needs no residual band.
        let own = anchors
            .first()
            .and_then(|a| interval(loaded, None, a.judge_score))
            .is_some();
        let band = if own {
            None
        } else {
            let fitted_on = loaded
                .band
                .get_or_try_init(|| async {
                    let pairs = self.store.anchors_before(&loaded.version).await?;
                    Ok::<_, crate::error::Error>(residual_band(loaded, &pairs))
                })
                .await?;
            match fitted_on {
                Some(b) => Some(*b),
                None => return Ok(None),
            }
        };
        let (checked, inside) = count_inside(loaded, band, anchors);
        if checked == 0 {
            return Ok(None);
        }
        self.store
            .record_coverage(loaded.version.id, checked, inside)
            .await?;
        Ok(Some(BatchCoverage {
            version: loaded.version.version,
            checked,
            inside,
        }))
    }

    /// Sets `judgecal_anchor_coverage` from the store for every cell, so each replica reports
    /// the same share: after an upload here and on the refresh timer.
    pub async fn refresh_coverage(&self) -> Result<()> {
        let windows = self.store.coverage(COVERAGE_WINDOW).await?;
        self.metrics.set_coverage(&windows);
        Ok(())
    }
}
