//! Training jobs: queueing a checked request, running it off the async runtime, storing its
//! versions, failing or cancelling it, and counting finished jobs into the metrics.

use super::families::{Operations, Pairwise, Panels, Versions};
use std::collections::HashSet;
use std::sync::Arc;

use super::training::{self, CellData, Progress};
use crate::domain::calibration::{Job, JobId, JobState, NewVersion};
use crate::domain::pairwise::version::NewPreference;
use crate::domain::training::{CovariateChoice, TrainingRequest, VersionChoice};
use crate::domain::{Anchor, CovariateName, JudgeName, JudgeVersion, Problem, RubricName};
use crate::error::{Error, Result};
use crate::store::{ClaimedJob, VersionAnchors};
use judgecal_stats::covariates::Row;
use training::CovariateRows;

/// The finished jobs already counted: those finished before `since_ms`, and `seen` at it.
#[derive(Default)]
pub struct JobWatermark {
    since_ms: i64,
    seen: HashSet<JobId>,
}

/// What a job computed: its versions, and whether to activate them whatever their checks say.
pub struct Trained {
    pub versions: Vec<NewVersion>,
    /// A pairwise job's versions (and no `versions`).
    pub preferences: Vec<NewPreference>,
    pub force: bool,
    /// The judge version whose anchors were fitted.
    pub judge_version: Option<JudgeVersion>,
}

/// The covariates `anchors` carry, by name, each once.
fn carried_covariates(anchors: &[Anchor]) -> Vec<&str> {
    let mut carried: Vec<&str> = anchors
        .iter()
        .flat_map(|a| a.covariates.keys().map(|k| k.as_str()))
        .collect();
    carried.sort_unstable();
    carried.dedup();
    carried
}

/// The covariates a training that named none considers: those every anchor of every cell
/// carries with more than one value, the first `MAX_FITTED` by name.
fn considered_covariates(snapshot: &[(RubricName, Vec<Anchor>)]) -> Vec<CovariateName> {
    let all: Vec<&Anchor> = snapshot.iter().flat_map(|(_, a)| a).collect();
    let Some(first) = all.first() else {
        return Vec::new();
    };
    first
        .covariates
        .iter()
        .filter(|(name, value)| {
            all.iter().all(|a| a.covariates.contains_key(*name))
                && all.iter().any(|a| a.covariates.get(*name) != Some(value))
        })
        .map(|(name, _)| name.clone())
        .take(crate::domain::covariates::MAX_FITTED)
        .collect()
}

