//! Bradley–Terry ratings: each system's rating θ on the natural log-odds scale, so that the
//! probability that system a's answer is better than system b's is σ(θ_a − θ_b), with the
//! baseline's rating fixed at 0.
//!
//! The fit is the maximum of the Bradley–Terry likelihood with each comparison's outcome as a
//! soft count (a tie adds ½ a win to each side), by Newton's method on the comparisons summed
//! by pair. The outcomes are sufficient through each pair's count, sum and sum of squares, so
//! 100,000 comparisons of 50 systems cost one pass over them and a few Newton steps over the
//! 1,225 pairs.
//!
//! The covariance is the sandwich A⁻¹BA⁻¹ (A the information at the fit, B the sum of the
//! comparisons' outer score products): a tie, or a rater share, is less variable than a win or
//! a loss, and the model's own information would overstate the noise of such outcomes. With
//! binary outcomes of two systems it is the textbook 1/(n·p·(1−p)).
//!
//! A rating is finite only where its system is joined to the baseline both ways by chains of
//! comparisons each side won at least in part (Ford's condition); otherwise the fit says which
//! systems are unbounded, above or below, instead of returning a huge number.
//!
//! Rank intervals hold jointly: every pair's difference gets a simultaneous interval from the
//! largest standardised difference over all pairs (max-|t|, drawn from the ratings' normal
//! law), and a system's rank runs from 1 + the systems surely above it to K − the systems surely
//! below it (rank 1 is the highest rating).

use std::collections::HashMap;

use nalgebra::{DMatrix, DVector};

use super::{log_sigmoid, sigmoid};
use crate::rng::Rng;
use crate::stats::{newton_ascent, normal_quantile, quantile_sorted, standard_normal, t_quantile};

/// One comparison: systems `a` and `b` (indices into the systems) and the probability that
/// a's answer is the better: 1, 0, ½ for a tie, or any share between.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    pub a: usize,
    pub b: usize,
    pub a_better: f64,
}

/// Why no finite ratings exist.
#[derive(Debug, Clone, PartialEq)]
pub enum RatingError {
    /// Comparison `index` (from 0) names a system outside the systems, one system twice, or an
    /// outcome outside [0, 1].
    BadComparison { index: usize, problem: String },
    /// These systems (indices) have no finite rating against the baseline: they won every
    /// comparison that joins them to it (`above`), lost every one, or have none.
    Unbounded { systems: Vec<usize>, above: bool },
    /// These systems (indices) are not joined to the baseline by any chain of comparisons.
    Apart { systems: Vec<usize> },
    /// The Newton iterations failed (an information matrix that is not positive definite).
    Numerical(String),
}

impl std::fmt::Display for RatingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RatingError::BadComparison { index, problem } => {
                write!(f, "comparison {index}: {problem}")
            }
            RatingError::Unbounded { systems, above } => write!(
                f,
                "systems {systems:?} have no finite rating: they {} every comparison joining them to the baseline",
                if *above { "won" } else { "lost" }
            ),
            RatingError::Apart { systems } => write!(
                f,
                "systems {systems:?} are not joined to the baseline by any chain of comparisons"
            ),
            RatingError::Numerical(e) => write!(f, "{e}"),
        }
    }
}

/// Fitted ratings.
#[derive(Debug, Clone, PartialEq)]
pub struct Ratings {
    /// Each system's rating, the baseline's 0.
    pub ratings: Vec<f64>,
    /// Their covariance (K × K, row-major; the baseline's row and column are 0).
    pub covariance: Vec<f64>,
    /// The comparisons each system took part in.
    pub comparisons: Vec<usize>,
    pub baseline: usize,
    /// Newton steps taken.
    pub iterations: usize,
    /// The covariance's degrees of freedom where it was estimated from few independent
    /// units (G named raters: G − 1), so that the intervals take Student's t; `None`: normal.
    pub df: Option<f64>,
}

