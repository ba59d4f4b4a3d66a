//! Training jobs, calibrator versions, activation and corrections, with the in-memory cache of
//! the versions cells serve.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use super::Service;
use super::training::{self, CellData, Progress};
use crate::calibrate::bayes::Corrected;
use crate::calibrate::flow::Table;
use crate::domain::calibration::{
    CalibratorVersion, Fitted, Job, JobId, JobState, Method, MethodOptions, NewVersion,
    TrainingRequest,
};
use crate::domain::{CellKey, ItemId, JudgeName, Problem, RubricName};
use crate::error::{Error, Result};
use crate::store::ClaimedJob;

/// A version ready to correct with: a flow's MC-dropout table is built when it is loaded.
pub struct Loaded {
    pub version: CalibratorVersion,
    pub table: Option<Table>,
    /// The residual band of a version without a noise model, worked out on its first coverage
    /// check (see `service::coverage`); `None` inside when too few anchors fitted it.
    pub band: tokio::sync::OnceCell<Option<(f64, f64)>>,
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
    /// The corrected score of `j`; `None` for a flow score off its table (the report skips
    /// those rather than run libtorch on a request thread).
    pub fn score(&self, j: f64) -> Option<f64> {
        match (&self.version.fitted, &self.table) {
            (Fitted::Bayes { posterior, .. }, _) => Some(posterior.correct(j).score),
            (Fitted::Flow(_), Some(table)) => table.correct(j).map(|c| c.0),
            (Fitted::Flow(_), None) => None,
            (Fitted::QuantileMap(map), _) => Some(map.correct(j)),
            (Fitted::Identity, _) => Some(j),
        }
    }
}

/// A flow's corrected score: the MC-dropout mean, its sd, and whether it goes to a person.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowCorrected {
    pub score: f64,
    pub sigma: f64,
    pub review: bool,
}

/// Corrected scores, as the version's method makes them.
pub enum CorrectedScores {
    Bayes(Vec<Corrected>),
    Flow(Vec<FlowCorrected>),
    /// `quantile_map` and `identity`: a score and nothing else.
    Plain(Vec<f64>),
}

/// The finished jobs already counted: those finished before `since_ms`, and `seen` at it.
#[derive(Default)]
pub struct JobWatermark {
    since_ms: i64,
    seen: HashSet<JobId>,
}

/// A training request as it arrives, before checking. `options` is the method's options
/// object (`{}` for the defaults).
#[derive(Debug, Clone)]
pub struct TrainingBody {
    pub method: String,
    pub rubrics: Option<Vec<String>>,
    pub options: serde_json::Value,
}

/// Corrected scores and the version that made them.
pub struct Correction {
    pub version: Arc<Loaded>,
    pub results: CorrectedScores,
}

fn refused(problems: Vec<Problem>) -> Error {
    Error::rejected("the training request was refused", problems)
}

fn train_hint(judge: &JudgeName) -> String {
    format!(
        "train one with POST /v1/judges/{judge}/calibrations {{\"method\": \"bayes\"}} (a key with the train scope)"
    )
}

/// The text a failed job shows its caller: what went wrong where the caller can act on it,
/// a pointer to the logs where only an operator can.
fn job_error_text(e: &Error) -> String {
    match e {
        Error::Invalid { message, details } => {
            let what: Vec<String> = details
                .iter()
                .map(|p| format!("{}: {}", p.field, p.problem))
                .collect();
            format!("{message}: {}", what.join("; "))
        }
        Error::Conflict { message, .. } | Error::NotFound(message) | Error::Internal(message) => {
            message.clone()
        }
        Error::Storage(_) | Error::Migrate(_) => {
            "the store failed while training (see the service log); submit the job again".into()
        }
    }
}