/// The named covariates every anchor must carry: problems name the cell, the covariate and
/// the first items that lack it.
fn missing_named(request: &TrainingRequest, snapshot: &[(RubricName, Vec<Anchor>)]) -> Result<()> {
    let mut problems = Vec::new();
    for (i, name) in request.covariates.named().iter().enumerate() {
        for (rubric, anchors) in snapshot {
            let lacking: Vec<&str> = anchors
                .iter()
                .filter(|a| !a.covariates.contains_key(name))
                .map(|a| a.item_id.as_str())
                .collect();
            if !anchors.is_empty() && lacking.len() == anchors.len() {
                // No anchor carries it: most likely a misspelt name, so say which they carry.
                let carried = carried_covariates(anchors);
                problems.push(Problem::at(
                    None,
                    &format!("covariates[{i}]"),
                    format!(
                        "none of the {} anchors of cell {}/{rubric} carry covariate {name}; they carry {}",
                        anchors.len(),
                        request.judge,
                        if carried.is_empty() {
                            "no covariates: upload them with their covariates (?replace=true), or train without it".to_owned()
                        } else {
                            format!("{}: name one of those", carried.join(", "))
                        }
                    ),
                ));
            } else if !lacking.is_empty() {
                let shown: Vec<&str> = lacking.iter().take(5).copied().collect();
                problems.push(Problem::at(
                    None,
                    &format!("covariates[{i}]"),
                    format!(
                        "{} of the {} anchors of cell {}/{rubric} do not carry covariate {name} (items {}{}); \
                         upload them again with it (?replace=true), or train without it",
                        lacking.len(),
                        anchors.len(),
                        request.judge,
                        shown.join(", "),
                        if lacking.len() > shown.len() { ", …" } else { "" }
                    ),
                ));
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::rejected(
        "the anchors do not carry the covariates the training names",
        problems,
    ))
}

/// A training's covariates and each rubric's anchors with them, in that order; `None` where
/// it fits the judge score alone (none named, or none carried). An anchor missing a named one
/// refuses the job.
fn covariate_rows(
    request: &TrainingRequest,
    snapshot: &[(RubricName, Vec<Anchor>)],
) -> Result<Option<CovariateRows>> {
    let names: Vec<CovariateName> = match &request.covariates {
        CovariateChoice::Carried => considered_covariates(snapshot),
        CovariateChoice::Named(names) => {
            missing_named(request, snapshot)?;
            names.clone()
        }
    };
    if names.is_empty() {
        return Ok(None);
    }
    let rows = snapshot
        .iter()
        .map(|(_, anchors)| {
            anchors
                .iter()
                .map(|a| Row {
                    score: a.judge_score,
                    covariates: names
                        .iter()
                        .map(|n| a.covariates.get(n).copied().unwrap_or(f64::NAN))
                        .collect(),
                    reference: a.reference_score,
                })
                .collect()
        })
        .collect();
    Ok(Some(CovariateRows {
        carried: request.covariates == CovariateChoice::Carried,
        names: names.iter().map(ToString::to_string).collect(),
        rows,
    }))
}

fn refused(problems: Vec<Problem>) -> Error {
    Error::rejected("the training request was refused", problems)
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
        Error::Conflict { message, .. }
        | Error::NotFound(message)
        | Error::TimedOut(message)
        | Error::Internal(message) => message.clone(),
        Error::Storage(_) | Error::Migrate(_) => {
            "the store failed while training (see the service log); submit the job again".into()
        }
    }
}

/// A panel's inputs are its members' scores: covariates belong to a member judge's training.
fn no_panel_covariates(request: &TrainingRequest) -> Result<()> {
    if request.covariates.named().is_empty() {
        return Ok(());
    }
    Err(refused(vec![Problem::at(
        None,
        "covariates",
        format!(
            "{} is a panel: its members' scores are its inputs; train a member judge with covariates instead",
            request.judge
        ),
    )]))
}

/// Each rubric the queued request names still has the `min` anchors training needs.
fn still_enough(
    request: &TrainingRequest,
    snapshot: &[(RubricName, Vec<Anchor>)],
    min: usize,
) -> Result<()> {
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
    Ok(())
}

/// One judge version per job: the named one, or the newest (whose first anchor arrived last,
/// over all the judge's cells).
fn job_version(
    choice: &VersionChoice,
    versions: &[(RubricName, VersionAnchors)],
) -> Option<JudgeVersion> {
    match choice {
        VersionChoice::Exactly(v) => v.clone(),
        VersionChoice::Newest => versions
            .iter()
            .max_by(|a, b| {
                a.1.first_at_ms
                    .cmp(&b.1.first_at_ms)
                    .then(a.1.judge_version.cmp(&b.1.judge_version))
            })
            .and_then(|(_, v)| v.judge_version.clone()),
    }
}

/// A judge's cells of the job's judge version, with their anchor counts, against the
/// anchors training needs.
struct Eligible<'a> {
    judge: &'a JudgeName,
    cells: &'a [(RubricName, i64)],
    min: i64,
    /// ` of judge_version "v"`, or empty for the unversioned scores.
    of_version: String,
}

