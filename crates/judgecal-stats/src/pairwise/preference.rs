//! The calibrated preference: the probability that people prefer answer a, given the judge's
//! verdict, its verdict with the answers swapped where it gave one, and covariates (the
//! answers' log length ratio), as a logistic map fitted to comparisons that carry the
//! people's preference.
//!
//! A pairwise judge's verdict is not a probability: it names a winner that people overturn a
//! fifth to a third of the time, it favours the answer shown first (so its two orders
//! disagree), and it favours the longer answer. The map reads the verdict (centred: ½ is no
//! preference), the swapped verdict (with an indicator where it is missing) and the standardised
//! covariates, with an intercept: a logistic regression fitted by Newton's method at its
//! posterior mode under independent normal priors (sd [`PRIOR_SD`] on the standardised
//! inputs, wider on the intercept), so that a judge whose verdict always agrees with people
//! gets a large but finite weight. References may be shares in [0, 1] (½ for a tie).
//!
//! Which inputs serve is chosen on held-out log-loss: [`held_out`] cross-fits each candidate
//! (`Inputs`) over k folds.

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use super::{log_sigmoid, sigmoid};
use crate::rng::{Rng, SeedableRng, SliceRandom};

/// The prior sd of each standardised input's weight (log-odds per unit).
pub const PRIOR_SD: f64 = 3.0;
/// The prior sd of the intercept.
const INTERCEPT_SD: f64 = 10.0;
/// The per-system terms' prior sds tried; the one of highest (Laplace) evidence is kept, so
/// the terms are shrunk across systems as much as the anchors say.
const SYSTEM_SDS: [f64; 6] = [0.05, 0.1, 0.2, 0.4, 0.8, 1.6];

/// One panel member's verdict and its swapped verdict.
pub type Judgement = (f64, Option<f64>);

/// What the judge said of one comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdicts {
    /// The judge's verdict: the probability it gives that a is better (1, 0, ½ for a tie).
    pub verdict: f64,
    /// The judge's verdict with b shown first, mapped back (1 still means a).
    pub swapped: Option<f64>,
    /// Numeric inputs beside the verdicts (the answers' log length ratio), in a fixed order.
    pub covariates: Vec<f64>,
    /// The two systems compared (indices), which a map with per-system terms reads.
    pub systems: Option<(usize, usize)>,
    /// A panel's comparison: every member's verdict and swapped verdict, in member order
    /// (then `verdict` and `swapped` are their means, which the raw figures and the biases
    /// read); empty for one judge's.
    pub members: Vec<(f64, Option<f64>)>,
}

impl Verdicts {
    /// One judge's verdicts.
    pub fn of(verdict: f64, swapped: Option<f64>) -> Self {
        Verdicts {
            verdict,
            swapped,
            covariates: Vec::new(),
            systems: None,
            members: Vec::new(),
        }
    }

    /// These verdicts with `other`'s covariates and systems.
    pub fn with_inputs(self, other: &Verdicts) -> Self {
        Verdicts {
            covariates: other.covariates.clone(),
            systems: other.systems,
            ..self
        }
    }

    /// A panel's verdicts: `members`' (in member order), with `verdict` their first orders'
    /// mean and `swapped` the mean of the swapped verdicts given (none given: `None`).
    pub fn of_panel(members: Vec<(f64, Option<f64>)>) -> Self {
        let n = members.len().max(1) as f64;
        let verdict = members.iter().map(|m| m.0).sum::<f64>() / n;
        let given: Vec<f64> = members.iter().filter_map(|m| m.1).collect();
        let swapped = (!given.is_empty()).then(|| given.iter().sum::<f64>() / given.len() as f64);
        Verdicts {
            members,
            ..Verdicts::of(verdict, swapped)
        }
    }
}

/// One comparison with the people's preference.
#[derive(Debug, Clone, PartialEq)]
pub struct Labelled {
    pub verdicts: Verdicts,
    /// The people's preference for a: 1, 0, ½ for a tie, or a share of raters.
    pub preference: f64,
}

/// What the map reads, the candidates `auto` would choose among.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Inputs {
    /// The verdict alone (the first order).
    Verdict,
    /// Both orders' verdicts.
    BothOrders,
    /// Both orders' verdicts and the covariates.
    WithCovariates,
}

impl Inputs {
    pub const ALL: [Inputs; 3] = [Inputs::Verdict, Inputs::BothOrders, Inputs::WithCovariates];

