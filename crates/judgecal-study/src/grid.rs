//! `judgecal-study coverage --grid`: where the run-level intervals could break, each cell with its
//! own known truth. Every replication draws anchors, trains the version as a job does (held-out
//! predictions, then the fit; the groups' bias from the held-out residuals), draws two runs of
//! the same prompts and asks the same `judgecal_stats::runlevel` code the service uses.
//!
//! The world of a cell: a latent quality q; the judge sees j = 3 + slope·(q − 3) + N(0, 0.8²)
//! (rounded to an integer on a discrete scale); the reference is y = q + u_g, u_g the bias of
//! the system g whose output it is (rounded and kept in 1–5 on a discrete scale). q is Beta-
//! shaped on 1–5 ([`stand_in_reference`]), or skewed to the top of the scale on a discrete
//! one. Runs A and B answer the same prompts with independent qualities, so their references
//! are independent: the runs' own difference is not the population's.
//!
//! Cells: the judge's slope (0.1, 0.2, 0.5, 0.8); an integer 1–5 scale; 2, 3 and 4 groups with
//! a between-group bias sd of 0, 0.1 and 0.5, and 8 and 20 with 0, 0.1 and 0.3, runs of a
//! known group or of new ones; a weak judge as on real data (slope 0.1, its 3 sibling
//! rubrics up to 0.2, pooled; 12 systems with bias sd 0.3, runs of 50); 3, 5, 10 and 50
//! labels on the runs; runs in 2, 5 and 20 clusters that share part of their references.

use judgecal_stats::rng::Rng;
use judgecal_stats::rng::SliceRandom;
use judgecal_stats::rng::{RngExt, SeedableRng};

use super::synthetic::stand_in_reference;
use judgecal_stats::runlevel::inference::Estimand;
use judgecal_stats::runlevel::{self, AnswerSettings, Basis, RunItems};
use judgecal_stats::stats::{mean, standard_normal};
use judgecal_stats::train::train_pooled_with_groups;
use judgecal_stats::{Cell, Method, Run};

const SCALE: (f64, f64) = (1.0, 5.0);
const JUDGE_NOISE: f64 = 0.8;

/// How a cell's runs relate to the anchors' groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// Anchors without groups; runs of the anchors' population.
    Ungrouped,
    /// Runs of two of the anchors' groups.
    Known,
    /// Runs of two new groups.
    New,
}

/// How the systems' biases u_g are drawn (each with sd about τ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Biases {
    Normal,
    /// τ·(E − 1), E exponential: skewed (skewness 2), a long tail on one side.
    Skewed,
    /// τ·z, but one system in [`OUTLYING_ONE_IN`] (at random, known or new) sits at ±4 τ.
    Outlying,
    /// Two points, sd τ: one system in five at 2 τ, the others at −τ/2.
    TwoPoint,
}

/// How often a system's bias is an outlier in [`Biases::Outlying`].
const OUTLYING_ONE_IN: u32 = 12;

impl Biases {
    fn draw(self, rng: &mut Rng, tau: f64) -> f64 {
        match self {
            Biases::Normal => tau * standard_normal(rng),
            Biases::Skewed => tau * (-(1.0 - rng.random::<f64>()).ln() - 1.0),
            Biases::Outlying => {
                if rng.random_range(0..OUTLYING_ONE_IN) == 0 {
                    let sign = if rng.random::<bool>() { 1.0 } else { -1.0 };
                    4.0 * tau * sign
                } else {
                    tau * standard_normal(rng)
                }
            }
            Biases::TwoPoint => {
                if rng.random_range(0..5) == 0 {
                    2.0 * tau
                } else {
                    -0.5 * tau
                }
            }
        }
    }
}

