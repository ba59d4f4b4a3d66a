//! One cell's calibrator version as a run-level source: its model with the anchors it could
//! have been fitted on, their residuals, the noise of a reference around a corrected score, and
//! the groups it measured.

use super::groups::{BiasShift, GroupBias, GroupTerm};
use super::inference::{self, Difference, Estimand, MeanEstimate};
use super::leverage::Leverage;
use super::resample;
use super::source::Source;
use super::{
    Advice, AnswerPath, AnswerSettings, Basis, GroupAnswer, HISTOGRAM_BINS, Histograms,
    MIN_LABELLED, RunComparison, RunEstimate, RunItems, Support, THIN_ANCHORS, Term, Transport,
    named, pairing,
};
use crate::MeanUncertainty;
use crate::error::{CalibrateError, Result};
use crate::rng::{Rng, RngExt};
use crate::stats::{mean, sample_variance, standard_normal};

/// The corrector's own uncertainty in an answer.
struct CorrectorTerm {
    /// Of the answer, from the corrector's finite anchors.
    variance: f64,
    term: Term,
    /// Of a reference around its corrected score (out of bag where the corrector was
    /// refitted: in-sample residuals understate it for a flexible fit).
    noise_var: f64,
    /// The fit's bias in the answer, as the refits estimate it (0 where not refitted): a
    /// flexible fit's mean over new scores is not its mean over its anchors.
    bias: f64,
}

/// What the corrector's anchors say: its residuals on them, the noise of a reference around
/// a corrected score, and the shift the plain path adds.
pub struct Anchored<'a> {
    basis: Basis<'a>,
    residuals: Vec<f64>,
    noise_var: f64,
    shift: f64,
    /// The anchors' judge scores, sorted (the support check).
    judge_scores: Vec<f64>,
    /// The references' level spacing (0 for a continuous scale): the labelled path's floor.
    spacing: f64,
    /// The groups of judge scores a resampled term averages each run over (made by the first
    /// answer that resamples).
    bins: std::cell::OnceCell<resample::Bins>,
    /// The resampled corrector's refits, fitted at the first answer that needs them, with the
    /// (refits, seed) they were fitted for; every later run of the same request reuses them.
    refits: std::cell::OnceCell<((usize, u64), resample::Refits)>,
}

impl<'a> Anchored<'a> {
    pub fn new(basis: Basis<'a>) -> Result<Self> {
        let pairs = &basis.anchors.pairs;
        if pairs.len() < 2 {
            return Err(CalibrateError::TooFew(format!(
                "the version's cell has {} anchors; an estimate needs at least 2 to know how far a reference lies from its corrected score",
                pairs.len()
            )));
        }
        let js: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let fitted = basis.model.correct(&js)?;
        let residuals: Vec<f64> = pairs
            .iter()
            .zip(&fitted)
            .map(|(p, c)| p.1 - c.score)
            .collect();
        let mean_square = residuals.iter().map(|r| r * r).sum::<f64>() / residuals.len() as f64;
        let (noise_var, shift) = match basis.model.mean_uncertainty() {
            MeanUncertainty::Line(p) => (p.sigma2_mean, 0.0),
            MeanUncertainty::Offset => (sample_variance(&residuals), mean(&residuals)),
            MeanUncertainty::Resample | MeanUncertainty::Omitted(_) => (mean_square, 0.0),
        };
        let mut judge_scores = js;
        judge_scores.sort_by(f64::total_cmp);
        let references: Vec<f64> = pairs.iter().map(|p| p.1).collect();
        Ok(Self {
            basis,
            residuals,
            noise_var,
            shift,
            bins: std::cell::OnceCell::new(),
            judge_scores,
            spacing: crate::quality::level_spacing(&references),
            refits: std::cell::OnceCell::new(),
        })
    }