    pub fn name(self) -> &'static str {
        match self {
            Inputs::Verdict => "verdict",
            Inputs::BothOrders => "both orders",
            Inputs::WithCovariates => "both orders + covariates",
        }
    }
}

/// One candidate map: its inputs, whether it adds a term per system (the judge favouring a
/// system beyond what people do), and, for a panel, whether it reads one member alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub inputs: Inputs,
    pub systems: bool,
    /// A panel's map reading only this member's verdicts (its index): `auto` weighs each
    /// member alone beside the panel, so the panel is served no worse than its best member
    /// held out.
    pub alone: Option<usize>,
}

const PER_SYSTEM: &str = " + per-system terms";

impl Candidate {
    pub fn name(self) -> String {
        let mut name = self.inputs.name().to_owned();
        if self.systems {
            name.push_str(PER_SYSTEM);
        }
        if let Some(m) = self.alone {
            name.push_str(&format!(" (member {} alone)", m + 1));
        }
        name
    }

    /// The candidate `name` names (a stored version's choice).
    pub fn parse(name: &str) -> Option<Candidate> {
        let (name, alone) = match name
            .strip_suffix(" alone)")
            .and_then(|n| n.rsplit_once(" (member "))
        {
            Some((rest, m)) => (rest, Some(m.parse::<usize>().ok()?.checked_sub(1)?)),
            None => (name, None),
        };
        let (inputs, systems) = match name.strip_suffix(PER_SYSTEM) {
            Some(inputs) => (inputs, true),
            None => (name, false),
        };
        let inputs = Inputs::ALL.into_iter().find(|i| i.name() == inputs)?;
        Some(Candidate {
            inputs,
            systems,
            alone,
        })
    }
}

/// The per-system terms of a map: `count` systems, each term's prior sd.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SystemTerms {
    pub count: usize,
    pub sd: f64,
}

/// A fitted map (stored with a pairwise cell's version, so that it serves as trained).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreferenceMap {
    pub inputs: Inputs,
    /// A panel's map reads each of its `members` judges' verdicts (0: one judge's map), or
    /// only member `alone`'s.
    #[serde(default)]
    pub members: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone: Option<usize>,
    pub systems: Option<SystemTerms>,
    /// The covariates' means and sds over the anchors it was fitted on.
    pub centre: Vec<f64>,
    pub scale: Vec<f64>,
    /// The weights: intercept, verdict, then (both orders) the swapped verdict and its missing
    /// indicator (a panel's map: these per member, in member order), then (with covariates) each standardised covariate, then (per-system terms)
    /// one per system, added where the system is a and taken away where it is b.
    pub weights: Vec<f64>,
    /// Their covariance at the mode (the inverse of the posterior's curvature), row-major.
    pub covariance: Vec<f64>,
}

/// The inputs of one comparison as (weight index, value), `centre`/`scale` standardising its
/// covariates; `members` judges' verdicts for a panel's map (0: the judge's own).
fn features(
    v: &Verdicts,
    inputs: Inputs,
    members: usize,
    systems: Option<usize>,
    centre: &[f64],
    scale: &[f64],
) -> Vec<(usize, f64)> {
    features_reading(v, inputs, members, None, systems, centre, scale)
}

/// As [`features`], reading only member `alone` of a panel's verdicts where given.
fn features_reading(
    v: &Verdicts,
    inputs: Inputs,
    members: usize,
    alone: Option<usize>,
    systems: Option<usize>,
    centre: &[f64],
    scale: &[f64],
) -> Vec<(usize, f64)> {
    let single = [(v.verdict, v.swapped)];
    let judged: &[(f64, Option<f64>)] = match alone {
        Some(m) => std::slice::from_ref(&v.members[m]),
        None if members == 0 => &single,
        None => &v.members,
    };
    let mut x = vec![1.0];
    for &(verdict, swapped) in judged {
        x.push(verdict - 0.5);
        if inputs != Inputs::Verdict {
            match swapped {
                Some(s) => x.extend([s - 0.5, 0.0]),
                None => x.extend([0.0, 1.0]),
            }
        }
    }
    if inputs == Inputs::WithCovariates {
        x.extend(
            v.covariates
                .iter()
                .zip(centre.iter().zip(scale))
                .map(|(v, (m, s))| (v - m) / s),
        );
    }
    let base = x.len();
    let mut sparse: Vec<(usize, f64)> = x.into_iter().enumerate().collect();
    if let (Some(_), Some((a, b))) = (systems, v.systems) {
        sparse.extend([(base + a, 1.0), (base + b, -1.0)]);
    }
    sparse
}

