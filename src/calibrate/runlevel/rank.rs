//! Ranking K runs of one cell (`/v1/rank`): each run's de-biased mean as `/v1/estimate` gives
//! it, every pair's difference with intervals that hold for all pairs at once, each run's rank
//! interval, and where labels would settle what is left.
//!
//! **Simultaneous intervals (max-t).** The runs' errors are drawn jointly from the model the
//! single-run answers rest on: each plain run's own noise (independent between runs), the
//! corrector's error (one draw of (α, β) from their posterior, or one refit of the resampled
//! corrector, or one anchor offset, shared by every plain run), the groups' bias (one τ and one
//! μ per draw, shared, and each group's deviation; runs of one group share it), and each
//! labelled run's error (t on its degrees of freedom, correlated with another labelled run's
//! through the items both labelled, by the covariance of their PPI residuals there). Each pair's
//! standard error is its errors' root mean square over the draws; the critical value is the
//! level's quantile of the largest standardised pair error over the draws, so that every pair's
//! interval d̂ ± c·se covers at once with the level's probability (Hothorn, Bretz and Westfall's
//! single-step max-t; [`DRAWS`] draws put its Monte Carlo error near 0.2 points of coverage).
//! `per_pair` instead takes each pair's own quantile: no family-wise control.
//!
//! **Rank intervals.** Run k's rank (1 = highest mean) lies in [1 + #runs surely above it,
//! K − #runs surely below it], where "surely" is a simultaneous interval that excludes 0: when
//! every pair's interval covers, every run's rank interval covers its true rank, so they cover
//! jointly at the level (Mogstad, Romano, Shaikh and Wilhelm's rank confidence sets). The runs
//! tied with the top are those whose rank interval reaches 1.
//!
//! **Rounds.** A user who labels and asks again looks at the data more than once. Each look
//! (`round` r of `rounds` R, fixed before the first) is made at the family-wise level
//! 1 − α/R, so that across all R looks the chance of any wrong claim is at most α (Bonferroni
//! over looks). Labels are drawn as a uniform random sample of each run's unlabelled items
//! (seeded; where every run has the same ids, one permutation of the ids for all, so that the
//! runs' labels fall on the same prompts and what the prompts share cancels in differences),
//! so the labelled path's assumption holds at every look. `judgecal rank` measures it.
//!
//! **Labels (`Allocation`).** A pair is *open* when its interval excludes neither 0 nor a gap
//! of `min_gap`. To settle an open pair with a true gap g at power 1 − β its standard error
//! must fall to g/(c + z_{1−β}), with g = max(|d̂|, min_gap). Labelling m items of run k
//! replaces its plain variance (own noise, corrector and group terms) by the labelled path's
//! S²_k·(1/m − 1/N_k), S²_k the version's residual noise as the run's plain answer measures it
//! (or, where the run is labelled already, its own); the plan takes the runs' labelled
//! residuals as independent, which the paired labels can only improve. Runs linked by open
//! pairs form components, and a component's runs get one count: paired labels on the same
//! items cancel what the items share only when both runs have as many. Runs in no open pair get
//! none. Counts rise, a step at a time, in the component whose step removes the most excess
//! variance (Σ over open pairs of the ratio of its variance to its target, above 1) per label,
//! within the budget; then each component's count is trimmed back while every target the plan
//! reached still holds.

use nuts_rs::rand::rngs::ChaCha8Rng;
use nuts_rs::rand::seq::SliceRandom;
use nuts_rs::rand::{RngExt, SeedableRng};
use rand_distr::{ChiSquared, Distribution};

use super::inference::{self, Estimand, mean_share};
use super::{Anchored, Basis, MIN_LABELLED, Path, RunEstimate, RunItems, Settings};
use crate::calibrate::MeanUncertainty;
use crate::calibrate::error::{CalibrateError, Result};
use crate::calibrate::stats::{
    mean, normal_quantile, quantile_sorted, sample_variance, standard_normal,
};

/// The most runs one ranking takes.
pub const MAX_RUNS: usize = 50;

/// Joint draws of the runs' errors behind the critical value.
pub const DRAWS: usize = 20_000;

/// A run is first labelled with at least this many items: fewer leave the labelled path's t
/// quantile too wide to help.
pub const FIRST_LABELS: usize = 10;

