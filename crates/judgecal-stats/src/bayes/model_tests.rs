//! Tests of the model: the gradient against finite differences, the integrated density
//! against quadrature, and the coordinate transforms.

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
    // A rich rubric, a sparse one, a middling one, an empty one; tiny to large τ.
    let pooled = Model::new(
        vec![
            stats(2, 150, 1.0, 0.9),
            stats(3, 5, 0.5, 1.1),
            stats(4, 60, 1.4, 0.7),
            SufficientStats::default(),
        ],
        Priors::default(),
    );
    assert_eq!(pooled.dim(), 6);
    for (z_a, z_b) in [(0.02, -0.05), (0.4, 0.6), (2.0, -2.7)] {
        let x = [z_a, z_b, -0.9, -0.5, -1.1, 0.1];
        check_gradient(&pooled, &x);
        let back = pooled.sampler_coordinates(&pooled.natural(&x));
        assert!(
            x.iter()
                .zip(&back)
                .all(|(a, b)| (a.abs() - b.abs()).abs() < 1e-12)
        );
    }
}

/// The collapsed density is the non-centred joint density with α and β integrated out:
/// check it against a numerical integral over (α, β) on a fine grid, for one rubric with
/// the hyperparameters fixed.
#[test]
fn the_integrated_likelihood_is_the_integral_of_the_joint_one() {
    let s = stats(5, 12, 0.9, 0.8);
    let (mu, log_tau, log_sigma) = ([0.7, 0.9], [-1.0_f64, -1.5_f64], -0.9_f64);
    let tau = [log_tau[0].exp(), log_tau[1].exp()];
    let m = s.marginal(mu, log_tau, log_sigma);
    // ∫∫ exp(loglik(α, β)) N(α | μ_α, τ_α²) N(β | μ_β, τ_β²) dα dβ by the midpoint rule
    // over ±7 prior sd; the integrand is smooth, so 400² points give ~1e-6 relative error.
    let steps = 400;
    let mut total = 0.0;
    for i in 0..steps {
        for k in 0..steps {
            let za = -7.0 + 14.0 * (i as f64 + 0.5) / steps as f64;
            let zb = -7.0 + 14.0 * (k as f64 + 0.5) / steps as f64;
            let (ll, _) = s.loglik(mu[0] + tau[0] * za, mu[1] + tau[1] * zb, log_sigma);
            let prior = (-0.5 * (za * za + zb * zb)).exp() / (2.0 * std::f64::consts::PI);
            total += ll.exp() * prior * (14.0 / steps as f64).powi(2);
        }
    }
    assert!(
        (m.lp - total.ln()).abs() < 1e-5,
        "closed form {} vs quadrature {}",
        m.lp,
        total.ln()
    );
}

/// Integrating μ out as well: the collapsed density of two rubrics equals a numerical
/// integral over (μ_α, μ_β) of the per-rubric integrated likelihoods times μ's prior.
#[test]
fn the_collapsed_density_is_the_integral_over_the_population_means() {
    let priors = Priors::default();
    let model = Model::new(vec![stats(6, 8, 0.9, 0.8), stats(7, 10, 1.2, 0.7)], priors);
    let x = [-0.5, -1.0, -0.8, -0.7];
    let collapsed = model.collapsed(&x).lp;
    // Midpoint rule over ±8 prior sd of μ: 600² points.
    let steps = 600;
    let width = 16.0 / steps as f64;
    let mut total = 0.0;
    for i in 0..steps {
        for k in 0..steps {
            let za = -8.0 + width * (i as f64 + 0.5);
            let zb = -8.0 + width * (k as f64 + 0.5);
            let mu = [
                priors.alpha_mean + priors.alpha_sd * za,
                priors.beta_mean + priors.beta_sd * zb,
            ];
            let lik: f64 = model
                .stats
                .iter()
                .enumerate()
                .map(|(r, s)| s.marginal(mu, [x[0], x[1]], x[2 + r]).lp)
                .sum();
            // exp(−½(μ−m)ᵀS⁻¹(μ−m)) dμ in z units (dμ = sd_α·sd_β·dz).
            total += (lik - 0.5 * (za * za + zb * zb)).exp()
                * width
                * width
                * priors.alpha_sd
                * priors.beta_sd;
        }
    }
    // The collapsed density also carries the log σ and log τ priors; add them here.
    let scales: f64 = x
        .iter()
        .enumerate()
        .map(|(i, &u)| {
            half_normal_log(
                u,
                if i < 2 {
                    priors.tau_scale
                } else {
                    priors.sigma_scale
                },
            )
            .0
        })
        .sum();
    // The collapsed density keeps S's quadratic form but drops the 2π of ∫dμ.
    let expected = total.ln() - (2.0 * std::f64::consts::PI).ln() + scales;
    assert!(
        (collapsed - expected).abs() < 1e-5,
        "collapsed {collapsed} vs quadrature {expected}"
    );
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
