//! Calibrator versions: listing, activation, and the in-memory cache of the versions cells
//! serve (each process loads them from the store and picks up activations made elsewhere).

use super::families::{Panels, Versions, Webhooks};
use judgecal_stats::warning::{Code, Warning};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::panel_members;
use crate::domain::calibration::{CalibratorVersion, Job, JobState, OnMismatch};
use crate::domain::{CellKey, JudgeName, JudgeVersion, RubricName, Scale};
use crate::error::{Error, Result};
use crate::webhooks::{Alarm, AlarmKind};

/// A version ready to correct with (a flow's MC-dropout table is built when it is loaded).
pub struct Loaded {
    pub version: CalibratorVersion,
    /// The anchors it could have been fitted on (stored no later than the version), read on
    /// its first run-level estimate.
    pub anchors: tokio::sync::OnceCell<Arc<judgecal_stats::Cell>>,
    /// The repeats among the anchors it was fitted on, read on the first run that carries
    /// repeats.
    pub repeats: tokio::sync::OnceCell<Arc<judgecal_stats::repeats::AnchorRepeats>>,
    /// A version whose layer reads covariates: its judge-score-only fit, readied to serve
    /// items sent without them.
    pub bare: Option<Arc<Loaded>>,
}

/// The calibration each (cell, judge version) is served by; `None`: the unversioned anchors.
type ByJudgeVersion = HashMap<(CellKey, Option<JudgeVersion>), Arc<Loaded>>;

/// The versions this process serves: each cell's active one, and versions asked for by
/// number (immutable, so never stale).
///
/// Loading a version takes a while (a flow tabulates), so two loads of one cell can finish
/// out of order: a refresh that read the store before a job activated version 2 could
/// otherwise put version 1 back after the job installed version 2. Each entry therefore
/// carries the `ReadStamp` of the store read that chose it, and only a later read replaces it.
#[derive(Default)]
pub struct Cache {
    active: RwLock<HashMap<CellKey, (ReadStamp, Arc<Loaded>)>>,
    pinned: RwLock<HashMap<(CellKey, i64), Arc<Loaded>>>,
    /// The newest passed version trained on each judge version of a cell (`None`: on the
    /// unversioned anchors): what serves a request naming that judge version, or none
    /// (replaced at each refresh).
    by_judge_version: RwLock<ByJudgeVersion>,
    /// Each judge's `on_version_mismatch` setting (replaced at each refresh).
    mismatch: RwLock<HashMap<JudgeName, OnMismatch>>,
    reads: AtomicU64,
}

/// A request named `requested` (or no judge version), and the calibration that serves it was
/// trained on `served`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub key: CellKey,
    pub requested: Option<JudgeVersion>,
    pub served: Option<JudgeVersion>,
    /// The version trained on `requested`, where there is one (the request pinned another).
    pub own: Option<i64>,
}

impl Mismatch {
    /// What the answer's `warnings` say.
    pub fn warning(&self, version: i64) -> Warning {
        Warning::new(Code::JudgeVersionMismatch, self.message(version)).at("judge_version")
    }

    fn message(&self, version: i64) -> String {
        let served = JudgeVersion::describe(self.served.as_ref());
        let (judge, rubric) = (&self.key.judge, &self.key.rubric);
        match (&self.requested, self.own) {
            (requested, Some(own)) => format!(
                "version {version} was pinned, trained on judge_version {served}; judge_version {} has a calibration \
                 of its own (version {own}): leave `version` out to be corrected by it",
                JudgeVersion::describe(requested.as_ref())
            ),
            (None, None) => format!(
                "the request names no judge_version and cell {} has no calibration trained on unversioned anchors: \
                 these scores were corrected by version {version}, trained on judge_version {served}. Name the \
                 judge_version that scored them (`judge_version`), or train on unversioned anchors",
                self.key
            ),
            (Some(requested), None) => format!(
                "judge_version {:?} has no calibration of its own: these scores were corrected by version {version}, \
                 trained on judge_version {served}. If the judge changed, re-score the cell's anchor items under the new \
                 version (GET /v1/cells/{judge}/{rubric}/rescore?judge_version=...) and read the bridge before trusting \
                 this correction",
                requested.as_str(),
            ),
        }
    }
}

