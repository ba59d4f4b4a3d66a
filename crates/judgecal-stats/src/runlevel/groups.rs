//! How a corrector's bias varies between the groups (systems, models) whose outputs its anchors
//! came from, and what that does to a run's answer.
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-stats/src/runlevel/groups.rs".

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::stats::{
    bisect, chi_square_quantile, mean, normal_cdf, sample_variance, standard_normal, t_quantile,
};

/// Below this many groups, τ² is not estimated (see the module's rules).
pub const MIN_GROUPS: usize = 5;

/// The pooled within-group variance's weight in a group's own, in degrees of freedom: a group of
/// n anchors weighs its own n − 1 against these (a moderated variance, as limma's). Few anchors
/// lean on the pool; a hundred mostly speak for themselves.
pub const VARIANCE_PRIOR_DF: f64 = 10.0;

/// The chance, where the groups' biases are normal, that any of them is flagged outlying: each
/// group's distance from the others (their τ̂ and weighted mean) over its standard deviation,
/// against Student's t on G − 2 degrees of freedom at this over 2G (Bonferroni).
pub const OUTLIER_ALPHA: f64 = 0.05;

/// One group's held-out residuals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GroupResidual {
    pub group: String,
    /// Held-out anchors of the group.
    pub anchors: usize,
    /// Mean of reference − corrected over them.
    pub mean_residual: f64,
    /// Its standard error: the group's residual variance (`variance`) over anchors, rooted.
    pub standard_error: f64,
    /// The group's own residual variance, moderated toward the pooled one (weighed as 10 more
    /// anchors at the pooled variance); 0 in versions trained before it, which pooled every
    /// group's.
    #[serde(default)]
    pub variance: f64,
    /// Its mean lies further from the other groups' than normal biases allow (each group
    /// against the rest, Student's t, 5% family-wise where none is far): a run of it keeps its
    /// own mean, unshrunk, and a new group's answer says the biases look non-normal.
    #[serde(default)]
    pub outlying: bool,
}

/// A version's measure of how its bias varies between groups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GroupBias {
    /// Every group with at least one held-out anchor, by name.
    pub groups: Vec<GroupResidual>,
    /// The unweighted mean of the groups' mean residuals (answers centre a new group's bias
    /// on their precision-weighted mean, under τ's posterior).
    pub mean: f64,
    /// The between-group standard deviation of the bias, τ̂ (Paule–Mandel; 0 where the group
    /// means vary no more than their standard errors explain).
    pub tau: f64,
    /// The sample variance of the group means, S_b².
    pub spread: f64,
    /// The mean squared standard error of the group means, s̄².
    pub mean_square_error: f64,
    /// `random_effects` (at least 5 groups) or `conservative` (2 to 4: known groups keep
    /// their own means, a new group's bias is Student's t on G − 1 degrees of freedom).
    pub rule: String,
    /// Held-out anchors without a group (not counted above).
    pub ungrouped: usize,
    /// The pooled within-group residual variance (0 in versions trained before groups kept
    /// their own).
    #[serde(default)]
    pub within: f64,
}

/// The group of a run, as far as the answer is concerned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GroupTerm {
    /// The anchors carry no groups (or one): system-specific bias is not accounted for.
    Unmeasured,
    /// The run's group is among the anchors': its shrunk bias is applied.
    Known,
    /// The run's group is new (or not given): a new group's bias is a draw from the
    /// between-group distribution.
    New,
}

impl GroupTerm {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupTerm::Unmeasured => "unmeasured",
            GroupTerm::Known => "known",
            GroupTerm::New => "new",
        }
    }
}

/// A bias correction: a mixture of normals (weight, mean, variance) over τ's posterior.
#[derive(Debug, Clone, PartialEq)]
pub struct BiasShift {
    pub components: Vec<(f64, f64, f64)>,
    pub term: GroupTerm,
}

impl BiasShift {
    pub fn none() -> Self {
        BiasShift {
            components: vec![(1.0, 0.0, 0.0)],
            term: GroupTerm::Unmeasured,
        }
    }

    fn fixed(term: GroupTerm) -> Self {
        BiasShift {
            term,
            ..Self::none()
        }
    }

    /// The mixture's mean: the correction applied to the estimate.
    pub fn shift(&self) -> f64 {
        self.components.iter().map(|c| c.0 * c.1).sum()
    }

