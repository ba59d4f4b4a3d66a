//! Run-level answers: a run's de-biased mean (`/v1/estimate`), the difference of two runs
//! (`/v1/compare`) and K runs ranked (`/v1/rank`), from a version and the anchors it could have
//! been fitted on (its `Anchored` source).

use super::families::{Panels, Runs, Versions};
use std::sync::Arc;

use super::run_inputs::Served;
use super::run_inputs::{Reading, Ready, RunInput};
use super::versions::Loaded;
use crate::domain::runlevel::{CompareRequest, EstimateRequest, RankRequest};
use crate::domain::{CellKey, JudgeVersion, Problem};
use crate::error::{Error, Result};
use crate::metrics::RunQuestion;
use crate::store::SharedItem;
use judgecal_stats::panel::missing;
use judgecal_stats::runlevel::rank::{self, RankSettings, Ranking};
use judgecal_stats::runlevel::{
    self, Anchored, Basis, RunComparison, RunEstimate, RunItems, SharedResidual, Source,
};
use judgecal_stats::warning::{Code, Warning};
use judgecal_stats::{Cell, MeanUncertainty};

/// How much work an answer is, before the model is asked: light enough for the request's own
/// thread, or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    Light,
    Heavy,
}

impl Work {
    /// Runs of `scores` items in all: light up to 4,096.
    fn of_scores(scores: usize) -> Self {
        if scores <= 4096 {
            Work::Light
        } else {
            Work::Heavy
        }
    }
}

