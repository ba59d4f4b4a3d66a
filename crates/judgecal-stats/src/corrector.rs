//! What every calibration method is: a [`Corrector`] fits a judge's rubrics at once and makes a
//! stored [`CellModel`] per rubric, which turns judge scores into [`Corrected`] scores. The
//! registry in `method` lists the methods; nothing else names them one by one.

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::report::{MethodReport, RubricPosterior};

/// One rubric's anchors, as (judge score, reference score), and the rubric's scale.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub pairs: Vec<(f64, f64)>,
    pub scale: (f64, f64),
}

/// How a fit reports progress (0 to 1 of its part of the whole) and learns it should stop.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    cancel: &'a AtomicBool,
    progress: &'a (dyn Fn(f64) + Sync),
    detail: Option<&'a (dyn Fn(String) + Sync)>,
    from: f64,
    to: f64,
}

impl<'a> Run<'a> {
    pub fn new(cancel: &'a AtomicBool, progress: &'a (dyn Fn(f64) + Sync)) -> Self {
        Self {
            cancel,
            progress,
            detail: None,
            from: 0.0,
            to: 1.0,
        }
    }

    /// Also passes what the fit reports of itself (JSON text, such as a flow's epoch and
    /// loss) to `detail`.
    pub fn with_detail(self, detail: &'a (dyn Fn(String) + Sync)) -> Self {
        Self {
            detail: Some(detail),
            ..self
        }
    }

    /// Reports what the fit is doing, as JSON text.
    pub fn detail(&self, json: String) {
        if let Some(d) = self.detail {
            d(json);
        }
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    pub fn cancel_flag(&self) -> &'a AtomicBool {
        self.cancel
    }

    /// `share` (0 to 1) of this part is done.
    pub fn report(&self, share: f64) {
        (self.progress)(self.from + (self.to - self.from) * share.clamp(0.0, 1.0));
    }

    /// The part from `a` to `b` (shares of this one) of the work.
    pub fn part(&self, a: f64, b: f64) -> Run<'a> {
        let width = self.to - self.from;
        Run {
            from: self.from + width * a,
            to: self.from + width * b,
            ..*self
        }
    }
}

/// A corrected score and whatever uncertainty its method gives it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Corrected {
    pub score: f64,
    /// 95% credible interval of the mean corrected score (bayes).
    pub credible: Option<(f64, f64)>,
    /// 95% interval for a new item's reference score.
    pub predictive: Option<(f64, f64)>,
    /// MC-dropout sd (flow).
    pub sigma: Option<f64>,
    /// Route the item to a person (flow).
    pub review: Option<bool>,
}

impl Corrected {
    /// A score with no uncertainty attached.
    pub fn score(score: f64) -> Self {
        Self {
            score,
            ..Self::default()
        }
    }

    /// The same, inside the closed range [`min`, `max`] the reference scores live in: a
    /// reference outside it cannot occur, so clipping the corrected score only brings it
    /// closer to every reference, and clipping an interval keeps every reference it covered.
    pub fn clipped(self, (min, max): (f64, f64)) -> Self {
        let clip = |(lo, hi): (f64, f64)| (lo.clamp(min, max), hi.clamp(min, max));
        Self {
            score: self.score.clamp(min, max),
            credible: self.credible.map(clip),
            predictive: self.predictive.map(clip),
            ..self
        }
    }
}

/// Fold of each of `n` items for k-fold cross-validation: a seeded shuffle dealt round-robin,
/// so fold sizes differ by at most one.
pub fn folds(n: usize, k: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = seed ^ 0x2545_F491_4F6C_DD1D;
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let mut fold = vec![0; n];
    for (pos, &item) in order.iter().enumerate() {
        fold[item] = pos % k;
    }
    fold
}

/// How a fitted version is tested on anchors it did not see.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// k-fold cross-validation: k fits, each anchor predicted once by the fit without its fold.
    Folds(usize),
    /// One fit without a seeded random fraction of the anchors, predicted on that fraction.
    Holdout(f64),
}

impl Scheme {
    pub fn check(&self) -> Result<(), String> {
        match *self {
            Scheme::Folds(k) if !(2..=20).contains(&k) => {
                Err(format!("folds must be between 2 and 20; got {k}"))
            }
            Scheme::Holdout(f) if !(f > 0.0 && f < 1.0) => {
                Err(format!("holdout must lie in (0, 1); got {f}"))
            }
            _ => Ok(()),
        }
    }

    /// The rounds of fitting: in round r, items whose entry is `Some(r)` are held out and
    /// predicted, the others trained on. `None` items are always trained on.
    pub fn rounds(&self, n: usize, seed: u64) -> (usize, Vec<Option<usize>>) {
        match *self {
            Scheme::Folds(k) => (k, folds(n, k, seed).into_iter().map(Some).collect()),
            Scheme::Holdout(f) => {
                // Shuffle with the fold dealer, then hold out the first ⌈f·n⌉.
                let held = ((f * n as f64).ceil() as usize).min(n);
                let order = folds(n, n.max(1), seed);
                (
                    1,
                    order.into_iter().map(|p| (p < held).then_some(0)).collect(),
                )
            }
        }
    }
}

