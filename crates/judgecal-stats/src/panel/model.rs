//! A panel's stacking model: the reference on every member's score, rubrics pooled, written on
//! per-rubric sufficient statistics so that one evaluation costs O(rubrics·P³), not O(anchors).
//!
//! For rubrics r = 1..R and the design x = [1, j_1, …, j_M] (P = M + 1 coefficients):
//!
//! ```text
//! y ~ Normal(xᵀθ_r, σ_r)     θ_r ~ Normal(μ, D), D = diag(τ_0², …, τ_M²)
//! μ_i ~ Normal(m_i, s_i²)    σ_r ~ HalfNormal(s_σ)    τ_i ~ HalfNormal(s_τ)
//! ```
//!
//! It is the linear corrector's pooled model (`bayes::model`) with P coefficients
//! instead of two, collapsed the same way: given the scales τ and σ the model is
//! linear-Gaussian in θ_r and μ, so both are integrated out exactly and NUTS moves in the
//! P + R dimensions of (τ, log σ_r). Each draw carries the exact normal conditional of every
//! θ_r. With P = 2 its density is the linear corrector's, term for term (a test holds it to
//! that); one rubric is allowed too (τ is then the prior's).

use nalgebra::{DMatrix, DVector};

use crate::bayes::Target;
use crate::bayes::model::{half_normal_log, ln_softplus, sigmoid};

/// One rubric's anchors as n, XᵀX, Xᵀy and yᵀy for the design X = [1, j_1, …, j_M].
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    pub n: f64,
    pub gram: DMatrix<f64>,
    pub xty: DVector<f64>,
    pub yty: f64,
}

impl Stats {
    /// The statistics of `rows`: each the members' scores and the reference.
    pub fn of<'a>(members: usize, rows: impl IntoIterator<Item = (&'a [f64], f64)>) -> Self {
        let p = members + 1;
        let mut s = Self {
            n: 0.0,
            gram: DMatrix::zeros(p, p),
            xty: DVector::zeros(p),
            yty: 0.0,
        };
        let mut x = DVector::zeros(p);
        for (js, y) in rows {
            x[0] = 1.0;
            for (i, &j) in js.iter().take(members).enumerate() {
                x[i + 1] = j;
            }
            s.n += 1.0;
            s.gram.ger(1.0, &x, &x, 1.0);
            s.xty.axpy(y, &x, 1.0);
            s.yty += y * y;
        }
        s
    }

    /// The statistics of the sub-panel of `members` (indices into this panel's, in order):
    /// the rows and columns of the intercept and those members.
    pub fn select(&self, members: &[usize]) -> Self {
        let keep: Vec<usize> = std::iter::once(0)
            .chain(members.iter().map(|m| m + 1))
            .collect();
        let k = keep.len();
        Self {
            n: self.n,
            gram: DMatrix::from_fn(k, k, |i, j| self.gram[(keep[i], keep[j])]),
            xty: DVector::from_fn(k, |i, _| self.xty[keep[i]]),
            yty: self.yty,
        }
    }

    /// The closed-form posterior of this rubric's coefficients alone (no pooling across
    /// rubrics): θ ~ Normal(`prior_mean`, diag(`prior_sd`²)) a priori and, given σ², the
    /// conjugate normal posterior; σ² at its fixed point (‖y − Xθ̂‖² + 1) / (n − h + 1), h the
    /// coefficients' effective number (the trace of the hat matrix, below P where the prior
    /// binds) and the 1s one pseudo-observation of unit variance (the stacking's σ ~
    /// HalfNormal(1) has mean square 1), so that a few anchors give a finite σ². Returns the
    /// posterior mean and covariance and σ²; `None` where the posterior precision is singular.
    pub fn conjugate(
        &self,
        prior_mean: &[f64],
        prior_sd: &[f64],
    ) -> Option<(DVector<f64>, DMatrix<f64>, f64)> {
        let p = self.xty.len();
        if prior_mean.len() != p
            || prior_sd.len() != p
            || prior_sd.iter().any(|s| s.is_nan() || *s <= 0.0)
        {
            return None;
        }
        let m = DVector::from_column_slice(prior_mean);
        let precision = DVector::from_iterator(p, prior_sd.iter().map(|s| 1.0 / (s * s)));
        let n = self.n.max(0.0);
        let spread = if n >= 2.0 {
            self.yty / n - (self.xty[0] / n).powi(2)
        } else {
            1.0
        };
        let posterior = |s2: f64| {
            let a = &self.gram / s2 + DMatrix::from_diagonal(&precision);
            let cov = a.cholesky()?.inverse();
            let mean = &cov * (&self.xty / s2 + precision.component_mul(&m));
            Some((mean, cov))
        };
        let mut s2 = spread.max(1e-6);
        for _ in 0..100 {
            let (mean, cov) = posterior(s2)?;
            let hat = (&self.gram * &cov).trace() / s2;
            let next = ((self.sse(&mean) + 1.0) / ((n - hat).max(0.0) + 1.0)).max(1e-12);
            let done = (next - s2).abs() <= 1e-10 * s2;
            s2 = next;
            if done {
                break;
            }
        }
        let (mean, cov) = posterior(s2)?;
        Some((mean, cov, s2))
    }

    /// ‖y − Xθ‖².
    fn sse(&self, theta: &DVector<f64>) -> f64 {
        (self.yty - 2.0 * theta.dot(&self.xty) + theta.dot(&(&self.gram * theta))).max(0.0)
    }
}

