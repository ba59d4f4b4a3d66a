//! What corrects a run: the one abstraction run-level answers are written against.
//!
//! `estimate`, `compare` and `rank` ask a source for a run's answer, its corrected scores and
//! joint draws of the error its corrector (and its groups) put in its runs' plain answers. A
//! cell's calibrator version with its anchors ([`super::Anchored`]) is the source today; a
//! judge version's calibration, or a panel of judges, is another implementation of this trait,
//! not another path through every layer.
//!
//! **Joint error of runs of different sources.** Runs of one source share its corrector's
//! error (one draw for all of them); runs of two sources get independent draws, which is right
//! where their correctors rest on different anchors. Two sources whose anchors share items (a
//! judge's two versions re-scored on one anchor set) have correlated correctors: such a source
//! pair is represented by one source that corrects both kinds of run (its `add_shared_errors`
//! then draws them jointly), so the correlation is never lost by splitting them.

use super::{AnswerSettings, RunComparison, RunEstimate, RunItems};
use crate::error::Result;
use crate::rng::Rng;

/// Corrects runs and knows the uncertainty of its correction.
pub trait Source {
    /// One run's answer: labelled where it has labelled items, plain otherwise.
    fn estimate(&self, run: &RunItems, settings: &AnswerSettings) -> Result<RunEstimate>;

    /// The corrected scores of `scores` (the labelled path's f).
    fn corrected(&self, scores: &[f64]) -> Result<Vec<f64>>;

    /// The spacing of the reference scale's levels (0 for a continuous scale): the labelled
    /// path's floor on a variance.
    fn spacing(&self) -> f64;

    /// Adds to `errors` (draw-major, one column per run of `runs`) joint draws of the error
    /// this source's corrector and groups put in the plain answers of the runs in `columns`,
    /// which it corrects: shared between those runs as its model says.
    fn add_shared_errors(
        &self,
        runs: &[RunItems],
        columns: &[usize],
        settings: &AnswerSettings,
        errors: &mut [f64],
        rng: &mut Rng,
    ) -> Result<()>;

    /// Each anchor's weight in this source's corrector error of `run`'s plain answer (see
    /// `leverage`); `None` where its answers carry no error from anchors.
    fn leverage(&self, _run: &RunItems) -> Option<super::leverage::Leverage> {
        None
    }

    /// Its measure of the groups' bias, where it has one (the group terms of its answers).
    fn groups(&self) -> Option<&super::groups::GroupBias> {
        None
    }

    /// The difference of two runs it corrects, A − B, with what they share taken into account.
    fn compare(
        &self,
        a: &RunItems,
        b: &RunItems,
        settings: &AnswerSettings,
    ) -> Result<RunComparison>;
}

/// Whether two sources are one (so their runs share a corrector error).
pub fn same(a: &dyn Source, b: &dyn Source) -> bool {
    std::ptr::addr_eq(a as *const dyn Source, b as *const dyn Source)
}

#[cfg(test)]
mod tests {
    //! The worked example of a new source (docs/architecture.md): a stub that corrects by a
    //! known shift with a known noise and no corrector error. Adding it touches nothing but
    //! this impl; `compare_sources` and `rank_sources` take it beside a cell's version.

    use super::super::groups::BiasShift;
    use super::super::inference::{self, Difference};
    use super::super::rank::{ErrorRate, RankSettings, rank_sources};
    use super::super::{
        Anchored, AnswerPath, Basis, GroupAnswer, SharedResidual, Support, Term, compare_sources,
        independent,
    };
    use super::*;
    use crate::identity::IdentityModel;
    use crate::stats::standard_normal;
    use crate::{Cell, Model};

    /// Reference = judge score + `shift`, give or take noise of variance `noise`, known
    /// exactly: its answers carry only the run's own noise.
    struct Shifted {
        shift: f64,
        noise: f64,
    }

