//! A run's de-biased mean and the difference of two runs, from a version's model and the
//! anchors it was fitted on: what `/v1/estimate` and `/v1/compare` compute (the statistics
//! are in `inference`).
//!
//! The estimand is the mean reference score the run's items would get if every one were
//! labelled. Without labelled items (the plain path) the estimate is the mean corrected score,
//! which rests on the judge-to-reference relation on the run's items being the one on the
//! anchors; its variance is the run's own (the residual noise of a reference around its
//! corrected score, over N) plus the corrector's, as the method's [`MeanUncertainty`] says.
//! With labelled items (a uniform sample of this run) the labelled path (PPI++) needs no such
//! assumption.
//!
//! Where the version's anchors carry groups (the systems whose outputs were judged), the plain
//! path's assumption is the precise one: the reference given the judge score is distributed on
//! the run as on the anchors' groups, up to a group bias drawn as theirs were. A run of a known
//! group gets that group's shrunk bias; a run of a new group (or of none) the between-group
//! variance (`groups`). Without groups the answer says that system-specific bias is not
//! accounted for.
//!
//! - `inference`: the statistics of one mean and of a difference (plain and labelled paths);
//! - `groups`: the between-group bias and its terms;
//! - this module: a version's model and anchors put together into answers, with the corrector's
//!   own term (`Term`), the support check, the transport check and the plan (`Advice`).

mod anchored;
mod chain;
pub mod groups;
pub mod inference;
pub mod leverage;
pub mod new_group;
pub mod rank;
pub mod resample;
pub mod source;
pub mod warnings;

pub use anchored::Anchored;
pub use leverage::{Leverage, SharedResidual};
pub use source::Source;

use super::error::{CalibrateError, Result};
use super::{Cell, Model};
use groups::{BiasShift, GroupBias, GroupTerm};
use inference::{Difference, Estimand, MeanEstimate};

/// One run as the caller sent it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunItems {
    pub scores: Vec<f64>,
    /// Each item's reference score where it has one (empty: none has).
    pub reference: Vec<Option<f64>>,
    /// Each item's cluster (the prompt it answers), when given.
    pub clusters: Option<Vec<u64>>,
    /// Each item's id, when given (pairs the items of two runs).
    pub ids: Option<Vec<String>>,
    /// The system whose outputs the run holds, when given.
    pub group: Option<String>,
    /// The sum over the items of their residual variance beyond a whole item's: a panel's
    /// items that lacked a member, corrected from the sub-panel present (0: none).
    pub extra_noise: f64,
    /// A run read through a covariate layer: its loading on the layer's coefficient errors
    /// (`covariates::Layer::loading`); |u|² adds to the mean's variance, and two runs of one
    /// layer covary by u_a·u_b. Empty: none.
    pub input_loading: Vec<f64>,
    /// Items scored several times by the judge, corrected at their scores' one-score
    /// equivalent (`repeats`): the mean over the items of a reference's variance around its
    /// corrected score, as a share of a one-score item's (below 1). `None`: 1.
    pub noise_ratio: Option<f64>,
    /// Where `scores` are one-score equivalents: each item's judge score as given (the mean of
    /// its scores), which the support check reads. `None`: `scores`.
    pub given_scores: Option<Vec<f64>>,
    /// A variance the run's mean carries beyond its items' own: items whose repeats were read
    /// around their system's anchor mean share that mean's error
    /// (`repeats::SystemJudge::centre_variance`). 0: none.
    pub centre_variance: f64,
    /// A run read through a covariate layer whose held-out residuals sit clearly off zero in
    /// the deciles its items lie in (`covariates::Misfit`): the bias's square, which widens
    /// its interval by about the bias. 0: none.
    pub misfit_variance: f64,
    /// The answer is the mean over the items of the reference expected at their inputs (a
    /// covariate held at a fixed value: no item has that reference), not the mean of their
    /// references: the references' noise around it is no part of its error.
    pub conditional: bool,
}

