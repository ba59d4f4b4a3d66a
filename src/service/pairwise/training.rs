//! Training pairwise cells (`POST /v1/judges/{judge}/calibrations` on a judge whose cells hold
//! comparisons): `auto` chooses the calibrated preference by held-out log-loss
//! (`judgecal_stats::pairwise::choice::choose`), and each version records the choice, its
//! held-out calibration and the judge's biases beside the people's
//! (`judgecal_stats::pairwise::bias`). The versions are read back by the cell's report route,
//! its picture and the metrics.

use crate::service::families::{Operations, Pairwise};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::domain::calibration::Job;
use crate::domain::pairwise::comparisons::Comparison;
use crate::domain::pairwise::version::{
    self as pref, Figures, LENGTH_COVARIATES, MIN_LABELLED, NewPreference, PanelMember,
    PreferenceReport, PreferenceVersion, Reliability, ServedMap,
};
use crate::domain::training::{Plan, TrainingRequest, VersionChoice};
use crate::domain::{CellKey, CovariateName, GroupName, JudgeVersion, Problem, RubricName};
use crate::error::{Error, Result};
use crate::service::jobs::Trained;
use crate::service::training::Progress;
use crate::store::ComparisonCell;
use judgecal_stats::Corrected;
use judgecal_stats::conformal::Intervals;
use judgecal_stats::pairwise::bias::{Biases, Judged};
use judgecal_stats::pairwise::choice;
use judgecal_stats::pairwise::preference::{Labelled, Verdicts};
use judgecal_stats::pairwise::rate::FOLDS;

/// Bins of the held-out calibration picture.
const RELIABILITY_BINS: usize = 10;

fn refused(problems: Vec<Problem>) -> Error {
    Error::rejected("the training request was refused", problems)
}

/// SHA-256 over the comparisons in item order: two trainings with the same digest read the
/// same rows.
fn digest(rows: &[Comparison]) -> String {
    let mut h = Sha256::new();
    for c in rows {
        h.update(c.item_id.as_str().as_bytes());
        h.update([0]);
        h.update(c.a.as_str().as_bytes());
        h.update([0]);
        h.update(c.b.as_str().as_bytes());
        for v in [Some(c.verdict), c.verdict_swapped, c.preference] {
            h.update(v.map_or(u64::MAX, f64::to_bits).to_le_bytes());
        }
        for (name, value) in &c.covariates {
            h.update([2]);
            h.update(name.as_str().as_bytes());
            h.update(value.to_bits().to_le_bytes());
        }
    }
    crate::auth::hex(&h.finalize())
}

/// A pairwise panel's comparisons: each comparison's members' verdicts (in member order,
/// beside the comparisons), and each member's judge, judge version and comparisons in the
/// rubric before the join.
pub struct PanelRows<'a> {
    pub verdicts: &'a [Vec<(f64, Option<f64>)>],
    pub members: Vec<(String, Option<String>, usize)>,
}

