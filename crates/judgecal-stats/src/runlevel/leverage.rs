//! Where in the anchors a corrector's error in one run's mean comes from: each anchor's
//! *leverage* h(x), the weight of its residual in that error to first order (the error is
//! Σ_i h(x_i)·e_i over the anchors). Two judge versions calibrated on shared anchor items have
//! correlated errors through those items, but only as far as both runs lean on the same
//! items: a line fitted on both versions' anchors errs in opposite directions at the two ends
//! of the scale, so a run from the top under one version and a run from the bottom under the
//! other share little of their correctors' errors, or share them with the sign reversed.
//!
//! Cov(error_a, error_b) = Σ_shared h_a(x_i^a)·h_b(x_i^b)·e_i^a·e_i^b and Var(error_a) =
//! Σ_a h_a(x_i)²·(e_i^a)², estimated from the residuals (centred on each version's mean
//! residual: an offset's mean is its correction, not its error) as a sandwich estimator does,
//! with no assumption that the residuals' spread or their correlation is the same at every
//! score ([`Leverage::correlation`]). For an offset (h = 1/n) and residuals alike everywhere,
//! the correlation is the residuals' times n_shared / √(n_a·n_b).

use super::resample::Bins;
use crate::stats::mean;

/// One anchor item both versions hold: its judge score under each and its residual
/// (reference − corrected) under each version's corrector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SharedResidual {
    pub scores: (f64, f64),
    pub residuals: (f64, f64),
}

/// How a corrector's error in one run's mean depends on its anchors.
#[derive(Debug, Clone, PartialEq)]
pub struct Leverage {
    shape: Shape,
    /// Anchors of the corrector.
    n: usize,
    /// Taken off every anchor's leverage: 1/n where the run's answer keeps only what its
    /// scores add beyond the anchors' (a run with a group term).
    offset: f64,
    /// The anchors' mean residual, and Σ h(x_i)²·(e_i − ē)² over them: the error's variance.
    mean_residual: f64,
    variance: f64,
}

#[derive(Debug, Clone, PartialEq)]
enum Shape {
    /// Every anchor alike, 1/n (an offset).
    Flat,
    /// A line's least-squares influence at the run's mean score j̄:
    /// 1/n + (j̄ − m)(x − m)/S, m and S the anchors' mean and sum of squares about it.
    Line { centre: f64, sxx: f64, at: f64 },
    /// A flexible fit's, as a local mean: the run's share of x's group of neighbouring anchor
    /// scores over the group's anchors (the groups the resampled term averages runs over).
    Local {
        bins: Bins,
        anchors: Vec<f64>,
        share: Vec<f64>,
    },
}

impl Leverage {
    /// Every anchor of `anchors` ((judge score, residual) each) alike: an offset. With none,
    /// no error from anchors.
    pub fn flat(anchors: &[(f64, f64)], relative: bool) -> Self {
        Self::of(Shape::Flat, anchors, relative)
    }

    /// A line fitted to `anchors`, at `run`'s mean score.
    pub fn line(anchors: &[(f64, f64)], run: &[f64], relative: bool) -> Self {
        let xs: Vec<f64> = anchors.iter().map(|a| a.0).collect();
        let centre = mean(&xs);
        let sxx: f64 = xs.iter().map(|x| (x - centre).powi(2)).sum();
        if sxx.is_nan() || sxx <= 0.0 || run.is_empty() {
            return Self::flat(anchors, relative);
        }
        let shape = Shape::Line {
            centre,
            sxx,
            at: mean(run),
        };
        Self::of(shape, anchors, relative)
    }

    /// A flexible fit on `anchors` (their scores grouped as `bins`), over `run`.
    pub fn local(bins: &Bins, anchors: &[(f64, f64)], run: &[f64], relative: bool) -> Self {
        let n = anchors.len() as f64;
        let xs: Vec<f64> = anchors.iter().map(|a| a.0).collect();
        let counts: Vec<f64> = bins.histogram(&xs).iter().map(|(_, p)| p * n).collect();
        let share: Vec<f64> = bins.histogram(run).iter().map(|(_, p)| *p).collect();
        let shape = Shape::Local {
            bins: bins.clone(),
            anchors: counts,
            share,
        };
        Self::of(shape, anchors, relative)
    }

