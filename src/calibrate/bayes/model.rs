//! The hierarchical linear model's log density and gradient, written on per-rubric sufficient
//! statistics so that one evaluation costs O(rubrics), not O(anchors).
//!
//! For rubrics r = 1..R (R >= 2), non-centred:
//!
//! ```text
//! y ~ Normal(α_r + β_r·j, σ_r)        α_r = μ_α + τ_α·z_α,r     β_r = μ_β + τ_β·z_β,r
//! z ~ Normal(0, 1)   σ_r ~ HalfNormal(s_σ)   μ_α ~ N(m_α, s_α²)   μ_β ~ N(m_β, s_β²)
//! τ_α, τ_β ~ HalfNormal(s_τ)
//! ```
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

/// The priors; the defaults are the paper's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Priors {
    pub alpha_mean: f64,
    pub alpha_sd: f64,
    pub beta_mean: f64,
    pub beta_sd: f64,
    /// Scale of the HalfNormal prior on each σ_r.
    pub sigma_scale: f64,
    /// Scale of the HalfNormal priors on τ_α and τ_β.
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
fn half_normal_log(u: f64, scale: f64) -> (f64, f64) {
    let x = u.exp();
    let z = x / scale;
    (-0.5 * z * z + u, -z * z + 1.0)
}

/// Per-rubric parameter values at one point of the sampler's space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RubricParams {
    pub alpha: f64,
    pub beta: f64,
    pub sigma: f64,
}

/// Rubrics with at least this many anchors are sampled centred (see [`Model`]).
pub const CENTRE_FROM_ANCHORS: f64 = 100.0;

/// The posterior of one judge's rubrics.
///
/// When pooled, each rubric is parameterised in the way that suits its data: non-centred
/// (`α_r = μ_α + τ_α·z_α,r`), which avoids the funnel between τ and a rubric its anchors say
/// little about, or centred (α_r, β_r directly), which avoids the opposite, curved, geometry
/// when the anchors pin the rubric down. Rubrics with [`CENTRE_FROM_ANCHORS`] anchors or more
/// are centred. Both give the same posterior; only the sampler's efficiency differs.
#[derive(Debug, Clone)]
pub struct Model {
    stats: Vec<SufficientStats>,
    priors: Priors,
    centred: Vec<bool>,
}