/// A calibration method. Implemented by a marker type per method and listed once in the
/// registry (`method`).
pub trait Corrector {
    /// What the experiment's tables and figures call it.
    const LABEL: &'static str;
    /// The evaluation a job of this method runs unless the request says otherwise.
    const DEFAULT_SCHEME: Scheme = Scheme::Folds(5);
    /// With a single holdout, serve the fit that was evaluated instead of fitting again on
    /// every anchor: the recorded held-out figures are then exactly the served model's.
    const SERVES_HOLDOUT_FIT: bool = false;
    /// Cells with fewer anchors are not a candidate of `auto`.
    const AUTO_MIN_ANCHORS: usize = 0;
    /// What one fit costs relative to the others (for shares of a job's progress).
    const COST: f64 = 1.0;
    /// A fit keeps to one core, so cross-validation rounds run side by side, one per core.
    const PARALLEL_ROUNDS: bool = false;

    /// Its settings: its part of a training request's `options`. Ranges and defaults are
    /// stated once, in the schema attributes and the `Default` impl.
    type Options: Clone
        + Debug
        + Default
        + PartialEq
        + Serialize
        + DeserializeOwned
        + ToSchema
        + Send
        + Sync;
    /// A fit of one judge's rubrics.
    type Fit: Send;
    /// What a version stores for one cell.
    type Model: CellModel;

    /// Rules across fields that a schema cannot state.
    fn check(_options: &Self::Options) -> Result<(), String> {
        Ok(())
    }

    /// Fits `cells[r]`, the anchors of the judge's rubric r, all at once.
    fn fit(
        options: &Self::Options,
        cells: &[Cell],
        seed: u64,
        run: &Run,
    ) -> Result<Self::Fit, String>;

    /// Corrected scores of rubric `r` (held-out predictions, the experiment's test items).
    fn predict(fit: &Self::Fit, r: usize, scores: &[f64]) -> Result<Vec<Corrected>, String>;

    /// A fit to keep for later predictions (a run-level answer keeps hundreds of refits): the
    /// same predictions, less of what `predict` does not read.
    fn compact(fit: Self::Fit) -> Self::Fit {
        fit
    }

    /// Rubric `r`'s model: `cell` are all its anchors, `held_out` the held-out predictions of
    /// them (`None` where never held out) and `trained_on` how many the fit saw.
    fn model(
        fit: &Self::Fit,
        r: usize,
        cell: &Cell,
        held_out: &[Option<Corrected>],
        trained_on: usize,
    ) -> Result<Self::Model, String>;
}

/// A fitted cell, as a version stores it: all a correction needs.
pub trait CellModel:
    Clone + Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// Readies it for corrections (a flow tabulates its sub-networks, about a second of
    /// libtorch): called on a blocking thread when a version is loaded.
    fn prepare(&self) -> Result<(), String> {
        Ok(())
    }

    /// Whether correcting `scores` needs more than table look-ups (run off the async runtime).
    fn heavy(&self, _scores: &[f64]) -> bool {
        false
    }

    fn correct(&self, scores: &[f64]) -> Result<Vec<Corrected>, String>;

    /// Why the version should not be activated unless forced.
    fn failure(&self) -> Option<String> {
        None
    }

    /// What the method reports of this cell beyond its corrections (a posterior and the
    /// sampler's diagnostics, a flow's training): its one report type, which a version's
    /// answer, the spec, the gauges and the report picture all read. [`NoReport`] where there
    /// is nothing to add.
    ///
    /// [`NoReport`]: crate::report::NoReport
    type Report: MethodReport;

    fn report(&self) -> Self::Report;

    /// How the uncertainty of the fit itself, from its finite anchors, reaches a run's mean
    /// corrected score (see `runlevel`): by refitting on resampled anchors unless
    /// the method says otherwise.
    fn mean_uncertainty(&self) -> MeanUncertainty<'_> {
        MeanUncertainty::Resample
    }
}

/// How a method's own uncertainty reaches a run's de-biased mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MeanUncertainty<'a> {
    /// A line α + β·j with this posterior: the variance of the mean is in closed form, and
    /// the posterior's E[σ²] is the noise of a reference around it.
    Line(&'a RubricPosterior),
    /// Refit the method on anchors drawn with replacement and take the spread of the run's
    /// mean over the refits.
    Resample,
    /// The method corrects nothing (the raw judge): the run's mean is shifted by the anchors'
    /// mean residual (reference − judge), whose standard error is the term.
    Offset,
    /// The term is left out, for this reason (stated in every answer that relies on it).
    Omitted(&'static str),
}