/// The priors: intercept ~ N(m_0, s_0²), each member's weight ~ N(m_i, s_i²), σ_r ~
/// HalfNormal(s_σ), each τ_i ~ HalfNormal(s_τ).
#[derive(Debug, Clone, PartialEq)]
pub struct StackPriors {
    pub mean: Vec<f64>,
    pub sd: Vec<f64>,
    pub sigma_scale: f64,
    pub tau_scale: f64,
}

impl StackPriors {
    /// The default for `members` members: the intercept N(0, 2²) and every weight N(1/M, 2²),
    /// the panel's plain average at the centre, as the linear corrector's β ~ N(1, 2²) centres
    /// on the judge's own score; σ ~ HalfNormal(1), τ ~ HalfNormal(1).
    pub fn average(members: usize) -> Self {
        let m = members.max(1) as f64;
        let mut mean = vec![1.0 / m; members + 1];
        mean[0] = 0.0;
        Self {
            mean,
            sd: vec![2.0; members + 1],
            sigma_scale: 1.0,
            tau_scale: 1.0,
        }
    }
}

/// One rubric's coefficients at one posterior draw: the exact normal conditional of θ_r given
/// the draw's scales, and its σ.
#[derive(Debug, Clone, PartialEq)]
pub struct StackDraw {
    pub mean: DVector<f64>,
    pub cov: DMatrix<f64>,
    pub sigma: f64,
}

fn inverse(m: &DMatrix<f64>) -> DMatrix<f64> {
    m.clone()
        .try_inverse()
        .unwrap_or_else(|| DMatrix::from_element(m.nrows(), m.ncols(), f64::NAN))
}

/// One rubric's likelihood with θ integrated out against N(μ, D), at one μ (see
/// `bayes::model` for the derivation; every 2×2 there is P×P here).
struct Marginal {
    lp: f64,
    /// Gradient in μ (P), then in log τ (P), then in log σ.
    d_mu: DVector<f64>,
    d_tau: DVector<f64>,
    d_sigma: f64,
    mean: DVector<f64>,
    cov: DMatrix<f64>,
    q: DMatrix<f64>,
    b_inv: DMatrix<f64>,
    c_inv: DMatrix<f64>,
    d: DVector<f64>,
}