    impl Source for Shifted {
        fn estimate(&self, run: &RunItems, settings: &AnswerSettings) -> Result<RunEstimate> {
            let corrected = self.corrected(&run.scores)?;
            let mean = inference::plain(&corrected, self.noise, 0.0, None, settings.level)
                .map_err(crate::error::CalibrateError::TooFew)?;
            Ok(RunEstimate {
                path: AnswerPath::Plain,
                mean,
                term: Term::NotNeeded,
                support: Support {
                    anchor_range: (f64::NEG_INFINITY, f64::INFINITY),
                    outside: 0.0,
                    thin: 0.0,
                },
                transport: None,
                advice: None,
                group: GroupAnswer::of(&BiasShift::none(), None),
            })
        }

        fn corrected(&self, scores: &[f64]) -> Result<Vec<f64>> {
            Ok(scores.iter().map(|j| j + self.shift).collect())
        }

        fn spacing(&self) -> f64 {
            0.0
        }

        fn add_shared_errors(
            &self,
            _runs: &[RunItems],
            _columns: &[usize],
            _settings: &AnswerSettings,
            _errors: &mut [f64],
            _rng: &mut Rng,
        ) -> Result<()> {
            Ok(())
        }

        fn compare(
            &self,
            a: &RunItems,
            b: &RunItems,
            settings: &AnswerSettings,
        ) -> Result<RunComparison> {
            let (ea, eb) = (self.estimate(a, settings)?, self.estimate(b, settings)?);
            Ok(independent(ea, eb, None, settings))
        }
    }

    fn run(n: usize, centre: f64) -> RunItems {
        RunItems::scores(
            (0..n)
                .map(|i| centre + (i % 5) as f64 * 0.1 - 0.2)
                .collect(),
        )
    }

    /// Two runs of two stub sources: the difference is the shifted means' and its variance the
    /// two noises over the runs' sizes, as independent sources give.
    #[test]
    fn runs_of_two_sources_compare_with_independent_errors() {
        let (a, b) = (
            Shifted {
                shift: 0.5,
                noise: 0.25,
            },
            Shifted {
                shift: -0.5,
                noise: 1.0,
            },
        );
        let settings = AnswerSettings::default();
        let c = compare_sources((&a, &run(100, 3.0)), (&b, &run(400, 3.0)), &settings).unwrap();
        assert!(
            (c.difference.estimate - 1.0).abs() < 1e-12,
            "{}",
            c.difference.estimate
        );
        let expected = 0.25 / 100.0 + 1.0 / 400.0;
        assert!((c.difference.variance.total() - expected).abs() < 1e-12);
        let by_hand = Difference::of_independent(&c.a.mean, &c.b.mean, settings.level);
        assert_eq!(c.difference.interval, by_hand.interval);
    }

    /// A ranking over a cell's version and a stub: each pair's standard error is the root sum
    /// of its runs' variances (the version's corrector error and the stub's noise drawn
    /// independently), within the draws' Monte Carlo error (20,000 draws: about 1%).
    #[test]
    fn a_ranking_takes_runs_of_a_cell_and_of_another_source() {
        let mut rng = <Rng as crate::rng::SeedableRng>::seed_from_u64(7);
        let pairs: Vec<(f64, f64)> = (0..400)
            .map(|i| {
                let j = 1.0 + 4.0 * (i as f64 / 400.0);
                (j, (j + 0.3 * standard_normal(&mut rng)).clamp(1.0, 5.0))
            })
            .collect();
        let cell = Cell {
            pairs,
            scale: (1.0, 5.0),
        };
        let model = Model::Identity(IdentityModel {});
        let version = Anchored::new(Basis {
            model: &model,
            anchors: &cell,
            groups: None,
        })
        .unwrap();
        let stub = Shifted {
            shift: 0.2,
            noise: 0.09,
        };
        let runs = [run(200, 2.0), run(200, 3.0), run(50, 4.0)];
        let sources: [&dyn Source; 3] = [&version, &version, &stub];
        let how = RankSettings {
            error: ErrorRate::PerPair,
            ..RankSettings::default()
        };
        let settings = AnswerSettings::default();
        let r = rank_sources(&sources, &runs, &settings, &how).unwrap();
        let own: Vec<f64> = runs
            .iter()
            .zip(sources)
            .map(|(run, s)| s.estimate(run, &settings).unwrap().mean.variance.total())
            .collect();
        // Runs 0 and 1 share the version's offset error, which cancels in their difference;
        // run 2's stub error is independent of both.
        let sampling = |k: usize| r.runs[k].estimate.mean.variance.sampling;
        for p in &r.pairs {
            let expected = if p.b == 2 {
                own[p.a] + own[2]
            } else {
                sampling(p.a) + sampling(p.b)
            };
            let ratio = p.standard_error.powi(2) / expected;
            assert!(
                (ratio - 1.0).abs() < 0.03,
                "pair ({}, {}): {ratio}",
                p.a,
                p.b
            );
        }
        assert_eq!(r.order(), vec![2, 1, 0]);
    }

