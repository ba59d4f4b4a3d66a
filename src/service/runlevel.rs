//! Run-level answers: a run's de-biased mean (`/v1/estimate`), the difference of two runs
//! (`/v1/compare`) and K runs ranked (`/v1/rank`), from a version and the anchors it could have
//! been fitted on (its `Anchored` source).

use std::sync::Arc;

use super::Service;
use super::versions::Loaded;
use crate::calibrate::runlevel::rank::{self, Ranking};
use crate::calibrate::runlevel::{self, Basis, RunComparison, RunEstimate, RunItems};
use crate::calibrate::{Cell, MeanUncertainty};
use crate::domain::runlevel::{CompareRequest, EstimateRequest, RankRequest};
use crate::domain::{CellKey, Problem};
use crate::error::{Error, Result};
use crate::metrics::RunQuestion;

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

impl Service {
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

    /// The version to answer with and the anchors it could have been fitted on.
    async fn basis(&self, key: &CellKey, version: Option<i64>) -> Result<(Arc<Loaded>, Arc<Cell>)> {
        let loaded = self.corrector(key, version).await?;
        let anchors = loaded
            .anchors
            .get_or_try_init(|| async {
                let mut pairs = self.store.anchors_before(&loaded.version).await?;
                // The store returns them in no set order; resampling wants a fixed one.
                pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
                let scale = self.scale_of(&key.rubric).await?;
                Ok::<_, Error>(Arc::new(Cell {
                    pairs,
                    scale: (scale.min, scale.max),
                }))
            })
            .await?
            .clone();
        Ok((loaded, anchors))
    }

    /// Runs `f` on the version's model and anchors: on the request's own thread where it is
    /// `Work::Light` and the model answers in closed form, otherwise on a blocking thread
    /// (refits, libtorch, joint draws, large runs).
    async fn with_basis<T: Send + 'static>(
        (loaded, anchors): (Arc<Loaded>, Arc<Cell>),
        work: Work,
        f: impl FnOnce(Basis) -> crate::calibrate::error::Result<T> + Send + 'static,
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

    /// The de-biased mean of one run.
    pub async fn estimate(&self, request: EstimateRequest) -> Result<(Arc<Loaded>, RunEstimate)> {
        self.check_size(&[(request.field(), &request.run)])?;
        let basis = self.basis(&request.key, request.version).await?;
        let loaded = basis.0.clone();
        let n = request.run.scores.len();
        let (run, settings) = (request.run, request.settings);
        let answer = Self::with_basis(basis, Work::of_scores(n), move |basis| {
            runlevel::estimate(basis, &run, &settings)
        })
        .await?;
        self.metrics
            .count_estimate(&request.key, RunQuestion::Estimate);
        Ok((loaded, answer))
    }

    /// The difference of two runs' de-biased means.
    pub async fn compare(&self, request: CompareRequest) -> Result<(Arc<Loaded>, RunComparison)> {
        self.check_size(&[("a", &request.a), ("b", &request.b)])?;
        let basis = self.basis(&request.key, request.version).await?;
        let loaded = basis.0.clone();
        let n = request.a.scores.len() + request.b.scores.len();
        let (a, b, settings) = (request.a, request.b, request.settings);
        let answer = Self::with_basis(basis, Work::of_scores(n), move |basis| {
            runlevel::compare(basis, &a, &b, &settings)
        })
        .await?;
        self.metrics
            .count_estimate(&request.key, RunQuestion::Compare);
        Ok((loaded, answer))
    }

    /// K runs ranked, with their pairs' simultaneous intervals and, when asked, a label plan.
    pub async fn rank(&self, request: RankRequest) -> Result<(Arc<Loaded>, Ranking)> {
        self.check_sizes(
            request
                .runs
                .iter()
                .enumerate()
                .map(|(i, (_, r))| (format!("runs[{i}].scores"), r)),
        )?;
        let basis = self.basis(&request.key, request.version).await?;
        let loaded = basis.0.clone();
        let runs: Vec<RunItems> = request.runs.into_iter().map(|r| r.1).collect();
        let (settings, how) = (request.settings, request.rank);
        // Joint draws for every pair are heavier than one comparison: always off the runtime.
        let answer = Self::with_basis(basis, Work::Heavy, move |basis| {
            rank::rank(basis, &runs, &settings, &how)
        })
        .await?;
        self.metrics.count_estimate(&request.key, RunQuestion::Rank);
        Ok((loaded, answer))
    }
}