    /// The variance of a reference of `run` around its corrected score, from the corrector's
    /// `noise_var`: scaled to its group's own where the anchors know it (systems differ in
    /// it) and to its items' number of scores, none where the run's references are
    /// conditioned on.
    fn noise_of(&self, run: &RunItems, noise_var: f64) -> f64 {
        if run.conditional {
            return 0.0;
        }
        let ratio = self
            .basis
            .groups
            .map_or(1.0, |g| g.noise_ratio(run.group.as_deref()));
        noise_var * ratio * run.noise_ratio.unwrap_or(1.0)
    }

    /// The group term of a run of `group`.
    fn group_shift(&self, group: Option<&str>) -> BiasShift {
        self.basis
            .groups
            .map_or(BiasShift::none(), |g| g.shift(group))
    }

    fn support(&self, scores: &[f64]) -> Support {
        let (lo, hi) = self
            .basis
            .anchors
            .pairs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                (lo.min(p.0), hi.max(p.0))
            });
        let js = &self.judge_scores;
        let radius = (hi - lo) / 20.0;
        let least = (js.len() / 80).min(THIN_ANCHORS);
        let thin = scores
            .iter()
            .filter(|&&j| {
                let from = js.partition_point(|&x| x < j - radius);
                let to = js.partition_point(|&x| x <= j + radius);
                to - from < least.max(1)
            })
            .count() as f64
            / scores.len().max(1) as f64;
        Support {
            anchor_range: (lo, hi),
            outside: inference::outside_support(scores, lo, hi),
            thin,
        }
    }

    fn corrected(&self, scores: &[f64]) -> Result<Vec<f64>> {
        Ok(self
            .basis
            .model
            .correct(scores)?
            .iter()
            .map(|c| c.score)
            .collect())
    }

    /// Refits of the corrector on resampled anchors, each averaged over every run of `runs`
    /// (their shared histograms, returned too).
    fn resampled(
        &self,
        runs: &[&[f64]],
        settings: &AnswerSettings,
    ) -> Result<(Histograms, resample::Resampled)> {
        let bins = self
            .bins
            .get_or_init(|| resample::Bins::of_anchors(&self.judge_scores, HISTOGRAM_BINS));
        let histograms: Histograms = runs.iter().map(|r| bins.histogram(r)).collect();
        let key = (settings.refits.max(2), settings.seed);
        let fit = || {
            let options = self.basis.model.method().default_options();
            resample::Refits::new(&options, self.basis.anchors, key.0, key.1)
        };
        let resampled = match self.refits.get() {
            Some((k, refits)) if *k == key => refits.means(&histograms)?,
            Some(_) => fit()?.means(&histograms)?,
            None => {
                let refits = fit()?;
                let resampled = refits.means(&histograms)?;
                let _ = self.refits.set((key, refits));
                resampled
            }
        };
        Ok((histograms, resampled))
    }

    /// What the corrector's own uncertainty does to Σ_k `weights[k]`·(run k's mean corrected
    /// score).
    fn corrector_term(
        &self,
        runs: &[&[f64]],
        weights: &[f64],
        settings: &AnswerSettings,
    ) -> Result<CorrectorTerm> {
        let total: f64 = weights.iter().sum();
        let (v, term) = match self.basis.model.mean_uncertainty() {
            MeanUncertainty::Line(p) => {
                // Var(a·α + b·β) with a = Σ w_k, b = Σ w_k·j̄_k. Over the population of
                // prompts b is an estimate of its expectation, and b² overstates the square of
                // that by b's own sampling variance: it is taken off.
                let b: f64 = runs.iter().zip(weights).map(|(r, w)| w * mean(r)).sum();
                let b2 = match settings.estimand {
                    Estimand::Runs => b * b,
                    Estimand::Population => {
                        let var_b: f64 = runs
                            .iter()
                            .zip(weights)
                            .map(|(r, w)| w * w * sample_variance(r) / r.len().max(1) as f64)
                            .sum();
                        (b * b - var_b).max(0.0)
                    }
                };
                let v = total * total * p.alpha_var
                    + b2 * p.beta_var
                    + 2.0 * total * b * p.alpha_beta_cov;
                (v.max(0.0), Term::Posterior)
            }
            MeanUncertainty::Offset => (
                total * total * sample_variance(&self.residuals) / self.residuals.len() as f64,
                Term::AnchorOffset,
            ),
            MeanUncertainty::Omitted(why) => (0.0, Term::Omitted(why)),
            MeanUncertainty::Resample => {
                let (histograms, resampled) = self.resampled(runs, settings)?;
                // The bootstrap's estimate of the fit's bias for this combination: the refits'
                // mean less the fit's own, both over the runs' groups.
                let mut fitted = 0.0;
                for (h, w) in histograms.iter().zip(weights) {
                    let xs: Vec<f64> = h.iter().map(|p| p.0).collect();
                    let c = self.basis.model.correct(&xs)?;
                    fitted += w * h.iter().zip(&c).map(|(p, c)| p.1 * c.score).sum::<f64>();
                }
                let refitted = resampled
                    .means
                    .iter()
                    .map(|m| m.iter().zip(weights).map(|(x, w)| x * w).sum::<f64>())
                    .sum::<f64>()
                    / resampled.means.len() as f64;
                // A fit's bias falls as 1/anchors: refits on m < n anchors measure n/m times
                // the bias of a fit on all n, so it is scaled by m/n.
                return Ok(CorrectorTerm {
                    variance: resampled.variance(weights),
                    term: Term::Resampled(settings.refits.max(2)),
                    noise_var: resampled
                        .out_of_bag_mean_square
                        .unwrap_or(self.noise_var)
                        .max(self.noise_var),
                    bias: (refitted - fitted) * resampled.bootstrap_scale,
                });
            }
        };
        Ok(CorrectorTerm {
            variance: v,
            term,
            noise_var: self.noise_var,
            bias: 0.0,
        })
    }

    /// The plain estimate of one run whose corrected scores are `corrected`.
    ///
    /// With a group term, the groups' held-out residuals carry the corrector's error in level
    /// (and an identity version's offset, and a flexible fit's bias at the anchors) as every
    /// residual does: the group term corrects them, so the corrector term keeps only what the
    /// run's scores add beyond the anchors' (the run's mean corrected score less the
    /// anchors'), and its bootstrap bias is of that contrast too. One bias treatment for every
    /// answer: a difference of two estimates is the compare's (`compare_runs` subtracts the
    /// bias of run A less run B, which is the bias of (A − anchors) less (B − anchors)), and
    /// a ranking's pairs are differences of estimates.
    fn plain(
        &self,
        run: &RunItems,
        corrected: &[f64],
        settings: &AnswerSettings,
        group: &BiasShift,
    ) -> Result<(MeanEstimate, Term)> {
        let grouped = group.term != GroupTerm::Unmeasured;
        let t = if grouped {
            self.corrector_term(&[&run.scores, &self.judge_scores], &[1.0, -1.0], settings)?
        } else {
            self.corrector_term(&[&run.scores], &[1.0], settings)?
        };
        let mut e = inference::plain(
            corrected,
            self.noise_of(run, t.noise_var),
            t.variance,
            run.clusters.as_deref(),
            settings.level,
        )?
        .with_extra_sampling(run.extra_sampling(), settings.level);
        let shift = if grouped {
            -t.bias
        } else {
            self.shift - t.bias
        };
        e.estimate += shift;
        e.interval = (e.interval.0 + shift, e.interval.1 + shift);
        Ok((e.with_group(group, settings.level), t.term))
    }

    /// One run's estimate: labelled where it has labelled items, plain otherwise.
    fn estimate(&self, run: &RunItems, settings: &AnswerSettings) -> Result<RunEstimate> {
        let corrected = self.corrected(&run.scores)?;
        let support = self.support(run.given_scores.as_deref().unwrap_or(&run.scores));
        let labelled = run.labelled();
        if labelled > 0 && labelled < MIN_LABELLED {
            return Err(CalibrateError::TooFew(format!(
                "{labelled} items carry a reference; the labelled path needs at least {MIN_LABELLED} (or send none for the plain estimate)"
            )));
        }
        if labelled == 0 {
            let shift = self.group_shift(run.group.as_deref());
            let (mean, term) = self.plain(run, &corrected, settings, &shift)?;
            let advice = settings
                .target
                .map(|t| inference::plan(mean.variance, self.residuals.len(), t, settings.level));
            return Ok(RunEstimate {
                path: AnswerPath::Plain,
                mean,
                term,
                support,
                transport: None,
                advice,
                group: GroupAnswer::of(&shift, self.basis.groups),
            });
        }
        let references = run.references();
        let mean = inference::labelled(
            &corrected,
            &references,
            run.clusters.as_deref(),
            settings.level,
            self.spacing,
        )
        .map_err(CalibrateError::TooFew)?;
        Ok(RunEstimate {
            path: AnswerPath::Labelled,
            transport: Some(transport(
                &corrected,
                &references,
                run.clusters.as_deref(),
                settings.level,
            )),
            advice: settings
                .target
                .map(|t| labels_needed(&mean, t, settings.level)),
            mean,
            term: Term::NotNeeded,
            support,
            group: GroupAnswer::none(),
        })
    }

    /// The difference of two runs that this source corrects, A − B: the corrector's error,
    /// which both share, enters once; paired runs labelled on the same items are answered on
    /// the per-item differences.
    pub(super) fn compare_runs(
        &self,
        a: &RunItems,
        b: &RunItems,
        settings: &AnswerSettings,
    ) -> Result<RunComparison> {
        let anchored = self;
        let est_a = anchored
            .estimate(a, settings)
            .map_err(|e| named("run a", e))?;
        let est_b = anchored
            .estimate(b, settings)
            .map_err(|e| named("run b", e))?;
        let pairs = pairing(a, b);
        let paired = pairs.as_ref().is_some_and(|p| p.len() >= 2);
        let level = settings.level;
        let answer = |difference: Difference, path, term, advice, group| RunComparison {
            a: est_a.clone(),
            b: est_b.clone(),
            path,
            prob_a_greater: difference.prob_a_greater,
            difference,
            term,
            pairs: pairs.as_ref().map_or(0, |p| p.len()),
            advice,
            group,
            estimand: settings.estimand,
        };
        if est_a.path == AnswerPath::Plain && est_b.path == AnswerPath::Plain {
            let (difference, term, advice, group) =
                self.plain_difference(a, b, pairs.as_deref(), settings)?;
            return Ok(answer(difference, AnswerPath::Plain, term, advice, group));
        }
        // Paired runs labelled on the same items: the labelled path on the per-item differences.
        if let Some(p) = pairs.as_ref().filter(|_| paired)
            && let Some((difference, advice)) = self.paired_labelled(a, b, p, settings)?
        {
            return Ok(answer(
                difference,
                AnswerPath::Labelled,
                Term::NotNeeded,
                advice,
                GroupAnswer::none(),
            ));
        }
        // Otherwise each run on its own path; their errors are independent, and a Welch t
        // combines a labelled run's degrees of freedom with the other's.
        let difference = Difference::of_independent(&est_a.mean, &est_b.mean, level);
        let (term, group) = if est_a.path == AnswerPath::Plain {
            (est_a.term, est_a.group.clone())
        } else {
            (est_b.term, est_b.group.clone())
        };
        Ok(answer(difference, AnswerPath::Labelled, term, None, group))
    }

    /// Two plain runs' difference: the corrector's error, which both share, enters once.
    fn plain_difference(
        &self,
        a: &RunItems,
        b: &RunItems,
        pairs: Option<&[(usize, usize)]>,
        settings: &AnswerSettings,
    ) -> Result<(Difference, Term, Option<Advice>, GroupAnswer)> {
        let level = settings.level;
        let (fa, fb) = (self.corrected(&a.scores)?, self.corrected(&b.scores)?);
        let t = self.corrector_term(&[&a.scores, &b.scores], &[1.0, -1.0], settings)?;
        let d = inference::difference(
            &fa,
            &fb,
            pairs,
            (a.clusters.as_deref(), b.clusters.as_deref()),
            (self.noise_of(a, t.noise_var), self.noise_of(b, t.noise_var)),
            t.variance,
            settings.estimand,
            level,
        )?;
        let shift = self.basis.groups.map_or(BiasShift::none(), |g| {
            g.contrast(a.group.as_deref(), b.group.as_deref())
        });
        let mut variance = d.variance;
        // Two runs read through one covariate layer share its coefficients' error.
        variance.sampling += a.extra_sampling() + b.extra_sampling() - 2.0 * a.input_covariance(b);
        let debiased = Difference::new(d.estimate - t.bias, variance, d.df, level, d.paired);
        let difference = debiased.with_group(&shift, level);
        let advice = settings.target.map(|target| {
            inference::plan(difference.variance, self.residuals.len(), target, level)
        });
        Ok((
            difference,
            t.term,
            advice,
            GroupAnswer::of(&shift, self.basis.groups),
        ))
    }

    /// Paired runs labelled on the same items (at least [`MIN_LABELLED`]): the labelled path
    /// on the per-item differences, with the labels a target needs; `None` with fewer.
    fn paired_labelled(
        &self,
        a: &RunItems,
        b: &RunItems,
        p: &[(usize, usize)],
        settings: &AnswerSettings,
    ) -> Result<Option<(Difference, Option<Advice>)>> {
        let level = settings.level;
        let (ra, rb) = (a.references(), b.references());
        let d_ref: Vec<Option<f64>> = p
            .iter()
            .map(|&(i, k)| ra[i].zip(rb[k]).map(|(x, y)| x - y))
            .collect();
        if d_ref.iter().flatten().count() < MIN_LABELLED {
            return Ok(None);
        }
        let (fa, fb) = (self.corrected(&a.scores)?, self.corrected(&b.scores)?);
        let d: Vec<f64> = p.iter().map(|&(i, k)| fa[i] - fb[k]).collect();
        let c: Option<Vec<u64>> = a
            .clusters
            .as_ref()
            .map(|c| p.iter().map(|&(i, _)| c[i]).collect());
        let e = inference::labelled(&d, &d_ref, c.as_deref(), level, self.spacing)
            .map_err(CalibrateError::TooFew)?;
        let difference = Difference::new(e.estimate, e.variance, e.df, level, true);
        Ok(Some((
            difference,
            settings.target.map(|t| labels_needed(&e, t, level)),
        )))
    }
}

