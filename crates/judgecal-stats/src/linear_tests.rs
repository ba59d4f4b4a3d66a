//! Tests of the multi-input linear model: its conjugate posterior, its gradient against finite
//! differences, its integrated densities against quadrature, and the line (`U2`) as the same
//! model as one sized at run time.

use nalgebra::Vector2;

use super::*;
use crate::bayes::{LineModel, Priors, SufficientStats};
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
fn the_line_is_the_one_input_case_sized_at_run_time_pooled_or_not() {
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
    for rubrics in [3, 1] {
        let data = &data[..rubrics];
        let line = LineModel::line(
            data.iter()
                .map(|d| SufficientStats::from_pairs(d.iter().map(|(js, y)| (js[0], *y))))
                .collect(),
            priors,
        );
        let sized = StackModel::new(
            data.iter().map(|d| stats_of(1, d)).collect(),
            priors.stacked(),
        );
        let dim = Target::dim(&line);
        assert_eq!(dim, Target::dim(&sized));
        assert_eq!(dim, 2 + rubrics);
        for _ in 0..20 {
            let x: Vec<f64> = (0..dim).map(|_| rng.random_range(-2.0..1.0)).collect();
            let (mut g1, mut g2) = (vec![0.0; dim], vec![0.0; dim]);
            let l1 = Target::logp(&line, &x, &mut g1);
            let l2 = Target::logp(&sized, &x, &mut g2);
            assert!((l1 - l2).abs() < 1e-8 * l1.abs().max(1.0), "{l1} vs {l2}");
            for (a, b) in g1.iter().zip(&g2) {
                assert!((a - b).abs() < 1e-7 * a.abs().max(1.0), "{g1:?} vs {g2:?}");
            }
            for (a, b) in line.params(&x).iter().zip(&sized.params(&x)) {
                assert!(
                    (a.mean[0] - b.mean[0]).abs() < 1e-8 && (a.mean[1] - b.mean[1]).abs() < 1e-8
                );
                assert!((a.cov[(1, 1)] - b.cov[(1, 1)]).abs() < 1e-10);
                assert!((a.cov[(0, 1)] - b.cov[(0, 1)]).abs() < 1e-10);
            }
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
            let numeric =
                (at(i, -2.0 * h) - 8.0 * at(i, -h) + 8.0 * at(i, h) - at(i, 2.0 * h)) / (12.0 * h);
            assert!(
                (numeric - analytic).abs() < 1e-5 * numeric.abs().max(1.0),
                "coordinate {i}: numeric {numeric}, analytic {analytic}"
            );
        }
    }
}

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
fn check_gradient(model: &LineModel, x: &[f64]) {
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
    let single = LineModel::line(vec![stats(1, 200, 1.1, 0.85)], Priors::default());
    assert_eq!(single.dim(), 3);
    check_gradient(&single, &[0.9, 0.8, -0.6]);
    let x = [0.9, 0.8, -0.6];
    let back = single.sampler_coordinates(&single.natural(&x));
    assert!(x.iter().zip(&back).all(|(a, b)| (a - b).abs() < 1e-12));
    // A rich rubric, a sparse one, a middling one, an empty one; tiny to large τ.
    let pooled = LineModel::line(
        vec![
            stats(2, 150, 1.0, 0.9),
            stats(3, 5, 0.5, 1.1),
            stats(4, 60, 1.4, 0.7),
            SufficientStats::from_pairs([]),
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
/// the hyperparameters fixed. With one rubric the model's density is this integral at the
/// priors' means and sds, plus σ's prior.
#[test]
fn the_integrated_likelihood_is_the_integral_of_the_joint_one() {
    let s = stats(5, 12, 0.9, 0.8);
    let (mu, log_tau, log_sigma) = ([0.7, 0.9], [-1.0_f64, -1.5_f64], -0.9_f64);
    let tau = [log_tau[0].exp(), log_tau[1].exp()];
    let m = s.marginal(&Vector2::new(mu[0], mu[1]), &log_tau, log_sigma);
    // ∫∫ exp(loglik(α, β)) N(α | μ_α, τ_α²) N(β | μ_β, τ_β²) dα dβ by the midpoint rule
    // over ±7 prior sd; the integrand is smooth, so 400² points give ~1e-6 relative error.
    let steps = 400;
    let mut total = 0.0;
    for i in 0..steps {
        for k in 0..steps {
            let za = -7.0 + 14.0 * (i as f64 + 0.5) / steps as f64;
            let zb = -7.0 + 14.0 * (k as f64 + 0.5) / steps as f64;
            let ll = s.loglik(mu[0] + tau[0] * za, mu[1] + tau[1] * zb, log_sigma);
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
    let model = LineModel::line(vec![stats(6, 8, 0.9, 0.8), stats(7, 10, 1.2, 0.7)], priors);
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
            let mu = Vector2::new(
                priors.alpha_mean + priors.alpha_sd * za,
                priors.beta_mean + priors.beta_sd * zb,
            );
            let lik: f64 = model
                .stats
                .iter()
                .enumerate()
                .map(|(r, s)| s.marginal(&mu, &x[..2], x[2 + r]).lp)
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
            if i < 2 {
                half_normal_log(u, priors.tau_scale).0
            } else {
                sigma_prior_log(u, priors.sigma_scale).0
            }
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
    let ll = s.loglik(a, b, sigma.ln());
    assert!(
        (ll - direct).abs() < 1e-9 * direct.abs(),
        "{ll} vs {direct}"
    );
}