impl Stats {
    fn marginal(&self, mu: &DVector<f64>, log_tau: &[f64], log_sigma: f64) -> Marginal {
        let p = self.xty.len();
        let d = DVector::from_iterator(p, log_tau.iter().map(|t| (2.0 * t).exp()));
        let inv_s2 = (-2.0 * log_sigma).exp();
        let q = &self.gram * inv_s2;
        let id = DMatrix::<f64>::identity(p, p);
        let dq = DMatrix::from_fn(p, p, |i, j| d[i] * q[(i, j)]);
        let qd = DMatrix::from_fn(p, p, |i, j| q[(i, j)] * d[j]);
        let b = &id + &dq;
        let b_inv = inverse(&b);
        let c_inv = inverse(&(&id + &qd));
        let a_inv = DMatrix::from_fn(p, p, |i, j| b_inv[(i, j)] * d[j]);
        let sse = self.sse(mu);
        let v = (&self.xty - &self.gram * mu) * inv_s2;
        let w = &a_inv * &v;
        let ew = &c_inv * &v;
        let vw = v.dot(&w);
        let lp = -self.n * log_sigma - 0.5 * b.determinant().ln() - 0.5 * sse * inv_s2 + 0.5 * vw;
        let d_tau = DVector::from_fn(p, |i, _| b_inv[(i, i)] + w[i] * ew[i] - 1.0);
        let tr_aq = p as f64 - b_inv.trace();
        let d_sigma = -self.n + tr_aq + sse * inv_s2 - 2.0 * vw + w.dot(&(&q * &w));
        Marginal {
            lp,
            d_mu: ew,
            d_tau,
            d_sigma,
            mean: mu + &w,
            cov: a_inv,
            q,
            b_inv,
            c_inv,
            d,
        }
    }
}

/// The pooled model at one (τ, σ): μ integrated out too.
struct Collapsed {
    lp: f64,
    /// d lp / d(log τ_0..P, log σ_1..R).
    grad: Vec<f64>,
    theta: Vec<(DVector<f64>, DMatrix<f64>)>,
}

/// The posterior of one panel's rubrics.
#[derive(Debug, Clone)]
pub struct StackModel {
    stats: Vec<Stats>,
    priors: StackPriors,
}

impl StackModel {
    pub fn new(stats: Vec<Stats>, priors: StackPriors) -> Self {
        Self { stats, priors }
    }

    /// Coefficients per rubric: the intercept and one weight per member.
    pub fn coefficients(&self) -> usize {
        self.priors.mean.len()
    }

    pub fn rubrics(&self) -> usize {
        self.stats.len()
    }

    /// The sampler's coordinates mapped to natural ones: `[log τ(P), log σ(R)]`, each τ moved
    /// as `τ = s_τ·softplus(x)` (see `bayes::Model::natural` for why).
    fn natural(&self, x: &[f64]) -> Vec<f64> {
        let p = self.coefficients();
        let mut t = x.to_vec();
        for v in t.iter_mut().take(p) {
            *v = self.priors.tau_scale.ln() + ln_softplus(*v);
        }
        t
    }

    fn sampler_coordinates(&self, t: &[f64]) -> Vec<f64> {
        let p = self.coefficients();
        let mut x = t.to_vec();
        for v in x.iter_mut().take(p) {
            *v = (v.exp() / self.priors.tau_scale).exp_m1().ln();
        }
        x
    }

    /// The population scales τ at the sampler's coordinates.
    pub fn hyperparameters(&self, x: &[f64]) -> Vec<f64> {
        self.natural(x)[..self.coefficients()]
            .iter()
            .map(|t| t.exp())
            .collect()
    }