    /// The mixture's variance.
    pub fn variance(&self) -> f64 {
        let m = self.shift();
        self.components
            .iter()
            .map(|c| c.0 * (c.2 + (c.1 - m).powi(2)))
            .sum::<f64>()
            .max(0.0)
    }

    /// The bias of one run less another's where the two come from different measures (two
    /// judge versions' groups): a mixture over both posteriors, each coarsened to at most
    /// [`DIFFERENCE_COMPONENTS`] components (neighbouring τ, moments kept), whose components'
    /// variances lose twice the two measures' covariance `covariance` (see
    /// `runlevel::compare_correlated`).
    pub fn less(&self, other: &BiasShift, covariance: f64) -> BiasShift {
        let (a, b) = (
            self.coarse(DIFFERENCE_COMPONENTS),
            other.coarse(DIFFERENCE_COMPONENTS),
        );
        let components = a
            .iter()
            .flat_map(|&(wa, ma, va)| {
                b.iter().map(move |&(wb, mb, vb)| {
                    (wa * wb, ma - mb, (va + vb - 2.0 * covariance).max(0.0))
                })
            })
            .collect();
        let term = if self.term == GroupTerm::Known && other.term == GroupTerm::Known {
            GroupTerm::Known
        } else {
            GroupTerm::New
        };
        BiasShift { components, term }
    }

    /// At most `k` components: runs of neighbouring ones merged, each keeping its weight, mean
    /// and variance.
    fn coarse(&self, k: usize) -> Vec<(f64, f64, f64)> {
        let per = self.components.len().div_ceil(k.max(1)).max(1);
        self.components
            .chunks(per)
            .map(|c| {
                let w: f64 = c.iter().map(|x| x.0).sum();
                if w <= 0.0 {
                    return (0.0, 0.0, 0.0);
                }
                let m = c.iter().map(|x| x.0 * x.1).sum::<f64>() / w;
                let v = c
                    .iter()
                    .map(|x| x.0 * (x.2 + (x.1 - m).powi(2)))
                    .sum::<f64>()
                    / w;
                (w, m, v)
            })
            .collect()
    }

    /// P(X ≤ x) for X = this mixture plus an independent N(0, `extra`).
    pub fn cdf(&self, x: f64, extra: f64) -> f64 {
        self.components
            .iter()
            .map(|&(w, m, v)| {
                let sd = (v + extra).sqrt();
                if sd > 0.0 {
                    w * normal_cdf((x - m) / sd)
                } else {
                    w * f64::from(u8::from(x >= m))
                }
            })
            .sum()
    }

    /// The `p`-quantile of this mixture plus an independent N(0, `extra`), by bisection.
    pub fn quantile(&self, p: f64, extra: f64) -> f64 {
        let (lo, hi) = self.components.iter().fold(
            (f64::INFINITY, f64::NEG_INFINITY),
            |(lo, hi), &(_, m, v)| {
                let r = 9.0 * (v + extra).sqrt() + 1e-12;
                (lo.min(m - r), hi.max(m + r))
            },
        );
        bisect(lo, hi, 80, |x| self.cdf(x, extra) < p)
    }
}

/// Paule–Mandel's τ²: the root in τ² of Σ w_g (b_g − μ̂)² = G − 1, w_g = 1/(s_g² + τ²), by
/// bisection (0 where the group means vary no more than their standard errors explain). The
/// point estimate shown on the version; the answers use τ's whole posterior.
fn paule_mandel(b: &[f64], s2: &[f64]) -> f64 {
    let g = b.len() as f64;
    let q = |t2: f64| {
        let w: Vec<f64> = s2.iter().map(|s| 1.0 / (s + t2).max(1e-300)).collect();
        let mu = w.iter().zip(b).map(|(w, b)| w * b).sum::<f64>() / w.iter().sum::<f64>();
        w.iter()
            .zip(b)
            .map(|(w, b)| w * (b - mu).powi(2))
            .sum::<f64>()
            - (g - 1.0)
    };
    if q(0.0) <= 0.0 {
        return 0.0;
    }
    let mut hi = sample_variance(b).max(1e-12) * 4.0 + s2.iter().cloned().fold(0.0, f64::max);
    while q(hi) > 0.0 {
        hi *= 2.0;
    }
    bisect(0.0, hi, 100, |t2| q(t2) > 0.0)
}