/// One cell of the grid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridWorld {
    pub slope: f64,
    pub discrete: bool,
    /// Groups among the anchors (0: none named).
    pub groups: usize,
    pub tau: f64,
    pub runs: Runs,
    /// Labelled items per run (0: the plain path).
    pub labels: usize,
    /// Clusters of each run's items (0: none); a cluster shares N(0, 0.5²) of its references.
    pub clusters: usize,
    pub anchors: usize,
    pub run: usize,
    /// Rubrics of the judge trained together (1: the cell alone); the others' slopes step up
    /// to `slope` + 0.1, each with biases of its own, and the answers are the first's.
    pub rubrics: usize,
    pub biases: Biases,
    /// Systems' own reference noise, which the judge does not see: system g of G adds
    /// N(0, (spread·g/(G − 1))²) to its references (0: every system alike).
    pub spread: f64,
    /// Known runs are of two systems drawn at random (`false`: the first two).
    pub any_system: bool,
    /// Run A is of the noisiest known system (the last), B of any other.
    pub noisiest: bool,
}

impl GridWorld {
    const BASE: GridWorld = GridWorld {
        slope: 0.5,
        discrete: false,
        groups: 0,
        tau: 0.0,
        runs: Runs::Ungrouped,
        labels: 0,
        clusters: 0,
        anchors: 500,
        run: 400,
        rubrics: 1,
        biases: Biases::Normal,
        spread: 0.0,
        any_system: false,
        noisiest: false,
    };

    pub fn label(&self) -> String {
        let mut parts = vec![format!("slope {}", self.slope)];
        if self.discrete {
            parts.push("integer 1–5, skewed".into());
        }
        if self.groups > 0 {
            parts.push(format!(
                "{} groups, bias sd {}, {} runs",
                self.groups,
                self.tau,
                match self.runs {
                    Runs::Known => "known",
                    Runs::New => "new",
                    Runs::Ungrouped => "ungrouped",
                }
            ));
        }
        if self.labels > 0 {
            parts.push(format!("{} labels", self.labels));
        }
        if self.clusters > 0 {
            parts.push(format!("{} clusters", self.clusters));
        }
        if self.rubrics > 1 {
            parts.push(format!(
                "{} rubrics pooled, {} anchors and runs of {}",
                self.rubrics, self.anchors, self.run
            ));
        } else if self.any_system {
            parts.push(format!("{} anchors and runs of {}", self.anchors, self.run));
        }
        match self.biases {
            Biases::Normal => {}
            Biases::Skewed => parts.push("skewed biases".into()),
            Biases::Outlying => parts.push(format!("one system in {OUTLYING_ONE_IN} at ±4 τ")),
            Biases::TwoPoint => parts.push("two-point biases (one system in five far)".into()),
        }
        if self.spread > 0.0 {
            parts.push(format!("systems' own noise sd 0–{}", self.spread));
        }
        if self.noisiest {
            parts.push("run A of the noisiest system".into());
        }
        parts.join(", ")
    }
}

