//! Panels: several judges of one rubric set fused into one calibrated score.
//!
//! The fusion corrector here is hierarchical Bayesian stacking (`crate::linear`, the multi-input
//! linear model with one input per member): the reference on
//! every member's score, rubrics pooled, fitted by NUTS on the collapsed density. Its posterior
//! gives, per rubric, the fused corrected score with its credible and predictive intervals, and
//! per member a weight whose posterior is the member's *canary*: a member whose standardised
//! weight (its weight × its scores' sd, over the references' sd) may, with probability above
//! [`StackOptions::member_probability`], lie below [`StackOptions::member_floor`] is not shown
//! to add anything the other members do not, and is reported as such.

pub mod fusion;
pub mod items;
pub mod missing;
pub mod plan;

use nalgebra::{DMatrix, DVector};

use crate::bayes::{self, FitDiagnostics, FitOptions};

pub use crate::linear::{StackDraw, StackModel, StackPriors, Stats};

/// The sampler's settings and the members' canary.
#[derive(Debug, Clone, PartialEq)]
pub struct StackOptions {
    /// Chains, warm-up, draws, target acceptance and seed (its priors and β canary are the
    /// linear corrector's and unused here).
    pub sampler: FitOptions,
    pub priors: StackPriors,
    /// A member's canary fires where Pr(standardised weight < `member_floor`) exceeds
    /// `member_probability`.
    pub member_floor: f64,
    pub member_probability: f64,
}

impl StackOptions {
    /// The defaults for `members` members: the linear corrector's sampler settings, the
    /// panel-average priors, and a canary that fires where the anchors cannot rule out, at
    /// 95%, that the member's standardised weight is below 0.02 (a fiftieth of the
    /// references' spread: nothing), as the linear corrector's fires at Pr(β < 0.3) > 0.05.
    pub fn new(members: usize) -> Self {
        Self {
            sampler: FitOptions::default(),
            priors: StackPriors::average(members),
            member_floor: 0.02,
            member_probability: 0.05,
        }
    }
}

/// One member's weight in one rubric.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MemberWeight {
    /// Posterior mean of its coefficient, in reference units per judge-score unit.
    pub weight: f64,
    /// 95% credible interval of the coefficient.
    pub weight_lo: f64,
    pub weight_hi: f64,
    /// Posterior mean of the standardised weight (coefficient × the member's sd over the
    /// references' sd).
    pub standardised: f64,
    /// Pr(standardised weight < the floor | anchors).
    pub below_floor: f64,
    /// Whether the member adds nothing in this rubric.
    pub canary: bool,
}

/// One rubric's fused corrector.
#[derive(Debug, Clone, PartialEq)]
pub struct StackPosterior {
    /// Posterior mean and covariance of (intercept, weights).
    pub mean: DVector<f64>,
    pub cov: DMatrix<f64>,
    pub sigma2_mean: f64,
    pub members: Vec<MemberWeight>,
}

/// A fused corrected score with its intervals: the 95% credible interval of the mean
/// reference at these scores, and the predictive interval of a new item's reference.
pub type Fused = bayes::LineCorrected;