/// Which of the group means `b` (squared standard errors `s2`) lie further from the others
/// than normal biases allow ([`OUTLIER_ALPHA`]); none below [`MIN_GROUPS`] groups, where the
/// others are too few to say what normal is.
fn outlying(b: &[f64], s2: &[f64]) -> Vec<bool> {
    let g = b.len();
    if g < MIN_GROUPS {
        return vec![false; g];
    }
    let limit = t_quantile(1.0 - OUTLIER_ALPHA / (2.0 * g as f64), (g - 2) as f64);
    (0..g)
        .map(|k| {
            let (ob, os): (Vec<f64>, Vec<f64>) =
                (0..g).filter(|&i| i != k).map(|i| (b[i], s2[i])).unzip();
            let t2 = paule_mandel(&ob, &os);
            let w: Vec<f64> = os.iter().map(|s| 1.0 / (s + t2).max(1e-300)).collect();
            let sw: f64 = w.iter().sum();
            let mu = w.iter().zip(&ob).map(|(w, b)| w * b).sum::<f64>() / sw;
            let sd = (t2 + s2[k] + 1.0 / sw).sqrt();
            sd > 0.0 && ((b[k] - mu) / sd).abs() > limit
        })
        .collect()
}

/// τ's grid and posterior weights, and the per-τ quantities every term needs.
struct Posterior {
    /// (weight, τ², μ̂_τ, 1/Σw).
    points: Vec<(f64, f64, f64, f64)>,
    /// Known groups shrunk toward μ̂_τ (at least [`MIN_GROUPS`] groups); otherwise each keeps
    /// its own mean.
    pooled: bool,
}

/// Points of τ's grid.
const GRID: usize = 160;

/// Components each side of [`BiasShift::less`] keeps.
pub const DIFFERENCE_COMPONENTS: usize = 32;

impl GroupBias {
    /// From the held-out predictions `held_out` of anchors `pairs` (judge, reference; `None`
    /// where an anchor was never held out) and each anchor's group.
    pub fn of_held_out(
        pairs: &[(f64, f64)],
        held_out: &[Option<crate::Corrected>],
        groups: &[Option<&str>],
    ) -> Option<Self> {
        let (residuals, groups): (Vec<f64>, Vec<Option<&str>>) = pairs
            .iter()
            .zip(held_out)
            .zip(groups)
            .filter_map(|((p, c), g)| c.map(|c| (p.1 - c.score, *g)))
            .unzip();
        Self::of(&residuals, &groups)
    }

    /// From held-out `residuals` (reference − held-out prediction) and each one's `group`;
    /// `None` with fewer than 2 groups.
    pub fn of(residuals: &[f64], groups: &[Option<&str>]) -> Option<Self> {
        let mut by: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
        let mut ungrouped = 0;
        for (r, g) in residuals.iter().zip(groups) {
            match g {
                Some(g) if r.is_finite() => by.entry(g).or_default().push(*r),
                _ => ungrouped += 1,
            }
        }
        if by.len() < 2 {
            return None;
        }
        // Pooled within-group variance: stable for small groups.
        let (ss, dof) = by.values().fold((0.0, 0.0), |(ss, dof), rs| {
            let m = mean(rs);
            (
                ss + rs.iter().map(|r| (r - m).powi(2)).sum::<f64>(),
                dof + rs.len() as f64 - 1.0,
            )
        });
        let within = if dof > 0.0 { ss / dof } else { 0.0 };
        let groups: Vec<GroupResidual> = by
            .iter()
            .map(|(g, rs)| {
                let own = rs.len() as f64 - 1.0;
                let variance = if own > 0.0 {
                    (VARIANCE_PRIOR_DF * within + own * sample_variance(rs))
                        / (VARIANCE_PRIOR_DF + own)
                } else {
                    within
                };
                GroupResidual {
                    group: (*g).to_owned(),
                    anchors: rs.len(),
                    mean_residual: mean(rs),
                    standard_error: (variance / rs.len() as f64).sqrt(),
                    variance,
                    outlying: false,
                }
            })
            .collect();
        let b: Vec<f64> = groups.iter().map(|g| g.mean_residual).collect();
        let s2: Vec<f64> = groups.iter().map(|g| g.standard_error.powi(2)).collect();
        let mut groups = groups;
        for (g, out) in groups.iter_mut().zip(outlying(&b, &s2)) {
            g.outlying = out;
        }
        Some(Self {
            mean: mean(&b),
            tau: paule_mandel(&b, &s2).sqrt(),
            spread: sample_variance(&b),
            mean_square_error: mean(&s2),
            rule: if groups.len() >= MIN_GROUPS {
                "random_effects"
            } else {
                "conservative"
            }
            .into(),
            groups,
            ungrouped,
            within,
        })
    }