impl RunItems {
    pub fn scores(scores: Vec<f64>) -> Self {
        Self {
            scores,
            ..Self::default()
        }
    }

    /// What the items' extra noise, the input layer's coefficients and its misfit, and the
    /// repeats' centre add to the variance of the run's mean.
    pub fn extra_sampling(&self) -> f64 {
        let n = self.scores.len().max(1) as f64;
        self.extra_noise.max(0.0) / (n * n)
            + self.input_variance()
            + self.centre_variance.max(0.0)
            + self.misfit_variance.max(0.0)
    }

    /// The input layer's share of the run mean's variance, |u|².
    pub fn input_variance(&self) -> f64 {
        self.input_loading.iter().map(|u| u * u).sum()
    }

    /// The covariance two runs read through one input layer share, u_a·u_b.
    pub fn input_covariance(&self, other: &RunItems) -> f64 {
        self.input_loading
            .iter()
            .zip(&other.input_loading)
            .map(|(a, b)| a * b)
            .sum()
    }

    /// Each item's reference, `None` where it has none (also where no item has one).
    pub fn references(&self) -> Vec<Option<f64>> {
        if self.reference.is_empty() {
            vec![None; self.scores.len()]
        } else {
            self.reference.clone()
        }
    }

    pub fn labelled(&self) -> usize {
        self.reference.iter().filter(|r| r.is_some()).count()
    }
}

/// A version's model, the anchors it could have been fitted on and what its held-out residuals
/// say of the groups' bias.
#[derive(Clone, Copy)]
pub struct Basis<'a> {
    pub model: &'a Model,
    pub anchors: &'a Cell,
    pub groups: Option<&'a GroupBias>,
}

/// How an answer is worked out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnswerSettings {
    /// Of the interval, e.g. 0.95.
    pub level: f64,
    /// Refits of a resampled corrector term.
    pub refits: usize,
    pub seed: u64,
    /// A half-width to plan for.
    pub target: Option<f64>,
    /// What a comparison estimates.
    pub estimand: Estimand,
}

impl Default for AnswerSettings {
    fn default() -> Self {
        Self {
            level: 0.95,
            refits: 200,
            seed: 0,
            target: None,
            estimand: Estimand::Runs,
        }
    }
}

/// Per run, (group centre, the run's share in it) over shared groups of judge scores.
type Histograms = Vec<Vec<(f64, f64)>>;

/// Groups of neighbouring judge scores (of all runs of an answer) a resampled term averages
/// over.
const HISTOGRAM_BINS: usize = 128;

/// A labelled path needs at least this many labelled items.
pub const MIN_LABELLED: usize = 3;

/// The plain path calls the level extrapolated above this share of scores outside the
/// anchors' range, or where the anchors are thin.
pub const SUPPORT_LIMIT: f64 = 0.05;

/// A judge score whose neighbourhood (± 1/20 of the anchors' range) holds fewer anchors than
/// this (or, for versions of under 1,600 anchors, fewer than a quarter of the anchors' average
/// count in such a neighbourhood, n/80) is where the anchors are thin.
pub const THIN_ANCHORS: usize = 20;

/// Which path an answer took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerPath {
    Plain,
    Labelled,
    /// A ranking's labelled run: its plain and labelled estimates weighted by the inverse of
    /// their variances (their errors are uncorrelated: the labels are a random sample of the
    /// run), so that a few labels never make a run's answer worse than its plain one.
    Combined,
}

impl AnswerPath {
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerPath::Plain => "plain",
            AnswerPath::Labelled => "labelled",
            AnswerPath::Combined => "combined",
        }
    }
}

/// How the corrector's own uncertainty entered the answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Term {
    /// Closed form from the posterior of (α, β).
    Posterior,
    /// Refits on resampled anchors.
    Resampled(usize),
    /// The raw judge shifted by the anchors' mean residual, with its standard error.
    AnchorOffset,
    /// Left out, for this reason.
    Omitted(&'static str),
    /// Not needed: the labelled path does not rely on the corrector being right.
    NotNeeded,
}

