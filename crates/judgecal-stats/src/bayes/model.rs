//! The hierarchical linear model's log density and gradient, written on per-rubric sufficient
//! statistics so that one evaluation costs O(rubrics), not O(anchors).
//!
//! For rubrics r = 1..R (R >= 2):
//!
//! ```text
//! y ~ Normal(α_r + β_r·j, σ_r)        α_r = μ_α + τ_α·z_α,r     β_r = μ_β + τ_β·z_β,r
//! z ~ Normal(0, 1)   σ_r ~ HalfNormal(s_σ)   μ_α ~ N(m_α, s_α²)   μ_β ~ N(m_β, s_β²)
//! τ_α, τ_β ~ HalfNormal(s_τ)
//! ```
//!
//! The rubric effects are integrated out in closed form (see [`Model`]), so the sampler has
//! no funnel to fall into.
//!
//! With R = 1 there is nothing to pool, and the model is the paper's single-cell one with fixed
//! priors `α ~ N(m_α, s_α²)`, `β ~ N(m_β, s_β²)`, `σ ~ HalfNormal(s_σ)`.
//!
//! Positive parameters are sampled on the log scale; the log-Jacobian is included.

use serde::{Deserialize, Serialize};

/// n, Σj, Σy, Σj², Σjy, Σy² of one rubric's anchors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SufficientStats {
    pub n: f64,
    pub sj: f64,
    pub sy: f64,
    pub sjj: f64,
    pub sjy: f64,
    pub syy: f64,
}

impl SufficientStats {
    pub fn from_pairs(pairs: impl IntoIterator<Item = (f64, f64)>) -> Self {
        let mut s = Self::default();
        for (j, y) in pairs {
            s.n += 1.0;
            s.sj += j;
            s.sy += y;
            s.sjj += j * j;
            s.sjy += j * y;
            s.syy += y * y;
        }
        s
    }

    /// Σ(y − α − βj)² and its partial derivatives in α and β.
    fn sse(&self, a: f64, b: f64) -> (f64, f64, f64) {
        let sse = self.syy - 2.0 * a * self.sy - 2.0 * b * self.sjy
            + self.n * a * a
            + 2.0 * a * b * self.sj
            + b * b * self.sjj;
        let d_a = -2.0 * self.sy + 2.0 * self.n * a + 2.0 * b * self.sj;
        let d_b = -2.0 * self.sjy + 2.0 * a * self.sj + 2.0 * b * self.sjj;
        (sse.max(0.0), d_a, d_b)
    }

    /// Σ log Normal(y | α + βj, e^u) without the constant, and its gradient in (α, β, u).
    fn loglik(&self, a: f64, b: f64, log_sigma: f64) -> (f64, [f64; 3]) {
        let (sse, d_a, d_b) = self.sse(a, b);
        let inv_var = (-2.0 * log_sigma).exp();
        let lp = -self.n * log_sigma - 0.5 * sse * inv_var;
        (
            lp,
            [
                -0.5 * d_a * inv_var,
                -0.5 * d_b * inv_var,
                -self.n + sse * inv_var,
            ],
        )
    }
}

/// The priors; the defaults are the paper's: α ~ N(0, 2²), β ~ N(1, 2²), σ ~ HalfNormal(1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Priors {
    pub alpha_mean: f64,
    #[schema(exclusive_minimum = 0)]
    pub alpha_sd: f64,
    pub beta_mean: f64,
    #[schema(exclusive_minimum = 0)]
    pub beta_sd: f64,
    /// Scale of the HalfNormal prior on each σ_r.
    #[schema(exclusive_minimum = 0)]
    pub sigma_scale: f64,
    /// Scale of the HalfNormal priors on τ_α and τ_β.
    #[schema(exclusive_minimum = 0)]
    pub tau_scale: f64,
}

impl Default for Priors {
    fn default() -> Self {
        Self {
            alpha_mean: 0.0,
            alpha_sd: 2.0,
            beta_mean: 1.0,
            beta_sd: 2.0,
            sigma_scale: 1.0,
            tau_scale: 1.0,
        }
    }
}