    /// The groups flagged outlying, by name.
    pub fn outlying(&self) -> Vec<&str> {
        self.groups
            .iter()
            .filter(|g| g.outlying)
            .map(|g| g.group.as_str())
            .collect()
    }

    /// How much noisier a reference of `group`'s is around its corrected score than the
    /// anchors' pooled within-group noise: its moderated variance over the pooled one (1 for a
    /// new group, whose noise is taken as the anchors', or in versions trained before).
    pub fn noise_ratio(&self, group: Option<&str>) -> f64 {
        match self.find(group) {
            Some((_, g)) if g.variance > 0.0 && self.within > 0.0 => g.variance / self.within,
            _ => 1.0,
        }
    }

    /// τ's posterior under a flat prior on [0, τ_max], from the restricted likelihood; below
    /// [`MIN_GROUPS`] groups, the conservative rule's points (see the module's rules).
    fn posterior(&self) -> Posterior {
        let s2: Vec<f64> = self
            .groups
            .iter()
            .map(|g| g.standard_error.powi(2).max(1e-12))
            .collect();
        let b: Vec<f64> = self.groups.iter().map(|g| g.mean_residual).collect();
        let at = |t2: f64| {
            let w: Vec<f64> = s2.iter().map(|s| 1.0 / (s + t2)).collect();
            let sw: f64 = w.iter().sum();
            let mu = w.iter().zip(&b).map(|(w, b)| w * b).sum::<f64>() / sw;
            (w, sw, mu)
        };
        if self.groups.len() < MIN_GROUPS {
            // Equal weights on the quantiles of χ²_{G−1}: the group means' variance
            // (G − 1)·S_b²/χ² at each, as τ² (their own errors left in: it errs wide).
            let dof = self.groups.len() - 1;
            let spread = sample_variance(&b).max(1e-12);
            let points = (0..GRID)
                .map(|k| {
                    let chi = chi_square_quantile((k as f64 + 0.5) / GRID as f64, dof);
                    let t2 = dof as f64 * spread / chi.max(1e-300);
                    let (_, sw, mu) = at(t2);
                    (1.0 / GRID as f64, t2, mu, 1.0 / sw)
                })
                .collect();
            return Posterior {
                points,
                pooled: false,
            };
        }
        let top = self
            .spread
            .sqrt()
            .max(s2.iter().cloned().fold(0.0, f64::max).sqrt());
        let tau_max = 4.0 * top.max(1e-6);
        let mut points: Vec<(f64, f64, f64, f64)> = (0..GRID)
            .map(|k| {
                let tau = tau_max * (k as f64 + 0.5) / GRID as f64;
                let t2 = tau * tau;
                let (w, sw, mu) = at(t2);
                let log_l = 0.5 * w.iter().map(|w| w.ln()).sum::<f64>()
                    - 0.5 * sw.ln()
                    - 0.5
                        * w.iter()
                            .zip(&b)
                            .map(|(w, b)| w * (b - mu).powi(2))
                            .sum::<f64>();
                (log_l, t2, mu, 1.0 / sw)
            })
            .collect();
        let top = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = points.iter().map(|p| (p.0 - top).exp()).sum();
        for p in &mut points {
            p.0 = (p.0 - top).exp() / total;
        }
        points.retain(|p| p.0 > 1e-9);
        Posterior {
            points,
            pooled: true,
        }
    }

    fn find(&self, group: Option<&str>) -> Option<(usize, &GroupResidual)> {
        let g = group?;
        self.groups.iter().enumerate().find(|(_, x)| x.group == g)
    }

    /// Whether the anchors name `group` (a run of any other is answered as a new system).
    pub fn knows(&self, group: &str) -> bool {
        self.find(Some(group)).is_some()
    }

