//! A system's win rate: the share of its comparisons whose answer people prefer (a tie counts
//! ½), against one opponent (the baseline) or over the field, on a run of comparisons, as
//! AlpacaEval asks it. Prediction-powered as the ratings are (`powered`): the calibrated
//! preference g predicts every run comparison and the labelled ones correct it,
//!
//!   rate = λ·mean_run(g) + mean_labelled(y − λĝ),
//!
//! with PPI++'s λ = Cov(y, ĝ) / ((1 + n/N)·Var(g)), clipped to [0, 1] (0: the labels' own mean),
//! and variance λ²·Var_run(g)/N + Var_labelled(y − λĝ)/n. The labelled comparisons of the
//! system are taken to be drawn as the run's of it are.

use super::powered::{Observed, Predicted, t_df};
use crate::stats::{mean, normal_quantile, sample_variance, t_quantile};

/// The fewest labelled comparisons a win rate is given from: with fewer, the labels' own
/// spread is too poorly known for a normal interval (in the grid, intervals from 2–9 labels
/// covered 80–90%).
pub const MIN_LABELLED: usize = 30;

/// A win rate and its standard error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WinRate {
    pub estimate: f64,
    pub standard_error: f64,
    /// The run's comparisons it is over.
    pub comparisons: usize,
    /// The labelled comparisons correcting it.
    pub labelled: usize,
    pub lambda: f64,
    /// The labelled term's degrees of freedom where its labels came from few named raters
    /// (`powered::t_df`); `None`: normal.
    pub df: Option<f64>,
}

impl WinRate {
    /// The interval at `level` (normal, or Student's t on `df`), inside [0, 1].
    pub fn interval(&self, level: f64) -> (f64, f64) {
        let p = 0.5 + level / 2.0;
        let z = self
            .df
            .map_or_else(|| normal_quantile(p), |df| t_quantile(p, df));
        let half = z * self.standard_error;
        (
            (self.estimate - half).max(0.0),
            (self.estimate + half).min(1.0),
        )
    }
}

/// `system`'s outcome in comparison (a, b) with a's outcome `x`: x where it is a, 1 − x where
/// it is b; `None` where it is neither, or the other side is not `opponent`.
fn oriented(system: usize, opponent: Option<usize>, a: usize, b: usize, x: f64) -> Option<f64> {
    let (other, value) = if a == system {
        (b, x)
    } else if b == system {
        (a, 1.0 - x)
    } else {
        return None;
    };
    opponent.is_none_or(|o| o == other).then_some(value)
}

/// `system`'s win rate against `opponent` (`None`: every other system), or `None` where the
/// run has no such comparison or fewer than [`MIN_LABELLED`] are labelled.
/// The variance of the mean of `values` where one rater's values may be alike (`raters`,
/// aligned; `None`: a rater of that value alone): each rater's deviations from the mean are
/// summed, and the sums' squares taken over the G raters, times G/(G − 1), over n²; and the
/// effective number of raters, (Σ n_g)² / Σ n_g² (as the ratings' own, `powered`).
fn by_rater(values: &[f64], raters: &[Option<u64>]) -> (f64, f64) {
    let n = values.len().max(1) as f64;
    let m = mean(values);
    let mut sums: std::collections::BTreeMap<(bool, u64), (f64, f64)> = Default::default();
    for (k, (v, rater)) in values.iter().zip(raters).enumerate() {
        let key = match rater {
            Some(id) => (true, *id),
            None => (false, k as u64),
        };
        let (sum, count) = sums.entry(key).or_default();
        *sum += v - m;
        *count += 1.0;
    }
    let g = sums.len() as f64;
    let variance =
        sums.values().map(|(s, _)| s * s).sum::<f64>() * (g / (g - 1.0).max(1.0)) / (n * n);
    let squares: f64 = sums.values().map(|(_, c)| c * c).sum();
    (variance, n * n / squares)
}