    /// One world of the coverage study: what judge a source's anchors and runs come from.
    #[derive(Clone, Copy)]
    struct World {
        /// The judge's slope on the reference (0.15: a weak judge).
        slope: f64,
        /// References rounded to integers on 1–5, skewed to the top of the scale.
        discrete: bool,
        anchors: usize,
    }

    /// The coverage studies' worlds: a strong judge, a weak one (slope 0.15) and a skewed
    /// integer scale with 20 anchors a source.
    const WORLDS: [(&str, World); 3] = [
        (
            "strong judge",
            World {
                slope: 1.0,
                discrete: false,
                anchors: 100,
            },
        ),
        (
            "weak judge",
            World {
                slope: 0.15,
                discrete: false,
                anchors: 100,
            },
        ),
        (
            "skewed 1-5, 20 anchors",
            World {
                slope: 0.8,
                discrete: true,
                anchors: 20,
            },
        ),
    ];

    /// An item of `source` (its bias `bias`): (judge score, reference).
    fn item(w: World, bias: f64, rng: &mut Rng) -> (f64, f64) {
        let (judges, reference) = scored(w, &[bias], rng);
        (judges[0], reference)
    }

    /// A run of 200 items of a judge biased `bias`, and its true mean reference.
    fn drawn_run(w: World, bias: f64, rng: &mut Rng) -> (RunItems, f64) {
        let items: Vec<(f64, f64)> = (0..200).map(|_| item(w, bias, rng)).collect();
        let truth = items.iter().map(|i| i.1).sum::<f64>() / items.len() as f64;
        (RunItems::scores(items.iter().map(|i| i.0).collect()), truth)
    }

    /// An item scored by judges biased `biases` (each with noise of its own): their scores,
    /// and its one reference.
    fn scored(w: World, biases: &[f64], rng: &mut Rng) -> (Vec<f64>, f64) {
        use crate::rng::RngExt;
        let quality = if w.discrete {
            1.0 + 4.0 * (1.0 - rng.random::<f64>().powi(2))
        } else {
            1.0 + 4.0 * rng.random::<f64>()
        };
        let judges = biases
            .iter()
            .map(|b| 3.0 + w.slope * (quality - 3.0) + b + 0.6 * standard_normal(rng))
            .collect();
        let reference = quality + 0.3 * standard_normal(rng);
        let reference = if w.discrete {
            reference.round().clamp(1.0, 5.0)
        } else {
            reference
        };
        (judges, reference)
    }

    /// How often the answers over runs of two sources cover their truth, each source an
    /// identity version on anchors of its own (its judge biased by +0.4 or −0.3, so only its
    /// own anchors correct it), the runs drawn like its anchors: `compare_sources`'s 95%
    /// interval for run A − run B, and `rank_sources`'s family of three pairs (two runs of the
    /// first source, one of the second) holding together at 95%.
    fn coverage(w: World, reps: u64) -> (f64, f64) {
        use crate::rng::SeedableRng;
        let settings = AnswerSettings::default();
        let how = RankSettings {
            draws: super::super::rank::DRAWS,
            ..RankSettings::default()
        };
        let model = Model::Identity(IdentityModel {});
        let (mut compared, mut ranked) = (0, 0);
        for rep in 0..reps {
            let mut rng = <Rng as SeedableRng>::seed_from_u64(rep);
            let cell = |bias: f64, rng: &mut Rng| Cell {
                pairs: (0..w.anchors).map(|_| item(w, bias, rng)).collect(),
                scale: (1.0, 5.0),
            };
            let (ca, cb) = (cell(0.4, &mut rng), cell(-0.3, &mut rng));
            let basis = |cell| Basis {
                model: &model,
                anchors: cell,
                groups: None,
            };
            let (sa, sb) = (
                Anchored::new(basis(&ca)).unwrap(),
                Anchored::new(basis(&cb)).unwrap(),
            );
            let mut run = |bias: f64| drawn_run(w, bias, &mut rng);
            let ((a1, t1), (a2, t2), (b, tb)) = (run(0.4), run(0.4), run(-0.3));
            let c = compare_sources((&sa, &a1), (&sb, &b), &settings).unwrap();
            let (lo, hi) = c.difference.interval;
            compared += usize::from(lo <= t1 - tb && t1 - tb <= hi);
            let sources: [&dyn Source; 3] = [&sa, &sa, &sb];
            let runs = [a1, a2, b];
            let r = rank_sources(&sources, &runs, &settings, &how).unwrap();
            let truth = [t1, t2, tb];
            let all = r.pairs.iter().all(|p| {
                let d = truth[p.a] - truth[p.b];
                p.interval.0 <= d && d <= p.interval.1
            });
            ranked += usize::from(all);
        }
        (compared as f64 / reps as f64, ranked as f64 / reps as f64)
    }