/// The corrector's mean residual on the labelled items, with its interval for the run's own
/// mean residual and for the corrector's bias on the run's population.
fn transport(
    corrected: &[f64],
    reference: &[Option<f64>],
    clusters: Option<&[u64]>,
    level: f64,
) -> Transport {
    let idx: Vec<usize> = (0..corrected.len())
        .filter(|&i| reference[i].is_some())
        .collect();
    let residuals: Vec<f64> = idx
        .iter()
        .map(|&i| reference[i].unwrap_or_default() - corrected[i])
        .collect();
    let c: Option<Vec<u64>> = clusters.map(|c| idx.iter().map(|&i| c[i]).collect());
    let (mean_residual, bias_interval) = inference::mean_interval(&residuals, c.as_deref(), level);
    // The labelled items are a sample of this run without replacement: the finite-run
    // correction, as in the labelled estimate itself, for the run's own mean residual.
    let half = (bias_interval.1 - mean_residual)
        * (1.0 - idx.len() as f64 / corrected.len() as f64).sqrt();
    Transport {
        mean_residual,
        interval: (mean_residual - half, mean_residual + half),
        bias_interval,
    }
}

/// How many labelled items would bring a labelled estimate's half-width to `target`: its
/// sampling variance is (1/n − 1/N)·S².
fn labels_needed(e: &MeanEstimate, target: f64, level: f64) -> Advice {
    let q = inference::quantile(level, e.df);
    let (n, big_n) = (e.labelled as f64, e.n as f64);
    if q * e.variance.sampling.sqrt() <= target {
        return Advice::Reached;
    }
    let s2 = e.variance.sampling / (1.0 / n - 1.0 / big_n);
    let needed = 1.0 / ((target / q).powi(2) / s2 + 1.0 / big_n);
    Advice::Labels((needed.ceil() as usize).min(e.n))
}

