//! Small numerical helpers shared by the correctors, the figures and the service: the normal
//! distribution, type-7 quantiles, a seeded standard normal draw and a damped Newton ascent.

use nalgebra::allocator::Allocator;
use nalgebra::{Cholesky, DMatrix, DVector, DefaultAllocator, Dim, OMatrix};

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

/// The p-quantile by linear interpolation between order statistics (type 7, as R and NumPy).
pub fn quantile(xs: &[f64], p: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let h = (v.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

/// The p-quantile of already sorted `xs` (type 7).
pub fn quantile_sorted(xs: &[f64], p: f64) -> f64 {
    let h = p * (xs.len() - 1) as f64;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(xs.len() - 1);
    xs[lo] + (h - lo as f64) * (xs[hi] - xs[lo])
}

/// One standard normal variate (Box–Muller), for the draws both correctors make from their
/// own seeded generators.
pub fn standard_normal(rng: &mut crate::rng::Rng) -> f64 {
    use crate::rng::RngExt;
    let u1: f64 = rng.random::<f64>().max(1e-300);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// The arithmetic mean (NaN for an empty slice).
pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// The arithmetic mean of `values` as they come (NaN where there are none): the same sum, in
/// the same order, as [`mean`] of them collected.
pub fn mean_of(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = values
        .into_iter()
        .fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    sum / n as f64
}

/// The sample variance (n − 1 in the denominator; 0 below two values).
pub fn sample_variance(xs: &[f64]) -> f64 {
    let m = mean(xs);
    xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() as f64 - 1.0).max(1.0)
}

/// The sample covariance of the pairs (n − 1 in the denominator; 0 under 2 pairs).
pub fn covariance(pairs: &[(f64, f64)]) -> f64 {
    let m = pairs.len();
    if m < 2 {
        return 0.0;
    }
    let mx = mean_of(pairs.iter().map(|p| p.0));
    let my = mean_of(pairs.iter().map(|p| p.1));
    pairs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / (m as f64 - 1.0)
}

/// The least-squares line through the pairs (x, y): (intercept, slope); `None` under two pairs
/// or where x does not vary.
pub fn least_squares(pairs: &[(f64, f64)]) -> Option<(f64, f64)> {
    let mx = mean_of(pairs.iter().map(|p| p.0));
    let my = mean_of(pairs.iter().map(|p| p.1));
    let sxx: f64 = pairs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pairs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (pairs.len() >= 2 && sxx > 0.0).then(|| {
        let slope = sxy / sxx;
        (my - slope * mx, slope)
    })
}

/// Each value's rank among `xs`, from 1, ties given their average rank (what a rank
/// correlation correlates).
pub fn average_ranks(xs: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut ranks = vec![0.0; xs.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && xs[order[j + 1]] == xs[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// The finite-population correction of a mean of `m` items drawn without replacement from
/// `n`: 1/m − 1/N, never below 0.
pub fn fpc(m: usize, n: usize) -> f64 {
    (1.0 / m.max(1) as f64 - 1.0 / n.max(1) as f64).max(0.0)
}

/// The PPI++ power-tuned weight λ = cov(f, y) / var(f) of corrected scores `f` against
/// references `y`, over one or more groups of labelled pairs, each centred on its own means
/// (so that what the groups differ by does not count), clamped to [0, 1]. Where `f` does not
/// vary over the labelled items the weight is 0: the labelled side's variance is then the same
/// for every λ, and any λ > 0 only adds the unlabelled side's.
pub fn ppi_lambda<'a>(groups: impl IntoIterator<Item = &'a [(f64, f64)]>) -> f64 {
    let (mut cov, mut var) = (0.0, 0.0);
    for pairs in groups {
        if pairs.len() < 2 {
            continue;
        }
        let mf = mean(&pairs.iter().map(|p| p.0).collect::<Vec<_>>());
        let my = mean(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
        cov += pairs.iter().map(|p| (p.0 - mf) * (p.1 - my)).sum::<f64>();
        var += pairs.iter().map(|p| (p.0 - mf).powi(2)).sum::<f64>();
    }
    if var > 0.0 {
        (cov / var).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// The one Cholesky factorisation of the workspace (nalgebra's): `None` where `m` is not
/// positive definite (a pivot ≤ 0). Every fit, summary and draw factors its matrices here.
pub fn cholesky<D: Dim>(m: OMatrix<f64, D, D>) -> Option<Cholesky<f64, D>>
where
    DefaultAllocator: Allocator<D, D>,
{
    Cholesky::new(m)
}

/// The lower Cholesky factor of the `n`×`n` matrix `m`, both row-major (the runs' joint
/// draws); `None` where `m` is not positive definite.
pub fn cholesky_rows(m: &[f64], n: usize) -> Option<Vec<f64>> {
    let lower = cholesky(DMatrix::from_row_slice(n, n, m))?.unpack();
    // nalgebra stores by column: the transpose's columns are the factor's rows.
    Some(lower.transpose().as_slice().to_vec())
}

/// The quantile of Student's t with `df` degrees of freedom at `p` (> 0.5): closed forms for 1
/// and 2, Newton's method on the exact CDF for 3 and 4, otherwise the Cornish–Fisher expansion
/// P(X ≤ `x`) for X ~ χ² on `dof` degrees of freedom, in closed form: a Poisson sum for even
/// `dof`, the normal's CDF and a finite series for odd.
pub fn chi_square_cdf(x: f64, dof: usize) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if dof.is_multiple_of(2) {
        let (mut term, mut sum) = (1.0, 1.0);
        for i in 1..dof / 2 {
            term *= x / 2.0 / i as f64;
            sum += term;
        }
        (1.0 - (-x / 2.0).exp() * sum).clamp(0.0, 1.0)
    } else {
        let r = x.sqrt();
        let density = (-x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
        let (mut term, mut sum) = (r, 0.0);
        for i in 1..=dof / 2 {
            sum += term;
            term *= x / (2 * i + 1) as f64;
        }
        (2.0 * normal_cdf(r) - 1.0 - 2.0 * density * sum).clamp(0.0, 1.0)
    }
}

/// The quantile of χ² on `dof` degrees of freedom at `p`, by bisection on [`chi_square_cdf`].
pub fn chi_square_quantile(p: f64, dof: usize) -> f64 {
    let dof = dof.max(1);
    let hi = dof as f64 + 20.0 * (dof as f64).sqrt() + 50.0;
    bisect(0.0, hi, 100, |x| chi_square_cdf(x, dof) < p)
}

/// The point where `below` turns false between `lo` and `hi`, by `iterations` halvings
/// (`below` true left of it, false right of it): the midpoint of the last bracket.
pub fn bisect(mut lo: f64, mut hi: f64, iterations: usize, below: impl Fn(f64) -> bool) -> f64 {
    for _ in 0..iterations {
        let mid = 0.5 * (lo + hi);
        if below(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// to the fourth order (within 0.001 at df = 5, and closer as df grows), the normal quantile
/// past 1e6.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if df <= 1.0 {
        return (std::f64::consts::PI * (p - 0.5)).tan();
    }
    if df <= 2.0 {
        return (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt();
    }
    let z = normal_quantile(p);
    if df > 1e6 {
        return z;
    }
    let (z2, v) = (z * z, df);
    if df < 5.0 {
        // CDF and density of t with 3 or 4 degrees of freedom, in closed form.
        let exact = |t: f64| -> (f64, f64) {
            if df < 3.5 {
                let u = 1.0 + t * t / 3.0;
                let cdf =
                    0.5 + (t / (3f64.sqrt() * u) + (t / 3f64.sqrt()).atan()) / std::f64::consts::PI;
                (cdf, 2.0 / (std::f64::consts::PI * 3f64.sqrt() * u * u))
            } else {
                let u = 1.0 + t * t / 4.0;
                let cdf = 0.5 + 0.375 * t / u.sqrt() * (1.0 - t * t / (12.0 * u));
                (cdf, 0.375 * u.powf(-2.5))
            }
        };
        let mut t = z + (z2 + 1.0) * z / (4.0 * v);
        for _ in 0..20 {
            let (cdf, pdf) = exact(t);
            t -= (cdf - p) / pdf;
        }
        return t;
    }
    let g1 = (z2 + 1.0) * z / 4.0;
    let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
    let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
    let g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
    z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v)
}

/// The two-sided p-value of `z` against a t with `df` degrees of freedom (the normal where
/// `None`), by inverting [`t_quantile`].
pub fn two_sided_p(z: f64, df: Option<f64>) -> f64 {
    let z = z.abs();
    match df {
        None => 2.0 * (1.0 - normal_cdf(z)),
        Some(_) if !z.is_finite() => 0.0,
        Some(df) => {
            // t_quantile(p) grows with p: find the p whose quantile is z.
            let hi = 1.0 - 1e-15;
            if t_quantile(hi, df) < z {
                return 2.0 * (1.0 - hi);
            }
            2.0 * (1.0 - bisect(0.5, hi, 80, |p| t_quantile(p, df) < z))
        }
    }
}

/// Where a damped Newton ascent stopped.
#[derive(Debug, Clone)]
pub struct Ascent {
    pub theta: DVector<f64>,
    pub iterations: usize,
    /// A step moved no coordinate more than 1e-10 (else `max_iterations` ran out).
    pub converged: bool,
}

/// The maximum of a concave objective by Newton's method from `start`: each step solves the
/// curvature (the negative Hessian, from `derivatives` with the gradient) by Cholesky, is
/// shortened so that no coordinate moves more than `max_step`, and is halved until `value`
/// does not fall (a short enough step of a concave objective rises; below 1e-8 of it the
/// step is taken anyway). `None` where the curvature is not positive definite.
pub fn newton_ascent(
    start: DVector<f64>,
    max_step: f64,
    max_iterations: usize,
    value: impl Fn(&DVector<f64>) -> f64,
    derivatives: impl Fn(&DVector<f64>) -> (DVector<f64>, DMatrix<f64>),
) -> Option<Ascent> {
    let mut theta = start;
    let mut current = value(&theta);
    for iteration in 1..=max_iterations {
        let (gradient, curvature) = derivatives(&theta);
        let step = cholesky(curvature)?.solve(&gradient);
        let longest = step.amax();
        let mut scale = if longest > max_step {
            max_step / longest
        } else {
            1.0
        };
        let next = loop {
            let next = &theta + &step * scale;
            let v = value(&next);
            if v >= current - 1e-12 || scale < 1e-8 {
                current = v;
                break next;
            }
            scale /= 2.0;
        };
        theta = next;
        if scale * longest < 1e-10 {
            return Some(Ascent {
                theta,
                iterations: iteration,
                converged: true,
            });
        }
    }
    Some(Ascent {
        theta,
        iterations: max_iterations,
        converged: false,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn ties_share_their_average_rank() {
        assert_eq!(
            super::average_ranks(&[3.0, 1.0, 3.0, 2.0, 5.0]),
            vec![3.5, 1.0, 3.5, 2.0, 5.0]
        );
        assert!(super::average_ranks(&[]).is_empty());
    }

    use super::*;

    #[test]
    fn cholesky_factors_a_known_matrix_and_refuses_an_indefinite_one() {
        // [[4, 2], [2, 5]] = L·Lᵀ with L = [[2, 0], [1, 2]].
        let l = cholesky_rows(&[4.0, 2.0, 2.0, 5.0], 2).unwrap();
        assert_eq!(l, vec![2.0, 0.0, 1.0, 2.0]);
        assert!(cholesky_rows(&[1.0, 2.0, 2.0, 1.0], 2).is_none());
        // Semidefinite: a zero pivot is refused too.
        assert!(cholesky_rows(&[1.0, 1.0, 1.0, 1.0], 2).is_none());
    }

    #[test]
    fn the_ppi_weight_is_the_centred_slope_and_zero_where_the_corrector_is_flat() {
        // y = 0.5·f + group offset: centring each group on its own means leaves slope 0.5.
        let a = [(1.0, 0.5), (2.0, 1.0), (3.0, 1.5)];
        let b = [(1.0, 10.5), (3.0, 11.5)];
        assert!((ppi_lambda([&a[..], &b[..]]) - 0.5).abs() < 1e-12);
        // A slope above 1 is clamped to 1.
        assert_eq!(ppi_lambda([&[(1.0, 1.0), (2.0, 3.0), (3.0, 5.0)][..]]), 1.0);
        assert_eq!(ppi_lambda([&[(2.0, 1.0), (2.0, 4.0)][..]]), 0.0);
        assert_eq!(ppi_lambda([&[(2.0, 1.0)][..]]), 0.0);
    }

    #[test]
    fn least_squares_recovers_an_exact_line_and_refuses_a_vertical_one() {
        let pairs: Vec<(f64, f64)> = (0..5).map(|i| (i as f64, 2.0 + 0.5 * i as f64)).collect();
        let (a, b) = least_squares(&pairs).unwrap();
        assert!(
            (a - 2.0).abs() < 1e-12 && (b - 0.5).abs() < 1e-12,
            "{a} {b}"
        );
        assert_eq!(least_squares(&[(1.0, 2.0), (1.0, 3.0)]), None);
        assert_eq!(least_squares(&[(1.0, 2.0)]), None);
    }

    #[test]
    fn covariance_and_the_finite_population_correction_have_their_closed_forms() {
        // cov of (1,2), (2,4), (3,6) = 2 (n − 1 = 2 in the denominator).
        assert!((covariance(&[(1.0, 2.0), (2.0, 4.0), (3.0, 6.0)]) - 2.0).abs() < 1e-12);
        assert_eq!(covariance(&[(1.0, 2.0)]), 0.0);
        assert!((fpc(10, 100) - 0.09).abs() < 1e-12);
        assert_eq!(fpc(100, 100), 0.0);
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
    fn quantile_interpolates_like_numpy() {
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.25), 1.75);
    }
}