/// The version that corrects a request, and whether it was trained on another judge version
/// than the request named.
pub struct Resolved {
    pub loaded: Arc<Loaded>,
    pub mismatch: Option<Mismatch>,
    /// A panel's version trained on member judge versions other than those the members'
    /// own untagged requests are served by now (`member_version_mismatch`).
    pub members: Option<Warning>,
}

/// The rubrics' scales this process serves with (see `Service::scale_of`).
#[derive(Default)]
pub(super) struct Scales(RwLock<HashMap<RubricName, Scale>>);

impl Scales {
    fn get(&self, rubric: &RubricName) -> Option<Scale> {
        self.0.read().ok().and_then(|s| s.get(rubric).copied())
    }

    pub(super) fn put(&self, rubric: RubricName, scale: Scale) {
        if let Ok(mut s) = self.0.write() {
            s.insert(rubric, scale);
        }
    }

    /// The store's scales; a rubric seen before with none stored keeps the default, so the
    /// request path does not read the store for it again.
    fn replace(&self, mut stored: HashMap<RubricName, Scale>) {
        if let Ok(mut s) = self.0.write() {
            for rubric in s.keys() {
                stored.entry(rubric.clone()).or_insert(Scale::DEFAULT);
            }
            *s = stored;
        }
    }
}

/// When this process learnt which version a cell serves: taken before reading the store, or
/// right after this process's own activation committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct ReadStamp(u64);

impl Cache {
    pub(super) fn seen(&self) -> ReadStamp {
        ReadStamp(self.reads.fetch_add(1, Ordering::SeqCst))
    }

    /// Whether this process serves what a finished job made: each version the job left
    /// active, and each passed one (or a later one of its cell) for requests naming the judge
    /// version it was trained on. A job reads `succeeded` in the store as soon as it commits,
    /// before any process has loaded its versions.
    fn serves(&self, job: &Job) -> bool {
        let Ok(by_judge_version) = self.by_judge_version.read() else {
            return false;
        };
        job.versions.iter().all(|r| {
            let key = CellKey {
                judge: job.judge.clone(),
                rubric: r.rubric.clone(),
            };
            let active = !r.active
                || self
                    .active(&key)
                    .is_some_and(|a| a.version.version >= r.version);
            let by_version = !r.passed
                || by_judge_version
                    .iter()
                    .any(|((k, _), l)| *k == key && l.version.version >= r.version);
            active && by_version
        })
    }

    pub(super) fn active(&self, key: &CellKey) -> Option<Arc<Loaded>> {
        self.active
            .read()
            .ok()
            .and_then(|a| a.get(key).map(|(_, v)| v.clone()))
    }

    /// Serves `loaded` for its cell unless a later store read put another there; returns the
    /// version the cell serves and whether it is `loaded`.
    fn put(&self, seen: ReadStamp, loaded: Arc<Loaded>) -> (Arc<Loaded>, bool) {
        let Ok(mut active) = self.active.write() else {
            return (loaded, false);
        };
        let key = loaded.version.key.clone();
        if let Some((newer, current)) = active.get(&key)
            && *newer > seen
        {
            return (current.clone(), false);
        }
        active.insert(key, (seen, loaded.clone()));
        (loaded, true)
    }
}

pub(super) fn train_hint(judge: &JudgeName) -> String {
    format!(
        "train one with POST /v1/judges/{judge}/calibrations {{\"method\": \"bayes\"}} (a key with the train scope)"
    )
}

