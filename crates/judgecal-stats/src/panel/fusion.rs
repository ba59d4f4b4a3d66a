//! A panel's fusion layer, as a version stores it. The members' scores of an item become one
//! number, the *fused score*: the stacking posterior's mean of the reference given those
//! scores. The version's corrector (any method, or `auto`) then corrects the fused score as it
//! would one judge's score, so every run-level answer, band and group term applies unchanged:
//! the panel is served as a *derived judge*.
//!
//! The corrector is fitted on *cross-fitted* fused scores (each anchor's from a stacking fit
//! that did not see it), so it learns how far a fused score of a fresh item is from its
//! reference, not how well the stacking fit recalls its own anchors.
//!
//! An item that some members did not score is corrected by the stacking fit of exactly the
//! members present (every sub-panel is fitted on the same anchors), with that fit's own
//! posterior intervals: wider where the missing members carried weight.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use super::{
    FITTED_MEMBERS, Fused, MAX_MEMBERS, MemberWeight, StackFit, StackOptions, StackPosterior,
    StackPriors, Stats, fit, fit_sub_panels, members_of,
};
use crate::bayes::FitOptions;
use crate::corrector::{Run, folds};

/// One rubric's anchors as a panel holds them: every member's score of the item (in member
/// order) and its reference.
pub type PanelRows = Vec<(Vec<f64>, f64)>;

/// What a panel's training fits the fusion with.
#[derive(Debug, Clone, PartialEq)]
pub struct FusionOptions {
    pub stack: StackOptions,
    /// Folds of the cross-fitted fused scores.
    pub folds: usize,
    pub seed: u64,
    /// `auto`: also consider each member alone as the served input, and serve, per rubric,
    /// the input whose cross-fitted fused scores have the lowest held-out MAE.
    pub consider_members: bool,
}

impl FusionOptions {
    pub fn new(members: usize, seed: u64, consider_members: bool) -> Self {
        Self {
            stack: StackOptions {
                sampler: FitOptions {
                    seed,
                    ..FitOptions::default()
                },
                ..StackOptions::new(members)
            },
            folds: 5,
            seed,
            consider_members,
        }
    }
}

/// One sub-panel's posterior in one rubric: what correcting an item from those members needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubPanel {
    /// The members it fuses (indices into the panel's members).
    pub members: Vec<usize>,
    /// Posterior mean of (intercept, weights).
    pub mean: Vec<f64>,
    /// Their posterior covariance, row-major.
    pub cov: Vec<f64>,
    /// Posterior mean of the rubric's residual variance.
    pub sigma2: f64,
}

impl SubPanel {
    fn of(members: Vec<usize>, p: &StackPosterior) -> Self {
        Self::from_parts(members, &p.mean, &p.cov, p.sigma2_mean)
    }

    fn from_parts(
        members: Vec<usize>,
        mean: &DVector<f64>,
        cov: &DMatrix<f64>,
        sigma2: f64,
    ) -> Self {
        Self {
            members,
            mean: mean.iter().copied().collect(),
            cov: cov.transpose().iter().copied().collect(),
            sigma2,
        }
    }

    /// The fused score of an item from these members' scores (in their order).
    pub fn score(&self, scores: &[f64]) -> f64 {
        self.mean[0]
            + self.mean[1..]
                .iter()
                .zip(scores)
                .map(|(w, j)| w * j)
                .sum::<f64>()
    }

    /// The fused score with its credible and predictive intervals.
    pub fn correct(&self, scores: &[f64]) -> Fused {
        let p = self.mean.len();
        let x = DVector::from_iterator(p, std::iter::once(1.0).chain(scores.iter().copied()));
        let cov = DMatrix::from_row_slice(p, p, &self.cov);
        Fused::of(self.score(scores), x.dot(&(&cov * &x)), self.sigma2)
    }
}

/// An input's held-out figures: its cross-fitted fused scores against the references.
/// One rubric's anchor statistics (n, XᵀX row-major, Xᵀy, yᵀy for X = [1, every member's
/// score]) and the stacking's coefficient priors: what a sub-panel that was not fitted by NUTS
/// is computed from ([`Stats::conjugate`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PanelStats {
    pub n: f64,
    pub gram: Vec<f64>,
    pub xty: Vec<f64>,
    pub yty: f64,
    pub prior_mean: Vec<f64>,
    pub prior_sd: Vec<f64>,
}

impl PanelStats {
    fn of(s: &Stats, priors: &StackPriors) -> Self {
        Self {
            n: s.n,
            gram: s.gram.transpose().iter().copied().collect(),
            xty: s.xty.iter().copied().collect(),
            yty: s.yty,
            prior_mean: priors.mean.clone(),
            prior_sd: priors.sd.clone(),
        }
    }