fn dot(x: &[(usize, f64)], w: &[f64]) -> f64 {
    x.iter().map(|&(i, v)| v * w[i]).sum()
}

impl PreferenceMap {
    /// The map's inputs of one comparison, as (weight index, value).
    pub fn features(&self, v: &Verdicts) -> Vec<(usize, f64)> {
        features_reading(
            v,
            self.inputs,
            self.members,
            self.alone,
            self.systems.map(|s| s.count),
            &self.centre,
            &self.scale,
        )
    }

    /// The probability that people prefer a.
    pub fn predict(&self, v: &Verdicts) -> f64 {
        sigmoid(dot(&self.features(v), &self.weights))
    }

    /// The covariates' weights per unit of each covariate as given (not standardised): log-odds
    /// of people preferring a per unit (empty unless the map reads covariates).
    pub fn covariate_weights(&self) -> Vec<f64> {
        if self.inputs != Inputs::WithCovariates {
            return Vec::new();
        }
        // The intercept, then one verdict and two swapped columns per judge read.
        let read = if self.alone.is_some() {
            1
        } else {
            self.members.max(1)
        };
        let first = 1 + 3 * read;
        (0..self.centre.len())
            .map(|k| self.weights[first + k] / self.scale[k])
            .collect()
    }
}

/// Fits the map reading `inputs` to `rows`, without per-system terms.
pub fn fit(rows: &[Labelled], inputs: Inputs) -> Result<PreferenceMap, String> {
    fit_with(rows, inputs, None).map(|(map, _)| map)
}

/// Fits the map reading `inputs` (and, with `systems`, a term per system) to `rows`; gives
/// the map and the log of its Laplace evidence.
pub fn fit_with(
    rows: &[Labelled],
    inputs: Inputs,
    systems: Option<SystemTerms>,
) -> Result<(PreferenceMap, f64), String> {
    if rows.is_empty() {
        return Err("no labelled comparisons to fit the preference on".into());
    }
    let covariates = rows[0].verdicts.covariates.len();
    if rows
        .iter()
        .any(|r| r.verdicts.covariates.len() != covariates)
    {
        return Err("every comparison must carry the same covariates".into());
    }
    let members = rows[0].verdicts.members.len();
    if rows.iter().any(|r| r.verdicts.members.len() != members) {
        return Err("every comparison must carry the verdicts of the same panel members".into());
    }
    if let Some(s) = systems {
        let named = |r: &Labelled| matches!(r.verdicts.systems, Some((a, b)) if a < s.count && b < s.count && a != b);
        if !rows.iter().all(named) {
            return Err(format!(
                "per-system terms need every comparison to name two of the {} systems",
                s.count
            ));
        }
    }
    let (mut centre, mut scale) = (vec![0.0; covariates], vec![1.0; covariates]);
    if inputs == Inputs::WithCovariates {
        for k in 0..covariates {
            let values: Vec<f64> = rows.iter().map(|r| r.verdicts.covariates[k]).collect();
            centre[k] = crate::stats::mean(&values);
            let sd = crate::stats::sample_variance(&values).sqrt();
            scale[k] = if sd > 0.0 { sd } else { 1.0 };
        }
    }
    let count = systems.map(|s| s.count);
    let xs: Vec<Vec<(usize, f64)>> = rows
        .iter()
        .map(|r| features(&r.verdicts, inputs, members, count, &centre, &scale))
        .collect();
    let base = features(&rows[0].verdicts, inputs, members, None, &centre, &scale).len();
    let d = base + count.unwrap_or(0);
    let precision = |j: usize| {
        let sd = match (j, systems) {
            (0, _) => INTERCEPT_SD,
            (j, Some(s)) if j >= base => s.sd,
            _ => PRIOR_SD,
        };
        1.0 / (sd * sd)
    };
    let log_likelihood = |w: &DVector<f64>| -> f64 {
        xs.iter()
            .zip(rows)
            .map(|(x, r)| {
                let eta = dot(x, w.as_slice());
                r.preference * log_sigmoid(eta) + (1.0 - r.preference) * log_sigmoid(-eta)
            })
            .sum()
    };
    let penalty = |w: &DVector<f64>| {
        (0..d)
            .map(|j| 0.5 * precision(j) * w[j] * w[j])
            .sum::<f64>()
    };
    let curvature = |w: &DVector<f64>| -> (DVector<f64>, DMatrix<f64>) {
        let mut g = DVector::from_fn(d, |j, _| -precision(j) * w[j]);
        let mut h = DMatrix::from_fn(d, d, |i, j| if i == j { precision(i) } else { 0.0 });
        for (x, r) in xs.iter().zip(rows) {
            let p = sigmoid(dot(x, w.as_slice()));
            let q = p * (1.0 - p);
            for &(i, xi) in x {
                g[i] += (r.preference - p) * xi;
                for &(j, xj) in x {
                    h[(i, j)] += q * xi * xj;
                }
            }
        }
        (g, h)
    };
    let mut w = DVector::zeros(d);
    let mut current = log_likelihood(&w) - penalty(&w);
    for _ in 0..100 {
        let (g, h) = curvature(&w);
        let step = h
            .cholesky()
            .ok_or("the preference's curvature is not positive definite")?
            .solve(&g);
        let mut scale = 1.0;
        let next = loop {
            let next = &w + &step * scale;
            let value = log_likelihood(&next) - penalty(&next);
            if value >= current - 1e-12 || scale < 1e-8 {
                current = value;
                break next;
            }
            scale /= 2.0;
        };
        let moved = (&next - &w).amax();
        w = next;
        if moved < 1e-10 {
            break;
        }
    }
    let (_, h) = curvature(&w);
    let factor = h
        .clone()
        .cholesky()
        .ok_or("the preference's curvature is singular")?;
    // Laplace: log p(y | ŵ) − ½ŵᵀΣ₀⁻¹ŵ − ½ log|Σ₀| − ½ log|H|.
    let log_det_h: f64 = 2.0 * factor.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
    let log_det_prior: f64 = (0..d).map(|j| -precision(j).ln()).sum();
    let evidence = log_likelihood(&w) - penalty(&w) - 0.5 * log_det_prior - 0.5 * log_det_h;
    let covariance = factor.inverse();
    Ok((
        PreferenceMap {
            inputs,
            members,
            alone: None,
            systems,
            centre,
            scale,
            weights: w.iter().copied().collect(),
            covariance: covariance.iter().copied().collect(),
        },
        evidence,
    ))
}

