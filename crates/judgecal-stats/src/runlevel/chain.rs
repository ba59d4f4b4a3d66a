//! A ranking's pairs answered on the items both runs labelled, where the runs' label sets lie
//! on one chain of nested sets (`Chain`).
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-stats/src/runlevel/chain.rs".

use crate::rng::Rng;
use rand_distr::{ChiSquared, Distribution};

use super::inference::{self, MeanEstimate};
use super::{AnswerPath, RunEstimate, RunItems, Source};
use crate::error::{CalibrateError, Result};
use crate::stats::{cholesky_rows, covariance, fpc, ppi_lambda, standard_normal};

/// One labelled run on the chain, its items in the first labelled run's order.
struct Member {
    run: usize,
    count: usize,
    /// The run's own tuned λ, where it has enough labels to tune one.
    lambda: Option<f64>,
    corrected: Vec<f64>,
    reference: Vec<Option<f64>>,
    /// Reference − λ·corrected where labelled (λ the run's own where tuned, else the pooled).
    residual: Vec<Option<f64>>,
    /// The run's labelled answer's variance and degrees of freedom.
    variance: f64,
    df: Option<f64>,
}

/// The labelled runs of a ranking whose label sets are nested (see the module's notes).
pub struct Chain {
    /// By labelled count, fewest first.
    members: Vec<Member>,
    /// Items per run.
    n: usize,
    /// The runs' residual covariance per item, by chain position (row-major).
    cov: Vec<f64>,
    /// Its lower Cholesky factor.
    factor: Vec<f64>,
    /// The distinct counts, ascending.
    levels: Vec<usize>,
    /// Chain position of each run of the ranking.
    slot: Vec<Option<usize>>,
    /// λ tuned on every run's labels together (each run's items centred on its own means),
    /// in [0, 1].
    lambda: f64,
}

/// A pair's own labelled answer.
pub struct PairAnswer {
    pub estimate: MeanEstimate,
    /// The items both runs labelled.
    pub shared: usize,
}

/// Run `i` as a member of the chain, its items in run `first`'s order; `None` where it is
/// clustered, of another size, or does not pair with `first` item for item.
fn member(
    source: &dyn Source,
    runs: &[RunItems],
    estimates: &[RunEstimate],
    first: usize,
    i: usize,
) -> Result<Option<Member>> {
    let (r, n) = (&runs[i], runs[first].scores.len());
    if r.clusters.is_some() || r.scores.len() != n {
        return Ok(None);
    }
    let order: Vec<usize> = if i == first {
        (0..n).collect()
    } else {
        match super::pairing(&runs[first], r) {
            Some(p) if p.len() == n => p.iter().map(|&(_, k)| k).collect(),
            _ => return Ok(None),
        }
    };
    let e = &estimates[i].mean;
    let (f, y) = (source.corrected(&r.scores)?, r.references());
    Ok(Some(Member {
        run: i,
        count: e.labelled,
        lambda: (e.labelled >= inference::MIN_TUNED)
            .then_some(e.lambda)
            .flatten(),
        corrected: order.iter().map(|&k| f[k]).collect(),
        reference: order.iter().map(|&k| y[k]).collect(),
        residual: Vec::new(),
        variance: e.variance.total(),
        df: e.df,
    }))
}

/// The members' residual covariance, each pair's on the smaller run's items (which the larger
/// labelled too), and its Cholesky factor. The off-diagonal terms come from fewer items than
/// some diagonal ones: they are shrunk until the matrix is positive definite (never past
/// independence).
fn residual_covariance(members: &[Member]) -> Result<(Vec<f64>, Vec<f64>)> {
    let l = members.len();
    let mut cov = vec![0.0; l * l];
    for p in 0..l {
        for q in p..l {
            let pairs: Vec<(f64, f64)> = members[p]
                .residual
                .iter()
                .zip(&members[q].residual)
                .filter_map(|(a, b)| a.zip(*b))
                .collect();
            let c = covariance(&pairs);
            cov[p * l + q] = c;
            cov[q * l + p] = c;
        }
    }
    (0..=10)
        .find_map(|s| {
            let keep = 1.0 - s as f64 / 10.0;
            let mut m = cov.clone();
            for p in 0..l {
                for q in 0..l {
                    if p != q {
                        m[p * l + q] *= keep;
                    }
                }
                m[p * l + p] = m[p * l + p].max(1e-12);
            }
            cholesky_rows(&m, l).map(|f| (m, f))
        })
        .ok_or_else(|| CalibrateError::Numerical("the labelled runs' residual covariance".into()))
}