impl Priors {
    pub fn check(&self) -> Result<(), String> {
        let finite = [self.alpha_mean, self.beta_mean]
            .iter()
            .all(|x| x.is_finite());
        let positive = [
            self.alpha_sd,
            self.beta_sd,
            self.sigma_scale,
            self.tau_scale,
        ]
        .iter()
        .all(|x| x.is_finite() && *x > 0.0);
        if finite && positive {
            Ok(())
        } else {
            Err("prior means must be finite and prior scales finite and positive".into())
        }
    }
}

fn normal(x: f64, mean: f64, sd: f64) -> (f64, f64) {
    let z = (x - mean) / sd;
    (-0.5 * z * z, -z / sd)
}

/// log HalfNormal(e^u | scale) + u (the log-Jacobian), and its derivative in u.
pub(crate) fn half_normal_log(u: f64, scale: f64) -> (f64, f64) {
    let x = u.exp();
    let z = x / scale;
    (-0.5 * z * z + u, -z * z + 1.0)
}

/// One rubric's parameters at one posterior draw. For a single rubric, α and β are the draw
/// itself (variances 0). When pooled, α and β are integrated out of the sampled density, and
/// the draw carries their exact conditional posterior given the hyperparameters and σ: a
/// normal with this mean and covariance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RubricDraw {
    pub alpha: f64,
    pub beta: f64,
    pub var_alpha: f64,
    pub var_beta: f64,
    pub cov: f64,
    pub sigma: f64,
}