impl Term {
    pub fn as_str(&self) -> &'static str {
        match self {
            Term::Posterior => "posterior",
            Term::Resampled(_) => "resampled",
            Term::AnchorOffset => "anchor_offset",
            Term::Omitted(_) => "omitted",
            Term::NotNeeded => "not_needed",
        }
    }
}

/// Where the run's judge scores lie against the anchors'.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Support {
    pub anchor_range: (f64, f64),
    /// Share of the run's scores outside it.
    pub outside: f64,
    /// Share of the run's scores where the anchors are thin (see [`THIN_ANCHORS`]; scores
    /// outside the range included).
    pub thin: f64,
}

impl Support {
    pub fn extrapolated(&self) -> bool {
        self.outside > SUPPORT_LIMIT
    }

    pub fn sparse(&self) -> bool {
        self.thin > SUPPORT_LIMIT
    }
}

/// The transport check: the corrector's mean residual (reference − corrected) on the run's
/// labelled items. `interval` is for the run's own mean residual (the labelled items are a
/// sample of the run: finite-run corrected), to report; `bias_interval` is for the bias of the
/// corrector on the population the run was drawn from (S²/n, no finite-run correction), and it
/// is the one the warning tests: a perfect corrector's residuals still average to something on
/// a finite run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transport {
    pub mean_residual: f64,
    pub interval: (f64, f64),
    pub bias_interval: (f64, f64),
}

impl Transport {
    /// Whether the corrector is biased on this run's population, at the interval's level.
    pub fn biased(&self) -> bool {
        self.bias_interval.0 > 0.0 || self.bias_interval.1 < 0.0
    }
}

/// The group term of an answer: which applied, and the measure behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupAnswer {
    pub term: GroupTerm,
    /// The bias correction applied (μ̂ for a new group, the shrunk bias for a known one).
    pub shift: f64,
    pub variance: f64,
    /// τ̂ and the number of groups behind it (none where unmeasured).
    pub tau: Option<f64>,
    pub groups: usize,
    /// `random_effects` or `conservative` (fewer than 5 groups).
    pub rule: Option<String>,
    /// The groups whose bias lies further from the others' than normal biases allow.
    pub outlying: Vec<String>,
}

impl GroupAnswer {
    fn of(shift: &BiasShift, bias: Option<&GroupBias>) -> Self {
        GroupAnswer {
            term: shift.term,
            shift: shift.shift(),
            variance: shift.variance(),
            tau: bias.map(|b| b.tau),
            groups: bias.map_or(0, |b| b.groups.len()),
            rule: bias.map(|b| b.rule.clone()),
            outlying: bias.map_or_else(Vec::new, |b| {
                b.outlying().into_iter().map(str::to_owned).collect()
            }),
        }
    }

    fn none() -> Self {
        Self::of(&BiasShift::none(), None)
    }
}

/// What would bring the half-width down to the target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Advice {
    /// Already there.
    Reached,
    /// About this many anchors in all.
    Anchors(usize),
    /// About this many labelled items in the run.
    Labels(usize),
    /// The run's own size is the limit.
    RunSize,
}

/// One run's de-biased mean.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEstimate {
    pub path: AnswerPath,
    pub mean: MeanEstimate,
    pub term: Term,
    pub support: Support,
    pub transport: Option<Transport>,
    pub advice: Option<Advice>,
    pub group: GroupAnswer,
}

/// The difference of two runs' de-biased means, A − B.
#[derive(Debug, Clone, PartialEq)]
pub struct RunComparison {
    pub a: RunEstimate,
    pub b: RunEstimate,
    pub path: AnswerPath,
    pub difference: Difference,
    pub term: Term,
    /// Items paired by id.
    pub pairs: usize,
    /// Pr(A > B) from the interval's own distribution (t or normal on the estimate and its
    /// standard error): an approximation, on every path.
    pub prob_a_greater: f64,
    pub advice: Option<Advice>,
    pub group: GroupAnswer,
    pub estimand: Estimand,
}