    /// Whether a ranking of `runs` (each with its truth) by `sources` (two judge versions,
    /// their corrector errors drawn correlated as the shared items' `residuals` say) holds as
    /// a family.
    fn family_covers(
        sources: &[&dyn Source],
        runs: [(RunItems, f64); 3],
        shared: &[SharedResidual],
        settings: &AnswerSettings,
        how: &RankSettings,
    ) -> bool {
        // The third run is the other version's: its pairs with the first two.
        let leverage = |k: usize| sources[k].leverage(&runs[k].0).unwrap();
        let other = leverage(2);
        let rho = (0..2)
            .map(|k| super::super::shared_correlation_for_draws(shared, &leverage(k), &other))
            .fold(f64::INFINITY, f64::min);
        let how = RankSettings {
            shared: rho,
            ..*how
        };
        let (runs, truth): (Vec<RunItems>, Vec<f64>) = runs.into_iter().unzip();
        let r = rank_sources(sources, &runs, settings, &how).unwrap();
        r.pairs.iter().all(|p| {
            let d = truth[p.a] - truth[p.b];
            p.interval.0 <= d && d <= p.interval.1
        })
    }

    /// Two identity versions' anchors of the same items, (judge, reference) each: their scores
    /// and residuals (reference − judge).
    fn shared_residuals(a: &[(f64, f64)], b: &[(f64, f64)]) -> Vec<SharedResidual> {
        a.iter()
            .zip(b)
            .map(|(&(ja, y), &(jb, _))| SharedResidual {
                scores: (ja, jb),
                residuals: (y - ja, y - jb),
            })
            .collect()
    }

    /// How often `compare_correlated`'s 95% interval covers when the two sources are two judge
    /// versions calibrated on the *same* anchor items (re-scored, one reference each): version
    /// A scores +0.4 off, version B −0.3, each with its own noise; run A is 200 items scored by
    /// A, run B 200 others scored by B. The two versions' corrector errors share the items'
    /// references and qualities, so they are correlated (independent, the interval covers
    /// 99.2% for the weak judge).
    fn coverage_across_versions(w: World, reps: u64) -> (f64, f64) {
        use crate::rng::SeedableRng;
        let settings = AnswerSettings::default();
        let how = RankSettings {
            draws: super::super::rank::DRAWS,
            ..RankSettings::default()
        };
        let model = Model::Identity(IdentityModel {});
        let (mut covered, mut ranked) = (0, 0);
        for rep in 0..reps {
            let mut rng = <Rng as SeedableRng>::seed_from_u64(10_000 + rep);
            let (pa, pb): (Vec<_>, Vec<_>) = (0..w.anchors)
                .map(|_| {
                    let (j, y) = scored(w, &[0.4, -0.3], &mut rng);
                    ((j[0], y), (j[1], y))
                })
                .unzip();
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
            let basis = |cell| Basis {
                model: &model,
                anchors: cell,
                groups: None,
            };
            let (sa, sb) = (
                Anchored::new(basis(&ca)).unwrap(),
                Anchored::new(basis(&cb)).unwrap(),
            );
            let mut run = |bias: f64| drawn_run(w, bias, &mut rng);
            let ((a, ta), (a2, t2), (b, tb)) = (run(0.4), run(0.4), run(-0.3));
            // The residuals of the two identity versions on the shared items.
            let residuals = shared_residuals(&ca.pairs, &cb.pairs);
            let c = super::super::compare_correlated((&sa, &a), (&sb, &b), &residuals, &settings)
                .unwrap();
            let (lo, hi) = c.difference.interval;
            covered += usize::from(lo <= ta - tb && ta - tb <= hi);
            // The ranking draws the two versions' corrector errors correlated as much (on every
            // other replication: its joint draws are the slow part).
            if rep % 2 == 1 {
                continue;
            }
            let sources: [&dyn Source; 3] = [&sa, &sa, &sb];
            let runs = [(a, ta), (a2, t2), (b, tb)];
            ranked += usize::from(family_covers(&sources, runs, &residuals, &settings, &how));
        }
        (
            covered as f64 / reps as f64,
            ranked as f64 / reps.div_ceil(2) as f64,
        )
    }