impl Versions<'_> {
    /// Makes sure a job that reads `succeeded` is served by this process when its caller
    /// reads it: a client that polls a job and then corrects must get the versions it made,
    /// whichever process ran it and however soon it asks (the refresh timer alone would leave
    /// up to `calibrators.refresh_millis`, and the process that ran it loads its versions only
    /// after the commit).
    pub(super) async fn serve_finished(&self, job: &Job) -> Result<()> {
        if job.state == JobState::Succeeded && !self.calibrators.serves(job) {
            self.refresh_calibrators().await?;
        }
        Ok(())
    }

    pub async fn list(&self, key: &CellKey) -> Result<Vec<CalibratorVersion>> {
        self.store.version_rows().versions(key).await
    }

    /// Makes `version` the one the cell serves. A version that failed its diagnostics needs
    /// `force`.
    pub async fn activate(
        &self,
        key: &CellKey,
        version: i64,
        force: bool,
    ) -> Result<CalibratorVersion> {
        let mut v = self.store.version_rows().version(key, version).await?.ok_or_else(|| {
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
        self.store.version_rows().activate(key, &v).await?;
        let seen = self.calibrators.seen();
        v.active = true;
        self.install(v.clone(), seen).await?;
        tracing::info!(cell = %key, version, "calibrator activated");
        Ok(v)
    }

    /// Readies a version to correct with, on a blocking thread (a flow tabulates its
    /// sub-networks: libtorch, about a second).
    async fn load(v: CalibratorVersion) -> Result<Arc<Loaded>> {
        // Its judge-score-only fit serves as a version of its own: the same cell, number and
        // range, the fit's model and bands, no layer.
        let bare = match &v.bare {
            Some(b) => Some(
                Self::ready(CalibratorVersion {
                    model: b.model.clone(),
                    evaluation: b.evaluation,
                    intervals: b.intervals.clone(),
                    covariate_layer: None,
                    bare: None,
                    ..v.clone()
                })
                .await?,
            ),
            None => None,
        };
        let mut loaded = Self::ready(v).await?;
        loaded.bare = bare.map(Arc::new);
        Ok(Arc::new(loaded))
    }

    /// `v` with its model prepared.
    async fn ready(v: CalibratorVersion) -> Result<Loaded> {
        let model = v.model.clone();
        let model = crate::error::blocking("readying a calibrator", move || {
            model.prepare().map(|()| model)
        })
        .await?
        .map_err(Error::Internal)?;
        Ok(Loaded {
            version: CalibratorVersion { model, ..v },
            anchors: tokio::sync::OnceCell::new(),
            repeats: tokio::sync::OnceCell::new(),
            bare: None,
        })
    }

    /// Makes `v` the version this process serves for its cell, unless a store read later
    /// than `seen` has installed another meanwhile; returns the version the cell serves.
    pub(super) async fn install(
        &self,
        v: CalibratorVersion,
        seen: ReadStamp,
    ) -> Result<Arc<Loaded>> {
        self.panel_memo.clear();
        let (serving, installed) = self.calibrators.put(seen, Self::load(v).await?);
        if installed {
            self.metrics.set_active(&serving.version);
            Webhooks(self).raise(canary_alarm(&serving.version)).await;
        }
        Ok(serving)
    }

    /// Brings the cache in line with which version every cell serves in the store: at start,
    /// on a timer (so activations through other processes arrive), after each job.
    pub async fn refresh_calibrators(&self) -> Result<()> {
        let current: HashMap<CellKey, _> = self
            .calibrators
            .active
            .read()
            .map(|a| {
                a.iter()
                    .map(|(k, (_, v))| (k.clone(), v.version.id))
                    .collect()
            })
            .unwrap_or_default();
        self.scales.replace(self.store.rubric_scales().await?);
        let seen = self.calibrators.seen();
        for (key, id) in self.store.version_rows().active_calibrators().await? {
            if current.get(&key) == Some(&id) {
                continue;
            }
            // A version that cannot be read is skipped and reported, never a reason to stop:
            // one bad version must not keep every replica from starting.
            let installed = match self.store.version_rows().calibrator(id).await {
                Ok(Some(v)) => self.install(v, seen).await.map(|_| ()),
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            match installed {
                Ok(()) => self.metrics.set_unreadable(&key, false),
                Err(Error::Internal(why)) => {
                    tracing::error!(
                        cell = %key, calibrator = %id, why,
                        "the version this cell serves cannot be read: skipped (retrain the cell or activate another version)"
                    );
                    self.metrics.set_unreadable(&key, true);
                }
                Err(e) => return Err(e),
            }
        }
        let settings = self.store.version_rows().judge_settings().await?;
        if let Ok(mut m) = self.calibrators.mismatch.write() {
            *m = settings;
        }
        let fresh = self.judge_version_calibrators().await?;
        if let Ok(mut m) = self.calibrators.by_judge_version.write() {
            *m = fresh;
        }
        // Read again at the next request: what other processes changed arrives with it.
        self.panel_memo.clear();
        Ok(())
    }

    /// Every judge version's calibration, as the store names them: from the cache where it
    /// holds the same version (or the cell serves it), else read; one that cannot be read is
    /// skipped and logged.
    async fn judge_version_calibrators(&self) -> Result<ByJudgeVersion> {
        let held: ByJudgeVersion = self
            .calibrators
            .by_judge_version
            .read()
            .map(|m| m.clone())
            .unwrap_or_default();
        let mut fresh = HashMap::new();
        for (key, judge_version, id) in self
            .store
            .version_rows()
            .judge_version_calibrators()
            .await?
        {
            let active = self.calibrators.active(&key).filter(|a| a.version.id == id);
            let slot = (key, judge_version);
            let loaded = match (held.get(&slot), active) {
                (Some(l), _) if l.version.id == id => l.clone(),
                (_, Some(active)) => active,
                _ => match self.store.version_rows().calibrator(id).await {
                    Ok(Some(v)) => match Self::load(v).await {
                        Ok(loaded) => loaded,
                        Err(e) => {
                            tracing::error!(cell = %slot.0, calibrator = %id, error = %e, "a judge version's calibration cannot be read: skipped");
                            continue;
                        }
                    },
                    Ok(None) => continue,
                    Err(Error::Internal(why)) => {
                        tracing::error!(cell = %slot.0, calibrator = %id, why, "a judge version's calibration cannot be read: skipped");
                        continue;
                    }
                    Err(e) => return Err(e),
                },
            };
            fresh.insert(slot, loaded);
        }
        Ok(fresh)
    }

    /// The version that corrects a request naming `judge_version` (`None`: the unversioned
    /// anchors) and perhaps a `version`: the pinned version, else the active one where it was
    /// trained on that judge version, else the newest passed version trained on it, else the
    /// active one with a mismatch (counted; a 409 where the judge's setting says refuse). A
    /// versioned training therefore never changes what requests naming no version get, unless
    /// the cell has no unversioned calibration (and then the answer says so). From memory, but
    /// for the first request of a cell this process has not loaded.
    pub(super) async fn served(
        &self,
        key: &CellKey,
        version: Option<i64>,
        judge_version: Option<&JudgeVersion>,
    ) -> Result<Resolved> {
        let wanted = judge_version;
        let own = self.own_calibration(key, wanted);
        let mut loaded = match (version, &own) {
            (None, Some(own)) => match self.calibrators.active(key) {
                Some(a) if a.version.judge_version.as_ref() == wanted => a,
                _ => own.clone(),
            },
            _ => self.corrector(key, version).await?,
        };
        let defaults = Panels(self).panel_defaults(&loaded.version).await?;
        // A panel's requests name no member version: they stay with the newest passed version
        // trained on the members' defaults, as a judge's untagged requests stay with its
        // unversioned calibration when a versioned one is trained.
        if let (None, Some(defaults)) = (version, &defaults)
            && !panel_members::member_differences(&loaded.version, defaults).is_empty()
            && let Some(kept) = Panels(self).newest_on_defaults(key, defaults).await?
        {
            loaded = self.corrector(key, Some(kept)).await?;
        }
        let members = defaults.and_then(|d| panel_members::member_warning(&loaded.version, &d));
        if loaded.version.judge_version.as_ref() == wanted {
            return Ok(Resolved {
                loaded,
                mismatch: None,
                members,
            });
        }
        let mismatch = Mismatch {
            key: key.clone(),
            requested: wanted.cloned(),
            served: loaded.version.judge_version.clone(),
            own: own.map(|o| o.version.version),
        };
        // A pinned version of another judge version, where the named one has its own, is the
        // caller's choice: said, not counted or refused.
        if mismatch.own.is_none() {
            self.metrics.count_version_mismatch(key);
            if self.on_mismatch(&key.judge) == OnMismatch::Refuse {
                return Err(Error::conflict(
                    format!(
                        "judge_version {} has no calibration in cell {key}: the served version {} was trained on judge_version {}, \
                         and judge {} refuses mismatched versions (on_version_mismatch: refuse). Re-score the anchor items under \
                         it (GET /v1/cells/{}/{}/rescore?judge_version=...), then train on them \
                         (POST /v1/judges/{}/calibrations with \"judge_version\")",
                        JudgeVersion::describe(wanted),
                        loaded.version.version,
                        JudgeVersion::describe(mismatch.served.as_ref()),
                        key.judge,
                        key.judge,
                        key.rubric,
                        key.judge
                    ),
                    vec![],
                ));
            }
        }
        Ok(Resolved {
            loaded,
            mismatch: Some(mismatch),
            members,
        })
    }

    /// The calibration trained on `judge_version` (`None`: the unversioned anchors) that
    /// serves it, where this process holds one; from memory.
    pub(super) fn own_calibration(
        &self,
        key: &CellKey,
        judge_version: Option<&JudgeVersion>,
    ) -> Option<Arc<Loaded>> {
        self.calibrators
            .by_judge_version
            .read()
            .ok()
            .and_then(|m| m.get(&(key.clone(), judge_version.cloned())).cloned())
    }

    /// The version that corrects a run naming `judge_version` in a question across judge
    /// versions: its own calibration, or a 409 naming it (correcting one version's scores
    /// through another's calibration is what such a question must not do).
    pub(super) async fn served_exactly(
        &self,
        key: &CellKey,
        judge_version: Option<&JudgeVersion>,
        field: &str,
    ) -> Result<Arc<Loaded>> {
        let served = self.served(key, None, judge_version).await?;
        match served.mismatch {
            None => Ok(served.loaded),
            Some(m) => Err(Error::conflict(
                format!(
                    "{field}: judge_version {} has no calibration in cell {key} (the served version {} was trained on {}); \
                     runs of different judge versions are each corrected by their own version's calibration: train one on {} \
                     (POST /v1/judges/{}/calibrations, with \"judge_version\" where it has one)",
                    JudgeVersion::describe(m.requested.as_ref()),
                    served.loaded.version.version,
                    JudgeVersion::describe(m.served.as_ref()),
                    JudgeVersion::describe(m.requested.as_ref()),
                    key.judge
                ),
                vec![],
            )),
        }
    }

    /// Serves a version this process just stored for requests naming its judge version (or
    /// none, for a version of the unversioned anchors), where it passed and is newer than the
    /// one held.
    pub(super) async fn serve_judge_version(&self, v: &CalibratorVersion) -> Result<()> {
        if !v.passed() {
            return Ok(());
        }
        self.panel_memo.clear();
        let slot = (v.key.clone(), v.judge_version.clone());
        let held = self
            .calibrators
            .by_judge_version
            .read()
            .ok()
            .and_then(|m| m.get(&slot).map(|l| l.version.version));
        if held.is_some_and(|n| n >= v.version) {
            return Ok(());
        }
        let loaded = Self::load(v.clone()).await?;
        if let Ok(mut m) = self.calibrators.by_judge_version.write() {
            m.insert(slot, loaded);
        }
        Ok(())
    }

    /// The judge's `on_version_mismatch` setting, from memory.
    pub fn on_mismatch(&self, judge: &JudgeName) -> OnMismatch {
        self.calibrators
            .mismatch
            .read()
            .ok()
            .and_then(|m| m.get(judge).copied())
            .unwrap_or_default()
    }

    /// Sets the judge's `on_version_mismatch`; served at once by this process, by others at
    /// their next refresh.
    pub async fn set_on_mismatch(&self, judge: &JudgeName, on: OnMismatch) -> Result<()> {
        self.store
            .version_rows()
            .put_judge_setting(judge, on)
            .await?;
        if let Ok(mut m) = self.calibrators.mismatch.write() {
            m.insert(judge.clone(), on);
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
            let v = Self::load(self.store.version_rows().version(key, version).await?.ok_or_else(|| {
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
        if let Some(v) = self.calibrators.active(key) {
            return Ok(v);
        }
        // Not cached: perhaps activated by another process since the last refresh, or never.
        let seen = self.calibrators.seen();
        let versions = match self.store.version_rows().versions(key).await {
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
            return self.install(active.clone(), seen).await;
        }
        let pairwise = versions.is_empty()
            && self
                .store
                .cells()
                .await?
                .iter()
                .any(|c| &c.key == key && c.comparison_count > 0);
        Err(Error::NotFound(match versions.first() {
            None if pairwise => format!(
                "cell {key} holds pairwise comparisons, not judge scores: it corrects no scores; rate a run of its verdicts with POST /v1/ratings"
            ),
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

    /// The rubric's scale, from memory: the request path reads no database. A rubric this
    /// process has not seen is read from the store once (and remembered, the default scale
    /// included); the map is replaced from the store as the calibrators are refreshed, so a
    /// scale set through another process arrives with its activations.
    pub(super) async fn scale_of(&self, rubric: &RubricName) -> Result<Scale> {
        if let Some(scale) = self.scales.get(rubric) {
            return Ok(scale);
        }
        let stored = self.store.rubric_scales().await?;
        let scale = stored.get(rubric).copied().unwrap_or(Scale::DEFAULT);
        self.scales.replace(stored);
        self.scales.put(rubric.clone(), scale);
        Ok(scale)
    }
}

/// The β canary's alarm of a version now served, where its canary is up.
fn canary_alarm(v: &CalibratorVersion) -> Vec<Alarm> {
    let Some(posterior) = v.beta().filter(|p| p.canary) else {
        return Vec::new();
    };
    vec![Alarm {
        kind: AlarmKind::BetaCanary,
        id: format!("beta_canary:{}", v.id),
        cell: Some(v.key.clone()),
        version: Some(v.version),
        figures: serde_json::json!({
            "beta_mean": posterior.beta_mean,
            "beta_collapse_probability": posterior.beta_collapse_probability,
        }),
        link: format!("/v1/cells/{}/{}/calibrators", v.key.judge, v.key.rubric),
        summary: format!(
            "{}: version {} serves with its β canary up: Pr(β < 0.3) = {:.3} > 0.05 (β mean {:.3}); the judge no longer tracks the references",
            v.key, v.version, posterior.beta_collapse_probability, posterior.beta_mean
        ),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::calibration::CalibratorId;
    use judgecal_stats::Model;
    use judgecal_stats::identity::IdentityModel;

    fn loaded(key: &CellKey, version: i64) -> Arc<Loaded> {
        Arc::new(Loaded {
            version: CalibratorVersion {
                id: CalibratorId::new(),
                key: key.clone(),
                version,
                job_id: None,
                anchor_count: 0,
                anchor_digest: String::new(),
                model: Model::Identity(IdentityModel {}),
                evaluation: None,
                decision: None,
                intervals: None,
                groups: None,
                failure: None,
                created_at_ms: 0,
                active: true,
                judge_version: None,
                fusion: None,
                covariate_layer: None,
                bare: None,
                judge_range: None,
            },
            anchors: tokio::sync::OnceCell::new(),
            repeats: tokio::sync::OnceCell::new(),
            bare: None,
        })
    }

    /// A load chosen by an earlier store read that finishes last does not put its version
    /// back over the one a later read chose; a later read replaces it, rollbacks included.
    #[test]
    fn a_slow_load_from_an_earlier_read_never_replaces_a_later_one() {
        let cache = Cache::default();
        let key = CellKey {
            judge: JudgeName::parse("j").unwrap(),
            rubric: RubricName::parse("r").unwrap(),
        };
        let refresh = cache.seen();
        let job = cache.seen();
        assert_eq!(cache.put(job, loaded(&key, 2)).0.version.version, 2);
        let (serving, installed) = cache.put(refresh, loaded(&key, 1));
        assert!(!installed);
        assert_eq!(serving.version.version, 2);
        assert_eq!(cache.active(&key).unwrap().version.version, 2);
        let rollback = cache.seen();
        assert!(cache.put(rollback, loaded(&key, 1)).1);
        assert_eq!(cache.active(&key).unwrap().version.version, 1);
    }
}
