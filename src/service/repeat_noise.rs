//! Runs whose items carry repeats (issue 58): each item's scores become one score, the
//! one-score equivalent of their mean, which the version's corrector (fitted on one-score
//! anchors) reads; the run's noise term is scaled to what k scores leave. The judge's
//! within-item variance is measured on the version's anchors' repeats and the request's. A run
//! naming a system among the anchors' is read around that system's anchor mean, with that
//! mean's error in its variance (issue 85); others around the pooled mean.

use super::families::Runs;
use std::sync::Arc;

use super::versions::Loaded;
use crate::domain::Problem;
use crate::domain::calibration::CalibratorVersion;
use crate::domain::inputs::ItemInputs;
use crate::domain::repeats;
use crate::error::{Error, Result};
use judgecal_stats::agreement::LEVEL;
use judgecal_stats::repeats::{
    AnchorRepeats, Costs, Design, MAX_REPEATS, MIN_SYSTEM_ANCHORS, NoiseEstimate, OneScore,
    Repeats, Systems, WithinItem, cheapest, read_run,
};
use judgecal_stats::runlevel::{RunEstimate, RunItems};
use judgecal_stats::warning::{Code, Warning};
use judgecal_stats::{Cell, Method};

/// A run as [`Service::apply_repeats`] reads it: its field prefix, its items and their inputs.
pub(super) type RunRepeats<'a> = (&'a str, &'a mut RunItems, &'a ItemInputs);

impl Runs<'_> {
    /// Reads the repeats of `runs` (`runs[i]` served by `versions[i]`), the runs of each
    /// version together, after `prepare_runs` has checked their scores. Returns the first
    /// version's reading that read any (the answer's `repeats`).
    pub(super) async fn apply_repeats(
        &self,
        versions: &[Arc<Loaded>],
        mut runs: Vec<RunRepeats<'_>>,
    ) -> Result<Option<RepeatUse>> {
        let mut distinct: Vec<Arc<Loaded>> = Vec::new();
        for l in versions.iter().take(runs.len()) {
            if !distinct.iter().any(|v| v.version.id == l.version.id) {
                distinct.push(l.clone());
            }
        }
        let mut first = None;
        for loaded in distinct {
            let group: Vec<&mut RunRepeats<'_>> = runs
                .iter_mut()
                .zip(versions)
                .filter(|(_, l)| l.version.id == loaded.version.id)
                .map(|(r, _)| r)
                .collect();
            let used = self.read_repeats(&loaded, group).await?;
            first = first.or(used);
        }
        Ok(first)
    }
}

/// What the runs' repeats did to an answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepeatUse {
    /// The within-item variance used, pooled over the version's anchors and the request.
    pub within: NoiseEstimate,
    /// Items with repeats among the version's anchors, and among the request's runs.
    pub anchor_items: usize,
    pub run_items: usize,
    /// The judge model the items were read with.
    pub model: Repeats,
    /// The fewest scores an item of the request carries (what a plan starts from).
    pub fewest: usize,
    /// The mean over the request's items of their residual variance as a share of a one-score
    /// item's.
    pub residual_ratio: f64,
    /// How many of the items with repeats were read where the answer may not cover, of how
    /// many.
    pub beyond: Beyond,
    /// A run named a known system with fewer than `MIN_SYSTEM_ANCHORS` anchors (the fewest
    /// such): it was read around the pooled anchor mean.
    pub thin_system: Option<usize>,
}

/// Items with repeats read where their one-score equivalents leave what the version can answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Beyond {
    /// Through a curved corrector: how many were read beyond the anchors' judge scores (where
    /// it is flat or unfitted), of how many, and those scores' range.
    Curved(usize, usize, (f64, f64)),
    /// Through a line: how many were corrected past the scale's ends (and clipped there, with
    /// their bands), of how many, and the scale.
    Clipped(usize, usize, (f64, f64)),
}

/// More than this share of the items with repeats read beyond the anchors' judge scores by a
/// curved corrector is warned of (`repeats_beyond_anchors`), as the support check warns of a
/// run's own scores (`extrapolated`).
pub const BEYOND_SHARE: f64 = 0.05;

/// More than this share of the items with repeats corrected past the scale's ends by a line
/// is warned of: the run's answer is then pressed against the end. A few of a top system's
/// items past the top are the line's reading of them (the clip is right for them): 1 of 80
/// healthy top-system runs had more than 5%.
pub const CLIPPED_SHARE: f64 = 0.5;