    fn of(shape: Shape, anchors: &[(f64, f64)], relative: bool) -> Self {
        let n = anchors.len();
        let offset = if relative && n > 0 {
            1.0 / n as f64
        } else {
            0.0
        };
        let residuals: Vec<f64> = anchors.iter().map(|a| a.1).collect();
        let mut out = Self {
            shape,
            n,
            offset,
            mean_residual: if n > 0 { mean(&residuals) } else { 0.0 },
            variance: 0.0,
        };
        out.variance = anchors
            .iter()
            .map(|&(x, r)| (out.at(x) * (r - out.mean_residual)).powi(2))
            .sum();
        out
    }

    /// The anchors of the corrector.
    pub fn anchors(&self) -> usize {
        self.n
    }

    /// The leverage of an anchor with judge score `x`.
    pub fn at(&self, x: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let n = self.n as f64;
        let h = match &self.shape {
            Shape::Flat => 1.0 / n,
            Shape::Line { centre, sxx, at } => 1.0 / n + (at - centre) * (x - centre) / sxx,
            Shape::Local {
                bins,
                anchors,
                share,
            } => {
                let g = bins.index(x);
                if anchors[g] > 0.0 {
                    share[g] / anchors[g]
                } else {
                    0.0
                }
            }
        };
        h - self.offset
    }

