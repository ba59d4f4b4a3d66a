//! Covariates: numeric inputs beside the judge score (a response's length, a count of its
//! markdown), which a judge may reward beyond what people do.
//!
//! The input layer is the multi-input linear model (`crate::linear`) with the judge score and the
//! covariates as its named inputs: per rubric, the reference's posterior mean given
//! (judge score, covariates), the rubrics that serve the same inputs pooled, fitted by NUTS. A
//! covariate enters standardised (its anchors' mean and sd, pooled over the rubrics), raw or
//! as its logarithm (or piecewise linear in it, `columns.rs`): judge biases
//! are rarely linear in raw token counts, and a log-normal length's raw value puts the few
//! longest answers in charge of the fit. Which transform, and whether a covariate enters at
//! all, is chosen per rubric on held-out error: the candidates are cross-fitted (k folds, each
//! fold's anchors predicted by the closed-form posterior of the others, `Stats::conjugate`) and
//! the lowest held-out MAE is served, the judge alone among the candidates unless every
//! covariate must be kept, and fewer covariates wherever they come within 1% of it
//! (`KEEP_GAIN`); a kept covariate's shape is the one with the lowest held-out MAE. Each
//! served covariate reports its coefficient, the reference's change per standard deviation of
//! its transformed value at a fixed judge score, with its 95% credible interval: a judge that
//! rewards length has a negative one (a longer answer of the same judge score is worth less to
//! people).

use nalgebra::DVector;
use serde::{Deserialize, Serialize};

mod columns;
pub mod deciles;
pub use columns::KEEP_GAIN;
use columns::{candidates_of, full_columns, served_candidate};
pub use deciles::{Deciles, Misfit};

use crate::bayes::{EXTENSIONS, FitOptions, extended};
use crate::corrector::{Run, folds};
use crate::panel::{MemberWeight, StackFit, StackOptions, StackPosterior, StackPriors, Stats, fit};

/// How a covariate's raw value becomes its input, before it is standardised.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transform {
    Identity,
    /// The natural logarithm: only where every anchor's value is positive.
    Log,
    /// How far the logarithm lies past `knot` (0 below it): beside the log and the other
    /// knots, a piecewise-linear term in log length, which bends where a judge starts (or
    /// stops) rewarding length.
    Hinge {
        knot: f64,
    },
}

impl Transform {
    fn apply(self, x: f64) -> Option<f64> {
        match self {
            Transform::Identity => x.is_finite().then_some(x),
            Transform::Log => (x > 0.0 && x.is_finite()).then(|| x.ln()),
            Transform::Hinge { knot } => {
                (x > 0.0 && x.is_finite()).then(|| (x.ln() - knot).max(0.0))
            }
        }
    }
}

/// One covariate as an input: its transform and the anchors' mean and sd of the transformed
/// value, which standardise it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Input {
    pub name: String,
    pub transform: Transform,
    pub centre: f64,
    pub scale: f64,
    /// The anchors' smallest and largest raw value (absent in versions trained before it
    /// was kept): a value outside it is extrapolated, one more than the range's width beyond
    /// it is refused.
    #[serde(default)]
    pub range: Option<[f64; 2]>,
}

/// Where a raw covariate value lies against the anchors' range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    Inside,
    /// Outside the range, by less than its width.
    Outside,
    /// More than the range's width beyond it.
    Far,
}

impl Input {
    /// The standardised input of a raw value; `None` where the transform cannot take it (a log
    /// of a value ≤ 0).
    pub fn value(&self, raw: f64) -> Option<f64> {
        self.transform
            .apply(raw)
            .map(|t| (t - self.centre) / self.scale)
    }

    /// Where `raw` lies against the anchors' range (inside where the version kept none).
    pub fn reach(&self, raw: f64) -> Reach {
        let Some([lo, hi]) = self.range else {
            return Reach::Inside;
        };
        let width = hi - lo;
        if (lo..=hi).contains(&raw) {
            Reach::Inside
        } else if raw >= lo - width && raw <= hi + width {
            Reach::Outside
        } else {
            Reach::Far
        }
    }