/// Which error the pairs' intervals control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorRate {
    /// Every pair's interval covers at once with the level's probability.
    #[default]
    Familywise,
    /// Each pair's interval covers on its own: no control over the pairs together.
    PerPair,
}

impl ErrorRate {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorRate::Familywise => "familywise",
            ErrorRate::PerPair => "per_pair",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "familywise" => Some(ErrorRate::Familywise),
            "per_pair" => Some(ErrorRate::PerPair),
            _ => None,
        }
    }
}

/// What labels to plan for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelGoal {
    /// The most labels in all; `None`: as many as settling every open pair takes.
    pub budget: Option<usize>,
    /// Gaps smaller than this (reference units) need not be resolved.
    pub min_gap: f64,
    /// The chance of resolving a pair whose true gap is the one planned for.
    pub power: f64,
    pub seed: u64,
}

impl Default for LabelGoal {
    fn default() -> Self {
        Self {
            budget: None,
            min_gap: 0.1,
            power: 0.8,
            seed: 0,
        }
    }
}

/// How a ranking is worked out, beyond the runs' own [`Settings`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankSettings {
    pub error: ErrorRate,
    /// This look, from 1.
    pub round: usize,
    /// The looks planned in all, fixed before the first.
    pub rounds: usize,
    pub draws: usize,
    pub labels: Option<LabelGoal>,
}

impl Default for RankSettings {
    fn default() -> Self {
        Self {
            error: ErrorRate::Familywise,
            round: 1,
            rounds: 1,
            draws: DRAWS,
            labels: None,
        }
    }
}

impl RankSettings {
    /// The level each look's intervals hold at together: 1 − α/rounds.
    pub fn family_level(&self, level: f64) -> f64 {
        1.0 - (1.0 - level) / self.rounds.max(1) as f64
    }
}

/// One run in a ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedRun {
    pub estimate: RunEstimate,
    /// The ranks compatible with the pairs' intervals (1 = highest mean).
    pub rank: (usize, usize),
}

/// A pair of runs, A − B (indices into the runs, A before B).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedPair {
    pub a: usize,
    pub b: usize,
    pub difference: f64,
    pub interval: (f64, f64),
    pub standard_error: f64,
}

impl RankedPair {
    /// Which run is surely higher, where the interval excludes 0.
    pub fn higher(&self) -> Option<usize> {
        if self.interval.0 > 0.0 {
            Some(self.a)
        } else if self.interval.1 < 0.0 {
            Some(self.b)
        } else {
            None
        }
    }

    /// Whether the interval lies within ±`gap`: the pair is settled as close.
    pub fn within(&self, gap: f64) -> bool {
        self.interval.0 > -gap && self.interval.1 < gap
    }
}

/// Where labels would settle the ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub goal: LabelGoal,
    /// Labels to add, per run.
    pub add: Vec<usize>,
    /// Which items of each run to label (indices into the run, in the order to label them).
    pub items: Vec<Vec<usize>>,
    /// Open pairs the plan targets.
    pub open: usize,
    /// Open pairs whose target the plan reaches.
    pub reached: usize,
    /// The same targets reached with one count for every run: that count times the runs
    /// (`None` where no uniform count reaches them).
    pub uniform: Option<usize>,
    /// Whether every run shares the same ids, so the labels fall on the same items.
    pub paired: bool,
}

impl Allocation {
    pub fn total(&self) -> usize {
        self.add.iter().sum()
    }
}

/// A ranking of runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    pub runs: Vec<RankedRun>,
    /// Every pair, (0, 1), (0, 2), … .
    pub pairs: Vec<RankedPair>,
    /// The critical value of the family (max-t), or the largest per-pair one.
    pub critical: f64,
    /// The level the pairs' intervals hold at together this round.
    pub family_level: f64,
    pub allocation: Option<Allocation>,
}

impl Ranking {
    /// Run indices by estimate, highest first.
    pub fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.runs.len()).collect();
        order.sort_by(|&i, &k| {
            self.runs[k]
                .estimate
                .mean
                .estimate
                .total_cmp(&self.runs[i].estimate.mean.estimate)
        });
        order
    }

    /// The runs tied with the top: rank interval reaching 1.
    pub fn top(&self) -> Vec<usize> {
        self.order()
            .into_iter()
            .filter(|&k| self.runs[k].rank.0 == 1)
            .collect()
    }
}