impl StackPosterior {
    /// The corrected score of an item every member scored (`scores` in member order).
    pub fn correct(&self, scores: &[f64]) -> Fused {
        let x = DVector::from_iterator(
            self.mean.len(),
            std::iter::once(1.0).chain(scores.iter().copied()),
        );
        Fused::of(
            self.mean.dot(&x),
            x.dot(&(&self.cov * &x)),
            self.sigma2_mean,
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct StackFit {
    pub rubrics: Vec<StackPosterior>,
    /// Per rubric: its coefficients and σ with the shared τ.
    pub rubric_diagnostics: Vec<FitDiagnostics>,
    pub diagnostics: FitDiagnostics,
}

/// The members' and the references' sds in one rubric, from its statistics.
fn spreads(s: &Stats) -> (Vec<f64>, f64) {
    let p = s.xty.len();
    let n = s.n.max(1.0);
    let members = (1..p)
        .map(|i| {
            (s.gram[(i, i)] / n - (s.gram[(0, i)] / n).powi(2))
                .max(0.0)
                .sqrt()
        })
        .collect();
    let y = (s.yty / n - (s.xty[0] / n).powi(2)).max(0.0).sqrt();
    (members, y)
}

/// Fits the stacking model to the rubrics' statistics (each with the same members, in order).
pub fn fit(
    stats: &[Stats],
    opts: &StackOptions,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<StackFit, String> {
    opts.sampler.check()?;
    let p = opts.priors.mean.len();
    if stats.iter().any(|s| s.xty.len() != p) || opts.priors.sd.len() != p {
        return Err("every rubric needs one score per member".into());
    }
    if !stats.iter().any(|s| s.n >= 1.0) {
        return Err("no anchors to fit".into());
    }
    let model = StackModel::new(stats.to_vec(), opts.priors.clone());
    let (chains, divergences) = bayes::sample(&model, &opts.sampler, progress)?;
    Ok(summarise(&model, stats, &chains, divergences, opts))
}

/// Each rubric's fused corrector from the linear model's summary: its coefficients, and per
/// member a weight whose canary is the chance its standardised weight lies below the floor.
fn summarise(
    model: &StackModel,
    stats: &[Stats],
    chains: &bayes::Chains,
    divergences: u64,
    opts: &StackOptions,
) -> StackFit {
    let summary = bayes::summary::summarise(model, chains, divergences, opts.sampler.seed);
    let rubrics = summary
        .rubrics
        .into_iter()
        .zip(stats)
        .map(|(c, s)| {
            let (member_sd, y_sd) = spreads(s);
            let members = (1..c.mean.len())
                .map(|i| {
                    let scale = member_sd[i - 1] / y_sd.max(1e-12);
                    let below = c.below(i, scale, opts.member_floor);
                    let (weight_lo, weight_hi) = c.interval(i);
                    MemberWeight {
                        weight: c.mean[i],
                        weight_lo,
                        weight_hi,
                        standardised: c.mean[i] * scale,
                        below_floor: below,
                        canary: below > opts.member_probability,
                    }
                })
                .collect();
            StackPosterior {
                mean: c.mean,
                cov: c.cov,
                sigma2_mean: c.sigma2_mean,
                members,
            }
        })
        .collect();
    StackFit {
        rubrics,
        rubric_diagnostics: summary.rubric_diagnostics,
        diagnostics: summary.diagnostics,
    }
}

/// A panel's correctors for items that some members did not score: one stacking fit per
/// non-empty set of members present, each on the same anchors' columns of those members
/// (every anchor carries every member's score). An item is corrected by the fit of exactly
/// the members that scored it, so its band is that sub-panel's own: wider where the missing
/// members carried weight, and calibrated as every fit is, without assuming how a missing
/// score relates to the others.
#[derive(Debug, Clone, PartialEq)]
pub struct SubPanels {
    pub members: usize,
    /// Indexed by the bit mask of the members present, less one.
    pub fits: Vec<StackFit>,
}

/// At most this many members in a panel.
pub const MAX_MEMBERS: usize = 12;

/// Up to this many members every sub-panel (2^M − 1, at most 63) is fitted by NUTS with the
/// rubrics pooled; a larger panel fits the full panel and each member alone so, and computes any
/// other sub-panel an item needs from its rubric's statistics (`Stats::conjugate`).
pub const FITTED_MEMBERS: usize = 6;

/// The members of bit mask `mask`, in order.
pub fn members_of(mask: usize, members: usize) -> Vec<usize> {
    (0..members).filter(|m| mask & (1 << m) != 0).collect()
}

/// Fits every sub-panel of the rubrics' statistics (each with every member's score); the
/// full panel's fit is the last. `progress` receives the share of sub-panels done.
pub fn fit_sub_panels(
    stats: &[Stats],
    opts: &StackOptions,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<SubPanels, String> {
    let members = opts.priors.mean.len().saturating_sub(1);
    if !(1..=FITTED_MEMBERS).contains(&members) {
        return Err(format!(
            "every sub-panel is fitted for 1 to {FITTED_MEMBERS} members, not {members}"
        ));
    }
    let total = (1usize << members) - 1;
    let mut fits = Vec::with_capacity(total);
    for mask in 1..=total {
        let keep = members_of(mask, members);
        let sub: Vec<Stats> = stats.iter().map(|s| s.select(&keep)).collect();
        // The intercept's and the kept members' coefficients.
        let columns: Vec<usize> = std::iter::once(0)
            .chain(keep.iter().map(|m| m + 1))
            .collect();
        let priors = StackPriors {
            mean: columns.iter().map(|&i| opts.priors.mean[i]).collect(),
            sd: columns.iter().map(|&i| opts.priors.sd[i]).collect(),
            ..opts.priors.clone()
        };
        let sub_opts = StackOptions {
            sampler: FitOptions {
                seed: opts.sampler.seed.wrapping_add(mask as u64),
                ..opts.sampler
            },
            priors,
            ..opts.clone()
        };
        fits.push(fit(&sub, &sub_opts, &|_| {})?);
        progress(mask as f64 / total as f64);
    }
    Ok(SubPanels { members, fits })
}

impl SubPanels {
    /// The corrected score of an item in rubric `rubric` from the members that scored it
    /// (`None` where a member did not); `None` where none did.
    pub fn correct(&self, rubric: usize, scores: &[Option<f64>]) -> Option<Fused> {
        let mask = scores
            .iter()
            .take(self.members)
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .fold(0usize, |m, (i, _)| m | (1 << i));
        let present: Vec<f64> = scores
            .iter()
            .take(self.members)
            .flatten()
            .copied()
            .collect();
        let fit = self.fits.get(mask.checked_sub(1)?)?;
        Some(fit.rubrics.get(rubric)?.correct(&present))
    }

    /// The fit of every member.
    pub fn full(&self) -> &StackFit {
        &self.fits[self.fits.len() - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Rng, SeedableRng};
    use crate::stats::{self, standard_normal};

    /// Items: a latent quality (normal, so the linear model is the truth), two members of one family (a shared
    /// error plus their own), one independent member, and one member that is pure noise; the
    /// reference is the quality plus noise.
    fn world(rng: &mut Rng, n: usize) -> Vec<(Vec<f64>, f64)> {
        (0..n)
            .map(|_| {
                let q = 3.0 + standard_normal(rng);
                let family = 0.5 * standard_normal(rng);
                let js = vec![
                    q + family + 0.4 * standard_normal(rng),
                    q + family + 0.4 * standard_normal(rng),
                    0.8 * q + 0.6 * standard_normal(rng),
                    3.0 + standard_normal(rng),
                ];
                (js, q + 0.4 * standard_normal(rng))
            })
            .collect()
    }

    #[test]
    fn items_missing_members_are_corrected_by_their_sub_panel_with_wider_bands() {
        use crate::rng::RngExt;
        let mut rng = Rng::seed_from_u64(12);
        let rubrics: Vec<Vec<(Vec<f64>, f64)>> = (0..2).map(|_| world(&mut rng, 300)).collect();
        let stats: Vec<Stats> = rubrics
            .iter()
            .map(|r| Stats::of(4, r.iter().map(|(js, y)| (js.as_slice(), *y))))
            .collect();
        let opts = StackOptions {
            sampler: FitOptions {
                draws: 400,
                warmup: 300,
                ..FitOptions::default()
            },
            ..StackOptions::new(4)
        };
        let panels = fit_sub_panels(&stats, &opts, &|_| {}).unwrap();
        assert_eq!(panels.fits.len(), 15);
        for share in [0.1, 0.4] {
            let (mut inside, mut items) = (0usize, 0usize);
            let (mut full, mut partial) = (Vec::new(), Vec::new());
            for r in 0..2 {
                for (js, y) in world(&mut rng, 3000) {
                    let scores: Vec<Option<f64>> = js
                        .iter()
                        .map(|&j| (!rng.random_bool(share)).then_some(j))
                        .collect();
                    let Some(f) = panels.correct(r, &scores) else {
                        assert!(scores.iter().all(Option::is_none));
                        continue;
                    };
                    items += 1;
                    inside += usize::from((f.predictive.0..=f.predictive.1).contains(&y));
                    let width = f.predictive.1 - f.predictive.0;
                    // The useful members (the noise member's absence costs nothing).
                    if scores[..3].iter().all(Option::is_some) {
                        full.push(width);
                    } else {
                        partial.push(width);
                    }
                }
            }
            let rate = inside as f64 / items as f64;
            assert!((0.94..=0.96).contains(&rate), "{share}: {rate}");
            let (f, p) = (stats::mean(&full), stats::mean(&partial));
            eprintln!(
                "{:.0}% missing: {items} items, coverage {:.1}%, mean width {f:.3} (useful members all present) vs {p:.3}",
                100.0 * share,
                100.0 * rate
            );
            assert!(
                p > 1.05 * f,
                "{share}: widths {f} (all useful) vs {p} (some missing)"
            );
        }
    }

    #[test]
    fn a_pure_noise_member_gets_no_weight_and_its_canary_fires() {
        let mut rng = Rng::seed_from_u64(11);
        let rubrics: Vec<Vec<(Vec<f64>, f64)>> = (0..3).map(|_| world(&mut rng, 300)).collect();
        let stats: Vec<Stats> = rubrics
            .iter()
            .map(|r| Stats::of(4, r.iter().map(|(js, y)| (js.as_slice(), *y))))
            .collect();
        let fit = fit(&stats, &StackOptions::new(4), &|_| {}).unwrap();
        assert!(fit.diagnostics.failure().is_none(), "{:?}", fit.diagnostics);
        for (r, post) in fit.rubrics.iter().enumerate() {
            let m = &post.members;
            assert!(m[3].canary, "rubric {r}: noise member {:?}", m[3]);
            assert!(m[3].weight_lo < 0.0 && m[3].weight_hi > 0.0, "{:?}", m[3]);
            for useful in &m[..3] {
                assert!(!useful.canary, "rubric {r}: {useful:?}");
            }
            // The independent member is worth more than either of the correlated pair.
            assert!(
                m[2].standardised > m[0].standardised.max(m[1].standardised),
                "{m:?}"
            );
            // Fresh items fall in their predictive intervals about 95% of the time.
            let fresh = world(&mut rng, 2000);
            let inside = fresh
                .iter()
                .filter(|(js, y)| {
                    let f = post.correct(js);
                    (f.predictive.0..=f.predictive.1).contains(y)
                })
                .count() as f64
                / fresh.len() as f64;
            eprintln!(
                "rubric {r}: standardised weights {:?}, canaries {:?}, coverage {:.1}%",
                m.iter()
                    .map(|w| (w.standardised * 100.0).round() / 100.0)
                    .collect::<Vec<_>>(),
                m.iter().map(|w| w.canary).collect::<Vec<_>>(),
                100.0 * inside
            );
            assert!((0.93..=0.97).contains(&inside), "rubric {r}: {inside}");
        }
    }
}