impl Chain {
    /// The chain of `runs`' labelled runs (`estimates`: their answers, labelled path where
    /// labelled); `None` where fewer than two are labelled or their labels are not nested.
    pub fn new(
        sources: &[&dyn Source],
        runs: &[RunItems],
        estimates: &[RunEstimate],
    ) -> Result<Option<Chain>> {
        let labelled: Vec<usize> = (0..runs.len())
            .filter(|&i| estimates[i].path == AnswerPath::Labelled)
            .collect();
        let Some(&first) = labelled.first() else {
            return Ok(None);
        };
        if labelled.len() < 2 {
            return Ok(None);
        }
        let n = runs[first].scores.len();
        let mut members = Vec::with_capacity(labelled.len());
        for &i in &labelled {
            match member(sources[i], runs, estimates, first, i)? {
                Some(m) => members.push(m),
                None => return Ok(None),
            }
        }
        // Residuals with the run's own λ where it tuned one, else the pooled λ: a run's
        // pairs are answered with it below [`inference::MIN_TUNED`] shared items.
        let lambda = pooled_lambda(&members);
        for m in &mut members {
            let l = m.lambda.unwrap_or(lambda);
            m.residual = m
                .reference
                .iter()
                .zip(&m.corrected)
                .map(|(y, f)| y.map(|y| y - l * f))
                .collect();
        }
        members.sort_by_key(|m| m.count);
        let nested = members.windows(2).all(|w| {
            w[0].residual
                .iter()
                .zip(&w[1].residual)
                .all(|(a, b)| a.is_none() || b.is_some())
        });
        if !nested {
            return Ok(None);
        }
        let (cov, factor) = residual_covariance(&members)?;
        let mut levels: Vec<usize> = members.iter().map(|m| m.count).collect();
        levels.dedup();
        let mut slot = vec![None; runs.len()];
        for (p, m) in members.iter().enumerate() {
            slot[m.run] = Some(p);
        }
        Ok(Some(Chain {
            members,
            n,
            cov,
            factor,
            levels,
            slot,
            lambda,
        }))
    }

    /// Whether run `i` is on the chain.
    pub fn holds(&self, i: usize) -> bool {
        self.slot.get(i).is_some_and(Option::is_some)
    }

    /// The correlation of two runs' residuals on one item, pooled over the pairs (weighted by
    /// the items they share).
    pub fn correlation(&self) -> Option<f64> {
        let l = self.members.len();
        let (mut sum, mut weight) = (0.0, 0.0);
        for p in 0..l {
            for q in p + 1..l {
                let (a, b) = (self.cov[p * l + p], self.cov[q * l + q]);
                if a > 0.0 && b > 0.0 {
                    let w = self.members[p].count as f64;
                    sum += w * self.cov[p * l + q] / (a * b).sqrt();
                    weight += w;
                }
            }
        }
        (weight > 0.0).then(|| sum / weight)
    }

    /// Runs `a` and `b`'s difference, A − B, on the items both labelled: the labelled path on
    /// the per-item differences (with its own λ), at `level` and `spacing` as a run's.
    pub fn pair(&self, a: usize, b: usize, level: f64, spacing: f64) -> Option<PairAnswer> {
        let (pa, pb) = (self.slot[a]?, self.slot[b]?);
        let (ma, mb) = (&self.members[pa], &self.members[pb]);
        let d: Vec<f64> = ma
            .corrected
            .iter()
            .zip(&mb.corrected)
            .map(|(x, y)| x - y)
            .collect();
        let d_ref: Vec<Option<f64>> = ma
            .reference
            .iter()
            .zip(&mb.reference)
            .map(|(x, y)| x.zip(*y).map(|(x, y)| x - y))
            .collect();
        // Under [`inference::MIN_TUNED`] shared items a pair's own λ would be 1, which a
        // judge whose corrected scores spread more than the references within a run pays
        // for in full; the chain's pooled λ, tuned on every run's labels, serves instead.
        let given = (ma.count.min(mb.count) < inference::MIN_TUNED).then_some(self.lambda);
        let estimate = inference::labelled_with(&d, &d_ref, None, level, spacing, given).ok()?;
        Some(PairAnswer {
            shared: estimate.labelled,
            estimate,
        })
    }