    /// `length`, `log(length)` or `log(length)>6.2` (the hinge past its knot).
    pub fn label(&self) -> String {
        match self.transform {
            Transform::Identity => self.name.clone(),
            Transform::Log => format!("log({})", self.name),
            Transform::Hinge { knot } => format!("log({})>{knot:.3}", self.name),
        }
    }
}

/// Why an item's inputs could not be read: the covariate it concerns and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub covariate: String,
    pub problem: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "covariates.{} {}", self.covariate, self.problem)
    }
}

/// One anchor: the judge score, the covariates (in the layer's name order) and the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub score: f64,
    pub covariates: Vec<f64>,
    pub reference: f64,
}

/// A candidate's held-out figures in one rubric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsideredInputs {
    /// Its inputs beside the judge score (labels: `length`, `log(length)`); empty for the
    /// judge alone.
    pub inputs: Vec<String>,
    pub mae: f64,
    pub mse: f64,
}

/// A served covariate's coefficient in one rubric: the reference's change per sd of its
/// transformed value at a fixed judge score, and per unit of the transformed value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Coefficient {
    pub input: String,
    pub per_sd: f64,
    /// 95% credible interval of `per_sd`.
    pub per_sd_lo: f64,
    pub per_sd_hi: f64,
    /// `per_sd` over the transformed value's sd: per token for `length`, per unit of log
    /// length (a factor e) for `log(length)`.
    pub per_unit: f64,
}

/// One rubric's fitted input layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layer {
    /// The covariates served, in the order their coefficients follow the judge score's.
    pub inputs: Vec<Input>,
    /// Posterior mean of (intercept, the judge score's weight, each input's weight).
    pub mean: Vec<f64>,
    /// Their posterior covariance, row-major.
    pub cov: Vec<f64>,
    /// Posterior mean of the rubric's residual variance.
    pub sigma2: f64,
    /// The judge score's weight.
    pub judge: MemberWeight,
    pub coefficients: Vec<Coefficient>,
    /// Every candidate's held-out figures; the served one has the fewest covariates within
    /// `KEEP_GAIN` of the lowest MAE, and of their shapes the lowest MAE.
    pub considered: Vec<ConsideredInputs>,
    /// The anchors as a corrector behind the layer sees them: (cross-fitted fused score,
    /// reference), in item order.
    pub anchors: Vec<(f64, f64)>,
    /// The anchors' mean design row [1, judge score, each served input]: where the layer's
    /// coefficients are pinned down best.
    #[serde(default)]
    pub centre: Vec<f64>,
    /// Each served covariate's held-out residuals by decile (empty in versions trained before
    /// they were kept): what a run whose items lie where the fit is off inherits.
    #[serde(default)]
    pub deciles: Vec<Deciles>,
}