/// One cell's version from all its comparisons of one judge version: the map on the labelled
/// ones (the covariates all of them carry, per-system terms over their systems), the biases
/// on every one (the judge's shares read the unlabelled verdicts too). A panel's map reads its
/// members' verdicts (`panel`), and its report gives each member's own map beside it.
pub fn train_cell(
    rubric: RubricName,
    all: &[Comparison],
    panel: Option<&PanelRows>,
    seed: u64,
) -> std::result::Result<NewPreference, String> {
    let labelled: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].preference.is_some())
        .collect();
    let systems: Vec<&GroupName> = all
        .iter()
        .flat_map(|c| [&c.a, &c.b])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index: BTreeMap<&GroupName, usize> =
        systems.iter().enumerate().map(|(i, &s)| (s, i)).collect();
    let mut covariates: Vec<CovariateName> = labelled
        .first()
        .map(|&i| all[i].covariates.keys().cloned().collect())
        .unwrap_or_default();
    for &i in &labelled {
        covariates.retain(|n| all[i].covariates.contains_key(n));
    }
    let verdicts = |i: usize| {
        let c = &all[i];
        let base = match panel {
            Some(p) => Verdicts::of_panel(p.verdicts[i].clone()),
            None => Verdicts::of(c.verdict, c.verdict_swapped),
        };
        Verdicts {
            covariates: covariates.iter().map(|n| c.covariates[n]).collect(),
            systems: Some((index[&c.a], index[&c.b])),
            ..base
        }
    };
    let rows: Vec<Labelled> = labelled
        .iter()
        .map(|&i| Labelled {
            verdicts: verdicts(i),
            preference: all[i].preference.unwrap_or(0.5),
        })
        .collect();
    let choice = choice::choose(&rows, Some(systems.len()), FOLDS, seed)?;
    let members = panel_members(&choice, panel)?;
    let served = served_map(&choice, &rows, seed);
    let figures = |inputs: String, h: &choice::HeldOutMap| Figures {
        inputs,
        log_loss: h.log_loss,
        accuracy: h.accuracy,
    };
    let reliability = reliability(&choice, &rows);
    let biases = biases(all, &systems, &index);
    Ok(NewPreference {
        rubric,
        comparison_count: all.len() as i64,
        labelled_count: rows.len() as i64,
        digest: digest(all),
        report: PreferenceReport {
            chosen: choice.candidate.name(),
            candidates: choice
                .candidates
                .iter()
                .map(|(c, h)| figures(c.name(), h))
                .collect(),
            raw: figures("raw verdict".into(), &choice::raw(&rows)),
            covariates,
            systems: systems.into_iter().cloned().collect(),
            reliability,
            biases,
            served: Some(served),
            panel: members,
        },
    })
}

/// A pairwise version's picture: its held-out calibration, the judge's biases beside the
/// people's, and each system's favouritism.
fn picture_of(key: &CellKey, v: &PreferenceVersion) -> crate::plots::PairwisePicture {
    let r = &v.report;
    let estimate = |name: &str, s: Option<pref::Share>| {
        s.map(|s| crate::plots::Estimate {
            name: name.to_owned(),
            estimate: s.estimate,
            interval: s.interval,
        })
    };
    let b = &r.biases;
    let chosen = r.candidates.iter().find(|c| c.inputs == r.chosen);
    crate::plots::PairwisePicture {
        title: format!(
            "{key}: version {} ({}), {} comparisons, {} labelled; held-out log-loss {} (raw verdict {:.3})",
            v.version,
            r.chosen,
            v.comparison_count,
            v.labelled_count,
            chosen.map_or("—".to_owned(), |c| format!("{:.3}", c.log_loss)),
            r.raw.log_loss
        ),
        reliability: r
            .reliability
            .iter()
            .map(|b| (b.predicted, b.observed))
            .collect(),
        shares: vec![
            (
                "first shown wins".into(),
                estimate("judge", b.judge_first),
                estimate("people", b.people_first),
            ),
            (
                "longer wins".into(),
                estimate("judge", b.judge_longer),
                estimate("people", b.people_longer),
            ),
            ("flips on swap".into(), estimate("judge", b.flips), None),
        ],
        favouritism: b
            .favouritism
            .iter()
            .map(|f| crate::plots::Estimate {
                name: f.system.to_string(),
                estimate: f.estimate,
                interval: f.interval,
            })
            .collect(),
    }
}

/// Each panel member's own map (`auto` weighed each member alone beside the panel, on the
/// same folds): its lowest held-out log-loss.
fn panel_members(
    choice: &choice::Choice,
    panel: Option<&PanelRows>,
) -> std::result::Result<Vec<PanelMember>, String> {
    let mut members = Vec::new();
    for (m, (judge, judge_version, comparisons)) in
        panel.iter().flat_map(|p| &p.members).enumerate()
    {
        let (candidate, alone) = choice
            .candidates
            .iter()
            .filter(|(c, _)| c.alone == Some(m))
            .min_by(|a, b| a.1.log_loss.total_cmp(&b.1.log_loss))
            .ok_or_else(|| format!("no map of panel member {judge} alone"))?;
        members.push(PanelMember {
            judge: judge.clone(),
            judge_version: judge_version.clone(),
            comparisons: *comparisons,
            alone: Figures {
                inputs: candidate.name(),
                log_loss: alone.log_loss,
                accuracy: alone.accuracy,
            },
        });
    }
    Ok(members)
}

