//! Convergence diagnostics of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021),
//! "Rank-normalization, folding, and localization: an improved R̂": rank-normalised split-R̂
//! (the larger of the bulk and folded values), bulk ESS and tail ESS. No maintained crate
//! computes them (see ../shared/NOTES.md), so they are written here, following the paper and
//! Stan's reference implementation (`posterior::rhat`, `ess_bulk`, `ess_tail`).

use crate::stats::{mean, normal_quantile, quantile};

/// Each chain cut into its two halves (the "split" of split-R̂).
fn split(chains: &[Vec<f64>]) -> Vec<Vec<f64>> {
    chains
        .iter()
        .flat_map(|c| {
            let half = c.len() / 2;
            // An odd middle draw is dropped, as in Stan.
            [c[..half].to_vec(), c[c.len() - half..].to_vec()]
        })
        .collect()
}

/// Replaces every draw by the normal score of its pooled rank (ties get their average rank).
fn rank_normalise(chains: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let mut all: Vec<(f64, usize, usize)> = chains
        .iter()
        .enumerate()
        .flat_map(|(c, xs)| xs.iter().enumerate().map(move |(i, &x)| (x, c, i)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let s = all.len() as f64;
    let mut out: Vec<Vec<f64>> = chains.iter().map(|c| vec![0.0; c.len()]).collect();
    let mut i = 0;
    while i < all.len() {
        let mut k = i;
        while k + 1 < all.len() && all[k + 1].0 == all[i].0 {
            k += 1;
        }
        let rank = (i + k) as f64 / 2.0 + 1.0;
        let z = normal_quantile((rank - 0.375) / (s + 0.25));
        for &(_, c, idx) in &all[i..=k] {
            out[c][idx] = z;
        }
        i = k + 1;
    }
    out
}

fn var(xs: &[f64]) -> f64 {
    let m = mean(xs);
    xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() as f64 - 1.0)
}

/// Classic R̂ of (already split) chains.
fn rhat_basic(chains: &[Vec<f64>]) -> f64 {
    let n = chains[0].len() as f64;
    let w = mean(&chains.iter().map(|c| var(c)).collect::<Vec<_>>());
    let b_over_n = var(&chains.iter().map(|c| mean(c)).collect::<Vec<_>>());
    if w <= 0.0 {
        return if b_over_n <= 0.0 { 1.0 } else { f64::INFINITY };
    }
    (((n - 1.0) / n * w + b_over_n) / w).sqrt()
}

/// Autocovariance of one chain at `lag` (biased estimator, as in Stan).
fn autocov(c: &[f64], m: f64, lag: usize) -> f64 {
    let n = c.len();
    (0..n - lag)
        .map(|i| (c[i] - m) * (c[i + lag] - m))
        .sum::<f64>()
        / n as f64
}

/// ESS of (already split) chains by Geyer's initial monotone sequence.
fn ess_basic(chains: &[Vec<f64>]) -> f64 {
    let m_chains = chains.len() as f64;
    let n = chains[0].len();
    let means: Vec<f64> = chains.iter().map(|c| mean(c)).collect();
    let vars: Vec<f64> = chains
        .iter()
        .zip(&means)
        .map(|(c, &m)| autocov(c, m, 0) * n as f64 / (n as f64 - 1.0))
        .collect();
    let w = mean(&vars);
    let b_over_n = if chains.len() > 1 { var(&means) } else { 0.0 };
    let var_plus = (n as f64 - 1.0) / n as f64 * w + b_over_n;
    if var_plus <= 0.0 || !var_plus.is_finite() {
        return m_chains * n as f64;
    }
    let rho = |lag: usize| {
        let acov = mean(
            &chains
                .iter()
                .zip(&means)
                .map(|(c, &m)| autocov(c, m, lag))
                .collect::<Vec<_>>(),
        );
        // Stan's form: 1 − (W − mean autocovariance) / var⁺, with W on the biased scale.
        let w_biased = w * (n as f64 - 1.0) / n as f64;
        1.0 - (w_biased - acov) / var_plus
    };
    // Sum pairs Γ_k = ρ_2k + ρ_2k+1 while positive, made monotone non-increasing.
    let mut tau = -1.0;
    let mut prev = f64::INFINITY;
    let mut lag = 0;
    while lag + 1 < n {
        let mut pair = rho(lag) + rho(lag + 1);
        if pair < 0.0 {
            break;
        }
        pair = pair.min(prev);
        prev = pair;
        tau += 2.0 * pair;
        lag += 2;
    }
    let total = m_chains * n as f64;
    // Antithetic chains can make τ tiny; cap at S·log10(S) as Stan does.
    total / tau.max(1.0 / total.log10())
}

/// What the fit reports per quantity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Convergence {
    /// max(bulk R̂, folded R̂), both rank-normalised and split.
    pub rhat: f64,
    pub ess_bulk: f64,
    pub ess_tail: f64,
}