    /// As `coverage_across_versions`, with systems: the anchors come from 8 systems whose
    /// outputs the judge (both versions alike) misjudges by a bias of sd `tau`; each version's
    /// source measures the groups' bias from its own residuals. Run A is a known system scored
    /// by A, run B a new system scored by B; the ranking (every other replication) adds a
    /// second known system scored by A. The third rate is the same question within version A
    /// alone (its new system scored by A): what the group term gives where no correlation
    /// between versions needs accounting for.
    fn coverage_across_versions_grouped(w: World, tau: f64, reps: u64) -> (f64, f64, f64) {
        use crate::rng::SeedableRng;
        use crate::runlevel::groups::GroupBias;
        let settings = AnswerSettings::default();
        let model = Model::Identity(IdentityModel {});
        let names: Vec<String> = (0..8).map(|g| format!("s{g}")).collect();
        let how = RankSettings {
            draws: super::super::rank::DRAWS,
            ..RankSettings::default()
        };
        let (mut covered, mut ranked, mut within) = (0, 0, 0);
        for rep in 0..reps {
            let mut rng = <Rng as SeedableRng>::seed_from_u64(20_000 + rep);
            let bias: Vec<f64> = (0..9).map(|_| tau * standard_normal(&mut rng)).collect();
            let mut pa = Vec::new();
            let mut pb = Vec::new();
            let mut groups = Vec::new();
            for i in 0..w.anchors {
                let g = i % 8;
                let (j, y) = scored(w, &[0.4 + bias[g], -0.3 + bias[g]], &mut rng);
                pa.push((j[0], y));
                pb.push((j[1], y));
                groups.push(Some(names[g].as_str()));
            }
            let residuals =
                |pairs: &[(f64, f64)]| -> Vec<f64> { pairs.iter().map(|(j, y)| y - j).collect() };
            let (ga, gb) = (
                GroupBias::of(&residuals(&pa), &groups),
                GroupBias::of(&residuals(&pb), &groups),
            );
            let (ca, cb) = (
                Cell {
                    pairs: pa.clone(),
                    scale: (1.0, 5.0),
                },
                Cell {
                    pairs: pb.clone(),
                    scale: (1.0, 5.0),
                },
            );
            let (sa, sb) = (
                Anchored::new(Basis {
                    model: &model,
                    anchors: &ca,
                    groups: ga.as_ref(),
                })
                .unwrap(),
                Anchored::new(Basis {
                    model: &model,
                    anchors: &cb,
                    groups: gb.as_ref(),
                })
                .unwrap(),
            );
            let mut run = |version_bias: f64, system: usize, group: Option<&str>| {
                let (mut run, truth) = drawn_run(w, version_bias + bias[system], &mut rng);
                run.group = group.map(str::to_owned);
                (run, truth)
            };
            // A known system (s0) by version A; a new one (the ninth bias) by version B.
            let ((a, ta), (b, tb)) = (run(0.4, 0, Some("s0")), run(-0.3, 8, None));
            let (a2, t2) = run(0.4, 1, Some("s1"));
            // The same question within version A alone: its new system scored by A.
            let (b1, t1) = run(0.4, 8, None);
            let basis = Basis {
                model: &model,
                anchors: &ca,
                groups: ga.as_ref(),
            };
            let (lo, hi) = super::super::compare(basis, &a, &b1, &settings)
                .unwrap()
                .difference
                .interval;
            within += usize::from(lo <= ta - t1 && ta - t1 <= hi);
            let shared = shared_residuals(&pa, &pb);
            let c =
                super::super::compare_correlated((&sa, &a), (&sb, &b), &shared, &settings).unwrap();
            let (lo, hi) = c.difference.interval;
            covered += usize::from(lo <= ta - tb && ta - tb <= hi);
            if rep % 2 == 1 {
                continue;
            }
            let sources: [&dyn Source; 3] = [&sa, &sa, &sb];
            let runs = [(a, ta), (a2, t2), (b, tb)];
            ranked += usize::from(family_covers(&sources, runs, &shared, &settings, &how));
        }
        (
            covered as f64 / reps as f64,
            ranked as f64 / reps.div_ceil(2) as f64,
            within as f64 / reps as f64,
        )
    }