impl Runs<'_> {
    fn check_size(&self, runs: &[(&str, &RunItems)]) -> Result<()> {
        self.check_sizes(runs.iter().map(|(f, r)| ((*f).to_owned(), *r)))
    }

    fn check_sizes<'a>(&self, runs: impl Iterator<Item = (String, &'a RunItems)>) -> Result<()> {
        let max = self.limits.max_correct_batch;
        let problems: Vec<Problem> = runs
            .filter(|(_, r)| r.scores.len() > max)
            .map(|(field, r)| {
                Problem::at(
                    None,
                    &field,
                    format!(
                        "{} scores; at most {max} per run (limits.max_correct_batch)",
                        r.scores.len()
                    ),
                )
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::rejected(
                "the estimate request was refused",
                problems,
            ))
        }
    }

    /// The anchors `loaded` could have been fitted on, read once per version.
    pub(super) async fn basis(&self, loaded: Arc<Loaded>) -> Result<(Arc<Loaded>, Arc<Cell>)> {
        let key = loaded.version.key.clone();
        let anchors = loaded
            .anchors
            .get_or_try_init(|| async {
                let v = &loaded.version;
                let mut pairs = match (&v.fusion, &v.covariate_layer) {
                    // A panel's corrector was fitted on its members' cross-fitted fused scores,
                    // a covariate version's on its layer's cross-fitted scores.
                    (Some(fusion), _) => fusion.anchors.clone(),
                    (None, Some(layer)) => layer.anchors.clone(),
                    (None, None) => self.store.drift_rows().anchors_before(v).await?,
                };
                // The store returns them in no set order; resampling wants a fixed one.
                pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
                let scale = Versions(self).scale_of(&key.rubric).await?;
                Ok::<_, Error>(Arc::new(Cell {
                    pairs,
                    scale: (scale.min, scale.max),
                }))
            })
            .await?
            .clone();
        Ok((loaded, anchors))
    }

    /// The version each run is corrected by. Runs that name no judge version, or all the same
    /// one, share the version a single request would get (with its mismatch warning); runs of
    /// different judge versions each need their own version's calibration (409 naming the run
    /// whose version has none).
    async fn resolve_runs(
        &self,
        key: &CellKey,
        version: Option<i64>,
        judge_versions: &[Option<JudgeVersion>],
        fields: &[String],
    ) -> Result<Served> {
        let first = judge_versions.first().cloned().flatten();
        if judge_versions.iter().all(|v| *v == first) {
            let resolved = Versions(self).served(key, version, first.as_ref()).await?;
            return Ok(Served {
                runs: vec![resolved.loaded.clone(); judge_versions.len()],
                loaded: resolved.loaded,
                mismatches: resolved.mismatch.into_iter().collect(),
                notes: resolved.members.into_iter().collect(),
                partial_items: 0,
                new_groups: Vec::new(),
                held: false,
                unused_covariates: None,
                unread_covariates: None,
                repeats: None,
            });
        }
        if version.is_some() {
            return Err(Error::rejected(
                "the request was refused",
                vec![Problem::at(
                    None,
                    "version",
                    "pins one calibrator version, but the runs name different judge versions: each is corrected by its own version's calibration; leave version out",
                )],
            ));
        }
        let mut runs = Vec::with_capacity(judge_versions.len());
        for (v, field) in judge_versions.iter().zip(fields) {
            let loaded = Versions(self)
                .served_exactly(key, v.as_ref(), field)
                .await?;
            loaded.without_covariates("an answer across judge versions")?;
            runs.push(loaded);
        }
        Ok(Served {
            loaded: runs[0].clone(),
            runs,
            mismatches: Vec::new(),
            partial_items: 0,
            new_groups: Vec::new(),
            held: false,
            unused_covariates: None,
            unread_covariates: None,
            notes: Vec::new(),
            repeats: None,
        })
    }

    /// Runs `f` on the version's model and anchors: on the request's own thread where it is
    /// `Work::Light` and the model answers in closed form, otherwise on a blocking thread
    /// (refits, libtorch, joint draws, large runs).
    async fn with_basis<T: Send + 'static>(
        (loaded, anchors): (Arc<Loaded>, Arc<Cell>),
        work: Work,
        f: impl FnOnce(Basis) -> judgecal_stats::error::Result<T> + Send + 'static,
    ) -> Result<T> {
        let model = &loaded.version.model;
        let light = work == Work::Light
            && matches!(model.mean_uncertainty(), MeanUncertainty::Line(_))
            && !model.heavy(&[]);
        let run = move || {
            f(Basis {
                model: &loaded.version.model,
                anchors: &anchors,
                groups: loaded.version.groups.as_ref(),
            })
        };
        let out = if light {
            run()
        } else {
            crate::error::blocking("working out an estimate", run).await?
        };
        Ok(out?)
    }

    /// The bases of the distinct versions among `runs`, and each run's index among them.
    async fn bases(
        &self,
        runs: &[Arc<Loaded>],
    ) -> Result<(Vec<(Arc<Loaded>, Arc<Cell>)>, Vec<usize>)> {
        let mut bases: Vec<(Arc<Loaded>, Arc<Cell>)> = Vec::new();
        let mut index = Vec::with_capacity(runs.len());
        for run in runs {
            match bases
                .iter()
                .position(|(l, _)| l.version.id == run.version.id)
            {
                Some(i) => index.push(i),
                None => {
                    index.push(bases.len());
                    bases.push(self.basis(run.clone()).await?);
                }
            }
        }
        Ok((bases, index))
    }

    /// The anchor items each pair of the versions in `bases` both scored: their correctors'
    /// errors are correlated through them.
    async fn shared_items_between(
        &self,
        key: &CellKey,
        bases: &[(Arc<Loaded>, Arc<Cell>)],
    ) -> Result<Vec<((usize, usize), Vec<SharedItem>)>> {
        let mut out = Vec::new();
        for x in 0..bases.len() {
            for y in x + 1..bases.len() {
                let items = self
                    .store
                    .version_rows()
                    .shared_items(
                        key,
                        bases[x].0.version.judge_version.as_ref(),
                        bases[y].0.version.judge_version.as_ref(),
                    )
                    .await?;
                out.push(((x, y), items));
            }
        }
        Ok(out)
    }

    /// Readies the runs for their versions: a panel's items' members' scores become the fused
    /// score the served version corrects (from the members present where one is missing,
    /// counted); a judge's version refuses panel items, and a panel's version bare scores;
    /// a score far outside the judge scores its run's version was trained on is refused,
    /// every one named (`runs[i]` is `served.runs[i]`'s run).
    async fn prepare_runs(
        &self,
        served: &mut Served,
        runs: Vec<RunInput<'_>>,
        read: Reading<'_>,
    ) -> Result<()> {
        let fusion = served.loaded.version.fusion.clone();
        if let Some(f) = &fusion {
            Panels(self)
                .check_panel(&served.loaded.version.key.judge, f)
                .await?;
        }
        let given = !read.hold.is_empty() || runs.iter().any(|r| r.inputs.covariates().is_some());
        if !given {
            served.read_bare();
        }
        let mut ready = Ready {
            served,
            fusion: fusion.as_ref(),
            read,
            // Each panel run's missing scores are tested at a share of the level, so that a
            // request whose scores are missing at random is refused at most at `LEVEL`.
            missing_level: missing::LEVEL
                / runs.iter().filter(|r| r.inputs.is_panel()).count().max(1) as f64,
            given,
            problems: Vec::new(),
        };
        for (i, input) in runs.into_iter().enumerate() {
            ready.run(i, input);
        }
        if ready.problems.is_empty() {
            Ok(())
        } else {
            Err(Error::rejected("the request was refused", ready.problems))
        }
    }

    /// The de-biased mean of one run.
    pub async fn estimate(&self, request: EstimateRequest) -> Result<(Served, RunEstimate)> {
        self.check_size(&[(request.field(), &request.run)])?;
        let served = self
            .resolve_runs(
                &request.key,
                request.version,
                std::slice::from_ref(&request.judge_version),
                &["judge_version".to_owned()],
            )
            .await?;
        let mut served = served;
        let mut run = request.run;
        self.prepare_runs(
            &mut served,
            vec![RunInput {
                prefix: "",
                run: &mut run,
                inputs: &request.inputs,
            }],
            Reading {
                hold: &request.hold,
                missing_at_random: request.assume_missing_at_random,
            },
        )
        .await?;
        served.repeats = self
            .apply_repeats(&served.runs, vec![("", &mut run, &request.inputs)])
            .await?;
        let basis = self.basis(served.loaded.clone()).await?;
        let n = run.scores.len();
        let settings = request.settings;
        let answer = Self::with_basis(basis, Work::of_scores(n), move |basis| {
            runlevel::estimate(basis, &run, &settings)
        })
        .await?;
        self.metrics
            .count_estimate(&request.key, RunQuestion::Estimate);
        let scale = Versions(self).scale_of(&request.key.rubric).await?;
        Ok((served, answer.within((scale.min, scale.max))))
    }

    /// The difference of two runs' de-biased means.
    pub async fn compare(&self, request: CompareRequest) -> Result<(Served, RunComparison)> {
        self.check_size(&[("a", &request.a), ("b", &request.b)])?;
        let served = self
            .resolve_runs(
                &request.key,
                request.version,
                &request.judge_versions,
                &["a.judge_version".to_owned(), "b.judge_version".to_owned()],
            )
            .await?;
        let mut served = served;
        let (mut a, mut b, settings) = (request.a, request.b, request.settings);
        let [ia, ib] = &request.inputs;
        self.prepare_runs(
            &mut served,
            vec![
                RunInput {
                    prefix: "a.",
                    run: &mut a,
                    inputs: ia,
                },
                RunInput {
                    prefix: "b.",
                    run: &mut b,
                    inputs: ib,
                },
            ],
            Reading {
                hold: &request.hold,
                missing_at_random: request.assume_missing_at_random,
            },
        )
        .await?;
        served.repeats = self
            .apply_repeats(&served.runs, vec![("a.", &mut a, ia), ("b.", &mut b, ib)])
            .await?;
        let n = a.scores.len() + b.scores.len();
        let (bases, _) = self.bases(&served.runs).await?;
        let answer = if bases.len() == 1 {
            let basis = bases
                .into_iter()
                .next()
                .ok_or_else(|| Error::Internal("no basis".into()))?;
            Self::with_basis(basis, Work::of_scores(n), move |basis| {
                runlevel::compare(basis, &a, &b, &settings)
            })
            .await?
        } else {
            // The two versions' anchors share items (re-scored ones carry the same reference):
            // their correctors' errors are correlated through them.
            let mut shared = self.shared_items_between(&request.key, &bases).await?;
            let shared = shared.pop().map(|(_, items)| items).unwrap_or_default();
            crate::error::blocking("comparing runs of two judge versions", move || {
                let sources = anchored_sources(&bases)?;
                let residuals = residuals(&shared, &sources[0], &sources[1])?;
                runlevel::compare_correlated(
                    (&sources[0], &a),
                    (&sources[1], &b),
                    &residuals,
                    &settings,
                )
            })
            .await??
        };
        self.metrics
            .count_estimate(&request.key, RunQuestion::Compare);
        let scale = Versions(self).scale_of(&request.key.rubric).await?;
        Ok((served, answer.within((scale.min, scale.max))))
    }

    /// K runs ranked once, outside a ranking session: the answer's warnings say that its
    /// family holds for this one look.
    pub async fn rank(&self, request: RankRequest) -> Result<(Served, Ranking)> {
        let (round, rounds) = (request.rank.round, request.rank.rounds);
        let (mut served, ranking) = self.ranked(request).await?;
        served.notes.push(Warning::new(
            Code::SingleLook,
            format!(
                "this ranking's family holds for this one look (round {round} of the {rounds} planned); asking again after more labels starts a new family, and the error over all the looks grows with each: open a ranking session (POST /v1/rank/sessions) to bind the looks"
            ),
        ));
        Ok((served, ranking))
    }

    /// K runs ranked, with their pairs' simultaneous intervals and, when asked, a label plan.
    pub(super) async fn ranked(&self, request: RankRequest) -> Result<(Served, Ranking)> {
        self.check_sizes(
            request
                .runs
                .iter()
                .enumerate()
                .map(|(i, (_, r))| (format!("runs[{i}].scores"), r)),
        )?;
        let fields: Vec<String> = (0..request.runs.len())
            .map(|i| format!("runs[{i}].judge_version"))
            .collect();
        let served = self
            .resolve_runs(
                &request.key,
                request.version,
                &request.judge_versions,
                &fields,
            )
            .await?;
        let mut served = served;
        let mut runs: Vec<RunItems> = request.runs.into_iter().map(|r| r.1).collect();
        let prefixes: Vec<String> = (0..runs.len()).map(|i| format!("runs[{i}].")).collect();
        self.prepare_runs(
            &mut served,
            runs.iter_mut()
                .zip(&request.inputs)
                .zip(&prefixes)
                .map(|((run, inputs), p)| RunInput {
                    prefix: p.as_str(),
                    run,
                    inputs,
                })
                .collect(),
            Reading {
                hold: &request.hold,
                missing_at_random: request.assume_missing_at_random,
            },
        )
        .await?;
        served.repeats = self
            .apply_repeats(
                &served.runs,
                runs.iter_mut()
                    .zip(&request.inputs)
                    .zip(&prefixes)
                    .map(|((run, inputs), p)| (p.as_str(), run, inputs))
                    .collect(),
            )
            .await?;
        let (settings, how) = (request.settings, request.rank);
        let (bases, index) = self.bases(&served.runs).await?;
        // Joint draws for every pair are heavier than one comparison: always off the runtime.
        let answer = if bases.len() == 1 {
            let basis = bases
                .into_iter()
                .next()
                .ok_or_else(|| Error::Internal("no basis".into()))?;
            Self::with_basis(basis, Work::Heavy, move |basis| {
                rank::rank(basis, &runs, &settings, &how)
            })
            .await?
        } else {
            let shared = self.shared_items_between(&request.key, &bases).await?;
            crate::error::blocking("ranking runs of several judge versions", move || {
                let sources = anchored_sources(&bases)?;
                // One correlation for every pair of runs of different versions: the least of
                // theirs, each at the two runs' own scores.
                let mut rho = f64::INFINITY;
                for ((x, y), items) in &shared {
                    let residuals = residuals(items, &sources[*x], &sources[*y])?;
                    let of = |v: usize| {
                        index
                            .iter()
                            .zip(&runs)
                            .filter(move |(i, _)| **i == v)
                            .filter_map(|(_, run)| sources[v].leverage(run))
                            .collect::<Vec<_>>()
                    };
                    for la in of(*x) {
                        for lb in of(*y) {
                            rho = rho
                                .min(runlevel::shared_correlation_for_draws(&residuals, &la, &lb));
                        }
                    }
                }
                let how = RankSettings {
                    shared: if rho.is_finite() { rho } else { 0.0 },
                    ..how
                };
                let per_run: Vec<&dyn Source> =
                    index.iter().map(|&i| &sources[i] as &dyn Source).collect();
                rank::rank_sources(&per_run, &runs, &settings, &how)
            })
            .await??
        };
        self.metrics.count_estimate(&request.key, RunQuestion::Rank);
        let scale = Versions(self).scale_of(&request.key.rubric).await?;
        Ok((served, answer.within((scale.min, scale.max))))
    }
}