/// The per-system terms' prior sd of highest evidence among [`SYSTEM_SDS`].
pub fn system_terms(
    rows: &[Labelled],
    inputs: Inputs,
    count: usize,
) -> Result<SystemTerms, String> {
    let mut best: Option<(f64, SystemTerms)> = None;
    for sd in SYSTEM_SDS {
        let terms = SystemTerms { count, sd };
        let (_, evidence) = fit_with(rows, inputs, Some(terms))?;
        if best.is_none_or(|(e, _)| evidence > e) {
            best = Some((evidence, terms));
        }
    }
    best.map(|(_, t)| t)
        .ok_or_else(|| "no prior sd to try".into())
}

/// `candidate` fitted on every row (its per-system terms, with `systems` systems, at the prior
/// sd of highest evidence): a stored version's choice applied again, with no folds.
pub fn fit_candidate(
    rows: &[Labelled],
    candidate: Candidate,
    systems: usize,
) -> Result<PreferenceMap, String> {
    let members = rows.first().map_or(0, |r| r.verdicts.members.len());
    let read = reading(rows, candidate.alone);
    let terms = if candidate.systems {
        Some(system_terms(&read, candidate.inputs, systems)?)
    } else {
        None
    };
    fit_with(&read, candidate.inputs, terms)
        .map(|(map, _)| map.reading_member(members, candidate.alone))
}

/// Held-out figures of a preference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeldOut {
    /// Mean log-loss, −[y ln p + (1 − y) ln(1 − p)], in nats.
    pub log_loss: f64,
    /// The share of comparisons whose more likely side people preferred (an even call, or a
    /// tie of the people's, counts ½).
    pub accuracy: f64,
    pub comparisons: usize,
}

fn score(predictions: &[(f64, f64)]) -> HeldOut {
    let n = predictions.len().max(1) as f64;
    let eps = 1e-12;
    let log_loss = predictions
        .iter()
        .map(|&(p, y)| {
            let p = p.clamp(eps, 1.0 - eps);
            -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
        })
        .sum::<f64>()
        / n;
    let accuracy = predictions
        .iter()
        .map(|&(p, y)| {
            if (p - 0.5).abs() < 1e-12 {
                0.5
            } else if p > 0.5 {
                y
            } else {
                1.0 - y
            }
        })
        .sum::<f64>()
        / n;
    HeldOut {
        log_loss,
        accuracy,
        comparisons: predictions.len(),
    }
}