/// The band the drift alarm counts misses of: the people's preference around the held-out
/// predictions, per bin of the verdict (the CV construction, as for judge scores).
fn served_map(choice: &choice::Choice, rows: &[Labelled], seed: u64) -> ServedMap {
    let levels: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (pref::verdict_level(&r.verdicts), r.preference))
        .collect();
    let held_out: Vec<Option<Corrected>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            Some(Corrected::score(
                choice.cross_fit.held_out_prediction(i, &r.verdicts),
            ))
        })
        .collect();
    ServedMap {
        map: choice.map.clone(),
        intervals: Intervals::of(&levels, &held_out, seed),
    }
}

/// Held-out predictions against the people's preferences, in bins of equal count.
fn reliability(choice: &choice::Choice, rows: &[Labelled]) -> Vec<Reliability> {
    let mut held: Vec<(f64, f64)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                choice.cross_fit.held_out_prediction(i, &r.verdicts),
                r.preference,
            )
        })
        .collect();
    held.sort_by(|a, b| a.0.total_cmp(&b.0));
    let bins = RELIABILITY_BINS.min(held.len() / 10).max(1);
    (0..bins)
        .map(|k| {
            let part = &held[k * held.len() / bins..(k + 1) * held.len() / bins];
            let n = part.len() as f64;
            Reliability {
                predicted: part.iter().map(|p| p.0).sum::<f64>() / n,
                observed: part.iter().map(|p| p.1).sum::<f64>() / n,
                comparisons: part.len(),
            }
        })
        .collect()
}

/// The judge's biases beside the people's, on every comparison (the judge's shares read the
/// unlabelled verdicts too).
fn biases(
    all: &[Comparison],
    systems: &[&GroupName],
    index: &BTreeMap<&GroupName, usize>,
) -> pref::Biases {
    let length = LENGTH_COVARIATES
        .iter()
        .filter_map(|n| CovariateName::parse(n).ok())
        .find(|n| all.iter().any(|c| c.covariates.contains_key(n)));
    let judged: Vec<Judged> = all
        .iter()
        .map(|c| Judged {
            verdict: c.verdict,
            swapped: c.verdict_swapped,
            preference: c.preference,
            a_longer: length
                .as_ref()
                .and_then(|n| c.covariates.get(n))
                .and_then(|&v| (v != 0.0).then_some(v > 0.0)),
            systems: Some((index[&c.a], index[&c.b])),
        })
        .collect();
    let b = Biases::of(&judged, systems.len());
    let share = |s: Option<judgecal_stats::pairwise::bias::Share>| {
        s.map(|s| pref::Share {
            estimate: s.estimate,
            interval: s.interval,
            comparisons: s.comparisons,
        })
    };
    pref::Biases {
        agreement: share(b.agreement),
        judge_first: share(b.judge_first),
        people_first: share(b.people_first),
        flips: share(b.flips),
        judge_longer: share(b.judge_longer),
        people_longer: share(b.people_longer),
        length_covariate: length,
        favouritism: b
            .favouritism
            .iter()
            .map(|f| pref::Favouritism {
                system: systems[f.system].clone(),
                estimate: f.estimate,
                interval: f.interval,
                comparisons: f.comparisons,
            })
            .collect(),
    }
}

/// The judge version of `cells` whose first comparison arrived last (`None`: unversioned).
pub(in crate::service) fn newest_version(cells: &[ComparisonCell]) -> Option<JudgeVersion> {
    cells
        .iter()
        .max_by(|a, b| {
            a.first_at_ms
                .cmp(&b.first_at_ms)
                .then(a.judge_version.cmp(&b.judge_version))
        })
        .and_then(|c| c.judge_version.clone())
}

/// Trains each rubric's rows (`train`) off the async runtime, reporting `step` and progress
/// and stopping where the job is cancelled.
pub(in crate::service) async fn train_blocking<T: Send + 'static>(
    cells: Vec<(RubricName, T)>,
    step: &'static str,
    progress: Arc<Progress>,
    train: impl Fn(RubricName, T) -> std::result::Result<NewPreference, String> + Send + 'static,
) -> Result<Vec<NewPreference>> {
    crate::error::blocking("the training thread", move || {
        let total = cells.len().max(1) as f64;
        let mut out = Vec::with_capacity(cells.len());
        for (k, (rubric, rows)) in cells.into_iter().enumerate() {
            if progress.cancel.load(std::sync::atomic::Ordering::Relaxed) {
                return Err("cancelled".to_owned());
            }
            progress.set_detail(
                serde_json::json!({"step": step, "rubric": rubric.as_str()}).to_string(),
            );
            out.push(train(rubric, rows)?);
            progress.set((k + 1) as f64 / total);
        }
        Ok(out)
    })
    .await?
    .map_err(Error::Internal)
}

