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
//! Which inputs serve is chosen on held-out log-loss, in the sibling module `choice`.

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use super::{log_sigmoid, sigmoid};
use crate::stats::newton_ascent;

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

/// Laplace's evidence at the mode, log p(y | ŵ) − ½ŵᵀΣ₀⁻¹ŵ − ½ log|Σ₀| − ½ log|H| (`at_mode`
/// the first two terms, `h` the curvature there), and the posterior covariance H⁻¹.
fn laplace(
    h: DMatrix<f64>,
    at_mode: f64,
    log_det_prior: f64,
) -> Result<(f64, DMatrix<f64>), String> {
    let factor = crate::stats::cholesky(h).ok_or("the preference's curvature is singular")?;
    let log_det_h: f64 = 2.0 * factor.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
    Ok((
        at_mode - 0.5 * log_det_prior - 0.5 * log_det_h,
        factor.inverse(),
    ))
}

/// The rows' panel members, checked alike in every row (as their covariates, and their
/// systems where there are per-system terms), and each covariate's centre and scale (read
/// only `WithCovariates`).
#[allow(clippy::type_complexity)]
fn shape(
    rows: &[Labelled],
    inputs: Inputs,
    systems: Option<SystemTerms>,
) -> Result<(usize, Vec<f64>, Vec<f64>), String> {
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
    Ok((members, centre, scale))
}

/// Fits the map reading `inputs` (and, with `systems`, a term per system) to `rows`; gives
/// the map and the log of its Laplace evidence.
pub fn fit_with(
    rows: &[Labelled],
    inputs: Inputs,
    systems: Option<SystemTerms>,
) -> Result<(PreferenceMap, f64), String> {
    let (members, centre, scale) = shape(rows, inputs, systems)?;
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
    let w = newton_ascent(
        DVector::zeros(d),
        f64::INFINITY,
        100,
        |w| log_likelihood(w) - penalty(w),
        curvature,
    )
    .ok_or("the preference's curvature is not positive definite")?
    .theta;
    let (_, h) = curvature(&w);
    let log_det_prior: f64 = (0..d).map(|j| -precision(j).ln()).sum();
    let (evidence, covariance) = laplace(h, log_likelihood(&w) - penalty(&w), log_det_prior)?;
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

/// The rows a candidate reading member `alone` of a panel fits: that member's verdicts as one
/// judge's (the rows themselves where `alone` is `None`).
pub(super) fn reading(rows: &[Labelled], alone: Option<usize>) -> std::borrow::Cow<'_, [Labelled]> {
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
    pub(super) fn reading_member(mut self, members: usize, alone: Option<usize>) -> Self {
        if alone.is_some() {
            self.members = members;
            self.alone = alone;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Rng, RngExt, SeedableRng};

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
}
