//! Bradley–Terry ratings of the people's preferences, powered by a judge's verdicts:
//! prediction-powered inference (PPI++, Angelopoulos et al. 2023; for Bradley–Terry, Boyeau
//! et al., "AutoEval Done Right") with the calibrated preference as the prediction.
//!
//! The estimand is the ratings θ (baseline at 0) and control coefficients γ that solve
//! E[(y − σ(xᵀ(θ, γ))) x] = 0 over the run's comparisons, y the people's preference (a tie ½)
//! and x = e_a − e_b beside the controls (the covariates controlled for, as Arena's style
//! control puts length beside the ratings). Only some comparisons carry y: the labelled set
//! (the cell's anchors, and the run's own labelled rows). Every run comparison carries the
//! prediction g = P(people prefer a | verdicts), and each labelled one its held-out
//! prediction ĝ (from a map that did not see it). The estimate solves
//!
//!   (λ/N) Σ_run (g − σ) x + (1/n) Σ_labelled [(y − σ) − λ(ĝ − σ)] x = 0,
//!
//! the gradient of a concave objective, so Newton's method finds it. With λ = 0 it is
//! Bradley–Terry on the labelled comparisons alone; with λ = 1 the predictions carry the run
//! and the labels correct their bias. No prediction biases it, however wrong: a judge that
//! favours a system moves g, and the labelled term moves the ratings back. λ is chosen
//! (PPI++'s closed form, clipped to [0, 1]) to minimise the trace of the ratings' variance,
//! so the interval is never wider, to first order, than the labels' alone.
//!
//! The covariance is the sandwich H⁻¹ (λ²/N·Cov_run[(g − σ)x] + 1/n·Cov_lab[((y − σ) −
//! λ(ĝ − σ))x]) H⁻¹. It takes the labelled comparisons to be drawn as the run's are: the
//! labelled term corrects the predictions' bias on average over the labelled set's systems
//! and pairs, and those must be the run's.

use std::collections::BTreeMap;

use nalgebra::{DMatrix, DVector};

use super::ratings::{MAX_STEP, RatingError, Ratings, check_comparison, reached};
use super::{log_sigmoid, sigmoid};
use crate::stats::newton_ascent;

/// One run comparison: systems `a` and `b`, the predicted probability that people prefer a,
/// and the controls' values.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicted {
    pub a: usize,
    pub b: usize,
    pub predicted: f64,
    pub controls: Vec<f64>,
}

/// One labelled comparison: as a run comparison, with its held-out prediction as
/// `predicted`, and the people's preference.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub comparison: Predicted,
    pub preference: f64,
    /// The rater whose label it is, where named: one rater's labels may be alike (a taste
    /// for a system moves them all), so the intervals count raters, not labels, as the
    /// independent units. `None`: a rater of this one label.
    pub rater: Option<u64>,
}

/// Fitted ratings and controls.
#[derive(Debug, Clone, PartialEq)]
pub struct Powered {
    /// The ratings and their covariance.
    pub ratings: Ratings,
    /// The controls' coefficients (log-odds per unit) and their standard errors.
    pub controls: Vec<(f64, f64)>,
    /// The weight the predictions got (0: the labels alone; 1: full weight).
    pub lambda: f64,
    pub labelled: usize,
    /// The ratings' covariance in its two parts, k × k: the run's predictions' share, and the
    /// labelled term's, which falls as 1/labelled.
    pub run_part: Vec<f64>,
    pub labelled_part: Vec<f64>,
}

impl Powered {
    /// The widest half-width at `level` among the ratings (the baseline's is 0) were
    /// `more` comparisons labelled beside those of the fit, drawn as they were: the labelled
    /// term scaled by n/(n + more), the prediction weight held.
    pub fn widest_half_width(&self, level: f64, more: usize) -> f64 {
        let k = self.ratings.ratings.len();
        let n = self.labelled as f64;
        let shrink = n / (n + more as f64);
        let z = crate::stats::normal_quantile(0.5 + level / 2.0);
        (0..k)
            .map(|i| {
                let v = self.run_part[i * k + i] + shrink * self.labelled_part[i * k + i];
                z * v.max(0.0).sqrt()
            })
            .fold(0.0, f64::max)
    }

    /// The fewest more labels (at most `available`) that bring the widest half-width to
    /// `target`; `None` where even `available` would not.
    pub fn labels_for(&self, level: f64, target: f64, available: usize) -> Option<usize> {
        if self.widest_half_width(level, 0) <= target {
            return Some(0);
        }
        if self.widest_half_width(level, available) > target {
            return None;
        }
        let (mut lo, mut hi) = (0usize, available);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.widest_half_width(level, mid) <= target {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(hi)
    }
}

const MAX_ITERATIONS: usize = 100;

/// The model's parameters: the free ratings (every system but the baseline) then the
/// controls.
struct Layout {
    k: usize,
    baseline: usize,
    controls: usize,
    /// Each control's sd over the run, to solve in standard units. A control is a difference
    /// between a's answer and b's (0: equal style), so it is scaled but never centred: the
    /// run's mean difference is not 0 where a run lists its longer answers first, and a centred
    /// control would leave the ratings at that mean style instead of at equal style.
    scale: Vec<f64>,
}

impl Layout {
    fn dimension(&self) -> usize {
        self.k - 1 + self.controls
    }

    fn slot(&self, i: usize) -> Option<usize> {
        match i.cmp(&self.baseline) {
            std::cmp::Ordering::Less => Some(i),
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => Some(i - 1),
        }
    }