    /// The bias of a run of `group` (a new one where `None` or unknown).
    pub fn shift(&self, group: Option<&str>) -> BiasShift {
        self.contrast_of(group, None, false)
    }

    /// The bias of run A less run B's.
    pub fn contrast(&self, a: Option<&str>, b: Option<&str>) -> BiasShift {
        if let (Some(x), Some(y)) = (a, b)
            && x == y
        {
            // One system in both runs: its bias cancels.
            return BiasShift::fixed(self.shift(a).term);
        }
        self.contrast_of(a, b, true)
    }

    /// A's bias, less B's where `against`.
    fn contrast_of(&self, a: Option<&str>, b: Option<&str>, against: bool) -> BiasShift {
        let (ka, kb) = (self.find(a), self.find(b));
        let term = if ka.is_none() || (against && kb.is_none()) {
            GroupTerm::New
        } else {
            GroupTerm::Known
        };
        let post = self.posterior();
        let components = post
            .points
            .iter()
            .map(|&(w, t2, mu, v_mu)| {
                let (ca, ma, va) = side(ka.map(|k| k.1), t2, post.pooled);
                let (cb, mb, vb) = if against {
                    side(kb.map(|k| k.1), t2, post.pooled)
                } else {
                    (0.0, 0.0, 0.0)
                };
                let c = ca - cb;
                (w, c * mu + ma - mb, va + vb + c * c * v_mu)
            })
            .collect();
        BiasShift { components, term }
    }

    /// The weight each group's mean residual b̂_g has in the shift of a run of `group`
    /// ([`shift`]), one per group in `groups`' order, averaged over τ's posterior: a known
    /// group's shift is B_g·b̂_g + (1 − B_g)·μ̂_τ, a new one's μ̂_τ, and μ̂_τ = Σ w_h·b̂_h / Σ w.
    /// Two versions of a judge measure their groups on the same items, so their b̂_g's errors
    /// are correlated: these weights carry that correlation into the answers' difference
    /// (`runlevel::compare_correlated`).
    ///
    /// [`shift`]: Self::shift
    pub fn weights(&self, group: Option<&str>) -> Vec<f64> {
        let mut out = vec![0.0; self.groups.len()];
        let own = self.find(group);
        let post = self.posterior();
        for &(p, t2, _, v_mu) in &post.points {
            // The run's coefficient on μ̂_τ (1 − B_g, or 1 for a new group), as in its shift.
            let (on_mu, _, _) = side(own.map(|k| k.1), t2, post.pooled);
            // v_mu = 1/Σw: w_h·v_mu is group h's weight in μ̂_τ.
            for (w, g) in out.iter_mut().zip(&self.groups) {
                *w += p * on_mu * v_mu / (g.standard_error.powi(2).max(1e-12) + t2);
            }
            if let Some((i, _)) = own {
                out[i] += p * (1.0 - on_mu);
            }
        }
        out
    }

    /// Joint draws of the errors the bias shifts leave in several runs' answers, `draws` rows
    /// of one value per run of `runs` (the run's shift less its drawn bias): each draw takes
    /// one τ from its posterior and one μ, which every run shares, then each group's own
    /// deviation given them. Runs that name one group share its draw (their difference
    /// cancels it, as in [`contrast`](Self::contrast)); runs that name none each draw their own.
    pub fn joint_errors(
        &self,
        runs: &[Option<&str>],
        draws: usize,
        rng: &mut crate::rng::Rng,
    ) -> Vec<Vec<f64>> {
        use crate::rng::RngExt;
        let post = self.posterior();
        let shifts: Vec<f64> = runs.iter().map(|g| self.shift(*g).shift()).collect();
        // Each run's draw: the index of the group it shares one with.
        let mut keys: Vec<Option<&str>> = Vec::new();
        let slot: Vec<usize> = runs
            .iter()
            .map(
                |g| match g.and_then(|g| keys.iter().position(|k| *k == Some(g))) {
                    Some(i) => i,
                    None => {
                        keys.push(*g);
                        keys.len() - 1
                    }
                },
            )
            .collect();
        let known: Vec<Option<&GroupResidual>> =
            keys.iter().map(|k| self.find(*k).map(|f| f.1)).collect();
        let mut cumulative = Vec::with_capacity(post.points.len());
        let mut total = 0.0;
        for p in &post.points {
            total += p.0;
            cumulative.push(total);
        }
        let mut bias = vec![0.0; keys.len()];
        (0..draws)
            .map(|_| {
                let u = rng.random::<f64>() * total;
                let at = cumulative
                    .partition_point(|&c| c < u)
                    .min(post.points.len() - 1);
                let (_, t2, mu, v_mu) = post.points[at];
                let m = mu + v_mu.sqrt() * standard_normal(rng);
                for (b, g) in bias.iter_mut().zip(&known) {
                    let (c, rest, v) = side(*g, t2, post.pooled);
                    *b = c * m + rest + v.max(0.0).sqrt() * standard_normal(rng);
                }
                slot.iter()
                    .zip(&shifts)
                    .map(|(&s, shift)| shift - bias[s])
                    .collect()
            })
            .collect()
    }
}