/// One pair's comparisons, oriented from its lower index: count, sum and sum of squares of
/// the lower system's outcome.
#[derive(Debug, Clone, Copy, Default)]
struct PairSums {
    n: f64,
    sum: f64,
    sum_sq: f64,
}

/// The largest Newton step taken on any rating (log-odds); a longer one is scaled down.
pub(super) const MAX_STEP: f64 = 5.0;
const MAX_ITERATIONS: usize = 200;

/// Fits the ratings of `k` systems to `outcomes`, the rating of `baseline` held at 0.
pub fn fit(k: usize, outcomes: &[Outcome], baseline: usize) -> Result<Ratings, RatingError> {
    if baseline >= k {
        return Err(RatingError::Numerical(format!(
            "baseline {baseline} is not one of the {k} systems"
        )));
    }
    let mut pairs: HashMap<(usize, usize), PairSums> = HashMap::new();
    let mut comparisons = vec![0usize; k];
    for (index, o) in outcomes.iter().enumerate() {
        check_comparison(k, index, o.a, o.b, ("outcome", o.a_better))?;
        let (key, x) = if o.a < o.b {
            ((o.a, o.b), o.a_better)
        } else {
            ((o.b, o.a), 1.0 - o.a_better)
        };
        let s = pairs.entry(key).or_default();
        s.n += 1.0;
        s.sum += x;
        s.sum_sq += x * x;
        comparisons[o.a] += 1;
        comparisons[o.b] += 1;
    }
    let mut pairs: Vec<((usize, usize), PairSums)> = pairs.into_iter().collect();
    pairs.sort_unstable_by_key(|(key, _)| *key);
    bounded(k, &pairs, baseline)?;

    // The free ratings: every system but the baseline, in order.
    let free: Vec<usize> = (0..k).filter(|&i| i != baseline).collect();
    let slot = |i: usize| -> Option<usize> {
        match i.cmp(&baseline) {
            std::cmp::Ordering::Less => Some(i),
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => Some(i - 1),
        }
    };
    let m = free.len();
    let log_likelihood = |theta: &[f64]| -> f64 {
        pairs
            .iter()
            .map(|&((i, j), s)| {
                let d = theta[i] - theta[j];
                s.sum * log_sigmoid(d) + (s.n - s.sum) * log_sigmoid(-d)
            })
            .sum()
    };
    // The gradient over the free ratings and the information matrix A at `theta`.
    let derivatives = |theta: &[f64]| -> (DVector<f64>, DMatrix<f64>) {
        let mut g = DVector::zeros(m);
        let mut a = DMatrix::zeros(m, m);
        for &((i, j), s) in &pairs {
            let p = sigmoid(theta[i] - theta[j]);
            let r = s.sum - s.n * p;
            let w = s.n * p * (1.0 - p);
            add_pair(&mut g, &mut a, slot(i), slot(j), r, w);
        }
        (g, a)
    };
    // Newton's method over the free ratings (the baseline's stays 0).
    let full = |free_theta: &DVector<f64>| -> Vec<f64> {
        let mut theta = vec![0.0; k];
        for (s, &i) in free.iter().enumerate() {
            theta[i] = free_theta[s];
        }
        theta
    };
    let ascent = newton_ascent(
        DVector::zeros(m),
        MAX_STEP,
        MAX_ITERATIONS,
        |f| log_likelihood(&full(f)),
        |f| derivatives(&full(f)),
    )
    .ok_or_else(|| {
        RatingError::Numerical("the information matrix is not positive definite".into())
    })?;
    let theta = full(&ascent.theta);
    let iterations = ascent.iterations;
    // The sandwich: A⁻¹ B A⁻¹ at the fit.
    let (_, a) = derivatives(&theta);
    let mut b = DMatrix::zeros(m, m);
    let mut unused = DVector::zeros(m);
    for &((i, j), s) in &pairs {
        let p = sigmoid(theta[i] - theta[j]);
        let v = (s.sum_sq - 2.0 * p * s.sum + s.n * p * p).max(0.0);
        add_pair(&mut unused, &mut b, slot(i), slot(j), 0.0, v);
    }
    let a_inv = a.try_inverse().ok_or_else(|| {
        RatingError::Numerical("the information matrix at the fit is singular".into())
    })?;
    let free_cov = &a_inv * b * &a_inv;
    let mut covariance = vec![0.0; k * k];
    for (s, &i) in free.iter().enumerate() {
        for (t, &j) in free.iter().enumerate() {
            covariance[i * k + j] = free_cov[(s, t)];
        }
    }
    Ok(Ratings {
        ratings: theta,
        covariance,
        comparisons,
        baseline,
        iterations,
        df: None,
    })
}