/// The grid the issue on comparisons across systems asks for.
pub fn cells() -> Vec<GridWorld> {
    let mut out = Vec::new();
    for slope in [0.1, 0.2, 0.5, 0.8] {
        out.push(GridWorld {
            slope,
            ..GridWorld::BASE
        });
    }
    out.push(GridWorld {
        discrete: true,
        ..GridWorld::BASE
    });
    // Few groups (the conservative rule) with τ up to about 10 times a group's standard error
    // (0.04–0.06 with 125–250 anchors a group); then 8 and 20.
    let few = [2, 3, 4].map(|g| (g, [0.0, 0.1, 0.5]));
    let many = [8, 20].map(|g| (g, [0.0, 0.1, 0.3]));
    for (groups, taus) in few.into_iter().chain(many) {
        for tau in taus {
            for runs in [Runs::Known, Runs::New] {
                out.push(GridWorld {
                    groups,
                    tau,
                    runs,
                    ..GridWorld::BASE
                });
            }
        }
    }
    // Few groups where one system in five is far from the others (issue 57): two-point biases.
    for groups in [2, 3, 4, 5] {
        for runs in [Runs::Known, Runs::New] {
            out.push(GridWorld {
                groups,
                tau: 0.5,
                runs,
                biases: Biases::TwoPoint,
                any_system: true,
                ..GridWorld::BASE
            });
        }
    }
    for labels in [3, 5, 10, 50] {
        out.push(GridWorld {
            labels,
            discrete: true,
            ..GridWorld::BASE
        });
    }
    // A weak judge on real data (issue 38's (8)): slopes 0.1–0.2, 12 systems, 50 items a run,
    // 4 rubrics pooled.
    for runs in [Runs::Known, Runs::New] {
        out.push(GridWorld {
            slope: 0.1,
            groups: 12,
            tau: 0.3,
            runs,
            anchors: 600,
            run: 50,
            rubrics: 4,
            ..GridWorld::BASE
        });
    }
    out.extend(weak_real());
    for clusters in [2, 5, 20] {
        out.push(GridWorld {
            clusters,
            labels: 50,
            ..GridWorld::BASE
        });
    }
    out
}

/// A weak judge shaped like issue 57's held-back real set: 12 systems of 100 items (half
/// anchors, half the run), slopes 0.1 and 0.2, systems' biases normal, skewed or with an
/// outlier, each system's references as noisy as its own (sd 0–1.2 beyond what the judge
/// sees) or all alike, runs of any two systems (and of the noisiest against any other).
pub fn weak_real() -> Vec<GridWorld> {
    let mut out = Vec::new();
    for slope in [0.1, 0.2] {
        for biases in [Biases::Normal, Biases::Skewed, Biases::Outlying] {
            for spread in [0.0, 1.2] {
                // Run A of the noisiest system too, where systems' noise differs.
                let of_noisiest = spread > 0.0 && biases == Biases::Normal;
                for (runs, noisiest) in [
                    (Runs::Known, false),
                    (Runs::Known, true),
                    (Runs::New, false),
                ] {
                    if noisiest && !of_noisiest {
                        continue;
                    }
                    out.push(GridWorld {
                        slope,
                        noisiest,
                        groups: 12,
                        tau: 0.3,
                        runs,
                        anchors: 600,
                        run: 50,
                        biases,
                        spread,
                        any_system: true,
                        ..GridWorld::BASE
                    });
                }
            }
        }
    }
    out
}

/// What one cell counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GridCounts {
    pub reps: usize,
    /// One run's mean covered.
    pub estimate: usize,
    /// The runs' own difference covered (the default estimand).
    pub compare: usize,
    /// The same, by the code before this grid: the corrected differences' spread, no group term.
    pub compare_before: usize,
    pub estimate_before: usize,
    /// Where the population difference is 0 (runs of one population): the population
    /// estimand's interval covered it, and its p < 0.05.
    pub population: usize,
    pub rejected: usize,
    pub population_reps: usize,
    pub width: f64,
}

impl GridCounts {
    fn add(&mut self, o: &GridCounts) {
        self.reps += o.reps;
        self.estimate += o.estimate;
        self.compare += o.compare;
        self.compare_before += o.compare_before;
        self.estimate_before += o.estimate_before;
        self.population += o.population;
        self.rejected += o.rejected;
        self.population_reps += o.population_reps;
        self.width += o.width;
    }

    pub fn rate(&self, k: usize) -> f64 {
        k as f64 / self.reps.max(1) as f64
    }
}

fn quality(rng: &mut Rng, w: &GridWorld) -> f64 {
    if w.discrete {
        // Most of the mass near the top of the scale.
        1.0 + 4.0 * (1.0 - rng.random::<f64>().powi(2))
    } else {
        stand_in_reference(1, SCALE, rng)[0]
    }
}

fn judge(rng: &mut Rng, w: &GridWorld, q: f64) -> f64 {
    judge_at(rng, w, w.slope, q)
}