    /// The correlation of two correctors' errors in two runs' means (`a`'s and `b`'s
    /// leverage) through the anchor items they share: Σ_shared h_a·h_b·ê_a·ê_b over
    /// √(Σ_a h_a²·ê_a² · Σ_b h_b²·ê_b²), ê the residuals less each version's mean; 0 where
    /// either error has no spread.
    pub fn correlation(shared: &[SharedResidual], a: &Leverage, b: &Leverage) -> f64 {
        let denominator = (a.variance * b.variance).sqrt();
        if denominator.is_nan() || denominator <= 0.0 {
            return 0.0;
        }
        let numerator: f64 = shared
            .iter()
            .map(|s| {
                a.at(s.scores.0)
                    * b.at(s.scores.1)
                    * (s.residuals.0 - a.mean_residual)
                    * (s.residuals.1 - b.mean_residual)
            })
            .sum();
        (numerator / denominator).clamp(-1.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bayes::BayesModel;
    use crate::report::{FitDiagnostics, RubricPosterior};
    use crate::{Cell, Method, Model};

    /// Residuals ±1 by position (mean 0), the same item's under either version.
    fn anchors(xs: &[f64]) -> Vec<(f64, f64)> {
        xs.iter()
            .enumerate()
            .map(|(i, &x)| (x, if i % 2 == 0 { 1.0 } else { -1.0 }))
            .collect()
    }

    fn shared(anchors: &[(f64, f64)]) -> Vec<SharedResidual> {
        anchors
            .iter()
            .map(|&(x, r)| SharedResidual {
                scores: (x, x),
                residuals: (r, r),
            })
            .collect()
    }

    #[test]
    fn an_offsets_correlation_is_the_shared_share_of_both_anchor_sets() {
        let xs: Vec<f64> = (0..200).map(f64::from).collect();
        let (a, b) = (anchors(&xs), anchors(&xs[..50]));
        let (la, lb) = (Leverage::flat(&a, false), Leverage::flat(&b, false));
        let expected = 40.0 / (200.0f64 * 50.0).sqrt();
        let r = Leverage::correlation(&shared(&a[..40]), &la, &lb);
        assert!((r - expected).abs() < 1e-12, "{r}");
        // Relative to the anchors, an offset's error cancels: nothing is shared.
        let relative = Leverage::flat(&a, true);
        assert_eq!(
            Leverage::correlation(&shared(&a), &relative, &relative),
            0.0
        );
    }

    #[test]
    fn a_lines_leverage_sums_to_one_and_its_errors_at_the_two_ends_are_opposed() {
        let xs: Vec<f64> = (0..101).map(|i| 1.0 + i as f64 / 25.0).collect();
        let a = anchors(&xs);
        let top = Leverage::line(&a, &[4.6, 4.8, 5.0], false);
        let total: f64 = xs.iter().map(|&x| top.at(x)).sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        // The same anchors under two versions, runs at the two ends: a line's errors there
        // are negatively correlated (the slope's error moves them apart); at one end alike,
        // fully.
        let low = Leverage::line(&a, &[1.2, 1.4], false);
        let all = shared(&a);
        assert!(Leverage::correlation(&all, &top, &low) < -0.3);
        assert!((Leverage::correlation(&all, &top, &top) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_flexible_fits_errors_at_the_two_ends_share_nothing() {
        let xs: Vec<f64> = (0..200).map(|i| 1.0 + i as f64 / 50.0).collect();
        let a = anchors(&xs);
        let bins = Bins::of_anchors(&xs, 10);
        let (top, bottom) = (
            Leverage::local(&bins, &a, &[4.7, 4.8, 4.9], false),
            Leverage::local(&bins, &a, &[1.1, 1.2], false),
        );
        let all = shared(&a);
        assert_eq!(Leverage::correlation(&all, &top, &bottom), 0.0);
        assert!((Leverage::correlation(&all, &top, &top) - 1.0).abs() < 1e-9);
        let total: f64 = xs.iter().map(|&x| top.at(x)).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    /// The cross-version study of issue 54: two judge versions of one cell (A scores 0.9 of
    /// the quality +0.4, B 0.7 of it −0.3, each with noise of sd 0.5), each calibrated on 200
    /// anchors of which `shared` are the same items (one reference each); A's run of 1,000
    /// items from the top of the scale, B's from the bottom, a second A run from the middle
    /// (runs this size leave the correctors' errors most of the difference's).
    /// Returns how often the compare's 95% interval (A top − B bottom) and the ranking's
    /// family of three pairs hold, with `method`'s versions, and how often the family holds
    /// for the same question within version A (its own run from the bottom).
    fn opposite_ends(method: Method, shared: usize, reps: u64) -> (f64, f64, f64) {
        const RUN: usize = 1000;
        use crate::rng::{Rng, SeedableRng};
        use crate::runlevel::rank::{RankSettings, rank_sources};
        use crate::runlevel::{
            Anchored, AnswerSettings, Basis, RunItems, Source, compare_correlated,
        };
        use crate::stats::standard_normal;
        let settings = AnswerSettings::default();
        let how = RankSettings {
            draws: 10_000,
            ..RankSettings::default()
        };
        let (mut compared, mut ranked, mut within) = (0, 0, 0);
        for rep in 0..reps {
            let mut rng = <Rng as SeedableRng>::seed_from_u64(54_000 + rep);
            // Qualities normal, so the reference given a judge score is a line (a `bayes`
            // version's model holds; a uniform quality bends it at the ends).
            let item = |rng: &mut Rng| {
                let q = 3.0 + 0.8 * standard_normal(rng);
                let ja = 3.0 + 0.9 * (q - 3.0) + 0.4 + 0.5 * standard_normal(rng);
                let jb = 3.0 + 0.7 * (q - 3.0) - 0.3 + 0.5 * standard_normal(rng);
                ((ja, jb), q + 0.3 * standard_normal(rng))
            };
            let items: Vec<((f64, f64), f64)> = (0..400 - shared).map(|_| item(&mut rng)).collect();
            // A's anchors: the first 200; B's: the last 200, of which `shared` are A's too.
            let pa: Vec<(f64, f64)> = items[..200].iter().map(|&((ja, _), y)| (ja, y)).collect();
            let pb: Vec<(f64, f64)> = items[200 - shared..]
                .iter()
                .map(|&((_, jb), y)| (jb, y))
                .collect();
            let common: Vec<SharedResidual> = items[200 - shared..200]
                .iter()
                .map(|&((ja, jb), y)| SharedResidual {
                    scores: (ja, jb),
                    residuals: (y, y),
                })
                .collect();
            let (ca, cb) = (
                Cell {
                    pairs: pa,
                    scale: (1.0, 5.0),
                },
                Cell {
                    pairs: pb,
                    scale: (1.0, 5.0),
                },
            );
            let (ma, mb) = (fitted(method, &ca), fitted(method, &cb));
            let basis = |model, anchors| Basis {
                model,
                anchors,
                groups: None,
            };
            let sa = Anchored::new(basis(&ma, &ca)).unwrap();
            let sb = Anchored::new(basis(&mb, &cb)).unwrap();
            // The residuals under each version's own corrector.
            let xa: Vec<f64> = common.iter().map(|c| c.scores.0).collect();
            let xb: Vec<f64> = common.iter().map(|c| c.scores.1).collect();
            let (fa, fb) = (sa.corrected(&xa).unwrap(), sb.corrected(&xb).unwrap());
            let common: Vec<SharedResidual> = common
                .iter()
                .zip(fa.iter().zip(&fb))
                .map(|(c, (a, b))| SharedResidual {
                    residuals: (c.residuals.0 - a, c.residuals.1 - b),
                    ..*c
                })
                .collect();
            // A run's items are the population's whose score under its version lies in
            // [lo, hi]: chosen on the judge score, so the reference given the score is the
            // anchors' (a run chosen on quality would not be, and no calibration transports).
            let mut run = |lo: f64, hi: f64, version: usize| {
                let mut drawn: Vec<(f64, f64)> = Vec::with_capacity(RUN);
                while drawn.len() < RUN {
                    let ((ja, jb), y) = item(&mut rng);
                    let j = if version == 0 { ja } else { jb };
                    if (lo..=hi).contains(&j) {
                        drawn.push((j, y));
                    }
                }
                let truth = drawn.iter().map(|d| d.1).sum::<f64>() / RUN as f64;
                (RunItems::scores(drawn.iter().map(|d| d.0).collect()), truth)
            };
            let ((top, t_top), (middle, t_middle), (bottom, t_bottom)) =
                (run(3.8, 4.8, 0), run(3.0, 3.6, 0), run(1.2, 2.0, 1));
            let c = compare_correlated((&sa, &top), (&sb, &bottom), &common, &settings).unwrap();
            let (lo, hi) = c.difference.interval;
            let d = t_top - t_bottom;
            compared += usize::from(lo <= d && d <= hi);
            // The ranking (its joint draws are the slow part) on every fourth replication.
            if rep % 4 != 0 {
                continue;
            }
            let sources: [&dyn Source; 3] = [&sa, &sa, &sb];
            let runs = [top, middle, bottom];
            let other = sb.leverage(&runs[2]).unwrap();
            let rho = (0..2)
                .map(|k| {
                    let own = sources[k].leverage(&runs[k]).unwrap();
                    super::super::shared_correlation_for_draws(&common, &own, &other)
                })
                .fold(f64::INFINITY, f64::min);
            let how = RankSettings { shared: rho, ..how };
            let holds = |sources: &[&dyn Source], runs: &[RunItems], truth: [f64; 3]| {
                let r = rank_sources(sources, runs, &settings, &how).unwrap();
                usize::from(r.pairs.iter().all(|p| {
                    let d = truth[p.a] - truth[p.b];
                    p.interval.0 <= d && d <= p.interval.1
                }))
            };
            ranked += holds(&sources, &runs, [t_top, t_middle, t_bottom]);
            // The same question within version A: its own run from the bottom.
            let (own, t_own) = run(1.9, 2.7, 0);
            let [top, middle, _] = runs;
            within += holds(
                &[&sa, &sa, &sa],
                &[top, middle, own],
                [t_top, t_middle, t_own],
            );
        }
        let ranks = reps.div_ceil(4) as f64;
        (
            compared as f64 / reps as f64,
            ranked as f64 / ranks,
            within as f64 / ranks,
        )
    }

    /// A version of `method` on `cell`: `bayes` as its posterior under flat priors (least
    /// squares, which 200 anchors make the NUTS fit's to within its Monte Carlo error), or an
    /// isotonic fit.
    fn fitted(method: Method, cell: &Cell) -> Model {
        let n = cell.pairs.len() as f64;
        match method {
            Method::Bayes => {
                let (mx, my) = (
                    mean(&cell.pairs.iter().map(|p| p.0).collect::<Vec<_>>()),
                    mean(&cell.pairs.iter().map(|p| p.1).collect::<Vec<_>>()),
                );
                let sxx: f64 = cell.pairs.iter().map(|p| (p.0 - mx).powi(2)).sum();
                let sxy: f64 = cell.pairs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
                let beta = sxy / sxx;
                let alpha = my - beta * mx;
                let rss: f64 = cell
                    .pairs
                    .iter()
                    .map(|p| (p.1 - alpha - beta * p.0).powi(2))
                    .sum();
                let s2 = rss / (n - 2.0);
                let beta_var = s2 / sxx;
                Model::Bayes(BayesModel {
                    posterior: RubricPosterior {
                        alpha_mean: alpha,
                        beta_mean: beta,
                        sigma_mean: s2.sqrt(),
                        alpha_var: s2 / n + mx * mx * beta_var,
                        beta_var,
                        alpha_beta_cov: -mx * beta_var,
                        sigma2_mean: s2,
                        beta_lo: beta - 1.96 * beta_var.sqrt(),
                        beta_hi: beta + 1.96 * beta_var.sqrt(),
                        beta_collapse_probability: 0.0,
                        canary: false,
                    },
                    diagnostics: FitDiagnostics {
                        rhat_max: 1.0,
                        ess_bulk_min: 4000.0,
                        ess_tail_min: 4000.0,
                        divergences: 0,
                        extensions: 0,
                    },
                })
            }
            _ => {
                let fit = crate::isotonic::StepFit::fit(
                    &cell
                        .pairs
                        .iter()
                        .map(|&(j, y)| (j, y, 1.0))
                        .collect::<Vec<_>>(),
                )
                .unwrap();
                Model::Isotonic(crate::isotonic::IsotonicModel { fit })
            }
        }
    }

    /// Compares within one isotonic version between parts of the scale (its top, middle and
    /// bottom), where the bootstrap's spread of a contrast errs narrow: the world of
    /// `opposite_ends` (version A, 200 anchors), runs of 1,000 items scored 3.8–4.8, 3.0–3.6
    /// and 1.9–2.7, 600 replications. Every compare covers 93–97% (with the bootstrap's spread
    /// they covered 92.7%, 91.3% and 92.5% over 1,000; over the draws 94.2%, 94.4%, 94.3%;
    /// with the bias correction's noise counted too, 95.5%, 96.0% and 96.0% over these 600,
    /// where they had covered 93.7%, 95.2% and 94.0%).
    #[test]
    fn compares_within_one_isotonic_version_cover_at_every_part_of_the_scale() {
        use crate::rng::{Rng, SeedableRng};
        use crate::runlevel::{AnswerSettings, Basis, RunItems, compare, estimate};
        use crate::stats::standard_normal;
        const REPS: u64 = 600;
        let settings = AnswerSettings::default();
        let mut covered = [0usize; 6];
        for rep in 0..REPS {
            let mut rng = <Rng as SeedableRng>::seed_from_u64(77_000 + rep);
            let item = |rng: &mut Rng| {
                let q = 3.0 + 0.8 * standard_normal(rng);
                let judge = 3.0 + 0.9 * (q - 3.0) + 0.4 + 0.5 * standard_normal(rng);
                (judge, q + 0.3 * standard_normal(rng))
            };
            let cell = Cell {
                pairs: (0..200).map(|_| item(&mut rng)).collect(),
                scale: (1.0, 5.0),
            };
            let model = fitted(Method::Isotonic, &cell);
            let basis = || Basis {
                model: &model,
                anchors: &cell,
                groups: None,
            };
            let mut run = |lo: f64, hi: f64| {
                let mut drawn: Vec<(f64, f64)> = Vec::with_capacity(1000);
                while drawn.len() < 1000 {
                    let (j, y) = item(&mut rng);
                    if (lo..=hi).contains(&j) {
                        drawn.push((j, y));
                    }
                }
                let truth = drawn.iter().map(|d| d.1).sum::<f64>() / 1000.0;
                (RunItems::scores(drawn.iter().map(|d| d.0).collect()), truth)
            };
            let runs = [run(3.8, 4.8), run(3.0, 3.6), run(1.9, 2.7)];
            for (k, (items, truth)) in runs.iter().enumerate() {
                let (lo, hi) = estimate(basis(), items, &settings).unwrap().mean.interval;
                covered[k] += usize::from(lo <= *truth && *truth <= hi);
            }
            for (i, (a, b)) in [(0, 1), (0, 2), (1, 2)].into_iter().enumerate() {
                let c = compare(basis(), &runs[a].0, &runs[b].0, &settings).unwrap();
                let (lo, hi) = c.difference.interval;
                let d = runs[a].1 - runs[b].1;
                covered[3 + i] += usize::from(lo <= d && d <= hi);
            }
        }
        let rate = covered.map(|c| c as f64 / REPS as f64);
        let names = [
            "top",
            "middle",
            "bottom",
            "top − middle",
            "top − bottom",
            "middle − bottom",
        ];
        for (name, r) in names.iter().zip(rate) {
            println!("{name}: covers {:.1}%", 100.0 * r);
        }
        for (name, r) in names.iter().zip(rate).skip(3) {
            assert!((0.93..=0.97).contains(&r), "{name} covers {r}");
        }
    }

    /// Runs of two judge versions at opposite ends of the scale, with `bayes` and isotonic
    /// versions sharing 40 or all 200 anchor items (2,000 replications with `bayes`, 600
    /// isotonic; the ranking on every fourth): the compare's 95% interval covers 93–97%
    /// (94.7–95.9% `bayes`, 94.5–96.3% isotonic), and the ranking's family 93–98.5% with
    /// `bayes` (max-t errs wide). With isotonic versions the family is measured on 150
    /// replications here (90.0–93.3%, within one version 90.0–91.3%), too few to tell 93% from
    /// 95%: over four seed bases of 600 replications each, every one ranked, it covers 94.5%
    /// across versions and 93.5% within one (2,400 each; 92.0–95.0% and 92.2% before the
    /// half-samples counted the bias correction's noise, docs/judge-versions.md), so here it
    /// must cover as often as within one version, less 1.5 points.
    /// The correlation taken at the anchors' centre covered 83.5% (`bayes`, 200 shared).
    #[test]
    fn cross_version_answers_at_opposite_ends_of_the_scale_cover_at_their_level() {
        for method in [Method::Bayes, Method::Isotonic] {
            for shared in [40, 200] {
                let reps = if method == Method::Bayes { 2000 } else { 600 };
                let (compared, ranked, within) = opposite_ends(method, shared, reps);
                println!(
                    "{} versions, {shared} shared: compare {:.1}%, rank family {:.1}% (within one version {:.1}%)",
                    method.as_str(),
                    100.0 * compared,
                    100.0 * ranked,
                    100.0 * within
                );
                assert!(
                    (0.93..=0.97).contains(&compared),
                    "{method:?}, {shared} shared: compare covers {compared}"
                );
                let floor = match method {
                    Method::Bayes => 0.93,
                    _ => within - 0.015,
                };
                assert!(
                    (floor..=0.985).contains(&ranked),
                    "{method:?}, {shared} shared: the family covers {ranked} (within one version {within})"
                );
            }
        }
    }
}