/// The diagnostics of one quantity, from its draws per chain (warm-up excluded).
pub fn convergence(chains: &[Vec<f64>]) -> Convergence {
    let split = split(chains);
    let bulk = rank_normalise(&split);
    let all: Vec<f64> = chains.iter().flatten().copied().collect();
    let median = quantile(&all, 0.5);
    let folded: Vec<Vec<f64>> = split
        .iter()
        .map(|c| c.iter().map(|x| (x - median).abs()).collect())
        .collect();
    let rhat = rhat_basic(&bulk).max(rhat_basic(&rank_normalise(&folded)));
    let ess_bulk = ess_basic(&bulk);
    let tail = [0.05, 0.95]
        .iter()
        .map(|&p| {
            let q = quantile(&all, p);
            let ind: Vec<Vec<f64>> = split
                .iter()
                .map(|c| c.iter().map(|&x| f64::from(u8::from(x <= q))).collect())
                .collect();
            ess_basic(&ind)
        })
        .fold(f64::INFINITY, f64::min);
    Convergence {
        rhat,
        ess_bulk,
        ess_tail: tail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic AR(1) chain x_t = φ x_{t-1} + e_t, e_t approximately N(0, 1) (the sum of
    /// 12 uniforms from a 64-bit LCG, minus 6).
    fn ar1(phi: f64, n: usize, seed: u64, shift: f64) -> Vec<f64> {
        let mut state = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut uniform = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut x = 0.0;
        (0..n)
            .map(|_| {
                let e = (0..12).map(|_| uniform()).sum::<f64>() - 6.0;
                x = phi * x + e;
                x + shift
            })
            .collect()
    }

    #[test]
    fn independent_draws_have_rhat_one_and_full_ess() {
        let chains = vec![ar1(0.0, 1000, 1, 0.0), ar1(0.0, 1000, 2, 0.0)];
        let c = convergence(&chains);
        assert!(c.rhat < 1.01, "{c:?}");
        // ESS of 2,000 independent draws: within sampling error of 2,000.
        assert!((1500.0..2600.0).contains(&c.ess_bulk), "{c:?}");
    }

    #[test]
    fn autocorrelation_shrinks_ess_by_the_known_factor() {
        // For AR(1) the ESS is S·(1−φ)/(1+φ): φ = 0.8 gives S/9.
        let chains: Vec<Vec<f64>> = (0..4).map(|s| ar1(0.8, 5000, 10 + s, 0.0)).collect();
        let c = convergence(&chains);
        let expected = 20_000.0 / 9.0;
        assert!(
            (c.ess_bulk / expected - 1.0).abs() < 0.25,
            "{c:?} vs {expected}"
        );
    }

    #[test]
    fn chains_in_different_places_have_large_rhat() {
        let chains = vec![ar1(0.0, 1000, 1, 0.0), ar1(0.0, 1000, 2, 1.0)];
        assert!(convergence(&chains).rhat > 1.1);
    }
}