fn judge_at(rng: &mut Rng, w: &GridWorld, slope: f64, q: f64) -> f64 {
    let j = 3.0 + slope * (q - 3.0) + JUDGE_NOISE * standard_normal(rng);
    if w.discrete { j.round() } else { j }
}

fn reference(w: &GridWorld, q: f64, u: f64) -> f64 {
    if w.discrete {
        (q + u).round().clamp(SCALE.0, SCALE.1)
    } else {
        q + u
    }
}

fn inside((lo, hi): (f64, f64), x: f64) -> usize {
    usize::from(lo <= x && x <= hi)
}

/// One replication of `w`.
fn replicate(w: &GridWorld, method: Method, rep: u64) -> Result<GridCounts, String> {
    let mut rng = Rng::seed_from_u64(rep.wrapping_mul(0x9E37_79B9).wrapping_add(17));
    let biases: Vec<f64> = (0..w.groups)
        .map(|_| w.biases.draw(&mut rng, w.tau))
        .collect();
    let (mut cells, names) = anchors(w, &biases, &mut rng);
    let never = std::sync::atomic::AtomicBool::new(false);
    let fit_run = Run::new(&never, &|_| {});
    let group_names: Vec<Option<&str>> = names.iter().map(|g| g.as_deref()).collect();
    let (model, bias) = train_pooled_with_groups(method, &cells, &group_names, rep, &fit_run)?;
    let cell = cells.swap_remove(0);
    let (a, b, y_a, y_b) = runs(w, &biases, &mut rng);
    let settings = AnswerSettings {
        seed: rep,
        ..AnswerSettings::default()
    };
    let basis = Basis {
        model: &model,
        anchors: &cell,
        groups: bias.as_ref(),
    };
    let before = Basis {
        groups: None,
        ..basis
    };
    let truth = mean(&y_a) - mean(&y_b);
    let e = runlevel::estimate(basis, &a, &settings)?;
    let c = runlevel::compare(basis, &a, &b, &settings)?;
    let old = AnswerSettings {
        estimand: Estimand::Population,
        ..settings
    };
    let e_before = runlevel::estimate(before, &a, &old)?;
    let c_before = runlevel::compare(before, &a, &b, &old)?;
    let mut counts = GridCounts {
        reps: 1,
        estimate: inside(e.mean.interval, mean(&y_a)),
        estimate_before: inside(e_before.mean.interval, mean(&y_a)),
        compare: inside(c.difference.interval, truth),
        compare_before: inside(c_before.difference.interval, truth),
        width: c.difference.interval.1 - c.difference.interval.0,
        ..GridCounts::default()
    };
    if w.runs == Runs::Ungrouped && w.labels == 0 {
        let p = runlevel::compare(basis, &a, &b, &old)?;
        counts.population_reps = 1;
        counts.population = inside(p.difference.interval, 0.0);
        counts.rejected = usize::from(p.difference.p_value < 0.05);
    }
    Ok(counts)
}

/// System g's own reference noise (the last index: a new system's, drawn as one of theirs).
fn noise_sd(w: &GridWorld, g: usize) -> f64 {
    w.spread * g as f64 / (w.groups.max(2) - 1) as f64
}