impl Service {
    /// Checks a training request and queues it. Without `rubrics`, every cell of the judge
    /// with at least `jobs.min_anchors` anchors is trained.
    pub async fn submit_training(&self, judge: &str, body: TrainingBody) -> Result<Job> {
        let mut problems = Vec::new();
        let judge =
            JudgeName::parse(judge).map_err(|e| problems.push(Problem::at(None, "judge", e)));
        let method =
            Method::parse(&body.method).map_err(|e| problems.push(Problem::at(None, "method", e)));
        let wanted: Option<Vec<RubricName>> = body.rubrics.as_ref().map(|names| {
            names
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    RubricName::parse(r)
                        .map_err(|e| problems.push(Problem::at(None, &format!("rubrics[{i}]"), e)))
                        .ok()
                })
                .collect()
        });
        let options = match &method {
            Ok(m) => MethodOptions::parse(*m, &body.options)
                .map_err(|p| problems.extend(p))
                .ok(),
            Err(()) => None,
        };
        let (Ok(judge), Ok(method), Some(options), true) =
            (judge, method, options, problems.is_empty())
        else {
            return Err(refused(problems));
        };
        let min = self.jobs.min_anchors as i64;
        let cells: Vec<_> = self
            .store
            .cells()
            .await?
            .into_iter()
            .filter(|c| c.key.judge == judge)
            .collect();
        if cells.is_empty() {
            return Err(Error::NotFound(format!(
                "judge {judge} has no anchors; upload some with POST /v1/anchors first"
            )));
        }
        let rubrics: Vec<RubricName> = match wanted {
            Some(wanted) => {
                if wanted.is_empty() {
                    problems.push(Problem::at(
                        None,
                        "rubrics",
                        "name at least one rubric, or leave `rubrics` out to train them all",
                    ));
                }
                for (i, r) in wanted.iter().enumerate() {
                    match cells.iter().find(|c| &c.key.rubric == r) {
                        None => problems.push(Problem::at(
                            None,
                            &format!("rubrics[{i}]"),
                            format!(
                                "judge {judge} has no anchors for rubric {r}; its rubrics: {}",
                                cells
                                    .iter()
                                    .map(|c| c.key.rubric.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )),
                        Some(c) if c.anchor_count < min => problems.push(Problem::at(
                            None,
                            &format!("rubrics[{i}]"),
                            format!(
                                "cell {} has {} anchors; training needs at least {min} (jobs.min_anchors)",
                                c.key, c.anchor_count
                            ),
                        )),
                        Some(_) => {}
                    }
                }
                let mut wanted = wanted;
                wanted.sort();
                wanted.dedup();
                wanted
            }
            None => {
                let eligible: Vec<RubricName> = cells
                    .iter()
                    .filter(|c| c.anchor_count >= min)
                    .map(|c| c.key.rubric.clone())
                    .collect();
                if eligible.is_empty() {
                    problems.push(Problem::at(
                        None,
                        "judge",
                        format!(
                            "no cell of judge {judge} has the {min} anchors training needs (jobs.min_anchors)"
                        ),
                    ));
                }
                eligible
            }
        };
        if !problems.is_empty() {
            return Err(refused(problems));
        }
        let request = TrainingRequest {
            judge,
            method,
            rubrics: Some(rubrics),
            options: options.to_json(),
        };
        let id = JobId::new();
        self.store.insert_job(id, &request).await?;
        self.job_queued.notify_one();
        tracing::info!(job_id = %id, judge = %request.judge, method = %method, "training job queued");
        self.job(id).await
    }

    pub async fn job(&self, id: JobId) -> Result<Job> {
        self.store
            .job(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no job {id}")))
    }

    /// Runs a claimed job's computation: reads the snapshot, fits off the async runtime,
    /// returns the versions to store.
    pub async fn run_training(
        &self,
        job: &ClaimedJob,
        progress: Arc<Progress>,
    ) -> Result<Vec<NewVersion>> {
        let request = &job.request;
        let options = request
            .options()
            .map_err(|p| Error::rejected("the stored job's options", p))?;
        let scales = self.store.rubric_scales().await?;
        let snapshot = self
            .store
            .judge_anchors(&request.judge, request.rubrics.as_deref())
            .await?;
        let min = self.jobs.min_anchors;
        let mut problems = Vec::new();
        for wanted in request.rubrics.iter().flatten() {
            let n = snapshot
                .iter()
                .find(|(r, _)| r == wanted)
                .map_or(0, |(_, a)| a.len());
            if n < min {
                problems.push(Problem::at(
                    None,
                    "rubrics",
                    format!(
                        "cell {}/{wanted} has {n} anchors now; training needs at least {min}",
                        request.judge
                    ),
                ));
            }
        }
        if !problems.is_empty() {
            return Err(Error::rejected(
                "the anchors changed since the job was queued",
                problems,
            ));
        }
        let cells: Vec<CellData> = snapshot
            .into_iter()
            .map(|(rubric, anchors)| {
                let scale = scales
                    .get(&rubric)
                    .copied()
                    .unwrap_or(crate::domain::Scale::DEFAULT);
                CellData::new(rubric, scale, &anchors)
            })
            .collect();
        tokio::task::spawn_blocking(move || match options {
            MethodOptions::Bayes(o) => training::bayes(&cells, &o, &|p| progress.set(p)),
            MethodOptions::Flow(o) => training::flow(&cells, &o, &progress),
            MethodOptions::Plain(method, o) => training::plain(&cells, method, &o, &progress),
            MethodOptions::Auto(o) => training::auto(&cells, &o, &progress),
        })
        .await
        .map_err(|_| Error::Internal("the training thread panicked; see the service log".into()))?
        .map_err(Error::Internal)
    }

    /// Stores a job's versions (activating those that passed, or all with `force`) and marks
    /// it succeeded; `false` when this process lost the job's lease meanwhile.
    pub async fn finish_training(
        &self,
        job: &ClaimedJob,
        owner: &str,
        versions: &[NewVersion],
    ) -> Result<bool> {
        let request = &job.request;
        let force = request.options().is_ok_and(|o| o.force());
        let stored = self
            .store
            .finish_job(job.id, owner, &request.judge, versions, force)
            .await?;
        if stored {
            self.refresh_calibrators().await?;
            self.count_finished_jobs().await?;
        }
        Ok(stored)
    }

    /// Ends a job as failed (with a message its caller can act on) or, when `cancelled`,
    /// as cancelled.
    pub async fn fail_training(
        &self,
        job: &ClaimedJob,
        owner: &str,
        error: &Error,
        cancelled: bool,
    ) -> Result<()> {
        let (state, text) = if cancelled {
            (JobState::Cancelled, "cancelled while running".to_owned())
        } else {
            (JobState::Failed, job_error_text(error))
        };
        if self.store.end_job(job.id, owner, state, &text).await? {
            self.count_finished_jobs().await?;
        }
        Ok(())
    }

    /// Cancels a job: at once when queued; when running, its process stops it within a lease
    /// renewal (jobs.lease_secs / 3). A finished job cannot be cancelled.
    pub async fn cancel(&self, id: JobId) -> Result<Job> {
        match self.store.cancel_job(id).await? {
            None => Err(Error::NotFound(format!("no job {id}"))),
            Some(JobState::Succeeded | JobState::Failed) => {
                let job = self.job(id).await?;
                Err(Error::conflict(
                    format!(
                        "job {id} has already {}; nothing to cancel",
                        job.state.as_str()
                    ),
                    vec![],
                ))
            }
            Some(_) => self.job(id).await,
        }
    }

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

    /// Readies a version to correct with: a flow's MC-dropout table is built on a blocking
    /// thread (libtorch, about a second).
    async fn load(v: CalibratorVersion) -> Result<Arc<Loaded>> {
        let table = match &v.fitted {
            Fitted::Bayes { .. } | Fitted::QuantileMap(_) | Fitted::Identity => None,
            Fitted::Flow(f) => {
                let f = f.clone();
                Some(
                    tokio::task::spawn_blocking(move || {
                        Table::build(
                            &f.weights,
                            f.rubric,
                            f.table_lo,
                            f.table_hi,
                            crate::calibrate::flow::TABLE_POINTS,
                        )
                    })
                    .await
                    .map_err(|_| Error::Internal("building a flow table panicked".into()))?
                    .map_err(Error::Internal)?,
                )
            }
        };
        Ok(Arc::new(Loaded {
            version: v,
            table,
            band: tokio::sync::OnceCell::new(),
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

    /// Counts jobs finished since the last count (by any process) into the training metrics,
    /// so every process reports the store's totals, also after a restart.
    pub async fn count_finished_jobs(&self) -> Result<()> {
        let since = self.jobs_counted.lock().map(|w| w.since_ms).unwrap_or(0);
        let finished = self.store.finished_jobs(since).await?;
        let Ok(mut w) = self.jobs_counted.lock() else {
            return Ok(());
        };
        for job in finished {
            if job.finished_at_ms < w.since_ms || w.seen.contains(&job.id) {
                continue;
            }
            if job.finished_at_ms > w.since_ms {
                w.since_ms = job.finished_at_ms;
                w.seen.clear();
            }
            w.seen.insert(job.id);
            self.metrics.count_finished_job(
                job.method,
                job.state.as_str(),
                job.duration_ms as f64 / 1e3,
            );
        }
        Ok(())
    }

    /// The version that corrects for `key`: the pinned `version`, or the active one.
    async fn corrector(&self, key: &CellKey, version: Option<i64>) -> Result<Arc<Loaded>> {
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
        let scale = self
            .store
            .rubric_scales()
            .await?
            .get(&key.rubric)
            .copied()
            .unwrap_or(crate::domain::Scale::DEFAULT);
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

    /// Corrects judge scores with the cell's active version (or `version`). `ids`, when given,
    /// are checked as item ids, one per score; rows count from 1.
    pub async fn correct(
        &self,
        judge: &str,
        rubric: &str,
        scores: &[f64],
        ids: Option<&[String]>,
        version: Option<i64>,
    ) -> Result<Correction> {
        let mut problems = Vec::new();
        let judge =
            JudgeName::parse(judge).map_err(|e| problems.push(Problem::at(None, "judge", e)));
        let rubric =
            RubricName::parse(rubric).map_err(|e| problems.push(Problem::at(None, "rubric", e)));
        let field = if ids.is_some() { "items" } else { "scores" };
        let max = self.limits.max_correct_batch;
        if scores.is_empty() {
            problems.push(Problem::at(None, field, "give at least one score"));
        } else if scores.len() > max {
            problems.push(Problem::at(
                None,
                field,
                format!(
                    "{} scores; at most {max} per request (limits.max_correct_batch): split the batch",
                    scores.len()
                ),
            ));
        }
        if version.is_some_and(|v| v < 1) {
            problems.push(Problem::at(None, "version", "versions count from 1"));
        }
        let score_field = if ids.is_some() { "score" } else { "scores" };
        for (i, s) in scores.iter().enumerate() {
            if !s.is_finite() {
                problems.push(Problem::at(
                    Some(i + 1),
                    score_field,
                    "must be a finite number",
                ));
            }
        }
        for (i, id) in ids.into_iter().flatten().enumerate() {
            if let Err(e) = ItemId::parse(id) {
                problems.push(Problem::at(Some(i + 1), "id", e));
            }
        }
        let (Ok(judge), Ok(rubric), true) = (judge, rubric, problems.is_empty()) else {
            return Err(Error::rejected(
                "the correction request was refused",
                problems,
            ));
        };
        let key = CellKey { judge, rubric };
        let loaded = self.corrector(&key, version).await?;
        let results = match (&loaded.version.fitted, &loaded.table) {
            (Fitted::Bayes { posterior, .. }, _) => {
                CorrectedScores::Bayes(scores.iter().map(|&j| posterior.correct(j)).collect())
            }
            (Fitted::Flow(flow), Some(table)) => {
                let mut out: Vec<Option<(f64, f64)>> =
                    scores.iter().map(|&j| table.correct(j)).collect();
                // Scores off the table (far outside the anchors) are evaluated directly.
                let off: Vec<usize> = (0..scores.len()).filter(|&i| out[i].is_none()).collect();
                if !off.is_empty() {
                    let xs: Vec<f64> = off.iter().map(|&i| scores[i]).collect();
                    let flow = flow.clone();
                    let direct = tokio::task::spawn_blocking(move || {
                        flow.weights.correct_direct(flow.rubric, &xs)
                    })
                    .await
                    .map_err(|_| Error::Internal("flow evaluation panicked".into()))?
                    .map_err(Error::Internal)?;
                    for (i, d) in off.into_iter().zip(direct) {
                        out[i] = Some(d);
                    }
                }
                let corrected: Vec<FlowCorrected> = out
                    .into_iter()
                    .map(|c| {
                        let (score, sigma) = c.unwrap_or((f64::NAN, f64::NAN));
                        FlowCorrected {
                            score,
                            sigma,
                            review: sigma > flow.review_sigma,
                        }
                    })
                    .collect();
                self.metrics.observe_flow(
                    &key,
                    corrected.iter().map(|c| c.sigma),
                    corrected.iter().filter(|c| c.review).count(),
                );
                CorrectedScores::Flow(corrected)
            }
            (Fitted::QuantileMap(map), _) => {
                CorrectedScores::Plain(scores.iter().map(|&j| map.correct(j)).collect())
            }
            (Fitted::Identity, _) => CorrectedScores::Plain(scores.to_vec()),
            (Fitted::Flow(_), None) => {
                return Err(Error::Internal(
                    "a flow version was loaded without its table".into(),
                ));
            }
        };
        self.metrics
            .count_corrections(&key, loaded.version.method(), scores.len());
        Ok(Correction {
            version: loaded,
            results,
        })
    }
}