/// `x` held inside [lo, hi].
fn hold((lo, hi): (f64, f64), x: f64) -> f64 {
    x.max(lo).min(hi)
}

/// An interval held inside [lo, hi]: the quantity it is about lives there, so this never
/// costs coverage.
fn hold_interval(bounds: (f64, f64), (a, b): (f64, f64)) -> (f64, f64) {
    (hold(bounds, a), hold(bounds, b))
}

impl RunEstimate {
    /// The answer held inside the rubric's `scale`, where the reference mean lives: a
    /// corrector that extrapolates, or an interval wider than the room left, never reports a
    /// mean the scale cannot hold.
    pub fn within(mut self, scale: (f64, f64)) -> Self {
        self.mean.estimate = hold(scale, self.mean.estimate);
        self.mean.interval = hold_interval(scale, self.mean.interval);
        self
    }
}

impl RunComparison {
    /// Both runs' answers held inside `scale`, and the difference inside ± its width.
    pub fn within(mut self, scale: (f64, f64)) -> Self {
        let width = scale.1 - scale.0;
        self.a = self.a.within(scale);
        self.b = self.b.within(scale);
        self.difference.estimate = hold((-width, width), self.difference.estimate);
        self.difference.interval = hold_interval((-width, width), self.difference.interval);
        self
    }
}

/// The de-biased mean of `run`, corrected by one cell's version (`basis`).
pub fn estimate(basis: Basis, run: &RunItems, settings: &AnswerSettings) -> Result<RunEstimate> {
    Anchored::new(basis)?.estimate(run, settings)
}

/// The difference of the de-biased means of runs `a` and `b`, A − B, both corrected by one
/// cell's version (`basis`).
pub fn compare(
    basis: Basis,
    a: &RunItems,
    b: &RunItems,
    settings: &AnswerSettings,
) -> Result<RunComparison> {
    let source = Anchored::new(basis)?;
    compare_sources((&source, a), (&source, b), settings)
}

/// The difference of runs `a` and `b`, A − B, each corrected by its own source. One source
/// for both answers as that source compares its runs (the corrector's shared error enters
/// once); two sources' answers are independent (their correctors rest on different anchors),
/// and a Welch t combines them.
pub fn compare_sources(
    (sa, a): (&dyn Source, &RunItems),
    (sb, b): (&dyn Source, &RunItems),
    settings: &AnswerSettings,
) -> Result<RunComparison> {
    if source::same(sa, sb) {
        return sa.compare(a, b, settings);
    }
    let est_a = sa.estimate(a, settings).map_err(|e| named("run a", e))?;
    let est_b = sb.estimate(b, settings).map_err(|e| named("run b", e))?;
    Ok(independent(est_a, est_b, pairing(a, b), settings))
}