    /// Across judge versions with systems (groups) whose bias differs by τ = 0.3: a known
    /// system's run by one version against a new system's by the other (2,000 replications,
    /// binomial sd 0.5 points). The two versions' group terms are correlated through the
    /// shared items (`compare_correlated`): the compare covers at least 93%, and at least as
    /// often as the same question within one version (less would mean the correlation was
    /// overcounted), within 98.5%. It errs wide where the group term itself does (a weak
    /// judge, whose group means' noise is as large as τ: τ's posterior leans wide with 8
    /// groups), and about a point wider than within one version (two τ posteriors mixed
    /// independently). The ranking's family up to 98.5%, as for any max-t family.
    #[test]
    fn answers_across_judge_versions_with_groups_cover_at_least_their_level() {
        for (name, w) in WORLDS.iter().take(2) {
            let (covered, ranked, within) = coverage_across_versions_grouped(*w, 0.3, 2000);
            println!(
                "across versions with groups, {name}: compare {:.1}% (within one version {:.1}%), rank family {:.1}%",
                100.0 * covered,
                100.0 * within,
                100.0 * ranked
            );
            assert!(
                (0.93..=0.985).contains(&covered) && covered >= within - 0.01,
                "{name}: compare covers {covered}, within one version {within}"
            );
            assert!(
                (0.93..=0.985).contains(&ranked),
                "{name}: the family covers {ranked}"
            );
        }
    }

    /// Across judge versions on shared anchors (the README's rates): the compare's interval
    /// in 93–97%; the ranking's family up to 98.5%, as for any max-t family.
    #[test]
    fn answers_across_judge_versions_on_shared_anchors_cover_at_their_level() {
        for (name, w) in WORLDS {
            let (covered, ranked) = coverage_across_versions(w, 2000);
            println!(
                "across versions, {name}: compare {:.1}%, rank family {:.1}%",
                100.0 * covered,
                100.0 * ranked
            );
            assert!(
                (0.93..=0.97).contains(&covered),
                "{name}: compare covers {covered}"
            );
            assert!(
                (0.93..=0.985).contains(&ranked),
                "{name}: the family covers {ranked}"
            );
        }
    }

    /// Answers over runs of two sources cover at their level, for a strong judge, a weak one
    /// (slope 0.15) and a skewed integer scale with 20 anchors a source; 2,000 replications a
    /// world, the rank family on the default 20,000 draws (the rates are in the README).
    /// Coverage must lie in 93–97% (the family up to 98.5%, where max-t is conservative).
    #[test]
    fn answers_over_two_sources_cover_at_their_level() {
        let worlds = WORLDS;
        for (name, w) in worlds {
            let (compared, ranked) = coverage(w, 2000);
            println!(
                "{name}: compare {:.1}%, rank family {:.1}%",
                100.0 * compared,
                100.0 * ranked
            );
            assert!(
                (0.93..=0.97).contains(&compared),
                "{name}: compare covers {compared}"
            );
            assert!(
                (0.93..=0.985).contains(&ranked),
                "{name}: the family covers {ranked}"
            );
        }
    }
}