/// A line's error, (δα, δβ) ~ N(0, its posterior covariance) drawn by the covariance's
/// Cholesky factor, added to each draw of the plain runs `plain` with their `weights` on α and
/// β.
fn line_errors(
    p: &crate::report::RubricPosterior,
    plain: &[usize],
    weights: &[(f64, f64)],
    errors: &mut [f64],
    k: usize,
    rng: &mut Rng,
) {
    // The factor of a positive semidefinite 2×2 covariance (a zero variance stays zero).
    let l11 = p.alpha_var.max(0.0).sqrt();
    let l21 = if l11 > 0.0 {
        p.alpha_beta_cov / l11
    } else {
        0.0
    };
    let l22 = (p.beta_var - l21 * l21).max(0.0).sqrt();
    for d in 0..errors.len() / k {
        let (z1, z2) = (standard_normal(rng), standard_normal(rng));
        let (da, db) = (l11 * z1, l21 * z1 + l22 * z2);
        for (&i, (wa, wb)) in plain.iter().zip(weights) {
            errors[d * k + i] += wa * da + wb * db;
        }
    }
}

/// Adds the corrector's error, shared by the plain runs `plain`, to each draw.
fn corrector_errors(
    anchored: &Anchored,
    runs: &[RunItems],
    plain: &[usize],
    settings: &AnswerSettings,
    errors: &mut [f64],
    k: usize,
    rng: &mut Rng,
) -> Result<()> {
    let draws = errors.len() / k;
    // With a group term, a plain answer keeps only what the run's scores add beyond the
    // anchors' (`Anchored::plain`): the corrector at the run's scores less at the anchors'.
    let grouped = anchored.basis.groups.is_some();
    let anchor_mean = mean(&anchored.judge_scores);
    match anchored.basis.model.mean_uncertainty() {
        MeanUncertainty::Line(p) => {
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
            line_errors(p, plain, &weights, errors, k, rng);
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
            // One refit per draw, centred on the refits' mean, each run's spread its
            // estimate's (`Resampled::draws`).
            let refits = &resampled.draws();
            let centre: Vec<f64> = (0..scores.len())
                .map(|h| mean(&refits.iter().map(|m| m[h]).collect::<Vec<_>>()))
                .collect();
            let at_anchors = plain.len();
            for d in 0..draws {
                let m = &refits[rng.random_range(0..refits.len())];
                let base = if grouped {
                    m[at_anchors] - centre[at_anchors]
                } else {
                    0.0
                };
                for (h, &i) in plain.iter().enumerate() {
                    errors[d * k + i] += m[h] - centre[h] - base;
                }
            }
        }
    }
    Ok(())
}