/// The difference of runs of two sources whose correctors rest on the same anchor items (two
/// judge versions of one cell, each calibrated on its own scores of items with one reference
/// each): as `compare_sources`, with the correctors' errors correlated through the `shared`
/// items, which the difference's corrector variance takes off: v_a + v_b − 2ρ√(v_a·v_b), a
/// variance estimated from the shared items (its degrees of freedom, shared − 1, join the
/// difference's by Welch–Satterthwaite). ρ weighs each shared item's residuals by each run's
/// own leverage of it ([`Leverage::correlation`]): a slope-fitting corrector's errors at runs
/// from opposite ends of the scale are not those at the anchors' centre. Where either run took
/// the labelled path (no corrector term), nothing changes.
///
/// Where both sources measure groups, the two versions' group means b̂_g are means of their
/// residuals on the same items: their sampling errors are correlated as the residuals are,
/// Cov = ρ·s_g^a·s_g^b (ρ as [`shared_correlation`]), and the group term takes off
/// 2·Σ_g w_g^a·w_g^b·ρ·s_g^a·s_g^b, with
/// w_g each run's weight on b̂_g ([`GroupBias::weights`]); the interval is the quantiles of the
/// two shifts' mixture ([`groups::BiasShift::less`]) plus the difference's own normal error,
/// as within one version. The systems' own biases u_g enter
/// a known group's answer and the new-group mean with weights that nearly cancel between
/// them; a correlation of u_g between versions is not assumed.
pub fn compare_correlated(
    (sa, a): (&dyn Source, &RunItems),
    (sb, b): (&dyn Source, &RunItems),
    shared: &[SharedResidual],
    settings: &AnswerSettings,
) -> Result<RunComparison> {
    let mut c = compare_sources((sa, a), (sb, b), settings)?;
    let (va, vb) = (c.a.mean.variance, c.b.mean.variance);
    if shared.len() < 3 || source::same(sa, sb) || c.path != AnswerPath::Plain {
        return Ok(c);
    }
    let (Some(la), Some(lb)) = (sa.leverage(a), sb.leverage(b)) else {
        return Ok(c);
    };
    let residuals: Vec<(f64, f64)> = shared.iter().map(|s| s.residuals).collect();
    let rho = Leverage::correlation(shared, &la, &lb);
    let rho_groups = shared_correlation(&residuals, la.anchors(), lb.anchors());
    if rho == 0.0 && rho_groups == 0.0 {
        return Ok(c);
    }
    let shared = shared.len();
    let mut variance = va.plus(vb);
    variance.corrector =
        (va.corrector + vb.corrector - 2.0 * rho * (va.corrector * vb.corrector).sqrt()).max(0.0);
    let grouped = (sa.groups(), sb.groups());
    let df = inference::combined_df(&[
        (variance.sampling + variance.group, c.difference.df),
        (variance.corrector, Some(shared as f64 - 1.0)),
    ]);
    if let (Some(ga), Some(gb)) = grouped
        && c.a.group.term != GroupTerm::Unmeasured
        && c.b.group.term != GroupTerm::Unmeasured
    {
        // As one source's compare: the difference's own normal error plus the two group
        // shifts' mixture, here over both versions' posteriors, less their covariance.
        let (ka, kb) = (a.group.as_deref(), b.group.as_deref());
        let covariance = rho_groups * shared_group_covariance((ga, ka), (gb, kb));
        let shift = ga.shift(ka).less(&gb.shift(kb), covariance);
        let base = c.difference.estimate - shift.shift();
        variance.group = 0.0;
        c.difference = inference::Difference::new(base, variance, df, settings.level, false)
            .with_group(&shift, settings.level);
    } else {
        c.difference =
            inference::Difference::new(c.difference.estimate, variance, df, settings.level, false);
    }
    c.prob_a_greater = c.difference.prob_a_greater;
    Ok(c)
}

/// Σ_g w_g^a·w_g^b·s_g^a·s_g^b over the groups both measure: the covariance of two runs'
/// group shifts (each by its own measure) per unit of correlation between the two measures'
/// residuals (see [`compare_correlated`]).
fn shared_group_covariance(
    (ga, a): (&GroupBias, Option<&str>),
    (gb, b): (&GroupBias, Option<&str>),
) -> f64 {
    let (wa, wb) = (ga.weights(a), gb.weights(b));
    ga.groups
        .iter()
        .zip(&wa)
        .filter_map(|(g, w)| {
            let k = gb.groups.iter().position(|h| h.group == g.group)?;
            Some(w * wb[k] * g.standard_error * gb.groups[k].standard_error)
        })
        .sum()
}

/// The correlation of two correctors' residuals (reference − corrected) on the shared items;
/// 0 with fewer than 3 or where it is undefined.
fn residual_correlation(residuals: &[(f64, f64)]) -> f64 {
    if residuals.len() < 3 {
        return 0.0;
    }
    let (ra, rb): (Vec<f64>, Vec<f64>) = residuals.iter().copied().unzip();
    let rho = crate::quality::pearson(&ra, &rb);
    if rho.is_finite() { rho } else { 0.0 }
}