pub fn win_rate(
    system: usize,
    opponent: Option<usize>,
    run: &[&Predicted],
    labelled: &[&Observed],
) -> Option<WinRate> {
    let g: Vec<f64> = run
        .iter()
        .filter_map(|c| oriented(system, opponent, c.a, c.b, c.predicted))
        .collect();
    // Each labelled comparison of the system: its rater, outcome and prediction.
    let rows: Vec<(Option<u64>, f64, f64)> = labelled
        .iter()
        .filter_map(|o| {
            let c = &o.comparison;
            Some((
                o.rater,
                oriented(system, opponent, c.a, c.b, o.preference)?,
                oriented(system, opponent, c.a, c.b, c.predicted)?,
            ))
        })
        .collect();
    let raters: Vec<Option<u64>> = rows.iter().map(|r| r.0).collect();
    let y: Vec<f64> = rows.iter().map(|r| r.1).collect();
    let g_hat: Vec<f64> = rows.iter().map(|r| r.2).collect();
    let (big_n, n) = (g.len(), y.len());
    if big_n == 0 || n < MIN_LABELLED {
        return None;
    }
    let all: Vec<f64> = g.iter().chain(&g_hat).copied().collect();
    let variance_g = sample_variance(&all);
    let (my, mg) = (mean(&y), mean(&g_hat));
    let cov = y
        .iter()
        .zip(&g_hat)
        .map(|(a, b)| (a - my) * (b - mg))
        .sum::<f64>()
        / (n - 1) as f64;
    let lambda = if variance_g > 0.0 {
        (cov / ((1.0 + n as f64 / big_n as f64) * variance_g)).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let residual: Vec<f64> = y.iter().zip(&g_hat).map(|(y, g)| y - lambda * g).collect();
    let estimate = lambda * mean(&g) + mean(&residual);
    let (labelled_variance, df) = if raters.iter().any(Option::is_some) {
        let (variance, units) = by_rater(&residual, &raters);
        (variance, t_df(units))
    } else {
        (sample_variance(&residual) / n as f64, None)
    };
    let variance = lambda * lambda * sample_variance(&g) / big_n as f64 + labelled_variance;
    Some(WinRate {
        estimate: estimate.clamp(0.0, 1.0),
        standard_error: variance.max(0.0).sqrt(),
        comparisons: big_n,
        labelled: n,
        lambda,
        df,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn predicted(a: usize, b: usize, p: f64) -> Predicted {
        Predicted {
            a,
            b,
            predicted: p,
            controls: vec![],
        }
    }

    #[test]
    fn perfect_predictions_give_the_runs_own_share_and_a_tie_counts_half() {
        // System 0 wins 3 of 4 run comparisons against 1 (once as b), and ties one against 2;
        // the run ten times over.
        let once = [
            predicted(0, 1, 1.0),
            predicted(1, 0, 0.0),
            predicted(0, 1, 1.0),
            predicted(0, 1, 0.0),
            predicted(2, 0, 0.5),
        ];
        let run: Vec<Predicted> = (0..10).flat_map(|_| once.iter().cloned()).collect();
        // Labels that the predictions match exactly: nothing to correct.
        let labelled: Vec<Observed> = run
            .iter()
            .map(|c| Observed {
                comparison: c.clone(),
                preference: c.predicted,
                rater: None,
            })
            .collect();
        let run: Vec<&Predicted> = run.iter().collect();
        let labelled: Vec<&Observed> = labelled.iter().collect();
        let against_1 = win_rate(0, Some(1), &run, &labelled).expect("rated");
        assert!((against_1.estimate - 0.75).abs() < 1e-12, "{against_1:?}");
        let field = win_rate(0, None, &run, &labelled).expect("rated");
        assert!((field.estimate - 3.5 / 5.0).abs() < 1e-12, "{field:?}");
        assert!(win_rate(1, Some(2), &run, &labelled).is_none());
        // Too few labels: no rate.
        assert!(win_rate(0, Some(1), &run, &labelled[..20]).is_none());
    }
}