    /// `draws` joint draws of the chain's partial-sum errors (see the module's notes).
    pub fn draws(&self, draws: usize, rng: &mut Rng) -> Draws {
        let l = self.members.len();
        let b = self.levels.len();
        // Position of the first member at each level or above.
        let from: Vec<usize> = self
            .levels
            .iter()
            .map(|&c| self.members.iter().position(|m| m.count >= c).unwrap_or(l))
            .collect();
        let mut errors: Vec<Vec<Vec<f32>>> = (0..l)
            .map(|p| {
                (0..b)
                    .map(|j| {
                        if p >= from[j] {
                            Vec::with_capacity(draws)
                        } else {
                            Vec::new()
                        }
                    })
                    .collect()
            })
            .collect();
        let big_n = self.n as f64;
        let mut cumulative = vec![vec![0.0; l]; b];
        let mut total = vec![0.0; l];
        for _ in 0..draws {
            let mut previous = 0;
            for (j, &c) in self.levels.iter().enumerate() {
                let scale = ((c - previous) as f64).sqrt();
                for x in total.iter_mut() {
                    *x += scale * standard_normal(rng);
                }
                cumulative[j].copy_from_slice(&total);
                previous = c;
            }
            let scale = (self.n.saturating_sub(previous) as f64).sqrt();
            for x in total.iter_mut() {
                *x += scale * standard_normal(rng);
            }
            for (j, &c) in self.levels.iter().enumerate() {
                let m = c as f64;
                let u: Vec<f64> = cumulative[j]
                    .iter()
                    .zip(&total)
                    .map(|(w, t)| (w - m / big_n * t) / m)
                    .collect();
                for (p, row) in errors.iter_mut().enumerate().skip(from[j]) {
                    let e: f64 = (0..=p).map(|q| self.factor[p * l + q] * u[q]).sum();
                    row[j].push(e as f32);
                }
            }
            total.iter_mut().for_each(|x| *x = 0.0);
        }
        Draws { errors }
    }

    /// Run `i`'s labelled error in each draw: its partial-sum error at its own count,
    /// rescaled to its answer's variance and widened by one t draw on its degrees of freedom.
    pub fn run_errors(&self, i: usize, draws: &Draws, rng: &mut Rng) -> Option<Vec<f64>> {
        let p = self.slot[i]?;
        let m = &self.members[p];
        let j = self.level(m.count);
        let model = self.cov[p * self.members.len() + p] * fpc(m.count, self.n);
        Some(widened(
            &draws.errors[p][j],
            None,
            m.variance,
            model,
            m.df,
            rng,
        ))
    }

    /// A pair's labelled error in each draw: the two runs' partial-sum errors at the count
    /// they share, their difference rescaled to `answer`'s variance and widened by one t draw
    /// on its degrees of freedom.
    pub fn pair_errors(
        &self,
        a: usize,
        b: usize,
        answer: &PairAnswer,
        draws: &Draws,
        rng: &mut Rng,
    ) -> Option<Vec<f64>> {
        let (pa, pb) = (self.slot[a]?, self.slot[b]?);
        let l = self.members.len();
        let shared = self.members[pa].count.min(self.members[pb].count);
        let j = self.level(shared);
        let model = (self.cov[pa * l + pa] + self.cov[pb * l + pb] - 2.0 * self.cov[pa * l + pb])
            * fpc(shared, self.n);
        let e = &answer.estimate;
        Some(widened(
            &draws.errors[pa][j],
            Some(&draws.errors[pb][j]),
            e.variance.total(),
            model,
            e.df,
            rng,
        ))
    }

    /// The noise of one item's residual difference between runs `a` and `b`, where both are
    /// on the chain, and the items both labelled that it was measured on.
    pub fn difference_noise(&self, a: usize, b: usize) -> Option<(f64, usize)> {
        let (pa, pb) = (self.slot.get(a).copied()??, self.slot.get(b).copied()??);
        let l = self.members.len();
        let noise =
            (self.cov[pa * l + pa] + self.cov[pb * l + pb] - 2.0 * self.cov[pa * l + pb]).max(0.0);
        Some((noise, self.members[pa].count.min(self.members[pb].count)))
    }

    fn level(&self, count: usize) -> usize {
        self.levels.partition_point(|&c| c < count)
    }
}

/// The chain's partial-sum errors: by chain position, by level, by draw.
pub struct Draws {
    errors: Vec<Vec<Vec<f32>>>,
}

/// `x` (less `minus`, where given) in each draw, from a model variance `model` to `variance`,
/// times one t draw's scale on `df` degrees of freedom.
fn widened(
    x: &[f32],
    minus: Option<&[f32]>,
    variance: f64,
    model: f64,
    df: Option<f64>,
    rng: &mut Rng,
) -> Vec<f64> {
    let chi = df
        .filter(|df| df.is_finite() && *df < 200.0)
        .and_then(|df| ChiSquared::new(df).ok());
    let ratio = if model > 1e-12 {
        (variance.max(0.0) / model).sqrt()
    } else {
        0.0
    };
    x.iter()
        .enumerate()
        .map(|(d, &v)| {
            let base = match minus {
                Some(m) => v as f64 - m[d] as f64,
                None => v as f64,
            };
            // A model with no spread (identical residuals) leaves the answer's own.
            let e = if ratio > 0.0 {
                ratio * base
            } else {
                variance.max(0.0).sqrt() * standard_normal(rng)
            };
            match (&chi, df) {
                (Some(c), Some(df)) => e * (df / c.sample(rng).max(1e-12)).sqrt(),
                _ => e,
            }
        })
        .collect()
}

