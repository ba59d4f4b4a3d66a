//! The multi-input linear model, the one every linear fit here is a case of: the reference on P
//! named inputs, rubrics pooled. The linear corrector (`bayes`) is its one-input case (P = 2:
//! intercept and judge score), a panel's stacking its case with one input per member, the
//! covariate layer its case with the judge score and the covariates. Written on per-rubric
//! sufficient statistics, so that one evaluation costs O(rubrics·P³), not O(anchors); generic in
//! P's type, so that the line's 2×2 algebra is unrolled at compile time (`U2`) and a panel's
//! is sized at run time (`Dyn`).
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-stats/src/linear.rs".

use nalgebra::allocator::Allocator;
use nalgebra::{DMatrix, DVector, DefaultAllocator, Dim, DimMin, Dyn, OMatrix, OVector, U1};

/// The number of coefficients P, as a type: `U2` for a line, `Dyn` for a panel or a layer.
pub trait Width: Dim + DimMin<Self, Output = Self> {}

impl<D: Dim + DimMin<D, Output = D>> Width for D {}

/// A log density NUTS can sample (`bayes::sample`): this model, the line's, a panel's or a
/// covariate layer's.
pub trait Target: Sync {
    /// Unconstrained dimension.
    fn dim(&self) -> usize;
    /// Log density at the sampler's coordinates `x`, with its gradient there.
    fn logp(&self, x: &[f64], grad: &mut [f64]) -> f64;
    /// Where chains start.
    fn start(&self) -> Vec<f64>;
}

/// One rubric's anchors as n, XᵀX, Xᵀy and yᵀy for the design X = [1, x_1, …, x_M].
#[derive(Debug, Clone, PartialEq)]
pub struct Stats<D: Width = Dyn>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    pub n: f64,
    pub gram: OMatrix<f64, D, D>,
    pub xty: OVector<f64, D>,
    pub yty: f64,
}

impl Stats<Dyn> {
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
            let cov = crate::stats::cholesky(a)?.inverse();
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
}

/// The priors: intercept ~ N(m_0, s_0²), each input's coefficient ~ N(m_i, s_i²), σ_r ~
/// HalfNormal(s_σ), each τ_i ~ HalfNormal(s_τ) (unused with one rubric).
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
pub struct StackDraw<D: Width = Dyn>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    pub mean: OVector<f64, D>,
    pub cov: OMatrix<f64, D, D>,
    pub sigma: f64,
}

/// One rubric's likelihood with θ integrated out against N(μ, D), at one μ.
pub(crate) struct Marginal<D: Width>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    /// log p(anchors | μ, τ, σ) without the 2π constant.
    pub(crate) lp: f64,
    /// Its gradient in μ (P), then in log τ (P), then in log σ.
    d_mu: OVector<f64, D>,
    d_tau: OVector<f64, D>,
    d_sigma: f64,
    /// The conditional posterior of θ given μ: mean and covariance A⁻¹.
    mean: OVector<f64, D>,
    cov: OMatrix<f64, D, D>,
    /// Q = XᵀX/σ², (I + DQ)⁻¹ and (I + QD)⁻¹: the pieces the pooled model needs, in forms that
    /// stay accurate when τ is tiny (D → 0) or huge.
    q: OMatrix<f64, D, D>,
    b_inv: OMatrix<f64, D, D>,
    c_inv: OMatrix<f64, D, D>,
    d: OVector<f64, D>,
}

fn inverse<D: Width>(m: &OMatrix<f64, D, D>) -> OMatrix<f64, D, D>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    m.clone().try_inverse().unwrap_or_else(|| {
        let (r, c) = m.shape_generic();
        OMatrix::from_element_generic(r, c, f64::NAN)
    })
}

/// log HalfNormal(e^u | scale) + u (the log-Jacobian), and its derivative in u.
pub(crate) fn half_normal_log(u: f64, scale: f64) -> (f64, f64) {
    let x = u.exp();
    let z = x / scale;
    (-0.5 * z * z + u, -z * z + 1.0)
}

/// How far down σ's prior reaches before it turns away from 0: its floor, as a share of the
/// prior's scale (10⁻³ of 1 on a 1–5 rubric).
pub const SIGMA_FLOOR: f64 = 1e-3;