/// Ranks `runs` (at least 2, at most [`MAX_RUNS`]) by their de-biased means.
pub fn rank(
    basis: Basis,
    runs: &[RunItems],
    settings: &Settings,
    how: &RankSettings,
) -> Result<Ranking> {
    if runs.len() < 2 || runs.len() > MAX_RUNS {
        return Err(CalibrateError::TooFew(format!(
            "{} runs; a ranking takes 2 to {MAX_RUNS}",
            runs.len()
        )));
    }
    let settings = Settings {
        estimand: Estimand::Runs,
        ..*settings
    };
    let anchored = Anchored::new(basis)?;
    let estimates: Vec<RunEstimate> = runs
        .iter()
        .enumerate()
        .map(|(k, r)| {
            anchored
                .estimate(r, &settings)
                .map_err(|e| super::named(&format!("run {}", k + 1), e))
        })
        .collect::<Result<_>>()?;
    let mut rng = ChaCha8Rng::seed_from_u64(settings.seed ^ 0x7A11);
    let errors = joint_errors(&anchored, runs, &estimates, &settings, how.draws, &mut rng)?;
    let family_level = how.family_level(settings.level);
    let (pairs, critical) = pair_intervals(&estimates, &errors, how.error, family_level);
    let k = runs.len();
    let ranked: Vec<RankedRun> = estimates
        .into_iter()
        .enumerate()
        .map(|(i, estimate)| {
            let (above, below) = pairs.iter().fold((0, 0), |(above, below), p| {
                let h = p.higher();
                match (p.a == i || p.b == i, h) {
                    (true, Some(h)) if h == i => (above, below + 1),
                    (true, Some(_)) => (above + 1, below),
                    _ => (above, below),
                }
            });
            RankedRun {
                estimate,
                rank: (1 + above, k - below),
            }
        })
        .collect();
    let mut ranking = Ranking {
        runs: ranked,
        pairs,
        critical,
        family_level,
        allocation: None,
    };
    if let Some(goal) = how.labels {
        ranking.allocation = Some(allocate(&ranking, runs, &goal));
    }
    Ok(ranking)
}