    /// Sub-panel `members`' conjugate fit; `None` where the statistics do not hold them.
    fn sub_panel(&self, members: &[usize]) -> Option<SubPanel> {
        let p = self.xty.len();
        if self.gram.len() != p * p || members.iter().any(|&m| m + 1 >= p) {
            return None;
        }
        let stats = Stats {
            n: self.n,
            gram: DMatrix::from_row_slice(p, p, &self.gram),
            xty: DVector::from_column_slice(&self.xty),
            yty: self.yty,
        }
        .select(members);
        let columns: Vec<usize> = std::iter::once(0)
            .chain(members.iter().map(|m| m + 1))
            .collect();
        let pick = |v: &[f64]| -> Option<Vec<f64>> {
            columns.iter().map(|&i| v.get(i).copied()).collect()
        };
        let (mean, cov, sigma2) =
            stats.conjugate(&pick(&self.prior_mean)?, &pick(&self.prior_sd)?)?;
        Some(SubPanel::from_parts(members.to_vec(), &mean, &cov, sigma2))
    }
}

/// Sub-panels computed from a version's statistics, kept by bit mask for the life of the
/// loaded version (a batch of items missing members asks for the same few again and again).
/// Not stored, never compared.
#[derive(Debug, Default)]
pub struct SubPanelCache(Mutex<HashMap<usize, SubPanel>>);

impl Clone for SubPanelCache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for SubPanelCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputFigures {
    pub members: Vec<usize>,
    pub mae: f64,
    pub mse: f64,
}

/// The fusion layer of one rubric of a panel version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fusion {
    /// The members' judge names, in the panel's order.
    pub members: Vec<String>,
    /// The members whose fused score the corrector reads: every member, or (`auto`) the one
    /// member whose fused score had the lowest held-out MAE.
    pub input: Vec<usize>,
    /// Every non-empty set of members' fit, indexed by the bit mask of its members less one.
    pub sub_panels: Vec<SubPanel>,
    /// Each member's weight in the full panel's fit.
    pub weights: Vec<MemberWeight>,
    /// The inputs compared (the full panel, and with `auto` each member alone).
    pub considered: Vec<InputFigures>,
    /// The anchors as the corrector saw them: (cross-fitted fused score, reference), in
    /// item order.
    pub anchors: Vec<(f64, f64)>,
    /// The correlation of the members' errors (each member's own fit's residuals on the
    /// anchors), row-major M × M: how much of what one member gets wrong another repeats.
    #[serde(default)]
    pub error_corr: Vec<f64>,
    /// Each member's judge version whose anchors were fitted (`None`: its unversioned
    /// anchors), in member order; empty in versions trained before panels recorded them.
    #[serde(default)]
    pub member_versions: Vec<Option<String>>,
    /// Each member's anchors in the rubric before the join, in member order: what the join
    /// kept of each (`anchors.len()` items).
    #[serde(default)]
    pub member_anchors: Vec<usize>,
    /// The rubric's anchor statistics, from which a panel of more than [`FITTED_MEMBERS`]
    /// members computes the sub-panels it did not fit (`None` in versions trained before).
    #[serde(default)]
    pub stats: Option<PanelStats>,
    /// Per system (group) the anchors name: its anchors' count and mean design row [1, each
    /// member's score], from which a partial item's system shift is computed
    /// ([`Fusion::group_shift`]; empty in versions trained before).
    #[serde(default)]
    pub group_means: std::collections::BTreeMap<String, (usize, Vec<f64>)>,
    #[serde(skip)]
    pub cache: SubPanelCache,
}

/// How one item's scores were fused.
#[derive(Debug, Clone, PartialEq)]
pub enum FusedScore {
    /// Every member of the input scored it: the fused score, for the version's corrector.
    Whole(f64),
    /// Some input member did not: corrected by the sub-panel of `members` present.
    Partial { members: Vec<usize>, fused: Fused },
}

impl FusedScore {
    /// What the members present say of the item, in reference units: the fused score, or
    /// the sub-panel's corrected score.
    pub fn score(&self) -> f64 {
        match self {
            FusedScore::Whole(x) => *x,
            FusedScore::Partial { fused, .. } => fused.score,
        }
    }
}

fn mask_of(members: &[usize]) -> usize {
    members.iter().fold(0, |m, i| m | (1 << i))
}