/// Each shared anchor item's residuals (reference − corrected) under two versions: `a`'s
/// correction of its score, `b`'s of its.
fn residuals(
    items: &[SharedItem],
    a: &Anchored,
    b: &Anchored,
) -> judgecal_stats::error::Result<Vec<SharedResidual>> {
    let from: Vec<f64> = items.iter().map(|i| i.from_score).collect();
    let to: Vec<f64> = items.iter().map(|i| i.to_score).collect();
    let (fa, fb) = (a.corrected(&from)?, b.corrected(&to)?);
    Ok(items
        .iter()
        .zip(fa.iter().zip(&fb))
        .map(|(i, (a, b))| SharedResidual {
            scores: (i.from_score, i.to_score),
            residuals: (i.reference_score - a, i.reference_score - b),
        })
        .collect())
}

/// One source per distinct version: a cell's version with the anchors it could have been
/// fitted on. Runs of different sources are corrected independently.
fn anchored_sources(
    bases: &[(Arc<Loaded>, Arc<Cell>)],
) -> judgecal_stats::error::Result<Vec<Anchored<'_>>> {
    bases
        .iter()
        .map(|(loaded, anchors)| {
            Anchored::new(Basis {
                model: &loaded.version.model,
                anchors,
                groups: loaded.version.groups.as_ref(),
            })
        })
        .collect()
}