impl Layer {
    /// The design row [1, judge score, each served input] of an item whose covariates are
    /// `covariates` (by name).
    pub fn design(
        &self,
        score: f64,
        covariate: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<Vec<f64>, InputError> {
        let mut x = vec![1.0, score];
        for input in &self.inputs {
            let raw = covariate(&input.name).ok_or_else(|| InputError {
                covariate: input.name.clone(),
                problem: format!(
                    "is missing: this version corrects at {} as well as the judge score",
                    input.label()
                ),
            })?;
            x.push(input.value(raw).ok_or_else(|| InputError {
                covariate: input.name.clone(),
                problem: format!("is {raw}; {} needs a positive value", input.label()),
            })?);
        }
        Ok(x)
    }

    /// The fused score: the posterior mean of the reference at this judge score and these
    /// covariates. `covariate` answers a covariate's raw value by name.
    pub fn fuse(
        &self,
        score: f64,
        covariate: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<f64, InputError> {
        let x = self.design(score, covariate)?;
        Ok(self.mean.iter().zip(&x).map(|(w, v)| w * v).sum())
    }

    /// What the layer's coefficient uncertainty does to a run's mean: for a run whose items'
    /// mean design row is `mean_row`, the vector u = Lᵀ(mean_row − centre), Σ = LLᵀ the
    /// coefficients' posterior covariance. |u|² is the variance the layer adds to the run's mean
    /// score beyond what it has at the anchors' centre (where the corrector behind it, fitted
    /// on its scores, measures the level), u_a·u_b the covariance between two runs'. In the
    /// judge score's direction the corrector's slope term counts it too: a little conservative
    /// (measured: `judgecal-study covariates --runs`). Empty where the layer keeps no
    /// centre or its covariance has no Cholesky factor.
    pub fn loading(&self, mean_row: &[f64]) -> Vec<f64> {
        let p = self.mean.len();
        if self.centre.len() != p || mean_row.len() != p || self.cov.len() != p * p {
            return Vec::new();
        }
        let cov = nalgebra::DMatrix::from_row_slice(p, p, &self.cov);
        let Some(chol) = crate::stats::cholesky(cov) else {
            return Vec::new();
        };
        let d = DVector::from_iterator(p, mean_row.iter().zip(&self.centre).map(|(a, b)| a - b));
        (chol.l().transpose() * d).iter().copied().collect()
    }

    /// The bias a run inherits where its items (`values(name)`: each item's raw value of
    /// covariate `name`) lie where the layer's held-out residuals sit clearly off zero.
    pub fn misfit(&self, values: &dyn Fn(&str) -> Vec<f64>) -> Option<Misfit> {
        deciles::misfit(&self.deciles, values)
    }

    /// The fused score with the stacking posterior's own 95% credible and predictive
    /// intervals.
    pub fn correct(
        &self,
        score: f64,
        covariate: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<crate::bayes::LineCorrected, InputError> {
        let x = DVector::from_vec(self.design(score, covariate)?);
        let p = x.len();
        let cov = nalgebra::DMatrix::from_row_slice(p, p, &self.cov);
        let mean = DVector::from_column_slice(&self.mean);
        Ok(crate::bayes::LineCorrected::of(
            mean.dot(&x),
            x.dot(&(&cov * &x)),
            self.sigma2,
        ))
    }
}

/// How the layer is fitted.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerOptions {
    /// The served fit's sampler (its seed seeds the folds too).
    pub sampler: FitOptions,
    /// Folds of the cross-fitted candidates.
    pub folds: usize,
    /// Every covariate enters (its transform still chosen on held-out error); otherwise the
    /// judge alone and every subset are candidates too (`auto`).
    pub keep_all: bool,
    /// Piecewise-linear shapes in the log are candidates beside raw and logged (what a version
    /// fits); without them a covariate has one coefficient to report (the studies' checks of
    /// a coefficient against its truth).
    pub piecewise: bool,
}

impl Default for LayerOptions {
    fn default() -> Self {
        Self {
            sampler: FitOptions::default(),
            folds: 5,
            keep_all: false,
            piecewise: true,
        }
    }
}

/// A column of the full design: the judge score, or covariate `k` under a transform.
#[derive(Debug, Clone, PartialEq)]
enum Column {
    Judge,
    Covariate(Input),
}

/// The priors: intercept N(0, 2²), the judge's weight N(1, 2²) (the linear corrector's β),
/// each standardised covariate's N(0, 2²) (up to two reference units per sd either way).
fn priors(columns: &[&Column]) -> StackPriors {
    let mut mean = vec![0.0];
    mean.extend(columns.iter().map(|c| match c {
        Column::Judge => 1.0,
        Column::Covariate(_) => 0.0,
    }));
    StackPriors {
        sd: vec![2.0; mean.len()],
        mean,
        sigma_scale: 1.0,
        tau_scale: 1.0,
    }
}

/// Fits the input layer of a judge's rubrics (`cells[r]` its anchors in rubric r, each with
/// every covariate of `names`, in that order): per rubric the candidate with the lowest
/// held-out MAE, then each served candidate by NUTS, the rubrics that serve it pooled.
pub fn fit_layer(
    cells: &[Vec<Row>],
    names: &[String],
    opts: &LayerOptions,
    run: &Run,
) -> Result<Vec<Layer>, String> {
    check_rows(cells, names.len())?;
    let (columns, options) = full_columns(cells, names, opts.piecewise)?;
    let design = |row: &Row| -> Vec<f64> {
        columns
            .iter()
            .map(|col| match col {
                Column::Judge => row.score,
                Column::Covariate(input) => {
                    let c = names.iter().position(|n| *n == input.name).unwrap_or(0);
                    input.value(row.covariates[c]).unwrap_or(f64::NAN)
                }
            })
            .collect()
    };
    let design = Design {
        rows: cells
            .iter()
            .map(|cell| {
                cell.iter()
                    .map(|row| (design(row), row.reference))
                    .collect()
            })
            .collect(),
        candidates: candidates_of(&options, opts.keep_all),
        columns,
    };
    let held = design.cross_fit(opts, run)?;
    let figures = design.considered(&held);
    let sets: Vec<Vec<&str>> = (0..design.candidates.len())
        .map(|ci| design.covariates_of(ci))
        .collect();
    let served: Vec<usize> = figures.iter().map(|f| served_candidate(f, &sets)).collect();
    let fits = design.fit_served(&served, opts, run)?;
    Ok((0..design.rows.len())
        .map(|r| {
            let ci = served[r];
            let served = fits
                .iter()
                .find(|f| f.candidate == ci)
                .expect("every served candidate was fitted");
            let at = served.rubrics.iter().position(|&q| q == r).unwrap_or(0);
            let mut layer = design.layer(
                r,
                ci,
                &served.fit.rubrics[at],
                figures[r].clone(),
                &held[ci][r],
            );
            layer.deciles = residual_deciles(&layer, &cells[r], names);
            layer
        })
        .collect())
}

/// Each served covariate's held-out residuals by decile of its raw values over `rows` (the
/// layer's anchors, in the same order).
fn residual_deciles(layer: &Layer, rows: &[Row], names: &[String]) -> Vec<Deciles> {
    let residuals: Vec<f64> = layer.anchors.iter().map(|(s, y)| y - s).collect();
    let mut out: Vec<Deciles> = Vec::new();
    for input in &layer.inputs {
        let Some(c) = names.iter().position(|n| *n == input.name) else {
            continue;
        };
        if out.iter().any(|d| d.name == input.name) {
            continue;
        }
        let values: Vec<f64> = rows.iter().map(|r| r.covariates[c]).collect();
        out.extend(Deciles::of(&input.name, &values, &residuals));
    }
    out
}

/// Every anchor has `k` covariates and every value is finite.
fn check_rows(cells: &[Vec<Row>], k: usize) -> Result<(), String> {
    if k == 0 {
        return Err("no covariate to fit".into());
    }
    for (r, cell) in cells.iter().enumerate() {
        for (i, row) in cell.iter().enumerate() {
            if row.covariates.len() != k {
                return Err(format!(
                    "rubric {r}, anchor {i}: {} covariates where the layer has {k}",
                    row.covariates.len()
                ));
            }
            if !row.score.is_finite()
                || !row.reference.is_finite()
                || row.covariates.iter().any(|c| !c.is_finite())
            {
                return Err(format!("rubric {r}, anchor {i}: a value is not finite"));
            }
        }
    }
    Ok(())
}

/// A served candidate's NUTS fit over the rubrics that serve it (`fit.rubrics[i]` is rubric
/// `rubrics[i]`'s posterior).
struct ServedFit {
    candidate: usize,
    rubrics: Vec<usize>,
    fit: StackFit,
}

/// The full design of a judge's rubrics and the candidate subsets of its columns.
struct Design {
    columns: Vec<Column>,
    /// rows[r]: rubric r's anchors as (full design row, reference).
    rows: Vec<Vec<(Vec<f64>, f64)>>,
    candidates: Vec<Vec<usize>>,
}

impl Design {
    /// Candidate `ci`'s covariates, each once, in column order.
    fn covariates_of(&self, ci: usize) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for &col in &self.candidates[ci] {
            if let Column::Covariate(input) = &self.columns[col]
                && !names.contains(&input.name.as_str())
            {
                names.push(&input.name);
            }
        }
        names
    }

    fn chosen(&self, cand: &[usize]) -> Vec<&Column> {
        cand.iter().map(|&i| &self.columns[i]).collect()
    }

    /// held[c][r][i]: candidate c's cross-fitted fused score of rubric r's anchor i.
    fn cross_fit(&self, opts: &LayerOptions, run: &Run) -> Result<Vec<Vec<Vec<f64>>>, String> {
        let m = self.columns.len() - 1;
        let fold_of: Vec<Vec<usize>> = self
            .rows
            .iter()
            .enumerate()
            .map(|(r, c)| folds(c.len(), opts.folds, opts.sampler.seed ^ (r as u64 + 1)))
            .collect();
        let cv = run.part(0.0, 0.3);
        // Each fold's complement's statistics over the full design, once: a candidate selects
        // its columns from them.
        let fold_stats: Vec<Vec<Stats>> = self
            .rows
            .iter()
            .zip(&fold_of)
            .map(|(cell, fold)| {
                (0..opts.folds)
                    .map(|f| {
                        Stats::of(
                            m + 1,
                            cell.iter()
                                .zip(fold)
                                .filter(|(_, g)| **g != f)
                                .map(|((x, y), _)| (x.as_slice(), *y)),
                        )
                    })
                    .collect()
            })
            .collect();
        let mut held: Vec<Vec<Vec<f64>>> = Vec::with_capacity(self.candidates.len());
        for (ci, cand) in self.candidates.iter().enumerate() {
            if run.cancelled() {
                return Err("cancelled".into());
            }
            let chosen = self.chosen(cand);
            let prior = priors(&chosen);
            let mut per_rubric = Vec::with_capacity(self.rows.len());
            for ((cell, fold), complement) in self.rows.iter().zip(&fold_of).zip(&fold_stats) {
                let mut out = vec![f64::NAN; cell.len()];
                for (f, all) in complement.iter().enumerate() {
                    let stats = all.select(cand);
                    let Some((mean, _, _)) = stats.conjugate(&prior.mean, &prior.sd) else {
                        return Err(format!(
                            "the inputs {} are collinear on the anchors",
                            label(&chosen)
                        ));
                    };
                    for (i, (x, _)) in cell.iter().enumerate() {
                        if fold[i] == f {
                            out[i] = mean[0]
                                + cand
                                    .iter()
                                    .enumerate()
                                    .map(|(j, &col)| mean[j + 1] * x[col])
                                    .sum::<f64>();
                        }
                    }
                }
                per_rubric.push(out);
            }
            held.push(per_rubric);
            cv.report((ci + 1) as f64 / self.candidates.len() as f64);
        }
        Ok(held)
    }

    /// Per rubric, every candidate's held-out errors.
    fn considered(&self, held: &[Vec<Vec<f64>>]) -> Vec<Vec<ConsideredInputs>> {
        (0..self.rows.len())
            .map(|r| {
                self.candidates
                    .iter()
                    .zip(held)
                    .map(|(cand, h)| {
                        let n = self.rows[r].len().max(1) as f64;
                        let (abs, sq) = h[r]
                            .iter()
                            .zip(&self.rows[r])
                            .fold((0.0, 0.0), |(a, s), (p, (_, y))| {
                                (a + (p - y).abs(), s + (p - y).powi(2))
                            });
                        ConsideredInputs {
                            inputs: cand[1..].iter().map(|&i| self.columns[i].label()).collect(),
                            mae: abs / n,
                            mse: sq / n,
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// One NUTS fit per candidate served anywhere, over the rubrics that serve it.
    fn fit_served(
        &self,
        served: &[usize],
        opts: &LayerOptions,
        run: &Run,
    ) -> Result<Vec<ServedFit>, String> {
        let m = self.columns.len() - 1;
        let mut distinct: Vec<usize> = served.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let full = run.part(0.3, 1.0);
        let mut fits = Vec::with_capacity(distinct.len());
        for (d, &ci) in distinct.iter().enumerate() {
            let cand = &self.candidates[ci];
            // The rubrics that serve this candidate, pooled: its coefficients mean the same
            // there (and a rubric serving another is no part of its sampler's work).
            let rubrics: Vec<usize> = (0..served.len()).filter(|&r| served[r] == ci).collect();
            let stats: Vec<Stats> = rubrics
                .iter()
                .map(|&r| {
                    Stats::of(m + 1, self.rows[r].iter().map(|(x, y)| (x.as_slice(), *y)))
                        .select(cand)
                })
                .collect();
            let mut stack = StackOptions {
                sampler: opts.sampler,
                priors: priors(&self.chosen(cand)),
                ..StackOptions::new(cand.len())
            };
            let base = d as f64 / distinct.len() as f64;
            let step = 1.0 / distinct.len() as f64;
            let mut fitted = fit(&stats, &stack, &|s| full.report(base + step * s))?;
            // A fit that misses its gate is extended as the linear corrector's is.
            for round in 1..=EXTENSIONS {
                let Some(why) = fitted.diagnostics.failure() else {
                    break;
                };
                tracing::info!(
                    round,
                    why,
                    "the input layer's NUTS missed its gate: extending the sampler"
                );
                stack.sampler = extended(&stack.sampler, round, fitted.diagnostics.divergences > 0);
                fitted = fit(&stats, &stack, &|_| {})?;
            }
            if let Some(failure) = fitted.diagnostics.failure() {
                return Err(format!(
                    "the input layer's sampler failed its gate: {failure}"
                ));
            }
            fits.push(ServedFit {
                candidate: ci,
                rubrics,
                fit: fitted,
            });
        }
        Ok(fits)
    }

    /// Rubric r's layer: candidate `ci` served with its pooled posterior.
    fn layer(
        &self,
        r: usize,
        ci: usize,
        post: &StackPosterior,
        considered: Vec<ConsideredInputs>,
        held: &[f64],
    ) -> Layer {
        let cand = &self.candidates[ci];
        let rows = &self.rows[r];
        let inputs: Vec<Input> = cand[1..]
            .iter()
            .filter_map(|&i| match &self.columns[i] {
                Column::Covariate(input) => Some(input.clone()),
                Column::Judge => None,
            })
            .collect();
        let coefficients = inputs
            .iter()
            .zip(&post.members[1..])
            .map(|(input, w)| Coefficient {
                input: input.label(),
                per_sd: w.weight,
                per_sd_lo: w.weight_lo,
                per_sd_hi: w.weight_hi,
                per_unit: w.weight / input.scale,
            })
            .collect();
        let p = post.mean.len();
        let n = rows.len().max(1) as f64;
        let mut centre = vec![1.0];
        centre.extend(
            cand.iter()
                .map(|&col| rows.iter().map(|(x, _)| x[col]).sum::<f64>() / n),
        );
        Layer {
            inputs,
            mean: post.mean.iter().copied().collect(),
            cov: post.cov.transpose().iter().copied().collect::<Vec<f64>>()[..p * p].to_vec(),
            sigma2: post.sigma2_mean,
            judge: post.members[0].clone(),
            coefficients,
            considered,
            anchors: held.iter().zip(rows).map(|(&s, (_, y))| (s, *y)).collect(),
            centre,
            deciles: Vec::new(),
        }
    }
}

impl Column {
    fn label(&self) -> String {
        match self {
            Column::Judge => "score".to_owned(),
            Column::Covariate(input) => input.label(),
        }
    }
}

fn label(columns: &[&Column]) -> String {
    columns
        .iter()
        .map(|c| c.label())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::rng::{Rng, SeedableRng};
    use crate::stats::{self, standard_normal};

    /// A world where people's reference is N(3, 0.8²) whatever the length, and the judge adds
    /// `bias` reference sds per sd of log length: j = y + bias·0.8·z + ε, ε ~ N(0, 0.3²). Rows
    /// of (length, judge, reference).
    fn world(rng: &mut Rng, n: usize, bias: f64) -> Vec<Row> {
        (0..n)
            .map(|_| {
                let z = standard_normal(rng);
                let y = 3.0 + 0.8 * standard_normal(rng);
                Row {
                    score: y + bias * 0.8 * z + 0.3 * standard_normal(rng),
                    covariates: vec![(6.0 + 0.6 * z).exp()],
                    reference: y,
                }
            })
            .collect()
    }

    /// E[y | j, z] = 3 + k·(j − 3 − bias·0.8·z) with k = 0.64 / (0.64 + 0.09): the coefficient
    /// of log length is −k·bias·0.8 / 0.6 per unit of log length.
    fn truth(bias: f64) -> f64 {
        let k = 0.64 / (0.64 + 0.09);
        -k * bias * 0.8 / 0.6
    }

    fn fit_one(rows: &[Row], keep_all: bool, seed: u64) -> Result<Layer, String> {
        let cancel = AtomicBool::new(false);
        let quiet = |_: f64| {};
        let opts = LayerOptions {
            sampler: FitOptions {
                seed,
                ..FitOptions::default()
            },
            keep_all,
            ..LayerOptions::default()
        };
        fit_layer(
            &[rows.to_vec()],
            &["length".to_owned()],
            &opts,
            &Run::new(&cancel, &quiet),
        )
        .map(|mut l| l.remove(0))
    }

    #[test]
    fn a_length_biased_judge_is_corrected_at_its_length_and_the_bias_is_measured() {
        let mut rng = Rng::seed_from_u64(5);
        let anchors = world(&mut rng, 1000, 0.5);
        let layer = fit_one(&anchors, false, 5).unwrap();
        // The log is served: the judge is biased in log length, not in raw tokens.
        assert_eq!(layer.inputs.len(), 1, "{:?}", layer.considered);
        assert_eq!(layer.inputs[0].transform, Transform::Log);
        // The judge alone; raw; logged; logged with hinges at the quartiles, or at five
        // quantiles.
        assert_eq!(layer.considered.len(), 5);
        let c = &layer.coefficients[0];
        let scale = layer.inputs[0].scale;
        let (lo, hi) = (c.per_sd_lo / scale, c.per_sd_hi / scale);
        assert!(
            (lo..=hi).contains(&truth(0.5)),
            "{lo}..{hi} vs {}",
            truth(0.5)
        );
        assert!((c.per_unit - c.per_sd / scale).abs() < 1e-12);
        // Fresh items: the layer's error at least 30% below the judge-alone line's.
        let alone = fit_one(&anchors, false, 5).map(|_| {
            let s = Stats::of(
                1,
                anchors
                    .iter()
                    .map(|a| (std::slice::from_ref(&a.score), a.reference)),
            );
            s.conjugate(&[0.0, 1.0], &[2.0, 2.0]).unwrap().0
        });
        let line = alone.unwrap();
        let fresh = world(&mut rng, 4000, 0.5);
        let with: Vec<f64> = fresh
            .iter()
            .map(|r| (layer.fuse(r.score, &|_| Some(r.covariates[0])).unwrap() - r.reference).abs())
            .collect();
        let without: Vec<f64> = fresh
            .iter()
            .map(|r| (line[0] + line[1] * r.score - r.reference).abs())
            .collect();
        let (with, without) = (stats::mean(&with), stats::mean(&without));
        assert!(
            with < 0.7 * without,
            "MAE {with} with the length, {without} without"
        );
        // The stacking posterior's own band holds on fresh items.
        let inside = fresh
            .iter()
            .filter(|r| {
                let c = layer.correct(r.score, &|_| Some(r.covariates[0])).unwrap();
                (c.predictive.0..=c.predictive.1).contains(&r.reference)
            })
            .count() as f64
            / fresh.len() as f64;
        assert!((0.93..=0.97).contains(&inside), "{inside}");
    }

    /// The judge rewards length only past the median: j = y + 2·0.4·0.8·max(0, z) + ε.
    fn hinged(rng: &mut Rng, n: usize, shift: f64) -> Vec<Row> {
        (0..n)
            .map(|_| {
                let z = shift + standard_normal(rng) * if shift == 0.0 { 1.0 } else { 0.5 };
                let y = 3.0 + 0.8 * standard_normal(rng);
                Row {
                    score: y + 0.64 * z.max(0.0) + 0.3 * standard_normal(rng),
                    covariates: vec![(6.0 + 0.6 * z).exp()],
                    reference: y,
                }
            })
            .collect()
    }

    #[test]
    fn a_reward_past_the_median_is_served_a_bend_and_long_items_are_read_without_bias() {
        let mut rng = Rng::seed_from_u64(8);
        let anchors = hinged(&mut rng, 1000, 0.0);
        let layer = fit_one(&anchors, false, 8).unwrap();
        // The log with its hinges (three or five): the line in log length misses the bend.
        assert!(
            [4, 6].contains(&layer.inputs.len()),
            "{:?}",
            layer.considered
        );
        assert!(
            layer.inputs[1..]
                .iter()
                .all(|i| matches!(i.transform, Transform::Hinge { .. }))
        );
        let line = layer
            .considered
            .iter()
            .find(|c| c.inputs == ["log(length)"])
            .unwrap();
        let bent = layer
            .considered
            .iter()
            .find(|c| c.inputs.len() == layer.inputs.len())
            .unwrap();
        assert!(bent.mae < 0.97 * line.mae, "{:?}", layer.considered);
        // Long items (z ~ N(1, 0.5²)): their mean layer score sits on their mean reference,
        // and the residual check finds nothing to add.
        let long = hinged(&mut rng, 4000, 1.0);
        let error: f64 = long
            .iter()
            .map(|r| layer.fuse(r.score, &|_| Some(r.covariates[0])).unwrap() - r.reference)
            .sum::<f64>()
            / long.len() as f64;
        assert!(error.abs() < 0.03, "{error}");
        assert_eq!(layer.deciles.len(), 1);
        let lengths: Vec<f64> = long[..300].iter().map(|r| r.covariates[0]).collect();
        assert!(layer.misfit(&|_| lengths.clone()).is_none());
    }

    #[test]
    fn without_a_length_bias_the_interval_covers_zero_effect() {
        let mut rng = Rng::seed_from_u64(6);
        let anchors = world(&mut rng, 600, 0.0);
        let layer = fit_one(&anchors, true, 6).unwrap();
        // Every covariate kept: its transform is still chosen, its coefficient covers 0.
        assert_eq!(layer.inputs.len(), 1);
        assert!(!layer.considered.iter().any(|c| c.inputs.is_empty()));
        let c = &layer.coefficients[0];
        assert!(c.per_sd_lo < 0.0 && c.per_sd_hi > 0.0, "{c:?}");
    }

    #[test]
    fn items_missing_a_covariate_or_out_of_its_domain_are_refused_by_name() {
        let mut rng = Rng::seed_from_u64(7);
        let layer = fit_one(&world(&mut rng, 300, 0.5), true, 7).unwrap();
        assert_eq!(layer.inputs[0].transform, Transform::Log);
        let missing = layer.fuse(3.0, &|_| None).unwrap_err();
        assert_eq!(missing.covariate, "length");
        assert!(
            missing
                .to_string()
                .starts_with("covariates.length is missing"),
            "{missing}"
        );
        assert!(
            layer
                .fuse(3.0, &|_| Some(0.0))
                .unwrap_err()
                .to_string()
                .contains("log(length) needs a positive value")
        );
        // A covariate with one value cannot be fitted.
        let mut flat = world(&mut rng, 100, 0.0);
        flat.iter_mut().for_each(|r| r.covariates[0] = 5.0);
        assert!(
            fit_one(&flat, true, 7)
                .unwrap_err()
                .contains("takes one value")
        );
    }
}