impl Fusion {
    /// The sub-panel of `members`.
    pub fn sub_panel(&self, members: &[usize]) -> Option<Cow<'_, SubPanel>> {
        self.sub_panel_kept(members, true)
    }

    /// As [`Fusion::sub_panel`], without keeping a computed one (a plan weighs thousands once).
    pub fn fresh_sub_panel(&self, members: &[usize]) -> Option<Cow<'_, SubPanel>> {
        self.sub_panel_kept(members, false)
    }

    fn sub_panel_kept(&self, members: &[usize], keep: bool) -> Option<Cow<'_, SubPanel>> {
        let mask = mask_of(members);
        if self.sub_panels.len() + 1 == 1 << self.members.len() {
            return self.sub_panels.get(mask.checked_sub(1)?).map(Cow::Borrowed);
        }
        if let Some(fitted) = self.sub_panels.iter().find(|s| s.members == members) {
            return Some(Cow::Borrowed(fitted));
        }
        if members.is_empty() || members.iter().any(|&m| m >= self.members.len()) {
            return None;
        }
        let lock = || self.cache.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sub) = lock().get(&mask).cloned() {
            return Some(Cow::Owned(sub));
        }
        let sub = self.stats.as_ref()?.sub_panel(members)?;
        if keep {
            lock().insert(mask, sub.clone());
        }
        Some(Cow::Owned(sub))
    }

    /// Records each system's anchors' mean design row (`rows` and `groups` in the same order,
    /// as the fusion was fitted on).
    pub fn set_group_means(&mut self, rows: &PanelRows, groups: &[Option<&str>]) {
        let p = self.members.len() + 1;
        let mut sums: std::collections::BTreeMap<String, (usize, Vec<f64>)> = Default::default();
        for ((js, _), g) in rows.iter().zip(groups) {
            let Some(g) = g else { continue };
            let entry = sums
                .entry((*g).to_owned())
                .or_insert_with(|| (0, vec![0.0; p]));
            entry.0 += 1;
            entry.1[0] += 1.0;
            for (acc, j) in entry.1[1..].iter_mut().zip(js) {
                *acc += j;
            }
        }
        for (n, sum) in sums.values_mut() {
            sum.iter_mut().for_each(|v| *v /= *n as f64);
        }
        self.group_means = sums;
    }

    /// What a partial item of system `group` needs added to its sub-panel's fused score so
    /// that the corrector's group term, learnt on the input's fused scores, applies to it:
    /// over the system's anchors, the input's mean fused score less the sub-panel's (a member
    /// that over-rates the system lifts the first and not the second). 0 for a whole item, a
    /// system the anchors do not name, or a version without the means.
    pub fn group_shift(&self, members: &[usize], group: Option<&str>) -> f64 {
        let Some((_, x)) = group.and_then(|g| self.group_means.get(g)) else {
            return 0.0;
        };
        let fused = |sub: &SubPanel| {
            let picked: Vec<f64> = sub
                .members
                .iter()
                .filter_map(|&m| x.get(m + 1).copied())
                .collect();
            sub.score(&picked)
        };
        match (self.sub_panel(members), self.sub_panel(&self.input)) {
            (Some(part), Some(whole)) if members != self.input.as_slice() => {
                fused(&whole) - fused(&part)
            }
            _ => 0.0,
        }
    }

    /// How much more a reference strays from an item's fused score when only `members`
    /// scored it than when the whole input did: the sub-panel's residual variance less the
    /// input's (0 where it is not larger). Run-level answers add it to a partial item's noise.
    pub fn extra_noise(&self, members: &[usize]) -> f64 {
        match (self.sub_panel(members), self.sub_panel(&self.input)) {
            (Some(part), Some(whole)) => (part.sigma2 - whole.sigma2).max(0.0),
            _ => 0.0,
        }
    }

    /// What a run-level answer reads of one fused item of system `group`: the score its
    /// corrector reads (a partial item's sub-panel score plus [`Fusion::group_shift`]) and
    /// its residual variance beyond a whole item's ([`Fusion::extra_noise`]; 0 for a whole
    /// item). The service and the panel studies read runs through this one step.
    pub fn run_score(&self, item: &FusedScore, group: Option<&str>) -> (f64, f64) {
        match item {
            FusedScore::Whole(x) => (*x, 0.0),
            FusedScore::Partial { fused, members } => (
                fused.score + self.group_shift(members, group),
                self.extra_noise(members),
            ),
        }
    }

    /// What the members present say of an item (its scores in member order), in reference
    /// units: [`Fusion::fuse`]'s score without its intervals (`None` where no member scored
    /// it), each pattern of members present looking its sub-panel up once, for a run's items.
    pub fn scorer(&self) -> impl FnMut(&[Option<f64>]) -> Option<f64> + '_ {
        let mut found: HashMap<usize, Option<Cow<'_, SubPanel>>> = HashMap::new();
        move |scores| {
            let present: Vec<usize> = (0..self.members.len())
                .filter(|&m| scores.get(m).copied().flatten().is_some())
                .collect();
            let members = if self.input.iter().all(|m| present.contains(m)) {
                self.input.clone()
            } else {
                present
            };
            if members.is_empty() {
                return None;
            }
            let sub = found
                .entry(mask_of(&members))
                .or_insert_with(|| self.sub_panel(&members))
                .as_ref()?;
            let values: Vec<f64> = members.iter().filter_map(|&m| scores[m]).collect();
            Some(sub.score(&values))
        }
    }

    /// Fuses an item's scores (in member order, `None` where a member did not score it).
    pub fn fuse(&self, scores: &[Option<f64>]) -> Result<FusedScore, String> {
        let present: Vec<usize> = (0..self.members.len())
            .filter(|&m| scores.get(m).copied().flatten().is_some())
            .collect();
        let values =
            |members: &[usize]| -> Vec<f64> { members.iter().filter_map(|&m| scores[m]).collect() };
        if self.input.iter().all(|m| present.contains(m)) {
            let sub = self
                .sub_panel(&self.input)
                .ok_or("the version lacks its input's fit")?;
            return Ok(FusedScore::Whole(sub.score(&values(&self.input))));
        }
        if present.is_empty() {
            return Err("no member of the panel scored it".into());
        }
        let sub = self
            .sub_panel(&present)
            .ok_or("the version lacks a sub-panel's fit")?;
        Ok(FusedScore::Partial {
            fused: sub.correct(&values(&present)),
            members: present,
        })
    }
}

