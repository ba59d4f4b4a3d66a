//! Convergence diagnostics of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021),
//! "Rank-normalization, folding, and localization: an improved R̂": rank-normalised split-R̂
//! (the larger of the bulk and folded values), bulk ESS and tail ESS. No maintained crate
//! computes them (see ../shared/NOTES.md), so they are written here, following the paper and
//! Stan's reference implementation (`posterior::rhat`, `ess_bulk`, `ess_tail`).

/// The standard normal CDF, from the complementary error function's Chebyshev fit
/// (Numerical Recipes' `erfcc`; relative error below 1.2e-7 everywhere).
pub fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - 0.5 * erfc
    } else {
        0.5 * erfc
    }
}

/// Inverse of the standard normal CDF (Acklam's rational approximation, relative error below
/// 1.2e-9): enough for rank normalisation, where only the ordering of scores matters up to
/// smooth distortion.
#[allow(clippy::excessive_precision)] // The published coefficients, as published.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383577518672690e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p <= 0.0 {
        f64::NEG_INFINITY
    } else if p >= 1.0 {
        f64::INFINITY
    } else if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

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

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
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

/// The p-quantile by linear interpolation between order statistics (type 7, as R and NumPy).
pub fn quantile(xs: &[f64], p: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let h = (v.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
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
    fn the_normal_cdf_inverts_the_quantile() {
        for p in [0.001, 0.025, 0.3, 0.5, 0.9, 0.975, 0.999] {
            assert!((normal_cdf(normal_quantile(p)) - p).abs() < 1e-6, "{p}");
        }
        // Φ(1) from tables: 0.841344746.
        assert!((normal_cdf(1.0) - 0.841_344_746).abs() < 1e-7);
    }

    #[test]
    fn normal_quantile_matches_known_values() {
        // Reference values from the standard normal table.
        assert!((normal_quantile(0.975) - 1.959963985).abs() < 1e-8);
        assert!((normal_quantile(0.5)).abs() < 1e-12);
        assert!((normal_quantile(0.001) + 3.090232306).abs() < 1e-8);
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

    #[test]
    fn quantile_interpolates_like_numpy() {
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.25), 1.75);
    }
}