    /// The density at natural coordinates with μ and every θ_r integrated out (the formula
    /// and its derivatives are `bayes::Model::collapsed`'s, in P dimensions).
    fn collapsed(&self, x: &[f64]) -> Collapsed {
        let pr = &self.priors;
        let p = self.coefficients();
        let log_tau = &x[..p];
        let s_inv =
            DMatrix::from_diagonal(&DVector::from_iterator(p, pr.sd.iter().map(|s| s.powi(-2))));
        let m = DVector::from_column_slice(&pr.mean);
        let mut h = s_inv.clone();
        let mut g = &s_inv * &m;
        let mut lp = -0.5 * m.dot(&g);
        let zero = DVector::zeros(p);
        let mut parts = Vec::with_capacity(self.rubrics());
        for (k, s) in self.stats.iter().enumerate() {
            let at_zero = s.marginal(&zero, log_tau, x[p + k]);
            lp += at_zero.lp;
            g += &at_zero.d_mu;
            h += &at_zero.c_inv * &at_zero.q;
            parts.push(at_zero);
        }
        let h_inv = inverse(&h);
        let mu = &h_inv * &g;
        lp += 0.5 * g.dot(&mu) - 0.5 * h.determinant().ln();

        let mut grad = vec![0.0; p + self.rubrics()];
        let mut theta = Vec::with_capacity(self.rubrics());
        for (k, (s, part)) in self.stats.iter().zip(&parts).enumerate() {
            let at_mu = s.marginal(&mu, log_tau, x[p + k]);
            let dq = DMatrix::from_fn(p, p, |i, j| part.d[i] * part.q[(i, j)]);
            let m_r = &part.b_inv * dq;
            let spread = &m_r * &h_inv * m_r.transpose();
            for i in 0..p {
                grad[i] += at_mu.d_tau[i] + spread[(i, i)] / part.d[i];
            }
            let nqn = &part.c_inv * &part.q * part.c_inv.transpose();
            let tr = (&h_inv * nqn).trace();
            let (ps, gs) = half_normal_log(x[p + k], pr.sigma_scale);
            lp += ps;
            grad[p + k] = at_mu.d_sigma + tr + gs;
            let cov = &part.cov + &part.b_inv * &h_inv * part.b_inv.transpose();
            theta.push((at_mu.mean, cov));
        }
        for (i, v) in grad.iter_mut().enumerate().take(p) {
            let (pt, gt) = half_normal_log(x[i], pr.tau_scale);
            lp += pt;
            *v += gt;
        }
        Collapsed { lp, grad, theta }
    }

    /// Per-rubric coefficients at the sampler's coordinates `x`.
    pub fn params(&self, x: &[f64]) -> Vec<StackDraw> {
        let p = self.coefficients();
        self.collapsed(&self.natural(x))
            .theta
            .into_iter()
            .enumerate()
            .map(|(k, (mean, cov))| StackDraw {
                mean,
                cov,
                sigma: x[p + k].exp(),
            })
            .collect()
    }

    /// Least squares of one rubric (ridge-stabilised), or the prior's centre where it has too
    /// few anchors; its residual sd.
    fn least_squares(&self, s: &Stats) -> (DVector<f64>, f64) {
        let p = self.coefficients();
        let centre = DVector::from_column_slice(&self.priors.mean);
        if s.n < (p + 2) as f64 {
            return (centre, 0.8 * self.priors.sigma_scale);
        }
        let ridge = &s.gram + DMatrix::identity(p, p) * (1e-6 * s.n);
        match ridge.cholesky() {
            Some(c) => {
                let theta = c.solve(&s.xty);
                let sd = (s.sse(&theta) / s.n).sqrt();
                (theta, sd)
            }
            None => (centre, 0.8 * self.priors.sigma_scale),
        }
    }
}

impl Target for StackModel {
    fn dim(&self) -> usize {
        self.coefficients() + self.rubrics()
    }

    fn logp(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let p = self.coefficients();
        let t = self.natural(x);
        let c = self.collapsed(&t);
        grad.copy_from_slice(&c.grad);
        let mut lp = c.lp;
        for i in 0..p {
            let sig = sigmoid(x[i]);
            let ratio = (sig.ln() - ln_softplus(x[i])).exp();
            lp += sig.ln() - ln_softplus(x[i]);
            grad[i] = grad[i] * ratio + (1.0 - sig) - ratio;
        }
        lp
    }