/// σ's log prior in u = log σ, with the log-Jacobian, and its derivative in u: HalfNormal(scale)
/// times exp(−ε²/(2σ²)), ε = [`SIGMA_FLOOR`]·scale. The factor is 1 to within 0.5% wherever σ is
/// above a hundredth of the scale, so it changes no fit of references with any noise; where the
/// references lie exactly on a line of the inputs (no residual at all) the likelihood grows
/// without bound as σ → 0 (σ^−n), the posterior is improper, and NUTS followed σ toward 0 for
/// about 40 s per cell at its longest trees. With the factor the posterior is proper, its mode
/// at σ ≈ ε/√n, and the fit converges in milliseconds.
pub(crate) fn sigma_prior_log(u: f64, scale: f64) -> (f64, f64) {
    let (lp, grad) = half_normal_log(u, scale);
    let floor = SIGMA_FLOOR * scale;
    let wall = 0.5 * floor * floor * (-2.0 * u).exp();
    (lp - wall, grad + 2.0 * wall)
}

/// log(1 + e^x), accurate for any x.
pub(crate) fn ln_softplus(x: f64) -> f64 {
    if x > 35.0 {
        x.ln()
    } else if x < -35.0 {
        x
    } else {
        x.exp().ln_1p().ln()
    }
}

pub(crate) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

impl<D: Width> Stats<D>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    fn width(&self) -> D {
        self.xty.shape_generic().0
    }

    /// ‖y − Xθ‖².
    pub(crate) fn sse(&self, theta: &OVector<f64, D>) -> f64 {
        (self.yty - 2.0 * theta.dot(&self.xty) + theta.dot(&(&self.gram * theta))).max(0.0)
    }

    /// With E = D⁻¹, Q = XᵀX/σ², A = E + Q (the conditional precision of θ), v = Xᵀ(y − Xμ)/σ²
    /// and w = A⁻¹v (the conditional mean of θ − μ), Woodbury gives
    /// `log p = −n·log σ − ½(log|A| + log|D|) − ½·q/σ² + ½·vᵀw`, q = ‖y − Xμ‖².
    /// Everything is computed through B = I + DQ (A = E·B, so A⁻¹ = B⁻¹D, |A|·|D| = |B|, and
    /// E·A⁻¹ = (I + QD)⁻¹), never as a difference of large terms.
    pub(crate) fn marginal(
        &self,
        mu: &OVector<f64, D>,
        log_tau: &[f64],
        log_sigma: f64,
    ) -> Marginal<D> {
        let p = self.width();
        let d = OVector::<f64, D>::from_iterator_generic(
            p,
            U1,
            log_tau.iter().map(|t| (2.0 * t).exp()),
        );
        let inv_s2 = (-2.0 * log_sigma).exp();
        let q = &self.gram * inv_s2;
        let id = OMatrix::<f64, D, D>::identity_generic(p, p);
        let dq = OMatrix::<f64, D, D>::from_fn_generic(p, p, |i, j| d[i] * q[(i, j)]);
        let qd = OMatrix::<f64, D, D>::from_fn_generic(p, p, |i, j| q[(i, j)] * d[j]);
        let b = &id + &dq;
        let b_inv = inverse(&b);
        let c_inv = inverse(&(&id + &qd));
        let a_inv = OMatrix::<f64, D, D>::from_fn_generic(p, p, |i, j| b_inv[(i, j)] * d[j]);
        let sse = self.sse(mu);
        let v = (&self.xty - &self.gram * mu) * inv_s2;
        let w = &a_inv * &v;
        // E·w, the gradient in μ.
        let ew = &c_inv * &v;
        let vw = v.dot(&w);
        let lp = -self.n * log_sigma - 0.5 * b.determinant().ln() - 0.5 * sse * inv_s2 + 0.5 * vw;
        let d_tau =
            OVector::<f64, D>::from_fn_generic(p, U1, |i, _| b_inv[(i, i)] + w[i] * ew[i] - 1.0);
        // tr(A⁻¹Q) = tr(B⁻¹·DQ) = P − tr(B⁻¹).
        let tr_aq = p.value() as f64 - b_inv.trace();
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

/// The model at one (τ, σ): μ and every θ_r integrated out.
struct Collapsed<D: Width>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    lp: f64,
    /// d lp / d(log τ_0..P, log σ_1..R) (pooled), d lp / d log σ (one rubric).
    grad: Vec<f64>,
    /// Per rubric: the posterior mean and covariance of θ_r given (τ, σ).
    theta: Vec<Conditional<D>>,
}