/// A missing-member item's band, widened as the version widens a complete item's, and never
/// narrower than `whole`: the band the version's corrector gives a complete item whose fused
/// score is the partial item's corrected score. The sub-panel's band is Gaussian and in
/// sample; the version's (conformal, or the method's own) holds on held-out anchors and is
/// wider by a factor `whole`'s width over the full panel's in-sample band (`full_sigma2`, its
/// residual variance) shows. The sub-panel's half-width is stretched by that factor (at least
/// 1), so an item missing an informative member stays wider than one missing a useless one;
/// and at least `whole`'s, since an item that lost a member knows less, not more. Widened
/// about its own centre; `whole` absent, unchanged.
pub fn floored(band: (f64, f64), whole: Option<(f64, f64)>, full_sigma2: f64) -> (f64, f64) {
    let (lo, hi) = band;
    let Some((a, b)) = whole else {
        return band;
    };
    let full = 1.959_963_984_540_054 * full_sigma2.max(0.0).sqrt();
    let stretch = if full > 0.0 {
        ((b - a) / 2.0 / full).max(1.0)
    } else {
        1.0
    };
    let half = ((hi - lo) / 2.0 * stretch).max((b - a) / 2.0);
    let centre = (lo + hi) / 2.0;
    (centre - half, centre + half)
}

impl Fusion {
    /// [`floored`] with this fusion's full input's residual variance.
    pub fn floored(&self, band: (f64, f64), whole: Option<(f64, f64)>) -> (f64, f64) {
        let full = self.sub_panel(&self.input).map_or(0.0, |s| s.sigma2);
        floored(band, whole, full)
    }
}

/// The stacking options for a subset of the members: its columns of the priors.
fn options_for(opts: &StackOptions, members: &[usize], seed: u64) -> StackOptions {
    let columns: Vec<usize> = std::iter::once(0)
        .chain(members.iter().map(|m| m + 1))
        .collect();
    StackOptions {
        sampler: FitOptions {
            seed,
            ..opts.sampler
        },
        priors: StackPriors {
            mean: columns.iter().map(|&i| opts.priors.mean[i]).collect(),
            sd: columns.iter().map(|&i| opts.priors.sd[i]).collect(),
            ..opts.priors.clone()
        },
        ..opts.clone()
    }
}