/// The anchors of the judge's rubrics (this one first) and each of this rubric's anchors'
/// system.
fn anchors(w: &GridWorld, biases: &[f64], rng: &mut Rng) -> (Vec<Cell>, Vec<Option<String>>) {
    let mut pairs = Vec::with_capacity(w.anchors);
    let mut names = Vec::with_capacity(w.anchors);
    for i in 0..w.anchors {
        let g = (w.groups > 0).then_some(i % w.groups.max(1));
        let q = quality(rng, w);
        let own = match g {
            Some(g) if w.spread > 0.0 => noise_sd(w, g) * standard_normal(rng),
            _ => 0.0,
        };
        pairs.push((
            judge(rng, w, q),
            reference(w, q, g.map_or(0.0, |g| biases[g]) + own),
        ));
        names.push(g.map(|g| format!("g{g}")));
    }
    let mut cells = vec![Cell {
        pairs,
        scale: SCALE,
    }];
    // The judge's other rubrics, pooled with this one: steeper, with biases of their own.
    for r in 1..w.rubrics {
        let slope = w.slope + 0.1 * r as f64 / (w.rubrics - 1) as f64;
        let own: Vec<f64> = (0..w.groups)
            .map(|_| w.tau * standard_normal(rng))
            .collect();
        let pairs = (0..w.anchors)
            .map(|i| {
                let q = quality(rng, w);
                let u = if w.groups > 0 { own[i % w.groups] } else { 0.0 };
                (judge_at(rng, w, slope, q), reference(w, q, u))
            })
            .collect();
        cells.push(Cell {
            pairs,
            scale: SCALE,
        });
    }
    (cells, names)
}

/// The runs: two systems answering the same prompts, with their references.
fn runs(w: &GridWorld, biases: &[f64], rng: &mut Rng) -> (RunItems, RunItems, Vec<f64>, Vec<f64>) {
    let (k_a, k_b) = if w.any_system {
        let a = if w.noisiest {
            w.groups - 1
        } else {
            rng.random_range(0..w.groups)
        };
        (a, (a + rng.random_range(1..w.groups)) % w.groups)
    } else {
        (0, 1)
    };
    let (u_a, u_b, g_a, g_b) = match w.runs {
        Runs::Ungrouped => (0.0, 0.0, None, None),
        Runs::Known => (
            biases[k_a],
            biases[k_b],
            Some(format!("g{k_a}")),
            Some(format!("g{k_b}")),
        ),
        Runs::New => (
            w.biases.draw(rng, w.tau),
            w.biases.draw(rng, w.tau),
            Some("new-a".to_owned()),
            Some("new-b".to_owned()),
        ),
    };
    // A run's own noise: its system's, or a new system's drawn as one of the anchors'.
    let (sd_a, sd_b) = match w.runs {
        _ if w.spread == 0.0 => (0.0, 0.0),
        Runs::Ungrouped => (0.0, 0.0),
        Runs::Known => (noise_sd(w, k_a), noise_sd(w, k_b)),
        Runs::New => (
            noise_sd(w, rng.random_range(0..w.groups)),
            noise_sd(w, rng.random_range(0..w.groups)),
        ),
    };
    let n = w.run;
    let cluster_of: Vec<u64> = (0..n).map(|i| (i * w.clusters.max(1) / n) as u64).collect();
    let (j_a, y_a) = draw_run(w, &cluster_of, u_a, sd_a, rng);
    let (j_b, y_b) = draw_run(w, &cluster_of, u_b, sd_b, rng);
    let ids: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    let mut labelled = vec![false; n];
    for &i in &order[..w.labels.min(n)] {
        labelled[i] = true;
    }
    let items = |j: &[f64], y: &[f64], group: Option<String>| RunItems {
        scores: j.to_vec(),
        reference: if w.labels > 0 {
            (0..n).map(|i| labelled[i].then_some(y[i])).collect()
        } else {
            Vec::new()
        },
        clusters: (w.clusters > 0).then(|| cluster_of.clone()),
        ids: Some(ids.clone()),
        group,
        extra_noise: 0.0,
        input_loading: Vec::new(),
        noise_ratio: None,
        given_scores: None,
        centre_variance: 0.0,
        misfit_variance: 0.0,
        conditional: false,
    };
    (items(&j_a, &y_a, g_a), items(&j_b, &y_b, g_b), y_a, y_b)
}