/// A normal's mean and covariance: one rubric's coefficients given the scales.
type Conditional<D> = (OVector<f64, D>, OMatrix<f64, D, D>);

/// The posterior of one judge's (or panel's) rubrics.
#[derive(Debug, Clone)]
pub struct StackModel<D: Width = Dyn>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    stats: Vec<Stats<D>>,
    priors: StackPriors,
    /// The first rubric's mean of each input (the intercept's 0): where one rubric's intercept
    /// is taken.
    centre: Vec<f64>,
}

impl<D: Width> StackModel<D>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    pub fn new(stats: Vec<Stats<D>>, priors: StackPriors) -> Self {
        let centre = (0..priors.mean.len())
            .map(|i| match stats.first() {
                Some(s) if i > 0 && s.n > 0.0 => s.gram[(0, i)] / s.n,
                _ => 0.0,
            })
            .collect();
        Self {
            stats,
            priors,
            centre,
        }
    }

    pub fn stats(&self) -> &[Stats<D>] {
        &self.stats
    }

    /// Coefficients per rubric: the intercept and one per input.
    pub fn coefficients(&self) -> usize {
        self.priors.mean.len()
    }

    pub fn rubrics(&self) -> usize {
        self.stats.len()
    }

    /// Whether the rubrics are pooled (two or more), so that τ is sampled.
    pub fn pooled(&self) -> bool {
        self.rubrics() > 1
    }

    /// The number of sampled τs: P when pooled, none for one rubric.
    fn scales(&self) -> usize {
        if self.pooled() {
            self.coefficients()
        } else {
            0
        }
    }

    fn width(&self) -> D {
        self.stats[0].width()
    }

    fn vector(&self, values: &[f64]) -> OVector<f64, D> {
        OVector::from_iterator_generic(self.width(), U1, values.iter().copied())
    }

    /// The sampler's coordinates mapped to natural ones. Pooled: `[log τ(P), log σ(R)]`, each τ
    /// moved as `τ = s_τ·softplus(x)`. That is log-like for small τ, where a judge whose rubrics
    /// agree puts a sharp peak with a long tail toward 0, and linear for large τ, where on the
    /// log scale the HalfNormal prior is a wall (curvature e^{2·log τ}) that makes NUTS
    /// diverge. One rubric: `[θ(P), log σ]`, sampled with the intercept at the anchors' mean
    /// inputs c, `x_0 = θ_0 + Σ c_i·θ_i`.
    pub fn natural(&self, x: &[f64]) -> Vec<f64> {
        let mut t = x.to_vec();
        if self.pooled() {
            for v in t.iter_mut().take(self.scales()) {
                *v = self.priors.tau_scale.ln() + ln_softplus(*v);
            }
        } else {
            let c = &self.centre;
            t[0] = x[0] - (1..c.len()).map(|i| c[i] * x[i]).sum::<f64>();
        }
        t
    }

    /// The inverse of [`StackModel::natural`].
    pub fn sampler_coordinates(&self, t: &[f64]) -> Vec<f64> {
        let mut x = t.to_vec();
        if self.pooled() {
            for v in x.iter_mut().take(self.scales()) {
                *v = (v.exp() / self.priors.tau_scale).exp_m1().ln();
            }
        } else {
            let c = &self.centre;
            x[0] = t[0] + (1..c.len()).map(|i| c[i] * t[i]).sum::<f64>();
        }
        x
    }

    /// The population scales τ at the sampler's coordinates; empty for one rubric.
    pub fn hyperparameters(&self, x: &[f64]) -> Vec<f64> {
        self.natural(x)[..self.scales()]
            .iter()
            .map(|t| t.exp())
            .collect()
    }

    /// One rubric's density at natural x = [θ(P), log σ]: its likelihood, θ's fixed normal
    /// priors and σ's HalfNormal (with the log-Jacobian), and its gradient there (written to
    /// `grad`, allocating nothing: it is the sampler's inner loop).
    fn single_density(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let pr = &self.priors;
        let p = self.coefficients();
        let s = &self.stats[0];
        let theta = self.vector(&x[..p]);
        let inv_s2 = (-2.0 * x[p]).exp();
        let sse = s.sse(&theta);
        let d_theta = (&s.xty - &s.gram * &theta) * inv_s2;
        let (ps, gs) = sigma_prior_log(x[p], pr.sigma_scale);
        let mut lp = -s.n * x[p] - 0.5 * sse * inv_s2 + ps;
        for i in 0..p {
            let z = (x[i] - pr.mean[i]) / pr.sd[i];
            lp -= 0.5 * z * z;
            grad[i] = d_theta[i] - z / pr.sd[i];
        }
        grad[p] = -s.n + sse * inv_s2 + gs;
        lp
    }

    /// One rubric at natural x: the draw is θ itself.
    fn single(&self, x: &[f64]) -> Collapsed<D> {
        let mut grad = vec![0.0; x.len()];
        let lp = self.single_density(x, &mut grad);
        let width = self.width();
        Collapsed {
            lp,
            grad,
            theta: vec![(
                self.vector(&x[..self.coefficients()]),
                OMatrix::zeros_generic(width, width),
            )],
        }
    }

    /// The pooled density at natural x = [log τ(P), log σ(R)] (HalfNormal priors with their
    /// log-Jacobians), μ and θ integrated out.
    ///
    /// Each rubric's integrated likelihood is quadratic in μ:
    /// `L_r(μ) = L_r(0) + g_rᵀμ − ½μᵀH_rμ` with g_r = E·w_r(0) and H_r = E − E·A_r⁻¹·E.
    /// With the prior N(m, S), H = S⁻¹ + ΣH_r and G = S⁻¹m + Σg_r, integrating μ gives
    /// `ΣL_r(0) − ½mᵀS⁻¹m + ½GᵀH⁻¹G − ½log|H|`. Its derivative in a scale is the sum of the
    /// L_r's partial derivatives at μ* = H⁻¹G (μ held fixed) minus ½tr(H⁻¹ ∂H), with
    /// ∂H_r/∂log σ_r = −2N_rQ_rN_rᵀ (N_r = E·A_r⁻¹) and ∂H_r/∂log τ_i = M_rᵀ·(∂E/∂log τ_i)·M_r
    /// (M_r = I − A_r⁻¹·E).
    fn collapsed(&self, x: &[f64]) -> Collapsed<D> {
        if !self.pooled() {
            return self.single(x);
        }
        let pr = &self.priors;
        let p = self.coefficients();
        let width = self.width();
        let log_tau = &x[..p];
        let s_inv = OMatrix::<f64, D, D>::from_diagonal(&OVector::from_iterator_generic(
            width,
            U1,
            pr.sd.iter().map(|s| s.powi(-2)),
        ));
        let m = self.vector(&pr.mean);
        let mut h = s_inv.clone();
        let mut g = &s_inv * &m;
        let mut lp = -0.5 * m.dot(&g);
        let zero = OVector::<f64, D>::zeros_generic(width, U1);
        let mut parts = Vec::with_capacity(self.rubrics());
        for (k, s) in self.stats.iter().enumerate() {
            let at_zero = s.marginal(&zero, log_tau, x[p + k]);
            lp += at_zero.lp;
            g += &at_zero.d_mu;
            // H_r = E − E·A⁻¹·E = (I + QD)⁻¹·Q.
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
            // −½tr(H⁻¹ ∂H_r) for log τ_i, with ∂E/∂log τ_i = −2·e_i at (i, i) and
            // M_r = I − A⁻¹E = B⁻¹·DQ.
            let dq = OMatrix::<f64, D, D>::from_fn_generic(width, width, |i, j| {
                part.d[i] * part.q[(i, j)]
            });
            let m_r = &part.b_inv * dq;
            let spread = &m_r * &h_inv * m_r.transpose();
            for i in 0..p {
                grad[i] += at_mu.d_tau[i] + spread[(i, i)] / part.d[i];
            }
            // … and for log σ_r: ∂H_r = −2·N·Q·Nᵀ, N = E·A⁻¹ = (I + QD)⁻¹.
            let nqn = &part.c_inv * &part.q * part.c_inv.transpose();
            let tr = (&h_inv * nqn).trace();
            let (ps, gs) = sigma_prior_log(x[p + k], pr.sigma_scale);
            lp += ps;
            grad[p + k] = at_mu.d_sigma + tr + gs;
            // θ_r given (τ, σ): mean μ* + w_r(μ*), covariance A⁻¹ + K·H⁻¹·Kᵀ, K = A⁻¹E = B⁻¹.
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

    /// Per-rubric coefficients at the sampler's coordinates `x` (one rubric's: the draw
    /// itself, its conditional covariance 0).
    pub fn params(&self, x: &[f64]) -> Vec<StackDraw<D>> {
        let first_sigma = self.coefficients();
        self.collapsed(&self.natural(x))
            .theta
            .into_iter()
            .enumerate()
            .map(|(k, (mean, cov))| StackDraw {
                mean,
                cov,
                sigma: x[first_sigma + k].exp(),
            })
            .collect()
    }

    /// Least squares of one rubric (ridge-stabilised), or the prior's centre where it has too
    /// few anchors; its residual sd.
    fn least_squares(&self, s: &Stats<D>) -> (OVector<f64, D>, f64) {
        let p = self.coefficients();
        let centre = self.vector(&self.priors.mean);
        if s.n < (p + 2) as f64 {
            return (centre, 0.8 * self.priors.sigma_scale);
        }
        let width = self.width();
        let ridge = &s.gram + OMatrix::<f64, D, D>::identity_generic(width, width) * (1e-6 * s.n);
        match crate::stats::cholesky(ridge) {
            Some(c) => {
                let theta = c.solve(&s.xty);
                let sd = (s.sse(&theta) / s.n).sqrt();
                (theta, sd)
            }
            None => (centre, 0.8 * self.priors.sigma_scale),
        }
    }
}

impl<D: Width> Target for StackModel<D>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
    Self: Sync,
{
    /// P + R pooled (the τs and the σs), P + 1 for one rubric (θ and σ).
    fn dim(&self) -> usize {
        self.coefficients() + self.rubrics()
    }

    fn logp(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let t = self.natural(x);
        if !self.pooled() {
            let lp = self.single_density(&t, grad);
            // The shear: θ_0 = x_0 − Σ c_i·x_i.
            for (i, c_i) in self.centre.iter().enumerate().skip(1) {
                grad[i] -= c_i * grad[0];
            }
            return lp;
        }
        let c = self.collapsed(&t);
        grad.copy_from_slice(&c.grad);
        let mut lp = c.lp;
        // log τ = log s_τ + log softplus(x): chain rule and the log-Jacobian
        // log(d log τ / dx) = log sigmoid(x) − log softplus(x).
        for i in 0..self.scales() {
            let sig = sigmoid(x[i]);
            let ratio = (sig.ln() - ln_softplus(x[i])).exp();
            lp += sig.ln() - ln_softplus(x[i]);
            grad[i] = grad[i] * ratio + (1.0 - sig) - ratio;
        }
        lp
    }

    /// Per-rubric least squares; pooled, τ from their spread (at least a tenth of the prior's
    /// scale); σ from their residuals. One rubric: its least squares itself.
    fn start(&self) -> Vec<f64> {
        let fits: Vec<(OVector<f64, D>, f64)> =
            self.stats.iter().map(|s| self.least_squares(s)).collect();
        if !self.pooled() {
            let (theta, sd) = &fits[0];
            let mut t: Vec<f64> = theta.iter().copied().collect();
            t.push(sd.clamp(0.05, 10.0).ln());
            return self.sampler_coordinates(&t);
        }
        let r = fits.len() as f64;
        let mut t = Vec::with_capacity(self.dim());
        for i in 0..self.scales() {
            let mean = fits.iter().map(|f| f.0[i]).sum::<f64>() / r;
            let var = fits.iter().map(|f| (f.0[i] - mean).powi(2)).sum::<f64>() / r.max(2.0);
            t.push(var.sqrt().max(0.1 * self.priors.tau_scale).ln());
        }
        t.extend(fits.iter().map(|f| f.1.clamp(0.05, 10.0).ln()));
        self.sampler_coordinates(&t)
    }
}

#[cfg(test)]
#[path = "linear_tests.rs"]
mod tests;