/// Least-squares line of one rubric (intercept at j = 0, slope, residual sd); `None` when the
/// anchors cannot determine a line.
fn ols(s: &SufficientStats) -> Option<(f64, f64, f64)> {
    if s.n < 3.0 {
        return None;
    }
    let mean_j = s.sj / s.n;
    let var_j = s.sjj / s.n - mean_j * mean_j;
    if var_j <= 1e-9 {
        return None;
    }
    let beta = (s.sjy / s.n - mean_j * s.sy / s.n) / var_j;
    let alpha = s.sy / s.n - beta * mean_j;
    let (sse, _, _) = s.sse(alpha, beta);
    Some((alpha, beta, (sse / s.n).sqrt()))
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

/// A 2×2 matrix, row-major.
type M2 = [[f64; 2]; 2];

fn m_mul(a: &M2, b: &M2) -> M2 {
    [
        [
            a[0][0] * b[0][0] + a[0][1] * b[1][0],
            a[0][0] * b[0][1] + a[0][1] * b[1][1],
        ],
        [
            a[1][0] * b[0][0] + a[1][1] * b[1][0],
            a[1][0] * b[0][1] + a[1][1] * b[1][1],
        ],
    ]
}

fn m_t(a: &M2) -> M2 {
    [[a[0][0], a[1][0]], [a[0][1], a[1][1]]]
}

fn m_det(a: &M2) -> f64 {
    a[0][0] * a[1][1] - a[0][1] * a[1][0]
}

fn m_inv(a: &M2) -> M2 {
    let d = m_det(a);
    [[a[1][1] / d, -a[0][1] / d], [-a[1][0] / d, a[0][0] / d]]
}

fn m_add(a: &M2, b: &M2) -> M2 {
    [
        [a[0][0] + b[0][0], a[0][1] + b[0][1]],
        [a[1][0] + b[1][0], a[1][1] + b[1][1]],
    ]
}

fn m_scale(a: &M2, k: f64) -> M2 {
    [[a[0][0] * k, a[0][1] * k], [a[1][0] * k, a[1][1] * k]]
}

fn m_vec(a: &M2, v: [f64; 2]) -> [f64; 2] {
    [
        a[0][0] * v[0] + a[0][1] * v[1],
        a[1][0] * v[0] + a[1][1] * v[1],
    ]
}

fn dot(a: [f64; 2], b: [f64; 2]) -> f64 {
    a[0] * b[0] + a[1] * b[1]
}

fn diag(a: f64, b: f64) -> M2 {
    [[a, 0.0], [0.0, b]]
}

const IDENTITY: M2 = [[1.0, 0.0], [0.0, 1.0]];

/// One rubric's likelihood with θ = (α, β) integrated out against the population prior
/// θ ~ N(μ, D), D = diag(τ_α², τ_β²), at one μ.
struct Marginal {
    /// log p(anchors | μ, τ, σ) without the 2π constant.
    lp: f64,
    /// Its gradient in (μ_α, μ_β, log τ_α, log τ_β, log σ).
    grad: [f64; 5],
    /// The conditional posterior of θ given μ: mean and covariance A⁻¹.
    mean: [f64; 2],
    cov: M2,
    /// Q = P/σ², (I + DQ)⁻¹ and (I + QD)⁻¹: the pieces the pooled model needs, in forms that
    /// stay accurate when τ is tiny (D → 0) or huge.
    q: M2,
    b_inv: M2,
    c_inv: M2,
    d: M2,
}

impl SufficientStats {
    /// P = XᵀX for the design X = [1, j].
    fn gram(&self) -> M2 {
        [[self.n, self.sj], [self.sj, self.sjj]]
    }

    /// With E = D⁻¹, Q = P/σ², A = E + Q (the conditional precision of θ), v = Xᵀ(y − Xμ)/σ²
    /// and w = A⁻¹v (the conditional mean of θ − μ), Woodbury gives
    /// `log p = −n·log σ − ½(log|A| + log|D|) − ½·q/σ² + ½·vᵀw`, q = ‖y − Xμ‖².
    /// Everything is computed through B = I + DQ (A = E·B, so A⁻¹ = B⁻¹D, |A|·|D| = |B|, and
    /// E·A⁻¹ = (I + QD)⁻¹), never as a difference of large terms.
    fn marginal(&self, mu: [f64; 2], log_tau: [f64; 2], log_sigma: f64) -> Marginal {
        let d = diag((2.0 * log_tau[0]).exp(), (2.0 * log_tau[1]).exp());
        let inv_s2 = (-2.0 * log_sigma).exp();
        let p = self.gram();
        let q = m_scale(&p, inv_s2);
        let b = m_add(&IDENTITY, &m_mul(&d, &q));
        let b_inv = m_inv(&b);
        let c_inv = m_inv(&m_add(&IDENTITY, &m_mul(&q, &d)));
        let a_inv = m_mul(&b_inv, &d);
        let (sse, _, _) = self.sse(mu[0], mu[1]);
        let r = [
            self.sy - self.n * mu[0] - self.sj * mu[1],
            self.sjy - self.sj * mu[0] - self.sjj * mu[1],
        ];
        let v = [r[0] * inv_s2, r[1] * inv_s2];
        let w = m_vec(&a_inv, v);
        // E·w, the gradient in μ.
        let ew = m_vec(&c_inv, v);
        let vw = dot(v, w);
        let lp = -self.n * log_sigma - 0.5 * m_det(&b).ln() - 0.5 * sse * inv_s2 + 0.5 * vw;
        let d_tau = |i: usize| b_inv[i][i] + w[i] * ew[i] - 1.0;
        // tr(A⁻¹Q) = tr(B⁻¹·DQ) = 2 − tr(B⁻¹).
        let tr_aq = 2.0 - b_inv[0][0] - b_inv[1][1];
        let d_sigma = -self.n + tr_aq + sse * inv_s2 - 2.0 * vw + dot(w, m_vec(&q, w));
        Marginal {
            lp,
            grad: [ew[0], ew[1], d_tau(0), d_tau(1), d_sigma],
            mean: [mu[0] + w[0], mu[1] + w[1]],
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
    /// d lp / d(log τ_α, log τ_β, log σ_1..R).
    grad: Vec<f64>,
    /// Per rubric: the posterior mean and covariance of θ_r given (τ, σ).
    theta: Vec<([f64; 2], M2)>,
}

/// The posterior of one judge's rubrics.
///
/// Pooled (R ≥ 2), the sampler sees neither the rubric effects θ_r = (α_r, β_r) nor the
/// population means μ: given the scales τ and σ the model is linear-Gaussian in both, so they
/// are integrated out exactly and NUTS moves in the 2 + R dimensions of (log τ_α, log τ_β,
/// log σ_r). That removes the funnels between τ and the rubric effects (which the centred and
/// the non-centred forms each suffer in one regime: non-centred when anchors pin a rubric down
/// more tightly than the rubrics differ, centred when they do not) and between τ and μ (with
/// few rubrics). Each draw then carries the exact normal conditional of every θ_r, from which
/// α_r and β_r are drawn: the joint posterior is the non-centred model's.
#[derive(Debug, Clone)]
pub struct Model {
    stats: Vec<SufficientStats>,
    priors: Priors,
}

impl Model {
    pub fn new(stats: Vec<SufficientStats>, priors: Priors) -> Self {
        Self { stats, priors }
    }

    pub fn stats(&self) -> &[SufficientStats] {
        &self.stats
    }

    pub fn rubrics(&self) -> usize {
        self.stats.len()
    }

    fn pooled(&self) -> bool {
        self.rubrics() > 1
    }

    /// Unconstrained dimension: 3 for one rubric (α + c·β, β, log σ); 2 + R when pooled
    /// (log τ_α, log τ_β, log σ(R)).
    pub fn dim(&self) -> usize {
        let r = self.rubrics();
        if self.pooled() { 2 + r } else { 3 }
    }

    /// One rubric's mean judge score: the centre of the single model's shear.
    fn centre(&self) -> f64 {
        let s = &self.stats[0];
        if s.n > 0.0 { s.sj / s.n } else { 0.0 }
    }

    /// The sampler's coordinates `x` mapped to the model's natural ones.
    ///
    /// One rubric: intercept and slope are almost collinear in the posterior when judge
    /// scores sit far from 0, so the sampler takes the intercept at the anchors' mean judge
    /// score c: a shear with unit Jacobian, `x = [α + c·β, β, log σ]`, natural `[α, β, log σ]`.
    ///
    /// Pooled: natural `[log τ_α, log τ_β, log σ(R)]`; the sampler moves each τ as
    /// `τ = s_τ·softplus(x)`. That is log-like for small τ, where a judge whose rubrics agree
    /// puts a sharp peak with a long tail toward 0, and linear for large τ, where on the log
    /// scale the HalfNormal prior is a wall (curvature e^{2·log τ}) that makes NUTS diverge.
    pub fn natural(&self, x: &[f64]) -> Vec<f64> {
        let mut t = x.to_vec();
        if self.pooled() {
            for i in 0..2 {
                t[i] = self.priors.tau_scale.ln() + ln_softplus(x[i]);
            }
        } else {
            t[0] = x[0] - self.centre() * x[1];
        }
        t
    }

    /// The inverse of [`Model::natural`].
    pub fn sampler_coordinates(&self, t: &[f64]) -> Vec<f64> {
        let mut x = t.to_vec();
        if self.pooled() {
            for i in 0..2 {
                x[i] = (t[i].exp() / self.priors.tau_scale).exp_m1().ln();
            }
        } else {
            x[0] = t[0] + self.centre() * t[1];
        }
        x
    }

    /// The population scales (τ_α, τ_β) at the sampler's coordinates; empty for one rubric.
    pub fn hyperparameters(&self, x: &[f64]) -> Vec<f64> {
        if self.pooled() {
            self.natural(x)[..2].iter().map(|t| t.exp()).collect()
        } else {
            Vec::new()
        }
    }

    /// Log density at the sampler's coordinates `x`, with its gradient there.
    pub fn logp(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let t = self.natural(x);
        if self.pooled() {
            let c = self.collapsed(&t);
            grad.copy_from_slice(&c.grad);
            let mut lp = c.lp;
            // log τ = log s_τ + log softplus(x): chain rule and the log-Jacobian
            // log(d log τ / dx) = log sigmoid(x) − log softplus(x).
            for i in 0..2 {
                let sig = sigmoid(x[i]);
                let ratio = (sig.ln() - ln_softplus(x[i])).exp();
                lp += sig.ln() - ln_softplus(x[i]);
                grad[i] = grad[i] * ratio + (1.0 - sig) - ratio;
            }
            return lp;
        }
        let lp = self.logp_single(&t, grad);
        grad[1] -= self.centre() * grad[0];
        lp
    }

    /// The single-rubric density at natural coordinates [α, β, log σ].
    fn logp_single(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let p = &self.priors;
        let (ll, g) = self.stats[0].loglik(x[0], x[1], x[2]);
        let (pa, ga) = normal(x[0], p.alpha_mean, p.alpha_sd);
        let (pb, gb) = normal(x[1], p.beta_mean, p.beta_sd);
        let (ps, gs) = half_normal_log(x[2], p.sigma_scale);
        grad[0] = g[0] + ga;
        grad[1] = g[1] + gb;
        grad[2] = g[2] + gs;
        ll + pa + pb + ps
    }

    /// The pooled density at natural x = [log τ_α, log τ_β, log σ(R)] (HalfNormal priors with
    /// their log-Jacobians), μ and θ integrated out.
    ///
    /// Each rubric's integrated likelihood is quadratic in μ:
    /// `L_r(μ) = L_r(0) + g_rᵀμ − ½μᵀH_rμ` with g_r = E·w_r(0) and H_r = E − E·A_r⁻¹·E.
    /// With the prior N(m, S), H = S⁻¹ + ΣH_r and G = S⁻¹m + Σg_r, integrating μ gives
    /// `ΣL_r(0) − ½mᵀS⁻¹m + ½GᵀH⁻¹G − ½log|H|`. Its derivative in a scale is the sum of the
    /// L_r's partial derivatives at μ* = H⁻¹G (μ held fixed) minus ½tr(H⁻¹ ∂H), with
    /// ∂H_r/∂log σ_r = −2N_rQ_rN_rᵀ (N_r = E·A_r⁻¹) and ∂H_r/∂log τ_i = M_rᵀ·(∂E/∂log τ_i)·M_r
    /// (M_r = I − A_r⁻¹·E).
    fn collapsed(&self, x: &[f64]) -> Collapsed {
        let pr = &self.priors;
        let log_tau = [x[0], x[1]];
        let s_inv = diag(pr.alpha_sd.powi(-2), pr.beta_sd.powi(-2));
        let m = [pr.alpha_mean, pr.beta_mean];
        let mut h = s_inv;
        let mut g = m_vec(&s_inv, m);
        let mut lp = -0.5 * dot(m, g);
        let mut parts = Vec::with_capacity(self.rubrics());
        for (k, s) in self.stats.iter().enumerate() {
            let at_zero = s.marginal([0.0, 0.0], log_tau, x[2 + k]);
            lp += at_zero.lp;
            g = [g[0] + at_zero.grad[0], g[1] + at_zero.grad[1]];
            // H_r = E − E·A⁻¹·E = (I + QD)⁻¹·Q.
            h = m_add(&h, &m_mul(&at_zero.c_inv, &at_zero.q));
            parts.push(at_zero);
        }
        let h_inv = m_inv(&h);
        let mu = m_vec(&h_inv, g);
        lp += 0.5 * dot(g, mu) - 0.5 * m_det(&h).ln();

        let mut grad = vec![0.0; self.dim()];
        let mut theta = Vec::with_capacity(self.rubrics());
        for (k, (s, part)) in self.stats.iter().zip(&parts).enumerate() {
            let at_mu = s.marginal(mu, log_tau, x[2 + k]);
            // −½tr(H⁻¹ ∂H_r) for log τ_i, with ∂E/∂log τ_i = −2·e_i at (i, i) and
            // M_r = I − A⁻¹E = B⁻¹·DQ.
            let m_r = m_mul(&part.b_inv, &m_mul(&part.d, &part.q));
            let spread = m_mul(&m_r, &m_mul(&h_inv, &m_t(&m_r)));
            grad[0] += at_mu.grad[2] + spread[0][0] / part.d[0][0];
            grad[1] += at_mu.grad[3] + spread[1][1] / part.d[1][1];
            // … and for log σ_r: ∂H_r = −2·N·Q·Nᵀ, N = E·A⁻¹ = (I + QD)⁻¹.
            let nqn = m_mul(&part.c_inv, &m_mul(&part.q, &m_t(&part.c_inv)));
            let tr = (0..2)
                .map(|i| (0..2).map(|j| h_inv[i][j] * nqn[j][i]).sum::<f64>())
                .sum::<f64>();
            let (ps, gs) = half_normal_log(x[2 + k], pr.sigma_scale);
            lp += ps;
            grad[2 + k] = at_mu.grad[4] + tr + gs;
            // θ_r given (τ, σ): mean μ* + w_r(μ*), covariance A⁻¹ + K·H⁻¹·Kᵀ, K = A⁻¹E = B⁻¹.
            let k_r = part.b_inv;
            let cov = m_add(&part.cov, &m_mul(&k_r, &m_mul(&h_inv, &m_t(&k_r))));
            theta.push((at_mu.mean, cov));
        }
        for i in 0..2 {
            let (pt, gt) = half_normal_log(x[i], pr.tau_scale);
            lp += pt;
            grad[i] += gt;
        }
        Collapsed { lp, grad, theta }
    }

    /// Per-rubric parameters at the sampler's coordinates `x`.
    pub fn params(&self, x: &[f64]) -> Vec<RubricDraw> {
        if !self.pooled() {
            let t = self.natural(x);
            return vec![RubricDraw {
                alpha: t[0],
                beta: t[1],
                var_alpha: 0.0,
                var_beta: 0.0,
                cov: 0.0,
                sigma: t[2].exp(),
            }];
        }
        self.collapsed(&self.natural(x))
            .theta
            .into_iter()
            .enumerate()
            .map(|(k, (mean, cov))| RubricDraw {
                alpha: mean[0],
                beta: mean[1],
                var_alpha: cov[0][0],
                var_beta: cov[1][1],
                cov: cov[0][1],
                sigma: x[2 + k].exp(),
            })
            .collect()
    }

    /// A starting point: per-rubric least squares (the prior's centre when the anchors cannot
    /// determine a line); pooled, their spread and residual sds.
    pub fn start(&self) -> Vec<f64> {
        let lines: Vec<(f64, f64, f64)> = self
            .stats
            .iter()
            .map(|s| {
                let (a, b, sigma) = ols(s).unwrap_or_else(|| {
                    let b = self.priors.beta_mean;
                    let a = if s.n > 0.0 {
                        (s.sy - b * s.sj) / s.n
                    } else {
                        self.priors.alpha_mean
                    };
                    (a, b, 0.8 * self.priors.sigma_scale)
                });
                (a, b, sigma.clamp(0.05, 10.0))
            })
            .collect();
        if !self.pooled() {
            let (a, b, s) = lines[0];
            return self.sampler_coordinates(&[a, b, s.ln()]);
        }
        let r = lines.len() as f64;
        let spread = |f: &dyn Fn(&(f64, f64, f64)) -> f64| {
            let m = crate::stats::mean_of(lines.iter().map(f));
            (lines.iter().map(|l| (f(l) - m).powi(2)).sum::<f64>() / r)
                .sqrt()
                .clamp(0.05, 2.0)
                .ln()
        };
        let mut t = vec![spread(&|l| l.0), spread(&|l| l.1)];
        t.extend(lines.iter().map(|l| l.2.ln()));
        self.sampler_coordinates(&t)
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