/// One run's judge scores and references: its system's bias `u`, its own noise `sd`, and
/// what its items' clusters share.
fn draw_run(
    w: &GridWorld,
    cluster_of: &[u64],
    u: f64,
    sd: f64,
    rng: &mut Rng,
) -> (Vec<f64>, Vec<f64>) {
    let shared: Vec<f64> = (0..w.clusters.max(1))
        .map(|_| {
            if w.clusters > 0 {
                0.5 * standard_normal(rng)
            } else {
                0.0
            }
        })
        .collect();
    (0..cluster_of.len())
        .map(|i| {
            let q = quality(rng, w);
            let own = if sd > 0.0 {
                sd * standard_normal(rng)
            } else {
                0.0
            };
            (
                judge(rng, w, q),
                reference(w, q, u + own + shared[cluster_of[i] as usize]),
            )
        })
        .unzip()
}

/// Every cell of `worlds`, `reps` replications each, on `threads` threads.
pub fn run(
    worlds: &[GridWorld],
    method: Method,
    reps: usize,
    threads: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Vec<(GridWorld, GridCounts)>, String> {
    worlds
        .iter()
        .map(|w| {
            let started = std::time::Instant::now();
            let parts: Vec<Result<GridCounts, String>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads.max(1))
                    .map(|t| {
                        s.spawn(move || {
                            let mut sum = GridCounts::default();
                            for rep in (t..reps).step_by(threads.max(1)) {
                                sum.add(&replicate(w, method, rep as u64)?);
                            }
                            Ok(sum)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".into())))
                    .collect()
            });
            let mut total = GridCounts::default();
            for p in parts {
                total.add(&p?);
            }
            progress(&format!(
                "{}: {:.0} s",
                w.label(),
                started.elapsed().as_secs_f64()
            ));
            Ok((*w, total))
        })
        .collect()
}

/// The grid as a Markdown table.
pub fn table(rows: &[(GridWorld, GridCounts)]) -> String {
    let mut out = String::from(
        "| cell | reps | estimate covers (before) | compare covers (before) | mean width | population diff 0: covers, p < 0.05 |\n|---|---:|---:|---:|---:|---|\n",
    );
    for (w, c) in rows {
        let pct = |k: usize| 100.0 * c.rate(k);
        out.push_str(&format!(
            "| {} | {} | {:.1}% ({:.1}%) | {:.1}% ({:.1}%) | {:.3} | {} |\n",
            w.label(),
            c.reps,
            pct(c.estimate),
            pct(c.estimate_before),
            pct(c.compare),
            pct(c.compare_before),
            c.width / c.reps.max(1) as f64,
            if c.population_reps > 0 {
                format!(
                    "{:.1}%, {:.1}%",
                    100.0 * c.population as f64 / c.population_reps as f64,
                    100.0 * c.rejected as f64 / c.population_reps as f64
                )
            } else {
                String::new()
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell where today's paired variance broke (a weak judge, independent references) and
    /// one with a new system's bias: the new code covers at its nominal rate, the old did not.
    #[test]
    fn the_grid_holds_where_the_old_intervals_broke() {
        for (w, reps) in [
            (
                GridWorld {
                    slope: 0.1,
                    ..GridWorld::BASE
                },
                200,
            ),
            (
                GridWorld {
                    groups: 8,
                    tau: 0.3,
                    runs: Runs::New,
                    ..GridWorld::BASE
                },
                200,
            ),
        ] {
            let (_, c) = run(&[w], Method::Bayes, reps, 2, &|_| {})
                .unwrap()
                .remove(0);
            let (new, old) = (c.rate(c.compare), c.rate(c.compare_before));
            eprintln!("{}: compare covers {new:.3}, before {old:.3}", w.label());
            // 200 replications: the binomial sd of a 95% rate is 1.5 points; the full grid
            // (1,000 replications a cell, docs/run-level.md) measured 95.4% and 96.9% here.
            assert!((0.91..=0.985).contains(&new), "{}: {new}", w.label());
            assert!(old < 0.85, "{}: before {old}", w.label());
        }
    }
}
