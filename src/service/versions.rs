//! Calibrator versions: listing, activation, and the in-memory cache of the versions cells
//! serve (each process loads them from the store and picks up activations made elsewhere).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::Service;
use crate::domain::calibration::CalibratorVersion;
use crate::domain::{CellKey, JudgeName};
use crate::error::{Error, Result};

/// A version ready to correct with (a flow's MC-dropout table is built when it is loaded).
pub struct Loaded {
    pub version: CalibratorVersion,
    /// The residual band of a version without a noise model, worked out on its first coverage
    /// check (see `service::coverage`); `None` inside when too few anchors fitted it.
    pub band: tokio::sync::OnceCell<Option<(f64, f64)>>,
    /// The anchors it could have been fitted on (stored no later than the version), read on
    /// its first run-level estimate.
    pub anchors: tokio::sync::OnceCell<Arc<crate::calibrate::Cell>>,
}

/// The versions this process serves: each cell's active one, and versions asked for by
/// number (immutable, so never stale).
#[derive(Default)]
pub struct Cache {
    active: RwLock<HashMap<CellKey, Arc<Loaded>>>,
    pinned: RwLock<HashMap<(CellKey, i64), Arc<Loaded>>>,
}

impl Cache {
    /// The version `key` serves, as this process has it loaded.
    pub fn active_version(&self, key: &CellKey) -> Option<Arc<Loaded>> {
        self.active.read().ok()?.get(key).cloned()
    }
}

impl Loaded {
    /// The corrected score of `j`; `None` where it would take more than a look-up (a flow
    /// score off its table: the report skips those rather than run libtorch on a request
    /// thread).
    pub fn score(&self, j: f64) -> Option<f64> {
        let model = &self.version.model;
        if model.heavy(&[j]) {
            return None;
        }
        model.correct(&[j]).ok().map(|c| c[0].score)
    }
}

pub(super) fn train_hint(judge: &JudgeName) -> String {
    format!(
        "train one with POST /v1/judges/{judge}/calibrations {{\"method\": \"bayes\"}} (a key with the train scope)"
    )
}

impl Service {
    pub async fn versions(&self, key: &CellKey) -> Result<Vec<CalibratorVersion>> {
        self.store.versions(key).await
    }

    /// Makes `version` the one the cell serves. A version that failed its diagnostics needs
    /// `force`.
    pub async fn activate(
        &self,
        key: &CellKey,
        version: i64,
        force: bool,
    ) -> Result<CalibratorVersion> {
        let mut v = self.store.version(key, version).await?.ok_or_else(|| {
            Error::NotFound(format!(
                "cell {key} has no calibrator version {version}; GET /v1/cells/{}/{}/calibrators lists them",
                key.judge, key.rubric
            ))
        })?;
        if let (Some(failure), false) = (&v.failure, force) {
            return Err(Error::conflict(
                format!(
                    "version {version} of {key} failed its diagnostics ({failure}); add ?force=true to activate it anyway"
                ),
                vec![],
            ));
        }
        self.store.activate(key, &v).await?;
        v.active = true;
        self.install(v.clone()).await?;
        tracing::info!(cell = %key, version, "calibrator activated");
        Ok(v)
    }

    /// Readies a version to correct with, on a blocking thread (a flow tabulates its
    /// sub-networks: libtorch, about a second).
    async fn load(v: CalibratorVersion) -> Result<Arc<Loaded>> {
        let model = v.model.clone();
        let model = tokio::task::spawn_blocking(move || model.prepare().map(|()| model))
            .await
            .map_err(|_| Error::Internal("readying a calibrator panicked".into()))?
            .map_err(Error::Internal)?;
        Ok(Arc::new(Loaded {
            version: CalibratorVersion { model, ..v },
            band: tokio::sync::OnceCell::new(),
            anchors: tokio::sync::OnceCell::new(),
        }))
    }

    /// Makes `v` the version this process serves for its cell.
    async fn install(&self, v: CalibratorVersion) -> Result<Arc<Loaded>> {
        let loaded = Self::load(v).await?;
        self.metrics.set_active(&loaded.version);
        let key = loaded.version.key.clone();
        if let Ok(mut active) = self.calibrators.active.write() {
            active.insert(key, loaded.clone());
        }
        Ok(loaded)
    }

