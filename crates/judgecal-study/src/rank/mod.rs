//! `judgecal-study rank`: how often a ranking of K systems makes a wrong claim, whether its rank
//! intervals cover, and how many labels settle it, on worlds with known truth and on HANNA.
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-study/src/rank/mod.rs".

mod hanna;
mod labels;
pub mod outlier;
pub mod reasking;
#[cfg(test)]
mod tests;

pub use hanna::{HannaRow, hanna, hanna_table, kendall};
pub use labels::{LabelDesign, Needed, bound_line, floor_line, labels, needed, pair_bound, totals};

use judgecal_stats::rng::Rng;
use judgecal_stats::rng::SliceRandom;
use judgecal_stats::rng::{RngExt, SeedableRng};

use super::synthetic::stand_in_reference;
use judgecal_stats::runlevel::rank::{self, LabelGoal, RankSettings, Ranking};
use judgecal_stats::runlevel::{AnswerPath, AnswerSettings, Basis, MIN_LABELLED, RunItems};
use judgecal_stats::stats::{mean, normal_quantile, sample_variance, standard_normal};
use judgecal_stats::train::train_with_groups;
use judgecal_stats::{Cell, Method, Run};

/// One cell of the study.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankWorld {
    pub systems: usize,
    pub tau: f64,
    pub slope: f64,
    /// Integer 1–5 scores, skewed to the top of the scale.
    pub discrete: bool,
}

impl RankWorld {
    pub fn label(&self) -> String {
        format!(
            "K = {}, bias sd {}, slope {}{}",
            self.systems,
            self.tau,
            self.slope,
            if self.discrete {
                ", integer 1–5, skewed"
            } else {
                ""
            }
        )
    }
}

/// The grid the issue asks for, and the same systems with bias on a skewed integer scale.
pub fn cells() -> Vec<RankWorld> {
    let mut out = Vec::new();
    for discrete in [false, true] {
        for systems in [4, 12, 24] {
            for tau in [0.0, 0.2] {
                if discrete && tau == 0.0 {
                    continue;
                }
                for slope in [0.2, 0.8] {
                    out.push(RankWorld {
                        systems,
                        tau,
                        slope,
                        discrete,
                    });
                }
            }
        }
    }
    out
}

const ANCHORS_PER_SYSTEM: usize = 50;
const RUN: usize = 1000;
const JUDGE_NOISE: f64 = 0.8;
/// Wide enough that no corrected score is clipped.
const SCALE: (f64, f64) = (-12.0, 18.0);
/// The discrete cells' scale, and the most their systems' qualities span.
const DISCRETE_SCALE: (f64, f64) = (1.0, 5.0);
const DISCRETE_SPAN: f64 = 2.0;
/// The gap the labels are planned to resolve.
pub const MIN_GAP: f64 = 0.1;
/// The labelling user's looks: judge scores (planning a first sample), the first sample
/// (planning a step), the step (planning the rest), every label.
const LOOKS: usize = 4;
/// Labels on every run of a one-look ranking that answers pairs on few shared items, as
/// HANNA's labelled column does.
const FEW_LABELS: usize = 10;

/// A drawn world: anchors with their systems, and the runs with their references.
pub struct RankDrawn {
    pub cell: Cell,
    pub groups: Vec<Option<String>>,
    /// Each run's judge scores and references, on the shared prompts.
    pub runs: Vec<(String, Vec<f64>, Vec<f64>)>,
}