impl Source for Anchored<'_> {
    fn estimate(&self, run: &RunItems, settings: &AnswerSettings) -> Result<RunEstimate> {
        Anchored::estimate(self, run, settings)
    }

    fn corrected(&self, scores: &[f64]) -> Result<Vec<f64>> {
        Anchored::corrected(self, scores)
    }

    fn spacing(&self) -> f64 {
        self.spacing
    }

    fn add_shared_errors(
        &self,
        runs: &[RunItems],
        columns: &[usize],
        settings: &AnswerSettings,
        errors: &mut [f64],
        rng: &mut Rng,
    ) -> Result<()> {
        let k = runs.len();
        corrector_errors(self, runs, columns, settings, errors, k, rng)?;
        if let Some(g) = self.basis.groups {
            let names: Vec<Option<&str>> =
                columns.iter().map(|&i| runs[i].group.as_deref()).collect();
            for (d, row) in g
                .joint_errors(&names, errors.len() / k, rng)
                .iter()
                .enumerate()
            {
                for (&i, e) in columns.iter().zip(row) {
                    errors[d * k + i] += e;
                }
            }
        }
        Ok(())
    }

    fn groups(&self) -> Option<&GroupBias> {
        self.basis.groups
    }

    fn leverage(&self, run: &RunItems) -> Option<Leverage> {
        // As `plain`: with a group term, the run's error is relative to the anchors'.
        let relative = self.group_shift(run.group.as_deref()).term != GroupTerm::Unmeasured;
        let anchors: Vec<(f64, f64)> = self
            .basis
            .anchors
            .pairs
            .iter()
            .zip(&self.residuals)
            .map(|(p, r)| (p.0, *r))
            .collect();
        Some(match self.basis.model.mean_uncertainty() {
            MeanUncertainty::Line(_) => Leverage::line(&anchors, &run.scores, relative),
            MeanUncertainty::Offset => Leverage::flat(&anchors, relative),
            MeanUncertainty::Omitted(_) => Leverage::flat(&[], relative),
            MeanUncertainty::Resample => {
                let bins = self
                    .bins
                    .get_or_init(|| resample::Bins::of_anchors(&self.judge_scores, HISTOGRAM_BINS));
                Leverage::local(bins, &anchors, &run.scores, relative)
            }
        })
    }

    fn compare(
        &self,
        a: &RunItems,
        b: &RunItems,
        settings: &AnswerSettings,
    ) -> Result<RunComparison> {
        self.compare_runs(a, b, settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::IdentityModel;
    use crate::{Cell, Model};

    #[test]
    fn the_support_check_finds_scores_where_anchors_are_thin_inside_their_range() {
        // 2,000 anchors on [1, 3], and 5 near 5: the range is [1, 5], but a score of 4.5 has
        // no anchor within ± 0.2 of it.
        let mut pairs: Vec<(f64, f64)> = (0..2000)
            .map(|i| (1.0 + 2.0 * i as f64 / 2000.0, 3.0))
            .collect();
        pairs.extend((0..5).map(|i| (4.9 + 0.02 * i as f64, 3.0)));
        let cell = Cell {
            pairs,
            scale: (1.0, 5.0),
        };
        let model = Model::Identity(IdentityModel {});
        let anchored = Anchored::new(Basis {
            model: &model,
            anchors: &cell,
            groups: None,
        })
        .unwrap();
        let s = anchored.support(&[2.0, 2.5, 4.5, 4.6]);
        assert_eq!(s.outside, 0.0);
        assert_eq!(s.thin, 0.5);
        assert!(s.sparse() && !s.extrapolated());
    }

    /// 300 anchors of a bent line and an isotonic version on them (a resampled corrector
    /// term, whose bootstrap bias is not zero).
    fn bent_isotonic() -> (Cell, Model) {
        let pairs: Vec<(f64, f64)> = (0..300)
            .map(|i| {
                let j = 1.0 + 4.0 * ((i * 37) % 300) as f64 / 300.0;
                (
                    j,
                    1.0 + (j - 1.0).powf(1.5) / 2.0 + 0.3 * ((i % 7) as f64 - 3.0) / 3.0,
                )
            })
            .collect();
        let fit = crate::isotonic::StepFit::fit(
            &pairs.iter().map(|&(j, y)| (j, y, 1.0)).collect::<Vec<_>>(),
        )
        .unwrap();
        (
            Cell {
                pairs,
                scale: (1.0, 5.0),
            },
            Model::Isotonic(crate::isotonic::IsotonicModel { fit }),
        )
    }

    #[test]
    fn estimates_compares_and_rankings_treat_the_corrector_bias_alike() {
        // With and without groups (5 systems on the anchors): run A's estimate less run B's is
        // the compare's estimate and the ranking's pair difference, up to the histograms' bins.
        let (cell, model) = bent_isotonic();
        let names: Vec<String> = (0..5).map(|g| format!("s{g}")).collect();
        let groups: Vec<Option<&str>> = (0..300).map(|i| Some(names[i % 5].as_str())).collect();
        let js: Vec<f64> = cell.pairs.iter().map(|p| p.0).collect();
        let fitted = model.correct(&js).unwrap();
        let residuals: Vec<f64> = cell
            .pairs
            .iter()
            .zip(&fitted)
            .map(|(p, c)| p.1 - c.score)
            .collect();
        let bias = super::super::groups::GroupBias::of(&residuals, &groups).unwrap();
        let mut low = RunItems::scores((0..400).map(|i| 1.2 + (i % 50) as f64 / 40.0).collect());
        let mut high = RunItems::scores((0..400).map(|i| 3.0 + (i % 60) as f64 / 32.0).collect());
        let settings = AnswerSettings {
            refits: 60,
            seed: 3,
            ..AnswerSettings::default()
        };
        for grouped in [false, true] {
            if grouped {
                low.group = Some("s1".into());
                high.group = Some("s3".into());
            }
            let anchored = Anchored::new(Basis {
                model: &model,
                anchors: &cell,
                groups: grouped.then_some(&bias),
            })
            .unwrap();
            let (a, b) = (
                anchored.estimate(&high, &settings).unwrap(),
                anchored.estimate(&low, &settings).unwrap(),
            );
            let c = anchored.compare_runs(&high, &low, &settings).unwrap();
            let r = super::super::rank::rank(
                anchored.basis,
                &[high.clone(), low.clone()],
                &settings,
                &super::super::rank::RankSettings::default(),
            )
            .unwrap();
            let of_estimates = a.mean.estimate - b.mean.estimate;
            let gap = (c.difference.estimate - of_estimates).abs();
            assert!(
                gap < 1e-9,
                "grouped {grouped}: compare {} vs estimates {of_estimates}",
                c.difference.estimate
            );
            assert_eq!((r.pairs[0].a, r.pairs[0].b), (0, 1));
            let pair = r.pairs[0].difference;
            assert!(
                (pair - of_estimates).abs() < 1e-9,
                "grouped {grouped}: rank {pair}"
            );
        }
    }

    #[test]
    fn a_run_answered_after_another_on_the_same_refits_gets_the_answer_it_gets_alone() {
        // An isotonic version (a resampled corrector term) on 300 anchors of a bent line, and
        // two runs whose scores lie in different parts of the scale: the second run's answer
        // reuses the refits the first one fitted, and must equal what it gets from fresh ones.
        let (cell, model) = bent_isotonic();
        let basis = || Basis {
            model: &model,
            anchors: &cell,
            groups: None,
        };
        let low = RunItems::scores((0..400).map(|i| 1.2 + (i % 50) as f64 / 40.0).collect());
        let high = RunItems::scores((0..400).map(|i| 3.0 + (i % 60) as f64 / 32.0).collect());
        let settings = AnswerSettings {
            refits: 40,
            seed: 7,
            ..AnswerSettings::default()
        };
        let shared = Anchored::new(basis()).unwrap();
        let first = shared.estimate(&low, &settings).unwrap();
        let second = shared.estimate(&high, &settings).unwrap();
        assert!(
            shared.refits.get().is_some(),
            "the first answer keeps its refits"
        );
        let alone = |run: &RunItems| Anchored::new(basis()).unwrap().estimate(run, &settings);
        assert_eq!(second, alone(&high).unwrap());
        assert_eq!(first, alone(&low).unwrap());
        // Other settings are not answered from refits fitted for these.
        let other = AnswerSettings {
            seed: 8,
            ..settings
        };
        let fresh = Anchored::new(basis()).unwrap().estimate(&high, &other);
        assert_eq!(shared.estimate(&high, &other).unwrap(), fresh.unwrap());
        assert_ne!(first.mean.estimate, second.mean.estimate);
    }
}
