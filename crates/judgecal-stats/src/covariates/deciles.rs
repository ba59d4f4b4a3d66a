//! The layer's held-out residuals by covariate decile: where its shape misses the judge's
//! (a reward that starts past the median, or levels off, read by a line in log length), the
//! cross-fitted residuals of the anchors in some deciles sit away from zero. A run whose items
//! lie mostly there inherits that bias, which the coefficients' own error does not carry; the
//! check measures it for the run's mix of deciles and, where it is clear of its noise, adds it
//! to the run mean's variance and says so.

use serde::{Deserialize, Serialize};

use crate::stats;

/// Deciles, so that a tenth of the anchors (≥ 30 of 300) measures each one's mean residual.
const BINS: usize = 10;

/// A run's implied bias counts where it exceeds this many standard errors (two-sided ≈ 5%).
pub const MISFIT_Z: f64 = 2.0;

/// One covariate's held-out residuals (reference − cross-fitted layer score) by decile of
/// its anchors' raw values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deciles {
    pub name: String,
    /// The 9 inner cut points; a value equal to one falls in the upper bin.
    pub cuts: Vec<f64>,
    /// Each bin's anchors, mean residual and its standard error.
    pub count: Vec<usize>,
    pub mean: Vec<f64>,
    pub se: Vec<f64>,
}

impl Deciles {
    /// `values[i]` anchor i's raw covariate, `residuals[i]` its held-out residual. `None` with
    /// fewer than 2 anchors a bin.
    pub fn of(name: &str, values: &[f64], residuals: &[f64]) -> Option<Self> {
        if values.len() != residuals.len() || values.len() < 2 * BINS {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let cuts: Vec<f64> = (1..BINS)
            .map(|b| stats::quantile_sorted(&sorted, b as f64 / BINS as f64))
            .collect();
        let mut bins: Vec<Vec<f64>> = vec![Vec::new(); BINS];
        for (&x, &r) in values.iter().zip(residuals) {
            bins[bin(&cuts, x)].push(r);
        }
        let (mut count, mut mean, mut se) = (Vec::new(), Vec::new(), Vec::new());
        for b in &bins {
            let n = b.len();
            count.push(n);
            if n < 2 {
                mean.push(0.0);
                se.push(f64::INFINITY);
                continue;
            }
            let m = stats::mean(b);
            let var = b.iter().map(|r| (r - m).powi(2)).sum::<f64>() / (n - 1) as f64;
            mean.push(m);
            se.push((var / n as f64).sqrt());
        }
        Some(Self {
            name: name.to_owned(),
            cuts,
            count,
            mean,
            se,
        })
    }

    /// The bias a run whose items carry `values` inherits: its mix of the bins' mean residuals,
    /// with that mix's standard error.
    pub fn implied(&self, values: &[f64]) -> Option<(f64, f64)> {
        if values.is_empty() {
            return None;
        }
        let mut share = vec![0.0; self.mean.len()];
        for &x in values {
            share[bin(&self.cuts, x)] += 1.0 / values.len() as f64;
        }
        let bias = share.iter().zip(&self.mean).map(|(w, m)| w * m).sum();
        let var: f64 = share
            .iter()
            .zip(&self.se)
            .filter(|(w, _)| **w > 0.0)
            .map(|(w, s)| (w * s).powi(2))
            .sum();
        Some((bias, var.sqrt()))
    }
}

/// The bin of `x` among `cuts`.
fn bin(cuts: &[f64], x: f64) -> usize {
    cuts.partition_point(|&c| c <= x)
}

/// A run's inherited bias where it is clear of its noise: the covariate, the bias and its
/// standard error.
#[derive(Debug, Clone, PartialEq)]
pub struct Misfit {
    pub covariate: String,
    pub bias: f64,
    pub se: f64,
}

impl Misfit {
    /// What the run's mean carries for it: the bias's square, as a variance (the bias is
    /// measured, not known: its square widens the interval by about the bias itself).
    pub fn variance(&self) -> f64 {
        self.bias * self.bias + self.se * self.se
    }
}

/// The largest clear misfit over `deciles` for a run whose items carry `value(name)` each.
pub fn misfit(deciles: &[Deciles], value: &dyn Fn(&str) -> Vec<f64>) -> Option<Misfit> {
    deciles
        .iter()
        .filter_map(|d| {
            let (bias, se) = d.implied(&value(&d.name))?;
            (se.is_finite() && bias.abs() > MISFIT_Z * se).then(|| Misfit {
                covariate: d.name.clone(),
                bias,
                se,
            })
        })
        .max_by(|a, b| a.bias.abs().total_cmp(&b.bias.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Rng, SeedableRng};
    use crate::stats::standard_normal;

    /// Residuals that are pure noise (sd 0.3) for values z ~ N(0, 1), plus `bend`·max(0, z).
    fn anchors(rng: &mut Rng, n: usize, bend: f64) -> (Vec<f64>, Vec<f64>) {
        (0..n)
            .map(|_| {
                let z = standard_normal(rng);
                (z, bend * z.max(0.0) + 0.3 * standard_normal(rng))
            })
            .unzip()
    }

    #[test]
    fn a_fit_that_is_right_everywhere_flags_about_one_long_run_in_twenty() {
        let mut rng = Rng::seed_from_u64(3);
        let reps = 2000;
        let mut flagged = 0;
        for _ in 0..reps {
            let (x, r) = anchors(&mut rng, 400, 0.0);
            let d = Deciles::of("z", &x, &r).unwrap();
            let run: Vec<f64> = (0..300)
                .map(|_| 1.0 + 0.5 * standard_normal(&mut rng))
                .collect();
            flagged += usize::from(misfit(&[d], &|_| run.clone()).is_some());
        }
        let rate = flagged as f64 / reps as f64;
        assert!((0.03..=0.07).contains(&rate), "{rate}");
    }

    #[test]
    fn a_bend_the_fit_missed_is_found_where_the_run_lies_and_measured() {
        let mut rng = Rng::seed_from_u64(4);
        let (x, r) = anchors(&mut rng, 1000, 0.3);
        let d = Deciles::of("z", &x, &r).unwrap();
        // A run of long items: its mean residual is 0.3·E[max(0, z)] for z ~ N(1, 0.5²).
        let run: Vec<f64> = (0..20_000)
            .map(|_| 1.0 + 0.5 * standard_normal(&mut rng))
            .collect();
        let truth = 0.3 * stats::mean(&run.iter().map(|z| z.max(0.0)).collect::<Vec<_>>());
        let m = misfit(std::slice::from_ref(&d), &|_| run.clone()).expect("flagged");
        assert_eq!(m.covariate, "z");
        assert!(
            (m.bias - truth).abs() < 3.0 * m.se + 0.02,
            "{m:?} vs {truth}"
        );
        // A run of short items lies where the fit is right: nothing to say.
        let short: Vec<f64> = (0..300)
            .map(|_| -1.0 + 0.3 * standard_normal(&mut rng))
            .collect();
        assert!(misfit(&[d], &|_| short.clone()).is_none());
    }
}