fn draw(w: &RankWorld, rng: &mut Rng) -> RankDrawn {
    // Neighbouring systems: 30% close (gap 0.05–0.3), the rest far apart (0.5–1).
    let mut delta = vec![0.0];
    for _ in 1..w.systems {
        let gap = if rng.random::<f64>() < 0.3 {
            0.05 + 0.25 * rng.random::<f64>()
        } else {
            0.5 + 0.5 * rng.random::<f64>()
        };
        delta.push(delta[delta.len() - 1] + gap);
    }
    let centre = mean(&delta);
    // On the integer scale the systems span at most DISCRETE_SPAN: beyond it the scale's ends
    // would flatten their differences.
    let shrink = if w.discrete {
        (DISCRETE_SPAN / (delta[delta.len() - 1] - delta[0]).max(1e-9)).min(1.0)
    } else {
        1.0
    };
    for d in &mut delta {
        *d = (*d - centre) * shrink;
    }
    delta.shuffle(rng);
    let bias: Vec<f64> = (0..w.systems)
        .map(|_| w.tau * standard_normal(rng))
        .collect();
    let (lo, hi) = DISCRETE_SCALE;
    let item = |rng: &mut Rng, p: f64, k: usize| {
        let q = p + delta[k] + 0.3 * standard_normal(rng);
        let j = 3.0 + w.slope * (q - 3.0) + JUDGE_NOISE * standard_normal(rng);
        if w.discrete {
            (j.round().clamp(lo, hi), (q + bias[k]).round().clamp(lo, hi))
        } else {
            (j, q + bias[k])
        }
    };
    let prompts = |n: usize, rng: &mut Rng| -> Vec<f64> {
        if w.discrete {
            // Most of the mass near the top of the scale.
            (0..n)
                .map(|_| lo + (hi - lo) * (1.0 - rng.random::<f64>().powi(2)))
                .collect()
        } else {
            stand_in_reference(n, (1.0, 5.0), rng)
        }
    };
    let mut pairs = Vec::new();
    let mut groups = Vec::new();
    for k in 0..w.systems {
        for p in prompts(ANCHORS_PER_SYSTEM, rng) {
            pairs.push(item(rng, p, k));
            groups.push(Some(format!("s{k}")));
        }
    }
    let prompts = prompts(RUN, rng);
    let runs = (0..w.systems)
        .map(|k| {
            let (j, y) = prompts.iter().map(|&p| item(rng, p, k)).unzip();
            (format!("s{k}"), j, y)
        })
        .collect();
    RankDrawn {
        cell: Cell {
            pairs,
            scale: if w.discrete { DISCRETE_SCALE } else { SCALE },
        },
        groups,
        runs,
    }
}

/// Whether a ranking claims a wrong order, and whether every run's true rank is inside its
/// interval (`truth`: each run's true mean).
pub fn judge(r: &Ranking, truth: &[f64]) -> (bool, bool) {
    let wrong = r.pairs.iter().any(|p| match p.higher() {
        Some(h) => {
            let other = if h == p.a { p.b } else { p.a };
            truth[h] < truth[other]
        }
        None => false,
    });
    let covered = (0..truth.len()).all(|k| {
        let above = truth.iter().filter(|&&t| t > truth[k]).count();
        let rank = 1 + above;
        r.runs[k].rank.0 <= rank && rank <= r.runs[k].rank.1
    });
    (wrong, covered)
}

/// Pairs whose true gap exceeds `gap`, and how many of them `r` resolves (in the right order:
/// a wrong one counts as unresolved).
pub fn resolved(r: &Ranking, truth: &[f64], gap: f64) -> (usize, usize) {
    r.pairs
        .iter()
        .filter(|p| (truth[p.a] - truth[p.b]).abs() > gap)
        .fold((0, 0), |(n, ok), p| {
            let right = p.higher().is_some_and(|h| {
                let other = if h == p.a { p.b } else { p.a };
                truth[h] > truth[other]
            });
            (n + 1, ok + usize::from(right))
        })
}

/// What one cell counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankCounts {
    pub reps: usize,
    /// One look: a wrong claim; every rank covered.
    pub wrong_once: usize,
    pub covered_once: usize,
    /// The labelling user's four looks (judge scores, the first sample, the step, every
    /// label): a wrong claim at any; every rank covered at all.
    pub wrong_labelled: usize,
    pub covered_labelled: usize,
    /// One look with [`FEW_LABELS`] random prompts labelled on every run (HANNA's labelled
    /// column): a wrong claim; every rank covered.
    pub wrong_few: usize,
    pub covered_few: usize,
    /// Pairs with a gap above [`MIN_GAP`], resolved by the first look and by the last.
    pub gapped: usize,
    pub resolved_first: usize,
    pub resolved_last: usize,
    /// Labels of the first sample, and of the plans after it (the step and the rest), in all.
    pub labels_first: usize,
    pub labels: usize,
    /// One count per run reaching the plan's targets (where one does).
    pub uniform: usize,
    pub uniform_reps: usize,
    /// Runs answered with their labels (the combined answer) on the first sample, and those
    /// whose own interval covers the run's true mean; the same with every label.
    pub first_combined: usize,
    pub first_covered: usize,
    pub combined: usize,
    pub combined_covered: usize,
}