    /// Per-rubric least squares; τ from their spread (at least a tenth of the prior's scale),
    /// σ from their residuals.
    fn start(&self) -> Vec<f64> {
        let p = self.coefficients();
        let fits: Vec<(DVector<f64>, f64)> =
            self.stats.iter().map(|s| self.least_squares(s)).collect();
        let r = fits.len() as f64;
        let mut t = Vec::with_capacity(p + fits.len());
        for i in 0..p {
            let mean = fits.iter().map(|f| f.0[i]).sum::<f64>() / r;
            let var = fits.iter().map(|f| (f.0[i] - mean).powi(2)).sum::<f64>() / r.max(2.0);
            t.push(var.sqrt().max(0.1 * self.priors.tau_scale).ln());
        }
        t.extend(fits.iter().map(|f| f.1.clamp(0.05, 10.0).ln()));
        self.sampler_coordinates(&t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bayes::{Model, Priors, SufficientStats};
    use crate::rng::{Rng, RngExt, SeedableRng};
    use crate::stats::standard_normal;

    fn rows(rng: &mut Rng, n: usize, weights: &[f64], noise: f64) -> Vec<(Vec<f64>, f64)> {
        (0..n)
            .map(|_| {
                let truth: f64 = rng.random_range(1.0..5.0);
                let js: Vec<f64> = weights
                    .iter()
                    .map(|_| truth + 0.7 * standard_normal(rng))
                    .collect();
                let y = 0.3
                    + js.iter().zip(weights).map(|(j, w)| j * w).sum::<f64>()
                    + noise * standard_normal(rng);
                (js, y)
            })
            .collect()
    }

    fn stats_of(members: usize, rows: &[(Vec<f64>, f64)]) -> Stats {
        Stats::of(members, rows.iter().map(|(js, y)| (js.as_slice(), *y)))
    }

    #[test]
    fn its_conjugate_posterior_is_least_squares_under_a_flat_prior_and_shrinks_with_few_anchors() {
        let mut rng = Rng::seed_from_u64(8);
        let weights = [0.5, 0.3, -0.2];
        let data = rows(&mut rng, 400, &weights, 0.4);
        let s = stats_of(3, &data);
        let (mean, cov, s2) = s.conjugate(&[0.0; 4], &[1e6; 4]).unwrap();
        // Least squares from the rows themselves (SVD of the design, not the Gram).
        let x = DMatrix::from_fn(
            data.len(),
            4,
            |i, k| if k == 0 { 1.0 } else { data[i].0[k - 1] },
        );
        let y = DVector::from_iterator(data.len(), data.iter().map(|(_, y)| *y));
        let ols = x.clone().svd(true, true).solve(&y, 1e-12).unwrap();
        assert!((&mean - &ols).amax() < 1e-6, "{mean} vs {ols}");
        // σ² is the residual variance on n − P + 1 degrees of freedom plus the pseudo-row, and
        // the covariance σ²(XᵀX)⁻¹.
        let sse = (&y - &x * &ols).norm_squared();
        let expected = (sse + 1.0) / (400.0 - 4.0 + 1.0);
        assert!(
            (s2 - expected).abs() < 1e-9 * expected,
            "{s2} vs {expected}"
        );
        let ols_cov = (x.transpose() * &x).try_inverse().unwrap() * s2;
        assert!((&cov - &ols_cov).amax() < 1e-9, "{cov} vs {ols_cov}");
        assert!((s2.sqrt() - 0.4).abs() < 0.05, "σ {}", s2.sqrt());
        // Three anchors and thirteen coefficients: the prior holds the weights near its mean,
        // σ² stays finite, and the posterior sd of a weight is below the prior's.
        let few = rows(&mut rng, 3, &[0.1; 12], 0.4);
        let s = stats_of(12, &few);
        let prior = StackPriors::average(12);
        let (mean, cov, s2) = s.conjugate(&prior.mean, &prior.sd).unwrap();
        assert!(s2.is_finite() && s2 > 0.0, "{s2}");
        for i in 1..13 {
            assert!((mean[i] - prior.mean[i]).abs() < 1.0, "{mean}");
            assert!(cov[(i, i)].sqrt() < prior.sd[i], "{cov}");
        }
        assert!(s.conjugate(&prior.mean[..3], &prior.sd[..3]).is_none());
    }

    #[test]
    fn with_one_member_it_is_the_linear_correctors_pooled_model() {
        let mut rng = Rng::seed_from_u64(3);
        let priors = Priors {
            alpha_mean: 0.2,
            alpha_sd: 1.5,
            beta_mean: 0.9,
            beta_sd: 2.5,
            sigma_scale: 0.8,
            tau_scale: 1.2,
        };
        let data: Vec<Vec<(Vec<f64>, f64)>> = (0..3)
            .map(|r| rows(&mut rng, 40 + 30 * r, &[0.6 + 0.1 * r as f64], 0.5))
            .collect();
        let linear = Model::new(
            data.iter()
                .map(|d| SufficientStats::from_pairs(d.iter().map(|(js, y)| (js[0], *y))))
                .collect(),
            priors,
        );
        let stacked = StackModel::new(
            data.iter().map(|d| stats_of(1, d)).collect(),
            StackPriors {
                mean: vec![priors.alpha_mean, priors.beta_mean],
                sd: vec![priors.alpha_sd, priors.beta_sd],
                sigma_scale: priors.sigma_scale,
                tau_scale: priors.tau_scale,
            },
        );
        for _ in 0..20 {
            let x: Vec<f64> = (0..5).map(|_| rng.random_range(-2.0..1.0)).collect();
            let (mut g1, mut g2) = (vec![0.0; 5], vec![0.0; 5]);
            let l1 = linear.logp(&x, &mut g1);
            let l2 = Target::logp(&stacked, &x, &mut g2);
            assert!((l1 - l2).abs() < 1e-8 * l1.abs().max(1.0), "{l1} vs {l2}");
            for (a, b) in g1.iter().zip(&g2) {
                assert!((a - b).abs() < 1e-7 * a.abs().max(1.0), "{g1:?} vs {g2:?}");
            }
            let (p1, p2) = (linear.params(&x), stacked.params(&x));
            for (a, b) in p1.iter().zip(&p2) {
                assert!((a.alpha - b.mean[0]).abs() < 1e-8 && (a.beta - b.mean[1]).abs() < 1e-8);
                assert!((a.var_beta - b.cov[(1, 1)]).abs() < 1e-10);
                assert!((a.cov - b.cov[(0, 1)]).abs() < 1e-10);
            }
        }
    }

    #[test]
    fn its_gradient_is_the_densitys_with_three_members() {
        let mut rng = Rng::seed_from_u64(5);
        let model = StackModel::new(
            (0..4)
                .map(|r| stats_of(3, &rows(&mut rng, 30 + 20 * r, &[0.5, 0.3, 0.0], 0.4)))
                .collect(),
            StackPriors::average(3),
        );
        let dim = model.dim();
        for _ in 0..10 {
            let x: Vec<f64> = (0..dim).map(|_| rng.random_range(-2.0..1.0)).collect();
            let mut g = vec![0.0; dim];
            Target::logp(&model, &x, &mut g);
            let mut scratch = vec![0.0; dim];
            let mut at = |i: usize, h: f64| {
                let mut y = x.clone();
                y[i] += h;
                Target::logp(&model, &y, &mut scratch)
            };
            for (i, &analytic) in g.iter().enumerate() {
                // Five-point central difference: truncation O(h⁴); a smaller h meets the
                // density's rounding (about 1e-9 through the determinants).
                let h = 1e-2;
                let numeric = (at(i, -2.0 * h) - 8.0 * at(i, -h) + 8.0 * at(i, h) - at(i, 2.0 * h))
                    / (12.0 * h);
                assert!(
                    (numeric - analytic).abs() < 1e-5 * numeric.abs().max(1.0),
                    "coordinate {i}: numeric {numeric}, analytic {analytic}"
                );
            }
        }
    }
}