/// `draws` joint draws of every run's error (estimate − truth), row-major (draw × run).
fn joint_errors(
    anchored: &Anchored,
    runs: &[RunItems],
    estimates: &[RunEstimate],
    settings: &Settings,
    draws: usize,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<f64>> {
    let k = runs.len();
    let mut errors = vec![0.0; draws * k];
    let plain: Vec<usize> = (0..k)
        .filter(|&i| estimates[i].path == Path::Plain)
        .collect();
    // The runs' own noise, independent between plain runs.
    for &i in &plain {
        let sd = estimates[i].mean.variance.sampling.max(0.0).sqrt();
        for d in 0..draws {
            errors[d * k + i] += sd * standard_normal(rng);
        }
    }
    if !plain.is_empty() {
        corrector_errors(anchored, runs, &plain, settings, &mut errors, k, rng)?;
        if let Some(g) = anchored.basis.groups {
            let names: Vec<Option<&str>> =
                plain.iter().map(|&i| runs[i].group.as_deref()).collect();
            for (d, row) in g.joint_errors(&names, draws, rng).iter().enumerate() {
                for (&i, e) in plain.iter().zip(row) {
                    errors[d * k + i] += e;
                }
            }
        }
    }
    labelled_errors(anchored, runs, estimates, &mut errors, k, rng)?;
    Ok(errors)
}

/// Adds the corrector's error, shared by the plain runs `plain`, to each draw.
fn corrector_errors(
    anchored: &Anchored,
    runs: &[RunItems],
    plain: &[usize],
    settings: &Settings,
    errors: &mut [f64],
    k: usize,
    rng: &mut ChaCha8Rng,
) -> Result<()> {
    let draws = errors.len() / k;
    // With a group term, a plain answer keeps only what the run's scores add beyond the
    // anchors' (`Anchored::plain`): the corrector at the run's scores less at the anchors'.
    let grouped = anchored.basis.groups.is_some();
    let anchor_mean = mean(&anchored.judge_scores);
    match anchored.basis.model.mean_uncertainty() {
        MeanUncertainty::Line(p) => {
            // (δα, δβ) ~ N(0, posterior covariance), by its Cholesky factor.
            let l11 = p.alpha_var.max(0.0).sqrt();
            let l21 = if l11 > 0.0 {
                p.alpha_beta_cov / l11
            } else {
                0.0
            };
            let l22 = (p.beta_var - l21 * l21).max(0.0).sqrt();
            let weights: Vec<(f64, f64)> = plain
                .iter()
                .map(|&i| {
                    let j = mean(&runs[i].scores);
                    if grouped {
                        (0.0, j - anchor_mean)
                    } else {
                        (1.0, j)
                    }
                })
                .collect();
            for d in 0..draws {
                let (z1, z2) = (standard_normal(rng), standard_normal(rng));
                let (da, db) = (l11 * z1, l21 * z1 + l22 * z2);
                for (&i, (wa, wb)) in plain.iter().zip(&weights) {
                    errors[d * k + i] += wa * da + wb * db;
                }
            }
        }
        MeanUncertainty::Offset => {
            // The anchors' mean residual, shared by every plain run (cancelled by a group
            // term, which carries it).
            let r = &anchored.residuals;
            if !grouped && r.len() >= 2 {
                let sd = (sample_variance(r) / r.len() as f64).sqrt();
                for d in 0..draws {
                    let e = sd * standard_normal(rng);
                    for &i in plain {
                        errors[d * k + i] += e;
                    }
                }
            }
        }
        MeanUncertainty::Omitted(_) => {}
        MeanUncertainty::Resample => {
            let mut scores: Vec<&[f64]> =
                plain.iter().map(|&i| runs[i].scores.as_slice()).collect();
            scores.push(&anchored.judge_scores);
            let (_, resampled) = anchored.resampled(&scores, settings)?;
            // One refit per draw, centred on the refits' mean, at the bootstrap's scale.
            let refits = &resampled.means;
            let centre: Vec<f64> = (0..scores.len())
                .map(|h| mean(&refits.iter().map(|m| m[h]).collect::<Vec<_>>()))
                .collect();
            let scale = resampled.bootstrap_scale.sqrt();
            let at_anchors = plain.len();
            for d in 0..draws {
                let m = &refits[rng.random_range(0..refits.len())];
                let base = if grouped {
                    m[at_anchors] - centre[at_anchors]
                } else {
                    0.0
                };
                for (h, &i) in plain.iter().enumerate() {
                    errors[d * k + i] += scale * (m[h] - centre[h] - base);
                }
            }
        }
    }
    Ok(())
}

/// One labelled run's PPI residuals (reference − λ·corrected) on its labelled items, by item.
struct Labelled {
    run: usize,
    residual: Vec<Option<f64>>,
    n: usize,
    big_n: usize,
    variance: f64,
    df: Option<f64>,
}

/// Adds the labelled runs' errors: normal with the covariance their shared labelled items
/// give, each scaled by its own t draw.
fn labelled_errors(
    anchored: &Anchored,
    runs: &[RunItems],
    estimates: &[RunEstimate],
    errors: &mut [f64],
    k: usize,
    rng: &mut ChaCha8Rng,
) -> Result<()> {
    let draws = errors.len() / k;
    let mut block: Vec<Labelled> = Vec::new();
    for (i, (run, e)) in runs.iter().zip(estimates).enumerate() {
        if e.path != Path::Labelled {
            continue;
        }
        let lambda = e.mean.lambda.unwrap_or(1.0);
        let corrected = anchored.corrected(&run.scores)?;
        let residual = run
            .references()
            .iter()
            .zip(&corrected)
            .map(|(y, f)| y.map(|y| y - lambda * f))
            .collect();
        block.push(Labelled {
            run: i,
            residual,
            n: e.mean.labelled,
            big_n: e.mean.n,
            variance: e.mean.variance.total(),
            df: e.mean.df,
        });
    }
    if block.is_empty() {
        return Ok(());
    }
    let l = block.len();
    let mut cov = vec![0.0; l * l];
    for a in 0..l {
        cov[a * l + a] = block[a].variance;
        for b in 0..a {
            let c = labelled_covariance(&block[a], &block[b], runs);
            cov[a * l + b] = c;
            cov[b * l + a] = c;
        }
    }
    let factor = cholesky(&cov, l).unwrap_or_else(|| {
        // Not positive definite (covariances from few shared items): independent.
        let mut d = vec![0.0; l * l];
        for a in 0..l {
            d[a * l + a] = block[a].variance.max(0.0).sqrt();
        }
        d
    });
    let chi: Vec<Option<ChiSquared<f64>>> = block
        .iter()
        .map(|b| {
            b.df.filter(|df| df.is_finite() && *df < 200.0)
                .and_then(|df| ChiSquared::new(df).ok())
        })
        .collect();
    let mut z = vec![0.0; l];
    for d in 0..draws {
        for x in z.iter_mut() {
            *x = standard_normal(rng);
        }
        for a in 0..l {
            let x: f64 = (0..=a).map(|b| factor[a * l + b] * z[b]).sum();
            let t = match &chi[a] {
                Some(c) => {
                    let df = block[a].df.unwrap_or(f64::INFINITY);
                    (df / c.sample(rng).max(1e-12)).sqrt()
                }
                None => 1.0,
            };
            errors[d * k + block[a].run] += x * t;
        }
    }
    Ok(())
}

/// The covariance of two labelled runs' errors, from the items both labelled (runs paired by
/// id): (m/(n_a·n_b) − 1/N)·S_ab, S_ab the residuals' covariance on the m shared items; 0 for
/// runs not paired, or with clusters (whose errors the single-run answers treat by cluster).
fn labelled_covariance(a: &Labelled, b: &Labelled, runs: &[RunItems]) -> f64 {
    let (ra, rb) = (&runs[a.run], &runs[b.run]);
    if ra.clusters.is_some() || rb.clusters.is_some() || a.big_n != b.big_n {
        return 0.0;
    }
    let Some(pairs) = super::pairing(ra, rb) else {
        return 0.0;
    };
    let shared: Vec<(f64, f64)> = pairs
        .iter()
        .filter_map(|&(i, j)| a.residual[i].zip(b.residual[j]))
        .collect();
    let m = shared.len();
    if m < 3 {
        return 0.0;
    }
    let (mx, my) = (
        shared.iter().map(|p| p.0).sum::<f64>() / m as f64,
        shared.iter().map(|p| p.1).sum::<f64>() / m as f64,
    );
    let s = shared.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / (m as f64 - 1.0);
    let c = (m as f64 / (a.n * b.n) as f64 - 1.0 / a.big_n as f64) * s;
    // Never beyond a correlation of 0.99.
    let bound = 0.99 * (a.variance * b.variance).max(0.0).sqrt();
    c.clamp(-bound, bound)
}

/// The lower Cholesky factor of the `n`×`n` matrix `m` (row-major); `None` where it is not
/// positive definite.
fn cholesky(m: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            if i == j {
                let d = m[i * n + i] - s;
                if d <= 0.0 {
                    return None;
                }
                l[i * n + i] = d.sqrt();
            } else {
                l[i * n + j] = (m[i * n + j] - s) / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// Every pair's interval and the critical value, from the joint draws `errors`.
fn pair_intervals(
    estimates: &[RunEstimate],
    errors: &[f64],
    error: ErrorRate,
    level: f64,
) -> (Vec<RankedPair>, f64) {
    let k = estimates.len();
    let draws = errors.len() / k;
    let index: Vec<(usize, usize)> = (0..k)
        .flat_map(|a| (a + 1..k).map(move |b| (a, b)))
        .collect();
    let se: Vec<f64> = index
        .iter()
        .map(|&(a, b)| {
            let ss: f64 = (0..draws)
                .map(|d| (errors[d * k + a] - errors[d * k + b]).powi(2))
                .sum();
            (ss / draws.max(1) as f64).sqrt()
        })
        .collect();
    let standardised = |d: usize, p: usize| {
        let (a, b) = index[p];
        if se[p] > 0.0 {
            (errors[d * k + a] - errors[d * k + b]).abs() / se[p]
        } else {
            0.0
        }
    };
    let critical: Vec<f64> = match error {
        ErrorRate::Familywise => {
            let mut largest: Vec<f64> = (0..draws)
                .map(|d| {
                    (0..index.len())
                        .map(|p| standardised(d, p))
                        .fold(0.0, f64::max)
                })
                .collect();
            largest.sort_by(f64::total_cmp);
            vec![quantile_sorted(&largest, level); index.len()]
        }
        ErrorRate::PerPair => (0..index.len())
            .map(|p| {
                let mut own: Vec<f64> = (0..draws).map(|d| standardised(d, p)).collect();
                own.sort_by(f64::total_cmp);
                quantile_sorted(&own, level)
            })
            .collect(),
    };
    let pairs = index
        .iter()
        .enumerate()
        .map(|(p, &(a, b))| {
            let d = estimates[a].mean.estimate - estimates[b].mean.estimate;
            let half = critical[p] * se[p];
            RankedPair {
                a,
                b,
                difference: d,
                interval: (d - half, d + half),
                standard_error: se[p],
            }
        })
        .collect();
    (pairs, critical.iter().cloned().fold(0.0, f64::max))
}

/// What a run's answer would be with `m` labels in all, for planning.
#[derive(Debug, Clone, Copy)]
struct Planned {
    /// The plain answer's variance (`None` for a run labelled already).
    plain: Option<f64>,
    labelled: usize,
    n: usize,
    /// The noise of one labelled item's residual.
    noise: f64,
}

impl Planned {
    fn of(run: &RunItems, e: &RunEstimate) -> Self {
        let n = e.mean.n;
        match e.path {
            Path::Plain => Planned {
                plain: Some(e.mean.variance.total()),
                labelled: 0,
                n,
                noise: e.mean.variance.sampling
                    / mean_share(run.scores.len(), run.clusters.as_deref()),
            },
            Path::Labelled => {
                let m = e.mean.labelled;
                let fpc = (1.0 / m as f64 - 1.0 / n as f64).max(1e-12);
                Planned {
                    plain: None,
                    labelled: m,
                    n,
                    noise: e.mean.variance.sampling / fpc,
                }
            }
        }
    }

    /// The variance with `m` labels in all (the plain one at 0), its t quantile's excess over
    /// the normal folded in.
    fn variance(&self, m: usize, level: f64) -> f64 {
        if m < MIN_LABELLED {
            return self.plain.unwrap_or(f64::INFINITY);
        }
        let df = if m < inference::MIN_TUNED {
            m - 1
        } else {
            m - 2
        } as f64;
        let inflate = (inference::quantile(level, Some(df.max(1.0)))
            / inference::quantile(level, None))
        .powi(2);
        let labelled = self.noise * (1.0 / m as f64 - 1.0 / self.n as f64).max(0.0) * inflate;
        match self.plain {
            // A plain run with few labels is better left plain.
            Some(v) if m < FIRST_LABELS => v,
            _ => labelled,
        }
    }
}

/// Plans labels for the open pairs of `ranking`.
fn allocate(ranking: &Ranking, runs: &[RunItems], goal: &LabelGoal) -> Allocation {
    let level = ranking.family_level;
    let planned: Vec<Planned> = runs
        .iter()
        .zip(&ranking.runs)
        .map(|(r, e)| Planned::of(r, &e.estimate))
        .collect();
    let start: Vec<usize> = planned.iter().map(|p| p.labelled).collect();
    let z = normal_quantile(goal.power.clamp(0.5, 0.999));
    // Open pairs as (a, b, variance now, the variance that settles them).
    let open: Vec<(usize, usize, f64, f64)> = ranking
        .pairs
        .iter()
        .filter(|p| p.higher().is_none() && !p.within(goal.min_gap))
        .map(|p| {
            let gap = p.difference.abs().max(goal.min_gap);
            let target = (gap / (ranking.critical + z)).powi(2);
            (p.a, p.b, p.standard_error.powi(2), target)
        })
        .collect();
    // A pair's variance with `m` labels: as now where neither run gains any; otherwise the
    // two runs' planned variances, as independent.
    let variance = |m: &[usize], a: usize, b: usize, now: f64| {
        if m[a] == start[a] && m[b] == start[b] {
            now
        } else {
            planned[a].variance(m[a], level) + planned[b].variance(m[b], level)
        }
    };
    let excess = |m: &[usize]| -> f64 {
        open.iter()
            .map(|&(a, b, now, target)| (variance(m, a, b, now) / target - 1.0).max(0.0))
            .sum()
    };
    let met = |m: &[usize]| -> usize {
        open.iter()
            .filter(|&&(a, b, now, target)| variance(m, a, b, now) <= target * (1.0 + 1e-9))
            .count()
    };
    // The runs of open pairs, in components linked by open pairs: a paired difference gains
    // most when both runs label the same items, as many, so a component's runs share one
    // count (a run labelled already keeps its own where that is more).
    let mut component: Vec<usize> = (0..runs.len()).collect();
    fn root(c: &mut [usize], i: usize) -> usize {
        let mut r = i;
        while c[r] != r {
            r = c[r];
        }
        c[i] = r;
        r
    }
    for &(a, b, _, _) in &open {
        let (ra, rb) = (root(&mut component, a), root(&mut component, b));
        component[ra] = rb;
    }
    let mut members: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for &(a, b, _, _) in &open {
        for i in [a, b] {
            let r = root(&mut component, i);
            let list = members.entry(r).or_default();
            if !list.contains(&i) {
                list.push(i);
            }
        }
    }
    let members: Vec<Vec<usize>> = members.into_values().collect();
    let with = |counts: &[usize]| -> Vec<usize> {
        let mut m = start.clone();
        for (c, list) in counts.iter().zip(&members) {
            for &i in list {
                m[i] = start[i].max(*c).min(planned[i].n);
            }
        }
        m
    };
    let cost = |m: &[usize]| -> usize { m.iter().zip(&start).map(|(a, b)| a - b).sum() };
    let budget = goal.budget.unwrap_or(usize::MAX);
    let mut counts = vec![0usize; members.len()];
    let mut current = excess(&with(&counts));
    while current > 1e-12 {
        // The step (a component, a count) that removes the most excess per label; steps
        // double, so a component whose first labels only pay off in number is still seen.
        let spent = cost(&with(&counts));
        let mut best: Option<(f64, usize, usize)> = None;
        for (c, list) in members.iter().enumerate() {
            let most = list.iter().map(|&i| planned[i].n).max().unwrap_or(0);
            let mut candidates = Vec::new();
            let mut x = if counts[c] == 0 {
                FIRST_LABELS
            } else {
                counts[c] + (counts[c] / 4).max(1)
            };
            while x < most {
                candidates.push(x);
                x *= 2;
            }
            if most > counts[c] {
                candidates.push(most);
            }
            for next in candidates {
                let mut trial = counts.clone();
                trial[c] = next;
                let m = with(&trial);
                let added = cost(&m).saturating_sub(spent);
                if added > 0 && spent + added <= budget {
                    let gain = (current - excess(&m)) / added as f64;
                    if gain > 1e-12 && best.is_none_or(|b| gain > b.0) {
                        best = Some((gain, c, next));
                    }
                }
            }
        }
        let Some((_, c, count)) = best else { break };
        counts[c] = count;
        current = excess(&with(&counts));
    }
    // Trim each component back to the fewest labels that keep every target the plan met.
    let reached = met(&with(&counts));
    for c in 0..members.len() {
        let (mut lo, mut hi) = (0, counts[c]);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let mut trial = counts.clone();
            trial[c] = if mid > 0 && mid < FIRST_LABELS {
                FIRST_LABELS
            } else {
                mid
            };
            if met(&with(&trial)) >= reached {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        counts[c] = if hi > 0 && hi < FIRST_LABELS {
            FIRST_LABELS
        } else {
            hi
        }
        .min(counts[c]);
    }
    let m = with(&counts);
    let uniform = uniform_total(&open, &planned, &variance);
    let add: Vec<usize> = m.iter().zip(&start).map(|(a, b)| a - b).collect();
    let (items, paired) = draw_items(runs, &add, goal.seed);
    Allocation {
        goal: *goal,
        add,
        items,
        open: open.len(),
        reached: met(&m),
        uniform,
        paired,
    }
}

/// A pair's planned variance: (labels per run, a, b, its variance now).
type PairVariance<'a> = dyn Fn(&[usize], usize, usize, f64) -> f64 + 'a;

/// The fewest labels, one count for every run, that reach every open pair's target.
fn uniform_total(
    open: &[(usize, usize, f64, f64)],
    planned: &[Planned],
    variance: &PairVariance,
) -> Option<usize> {
    let counts =
        |c: usize| -> Vec<usize> { planned.iter().map(|p| p.labelled.max(c).min(p.n)).collect() };
    let ok = |c: usize| {
        let m = counts(c);
        open.iter()
            .all(|&(a, b, now, target)| variance(&m, a, b, now) <= target * (1.0 + 1e-9))
    };
    let most = planned.iter().map(|p| p.n).max().unwrap_or(0);
    if !ok(most) {
        return None;
    }
    let (mut lo, mut hi) = (0, most);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(
        counts(lo)
            .iter()
            .zip(planned)
            .map(|(m, p)| m - p.labelled)
            .sum(),
    )
}

/// Which items to label: `add[k]` of run k's unlabelled items, a seeded uniform sample. Where
/// every run has the same ids, one permutation of the ids serves all, so that the labels fall
/// on the same items.
fn draw_items(runs: &[RunItems], add: &[usize], seed: u64) -> (Vec<Vec<usize>>, bool) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1ABE1);
    let shared_ids = runs[0].ids.is_some()
        && runs
            .windows(2)
            .all(|w| super::pairing(&w[0], &w[1]).is_some());
    if shared_ids {
        let mut ids: Vec<&str> = runs[0]
            .ids
            .as_ref()
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default();
        ids.sort_unstable();
        ids.shuffle(&mut rng);
        let items = runs
            .iter()
            .zip(add)
            .map(|(r, &n)| {
                let position: std::collections::HashMap<&str, usize> = r
                    .ids
                    .iter()
                    .flatten()
                    .enumerate()
                    .map(|(i, id)| (id.as_str(), i))
                    .collect();
                let refs = r.references();
                ids.iter()
                    .filter_map(|id| position.get(id).copied())
                    .filter(|&i| refs[i].is_none())
                    .take(n)
                    .collect()
            })
            .collect();
        return (items, true);
    }
    let items = runs
        .iter()
        .zip(add)
        .map(|(r, &n)| {
            let refs = r.references();
            let mut free: Vec<usize> = (0..r.scores.len()).filter(|&i| refs[i].is_none()).collect();
            free.shuffle(&mut rng);
            free.truncate(n);
            free
        })
        .collect();
    (items, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_factors_a_known_matrix_and_refuses_an_indefinite_one() {
        // [[4, 2], [2, 5]] = L·Lᵀ with L = [[2, 0], [1, 2]].
        let l = cholesky(&[4.0, 2.0, 2.0, 5.0], 2).unwrap();
        assert_eq!(l, vec![2.0, 0.0, 1.0, 2.0]);
        assert!(cholesky(&[1.0, 2.0, 2.0, 1.0], 2).is_none());
    }

    fn estimate(value: f64) -> RunEstimate {
        let mut e = crate::calibrate::runlevel::RunEstimate {
            path: Path::Plain,
            mean: inference::plain(&[value, value], 0.0, 0.0, None, 0.95).unwrap(),
            term: super::super::Term::Posterior,
            support: super::super::Support {
                anchor_range: (1.0, 5.0),
                outside: 0.0,
                thin: 0.0,
            },
            transport: None,
            advice: None,
            group: super::super::GroupAnswer::none(),
        };
        e.mean.estimate = value;
        e
    }

    #[test]
    fn the_max_t_critical_value_matches_known_quantiles() {
        // Independent N(0, 1) errors. Two runs: one pair, whose 95% point is 1.96. Three runs:
        // three pairs of correlation ±0.5, whose max-|t| 95% point (Tukey's studentised range
        // for 3 means at infinite df, 3.314/√2 = 2.343) lies between the single pair's and
        // Bonferroni's 2.394. Monte Carlo error of 20,000 draws: about ±0.02.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for (k, want) in [(2, 1.960), (3, 2.343)] {
            let errors: Vec<f64> = (0..DRAWS * k).map(|_| standard_normal(&mut rng)).collect();
            let estimates: Vec<RunEstimate> = (0..k).map(|i| estimate(i as f64)).collect();
            let (pairs, c) = pair_intervals(&estimates, &errors, ErrorRate::Familywise, 0.95);
            assert!((c - want).abs() < 0.03, "{k} runs: {c}");
            assert!((pairs[0].standard_error - 2f64.sqrt()).abs() < 0.03);
            // Per pair, each pair's own 95% point.
            let (_, c) = pair_intervals(&estimates, &errors, ErrorRate::PerPair, 0.95);
            assert!((c - 1.96).abs() < 0.05, "{k} runs per pair: {c}");
        }
    }
}