impl RankCounts {
    fn add(&mut self, o: &RankCounts) {
        self.reps += o.reps;
        self.wrong_once += o.wrong_once;
        self.covered_once += o.covered_once;
        self.wrong_labelled += o.wrong_labelled;
        self.covered_labelled += o.covered_labelled;
        self.wrong_few += o.wrong_few;
        self.covered_few += o.covered_few;
        self.gapped += o.gapped;
        self.resolved_first += o.resolved_first;
        self.resolved_last += o.resolved_last;
        self.labels_first += o.labels_first;
        self.labels += o.labels;
        self.uniform += o.uniform;
        self.uniform_reps += o.uniform_reps;
        self.first_combined += o.first_combined;
        self.first_covered += o.first_covered;
        self.combined += o.combined;
        self.combined_covered += o.combined_covered;
    }

    pub fn rate(&self, k: usize) -> f64 {
        k as f64 / self.reps.max(1) as f64
    }
}

/// The runs of `drawn` with the references of `labelled[k]` items of run k.
pub fn with_labels(
    runs: &[(String, Vec<f64>, Vec<f64>)],
    labelled: &[Vec<usize>],
) -> Vec<RunItems> {
    let ids: Vec<String> = (0..runs[0].1.len()).map(|i| format!("p{i}")).collect();
    runs.iter()
        .enumerate()
        .map(|(k, (name, j, y))| {
            let mut reference = vec![None; j.len()];
            for &i in labelled.get(k).map(Vec::as_slice).unwrap_or_default() {
                reference[i] = Some(y[i]);
            }
            RunItems {
                scores: j.clone(),
                reference: if labelled.get(k).is_some_and(|l| !l.is_empty()) {
                    reference
                } else {
                    Vec::new()
                },
                clusters: None,
                ids: Some(ids.clone()),
                group: Some(name.clone()),
                extra_noise: 0.0,
                input_loading: Vec::new(),
                noise_ratio: None,
                given_scores: None,
                centre_variance: 0.0,
                misfit_variance: 0.0,
                conditional: false,
            }
        })
        .collect()
}

fn replicate(w: &RankWorld, rep: u64) -> Result<RankCounts, String> {
    let mut rng = Rng::seed_from_u64(rep.wrapping_mul(0x9E37_79B9).wrapping_add(23));
    let drawn = draw(w, &mut rng);
    let never = std::sync::atomic::AtomicBool::new(false);
    let fit_run = Run::new(&never, &|_| {});
    let names: Vec<Option<&str>> = drawn.groups.iter().map(|g| g.as_deref()).collect();
    let (model, bias) = train_with_groups(Method::Bayes, &drawn.cell, &names, rep, &fit_run)?;
    let basis = Basis {
        model: &model,
        anchors: &drawn.cell,
        groups: bias.as_ref(),
    };
    let settings = AnswerSettings {
        seed: rep,
        ..AnswerSettings::default()
    };
    let truth: Vec<f64> = drawn.runs.iter().map(|r| mean(&r.2)).collect();
    let once = rank::rank(
        basis,
        &with_labels(&drawn.runs, &[]),
        &settings,
        &RankSettings::default(),
    )?;
    // A user who labels a few prompts of every run at random: pairs answered on them alone.
    let mut order: Vec<usize> = (0..RUN).collect();
    order.shuffle(&mut Rng::seed_from_u64(rep ^ 0xFE77));
    let few = rank::rank(
        basis,
        &with_labels(
            &drawn.runs,
            &vec![order[..FEW_LABELS].to_vec(); drawn.runs.len()],
        ),
        &settings,
        &RankSettings::default(),
    )?;
    // The labelling user: four looks, labelling what each plan names.
    let mut labelled: Vec<Vec<usize>> = vec![Vec::new(); drawn.runs.len()];
    let mut looks: Vec<Ranking> = Vec::new();
    let mut planned = Vec::new();
    for round in 1..=LOOKS {
        let r = rank::rank(
            basis,
            &with_labels(&drawn.runs, &labelled),
            &settings,
            &RankSettings {
                round,
                rounds: LOOKS,
                labels: (round < LOOKS).then_some(LabelGoal {
                    min_gap: MIN_GAP,
                    seed: rep,
                    ..LabelGoal::default()
                }),
                ..RankSettings::default()
            },
        )?;
        if let Some(plan) = &r.allocation {
            for (have, add) in labelled.iter_mut().zip(&plan.items) {
                have.extend(add);
            }
            planned.push(plan.clone());
        }
        looks.push(r);
    }
    let [first, pilot, .., last] = &looks[..] else {
        return Err("four looks".into());
    };
    let (w1, c1) = judge(&once, &truth);
    let (wf, cf) = judge(&few, &truth);
    let judged: Vec<(bool, bool)> = looks.iter().map(|r| judge(r, &truth)).collect();
    let (gapped, r1) = resolved(first, &truth, MIN_GAP);
    let (_, r3) = resolved(last, &truth, MIN_GAP);
    let own = |r: &Ranking| -> (usize, usize) {
        r.runs
            .iter()
            .zip(&truth)
            .filter(|(r, _)| r.estimate.path != AnswerPath::Plain)
            .fold((0, 0), |(n, ok), (r, &t)| {
                let (lo, hi) = r.estimate.mean.interval;
                (n + 1, ok + usize::from(lo <= t && t <= hi))
            })
    };
    let ((n2, ok2), (n3, ok3)) = (own(pilot), own(last));
    let uniform = planned.last().and_then(|p| p.uniform);
    Ok(RankCounts {
        reps: 1,
        wrong_once: usize::from(w1),
        covered_once: usize::from(c1),
        wrong_labelled: usize::from(judged.iter().any(|j| j.0)),
        covered_labelled: usize::from(judged.iter().all(|j| j.1)),
        wrong_few: usize::from(wf),
        covered_few: usize::from(cf),
        gapped,
        resolved_first: r1,
        resolved_last: r3,
        labels_first: planned.first().map_or(0, |p| p.total()),
        labels: planned.iter().map(|p| p.total()).sum(),
        uniform: uniform.unwrap_or(0),
        uniform_reps: usize::from(uniform.is_some()),
        first_combined: n2,
        first_covered: ok2,
        combined: n3,
        combined_covered: ok3,
    })
}