impl Model {
    pub fn new(stats: Vec<SufficientStats>, priors: Priors) -> Self {
        let centred = stats
            .iter()
            .map(|s| stats.len() > 1 && s.n >= CENTRE_FROM_ANCHORS)
            .collect();
        Self {
            stats,
            priors,
            centred,
        }
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

    /// Unconstrained dimension: 3 for one rubric; 4 + 3R when pooled.
    pub fn dim(&self) -> usize {
        let r = self.rubrics();
        if self.pooled() { 4 + 3 * r } else { 3 }
    }

    /// Each rubric's mean judge score, and their mean: the centres of the sampler's shear.
    fn centres(&self) -> (Vec<f64>, f64) {
        let c: Vec<f64> = self
            .stats
            .iter()
            .map(|s| if s.n > 0.0 { s.sj / s.n } else { 0.0 })
            .collect();
        let mean = c.iter().sum::<f64>() / c.len() as f64;
        (c, mean)
    }

    /// The sampler's coordinates `x` mapped to the model's natural ones.
    ///
    /// The sampler does not move along α and β directly: with judge scores far from 0 they are
    /// almost collinear in the posterior, and NUTS mixes slowly. It samples each intercept at
    /// the rubric's mean judge score c_r instead, a shear with unit Jacobian determinant, so
    /// the posterior is the same:
    /// single `x = [α + c·β, β, log σ]`; pooled `x = [μ_α + c̄·μ_β, μ_β, log τ_α, log τ_β, u(R),
    /// z_β(R), log σ(R)]` with `z_α,r = u_r − c_r·(τ_β/τ_α)·z_β,r − (c_r − c̄)·μ_β/τ_α`, i.e.
    /// `u_r` is the rubric's deviation of its centred intercept. A centred rubric's pair is
    /// simply `[α_r + c_r·β_r, β_r]`.
    pub fn natural(&self, x: &[f64]) -> Vec<f64> {
        let (c, c_bar) = self.centres();
        let mut t = x.to_vec();
        if !self.pooled() {
            t[0] = x[0] - c[0] * x[1];
            return t;
        }
        let r = self.rubrics();
        let mu_b = x[1];
        t[0] = x[0] - c_bar * mu_b;
        let ratio = (x[3] - x[2]).exp();
        let inv_tau_a = (-x[2]).exp();
        for k in 0..r {
            t[4 + k] = if self.centred[k] {
                x[4 + k] - c[k] * x[4 + r + k]
            } else {
                x[4 + k] - c[k] * ratio * x[4 + r + k] - (c[k] - c_bar) * mu_b * inv_tau_a
            };
        }
        t
    }

    /// Log density at the sampler's coordinates `x`, with its gradient there.
    pub fn logp(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let t = self.natural(x);
        let mut g = vec![0.0; t.len()];
        let lp = self.logp_natural(&t, &mut g);
        grad.copy_from_slice(&g);
        let (c, c_bar) = self.centres();
        if !self.pooled() {
            // α = x0 − c·x1.
            grad[1] -= c[0] * g[0];
            return lp;
        }
        let r = self.rubrics();
        let mu_b = x[1];
        let ratio = (x[3] - x[2]).exp();
        let inv_tau_a = (-x[2]).exp();
        // μ_α = x0 − c̄·x1.
        grad[1] -= c_bar * g[0];
        for k in 0..r {
            let ga = g[4 + k];
            if self.centred[k] {
                grad[4 + r + k] -= c[k] * ga;
                continue;
            }
            let zb = x[4 + r + k];
            let shift = (c[k] - c_bar) * mu_b * inv_tau_a;
            // ∂z_α,r/∂x: u → 1; z_β → −c·ratio; log τ_α → c·ratio·z_β + shift;
            // log τ_β → −c·ratio·z_β; μ_β → −(c_r − c̄)/τ_α.
            grad[4 + r + k] -= c[k] * ratio * ga;
            grad[2] += (c[k] * ratio * zb + shift) * ga;
            grad[3] -= c[k] * ratio * zb * ga;
            grad[1] -= (c[k] - c_bar) * inv_tau_a * ga;
        }
        lp
    }

    /// Per-rubric parameters at the sampler's coordinates `x`.
    pub fn params(&self, x: &[f64]) -> Vec<RubricParams> {
        self.params_natural(&self.natural(x))
    }

    /// Natural layout when pooled: [μ_α, μ_β, log τ_α, log τ_β, p_α(R), p_β(R), log σ(R)],
    /// where a rubric's p is z (non-centred) or α_r, β_r themselves (centred); single:
    /// [α, β, log σ].
    pub fn params_natural(&self, x: &[f64]) -> Vec<RubricParams> {
        let r = self.rubrics();
        if !self.pooled() {
            return vec![RubricParams {
                alpha: x[0],
                beta: x[1],
                sigma: x[2].exp(),
            }];
        }
        let (tau_a, tau_b) = (x[2].exp(), x[3].exp());
        (0..r)
            .map(|k| {
                let (alpha, beta) = if self.centred[k] {
                    (x[4 + k], x[4 + r + k])
                } else {
                    (x[0] + tau_a * x[4 + k], x[1] + tau_b * x[4 + r + k])
                };
                RubricParams {
                    alpha,
                    beta,
                    sigma: x[4 + 2 * r + k].exp(),
                }
            })
            .collect()
    }

    /// Log density (up to a constant) at natural coordinates `x`, writing its gradient into
    /// `grad`.
    pub fn logp_natural(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let p = &self.priors;
        grad.iter_mut().for_each(|g| *g = 0.0);
        if !self.pooled() {
            let (ll, g) = self.stats[0].loglik(x[0], x[1], x[2]);
            let (pa, ga) = normal(x[0], p.alpha_mean, p.alpha_sd);
            let (pb, gb) = normal(x[1], p.beta_mean, p.beta_sd);
            let (ps, gs) = half_normal_log(x[2], p.sigma_scale);
            grad[0] = g[0] + ga;
            grad[1] = g[1] + gb;
            grad[2] = g[2] + gs;
            return ll + pa + pb + ps;
        }
        let r = self.rubrics();
        let (mu_a, mu_b, u_ta, u_tb) = (x[0], x[1], x[2], x[3]);
        let (tau_a, tau_b) = (u_ta.exp(), u_tb.exp());
        let mut lp = 0.0;
        for (k, s) in self.stats.iter().enumerate() {
            let (pa, pb, u_s) = (x[4 + k], x[4 + r + k], x[4 + 2 * r + k]);
            if self.centred[k] {
                let (ll, g) = s.loglik(pa, pb, u_s);
                let (za, zb) = ((pa - mu_a) / tau_a, (pb - mu_b) / tau_b);
                lp += ll - 0.5 * (za * za + zb * zb) - u_ta - u_tb;
                grad[0] += za / tau_a;
                grad[1] += zb / tau_b;
                grad[2] += za * za - 1.0;
                grad[3] += zb * zb - 1.0;
                grad[4 + k] = g[0] - za / tau_a;
                grad[4 + r + k] = g[1] - zb / tau_b;
                let (ps, gs) = half_normal_log(u_s, p.sigma_scale);
                lp += ps;
                grad[4 + 2 * r + k] = g[2] + gs;
                continue;
            }
            let (za, zb) = (pa, pb);
            let (ll, g) = s.loglik(mu_a + tau_a * za, mu_b + tau_b * zb, u_s);
            lp += ll - 0.5 * (za * za + zb * zb);
            // α = μ_α + τ_α z_α: chain rule into μ, log τ and z.
            grad[0] += g[0];
            grad[1] += g[1];
            grad[2] += g[0] * tau_a * za;
            grad[3] += g[1] * tau_b * zb;
            grad[4 + k] = g[0] * tau_a - za;
            grad[4 + r + k] = g[1] * tau_b - zb;
            let (ps, gs) = half_normal_log(u_s, p.sigma_scale);
            lp += ps;
            grad[4 + 2 * r + k] = g[2] + gs;
        }
        let (pa, ga) = normal(mu_a, p.alpha_mean, p.alpha_sd);
        let (pb, gb) = normal(mu_b, p.beta_mean, p.beta_sd);
        let (pta, gta) = half_normal_log(u_ta, p.tau_scale);
        let (ptb, gtb) = half_normal_log(u_tb, p.tau_scale);
        grad[0] += ga;
        grad[1] += gb;
        grad[2] += gta;
        grad[3] += gtb;
        lp + pa + pb + pta + ptb
    }

    /// A starting point: per-rubric least squares (shrunk to the prior when degenerate).
    pub fn start(&self) -> Vec<f64> {
        let ols: Vec<(f64, f64, f64)> = self
            .stats
            .iter()
            .map(|s| {
                let var_j = s.sjj / s.n.max(1.0) - (s.sj / s.n.max(1.0)).powi(2);
                let beta = if s.n >= 3.0 && var_j > 1e-9 {
                    (s.sjy / s.n - s.sj * s.sy / (s.n * s.n)) / var_j
                } else {
                    self.priors.beta_mean
                };
                let alpha = if s.n > 0.0 {
                    (s.sy - beta * s.sj) / s.n
                } else {
                    self.priors.alpha_mean
                };
                let (sse, _, _) = s.sse(alpha, beta);
                let sigma = if s.n >= 3.0 {
                    (sse / s.n).sqrt().clamp(0.05, 10.0)
                } else {
                    0.8 * self.priors.sigma_scale
                };
                (alpha, beta, sigma)
            })
            .collect();
        if !self.pooled() {
            let (a, b, s) = ols[0];
            let (c, _) = self.centres();
            return vec![a + c[0] * b, b, s.ln()];
        }
        let r = self.rubrics() as f64;
        let mean_a = ols.iter().map(|o| o.0).sum::<f64>() / r;
        let mean_b = ols.iter().map(|o| o.1).sum::<f64>() / r;
        let (tau_a, tau_b) = (0.5_f64, 0.5_f64);
        let mut x = vec![mean_a, mean_b, tau_a.ln(), tau_b.ln()];
        let pick = |k: usize, own: f64, mean: f64, tau: f64| {
            if self.centred[k] {
                own
            } else {
                ((own - mean) / tau).clamp(-3.0, 3.0)
            }
        };
        x.extend((0..ols.len()).map(|k| pick(k, ols[k].0, mean_a, tau_a)));
        x.extend((0..ols.len()).map(|k| pick(k, ols[k].1, mean_b, tau_b)));
        x.extend(ols.iter().map(|o| o.2.ln()));
        self.sampler_coordinates(&x)
    }

    /// The inverse of [`Model::natural`].
    pub fn sampler_coordinates(&self, t: &[f64]) -> Vec<f64> {
        let (c, c_bar) = self.centres();
        let mut x = t.to_vec();
        if !self.pooled() {
            x[0] = t[0] + c[0] * t[1];
            return x;
        }
        let r = self.rubrics();
        let mu_b = t[1];
        x[0] = t[0] + c_bar * mu_b;
        let ratio = (t[3] - t[2]).exp();
        let inv_tau_a = (-t[2]).exp();
        for k in 0..r {
            x[4 + k] = if self.centred[k] {
                t[4 + k] + c[k] * t[4 + r + k]
            } else {
                t[4 + k] + c[k] * ratio * t[4 + r + k] + (c[k] - c_bar) * mu_b * inv_tau_a
            };
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(seed: u64, n: usize, a: f64, b: f64) -> SufficientStats {
        // A deterministic spread of points; the gradient check needs no randomness.
        SufficientStats::from_pairs((0..n).map(|i| {
            let j = 1.0 + ((i as u64 * 7919 + seed) % 400) as f64 / 100.0;
            let wiggle = (((i as u64 * 104_729 + seed) % 1000) as f64 / 1000.0 - 0.5) * 0.8;
            (j, a + b * j + wiggle)
        }))
    }

    /// Central finite differences with step 1e-6 agree with the analytic gradient to 1e-5
    /// relative: the truncation error is O(h²) ≈ 1e-12 and rounding O(ε/h) ≈ 1e-10 times the
    /// density's scale (~10³ here).
    fn check_gradient(model: &Model, x: &[f64]) {
        let mut grad = vec![0.0; x.len()];
        let mut scratch = vec![0.0; x.len()];
        model.logp(x, &mut grad);
        for i in 0..x.len() {
            let h = 1e-6;
            let (mut up, mut down) = (x.to_vec(), x.to_vec());
            up[i] += h;
            down[i] -= h;
            let fd = (model.logp(&up, &mut scratch) - model.logp(&down, &mut scratch)) / (2.0 * h);
            let tol = 1e-5 * (1.0 + fd.abs());
            assert!(
                (fd - grad[i]).abs() < tol,
                "coordinate {i}: analytic {} vs finite difference {fd}",
                grad[i]
            );
        }
    }

    #[test]
    fn gradient_matches_finite_differences_single_and_pooled() {
        let single = Model::new(vec![stats(1, 200, 1.1, 0.85)], Priors::default());
        check_gradient(&single, &[0.9, 0.8, -0.6]);
        // One centred rubric (150 anchors) and two non-centred ones.
        let pooled = Model::new(
            vec![
                stats(2, 150, 1.0, 0.9),
                stats(3, 5, 0.5, 1.1),
                stats(4, 60, 1.4, 0.7),
            ],
            Priors::default(),
        );
        assert_eq!(pooled.centred, [true, false, false]);
        assert_eq!(pooled.dim(), 13);
        let x: Vec<f64> = (0..pooled.dim())
            .map(|i| 0.3 * ((i as f64) * 0.7).sin())
            .collect();
        check_gradient(&pooled, &x);
        // The shear is invertible: sampler → natural → sampler is the identity.
        let back = pooled.sampler_coordinates(&pooled.natural(&x));
        assert!(x.iter().zip(&back).all(|(a, b)| (a - b).abs() < 1e-12));
    }

    #[test]
    fn sufficient_statistics_give_the_same_likelihood_as_the_anchors() {
        let pairs: Vec<(f64, f64)> = (0..50)
            .map(|i| (1.0 + i as f64 * 0.08, 2.0 + (i as f64 * 0.37).sin()))
            .collect();
        let s = SufficientStats::from_pairs(pairs.iter().copied());
        let (a, b, sigma) = (0.4, 0.9, 0.7_f64);
        let direct: f64 = pairs
            .iter()
            .map(|(j, y)| -sigma.ln() - 0.5 * ((y - a - b * j) / sigma).powi(2))
            .sum();
        let (ll, _) = s.loglik(a, b, sigma.ln());
        assert!(
            (ll - direct).abs() < 1e-9 * direct.abs(),
            "{ll} vs {direct}"
        );
    }
}