    fn features(&self, c: &Predicted) -> Vec<(usize, f64)> {
        let mut x = Vec::with_capacity(2 + self.controls);
        if let Some(s) = self.slot(c.a) {
            x.push((s, 1.0));
        }
        if let Some(s) = self.slot(c.b) {
            x.push((s, -1.0));
        }
        let free = self.k - 1;
        for (t, v) in c.controls.iter().enumerate() {
            x.push((free + t, v / self.scale[t]));
        }
        x
    }
}

/// A comparison ready for the sums: its features, its prediction and its preference.
struct Row {
    x: Vec<(usize, f64)>,
    /// The prediction (run) or held-out prediction (labelled).
    g: f64,
    /// The preference (labelled only).
    y: Option<f64>,
    /// The row's weight in its set's mean: 1 for the run's; a labelled row's raking weight
    /// ([`mix_weights`]), so that the labels stand for the run's mix of systems.
    w: f64,
}

fn dot(x: &[(usize, f64)], theta: &[f64]) -> f64 {
    x.iter().map(|&(i, v)| v * theta[i]).sum()
}

fn check(k: usize, index: usize, c: &Predicted, controls: usize) -> Result<(), RatingError> {
    check_comparison(k, index, c.a, c.b, ("prediction", c.predicted))?;
    if c.controls.len() != controls || c.controls.iter().any(|v| !v.is_finite()) {
        return Err(RatingError::BadComparison {
            index,
            problem: format!("{controls} finite control values expected"),
        });
    }
    Ok(())
}

/// The objective's value, gradient and (negated) Hessian, each as a mean over its set.
struct Sums {
    value: f64,
    gradient: DVector<f64>,
    information: DMatrix<f64>,
}

fn sums(run: &[Row], labelled: &[Row], theta: &[f64], lambda: f64, d: usize) -> Sums {
    let mut s = Sums {
        value: 0.0,
        gradient: DVector::zeros(d),
        information: DMatrix::zeros(d, d),
    };
    let mut add = |rows: &[Row], weight: f64, outcome: &dyn Fn(&Row) -> (f64, f64)| {
        for r in rows {
            let eta = dot(&r.x, theta);
            let p = sigmoid(eta);
            // c₁ log σ(η) + c₀ log σ(−η): gradient (c₁ − (c₁ + c₀)p)x.
            let (c1, c0) = outcome(r);
            let weight = weight * r.w;
            s.value += weight * (c1 * log_sigmoid(eta) + c0 * log_sigmoid(-eta));
            let residual = c1 - (c1 + c0) * p;
            let curvature = (c1 + c0) * p * (1.0 - p);
            for &(i, xi) in &r.x {
                s.gradient[i] += weight * residual * xi;
                for &(j, xj) in &r.x {
                    s.information[(i, j)] += weight * curvature * xi * xj;
                }
            }
        }
    };
    if !run.is_empty() {
        add(run, lambda / run.len() as f64, &|r| (r.g, 1.0 - r.g));
    }
    let y = |r: &Row| r.y.unwrap_or(r.g);
    add(labelled, 1.0 / labelled.len() as f64, &|r| {
        (y(r) - lambda * r.g, 1.0 - y(r) - lambda * (1.0 - r.g))
    });
    s
}

/// Each row's score u = r·x is its residual r times its features: the residuals
/// (outcome − σ) of `rows` at `theta`.
fn residuals(rows: &[Row], theta: &[f64], outcome: &dyn Fn(&Row) -> f64) -> Vec<f64> {
    rows.iter()
        .map(|r| r.w * (outcome(r) - sigmoid(dot(&r.x, theta))))
        .collect()
}

/// The sample cross-covariance of the scores rₐ·x and r_b·x over `rows` (the covariance when
/// the residuals are the same), summed over each row's few features.
fn covariance(rows: &[&Row], ra: &[f64], rb: &[f64], d: usize) -> DMatrix<f64> {
    let n = rows.len().max(1) as f64;
    let mut c = DMatrix::zeros(d, d);
    let (mut ma, mut mb) = (DVector::zeros(d), DVector::zeros(d));
    for ((r, a), b) in rows.iter().zip(ra).zip(rb) {
        for &(i, xi) in &r.x {
            ma[i] += a * xi;
            mb[i] += b * xi;
            for &(j, xj) in &r.x {
                c[(i, j)] += a * b * xi * xj;
            }
        }
    }
    c / n - (ma / n) * (mb / n).transpose()
}

/// The covariance of the scores r·x over `rows` where one rater's rows may be alike
/// (`raters`, aligned with `rows`; `None`: a rater of that row alone): each rater's scores are
/// summed, and the sums' spread about their share of the mean is taken over the G raters,
/// times G/(G − 1), per row, and the effective number of raters, (Σ n_g)² / Σ n_g² over the
/// raters' label counts n_g: G where every rater gave as many labels, fewer where one gave
/// most (Carter, Schnepel and Steigerwald's effective number of clusters), which the
/// intervals' degrees of freedom are taken from. With one row a rater it is `covariance`
/// times n/(n − 1), and G.
fn by_rater(rows: &[&Row], r: &[f64], raters: &[Option<u64>], d: usize) -> (DMatrix<f64>, f64) {
    let n = rows.len().max(1) as f64;
    let mut mean = DVector::zeros(d);
    let mut sums: BTreeMap<(bool, u64), (DVector<f64>, f64)> = BTreeMap::new();
    for (k, ((row, ri), rater)) in rows.iter().zip(r).zip(raters).enumerate() {
        let key = match rater {
            Some(id) => (true, *id),
            None => (false, k as u64),
        };
        let (sum, count) = sums.entry(key).or_insert((DVector::zeros(d), 0.0));
        for &(i, xi) in &row.x {
            sum[i] += ri * xi;
            mean[i] += ri * xi;
        }
        *count += 1.0;
    }
    mean /= n;
    let g = sums.len() as f64;
    let mut c = DMatrix::zeros(d, d);
    for (sum, count) in sums.values() {
        let deviation = sum - &mean * *count;
        c += &deviation * deviation.transpose();
    }
    let squares: f64 = sums.values().map(|(_, count)| count * count).sum();
    (c * (g / (g - 1.0).max(1.0)) / n, n * n / squares)
}

/// Rounds of raking in [`mix_weights`].
const RAKING_ROUNDS: usize = 100;

/// Each labelled comparison's weight (mean 1) so that the labels stand for the run's mix of
/// systems: w = u_a·u_b, raked (iterative proportional fitting) until each system's weighted
/// share of the labelled comparisons is its share of the run's. The labelled term corrects
/// the predictions' bias as an average over the labels; where the labels hold a system far
/// less often than the run does (a new model: few labels, many battles) or the run's systems
/// are skewed (a few fight most battles), the unweighted average weighs each system's bias by
/// its labelled share, and the judge's favour for an under-labelled system stays in its
/// rating. Where the run's pairs are drawn as two systems apart from each other, matching the
/// systems' shares reproduces the run's mix of pairs. A system with no labelled comparison
/// keeps weight 1 (nothing can stand for it; the answer names it). Where the shares already
/// agree the weights stay near 1, and the sandwich carries what they add to the variance.
pub fn mix_weights(k: usize, run: &[Predicted], labelled: &[Observed]) -> Vec<f64> {
    let n = labelled.len();
    if n == 0 || run.is_empty() {
        return vec![1.0; n];
    }
    let mut target = vec![0.0; k];
    for c in run {
        target[c.a] += 1.0;
        target[c.b] += 1.0;
    }
    let total: f64 = target.iter().sum();
    target.iter_mut().for_each(|t| *t /= total);
    let mut labelled_in = vec![false; k];
    for o in labelled {
        labelled_in[o.comparison.a] = true;
        labelled_in[o.comparison.b] = true;
    }
    // The shares of systems the labels hold, out of what the labels can stand for.
    let reachable: f64 = (0..k).filter(|&s| labelled_in[s]).map(|s| target[s]).sum();
    let mut u = vec![1.0; k];
    for _ in 0..RAKING_ROUNDS {
        let mut share = vec![0.0; k];
        let mut sum = 0.0;
        for o in labelled {
            let (a, b) = (o.comparison.a, o.comparison.b);
            let w = u[a] * u[b];
            share[a] += w;
            share[b] += w;
            sum += 2.0 * w;
        }
        let mut moved: f64 = 0.0;
        for s in (0..k).filter(|&s| labelled_in[s] && target[s] > 0.0) {
            let ratio = (target[s] / reachable) / (share[s] / sum);
            // Half a step on the log scale: each row's weight moves with both its systems.
            let step = ratio.sqrt();
            u[s] *= step;
            moved = moved.max((step - 1.0).abs());
        }
        if moved < 1e-9 {
            break;
        }
    }
    let w: Vec<f64> = labelled
        .iter()
        .map(|o| u[o.comparison.a] * u[o.comparison.b])
        .collect();
    let mean = w.iter().sum::<f64>() / n as f64;
    if mean > 0.0 && mean.is_finite() {
        w.into_iter().map(|x| x / mean).collect()
    } else {
        vec![1.0; n]
    }
}

/// The weights the pilot fit tries, in turn, until Newton's method converges.
const PILOT_WEIGHTS: [f64; 5] = [1.0, 0.5, 0.25, 0.1, 0.0];

/// Above this many raters less one, Student's t is the normal law for intervals' purposes.
pub const MAX_T_DF: usize = 200;

/// The degrees of freedom of a covariance estimated from `units` independent raters (and
/// labels of no named rater, each its own; an effective number, not a whole one, where raters
/// gave unequal shares of the labels): `units` − 1, at least 1, or `None` (normal) past
/// [`MAX_T_DF`].
pub fn t_df(units: f64) -> Option<f64> {
    let df = (units - 1.0).max(1.0);
    (df <= MAX_T_DF as f64).then_some(df)
}

/// Fits the ratings of `k` systems, `baseline` at 0, from the run's predicted comparisons
/// and the labelled ones, with `controls` control columns.
pub fn fit(
    k: usize,
    run: &[Predicted],
    labelled: &[Observed],
    baseline: usize,
    controls: usize,
) -> Result<Powered, RatingError> {
    if baseline >= k {
        return Err(RatingError::Numerical(format!(
            "baseline {baseline} is not one of the {k} systems"
        )));
    }
    for (index, c) in run.iter().enumerate() {
        check(k, index, c, controls)?;
    }
    for (index, o) in labelled.iter().enumerate() {
        check(k, run.len() + index, &o.comparison, controls)?;
        if !(0.0..=1.0).contains(&o.preference) {
            return Err(RatingError::BadComparison {
                index: run.len() + index,
                problem: format!("preference {} outside [0, 1]", o.preference),
            });
        }
    }
    if labelled.is_empty() {
        return Err(RatingError::Numerical(
            "no labelled comparison of these systems: the predictions' bias cannot be corrected"
                .into(),
        ));
    }
    connected(k, run, baseline)?;
    let scale = (0..controls)
        .map(|t| {
            let values: Vec<f64> = run.iter().map(|c| c.controls[t]).collect();
            let sd = crate::stats::sample_variance(&values).sqrt();
            if sd > 0.0 { sd } else { 1.0 }
        })
        .collect();
    let layout = Layout {
        k,
        baseline,
        controls,
        scale,
    };
    // Labels weighted to the run's mix of systems; where that fit has no maximum (a system
    // whose few labels all went one way, weighted up to its share of the run), the labels
    // as they are, whose answer the request's warnings qualify.
    let raked = mix_weights(k, run, labelled);
    fit_weighted(&layout, run, labelled, &raked)
        .or_else(|_| fit_weighted(&layout, run, labelled, &vec![1.0; labelled.len()]))
}

/// The fit of [`fit`] with each labelled comparison weighted by `weights` (mean 1).
fn fit_weighted(
    layout: &Layout,
    run: &[Predicted],
    labelled: &[Observed],
    weights: &[f64],
) -> Result<Powered, RatingError> {
    let (k, baseline, controls) = (layout.k, layout.baseline, layout.controls);
    let d = layout.dimension();
    let (run_rows, lab_rows) = layout.rows(run, labelled, weights);
    // The pilot fit, at which λ is chosen: full weight where it has a maximum; where it has
    // none (a system's run share small beside its labelled share can push a corrected outcome
    // past all or nothing), λ stepped down toward the labels alone, so the pilot never fails
    // where a final estimate exists.
    let mut pilot = Err(RatingError::Numerical("no pilot weight tried".into()));
    for weight in PILOT_WEIGHTS {
        pilot = newton(&run_rows, &lab_rows, weight, d);
        if pilot.is_ok() {
            break;
        }
    }
    let (theta, _) = pilot?;
    let lambda = best_lambda(&run_rows, &lab_rows, &theta, d);
    let (theta, iterations) = newton(&run_rows, &lab_rows, lambda, d)?;
    let at = sums(&run_rows, &lab_rows, &theta, lambda, d);
    let h_inv = at.information.clone().try_inverse().ok_or_else(|| {
        RatingError::Numerical("the information matrix at the fit is singular".into())
    })?;
    let raters: Vec<Option<u64>> = labelled.iter().map(|o| o.rater).collect();
    let (run_middle, lab_middle, df) = middles(&run_rows, &lab_rows, &raters, &theta, lambda, d);
    let run_cov = &h_inv * run_middle * &h_inv;
    let lab_cov = &h_inv * lab_middle * &h_inv;
    let cov = &run_cov + &lab_cov;
    let free = k - 1;
    let (ratings, full, run_part, labelled_part) =
        per_system(layout, &theta, [&cov, &run_cov, &lab_cov]);
    let mut comparisons = vec![0usize; k];
    for c in run {
        comparisons[c.a] += 1;
        comparisons[c.b] += 1;
    }
    let controls = (0..controls)
        .map(|t| {
            let j = free + t;
            (
                theta[j] / layout.scale[t],
                cov[(j, j)].max(0.0).sqrt() / layout.scale[t],
            )
        })
        .collect();
    Ok(Powered {
        ratings: Ratings {
            ratings,
            covariance: full,
            comparisons,
            baseline,
            iterations,
            df,
        },
        controls,
        lambda,
        labelled: labelled.len(),
        run_part,
        labelled_part,
    })
}

impl Layout {
    /// The run's rows (its predictions only) and the labelled rows, each weighted by
    /// `weights`.
    fn rows(
        &self,
        run: &[Predicted],
        labelled: &[Observed],
        weights: &[f64],
    ) -> (Vec<Row>, Vec<Row>) {
        let run_rows: Vec<Row> = run
            .iter()
            .map(|c| Row {
                x: self.features(c),
                g: c.predicted,
                y: None,
                w: 1.0,
            })
            .collect();
        let lab_rows: Vec<Row> = labelled
            .iter()
            .zip(weights)
            .map(|(o, &w)| Row {
                x: self.features(&o.comparison),
                g: o.comparison.predicted,
                y: Some(o.preference),
                w,
            })
            .collect();
        (run_rows, lab_rows)
    }
}

/// The sandwich's middle terms, the run's and the labels', at the fit `theta` with weight
/// `lambda`; and the labels' degrees of freedom where raters are the units.
fn middles(
    run_rows: &[Row],
    lab_rows: &[Row],
    raters: &[Option<u64>],
    theta: &[f64],
    lambda: f64,
    d: usize,
) -> (DMatrix<f64>, DMatrix<f64>, Option<f64>) {
    let (n, big_n) = (lab_rows.len() as f64, run_rows.len().max(1) as f64);
    let run_r = residuals(run_rows, theta, &|r| r.g);
    // The labelled term's residual: w((y − σ) − λ(ĝ − σ)).
    let lab_r: Vec<f64> = lab_rows
        .iter()
        .map(|r| {
            let p = sigmoid(dot(&r.x, theta));
            r.w * ((r.y.unwrap_or(r.g) - p) - lambda * (r.g - p))
        })
        .collect();
    let run_refs: Vec<&Row> = run_rows.iter().collect();
    let lab_refs: Vec<&Row> = lab_rows.iter().collect();
    let run_middle = covariance(&run_refs, &run_r, &run_r, d) * (lambda * lambda / big_n);
    // Raters are the units where labels name them; one named rater alone has no spread
    // between raters to measure (0/0), so the labels are then counted as independent, as
    // where none is named (the answer's `single_rater` warning says so).
    let one_rater = raters[0].is_some() && raters.iter().all(|r| *r == raters[0]);
    let (lab_middle, df) = if raters.iter().any(Option::is_some) && !one_rater {
        let (middle, units) = by_rater(&lab_refs, &lab_r, raters, d);
        (middle / n, t_df(units))
    } else {
        (covariance(&lab_refs, &lab_r, &lab_r, d) / n, None)
    };
    (run_middle, lab_middle, df)
}

/// Each system's rating and the three covariances (full, the run's part, the labels' part)
/// over the systems, the baseline's row and column 0.
#[allow(clippy::type_complexity)]
fn per_system(
    layout: &Layout,
    theta: &[f64],
    [cov, run_cov, lab_cov]: [&DMatrix<f64>; 3],
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let k = layout.k;
    let mut ratings = vec![0.0; k];
    let (mut full, mut run_part, mut labelled_part) =
        (vec![0.0; k * k], vec![0.0; k * k], vec![0.0; k * k]);
    for i in 0..k {
        let Some(s) = layout.slot(i) else { continue };
        ratings[i] = theta[s];
        for j in 0..k {
            if let Some(t) = layout.slot(j) {
                full[i * k + j] = cov[(s, t)];
                run_part[i * k + j] = run_cov[(s, t)];
                labelled_part[i * k + j] = lab_cov[(s, t)];
            }
        }
    }
    (ratings, full, run_part, labelled_part)
}

/// Newton's method on the concave objective at weight `lambda`, from 0.
fn newton(
    run: &[Row],
    labelled: &[Row],
    lambda: f64,
    d: usize,
) -> Result<(Vec<f64>, usize), RatingError> {
    let ascent = newton_ascent(
        DVector::zeros(d),
        MAX_STEP,
        MAX_ITERATIONS,
        |t| sums(run, labelled, t.as_slice(), lambda, d).value,
        |t| {
            let s = sums(run, labelled, t.as_slice(), lambda, d);
            (s.gradient, s.information)
        },
    )
    .ok_or_else(|| {
        RatingError::Numerical("the information matrix is not positive definite".into())
    })?;
    let theta: Vec<f64> = ascent.theta.iter().copied().collect();
    if ascent.converged {
        return Ok((theta, ascent.iterations));
    }
    if theta.iter().any(|t| t.abs() > 30.0) {
        return Err(RatingError::Numerical(
            "the ratings did not converge: some system won or lost nearly every labelled comparison".into(),
        ));
    }
    Ok((theta, MAX_ITERATIONS))
}

/// PPI++'s weight for the predictions: λ = tr(H⁻¹(C + Cᵀ)H⁻¹) / (2(1 + n/N) tr(H⁻¹ F H⁻¹)),
/// C the labelled set's covariance of the preference's and the prediction's scores and F the
/// prediction scores' covariance over every comparison, clipped to [0, 1].
fn best_lambda(run: &[Row], labelled: &[Row], theta: &[f64], d: usize) -> f64 {
    let h = sums(run, labelled, theta, 0.0, d).information;
    let Some(h_inv) = h.try_inverse() else {
        return 1.0;
    };
    let y_r = residuals(labelled, theta, &|r| r.y.unwrap_or(r.g));
    let g_lab = residuals(labelled, theta, &|r| r.g);
    let lab_refs: Vec<&Row> = labelled.iter().collect();
    let cross = covariance(&lab_refs, &y_r, &g_lab, d);
    let all: Vec<&Row> = run.iter().chain(labelled).collect();
    let mut g_all = residuals(run, theta, &|r| r.g);
    g_all.extend(&g_lab);
    let f = covariance(&all, &g_all, &g_all, d);
    let (n, big_n) = (labelled.len() as f64, run.len().max(1) as f64);
    let top = (&h_inv * (&cross + cross.transpose()) * &h_inv).trace();
    let bottom = 2.0 * (1.0 + n / big_n) * (&h_inv * f * &h_inv).trace();
    if bottom > 0.0 {
        (top / bottom).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

/// Every system is joined to the baseline by the run's comparisons.
fn connected(k: usize, run: &[Predicted], baseline: usize) -> Result<(), RatingError> {
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); k];
    for c in run {
        edges[c.a].push(c.b);
        edges[c.b].push(c.a);
    }
    let seen = reached(&edges, baseline);
    let apart: Vec<usize> = (0..k).filter(|&i| !seen[i]).collect();
    if apart.is_empty() {
        Ok(())
    } else {
        Err(RatingError::Apart { systems: apart })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairwise::ratings;
    use crate::rng::{Rng, RngExt, SeedableRng};
    use crate::stats::standard_normal;

    fn predicted(a: usize, b: usize, predicted: f64) -> Predicted {
        Predicted {
            a,
            b,
            predicted,
            controls: vec![],
        }
    }

    #[test]
    fn predictions_the_labels_confirm_carry_the_run_in_closed_form() {
        // Every run comparison predicts 0.8 for a; the labelled ones were predicted exactly
        // (held-out prediction = preference), so the labels correct nothing and the rating is
        // logit(0.8) whatever weight the predictions get.
        let run: Vec<Predicted> = (0..1_000).map(|_| predicted(1, 0, 0.8)).collect();
        let labelled: Vec<Observed> = (0..100)
            .map(|i| {
                let y = f64::from(u8::from(i % 5 != 0));
                Observed {
                    comparison: predicted(1, 0, y),
                    preference: y,
                    rater: None,
                }
            })
            .collect();
        let fit = fit(2, &run, &labelled, 0, 0).expect("fit");
        let logit = (0.8f64 / 0.2).ln();
        assert!(
            (fit.ratings.ratings[1] - logit).abs() < 1e-6,
            "{:?} {}",
            fit.ratings.ratings,
            fit.lambda
        );
        // A system the run never joins to the baseline is named.
        let apart = [predicted(1, 0, 0.5), predicted(2, 3, 0.5)];
        assert_eq!(
            fit_err(4, &apart, &labelled),
            RatingError::Apart {
                systems: vec![2, 3]
            }
        );
    }

    fn fit_err(k: usize, run: &[Predicted], labelled: &[Observed]) -> RatingError {
        fit(k, run, labelled, 0, 0).expect_err("refused")
    }

    /// A Bradley–Terry world of `k` systems: people prefer a with chance σ(θ_a − θ_b); the
    /// judge names a winner from the gap plus noise, favours the answer shown first by
    /// `position` and system 1 by `favour`, and its prediction is a fixed, miscalibrated
    /// reading of the verdict (0.75 / 0.25). Gives the truth and (run, labelled).
    fn world(
        k: usize,
        run: usize,
        labelled: usize,
        favour: f64,
        rng: &mut Rng,
    ) -> (Vec<f64>, Vec<Predicted>, Vec<Observed>) {
        let theta: Vec<f64> = (0..k)
            .map(|i| if i == 0 { 0.0 } else { standard_normal(rng) })
            .collect();
        let draw = |rng: &mut Rng| {
            let a = rng.random_range(0..k);
            let b = (a + rng.random_range(1..k)) % k;
            let gap = theta[a] - theta[b];
            let y = f64::from(u8::from(rng.random::<f64>() < ratings_sigmoid(gap)));
            let bias = favour * (f64::from(u8::from(a == 1)) - f64::from(u8::from(b == 1)));
            // The judge reads the same answers people do: its verdict tracks their preference.
            let seen = 2.0 * (y - 0.5) + gap + bias + 0.3 + 1.2 * standard_normal(rng);
            let verdict = f64::from(u8::from(seen > 0.0));
            (predicted(a, b, 0.25 + 0.5 * verdict), y)
        };
        let run: Vec<Predicted> = (0..run).map(|_| draw(rng).0).collect();
        let labelled = (0..labelled)
            .map(|_| {
                let (comparison, preference) = draw(rng);
                Observed {
                    comparison,
                    preference,
                    rater: None,
                }
            })
            .collect();
        (theta, run, labelled)
    }

    fn ratings_sigmoid(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    /// Over 300 worlds of 5 systems (a judge favouring one system by 1 log-odds, a
    /// miscalibrated prediction), the 95% intervals of the 4 free ratings cover 93–97% of
    /// the time, and the powered intervals are narrower than Bradley–Terry on the labels
    /// alone (a judge that agrees with them about 80% of the time, 4,000 run comparisons against
    /// 400 labels). Measured: coverage 95.3%, width 0.90 of the labels' alone.
    #[test]
    fn powered_ratings_cover_and_beat_the_labels_alone() {
        let mut rng = Rng::seed_from_u64(11);
        let (mut covered, mut total) = (0usize, 0usize);
        let (mut width, mut alone_width) = (0.0, 0.0);
        for _ in 0..300 {
            let (theta, run, labelled) = world(5, 4_000, 400, 1.0, &mut rng);
            let powered = fit(5, &run, &labelled, 0, 0).expect("fit");
            let intervals = powered.ratings.intervals(0.95);
            let outcomes: Vec<ratings::Outcome> = labelled
                .iter()
                .map(|o| ratings::Outcome {
                    a: o.comparison.a,
                    b: o.comparison.b,
                    a_better: o.preference,
                })
                .collect();
            let alone = ratings::fit(5, &outcomes, 0).expect("labels alone");
            for i in 1..5 {
                let (lo, hi) = intervals[i];
                covered += usize::from(lo <= theta[i] && theta[i] <= hi);
                total += 1;
                width += hi - lo;
                alone_width += 2.0 * 1.96 * alone.standard_error(i);
            }
        }
        let rate = covered as f64 / total as f64;
        eprintln!("coverage {rate:.3}, width ratio {:.3}", width / alone_width);
        assert!((0.93..=0.97).contains(&rate), "coverage {rate}");
        assert!(width < 0.95 * alone_width, "{width} vs {alone_width}");
    }

    /// The half-width a plan promises for more labels is the one they give: over 40 worlds of
    /// 5 systems, the widest 95% half-width predicted from 200 labels for 600 more, against
    /// the one fitted on 800 labels of the same world, agree on average within 10%; and the
    /// plan for that half-width asks for about 600.
    #[test]
    fn a_label_plans_promised_width_is_the_width_more_labels_give() {
        let mut rng = Rng::seed_from_u64(13);
        let (mut promised, mut given, mut asked) = (0.0, 0.0, 0.0);
        const WORLDS: usize = 40;
        for _ in 0..WORLDS {
            let (_, run, labelled) = world(5, 4_000, 800, 1.0, &mut rng);
            let few = fit(5, &run, &labelled[..200], 0, 0).expect("fit on 200");
            let many = fit(5, &run, &labelled, 0, 0).expect("fit on 800");
            promised += few.widest_half_width(0.95, 600);
            given += many.widest_half_width(0.95, 0);
            let target = many.widest_half_width(0.95, 0);
            asked += few.labels_for(0.95, target, 100_000).expect("reachable") as f64;
            assert_eq!(
                few.labels_for(0.95, few.widest_half_width(0.95, 0), 0),
                Some(0)
            );
            assert_eq!(few.labels_for(0.95, 1e-6, 10), None);
        }
        let (promised, given, asked) = (
            promised / WORLDS as f64,
            given / WORLDS as f64,
            asked / WORLDS as f64,
        );
        eprintln!("promised {promised:.4}, given {given:.4}, asked {asked:.0} for 600");
        assert!(
            (promised / given - 1.0).abs() < 0.10,
            "{promised} vs {given}"
        );
        assert!((300.0..1_200.0).contains(&asked), "{asked}");
    }

    /// Ratings of `k` systems, N(0, 1), the baseline (0) at 0.
    fn ratings_drawn(k: usize, rng: &mut Rng) -> Vec<f64> {
        (0..k)
            .map(|i| if i == 0 { 0.0 } else { standard_normal(rng) })
            .collect()
    }

    /// Over 300 worlds of `k` systems (ratings θ ~ N(0, 1), the baseline at 0), each with a
    /// run of 3,000 comparisons and 500 labelled ones drawn by `draw` (given θ: a comparison
    /// with one control, and the people's preference), style-controlled ratings are fitted:
    /// the share of rating intervals that cover θ, and of the control's within 1.96 se of
    /// `gamma`.
    fn controlled_coverage(
        seed: u64,
        k: usize,
        gamma: f64,
        draw: impl Fn(&[f64], &mut Rng) -> (Predicted, f64),
    ) -> (f64, f64) {
        let mut rng = Rng::seed_from_u64(seed);
        let (mut covered, mut total, mut coefficient) = (0usize, 0usize, 0usize);
        for _ in 0..300 {
            let theta = ratings_drawn(k, &mut rng);
            let run: Vec<Predicted> = (0..3_000).map(|_| draw(&theta, &mut rng).0).collect();
            let labelled: Vec<Observed> = (0..500)
                .map(|_| {
                    let (comparison, preference) = draw(&theta, &mut rng);
                    Observed {
                        comparison,
                        preference,
                        rater: None,
                    }
                })
                .collect();
            let fit = fit(k, &run, &labelled, 0, 1).expect("fit");
            let intervals = fit.ratings.intervals(0.95);
            for i in 1..k {
                let (lo, hi) = intervals[i];
                covered += usize::from(lo <= theta[i] && theta[i] <= hi);
                total += 1;
            }
            let (g, se) = fit.controls[0];
            coefficient += usize::from((g - gamma).abs() <= 1.96 * se);
        }
        (covered as f64 / total as f64, coefficient as f64 / 300.0)
    }

    /// A comparison of a and b whose answers differ in length by `z`: people prefer a with
    /// chance σ(θ_a − θ_b + γ·z), and the judge, seeing the gap with noise, rewards length
    /// twice as much; its prediction is a fixed reading of its verdict.
    fn styled(
        theta: &[f64],
        (a, b, z): (usize, usize, f64),
        gamma: f64,
        rng: &mut Rng,
    ) -> (Predicted, f64) {
        let gap = theta[a] - theta[b] + gamma * z;
        let y = f64::from(u8::from(rng.random::<f64>() < ratings_sigmoid(gap)));
        let seen = 2.0 * (y - 0.5) + gap + gamma * z + standard_normal(rng);
        let comparison = Predicted {
            a,
            b,
            predicted: 0.25 + 0.5 * f64::from(u8::from(seen > 0.0)),
            controls: vec![z],
        };
        (comparison, y)
    }

    /// Style control: people prefer a with chance σ(θ_a − θ_b + 0.5·z), z the answers' length
    /// difference, and the judge rewards length twice as much. Over 300 worlds the 95%
    /// intervals of the ratings and of the length coefficient cover 93–97%. Measured: ratings
    /// 95.1%, the coefficient 95.7%.
    #[test]
    fn a_controlled_covariates_coefficient_and_the_ratings_beside_it_cover() {
        let (k, gamma) = (4, 0.5);
        let (ratings, control) = controlled_coverage(12, k, gamma, |theta, rng| {
            let a = rng.random_range(0..k);
            let b = (a + rng.random_range(1..k)) % k;
            let z = standard_normal(rng);
            styled(theta, (a, b, z), gamma, rng)
        });
        eprintln!("controlled: ratings {ratings:.3}, coefficient {control:.3}");
        assert!((0.93..=0.97).contains(&ratings), "ratings {ratings}");
        assert!((0.93..=0.97).contains(&control), "coefficient {control}");
    }

    /// Style control where the run lists the longer answer first, as AlpacaEval's layout
    /// does: every comparison puts a system (as a) against the baseline (as b), and each
    /// system's answers are longer than the baseline's by its own amount (0.5 to 1.5 sd), so
    /// the run's mean length difference is far from 0. The controlled ratings are the ratings
    /// at equal length, θ: over 300 worlds their 95% intervals cover 93–97%. Measured: 94.3%;
    /// with the control centred on the run's mean, as it was before, 17.9% (each rating sat
    /// at the run's mean length difference, off by γ times it).
    #[test]
    fn controlled_ratings_are_at_equal_style_where_the_run_lists_longer_answers_first() {
        let (k, gamma) = (4, 0.5);
        let longer: Vec<f64> = (0..k).map(|i| 0.5 * i as f64).collect();
        let (ratings, control) = controlled_coverage(14, k, gamma, |theta, rng| {
            let a = rng.random_range(1..k);
            let z = longer[a] + standard_normal(rng);
            styled(theta, (a, 0, z), gamma, rng)
        });
        eprintln!(
            "controlled, longer answers first: ratings {ratings:.3}, coefficient {control:.3}"
        );
        assert!((0.93..=0.97).contains(&ratings), "ratings {ratings}");
    }

    /// Raters who differ: 8 raters label 50 comparisons each, and rater r prefers a with
    /// chance σ(θ_a − θ_b + t_ra − t_rb), their tastes t ~ N(0, 0.5²) per system; the truth is
    /// the people's at large, θ (taste 0 on average). Over 300 worlds of 4 systems, with the
    /// raters named the 95% intervals cover 93–97% (the labels' covariance taken over raters,
    /// Student's t on 7 degrees of freedom); with none named they cover under 90%, as if 400
    /// labels were 400 independent people. Measured: 95.1% named, 78.0% not.
    #[test]
    fn named_raters_who_differ_are_counted_as_raters_not_labels() {
        let mut rng = Rng::seed_from_u64(15);
        let (k, raters, each) = (4, 8, 50);
        let (mut named, mut unnamed, mut total) = (0usize, 0usize, 0usize);
        for _ in 0..300 {
            let theta = ratings_drawn(k, &mut rng);
            let draw = |taste: &[f64], rng: &mut Rng| {
                let a = rng.random_range(0..k);
                let b = (a + rng.random_range(1..k)) % k;
                let gap = theta[a] - theta[b] + taste[a] - taste[b];
                let y = f64::from(u8::from(rng.random::<f64>() < ratings_sigmoid(gap)));
                let seen = theta[a] - theta[b] + standard_normal(rng);
                let comparison = Predicted {
                    a,
                    b,
                    predicted: 0.25 + 0.5 * f64::from(u8::from(seen > 0.0)),
                    controls: vec![],
                };
                (comparison, y)
            };
            let none = vec![0.0; k];
            let run: Vec<Predicted> = (0..3_000).map(|_| draw(&none, &mut rng).0).collect();
            let mut labelled = Vec::new();
            for r in 0..raters {
                let taste: Vec<f64> = (0..k).map(|_| 0.5 * standard_normal(&mut rng)).collect();
                for _ in 0..each {
                    let (comparison, preference) = draw(&taste, &mut rng);
                    labelled.push(Observed {
                        comparison,
                        preference,
                        rater: Some(r as u64),
                    });
                }
            }
            let anonymous: Vec<Observed> = labelled
                .iter()
                .map(|o| Observed {
                    rater: None,
                    ..o.clone()
                })
                .collect();
            for (labels, count) in [(&labelled, &mut named), (&anonymous, &mut unnamed)] {
                let fit = fit(k, &run, labels, 0, 0).expect("fit");
                let intervals = fit.ratings.intervals(0.95);
                for i in 1..k {
                    let (lo, hi) = intervals[i];
                    *count += usize::from(lo <= theta[i] && theta[i] <= hi);
                }
            }
            total += k - 1;
        }
        let (named, unnamed) = (named as f64 / total as f64, unnamed as f64 / total as f64);
        eprintln!("raters who differ: named {named:.3}, not named {unnamed:.3}");
        assert!((0.93..=0.97).contains(&named), "named {named}");
        assert!(unnamed < 0.90, "not named {unnamed}");
    }

    /// One named rater behind every label: there is no spread between raters to measure, so
    /// the labels count as independent, exactly as where none is named (before, the
    /// between-rater variance was 0/0 and the interval a point).
    #[test]
    fn one_named_rater_is_read_as_labels_not_as_no_spread() {
        let mut rng = Rng::seed_from_u64(4);
        let (_, run, labelled) = world(4, 2_000, 200, 0.0, &mut rng);
        let one: Vec<Observed> = labelled
            .iter()
            .map(|o| Observed {
                rater: Some(7),
                ..o.clone()
            })
            .collect();
        let (a, b) = (
            fit(4, &run, &labelled, 0, 0).expect("fit"),
            fit(4, &run, &one, 0, 0).expect("fit"),
        );
        for i in 1..4 {
            let se = b.ratings.standard_error(i);
            assert!(se > 0.01, "system {i}: standard error {se}");
            assert!((se - a.ratings.standard_error(i)).abs() < 1e-12);
        }
        assert_eq!(b.ratings.df, None);
    }

    /// The raked weights give each system the run's share: a run where system 2 is in half the
    /// comparisons, labels where it is in a tenth; the weighted labels hold it in half. Where
    /// the shares already agree, every weight is 1.
    #[test]
    fn raked_labels_stand_for_the_runs_mix_of_systems() {
        let run: Vec<Predicted> = (0..1_000)
            .map(|i| match i % 4 {
                0 => predicted(0, 2, 0.5),
                1 => predicted(2, 1, 0.5),
                2 => predicted(0, 1, 0.5),
                _ => predicted(1, 0, 0.5),
            })
            .collect();
        let observed = |a, b| Observed {
            comparison: predicted(a, b, 0.5),
            preference: 1.0,
            rater: None,
        };
        let labelled: Vec<Observed> = (0..100)
            .map(|i| match i % 20 {
                0 => observed(0, 2),
                1 => observed(1, 2),
                _ => observed(0, 1),
            })
            .collect();
        let w = mix_weights(3, &run, &labelled);
        let share = |s: usize, rows: &mut dyn Iterator<Item = (usize, usize, f64)>| {
            let (mut with, mut all) = (0.0, 0.0);
            for (a, b, w) in rows {
                with += w * f64::from(u8::from(a == s || b == s));
                all += 2.0 * w;
            }
            with / all
        };
        for s in 0..3 {
            let target = share(s, &mut run.iter().map(|c| (c.a, c.b, 1.0)));
            let got = share(
                s,
                &mut labelled
                    .iter()
                    .zip(&w)
                    .map(|(o, &w)| (o.comparison.a, o.comparison.b, w)),
            );
            assert!(
                (got - target).abs() < 1e-6,
                "system {s}: {got} against {target}"
            );
        }
        let even = mix_weights(
            3,
            &run,
            &run.iter().map(|c| observed(c.a, c.b)).collect::<Vec<_>>(),
        );
        assert!(even.iter().all(|w| (w - 1.0).abs() < 1e-9), "{even:?}");
    }
}