/// Which systems `edges` (each system's neighbours) reach from `from`.
pub(crate) fn reached(edges: &[Vec<usize>], from: usize) -> Vec<bool> {
    let mut seen = vec![false; edges.len()];
    let mut stack = vec![from];
    seen[from] = true;
    while let Some(i) = stack.pop() {
        for &j in &edges[i] {
            if !seen[j] {
                seen[j] = true;
                stack.push(j);
            }
        }
    }
    seen
}

/// Comparison `index` of systems `a` and `b` among `k`, with `value` (what it is, its number)
/// a probability: two different systems of the `k`, and the value in [0, 1].
pub(crate) fn check_comparison(
    k: usize,
    index: usize,
    a: usize,
    b: usize,
    (what, value): (&str, f64),
) -> Result<(), RatingError> {
    let bad = |problem: String| RatingError::BadComparison { index, problem };
    if a >= k || b >= k {
        return Err(bad(format!("a system outside the {k} systems")));
    }
    if a == b {
        return Err(bad("a system compared with itself".into()));
    }
    if !(0.0..=1.0).contains(&value) {
        return Err(bad(format!("{what} {value} outside [0, 1]")));
    }
    Ok(())
}

/// Adds one pair's score `r` and weight `w` along e_i − e_j (`None`: the baseline's slot).
fn add_pair(
    g: &mut DVector<f64>,
    a: &mut DMatrix<f64>,
    i: Option<usize>,
    j: Option<usize>,
    r: f64,
    w: f64,
) {
    if let Some(i) = i {
        g[i] += r;
        a[(i, i)] += w;
    }
    if let Some(j) = j {
        g[j] -= r;
        a[(j, j)] += w;
    }
    if let (Some(i), Some(j)) = (i, j) {
        a[(i, j)] -= w;
        a[(j, i)] -= w;
    }
}

/// Ford's condition: every system reaches the baseline, and is reached from it, by chains of
/// pairs in which each side won at least in part.
fn bounded(
    k: usize,
    pairs: &[((usize, usize), PairSums)],
    baseline: usize,
) -> Result<(), RatingError> {
    // beat[i]: the systems i won against at least in part.
    let mut beat: Vec<Vec<usize>> = vec![Vec::new(); k];
    let mut beaten_by: Vec<Vec<usize>> = vec![Vec::new(); k];
    for &((i, j), s) in pairs {
        if s.sum > 0.0 {
            beat[i].push(j);
            beaten_by[j].push(i);
        }
        if s.n - s.sum > 0.0 {
            beat[j].push(i);
            beaten_by[i].push(j);
        }
    }
    let reach = |edges: &[Vec<usize>]| reached(edges, baseline);
    // Not beaten along a chain from the baseline: rated above every bound.
    let below_reached = reach(&beat);
    let above: Vec<usize> = (0..k).filter(|&i| !below_reached[i]).collect();
    if !above.is_empty() {
        return Err(RatingError::Unbounded {
            systems: above,
            above: true,
        });
    }
    let above_reached = reach(&beaten_by);
    let below: Vec<usize> = (0..k).filter(|&i| !above_reached[i]).collect();
    if !below.is_empty() {
        return Err(RatingError::Unbounded {
            systems: below,
            above: false,
        });
    }
    Ok(())
}