/// A run's bias given μ and τ² = `t2`, as (coefficient on μ, mean of the rest, variance of
/// the rest): a known group's shrunk toward μ where `pooled` (its own mean otherwise), a new
/// one's a fresh draw around it.
fn side(group: Option<&GroupResidual>, t2: f64, pooled: bool) -> (f64, f64, f64) {
    match group {
        Some(g) => {
            let s2 = g.standard_error.powi(2);
            let shrink = if !pooled || g.outlying {
                1.0
            } else if t2 + s2 > 0.0 {
                t2 / (t2 + s2)
            } else {
                0.0
            };
            (1.0 - shrink, shrink * g.mean_residual, shrink * s2)
        }
        None => (1.0, 0.0, t2),
    }
}

#[cfg(test)]
mod tests {
    use crate::rng::Rng;
    use crate::rng::SeedableRng;

    use super::*;

    /// `k` groups of `n` residuals: bias u_g ~ N(0, tau²), noise sd `sd`; the biases too.
    fn draw(rng: &mut Rng, k: usize, n: usize, tau: f64, sd: f64) -> (GroupBias, Vec<f64>) {
        let us: Vec<f64> = (0..k).map(|_| tau * standard_normal(rng)).collect();
        let mut r = Vec::new();
        let mut g = Vec::new();
        for (i, u) in us.iter().enumerate() {
            for _ in 0..n {
                r.push(u + sd * standard_normal(rng));
                g.push(format!("g{i}"));
            }
        }
        let names: Vec<Option<&str>> = g.iter().map(|s| Some(s.as_str())).collect();
        (GroupBias::of(&r, &names).unwrap(), us)
    }

    fn covers(s: &BiasShift, truth: f64) -> bool {
        (s.quantile(0.025, 0.0)..=s.quantile(0.975, 0.0)).contains(&truth)
    }

    #[test]
    fn paule_mandel_recovers_a_known_between_group_spread() {
        // 40 groups of 200 residuals, τ = 0.3, noise sd 1 (s_g = 0.07): the estimate of τ
        // over 50 draws averages within 0.03 of 0.3; with τ = 0 it is often exactly 0.
        let mut rng = Rng::seed_from_u64(1);
        let tau: Vec<f64> = (0..50)
            .map(|_| draw(&mut rng, 40, 200, 0.3, 1.0).0.tau)
            .collect();
        let m = mean(&tau);
        assert!((m - 0.3).abs() < 0.03, "mean τ̂ {m}");
        let zeros = (0..50)
            .filter(|_| draw(&mut rng, 40, 200, 0.0, 1.0).0.tau == 0.0)
            .count();
        assert!(zeros >= 20, "{zeros} of 50 exactly 0");
    }

    /// Over `reps` draws of `k` groups of `n` anchors (noise sd 0.8): how often a new group's
    /// 95% interval covers its fresh bias, and a known group's its own (group 0's), less the
    /// corrector's level error every residual shares (μ̂ absorbs it: here it is 0).
    fn coverage(k: usize, n: usize, tau: f64, reps: usize, seed: u64) -> (f64, f64) {
        let mut rng = Rng::seed_from_u64(seed);
        let (mut new, mut known) = (0, 0);
        for _ in 0..reps {
            let (b, us) = draw(&mut rng, k, n, tau, 0.8);
            let fresh = tau * standard_normal(&mut rng);
            new += usize::from(covers(&b.shift(Some("unseen")), fresh));
            let s = b.shift(Some("g0"));
            assert_eq!(s.term, GroupTerm::Known);
            known += usize::from(covers(&s, us[0]));
        }
        (new as f64 / reps as f64, known as f64 / reps as f64)
    }