impl Pairwise<'_> {
    /// Queues the training of a judge whose cells hold comparisons: `auto` only, no
    /// covariates named (the map reads those the comparisons carry), one judge version, each
    /// cell with at least [`MIN_LABELLED`] labelled comparisons of it.
    pub(in crate::service) async fn submit_pairwise_training(
        &self,
        request: TrainingRequest,
        cells: Vec<ComparisonCell>,
    ) -> Result<Job> {
        let judge = &request.judge;
        let mut problems = Vec::new();
        if let Plan::Method(job) = &request.plan {
            problems.push(Problem::at(
                None,
                "method",
                format!(
                    "judge {judge} holds pairwise comparisons: train it with {{\"method\": \"auto\"}} (the calibrated preference); {} reads judge scores",
                    job.options.method().as_str()
                ),
            ));
        }
        if !request.covariates.named().is_empty() {
            problems.push(Problem::at(
                None,
                "covariates",
                format!(
                    "judge {judge} holds pairwise comparisons: the calibrated preference reads the covariates every labelled comparison carries; train without naming any"
                ),
            ));
        }
        let judge_version = match &request.judge_version {
            VersionChoice::Exactly(v) => v.clone(),
            VersionChoice::Newest => newest_version(&cells),
        };
        let of_version: Vec<&ComparisonCell> = cells
            .iter()
            .filter(|c| c.judge_version == judge_version)
            .collect();
        let describe = JudgeVersion::describe(judge_version.as_ref());
        if of_version.is_empty() {
            let mut named: Vec<String> = cells
                .iter()
                .map(|c| JudgeVersion::describe(c.judge_version.as_ref()))
                .collect();
            named.sort();
            named.dedup();
            problems.push(Problem::at(
                None,
                "judge_version",
                format!(
                    "judge {judge} has no comparisons of judge_version {describe}; its versions: {}",
                    named.join(", ")
                ),
            ));
            return Err(refused(problems));
        }
        let short = |c: &ComparisonCell| {
            format!(
                "cell {judge}/{} has {} labelled comparison{} of judge_version {describe}; training needs at least {MIN_LABELLED} (POST /v1/comparisons with preference)",
                c.rubric,
                c.labelled,
                if c.labelled == 1 { "" } else { "s" }
            )
        };
        let rubrics: Vec<RubricName> = match &request.rubrics {
            Some(wanted) => {
                for (i, r) in wanted.iter().enumerate() {
                    match of_version.iter().find(|c| &c.rubric == r) {
                        None => problems.push(Problem::at(
                            None,
                            &format!("rubrics[{i}]"),
                            format!(
                                "judge {judge} has no comparisons of judge_version {describe} for rubric {r}; its rubrics: {}",
                                of_version
                                    .iter()
                                    .map(|c| c.rubric.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )),
                        Some(c) if (c.labelled as usize) < MIN_LABELLED => {
                            problems.push(Problem::at(None, &format!("rubrics[{i}]"), short(c)));
                        }
                        Some(_) => {}
                    }
                }
                let mut wanted = wanted.clone();
                wanted.sort();
                wanted.dedup();
                wanted
            }
            None => {
                let eligible: Vec<RubricName> = of_version
                    .iter()
                    .filter(|c| c.labelled as usize >= MIN_LABELLED)
                    .map(|c| c.rubric.clone())
                    .collect();
                if eligible.is_empty() {
                    let why: Vec<String> = of_version.iter().map(|c| short(c)).collect();
                    problems.push(Problem::at(None, "judge", why.join("; ")));
                }
                eligible
            }
        };
        Operations(self)
            .queue_resolved(request, rubrics, judge_version, problems)
            .await
    }

    /// Runs a queued pairwise job: reads each cell's comparisons of the job's judge version
    /// and trains it off the async runtime.
    pub(in crate::service) async fn run_pairwise_training(
        &self,
        request: TrainingRequest,
        progress: Arc<Progress>,
    ) -> Result<Trained> {
        let seed = request.plan.seed();
        let version = request.judge_version.exactly().cloned();
        let mut cells = Vec::new();
        for rubric in request.rubrics.iter().flatten() {
            let key = CellKey {
                judge: request.judge.clone(),
                rubric: rubric.clone(),
            };
            let rows = self
                .store
                .pairwise_rows()
                .cell_comparisons(&key, version.as_ref(), false)
                .await?;
            let labelled = rows.iter().filter(|c| c.preference.is_some()).count();
            if labelled < MIN_LABELLED {
                return Err(Error::rejected(
                    "the comparisons changed since the job was queued",
                    vec![Problem::at(
                        None,
                        "rubrics",
                        format!(
                            "cell {key} has {labelled} labelled comparisons now; training needs at least {MIN_LABELLED}"
                        ),
                    )],
                ));
            }
            cells.push((rubric.clone(), rows));
        }
        let versions = train_blocking(
            cells,
            "choosing the calibrated preference",
            progress,
            move |rubric, rows| train_cell(rubric, &rows, None, seed),
        )
        .await?;
        Ok(Trained {
            versions: Vec::new(),
            preferences: versions,
            force: false,
            judge_version: version,
        })
    }

    /// A pairwise cell's versions, newest first. A cell of judge scores has none: its
    /// versions are its calibrators.
    pub async fn preference_versions(&self, key: &CellKey) -> Result<Vec<PreferenceVersion>> {
        let versions = match self.store.pairwise_rows().preference_versions(key).await {
            Err(Error::NotFound(_)) => {
                return Err(Error::NotFound(format!(
                    "no cell {key}; upload comparisons with POST /v1/comparisons"
                )));
            }
            other => other?,
        };
        if versions.is_empty() {
            let cell = self
                .store
                .cells()
                .await?
                .into_iter()
                .find(|c| &c.key == key);
            return match cell {
                Some(c) if c.comparison_count == 0 => Err(Error::NotFound(format!(
                    "cell {key} holds judge scores, not comparisons: its versions are at GET /v1/cells/{}/{}/calibrators",
                    key.judge, key.rubric
                ))),
                _ => Err(Error::NotFound(format!(
                    "cell {key} has no trained version yet: train it with POST /v1/judges/{}/calibrations {{\"method\": \"auto\"}}",
                    key.judge
                ))),
            };
        }
        Ok(versions)
    }

    /// The picture of a pairwise cell's newest version (or `version`); `None` for a cell of
    /// judge scores.
    pub(in crate::service) async fn preference_svg(
        &self,
        key: &CellKey,
        version: Option<i64>,
    ) -> Result<Option<String>> {
        // One indexed read for a cell of judge scores (no pairwise versions); the cell list
        // only where a cell has none, to tell an untrained pairwise cell from a scalar one.
        let versions = match self.store.pairwise_rows().preference_versions(key).await {
            Err(Error::NotFound(_)) => return Ok(None),
            other => other?,
        };
        if versions.is_empty() {
            let pairwise = self
                .store
                .cells()
                .await?
                .iter()
                .any(|c| &c.key == key && c.comparison_count > 0);
            if !pairwise {
                return Ok(None);
            }
        }
        let versions = if versions.is_empty() {
            self.preference_versions(key).await?
        } else {
            versions
        };
        let v = match version {
            None => &versions[0],
            Some(n) => versions
                .iter()
                .find(|v| v.version == n)
                .ok_or_else(|| Error::NotFound(format!("cell {key} has no version {n}")))?,
        };
        let picture = picture_of(key, v);
        crate::plots::draw_svg(crate::plots::pairwise_report(&picture))
            .await
            .map(Some)
    }

    /// Puts every pairwise cell's newest version into the metrics.
    pub async fn refresh_preference_metrics(&self) -> Result<()> {
        for v in self.store.pairwise_rows().newest_preferences().await? {
            self.metrics.set_preference(&v);
        }
        Ok(())
    }
}