/// The raw verdict read as a probability: its verdicts averaged over the orders it gave,
/// pulled in to [`RAW_SURE`] (a verdict of 1 is read as 95% sure: a 0/1 verdict that people
/// overturn would have an infinite log-loss).
pub fn raw(rows: &[Labelled]) -> HeldOut {
    let p: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| {
            let v = &r.verdicts;
            let v = match v.swapped {
                Some(s) => (v.verdict + s) / 2.0,
                None => v.verdict,
            };
            (0.5 + (v - 0.5) * (2.0 * RAW_SURE - 1.0), r.preference)
        })
        .collect();
    score(&p)
}

/// How sure a raw verdict of 1 is read to be.
pub const RAW_SURE: f64 = 0.95;

/// A map cross-fitted over seeded folds: each fold's map (fitted on the other folds), each
/// row's fold, and the held-out figures of every row predicted by its fold's map.
#[derive(Debug, Clone)]
pub struct CrossFit {
    pub maps: Vec<PreferenceMap>,
    pub fold_of: Vec<usize>,
    pub held_out: HeldOut,
}

impl CrossFit {
    /// Row `i`'s held-out prediction (by the map that did not see it).
    pub fn held_out_prediction(&self, i: usize, v: &Verdicts) -> f64 {
        self.maps[self.fold_of[i]].predict(v)
    }

    /// A new comparison's prediction: the mean of the folds' maps (none of which is favoured
    /// by the rows it saw).
    pub fn predict(&self, v: &Verdicts) -> f64 {
        self.maps.iter().map(|m| m.predict(v)).sum::<f64>() / self.maps.len() as f64
    }
}