impl Eligible<'_> {
    /// The rubrics the request names (each once), a problem for each without the anchors.
    fn wanted(&self, wanted: &[RubricName], problems: &mut Vec<Problem>) -> Vec<RubricName> {
        let (judge, min, of_version) = (self.judge, self.min, &self.of_version);
        for (i, r) in wanted.iter().enumerate() {
            match self.cells.iter().find(|(rubric, _)| rubric == r) {
                None => problems.push(Problem::at(
                    None,
                    &format!("rubrics[{i}]"),
                    format!(
                        "judge {judge} has no anchors{of_version} for rubric {r}; its rubrics: {}",
                        self.cells
                            .iter()
                            .map(|(r, _)| r.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
                Some((rubric, n)) if *n < min => problems.push(Problem::at(
                    None,
                    &format!("rubrics[{i}]"),
                    format!(
                        "cell {judge}/{rubric} has {n} anchors{of_version}; training needs at least {min} (jobs.min_anchors)"
                    ),
                )),
                Some(_) => {}
            }
        }
        let mut wanted = wanted.to_vec();
        wanted.sort();
        wanted.dedup();
        wanted
    }

    /// Every rubric with the anchors training needs; a problem where none has.
    fn every(&self, problems: &mut Vec<Problem>) -> Vec<RubricName> {
        let eligible: Vec<RubricName> = self
            .cells
            .iter()
            .filter(|(_, n)| *n >= self.min)
            .map(|(r, _)| r.clone())
            .collect();
        if eligible.is_empty() {
            problems.push(Problem::at(
                None,
                "judge",
                format!(
                    "no cell of judge {} has the {} anchors{} training needs (jobs.min_anchors)",
                    self.judge, self.min, self.of_version
                ),
            ));
        }
        eligible
    }
}

impl Operations<'_> {
    /// Queues a checked training request. Without `rubrics`, every cell of the judge with at
    /// least `jobs.min_anchors` anchors is trained.
    pub async fn submit_training(&self, request: TrainingRequest) -> Result<Job> {
        if let Some(panel) = self.store.panel_rows().panel(&request.judge).await? {
            no_panel_covariates(&request)?;
            return Panels(self).submit_panel_training(request, panel).await;
        }
        let judge = &request.judge;
        let mut problems = Vec::new();
        let min = self.jobs.min_anchors as i64;
        let versions = self
            .store
            .version_rows()
            .judge_versions(judge, None)
            .await?;
        // A judge whose cells hold comparisons trains the calibrated preference: where it has
        // no anchors, or where every rubric the request names is a pairwise cell.
        let pairwise = self.store.pairwise_rows().comparison_cells(judge).await?;
        let names_pairwise = request.rubrics.as_ref().is_some_and(|wanted| {
            !wanted.is_empty()
                && wanted
                    .iter()
                    .all(|r| pairwise.iter().any(|c| &c.rubric == r))
        });
        if !pairwise.is_empty() && (versions.is_empty() || names_pairwise) {
            return Pairwise(self)
                .submit_pairwise_training(request, pairwise)
                .await;
        }
        if versions.is_empty() {
            return Err(Error::NotFound(format!(
                "judge {judge} has no anchors; upload some with POST /v1/anchors first"
            )));
        }
        let judge_version = job_version(&request.judge_version, &versions);
        let cells: Vec<(RubricName, i64)> = versions
            .iter()
            .filter(|(_, v)| v.judge_version == judge_version)
            .map(|(r, v)| (r.clone(), v.anchor_count))
            .collect();
        if cells.is_empty() {
            let named: Vec<String> = {
                let mut all: Vec<String> = versions
                    .iter()
                    .map(|(_, v)| JudgeVersion::describe(v.judge_version.as_ref()))
                    .collect();
                all.sort();
                all.dedup();
                all
            };
            return Err(refused(vec![Problem::at(
                None,
                "judge_version",
                format!(
                    "judge {judge} has no anchors of judge_version {}; its versions: {}",
                    JudgeVersion::describe(judge_version.as_ref()),
                    named.join(", ")
                ),
            )]));
        }
        let eligible = Eligible {
            judge,
            cells: &cells,
            min,
            of_version: match &judge_version {
                Some(v) => format!(" of judge_version {v:?}"),
                None => String::new(),
            },
        };
        let rubrics = match &request.rubrics {
            Some(wanted) => eligible.wanted(wanted, &mut problems),
            None => eligible.every(&mut problems),
        };
        self.queue_resolved(request, rubrics, judge_version, problems)
            .await
    }

    /// Queues `request` resolved to `rubrics` and `judge_version`, or refuses it with
    /// `problems` where there are any.
    pub(super) async fn queue_resolved(
        &self,
        request: TrainingRequest,
        rubrics: Vec<RubricName>,
        judge_version: Option<JudgeVersion>,
        problems: Vec<Problem>,
    ) -> Result<Job> {
        if !problems.is_empty() {
            return Err(refused(problems));
        }
        let request = TrainingRequest {
            rubrics: Some(rubrics),
            judge_version: VersionChoice::Exactly(judge_version),
            ..request
        };
        self.queue(request).await
    }

    /// Stores a checked, resolved request as a queued job and wakes a worker; where an
    /// identical request is still queued, that job (its snapshot is taken when it starts, so
    /// it sees every anchor uploaded before).
    pub(super) async fn queue(&self, request: TrainingRequest) -> Result<Job> {
        let fresh = JobId::new();
        let id = self.store.job_rows().insert_job(fresh, &request).await?;
        if id == fresh {
            self.job_queued.notify_one();
            tracing::info!(job_id = %id, judge = %request.judge, method = %request.kind(), "training job queued");
        } else {
            tracing::info!(job_id = %id, judge = %request.judge, "the same training request is queued already: its job answers");
        }
        self.job(id).await
    }

    /// A job as the store holds it; one that succeeded is served by this process by the time
    /// its caller reads it (see `serve_finished`).
    pub async fn job(&self, id: JobId) -> Result<Job> {
        let job = self
            .store
            .job_rows()
            .job(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no job {id}")))?;
        Versions(self).serve_finished(&job).await?;
        Ok(job)
    }

    /// Runs a claimed job's computation: parses its request, reads the snapshot, fits off the
    /// async runtime.
    pub async fn run_training(&self, job: &ClaimedJob, progress: Arc<Progress>) -> Result<Trained> {
        let request = TrainingRequest::from_json(&job.request)
            .map_err(|p| Error::rejected("the stored job's request", p))?;
        if let Some(panel) = self.store.panel_rows().panel(&request.judge).await? {
            return Panels(self)
                .run_panel_training(request, panel, progress)
                .await;
        }
        // A queued request names its rubrics: pairwise where they are comparison cells.
        let pairwise = self
            .store
            .pairwise_rows()
            .comparison_cells(&request.judge)
            .await?;
        if request.rubrics.as_ref().is_some_and(|wanted| {
            !wanted.is_empty()
                && wanted
                    .iter()
                    .all(|r| pairwise.iter().any(|c| &c.rubric == r))
        }) {
            return Pairwise(self)
                .run_pairwise_training(request, progress)
                .await;
        }
        let scales = self.store.rubric_scales().await?;
        let snapshot = self
            .store
            .version_rows()
            .judge_anchors(
                &request.judge,
                request.rubrics.as_deref(),
                request.judge_version.exactly(),
            )
            .await?;
        still_enough(&request, &snapshot, self.jobs.min_anchors)?;
        let rows = covariate_rows(&request, &snapshot)?;
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
        let force = request.force();
        let judge_version = request.judge_version.exactly().cloned();
        let versions = crate::error::blocking("the training thread", move || match rows {
            None => training::train(&cells, &request.plan, &progress),
            Some(rows) => training::train_covariates(&cells, &rows, &request.plan, &progress),
        })
        .await?
        .map_err(|e| Error::Internal(e.to_string()))?;
        Ok(Trained {
            versions,
            preferences: Vec::new(),
            force,
            judge_version,
        })
    }

    /// Stores a job's versions (activating those that passed, or all with `force`) and marks
    /// it succeeded; `false` when this process lost the job's lease meanwhile. The versions
    /// this process just trained are served from memory at once, so a caller that sees the
    /// job succeed here corrects with them (other processes load them on their next refresh).
    pub async fn finish_training(
        &self,
        job: &ClaimedJob,
        owner: &str,
        trained: &Trained,
    ) -> Result<bool> {
        if !trained.preferences.is_empty() {
            let Some(stored) = self
                .store
                .pairwise_rows()
                .finish_preference_job(
                    job.id,
                    owner,
                    &job.judge,
                    trained.judge_version.as_ref(),
                    &trained.preferences,
                )
                .await?
            else {
                return Ok(false);
            };
            for v in &stored {
                self.metrics.set_preference(v);
            }
            self.count_finished_jobs().await?;
            return Ok(true);
        }
        let Some(stored) = self
            .store
            .version_rows()
            .finish_job(
                job.id,
                owner,
                &job.judge,
                trained.judge_version.as_ref(),
                &trained.versions,
                trained.force,
            )
            .await?
        else {
            return Ok(false);
        };
        let seen = self.calibrators.seen();
        for v in &stored {
            Versions(self).serve_judge_version(v).await?;
        }
        for v in stored.into_iter().filter(|v| v.active) {
            Versions(self).install(v, seen).await?;
        }
        self.count_finished_jobs().await?;
        Ok(true)
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
        let max_attempts = self.jobs.max_attempts;
        if self
            .store
            .job_rows()
            .end_job(job.id, owner, state, &text, max_attempts)
            .await?
        {
            self.count_finished_jobs().await?;
        }
        Ok(())
    }

    /// Cancels a job: at once when queued; when running, its process stops it within a lease
    /// renewal (jobs.lease_secs / 3). A finished job cannot be cancelled.
    pub async fn cancel(&self, id: JobId) -> Result<Job> {
        match self.store.job_rows().cancel_job(id).await? {
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

    /// Counts jobs finished since the last count (by any process) into the training metrics,
    /// so every process reports the store's totals, also after a restart.
    pub async fn count_finished_jobs(&self) -> Result<()> {
        let since = self.jobs_counted.lock().map(|w| w.since_ms).unwrap_or(0);
        let finished = self.store.job_rows().finished_jobs(since).await?;
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
                job.kind,
                job.state.as_str(),
                job.duration_ms as f64 / 1e3,
            );
        }
        Ok(())
    }
}