/// The correlation of two correctors' errors in the level of their anchors (an offset's, or
/// their group means'), from the anchor items they share: the correlation of their residuals
/// on the shared items, times n_shared / √(n_a·n_b) (each such error is the mean of its
/// anchors' residuals). 0 with fewer than 3 shared items.
pub fn shared_correlation(residuals: &[(f64, f64)], n_a: usize, n_b: usize) -> f64 {
    if n_a == 0 || n_b == 0 {
        return 0.0;
    }
    let scale = residuals.len() as f64 / ((n_a * n_b) as f64).sqrt();
    (residual_correlation(residuals) * scale).clamp(-1.0, 1.0)
}

/// The correlation a ranking draws two runs' corrector errors with, where the runs are of
/// different judge versions whose anchors share `shared` items: [`Leverage::correlation`] at
/// the two runs' scores, scaled as the residuals' correlation is to the end of its 95% bound
/// (Fisher's z) that widens a difference: its lower end where the errors move together (less
/// cancels), its upper end where the two runs sit at opposite ends of the versions' lines and
/// the errors move apart (more adds; `RankSettings::shared` < 0). Its draws carry no degrees
/// of freedom of their own, so an estimate from few shared items is taken at that end: the
/// family then errs wide. 0 where the residuals show no shared error.
pub fn shared_correlation_for_draws(shared: &[SharedResidual], a: &Leverage, b: &Leverage) -> f64 {
    let n = shared.len();
    let residuals: Vec<(f64, f64)> = shared.iter().map(|s| s.residuals).collect();
    let (r, point) = (
        residual_correlation(&residuals),
        Leverage::correlation(shared, a, b),
    );
    if n < 4 || r <= 0.0 || point == 0.0 || !point.is_finite() {
        return 0.0;
    }
    let r = r.min(0.999_999);
    let half = crate::stats::normal_quantile(0.95) / (n as f64 - 3.0).sqrt();
    let end = if point > 0.0 {
        r.atanh() - half
    } else {
        r.atanh() + half
    };
    (point * (end.tanh() / r).max(0.0)).clamp(-1.0, 1.0)
}

/// Two runs' answers whose errors are independent (of two sources, or of one with no shared
/// error), combined: their difference, with a Welch t where either has degrees of freedom.
pub fn independent(
    est_a: RunEstimate,
    est_b: RunEstimate,
    pairs: Option<Vec<(usize, usize)>>,
    settings: &AnswerSettings,
) -> RunComparison {
    let difference = Difference::of_independent(&est_a.mean, &est_b.mean, settings.level);
    let plain = est_a.path == AnswerPath::Plain && est_b.path == AnswerPath::Plain;
    RunComparison {
        path: if plain {
            AnswerPath::Plain
        } else {
            AnswerPath::Labelled
        },
        prob_a_greater: difference.prob_a_greater,
        term: est_a.term,
        pairs: pairs.map_or(0, |p| p.len()),
        advice: None,
        group: est_a.group.clone(),
        estimand: settings.estimand,
        a: est_a,
        b: est_b,
        difference,
    }
}

/// `e` with the run it concerns named.
fn named(run: &str, e: CalibrateError) -> CalibrateError {
    match e {
        CalibrateError::TooFew(why) => CalibrateError::TooFew(format!("{run}: {why}")),
        CalibrateError::Numerical(why) => CalibrateError::Numerical(format!("{run}: {why}")),
        CalibrateError::Cancelled => CalibrateError::Cancelled,
    }
}

/// Pairs of (index in A, index in B) when both runs have ids and the same set of them.
fn pairing(a: &RunItems, b: &RunItems) -> Option<Vec<(usize, usize)>> {
    let (ia, ib) = (a.ids.as_ref()?, b.ids.as_ref()?);
    if ia.len() != ib.len() {
        return None;
    }
    let index: std::collections::HashMap<&str, usize> = ib
        .iter()
        .enumerate()
        .map(|(k, id)| (id.as_str(), k))
        .collect();
    ia.iter()
        .enumerate()
        .map(|(i, id)| index.get(id.as_str()).map(|&k| (i, k)))
        .collect()
}