/// Each system's rank interval, `(best, worst)` with 1 the highest rating, jointly at the
/// level, and the max-|t| critical value behind them.
#[derive(Debug, Clone, PartialEq)]
pub struct RankIntervals {
    pub ranks: Vec<(usize, usize)>,
    pub critical: f64,
}

impl Ratings {
    /// The standard error of system `i`'s rating (0 for the baseline).
    pub fn standard_error(&self, i: usize) -> f64 {
        let k = self.ratings.len();
        self.covariance[i * k + i].max(0.0).sqrt()
    }

    /// The standard error of θ_i − θ_j.
    pub fn difference_error(&self, i: usize, j: usize) -> f64 {
        let k = self.ratings.len();
        let c = &self.covariance;
        (c[i * k + i] + c[j * k + j] - 2.0 * c[i * k + j])
            .max(0.0)
            .sqrt()
    }

    /// The two-sided quantile at `level`: normal, or Student's t on [`Ratings::df`].
    pub fn quantile(&self, level: f64) -> f64 {
        let p = 0.5 + level / 2.0;
        self.df
            .map_or_else(|| normal_quantile(p), |df| t_quantile(p, df))
    }

    /// Each rating's own interval at `level` (the baseline's is [0, 0]).
    pub fn intervals(&self, level: f64) -> Vec<(f64, f64)> {
        let z = self.quantile(level);
        (0..self.ratings.len())
            .map(|i| {
                let half = z * self.standard_error(i);
                (self.ratings[i] - half, self.ratings[i] + half)
            })
            .collect()
    }