/// Every cell of `worlds`, `reps` replications each, on `threads` threads.
pub fn run(
    worlds: &[RankWorld],
    reps: usize,
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<(RankWorld, RankCounts)>, String> {
    worlds
        .iter()
        .map(|w| {
            let parts: Vec<Result<RankCounts, String>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads.max(1))
                    .map(|t| {
                        s.spawn(move || {
                            let mut c = RankCounts::default();
                            for rep in (t..reps).step_by(threads.max(1)) {
                                c.add(&replicate(w, rep as u64)?);
                                progress(1);
                            }
                            Ok(c)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
                    .collect()
            });
            let mut total = RankCounts::default();
            for p in parts {
                total.add(&p?);
            }
            Ok((*w, total))
        })
        .collect()
}

pub fn table(rows: &[(RankWorld, RankCounts)]) -> String {
    let mut out = String::from(
        "| cell | reps | one look: wrong claim, ranks covered | one look, 10 labels a run: wrong claim, ranks covered | four looks with labels: wrong claim, ranks covered | gap > 0.1 pairs resolved: judge only → with labels | labelled runs' own intervals covering: first sample, every label | labels: first sample + step and the rest (uniform for the rest's targets) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (w, c) in rows {
        let pct = |k: usize| format!("{:.1}%", 100.0 * c.rate(k));
        let share = |k: usize| 100.0 * k as f64 / c.gapped.max(1) as f64;
        let own =
            |ok: usize, n: usize| format!("{:.1}% of {n}", 100.0 * ok as f64 / n.max(1) as f64);
        let per = |k: usize| k as f64 / c.reps.max(1) as f64;
        out.push_str(&format!(
            "| {} | {} | {}, {} | {}, {} | {}, {} | {:.1}% → {:.1}% | {}, {} | {:.0} + {:.0} ({}) |\n",
            w.label(),
            c.reps,
            pct(c.wrong_once),
            pct(c.covered_once),
            pct(c.wrong_few),
            pct(c.covered_few),
            pct(c.wrong_labelled),
            pct(c.covered_labelled),
            share(c.resolved_first),
            share(c.resolved_last),
            own(c.first_covered, c.first_combined),
            own(c.combined_covered, c.combined),
            per(c.labels_first),
            per(c.labels - c.labels_first),
            if c.uniform_reps > 0 {
                format!("{:.0}", c.uniform as f64 / c.uniform_reps as f64)
            } else {
                "unreachable".into()
            },
        ));
    }
    out
}