impl Runs<'_> {
    /// The repeats of the anchors `loaded` was fitted on, read once per version (none for a
    /// version trained before they were kept).
    async fn anchor_repeats(&self, loaded: &Loaded) -> Result<Arc<AnchorRepeats>> {
        Ok(loaded
            .repeats
            .get_or_try_init(|| async {
                let rows = self
                    .store
                    .version_rows()
                    .held_out(loaded.version.id)
                    .await?
                    .unwrap_or_default();
                let items: Vec<Vec<f64>> = rows
                    .iter()
                    .filter(|r| !r.repeats.is_empty())
                    .map(|r| repeats::all(r.judge_score, &r.repeats))
                    .collect();
                let systems = Systems::of(
                    rows.iter()
                        .map(|r| (r.group.as_deref(), r.judge_score, r.reference_score)),
                );
                Ok::<_, Error>(Arc::new(AnchorRepeats {
                    within: WithinItem::of(items.iter().map(Vec::as_slice)),
                    systems,
                }))
            })
            .await?
            .clone())
    }

    /// Reads the repeats of `runs` (each with its inputs and field prefix), all served by
    /// `loaded`: each item's score becomes its one-score equivalent and each run's noise ratio
    /// is set. `None` where no item carries repeats; 422 where the version is a panel's or
    /// reads covariates, or where nothing measures the judge's within-item variance.
    async fn read_repeats(
        &self,
        loaded: &Arc<Loaded>,
        mut runs: Vec<&mut RunRepeats<'_>>,
    ) -> Result<Option<RepeatUse>> {
        if runs.iter().all(|(_, _, inputs)| inputs.repeats().is_none()) {
            return Ok(None);
        }
        // Problems name the first run that carries repeats.
        let prefix = runs
            .iter()
            .find(|r| r.2.repeats().is_some())
            .map_or("", |r| r.0);
        let refuse = |message: &str| {
            Err(Error::rejected(
                "the request was refused",
                vec![Problem::at(
                    None,
                    &format!("{prefix}items.{}", repeats::FIELD),
                    message,
                )],
            ))
        };
        let v = &loaded.version;
        if v.fusion.is_some() || v.covariate_layer.is_some() {
            return refuse(
                "the version reads its judge scores through a panel's fusion or a covariate layer; repeats are read by a judge's own version",
            );
        }
        let mut request = WithinItem::default();
        for (_, run, inputs) in runs.iter() {
            if let Some(more) = inputs.repeats() {
                for (score, r) in run.scores.iter().zip(more) {
                    request.add(&repeats::all(*score, r));
                }
            }
        }
        let anchors = self.anchor_repeats(loaded).await?;
        let run_items = request.items();
        let pooled = request.merged(&anchors.within);
        let (_, cell) = self.basis(loaded.clone()).await?;
        let (Some(within), Some(judge)) = (pooled.estimate(LEVEL), OneScore::of(&cell.pairs))
        else {
            return refuse(
                "the judge's within-item variance needs at least two items with repeats (in this request or among the version's anchors) and anchors whose judge scores and references vary",
            );
        };
        let model = Repeats::new(within.variance, judge);
        let (fewest, residual_ratio, thin_system) =
            expand_runs(&model, &anchors.systems, &mut runs);
        let read: Vec<f64> = runs
            .iter()
            .filter(|r| r.2.repeats().is_some())
            .flat_map(|r| r.1.scores.iter().copied())
            .collect();
        let beyond = Beyond::of(v, &cell, &read)?;
        Ok(Some(RepeatUse {
            within,
            anchor_items: anchors.within.items(),
            run_items,
            model,
            fewest: fewest.min(MAX_REPEATS),
            residual_ratio,
            beyond,
            thin_system,
        }))
    }
}

/// Each run's items read at the mean of their scores (`repeats::read_run`); the fewest scores
/// an item has, and the mean residual ratio over every item.
fn expand_runs(
    pooled: &Repeats,
    systems: &Systems,
    runs: &mut [&mut RunRepeats<'_>],
) -> (usize, f64, Option<usize>) {
    let (mut fewest, mut ratio_sum, mut items) = (usize::MAX, 0.0, 0usize);
    let mut thin = None;
    for (_, run, inputs) in runs.iter_mut() {
        items += run.scores.len();
        let Some(more) = inputs.repeats() else {
            fewest = 1;
            ratio_sum += run.scores.len() as f64;
            continue;
        };
        // A known system with too few anchors of its own is read around the pooled mean.
        if let Some(n) = run.group.as_deref().and_then(|g| systems.anchors_of(g))
            && n < MIN_SYSTEM_ANCHORS
        {
            thin = Some(thin.map_or(n, |t: usize| t.min(n)));
        }
        let read = read_run(pooled, systems, run, more);
        fewest = fewest.min(read.fewest);
        ratio_sum += read.ratio_sum;
    }
    (fewest, ratio_sum / items.max(1) as f64, thin)
}

impl Beyond {
    /// Where `read`, the one-score equivalents of the items with repeats, leave what version
    /// `v` (fitted on `cell`) answers: past the scale's ends through a line, beyond the
    /// anchors' judge scores through a curved corrector.
    fn of(v: &CalibratorVersion, cell: &Cell, read: &[f64]) -> Result<Self> {
        if matches!(v.model.method(), Method::Bayes | Method::Identity) {
            // A stretched one-score equivalent past what the line maps inside the scale is
            // clipped at the scale's end with its band: the answer there is narrow and wrong.
            let corrected = v.model.correct(read).map_err(Error::Internal)?;
            let (lo, hi) = cell.scale;
            let clipped = corrected
                .iter()
                .filter(|c| c.score < lo || c.score > hi)
                .count();
            return Ok(Beyond::Clipped(clipped, read.len(), cell.scale));
        }
        let range = cell
            .pairs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                (lo.min(p.0), hi.max(p.0))
            });
        let outside = read
            .iter()
            .filter(|s| !(range.0..=range.1).contains(*s))
            .count();
        Ok(Beyond::Curved(outside, read.len(), range))
    }
}