/// Fits a panel's fusion layer to its rubrics' anchors (`cells[r]`, each row every member's
/// score and the reference): the cross-fitted fused scores of each input considered, the input
/// served per rubric, and every sub-panel on all anchors. `members` are the judges' names.
/// The sub-panels fitted by NUTS, each with its members: every one where the panel has at most
/// [`FITTED_MEMBERS`] members (in bit-mask order, the full panel last); above that each member
/// alone and the full panel (last), the others computed from the statistics when an item asks
/// for them (2¹² − 1 NUTS fits would take hours).
fn fitted_sub_panels(
    stats: &[Stats],
    opts: &StackOptions,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<Vec<(Vec<usize>, StackFit)>, String> {
    let m = opts.priors.mean.len().saturating_sub(1);
    if m <= FITTED_MEMBERS {
        let panels = fit_sub_panels(stats, opts, progress)?;
        return Ok(panels
            .fits
            .into_iter()
            .enumerate()
            .map(|(i, f)| (members_of(i + 1, m), f))
            .collect());
    }
    let sets: Vec<Vec<usize>> = (0..m)
        .map(|k| vec![k])
        .chain(std::iter::once((0..m).collect()))
        .collect();
    let mut out = Vec::with_capacity(sets.len());
    for (i, set) in sets.into_iter().enumerate() {
        let sub: Vec<Stats> = stats.iter().map(|s| s.select(&set)).collect();
        let seed = opts.sampler.seed.wrapping_add(mask_of(&set) as u64);
        let f = fit(&sub, &options_for(opts, &set, seed), &|_| {})?;
        out.push((set, f));
        progress((i + 1) as f64 / (m + 1) as f64);
    }
    Ok(out)
}

pub fn fit_fusion(
    cells: &[PanelRows],
    members: &[String],
    opts: &FusionOptions,
    run: &Run,
) -> Result<Vec<Fusion>, String> {
    let m = members.len();
    if !(2..=MAX_MEMBERS).contains(&m) {
        return Err(format!("a panel has 2 to {MAX_MEMBERS} members, not {m}"));
    }
    if cells
        .iter()
        .flatten()
        .any(|(js, y)| js.len() != m || !y.is_finite() || js.iter().any(|j| !j.is_finite()))
    {
        return Err("every anchor needs every member's score".into());
    }
    let mut inputs: Vec<Vec<usize>> = vec![(0..m).collect()];
    if opts.consider_members {
        inputs.extend((0..m).map(|i| vec![i]));
    }
    let held = cross_fit(cells, m, &inputs, opts, run)?;
    let stats: Vec<Stats> = cells
        .iter()
        .map(|c| Stats::of(m, c.iter().map(|(js, y)| (js.as_slice(), *y))))
        .collect();
    let sub_run = run.part(0.5, 1.0);
    let fitted = fitted_sub_panels(&stats, &opts.stack, &|s| sub_run.report(s))?;
    let fitted_of = |members: &[usize]| {
        fitted
            .iter()
            .find(|(set, _)| set.as_slice() == members)
            .map(|(_, f)| f)
            .ok_or_else(|| format!("sub-panel {members:?} was not fitted"))
    };
    let full = fitted_of(&(0..m).collect::<Vec<_>>())?;
    let singles = (0..m)
        .map(|k| fitted_of(&[k]))
        .collect::<Result<Vec<_>, _>>()?;
    if run.cancelled() {
        return Err("cancelled".into());
    }
    let panel = Fitted {
        members,
        inputs: &inputs,
        held: &held,
        fitted: &fitted,
        full,
        singles: &singles,
    };
    let fusions = cells
        .iter()
        .enumerate()
        .map(|(r, c)| Fusion {
            stats: Some(PanelStats::of(&stats[r], &opts.stack.priors)),
            ..panel.fusion(r, c)
        })
        .collect();
    run.report(1.0);
    Ok(fusions)
}

/// held[i][r][k]: input i's cross-fitted fused score of rubric r's anchor k. The cross-fits'
/// means matter, not their tails: a shorter chain serves.
fn cross_fit(
    cells: &[PanelRows],
    m: usize,
    inputs: &[Vec<usize>],
    opts: &FusionOptions,
    run: &Run,
) -> Result<Vec<Vec<Vec<f64>>>, String> {
    let fold_of: Vec<Vec<usize>> = cells
        .iter()
        .enumerate()
        .map(|(r, c)| folds(c.len(), opts.folds, opts.seed ^ (r as u64 + 1)))
        .collect();
    let light = StackOptions {
        sampler: FitOptions {
            warmup: opts.stack.sampler.warmup.min(300),
            draws: opts.stack.sampler.draws.min(400),
            ..opts.stack.sampler
        },
        ..opts.stack.clone()
    };
    let cv_run = run.part(0.0, 0.5);
    let total = (inputs.len() * opts.folds) as f64;
    let mut held: Vec<Vec<Vec<f64>>> = inputs
        .iter()
        .map(|_| cells.iter().map(|c| vec![f64::NAN; c.len()]).collect())
        .collect();
    for (i, input) in inputs.iter().enumerate() {
        for f in 0..opts.folds {
            if run.cancelled() {
                return Err("cancelled".into());
            }
            let stats: Vec<Stats> = cells
                .iter()
                .zip(&fold_of)
                .map(|(c, fold)| {
                    Stats::of(
                        m,
                        c.iter()
                            .zip(fold)
                            .filter(|(_, k)| **k != f)
                            .map(|((js, y), _)| (js.as_slice(), *y)),
                    )
                    .select(input)
                })
                .collect();
            let seed = opts.seed.wrapping_add((1000 * i + f) as u64);
            let fitted = fit(&stats, &options_for(&light, input, seed), &|_| {})?;
            for (r, (c, fold)) in cells.iter().zip(&fold_of).enumerate() {
                let sub = SubPanel::of(input.clone(), &fitted.rubrics[r]);
                for (k, (js, _)) in c.iter().enumerate() {
                    if fold[k] == f {
                        let xs: Vec<f64> = input.iter().map(|&j| js[j]).collect();
                        held[i][r][k] = sub.score(&xs);
                    }
                }
            }
            cv_run.report(((i * opts.folds + f + 1) as f64) / total);
        }
    }
    Ok(held)
}

/// A panel's fits over all its rubrics, from which each rubric's fusion is read.
struct Fitted<'a> {
    members: &'a [String],
    inputs: &'a [Vec<usize>],
    held: &'a [Vec<Vec<f64>>],
    fitted: &'a [(Vec<usize>, StackFit)],
    full: &'a StackFit,
    singles: &'a [&'a StackFit],
}