    /// Rank intervals that hold jointly at `level`, from `draws` draws of the ratings' normal
    /// law (multivariate t on [`Ratings::df`] where it is set).
    pub fn rank_intervals(&self, level: f64, draws: usize, rng: &mut Rng) -> RankIntervals {
        let k = self.ratings.len();
        let free: Vec<usize> = (0..k).filter(|&i| i != self.baseline).collect();
        let m = free.len();
        let cov = DMatrix::from_fn(m, m, |s, t| self.covariance[free[s] * k + free[t]]);
        let se: Vec<f64> = (0..k * k)
            .map(|ij| self.difference_error(ij / k, ij % k))
            .collect();
        let critical = match crate::stats::cholesky(cov) {
            Some(c) if m > 0 && k > 1 => {
                let l = c.l();
                let mut largest: Vec<f64> = (0..draws.max(1))
                    .map(|_| {
                        let z = DVector::from_fn(m, |_, _| standard_normal(rng));
                        let x = match self.df {
                            // A t draw: the normal one over the root of an independent
                            // χ²_df / df (df whole: the count of raters less one).
                            Some(df) => {
                                let chi: f64 = (0..df.round().max(1.0) as usize)
                                    .map(|_| standard_normal(rng).powi(2))
                                    .sum();
                                &l * z * (df / chi.max(f64::MIN_POSITIVE)).sqrt()
                            }
                            None => &l * z,
                        };
                        let mut full = vec![0.0; k];
                        for (s, &i) in free.iter().enumerate() {
                            full[i] = x[s];
                        }
                        let mut top: f64 = 0.0;
                        for i in 0..k {
                            for j in i + 1..k {
                                let e = se[i * k + j];
                                if e > 0.0 {
                                    top = top.max((full[i] - full[j]).abs() / e);
                                }
                            }
                        }
                        top
                    })
                    .collect();
                largest.sort_by(f64::total_cmp);
                quantile_sorted(&largest, level)
            }
            // One system, or a covariance without a factor: each pair at its own level.
            _ => self.quantile(level),
        };
        let surely_above =
            |j: usize, i: usize| self.ratings[j] - self.ratings[i] > critical * se[i * k + j];
        let ranks = (0..k)
            .map(|i| {
                let above = (0..k).filter(|&j| j != i && surely_above(j, i)).count();
                let below = (0..k).filter(|&j| j != i && surely_above(i, j)).count();
                (1 + above, k - below)
            })
            .collect();
        RankIntervals { ranks, critical }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{RngExt, SeedableRng};

    fn outcome(a: usize, b: usize, a_better: f64) -> Outcome {
        Outcome { a, b, a_better }
    }

    #[test]
    fn two_systems_have_the_closed_form_log_odds_and_its_textbook_error() {
        // a beats b 30 times in 40: θ_a − θ_b = ln(30/10), var 1/(n·p·(1−p)).
        let mut outcomes = vec![outcome(0, 1, 1.0); 30];
        outcomes.extend(vec![outcome(1, 0, 1.0); 10]);
        let fit = fit(2, &outcomes, 1).expect("fit");
        assert!((fit.ratings[0] - 3f64.ln()).abs() < 1e-9, "{fit:?}");
        assert_eq!(fit.ratings[1], 0.0);
        let se = (1.0f64 / (40.0 * 0.75 * 0.25)).sqrt();
        assert!((fit.standard_error(0) - se).abs() < 1e-9, "{fit:?}");
        assert_eq!(fit.comparisons, [40, 40]);
    }

    #[test]
    fn a_tie_counts_one_half_for_each_side_and_is_less_noisy_than_a_coin() {
        // 3 wins and 2 ties in 5: a's share 4/5, θ = ln 4.
        let mut outcomes = vec![outcome(0, 1, 1.0); 3];
        outcomes.extend(vec![outcome(0, 1, 0.5); 2]);
        let fit = fit(2, &outcomes, 1).expect("fit");
        assert!((fit.ratings[0] - 4f64.ln()).abs() < 1e-9);
        // Ties only: level, with an error below the one of 50 wins in 100.
        let ties = fit_of(&vec![outcome(0, 1, 0.5); 100]);
        let mut coin = vec![outcome(0, 1, 1.0); 50];
        coin.extend(vec![outcome(0, 1, 0.0); 50]);
        let coin = fit_of(&coin);
        assert!(ties.ratings[0].abs() < 1e-12 && coin.ratings[0].abs() < 1e-12);
        assert!(ties.standard_error(0) < 0.5 * coin.standard_error(0));
    }

    fn fit_of(outcomes: &[Outcome]) -> Ratings {
        fit(2, outcomes, 1).expect("fit")
    }

    #[test]
    fn a_system_that_never_loses_or_never_meets_the_others_is_named_not_rated() {
        // 2 beats 0 and 1 every time: unbounded above.
        let outcomes = [
            outcome(0, 1, 1.0),
            outcome(1, 0, 1.0),
            outcome(2, 0, 1.0),
            outcome(2, 1, 1.0),
        ];
        assert_eq!(
            fit(3, &outcomes, 0),
            Err(RatingError::Unbounded {
                systems: vec![2],
                above: true
            })
        );
        // Lost every one: unbounded below.
        let outcomes = [outcome(0, 1, 0.7), outcome(2, 0, 0.0)];
        assert_eq!(
            fit(3, &outcomes, 0),
            Err(RatingError::Unbounded {
                systems: vec![2],
                above: false
            })
        );
        // Never compared: both ways; the first failure found is reported.
        let outcomes = [outcome(0, 1, 0.7)];
        assert!(matches!(
            fit(3, &outcomes, 0),
            Err(RatingError::Unbounded { systems, .. }) if systems == [2]
        ));
        assert!(matches!(
            fit(2, &[outcome(0, 0, 1.0)], 0),
            Err(RatingError::BadComparison { index: 0, .. })
        ));
        assert!(matches!(
            fit(2, &[outcome(0, 1, 0.5), outcome(0, 1, 1.5)], 0),
            Err(RatingError::BadComparison { index: 1, .. })
        ));
    }

    /// A world of `k` systems with ratings drawn N(0, 0.8²) (the baseline's shifted to 0), `n`
    /// comparisons of random pairs, a share `ties` of them ties and the rest won with the
    /// chance that makes each comparison's expected outcome σ(θ_a − θ_b): the Bradley–Terry
    /// estimand is the truth.
    fn world(k: usize, n: usize, ties: f64, rng: &mut Rng) -> (Vec<f64>, Vec<Outcome>) {
        let raw: Vec<f64> = (0..k).map(|_| 0.8 * standard_normal(rng)).collect();
        let truth: Vec<f64> = raw.iter().map(|t| t - raw[0]).collect();
        let outcomes = (0..n)
            .map(|_| {
                let a = rng.random_range(0..k);
                let b = (a + rng.random_range(1..k)) % k;
                let p = sigmoid(truth[a] - truth[b]);
                // Fewer ties between far-apart systems, so that the win chance stays in [0, 1].
                let tie = ties.min(2.0 * p.min(1.0 - p));
                let win = (p - tie / 2.0) / (1.0 - tie);
                let x = if rng.random::<f64>() < tie {
                    0.5
                } else if rng.random::<f64>() < win {
                    1.0
                } else {
                    0.0
                };
                outcome(a, b, x)
            })
            .collect();
        (truth, outcomes)
    }

    /// Seeded replications of three worlds: 8 systems and 1,500 comparisons without ties; 20
    /// systems and 4,000 comparisons, a fifth of them ties; 50 systems and 2,500 comparisons
    /// (about 2 a pair, 100 a system), a tenth ties. Each rating's 95% interval should cover
    /// 93–97% (pooled over the non-baseline systems of 300 replications), and the rank
    /// intervals all hold at once in at least 95% of replications (less 2 SE of 300).
    /// Measured (this test): ratings 94.1 / 94.2 / 94.6%, every rank inside in 99.7 / 100 /
    /// 100% of replications. With 2,000 replications (a temporary count): 95.0 / 94.8 / 94.9%
    /// and 99.9 / 100 / 100%. The rank intervals err wide: max-|t| over every pair guards
    /// orderings no rank depends on. Before the ties were thinned between far-apart pairs the
    /// world's outcomes were not Bradley–Terry there and the 20-system world read 93.7%.
    #[test]
    fn rating_intervals_cover_and_rank_intervals_hold_jointly() {
        for (k, n, ties, seed) in [
            (8, 1_500, 0.0, 11u64),
            (20, 4_000, 0.2, 12),
            (50, 2_500, 0.1, 13),
        ] {
            let mut rng = Rng::seed_from_u64(seed);
            let reps = 300;
            let (mut inside, mut rated, mut joint) = (0usize, 0usize, 0usize);
            for _ in 0..reps {
                let (truth, outcomes) = world(k, n, ties, &mut rng);
                let fit = fit(k, &outcomes, 0).expect("fit");
                for (i, (lo, hi)) in fit.intervals(0.95).into_iter().enumerate().skip(1) {
                    rated += 1;
                    inside += usize::from((lo..=hi).contains(&truth[i]));
                }
                let ranks = fit.rank_intervals(0.95, 1_000, &mut rng).ranks;
                let all = (0..k).all(|i| {
                    let rank = 1 + (0..k).filter(|&j| truth[j] > truth[i]).count();
                    (ranks[i].0..=ranks[i].1).contains(&rank)
                });
                joint += usize::from(all);
            }
            let coverage = inside as f64 / rated as f64;
            let held = joint as f64 / reps as f64;
            eprintln!(
                "{k} systems, {n} comparisons, ties {ties}: ratings {:.1}%, ranks jointly {:.1}%",
                100.0 * coverage,
                100.0 * held
            );
            assert!((0.93..=0.97).contains(&coverage), "{coverage}");
            assert!(
                held >= 0.95 - 2.0 * (0.95f64 * 0.05 / reps as f64).sqrt(),
                "{held}"
            );
        }
    }
}