    /// Brings the cache in line with which version every cell serves in the store: at start,
    /// on a timer (so activations through other processes arrive), after each job.
    pub async fn refresh_calibrators(&self) -> Result<()> {
        let current: HashMap<CellKey, _> = self
            .calibrators
            .active
            .read()
            .map(|a| a.iter().map(|(k, v)| (k.clone(), v.version.id)).collect())
            .unwrap_or_default();
        for (key, id) in self.store.active_calibrators().await? {
            if current.get(&key) != Some(&id)
                && let Some(v) = self.store.calibrator(id).await?
            {
                self.install(v).await?;
            }
        }
        Ok(())
    }

    /// The version that corrects for `key`: the pinned `version`, or the active one.
    pub(super) async fn corrector(
        &self,
        key: &CellKey,
        version: Option<i64>,
    ) -> Result<Arc<Loaded>> {
        if let Some(version) = version {
            let pinned = (key.clone(), version);
            if let Some(v) = self
                .calibrators
                .pinned
                .read()
                .ok()
                .and_then(|p| p.get(&pinned).cloned())
            {
                return Ok(v);
            }
            let v = Self::load(self.store.version(key, version).await?.ok_or_else(|| {
                Error::NotFound(format!(
                    "cell {key} has no calibrator version {version}; GET /v1/cells/{}/{}/calibrators lists them",
                    key.judge, key.rubric
                ))
            })?)
            .await?;
            if let Ok(mut p) = self.calibrators.pinned.write() {
                p.insert(pinned, v.clone());
            }
            return Ok(v);
        }
        if let Some(v) = self
            .calibrators
            .active
            .read()
            .ok()
            .and_then(|a| a.get(key).cloned())
        {
            return Ok(v);
        }
        // Not cached: perhaps activated by another process since the last refresh, or never.
        let versions = match self.store.versions(key).await {
            Ok(v) => v,
            Err(Error::NotFound(_)) => {
                return Err(Error::NotFound(format!(
                    "cell {key} has no anchors and no calibrator; upload anchors with POST /v1/anchors, then {}",
                    train_hint(&key.judge)
                )));
            }
            Err(e) => return Err(e),
        };
        if let Some(active) = versions.iter().find(|v| v.active) {
            return self.install(active.clone()).await;
        }
        Err(Error::NotFound(match versions.first() {
            None => format!(
                "cell {key} has no calibrator yet; {}, then retry",
                train_hint(&key.judge)
            ),
            Some(newest) => format!(
                "cell {key} has {} calibrator versions but none is active: the newest (version {}) failed its diagnostics ({}); \
                 retrain (for example with more draws) or activate one anyway with POST /v1/cells/{}/{}/calibrators/{{version}}/activate?force=true",
                versions.len(),
                newest.version,
                newest.failure.as_deref().unwrap_or("unknown"),
                key.judge,
                key.rubric
            ),
        }))
    }

    /// The rubric's stored scale, or the default one.
    pub(super) async fn scale_of(
        &self,
        rubric: &crate::domain::RubricName,
    ) -> Result<crate::domain::Scale> {
        Ok(self
            .store
            .rubric_scales()
            .await?
            .get(rubric)
            .copied()
            .unwrap_or(crate::domain::Scale::DEFAULT))
    }

    /// An SVG report of the cell's active version (or `version`): corrected against reference
    /// on the cell's anchors, and the residuals against the judge score.
    pub async fn report_svg(&self, key: &CellKey, version: Option<i64>) -> Result<String> {
        let loaded = self.corrector(key, version).await?;
        let v = &loaded.version;
        let anchors = self
            .store
            .judge_anchors(&key.judge, Some(std::slice::from_ref(&key.rubric)))
            .await?
            .into_iter()
            .flat_map(|(_, a)| a)
            .collect::<Vec<_>>();
        let scale = self.scale_of(&key.rubric).await?;
        let (pairs, corrected): (Vec<(f64, f64)>, Vec<f64>) = anchors
            .iter()
            .filter_map(|a| {
                loaded
                    .score(a.judge_score)
                    .map(|c| ((a.judge_score, a.reference_score), c))
            })
            .unzip();
        let held_out = v.evaluation.map_or(String::new(), |e| {
            format!(
                "; held-out MAE {:.3} (raw {:.3})",
                e.calibrated.mae, e.raw.mae
            )
        });
        let title = format!(
            "{key}: version {} ({}), {} anchors{held_out}",
            v.version,
            v.method(),
            pairs.len()
        );
        crate::plots::svg(&crate::plots::cell_report(
            &title,
            (scale.min, scale.max),
            &pairs,
            &corrected,
        ))
        .map_err(Error::Internal)
    }
}