impl RepeatUse {
    /// The warning where a known system's run was read around the pooled mean for want of
    /// its own anchors.
    pub fn thin_warning(&self) -> Option<Warning> {
        let n = self.thin_system?;
        Some(
            Warning::new(
                Code::FewSystemAnchors,
                format!(
                    "the run names a system with {n} anchors of its own, fewer than the {MIN_SYSTEM_ANCHORS} its repeats are read around: they were read around the pooled anchor mean, which carries a bias where the system sits far from the others; upload anchors of this system, or send one score an item"
                ),
            )
            .at("group"),
        )
    }

    /// The warning where more than [`BEYOND_SHARE`] of the items with repeats were read beyond
    /// the anchors' judge scores by a curved corrector (`method`'s).
    pub fn beyond_warning(&self, method: Method) -> Option<Warning> {
        let (count, items, share) = match self.beyond {
            Beyond::Curved(count, items, _) => (count, items, BEYOND_SHARE),
            Beyond::Clipped(count, items, _) => (count, items, CLIPPED_SHARE),
        };
        if items == 0 || count as f64 <= share * items as f64 {
            return None;
        }
        let message = match self.beyond {
            Beyond::Curved(_, _, (lo, hi)) => format!(
                "{count} of {items} items with repeats were read at one-score equivalents outside the anchors' judge scores ({lo} to {hi}) by a {method} version: the reading assumes a judge linear in the reference, and a curved corrector is flat or unfitted there, so the interval may not cover; train bayes for runs with repeats, or send one score an item"
            ),
            Beyond::Clipped(_, _, (lo, hi)) => format!(
                "{count} of {items} items with repeats were corrected past the scale's ends ({lo} to {hi}) from their one-score equivalents, and clipped there with their bands: the run's answer is pressed against the scale's end and its interval may not cover; label some of the run's items (the labelled path), or send one score an item"
            ),
        };
        Some(Warning::new(Code::RepeatsBeyondAnchors, message).at("items.repeats"))
    }
}

/// Whether re-asking the judge or labelling reaches a run's target at the lower cost.
#[derive(Debug, Clone, PartialEq)]
pub struct DesignAdvice {
    /// For each number of scores per item, from the run's to [`MAX_REPEATS`], the labels it
    /// needs and what it costs; `best` the cheapest.
    pub designs: Vec<Design>,
    pub best: usize,
    /// The designs start from this many scores per item (the run's fewest).
    pub current: usize,
}

impl Runs<'_> {
    /// The cheapest way to a half-width of `target` for the run answered by `e` (by `loaded`,
    /// its items' repeats read as `used` says), given `costs`: every item asked k times and n of them labelled (the
    /// labelled path). `Err` says why there is none: nothing measures the judge's repeat
    /// noise.
    pub async fn design(
        &self,
        (loaded, used): (&Arc<Loaded>, Option<RepeatUse>),
        e: &RunEstimate,
        target: f64,
        level: f64,
        costs: Costs,
    ) -> Result<std::result::Result<DesignAdvice, String>> {
        let (model, current, ratio) = match used {
            Some(r) => (r.model, r.fewest, r.residual_ratio),
            None => {
                let anchors = self.anchor_repeats(loaded).await?;
                let (_, cell) = self.basis(loaded.clone()).await?;
                match (anchors.within.estimate(LEVEL), OneScore::of(&cell.pairs)) {
                    (Some(w), Some(judge)) => (Repeats::new(w.variance, judge), 1, 1.0),
                    _ => {
                        return Ok(Err(
                            "the judge's repeat noise is not measured: upload anchors with `repeats` (an item's further scores by the same judge version) and retrain, or send the run's items with theirs".to_owned(),
                        ));
                    }
                }
            }
        };
        let m = &e.mean;
        let (n, big_n) = (m.labelled as f64, m.n as f64);
        // The variance of a reference around a corrected score of the run, from its sampling
        // term: (1/n − 1/N)·S² on the labelled path, S²/N on the plain one.
        let s2 = if m.labelled > 0 && n < big_n {
            m.variance.sampling / (1.0 / n - 1.0 / big_n)
        } else {
            m.variance.sampling * big_n
        };
        let q = judgecal_stats::stats::normal_quantile(0.5 + level / 2.0);
        let s2_one = s2 / ratio.max(f64::MIN_POSITIVE);
        let (designs, best) = cheapest(&model, current, s2_one, m.n, target, q, costs);
        Ok(Ok(DesignAdvice {
            designs,
            best,
            current,
        }))
    }
}