/// The map reading `inputs` (and `systems`' terms), cross-fitted over `folds` seeded folds.
pub fn cross_fit(
    rows: &[Labelled],
    inputs: Inputs,
    systems: Option<SystemTerms>,
    folds: usize,
    seed: u64,
) -> Result<CrossFit, String> {
    let folds = folds.clamp(2, rows.len().max(2));
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.shuffle(&mut Rng::seed_from_u64(seed));
    let mut fold_of = vec![0; rows.len()];
    for (rank, &i) in order.iter().enumerate() {
        fold_of[i] = rank % folds;
    }
    let maps = (0..folds)
        .map(|f| {
            let train: Vec<Labelled> = (0..rows.len())
                .filter(|&i| fold_of[i] != f)
                .map(|i| rows[i].clone())
                .collect();
            fit_with(&train, inputs, systems).map(|(map, _)| map)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let predictions: Vec<(f64, f64)> = rows
        .iter()
        .zip(&fold_of)
        .map(|(r, &f)| (maps[f].predict(&r.verdicts), r.preference))
        .collect();
    Ok(CrossFit {
        maps,
        fold_of,
        held_out: score(&predictions),
    })
}

/// The map reading `inputs`, cross-fitted over `folds` seeded folds: each fold predicted by
/// the map fitted on the others.
pub fn held_out(
    rows: &[Labelled],
    inputs: Inputs,
    folds: usize,
    seed: u64,
) -> Result<HeldOut, String> {
    cross_fit(rows, inputs, None, folds, seed).map(|c| c.held_out)
}

/// `auto`'s choice: every candidate's held-out figures, and the one of lowest held-out
/// log-loss, fitted on every row and cross-fitted.
#[derive(Debug, Clone)]
pub struct Choice {
    pub candidate: Candidate,
    pub map: PreferenceMap,
    pub cross_fit: CrossFit,
    pub candidates: Vec<(Candidate, HeldOut)>,
}

/// Chooses among the candidates the rows can feed by held-out log-loss: both orders where
/// any row has a swapped verdict, covariates where the rows carry some, per-system terms
/// where `systems` (the number of systems the rows' indices run over) is 2 or more. The
/// per-system terms' prior sd is chosen on every row by evidence, before the folds.
pub fn choose(
    rows: &[Labelled],
    systems: Option<usize>,
    folds: usize,
    seed: u64,
) -> Result<Choice, String> {
    choose_among(rows, systems, folds, seed, None)
}

/// As [`choose`], over `only` where given (a stored version's choice, fitted again on the rows
/// of now); an error where the rows cannot feed it (no swapped verdict, no covariates, fewer
/// than two systems).
pub fn choose_among(
    rows: &[Labelled],
    systems: Option<usize>,
    folds: usize,
    seed: u64,
    only: Option<Candidate>,
) -> Result<Choice, String> {
    let swapped = rows.iter().any(|r| r.verdicts.swapped.is_some());
    let covariates = rows
        .first()
        .is_some_and(|r| !r.verdicts.covariates.is_empty());
    let mut candidates = vec![Inputs::Verdict];
    if swapped {
        candidates.push(Inputs::BothOrders);
    }
    if covariates {
        // Without a swapped verdict its missing indicator is constant: the prior keeps that
        // weight beside the intercept's.
        candidates.push(Inputs::WithCovariates);
    }
    let per_system = systems.filter(|&k| k >= 2);
    let mut fits: Vec<(Candidate, Option<SystemTerms>, CrossFit)> = Vec::new();
    let wanted = |c: Candidate| only.is_none_or(|o| o == c);
    // A panel's rows: the panel's map and each member's alone.
    let members = rows.first().map_or(0, |r| r.verdicts.members.len());
    for alone in std::iter::once(None).chain((0..members).map(Some)) {
        let read = reading(rows, alone);
        for &inputs in &candidates {
            let plain = Candidate {
                inputs,
                systems: false,
                alone,
            };
            if wanted(plain) {
                let fit = cross_fit(&read, inputs, None, folds, seed)?;
                fits.push((plain, None, fit.reading_member(members, alone)));
            }
            let with_systems = Candidate {
                systems: true,
                ..plain
            };
            if let Some(count) = per_system.filter(|_| wanted(with_systems)) {
                let terms = system_terms(&read, inputs, count)?;
                let fit = cross_fit(&read, inputs, Some(terms), folds, seed)?;
                fits.push((
                    with_systems,
                    Some(terms),
                    fit.reading_member(members, alone),
                ));
            }
        }
    }
    if let (Some(o), true) = (only, fits.is_empty()) {
        return Err(format!(
            "these comparisons cannot feed the map {}",
            o.name()
        ));
    }
    let table: Vec<(Candidate, HeldOut)> = fits.iter().map(|(c, _, f)| (*c, f.held_out)).collect();
    let (candidate, terms, cross_fit) = fits
        .into_iter()
        .min_by(|a, b| a.2.held_out.log_loss.total_cmp(&b.2.held_out.log_loss))
        .ok_or("no candidate to choose from")?;
    let (map, _) = fit_with(&reading(rows, candidate.alone), candidate.inputs, terms)?;
    Ok(Choice {
        candidate,
        map: map.reading_member(members, candidate.alone),
        cross_fit,
        candidates: table,
    })
}

/// The rows a candidate reading member `alone` of a panel fits: that member's verdicts as one
/// judge's (the rows themselves where `alone` is `None`).
fn reading(rows: &[Labelled], alone: Option<usize>) -> std::borrow::Cow<'_, [Labelled]> {
    match alone {
        None => std::borrow::Cow::Borrowed(rows),
        Some(m) => std::borrow::Cow::Owned(
            rows.iter()
                .map(|r| {
                    let (v, s) = r.verdicts.members[m];
                    Labelled {
                        verdicts: Verdicts::of(v, s).with_inputs(&r.verdicts),
                        preference: r.preference,
                    }
                })
                .collect(),
        ),
    }
}

impl PreferenceMap {
    /// This map, fitted on member `alone`'s verdicts as one judge's, made to read that member
    /// of a panel of `members` (unchanged where `alone` is `None`).
    fn reading_member(mut self, members: usize, alone: Option<usize>) -> Self {
        if alone.is_some() {
            self.members = members;
            self.alone = alone;
        }
        self
    }
}

impl CrossFit {
    fn reading_member(mut self, members: usize, alone: Option<usize>) -> Self {
        self.maps = self
            .maps
            .into_iter()
            .map(|m| m.reading_member(members, alone))
            .collect();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngExt;
    use crate::stats::standard_normal;

    /// People prefer a with chance σ(2q), q ~ N(0, 1) the answers' quality gap; the judge
    /// sees the gap with noise (sd 0.5), favours the answer shown first by `position` and the
    /// longer answer by `length` (per unit of the log length ratio, which also tracks quality
    /// a little), and names a winner in each order.
    fn world(n: usize, position: f64, length: f64, rng: &mut Rng) -> Vec<Labelled> {
        (0..n)
            .map(|_| {
                let q = standard_normal(rng);
                let ratio = 0.3 * q + standard_normal(rng);
                let seen = q + 0.5 * standard_normal(rng) + length * ratio;
                let first = f64::from(u8::from(seen + position > 0.0));
                // Swapped: b is shown first, so the bias helps b.
                let swapped = f64::from(u8::from(seen - position > 0.0));
                let preference = f64::from(u8::from(rng.random::<f64>() < sigmoid(2.0 * q)));
                Labelled {
                    verdicts: Verdicts {
                        verdict: first,
                        swapped: Some(swapped),
                        covariates: vec![ratio],
                        systems: None,
                        members: Vec::new(),
                    },
                    preference,
                }
            })
            .collect()
    }

    #[test]
    fn a_known_logistic_map_is_recovered_within_its_errors() {
        // People prefer a with chance σ(0.4 + 2·(v − ½)) given a verdict v that is 1 or 0.
        let mut rng = Rng::seed_from_u64(3);
        let rows: Vec<Labelled> = (0..4_000)
            .map(|_| {
                let verdict = f64::from(u8::from(rng.random::<f64>() < 0.5));
                let p = sigmoid(0.4 + 2.0 * (verdict - 0.5));
                Labelled {
                    verdicts: Verdicts {
                        verdict,
                        swapped: None,
                        covariates: vec![],
                        systems: None,
                        members: Vec::new(),
                    },
                    preference: f64::from(u8::from(rng.random::<f64>() < p)),
                }
            })
            .collect();
        let map = fit(&rows, Inputs::Verdict).expect("fit");
        for (j, truth) in [0.4, 2.0].into_iter().enumerate() {
            let se = map.covariance[j * 2 + j].sqrt();
            assert!(
                (map.weights[j] - truth).abs() < 3.0 * se,
                "weight {j}: {} ± {se}, truth {truth}",
                map.weights[j]
            );
        }
        // Soft references: a share of 0.7 on every comparison gives σ(intercept) ≈ 0.7.
        let soft: Vec<Labelled> = rows
            .iter()
            .map(|r| Labelled {
                preference: 0.7,
                ..r.clone()
            })
            .collect();
        let map = fit(&soft, Inputs::Verdict).expect("fit");
        let both = |v: f64| {
            map.predict(&Verdicts {
                verdict: v,
                ..soft[0].verdicts.clone()
            })
        };
        assert!((both(1.0) - 0.7).abs() < 0.01 && (both(0.0) - 0.7).abs() < 0.01);
    }

    /// Held-out log-loss falls with each input that carries a bias the judge has, and is no
    /// worse (within 0.01 nats) where it has none. Measured (3,000 comparisons, 10 folds):
    /// position- and length-biased judge 0.630 (verdict) → 0.591 (both orders) → 0.576 (and
    /// the length), the raw verdict 0.660; a fair judge 0.578 → 0.578 → 0.572 (the length
    /// tracks quality a little, which a 0/1 verdict loses).
    #[test]
    fn a_stored_choice_is_fitted_again_alone_or_refused_where_the_rows_cannot_feed_it() {
        for inputs in Inputs::ALL {
            for systems in [false, true] {
                let c = Candidate {
                    inputs,
                    systems,
                    alone: None,
                };
                assert_eq!(Candidate::parse(&c.name()), Some(c));
                let c = Candidate {
                    alone: Some(2),
                    ..c
                };
                assert_eq!(Candidate::parse(&c.name()), Some(c));
            }
        }
        assert_eq!(Candidate::parse("both orders + everything"), None);
        let rows = world(400, 1.0, 0.5, &mut Rng::seed_from_u64(8));
        let only = Candidate {
            inputs: Inputs::BothOrders,
            systems: false,
            alone: None,
        };
        let chosen = choose_among(&rows, None, 5, 0, Some(only)).expect("fitted");
        assert_eq!((chosen.candidate, chosen.candidates.len()), (only, 1));
        // The same folds as `auto`'s: the same held-out figures for that candidate.
        let all = choose(&rows, None, 5, 0).expect("auto");
        let same = all
            .candidates
            .iter()
            .find(|(c, _)| *c == only)
            .expect("a candidate");
        assert_eq!(same.1, chosen.candidates[0].1);
        // Per-system terms need systems; without a swapped verdict, both orders cannot be read.
        let with_systems = Candidate {
            systems: true,
            ..only
        };
        assert!(choose_among(&rows, None, 5, 0, Some(with_systems)).is_err());
        let one_order: Vec<Labelled> = rows
            .iter()
            .map(|r| Labelled {
                verdicts: Verdicts {
                    swapped: None,
                    ..r.verdicts.clone()
                },
                ..r.clone()
            })
            .collect();
        assert!(choose_among(&one_order, None, 5, 0, Some(only)).is_err());
    }

    #[test]
    fn the_swapped_verdict_and_the_length_lower_held_out_loss_where_the_judge_is_biased() {
        let mut rng = Rng::seed_from_u64(5);
        let biased = world(3_000, 1.0, 0.8, &mut rng);
        let loss = |rows: &[Labelled], inputs| held_out(rows, inputs, 10, 1).expect("fit").log_loss;
        let [alone, both, with] = Inputs::ALL.map(|i| loss(&biased, i));
        eprintln!(
            "biased: {alone:.4} {both:.4} {with:.4}, raw {:.4}",
            raw(&biased).log_loss
        );
        assert!(both < alone - 0.01, "{alone} {both}");
        assert!(with < both - 0.01, "{both} {with}");
        // Every calibrated candidate beats the raw verdict read as 95% sure.
        assert!(alone < raw(&biased).log_loss, "{alone}");
        let fair = world(3_000, 0.0, 0.0, &mut rng);
        let [alone, both, with] = Inputs::ALL.map(|i| loss(&fair, i));
        eprintln!("fair: {alone:.4} {both:.4} {with:.4}");
        assert!(
            both < alone + 0.01 && with < both + 0.01,
            "{alone} {both} {with}"
        );
    }

    /// A panel's map reads each member's verdicts: two judges that see the answers' quality
    /// gap through independent noise (one favouring the answer shown first) and one that
    /// guesses. Held out, the panel's map beats each member's own map, and the guessing
    /// member's weight is zero within its error.
    #[test]
    fn a_panel_map_weighs_its_members_and_beats_each_alone() {
        let mut rng = Rng::seed_from_u64(11);
        let call = |x: f64| f64::from(u8::from(x > 0.0));
        let rows: Vec<Labelled> = (0..3_000)
            .map(|_| {
                let q = standard_normal(&mut rng);
                let first = q + standard_normal(&mut rng);
                let second = q + standard_normal(&mut rng);
                let members = vec![
                    (call(first + 0.6), Some(call(first - 0.6))),
                    (call(second), None),
                    (call(standard_normal(&mut rng)), None),
                ];
                let preference = f64::from(u8::from(rng.random::<f64>() < sigmoid(2.0 * q)));
                Labelled {
                    verdicts: Verdicts::of_panel(members),
                    preference,
                }
            })
            .collect();
        let panel = choose(&rows, None, 5, 2).expect("the panel's map");
        assert_eq!(panel.map.members, 3);
        let alone: Vec<f64> = (0..3)
            .map(|m| {
                let own: Vec<Labelled> = rows
                    .iter()
                    .map(|r| {
                        let (v, s) = r.verdicts.members[m];
                        Labelled {
                            verdicts: Verdicts::of(v, s),
                            preference: r.preference,
                        }
                    })
                    .collect();
                choose(&own, None, 5, 2)
                    .expect("alone")
                    .cross_fit
                    .held_out
                    .log_loss
            })
            .collect();
        let best = alone.iter().copied().fold(f64::INFINITY, f64::min);
        let loss = panel.cross_fit.held_out.log_loss;
        eprintln!(
            "panel {loss:.4} ({}), alone {alone:?}",
            panel.candidate.name()
        );
        assert!(loss < best - 0.01, "panel {loss}, best member {best}");
        // The guesser's verdict: weight index 1 + 3 per member before it (both orders read).
        let d = panel.map.weights.len();
        let j = if panel.map.inputs == Inputs::Verdict {
            3
        } else {
            7
        };
        let (w, se) = (panel.map.weights[j], panel.map.covariance[j * d + j].sqrt());
        assert!(w.abs() < 3.0 * se, "the guesser's weight {w} ± {se}");
        // A map fitted on a panel's rows refuses rows of another panel size.
        let mut mixed = rows[..50].to_vec();
        mixed.push(Labelled {
            verdicts: Verdicts::of(1.0, None),
            preference: 1.0,
        });
        assert!(fit(&mixed, Inputs::Verdict).is_err());
    }
}