    #[test]
    fn a_groups_bias_interval_covers_it() {
        // 8 groups of 60 and 20 of 25 anchors (the grid's), τ ∈ {0.1, 0.3}: 1,000 draws each
        // (binomial sd 0.7 points), 93–98%: the flat prior on τ leans wide, by design, when
        // few groups cannot rule a large τ out. At τ = 0 the truth sits at the posterior's
        // edge and the interval covers it more often: at least 93%.
        for (k, n) in [(8, 60), (20, 25)] {
            for tau in [0.0, 0.1, 0.3] {
                let (new, known) = coverage(k, n, tau, 1000, 7);
                eprintln!(
                    "{k} groups of {n}, τ = {tau}: new group covers {new:.3}, known {known:.3}"
                );
                for c in [new, known] {
                    if tau == 0.0 {
                        assert!(c >= 0.93, "{k} groups, τ = 0: {c}");
                    } else {
                        assert!((0.93..=0.98).contains(&c), "{k} groups, τ = {tau}: {c}");
                    }
                }
            }
        }
    }

    #[test]
    fn few_groups_cover_at_any_spread() {
        // 2, 3 and 4 groups of 60 anchors (s_g = 0.10), τ from 0 to 1.0 (τ/s up to 10), 1,000
        // draws each (binomial sd 0.7 points): a new group, a known one and two known ones'
        // contrast cover 93–97.5% wherever τ is at least 3 s_g, and at least 93% below it,
        // where the rule's t errs wide (the flat prior it replaced: 87–90% at 2 groups).
        let mut rng = Rng::seed_from_u64(11);
        for k in [2, 3, 4] {
            for tau in [0.0, 0.1, 0.3, 1.0] {
                let (mut new, mut known, mut pair) = (0, 0, 0);
                for _ in 0..1000 {
                    let (b, us) = draw(&mut rng, k, 60, tau, 0.8);
                    assert_eq!(b.rule, "conservative");
                    new += usize::from(covers(
                        &b.shift(Some("unseen")),
                        tau * standard_normal(&mut rng),
                    ));
                    known += usize::from(covers(&b.shift(Some("g0")), us[0]));
                    pair += usize::from(covers(&b.contrast(Some("g0"), Some("g1")), us[0] - us[1]));
                }
                let rates = [new, known, pair].map(|c| c as f64 / 1000.0);
                eprintln!("{k} groups, τ = {tau}: new, known, contrast cover {rates:?}");
                for c in rates {
                    assert!(c >= 0.93, "{k} groups, τ = {tau}: {rates:?}");
                    if tau >= 0.3 {
                        assert!(c <= 0.975, "{k} groups, τ = {tau}: {rates:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn two_groups_give_a_new_one_a_t_on_one_degree_of_freedom() {
        // Group means 0 and 1 with negligible errors: S_b² = 1/2, and a new group's bias is
        // 0.5 + t₁·√(S_b²·(1 + 1/2)), whose 97.5% point is 0.5 + 12.706·0.866 = 11.50.
        let residuals: Vec<f64> = (0..400).map(|i| f64::from(u8::from(i >= 200))).collect();
        let groups: Vec<Option<&str>> = (0..400)
            .map(|i| Some(if i < 200 { "a" } else { "b" }))
            .collect();
        let b = GroupBias::of(&residuals, &groups).unwrap();
        let q = b.shift(None).quantile(0.975, 0.0);
        assert!((q - 11.50).abs() < 0.3, "97.5% point {q}");
        // χ² on 3 degrees of freedom at 0.95 is 7.8147.
        assert!((chi_square_quantile(0.95, 3) - 7.8147).abs() < 1e-3);
    }

    #[test]
    fn the_same_group_on_both_sides_cancels_and_few_groups_are_named() {
        let mut rng = Rng::seed_from_u64(3);
        let (b, _) = draw(&mut rng, 3, 50, 0.3, 0.8);
        assert_eq!(b.rule, "conservative");
        let same = b.contrast(Some("g1"), Some("g1"));
        assert_eq!((same.shift(), same.variance()), (0.0, 0.0));
        // Two new groups: their means cancel, their draws do not.
        let two = b.contrast(None, Some("other"));
        assert!(two.shift().abs() < 1e-12 && two.variance() > 0.0);
        assert!(GroupBias::of(&[1.0, 2.0], &[Some("a"), Some("a")]).is_none());
        // A mixture of one point mass is that point.
        assert!(BiasShift::none().quantile(0.975, 0.0).abs() < 1e-9);
    }

    /// 12 groups of `n` residuals, bias u_g ~ N(0, 0.3²) with group 0's set to `first`
    /// (`None`: drawn too), noise sd 0.8 but `first_sd` in group 0.
    fn twelve(rng: &mut Rng, n: usize, first: Option<f64>, first_sd: f64) -> (GroupBias, f64) {
        let mut us: Vec<f64> = (0..12).map(|_| 0.3 * standard_normal(rng)).collect();
        if let Some(u) = first {
            us[0] = u;
        }
        let (mut r, mut g) = (Vec::new(), Vec::new());
        for (i, u) in us.iter().enumerate() {
            let sd = if i == 0 { first_sd } else { 0.8 };
            for _ in 0..n {
                r.push(u + sd * standard_normal(rng));
                g.push(format!("g{i}"));
            }
        }
        let names: Vec<Option<&str>> = g.iter().map(|s| Some(s.as_str())).collect();
        (GroupBias::of(&r, &names).unwrap(), us[0])
    }

    #[test]
    fn a_group_noisier_than_the_rest_is_measured_by_its_own_noise() {
        // Group 0's residual sd is 1.6 against the others' 0.8 (50 anchors each): the pooled
        // variance, (11·0.64 + 2.56)/12 = 0.80, is under a third of its own (2.56), and put
        // its known interval at z ≈ 1.96/1.79 (73%). Its own, moderated ((10·0.80 + 49·2.56)/59
        // = 2.26, still pulled a little toward the pool: z ≈ 1.96·√(2.26/2.56), 93%), brings it
        // to 92–97% over 1,000 draws (binomial sd 0.8 points; measured 92.7%); a run of it is
        // 2.8 times noisier than the pooled variance says.
        let mut rng = Rng::seed_from_u64(5);
        let mut covered = 0;
        let mut ratio = 0.0;
        for _ in 0..1000 {
            let (b, u0) = twelve(&mut rng, 50, None, 1.6);
            covered += usize::from(covers(&b.shift(Some("g0")), u0));
            ratio += b.noise_ratio(Some("g0")) / 1000.0;
            assert_eq!(b.noise_ratio(Some("unseen")), 1.0);
        }
        let rate = covered as f64 / 1000.0;
        eprintln!("a noisy group's own bias covered {rate:.3}, noise ratio {ratio:.2}");
        assert!((0.92..=0.97).contains(&rate), "{rate}");
        assert!((2.6..=3.1).contains(&ratio), "{ratio}");
    }

    #[test]
    fn a_group_far_from_the_others_is_flagged_and_kept_unshrunk() {
        // 12 groups of 50 (s_g = 0.11), τ = 0.3, 1,000 draws each (binomial sd 0.7 points):
        // with normal biases some group is flagged in at most 7% of draws (OUTLIER_ALPHA is
        // 5%: τ̂ from 11 groups makes it approximate); with group 0 at 6 τ it is flagged in
        // at least 95%, and then its interval, unshrunk, covers it 93–97%.
        let mut rng = Rng::seed_from_u64(9);
        let (mut normal, mut far, mut covered) = (0, 0, 0);
        for _ in 0..1000 {
            let (b, _) = twelve(&mut rng, 50, None, 0.8);
            normal += usize::from(!b.outlying().is_empty());
            let (b, u0) = twelve(&mut rng, 50, Some(1.8), 0.8);
            far += usize::from(b.outlying() == ["g0"]);
            covered += usize::from(covers(&b.shift(Some("g0")), u0));
        }
        let [normal, far, covered] = [normal, far, covered].map(|c| c as f64 / 1000.0);
        eprintln!("flagged: normal biases {normal:.3}, one at 6 τ {far:.3} (covered {covered:.3})");
        assert!(normal <= 0.07, "{normal}");
        assert!(far >= 0.95, "{far}");
        assert!((0.93..=0.97).contains(&covered), "{covered}");
    }
}