/// The PPI++ λ over every member's labelled items, each run centred on its own means (so that
/// what runs differ by does not count).
fn pooled_lambda(members: &[Member]) -> f64 {
    let labelled: Vec<Vec<(f64, f64)>> = members
        .iter()
        .map(|m| {
            m.corrected
                .iter()
                .zip(&m.reference)
                .filter_map(|(f, y)| y.map(|y| (*f, y)))
                .collect()
        })
        .collect();
    ppi_lambda(labelled.iter().map(Vec::as_slice))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SeedableRng;

    /// A chain of three runs with the covariance given, counts 10, 40 and 40 of 100.
    fn chain(cov: Vec<f64>) -> Chain {
        let l = 3;
        let factor = crate::stats::cholesky_rows(&cov, l).unwrap();
        let member = |run, count| Member {
            run,
            count,
            lambda: None,
            corrected: Vec::new(),
            reference: Vec::new(),
            residual: Vec::new(),
            variance: 0.0,
            df: None,
        };
        Chain {
            members: vec![member(0, 10), member(1, 40), member(2, 40)],
            n: 100,
            cov,
            factor,
            levels: vec![10, 40],
            slot: vec![Some(0), Some(1), Some(2)],
            lambda: 1.0,
        }
    }

    #[test]
    fn the_bridged_draws_have_the_finite_populations_covariances() {
        // Σ = [[1, .6, .3], [.6, 2, .5], [.3, .5, 1.5]]. Var e_0(10) = 1·(1/10 − 1/100) =
        // 0.09; Cov(e_0(10), e_1(40)) = 0.6·(1/40 − 1/100) = 0.009; Var(e_1(10) − e_2(10)) =
        // (2 + 1.5 − 1)·0.09 = 0.225; Var e_2(40) = 1.5·0.015 = 0.0225. Each within 4
        // standard errors of its 40,000-draw estimate, √((E x²·E y² + c²)/n).
        let c = chain(vec![1.0, 0.6, 0.3, 0.6, 2.0, 0.5, 0.3, 0.5, 1.5]);
        let mut rng = Rng::seed_from_u64(3);
        let d = c.draws(40_000, &mut rng);
        let moment = |x: &[f32], y: &[f32]| {
            x.iter()
                .zip(y)
                .map(|(a, b)| *a as f64 * *b as f64)
                .sum::<f64>()
                / x.len() as f64
        };
        let check = |x: &[f32], y: &[f32], want: f64| {
            let got = moment(x, y);
            let se = ((moment(x, x) * moment(y, y) + want * want) / x.len() as f64).sqrt();
            assert!((got - want).abs() < 4.0 * se, "{got} vs {want} (se {se})");
        };
        let e = &d.errors;
        check(&e[0][0], &e[0][0], 0.09);
        check(&e[0][0], &e[1][1], 0.009);
        let diff: Vec<f32> = e[1][0].iter().zip(&e[2][0]).map(|(a, b)| a - b).collect();
        check(&diff, &diff, 0.225);
        check(&e[2][1], &e[2][1], 0.0225);
        // And not the independent runs' covariance 0: the shared items carry it.
        assert!(moment(&e[0][0], &e[1][1]) > 0.006);
        // The first run has no partial sums past its own count.
        assert!(e[0][1].is_empty());
    }

    #[test]
    fn a_pairs_error_is_rescaled_to_its_own_answers_variance() {
        // Model variance of the pair 1 and 2 at their 40 items: (2 + 1.5 − 1)·0.015 = 0.0375;
        // the answer reports 0.05: the draws' variance is 0.05 (normal: no degrees of
        // freedom), within 4 standard errors (0.05·√(2/40,000) each).
        let c = chain(vec![1.0, 0.6, 0.3, 0.6, 2.0, 0.5, 0.3, 0.5, 1.5]);
        let mut rng = Rng::seed_from_u64(4);
        let d = c.draws(40_000, &mut rng);
        let mut answer = inference::plain(&[0.0, 0.0], 0.0, 0.0, None, 0.95).unwrap();
        answer.variance = inference::Variance {
            sampling: 0.05,
            ..Default::default()
        };
        answer.df = None;
        let a = PairAnswer {
            estimate: answer,
            shared: 40,
        };
        let e = c.pair_errors(1, 2, &a, &d, &mut rng).unwrap();
        let v = e.iter().map(|x| x * x).sum::<f64>() / e.len() as f64;
        assert!(
            (v - 0.05).abs() < 4.0 * 0.05 * (2.0f64 / 40_000.0).sqrt(),
            "{v}"
        );
    }
}