impl Fitted<'_> {
    /// Rubric r's fusion (its anchors `c`), without its sufficient statistics.
    fn fusion(&self, r: usize, c: &PanelRows) -> Fusion {
        let m = self.members.len();
        let considered: Vec<InputFigures> = self
            .inputs
            .iter()
            .zip(self.held)
            .map(|(input, h)| {
                let n = c.len().max(1) as f64;
                let (abs, sq) = h[r].iter().zip(c).fold((0.0, 0.0), |(a, s), (p, (_, y))| {
                    (a + (p - y).abs(), s + (p - y).powi(2))
                });
                InputFigures {
                    members: input.clone(),
                    mae: abs / n,
                    mse: sq / n,
                }
            })
            .collect();
        // The lowest held-out MAE; the full panel (first) wins ties.
        let chosen = (0..self.inputs.len())
            .min_by(|&a, &b| considered[a].mae.total_cmp(&considered[b].mae))
            .unwrap_or(0);
        let residuals: Vec<Vec<f64>> = (0..m)
            .map(|k| {
                let single = &self.singles[k].rubrics[r];
                c.iter()
                    .map(|(js, y)| y - single.mean[0] - single.mean[1] * js[k])
                    .collect()
            })
            .collect();
        Fusion {
            members: self.members.to_vec(),
            input: self.inputs[chosen].clone(),
            error_corr: (0..m * m)
                .map(|i| crate::quality::pearson(&residuals[i / m], &residuals[i % m]))
                .collect(),
            sub_panels: self
                .fitted
                .iter()
                .map(|(set, f)| SubPanel::of(set.clone(), &f.rubrics[r]))
                .collect(),
            weights: self.full.rubrics[r].members.clone(),
            considered,
            anchors: self.held[chosen][r]
                .iter()
                .zip(c)
                .map(|(&s, (_, y))| (s, *y))
                .collect(),
            member_versions: Vec::new(),
            member_anchors: Vec::new(),
            stats: None,
            group_means: Default::default(),
            cache: SubPanelCache::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::rng::{Rng, SeedableRng};
    use crate::stats::standard_normal;

    #[test]
    fn a_missing_member_band_is_stretched_as_the_versions_and_floored_at_a_complete_items() {
        // A full panel's in-sample band of half-width 1.96·0.5 = 0.98; the version serves a
        // complete item 1.96 either side (twice as wide): a sub-panel's band of half-width 1.2
        // becomes 2.4, one of 0.5 the complete item's 1.96, about their own centres (to the
        // third decimal: z is 1.95996).
        let whole = Some((1.04, 4.96));
        let s = floored((1.8, 4.2), whole, 0.25);
        assert!(
            (s.0 - 0.6).abs() < 1e-3 && (s.1 - 5.4).abs() < 1e-3,
            "{s:?}"
        );
        let s = floored((2.5, 3.5), whole, 0.25);
        assert!(
            (s.0 - 1.04).abs() < 1e-9 && (s.1 - 4.96).abs() < 1e-9,
            "{s:?}"
        );
        // A version no wider than the panel's in-sample band stretches nothing.
        assert_eq!(floored((1.0, 4.0), Some((2.0, 3.0)), 0.25), (1.0, 4.0));
        assert_eq!(floored((2.0, 3.0), None, 0.25), (2.0, 3.0));
    }

    /// Two informative members (one of them squeezed and offset) and one pure noise; the
    /// reference is a known linear function of the quality.
    fn rows(rng: &mut Rng, n: usize) -> PanelRows {
        (0..n)
            .map(|_| {
                let q = standard_normal(rng);
                let js = vec![
                    3.0 + q + 0.5 * standard_normal(rng),
                    2.0 + 0.5 * q + 0.25 * standard_normal(rng),
                    3.0 + standard_normal(rng),
                ];
                (js, 3.0 + q + 0.3 * standard_normal(rng))
            })
            .collect()
    }

    /// Twelve members seeing a quality through noise of sd 0.6 to 1.7; the reference is the
    /// quality plus noise of sd 0.3.
    fn twelve(rng: &mut Rng, n: usize) -> PanelRows {
        (0..n)
            .map(|_| {
                let q = standard_normal(rng);
                let js = (0..12)
                    .map(|k| 3.0 + q + (0.6 + 0.1 * k as f64) * standard_normal(rng))
                    .collect();
                (js, 3.0 + q + 0.3 * standard_normal(rng))
            })
            .collect()
    }

    #[test]
    fn a_twelve_member_panel_serves_any_missing_members_from_its_statistics_with_bands_that_cover()
    {
        use crate::rng::RngExt;
        let mut rng = Rng::seed_from_u64(12);
        let cells: Vec<PanelRows> = (0..2).map(|_| twelve(&mut rng, 300)).collect();
        let names: Vec<String> = (0..12).map(|k| format!("m{k}")).collect();
        let mut opts = FusionOptions::new(12, 3, false);
        opts.stack.sampler.warmup = 300;
        opts.stack.sampler.draws = 400;
        let cancel = AtomicBool::new(false);
        let fusions = fit_fusion(&cells, &names, &opts, &Run::new(&cancel, &|_| {})).unwrap();
        for (r, f) in fusions.iter().enumerate() {
            // NUTS fitted each member alone and the full panel; nothing else is stored.
            assert_eq!(f.sub_panels.len(), 13, "rubric {r}");
            assert!(f.stats.is_some());
            // Fresh items with a quarter of the scores missing at random: each is served by the
            // sub-panel of the members present, computed on demand, and its 95% band covers.
            let (mut inside, mut items, mut masks) = (0usize, 0usize, Vec::new());
            let (mut whole_width, mut part_width) = (Vec::new(), Vec::new());
            for (js, y) in twelve(&mut rng, 2000) {
                let scores: Vec<Option<f64>> = js
                    .iter()
                    .map(|&j| (!rng.random_bool(0.25)).then_some(j))
                    .collect();
                let fused = match f.fuse(&scores) {
                    Ok(FusedScore::Partial { members, fused }) => {
                        masks.push(mask_of(&members));
                        part_width.push(fused.predictive.1 - fused.predictive.0);
                        fused
                    }
                    Ok(FusedScore::Whole(_)) => {
                        let fused = f.sub_panel(&f.input).unwrap().correct(&js);
                        whole_width.push(fused.predictive.1 - fused.predictive.0);
                        fused
                    }
                    Err(e) => {
                        assert!(scores.iter().all(Option::is_none), "{e}");
                        continue;
                    }
                };
                items += 1;
                inside += usize::from((fused.predictive.0..=fused.predictive.1).contains(&y));
            }
            masks.sort_unstable();
            masks.dedup();
            let rate = inside as f64 / items as f64;
            eprintln!(
                "rubric {r}: {items} items, {} distinct sub-panels, coverage {:.1}%, mean widths {:.3} whole vs {:.3} partial",
                masks.len(),
                100.0 * rate,
                crate::stats::mean(&whole_width),
                crate::stats::mean(&part_width)
            );
            assert!(masks.len() > 500, "{}", masks.len());
            assert!((0.935..=0.965).contains(&rate), "rubric {r}: {rate}");
            // A computed sub-panel of every member is the NUTS fit's within its error.
            let closed = f
                .stats
                .as_ref()
                .unwrap()
                .sub_panel(&(0..12).collect::<Vec<_>>())
                .unwrap();
            let nuts = f.sub_panel(&f.input).unwrap();
            assert!(
                (closed.sigma2 - nuts.sigma2).abs() < 0.1 * nuts.sigma2,
                "{closed:?} vs {nuts:?}"
            );
            let probe = vec![3.5; 12];
            assert!((closed.score(&probe) - nuts.score(&probe)).abs() < 0.05);
            // The plan weighs all 4,095 sub-panels and lists a member alone, the cheapest of
            // each size and the full panel; its cheapest is the brute force's.
            let ask = super::super::plan::PlanAsk {
                run_size: 1000,
                half_width: 0.05,
                level: 0.95,
                costs: vec![1.0; 12],
                label_cost: 20.0,
            };
            let plan = f.plan(&ask);
            assert!(plan.sub_panels.len() <= 24, "{}", plan.sub_panels.len());
            let best = (1..(1usize << 12))
                .map(|mask| {
                    let sub = f.fresh_sub_panel(&members_of(mask, 12)).unwrap();
                    let z = crate::stats::normal_quantile(0.975);
                    let labels = super::super::plan::labels_needed(sub.sigma2, 1000, 0.05, z);
                    (
                        sub.members.len() as f64 * 1000.0 + 20.0 * labels as f64,
                        mask,
                    )
                })
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .unwrap();
            let cheapest = &plan.sub_panels[plan.cheapest.unwrap()];
            assert!(
                (cheapest.total_cost - best.0).abs() < 1e-9,
                "{cheapest:?} vs {best:?}"
            );
        }
    }

    #[test]
    fn a_partial_items_system_shift_restores_the_bias_its_missing_member_carried() {
        // Member 0 over-rates each of four systems by its own amount (−0.6 to +0.6); members
        // 1 and 2 are unbiased. An item missing member 0 is fused without that bias, so the
        // mean residual of its system, which the corrector's group term learns on whole items,
        // differs unless the system shift is added.
        let bias = [-0.6, -0.2, 0.2, 0.6];
        let mut rng = Rng::seed_from_u64(21);
        let mut item = |g: usize| {
            let q = standard_normal(&mut rng);
            let js = vec![
                3.0 + q + bias[g] + 0.3 * standard_normal(&mut rng),
                3.0 + q + 0.6 * standard_normal(&mut rng),
                3.0 + 0.8 * q + 0.6 * standard_normal(&mut rng),
            ];
            (js, 3.0 + q + 0.3 * standard_normal(&mut rng))
        };
        let (mut rows, mut groups) = (PanelRows::new(), Vec::new());
        for g in 0..4 {
            for _ in 0..150 {
                rows.push(item(g));
                groups.push(format!("s{g}"));
            }
        }
        let names: Vec<String> = ["biased", "b", "c"].map(String::from).to_vec();
        let mut opts = FusionOptions::new(3, 5, false);
        opts.stack.sampler.warmup = 300;
        opts.stack.sampler.draws = 400;
        let cancel = AtomicBool::new(false);
        let cells = vec![rows.clone()];
        let mut f = fit_fusion(&cells, &names, &opts, &Run::new(&cancel, &|_| {}))
            .unwrap()
            .remove(0);
        let named: Vec<Option<&str>> = groups.iter().map(|g| Some(g.as_str())).collect();
        f.set_group_means(&rows, &named);
        let whole = f.sub_panel(&[0, 1, 2]).unwrap().into_owned();
        let part = f.sub_panel(&[1, 2]).unwrap().into_owned();
        let mut spread = 0.0f64;
        for g in 0..4 {
            let name = format!("s{g}");
            let fresh: Vec<(Vec<f64>, f64)> = (0..4000).map(|_| item(g)).collect();
            let residual = |score: &dyn Fn(&[f64]) -> f64| {
                fresh.iter().map(|(js, y)| y - score(js)).sum::<f64>() / fresh.len() as f64
            };
            let of_whole = residual(&|js| whole.score(js));
            let shift = f.group_shift(&[1, 2], Some(&name));
            let unshifted = residual(&|js| part.score(&js[1..]));
            let shifted = residual(&|js| part.score(&js[1..]) + shift);
            eprintln!(
                "system {g}: mean residual {of_whole:+.3} whole, {unshifted:+.3} partial, {shifted:+.3} partial with the shift {shift:+.3}"
            );
            assert!(
                (shifted - of_whole).abs() < 0.04,
                "{g}: {shifted} vs {of_whole}"
            );
            spread = spread.max((unshifted - of_whole).abs());
        }
        // Without the shift the partial items' residuals are off by a fair part of the bias.
        assert!(spread > 0.1, "{spread}");
        assert_eq!(f.group_shift(&[0, 1, 2], Some("s0")), 0.0);
        assert_eq!(f.group_shift(&[1, 2], Some("unknown")), 0.0);
        assert_eq!(f.group_shift(&[1, 2], None), 0.0);
    }

    #[test]
    fn the_fused_score_is_the_stack_posterior_mean_and_beats_every_member_held_out() {
        let mut rng = Rng::seed_from_u64(5);
        let cells: Vec<PanelRows> = (0..2).map(|_| rows(&mut rng, 250)).collect();
        let names: Vec<String> = ["a", "b", "noise"].map(String::from).to_vec();
        let mut opts = FusionOptions::new(3, 7, true);
        opts.stack.sampler.warmup = 300;
        opts.stack.sampler.draws = 400;
        let cancel = AtomicBool::new(false);
        let fusions = fit_fusion(&cells, &names, &opts, &Run::new(&cancel, &|_| {})).unwrap();
        for (r, f) in fusions.iter().enumerate() {
            assert_eq!(f.input, vec![0, 1, 2], "rubric {r}: {:?}", f.considered);
            assert_eq!(f.sub_panels.len(), 7);
            assert_eq!(f.anchors.len(), 250);
            let panel = f.considered[0].mae;
            for single in &f.considered[1..] {
                assert!(panel < single.mae, "rubric {r}: {:?}", f.considered);
            }
            assert!(f.weights[2].canary && !f.weights[0].canary && !f.weights[1].canary);
            // The regression of the reference on both informative members leaves the
            // reference's noise plus the quality's posterior variance given both members (each
            // sees it through noise of sd 0.5 in quality units): 0.3² + 1/(1 + 4 + 4) ≈ 0.20,
            // against 0.3² + 1/(1 + 4) = 0.29 for either alone. The held-out MSE of 250 items
            // sits within three of its standard errors (about 9% of it) of these.
            assert!(
                (0.15..0.26).contains(&f.considered[0].mse),
                "{:?}",
                f.considered
            );
            for single in &f.considered[1..3] {
                assert!((0.21..0.37).contains(&single.mse), "{:?}", f.considered);
            }
            // Whole items go through the input's fit; a missing member falls back to the
            // members present, with a wider band than those members' full panel.
            let whole = f.fuse(&[Some(3.0), Some(2.0), Some(3.0)]).unwrap();
            assert!(matches!(whole, FusedScore::Whole(s) if (s - 3.0).abs() < 0.2));
            let FusedScore::Partial { members, fused } =
                f.fuse(&[Some(4.0), None, Some(3.0)]).unwrap()
            else {
                panic!("a missing member is a partial item");
            };
            assert_eq!(members, vec![0, 2]);
            let full = f.sub_panel(&[0, 1, 2]).unwrap().correct(&[4.0, 2.5, 3.0]);
            let width = |c: &Fused| c.predictive.1 - c.predictive.0;
            assert!(width(&fused) > 1.1 * width(&full), "{fused:?} vs {full:?}");
            assert!(f.fuse(&[None, None, None]).is_err());
            // Which judges to call: the noise judge only adds cost, so with labels dear the
            // cheapest sub-panel is the two useful members, and it needs fewer labels than
            // either alone.
            let plan = f.plan(&super::super::plan::PlanAsk {
                run_size: 1000,
                half_width: 0.05,
                level: 0.95,
                costs: vec![1.0, 1.0, 1.0],
                label_cost: 50.0,
            });
            let cheapest = &plan.sub_panels[plan.cheapest.unwrap()];
            assert_eq!(cheapest.members, vec![0, 1], "{plan:?}");
            assert!(plan.labels_saved.unwrap() > 0, "{plan:?}");
        }
    }
}
