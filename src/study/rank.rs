//! `judgecal rank`: how often a ranking of K systems makes a wrong claim, whether its rank
//! intervals cover, and how many labels settle it, on worlds with known truth and on HANNA.
//!
//! The simulated world: prompt i has a difficulty p_i (Beta-shaped on 1–5, shared by every
//! system: the runs are paired by prompt); system k's output on it has quality
//! q = p_i + δ_k + N(0, 0.3²); the judge sees j = 3 + slope·(q − 3) + N(0, 0.8²); the reference
//! is y = q + u_k, u_k ~ N(0, τ²) the system's bias the judge does not see. Neighbouring
//! systems' δ_k are close (0.05–0.3 apart) for 30% of them and far (0.5–1) for the rest: a few
//! pairs close, most far apart (a continuous scale wide enough for them all). The
//! anchors are 50 items of each system on prompts of their own, named by system; the runs are
//! the K systems' outputs on 1,000 shared prompts. The truth of a pair is the difference of the
//! two runs' own mean references.
//!
//! The discrete cells put the same world on an integer 1–5 scale, as HANNA's people and judges
//! score: prompts skewed to the top of the scale (p = 1 + 4·(1 − U²)), the systems' δ_k shrunk
//! to span at most 2 points, the judge's score and the reference rounded and kept in 1–5.
//!
//! Each replication is answered once (`rounds` = 1), once more with ten random prompts
//! labelled on every run (HANNA's labelled column: pairs answered on ten shared items), and by
//! a labelling user who follows the plan over four looks (`rounds` = 4, each at family-wise
//! level 1 − 0.05/4): round 1 on judge scores only, which plans a first sample (20 labels on
//! every run in an open pair, the same prompts); round 2 with those labels, answered on as few
//! as 20 shared items, which plans a step (a tenth of its plan); round 3, which plans the rest
//! to resolve every pair whose gap exceeds 0.1; round 4 with every label. Counted: any
//! resolved pair in the wrong order (family-wise error, over all the labelling user's looks),
//! every run's true rank inside its interval (joint coverage), and each labelled run's own
//! interval at rounds 2 and 4.

use crate::calibrate::rng::Rng;
use crate::calibrate::rng::SliceRandom;
use crate::calibrate::rng::{RngExt, SeedableRng};

use super::synthetic::stand_in_reference;
use crate::calibrate::runlevel::rank::{self, LabelGoal, RankSettings, Ranking};
use crate::calibrate::runlevel::{AnswerPath, AnswerSettings, Basis, MIN_LABELLED, RunItems};
use crate::calibrate::stats::{mean, normal_quantile, sample_variance, standard_normal};
use crate::calibrate::train::train_with_groups;
use crate::calibrate::{Cell, Method, Run};

/// One cell of the study.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct World {
    pub systems: usize,
    pub tau: f64,
    pub slope: f64,
    /// Integer 1–5 scores, skewed to the top of the scale.
    pub discrete: bool,
}

impl World {
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
pub fn cells() -> Vec<World> {
    let mut out = Vec::new();
    for discrete in [false, true] {
        for systems in [4, 12, 24] {
            for tau in [0.0, 0.2] {
                if discrete && tau == 0.0 {
                    continue;
                }
                for slope in [0.2, 0.8] {
                    out.push(World {
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
pub struct Drawn {
    pub cell: Cell,
    pub groups: Vec<Option<String>>,
    /// Each run's judge scores and references, on the shared prompts.
    pub runs: Vec<(String, Vec<f64>, Vec<f64>)>,
}

fn draw(w: &World, rng: &mut Rng) -> Drawn {
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
    Drawn {
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
pub struct Counts {
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

impl Counts {
    fn add(&mut self, o: &Counts) {
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
            }
        })
        .collect()
}

fn replicate(w: &World, rep: u64) -> Result<Counts, String> {
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
    Ok(Counts {
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
    worlds: &[World],
    reps: usize,
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<(World, Counts)>, String> {
    worlds
        .iter()
        .map(|w| {
            let parts: Vec<Result<Counts, String>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads.max(1))
                    .map(|t| {
                        s.spawn(move || {
                            let mut c = Counts::default();
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
            let mut total = Counts::default();
            for p in parts {
                total.add(&p?);
            }
            Ok((*w, total))
        })
        .collect()
}

pub fn table(rows: &[(World, Counts)]) -> String {
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

/// The labels each design needs to resolve every pair whose true gap exceeds [`MIN_GAP`]:
/// the plan's shape scaled (or, `by_budget`, the plan the allocation makes for a budget), and
/// one count for every run, each the smallest total (on a grid of 5% steps, by bisection) at
/// which the second look resolves them all; `None` where none on the grid does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Needed {
    pub planned: Option<usize>,
    pub uniform: Option<usize>,
    /// The plan's own total.
    pub plan: usize,
    /// With `Design::floor`: the sum over runs of each run's fewest labels that settle with
    /// every other run fully labelled, at one look at the level (knowing the references). No
    /// design of per-run counts needs fewer; `None` where full labels do not settle.
    pub floor: Option<usize>,
    /// The pair bound ([`pair_bound`]) at the design's looks: per-run counts, one count.
    pub bound: (usize, usize),
}

/// How the labels study runs the planned design.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Design {
    /// The planned design is the allocation made for a budget, not its unbudgeted plan scaled.
    pub by_budget: bool,
    /// The looks the labelling user takes (at least 3): judge scores only (planning a first
    /// sample), `looks − 3` steps, the rest, and the last look.
    pub looks: usize,
    /// Also find the fewest labels any design of per-run counts needs ([`Needed::floor`]).
    pub floor: bool,
}

impl Default for Design {
    fn default() -> Self {
        Design {
            by_budget: false,
            looks: LOOKS,
            floor: false,
        }
    }
}

/// Labels needed by each design on `runs` (judge scores and references), from `basis`.
pub fn needed(
    basis: Basis,
    runs: &[(String, Vec<f64>, Vec<f64>)],
    settings: &AnswerSettings,
    seed: u64,
    design: Design,
) -> Result<Needed, String> {
    let truth: Vec<f64> = runs.iter().map(|r| mean(&r.2)).collect();
    let n = runs[0].1.len();
    // One random order of the prompts: every design labels a prefix of it.
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut Rng::seed_from_u64(seed ^ 0xD1CE));
    let prefixes = |counts: &[usize]| -> Vec<Vec<usize>> {
        counts.iter().map(|&c| order[..c.min(n)].to_vec()).collect()
    };
    // The planned design looks `design.looks` times: judge scores only (planning a first
    // sample), with that sample (planning a step), after each step (the last such look plans
    // the rest, within `budget`), and with all the labels; one count for every run looks
    // twice. Each holds its family-wise error over its own looks.
    let look = |counts: &[usize], round: usize, rounds: usize, budget: Option<usize>| {
        rank::rank(
            basis,
            &with_labels(runs, &prefixes(counts)),
            settings,
            &RankSettings {
                round,
                rounds,
                labels: (round < rounds).then_some(LabelGoal {
                    min_gap: MIN_GAP,
                    seed,
                    budget,
                    ..LabelGoal::default()
                }),
                ..RankSettings::default()
            },
        )
    };
    // A pair resolved at one look stays resolved: the looks' Bonferroni split holds every
    // claim of every look at once.
    let right = |r: &Ranking| -> Vec<bool> {
        r.pairs
            .iter()
            .map(|p| {
                p.higher().is_some_and(|h| {
                    let other = if h == p.a { p.b } else { p.a };
                    truth[h] > truth[other]
                })
            })
            .collect()
    };
    let zero = vec![0; runs.len()];
    // The plan's looks as the service makes them: a first sample, steps toward the plan,
    // the rest (scaled below), and the last look.
    let rounds = design.looks.max(3);
    let mut labelled = zero.clone();
    let mut earlier: Vec<Ranking> = Vec::new();
    for round in 1..rounds - 1 {
        let r = look(&labelled, round, rounds, None)?;
        let add = &r.allocation.as_ref().ok_or("no allocation")?.add;
        for (have, a) in labelled.iter_mut().zip(add) {
            *have = (*have + a).min(n);
        }
        earlier.push(r);
    }
    let first = labelled;
    let last = look(&first, rounds - 1, rounds, None)?;
    let plan = last.allocation.as_ref().ok_or("no allocation")?.add.clone();
    earlier.push(last);
    let rights: Vec<Vec<bool>> = earlier.iter().map(right).collect();
    let before_plan: Vec<bool> = (0..earlier[0].pairs.len())
        .map(|x| rights.iter().any(|r| r[x]))
        .collect();
    let before_uniform = right(&look(&zero, 1, 2, None)?);
    let plan_for = |budget: Option<usize>| -> Result<Vec<usize>, String> {
        Ok(look(&first, rounds - 1, rounds, budget)?
            .allocation
            .ok_or("no allocation")?
            .add)
    };
    let settles = |counts: &[usize], rounds: usize| -> Result<bool, String> {
        let r = look(counts, rounds, rounds, None)?;
        let earlier = if rounds > 2 {
            &before_plan
        } else {
            &before_uniform
        };
        let now = right(&r);
        let ok = r
            .pairs
            .iter()
            .enumerate()
            .all(|(x, p)| (truth[p.a] - truth[p.b]).abs() <= MIN_GAP || now[x] || earlier[x]);
        Ok(ok)
    };
    // Each design on a fine grid (steps of 5%), the smallest point that settles found by
    // bisection (more labels are a superset of fewer: settling is all but monotone).
    let grid = |from: f64, to: f64| -> Vec<f64> {
        let mut out = vec![from];
        while out[out.len() - 1] < to {
            out.push(out[out.len() - 1] * 1.05);
        }
        out
    };
    let smallest = |points: &[Vec<usize>], rounds: usize| -> Result<Option<usize>, String> {
        let Some(last) = points.last() else {
            return Ok(None);
        };
        if !settles(last, rounds)? {
            return Ok(None);
        }
        let (mut lo, mut hi) = (0, points.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if settles(&points[mid], rounds)? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(Some(points[lo].iter().sum()))
    };
    // The first sample, then the plan's shape scaled on top of it.
    let with_first = |add: &[usize]| -> Vec<usize> {
        first.iter().zip(add).map(|(f, a)| (f + a).min(n)).collect()
    };
    let mut designs: Vec<Vec<usize>> = vec![first.clone()];
    if plan.iter().sum::<usize>() > 0 {
        for f in grid(0.05, 8.0) {
            let add: Vec<usize> = plan
                .iter()
                .map(|&a| match (a as f64 * f).round() as usize {
                    0 => 0,
                    c => c.max(rank::FIRST_LABELS),
                })
                .collect();
            let counts = with_first(&add);
            if designs.last() != Some(&counts) {
                designs.push(counts);
            }
        }
    }
    let mut planned = smallest(&designs, rounds)?;
    if design.by_budget {
        // The plan made for each budget on a grid: the smallest budget whose plan settles.
        let budgets: Vec<usize> = grid(rank::FIRST_LABELS as f64, (n * runs.len()) as f64)
            .into_iter()
            .map(|b| b.round() as usize)
            .collect();
        planned = None;
        if settles(&with_first(&plan_for(budgets.last().copied())?), rounds)? {
            let (mut lo, mut hi) = (0, budgets.len() - 1);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if settles(&with_first(&plan_for(Some(budgets[mid]))?), rounds)? {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            planned = Some(with_first(&plan_for(Some(budgets[lo]))?).iter().sum());
        }
    }
    let mut designs: Vec<Vec<usize>> = vec![vec![0; runs.len()]];
    for per in grid(rank::FIRST_LABELS as f64, n as f64) {
        let per = (per.round() as usize).min(n);
        let counts = vec![per; runs.len()];
        if designs.last() != Some(&counts) {
            designs.push(counts);
        }
    }
    let uniform = smallest(&designs, 2)?;
    // Each run's fewest labels with every other run fully labelled, at one look at the
    // level: a design of per-run counts on this order of items that settles gives each run
    // at least that many (labels on other runs all but never unsettle a pair).
    let mut floor = None;
    if design.floor && settles(&vec![n; runs.len()], 1)? {
        // A labelled run carries at least MIN_LABELLED labels.
        let allowed = |c: usize| if c > 0 { c.max(MIN_LABELLED) } else { 0 };
        let mut total = 0;
        for i in 0..runs.len() {
            let (mut lo, mut hi) = (0, n);
            while lo < hi {
                let mid = (lo + hi) / 2;
                let mut trial = vec![n; runs.len()];
                trial[i] = allowed(mid);
                if settles(&trial, 1)? {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            total += allowed(hi);
        }
        floor = Some(total);
    }
    Ok(Needed {
        planned,
        uniform,
        plan: first.iter().sum::<usize>() + plan.iter().sum::<usize>(),
        floor,
        bound: bound_of(basis, runs, design.looks)?,
    })
}

/// The labels study on `w`: worlds `worlds`, each design's labels needed, on `threads` threads.
pub fn labels(
    w: &World,
    worlds: std::ops::Range<usize>,
    threads: usize,
    design: Design,
) -> Result<Vec<Needed>, String> {
    let threads = threads.max(1);
    let one = |rep: usize| -> Result<Needed, String> {
        let mut rng = Rng::seed_from_u64(rep as u64 ^ 0x1AB5);
        let drawn = draw(w, &mut rng);
        let never = std::sync::atomic::AtomicBool::new(false);
        let fit_run = Run::new(&never, &|_| {});
        let names: Vec<Option<&str>> = drawn.groups.iter().map(|g| g.as_deref()).collect();
        let (model, bias) =
            train_with_groups(Method::Bayes, &drawn.cell, &names, rep as u64, &fit_run)?;
        let basis = Basis {
            model: &model,
            anchors: &drawn.cell,
            groups: bias.as_ref(),
        };
        let settings = AnswerSettings {
            seed: rep as u64,
            ..AnswerSettings::default()
        };
        needed(basis, &drawn.runs, &settings, rep as u64, design)
    };
    let mut out: Vec<(usize, Result<Needed, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let one = &one;
                s.spawn(move || {
                    (worlds.start + t..worlds.end)
                        .step_by(threads)
                        .map(|rep| (rep, one(rep)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec![(usize::MAX, Err("a thread panicked".into()))])
            })
            .collect()
    });
    out.sort_by_key(|x| x.0);
    out.into_iter().map(|x| x.1).collect()
}

/// Totals of the designs over the worlds where both reach the targets: (planned, uniform,
/// worlds counted).
pub fn totals(needed: &[Needed]) -> (usize, usize, usize) {
    needed
        .iter()
        .fold((0, 0, 0), |(p, u, n), x| match (x.planned, x.uniform) {
            (Some(a), Some(b)) => (p + a, u + b, n + 1),
            _ => (p, u, n),
        })
}

/// With floors: the line saying the most any design of per-run counts could save against
/// uniform, over the worlds where both are found; `None` where none was.
pub fn floor_line(needed: &[Needed]) -> Option<String> {
    let (h, u, n) = needed
        .iter()
        .fold((0, 0, 0), |(h, u, n), x| match (x.floor, x.uniform) {
            (Some(a), Some(b)) => (h + a, u + b, n + 1),
            _ => (h, u, n),
        });
    (n > 0).then(|| {
        format!(
            "The floor (each run's fewest labels with every other run fully labelled, one look at 0.95, knowing the references), over {n} where uniform reaches the targets: {h} against uniform's {u}: no design of per-run counts saves more than {:.0}%.",
            100.0 * (1.0 - h as f64 / u.max(1) as f64)
        )
    })
}

/// The pair bound over `needed`'s worlds (see [`pair_bound`]).
pub fn bound_line(needed: &[Needed]) -> String {
    let (per_run, one) = needed
        .iter()
        .fold((0, 0), |(p, o), x| (p + x.bound.0, o + x.bound.1));
    format!(
        "Pair bound (each pair on its own answer at its true gap and noise, knowing the references): per-run counts {per_run}, one count {one}: {:.0}% fewer.",
        100.0 * (1.0 - per_run as f64 / one.max(1) as f64)
    )
}

/// Kendall's τ-b between two orderings' values.
pub fn kendall(a: &[f64], b: &[f64]) -> f64 {
    let (mut concordant, mut discordant, mut ties_a, mut ties_b) = (0.0f64, 0.0, 0.0, 0.0);
    for i in 0..a.len() {
        for k in i + 1..a.len() {
            let (x, y) = ((a[i] - a[k]).signum(), (b[i] - b[k]).signum());
            match (a[i] == a[k], b[i] == b[k]) {
                (true, true) => {}
                (true, false) => ties_a += 1.0,
                (false, true) => ties_b += 1.0,
                (false, false) if x == y => concordant += 1.0,
                _ => discordant += 1.0,
            }
        }
    }
    let d = ((concordant + discordant + ties_a) * (concordant + discordant + ties_b)).sqrt();
    if d > 0.0 {
        (concordant - discordant) / d
    } else {
        0.0
    }
}

/// One HANNA cell ranked: the judge's 11 systems on the odd stories, the anchors the even.
#[derive(Debug, Clone, PartialEq)]
pub struct HannaRow {
    pub judge: String,
    pub rubric: String,
    pub systems: usize,
    /// Kendall τ against the human ranking: raw judge means, de-biased (judge scores only),
    /// de-biased with `labels` per system.
    pub tau_raw: f64,
    pub tau_plain: f64,
    /// The mean over the label samples.
    pub tau_labelled: f64,
    pub pairs: usize,
    /// Pairs resolved, and resolved in the wrong order, without and (summed over the label
    /// samples) with the labels.
    pub resolved_plain: usize,
    pub wrong_plain: usize,
    pub resolved_labelled: usize,
    pub wrong_labelled: usize,
    /// Rank intervals covering the human rank, every system's: without labels, and in how
    /// many of the label samples.
    pub covered_plain: bool,
    pub covered_labelled: usize,
    /// Label samples: each a fresh random set of `labels` stories, the same for every system.
    pub samples: usize,
    /// `None` where the labels study was not asked for.
    pub needed: Option<Needed>,
    /// The pair bound ([`pair_bound`]): per-run counts, and one count on every run.
    pub bound: (usize, usize),
}

/// [`pair_bound`] for `runs` (name, judge scores, references) corrected by `basis`'s model.
fn bound_of(
    basis: Basis,
    runs: &[(String, Vec<f64>, Vec<f64>)],
    looks: usize,
) -> Result<(usize, usize), String> {
    let corrected = runs
        .iter()
        .map(|r| Ok(basis.model.correct(&r.1)?.iter().map(|c| c.score).collect()))
        .collect::<Result<Vec<Vec<f64>>, String>>()?;
    let references: Vec<Vec<f64>> = runs.iter().map(|r| r.2.clone()).collect();
    Ok(pair_bound(&corrected, &references, looks))
}

/// A bound on what per-run label counts can save over one count on every run, knowing every
/// reference (`corrected` and `references`: each run's corrected scores and references, on the
/// same items). Each pair whose true gap exceeds [`MIN_GAP`] is answered by its own answer on
/// the items both runs labelled, whose variance with m labels on both is the pair's
/// residual-difference noise over the whole run times (1/m − 1/N); it is settled at the
/// fewest m at which c·se falls to its gap, c the Bonferroni normal critical value over the
/// pairs at the family level (1 − 0.05/`looks` for the plan's last look, 1 − 0.05/2 for one
/// count's two looks). Per-run counts give each run the most its pairs need; one count gives
/// every run the most any pair needs. A model, not a design: it leaves out the plain answers
/// (which settle some pairs with no labels, for both), the t quantile's excess and the chance
/// in a gap's estimate, and a pair answered from its runs' answers instead of its own.
pub fn pair_bound(corrected: &[Vec<f64>], references: &[Vec<f64>], looks: usize) -> (usize, usize) {
    let k = corrected.len();
    let pairs = (k * k.saturating_sub(1) / 2).max(1) as f64;
    let crit = |family: f64| normal_quantile(1.0 - (1.0 - family) / (2.0 * pairs));
    let (c_plan, c_uniform) = (crit(1.0 - 0.05 / looks as f64), crit(0.975));
    let residual: Vec<Vec<f64>> = corrected
        .iter()
        .zip(references)
        .map(|(f, y)| y.iter().zip(f).map(|(y, f)| y - f).collect())
        .collect();
    let truth: Vec<f64> = references.iter().map(|y| mean(y)).collect();
    let n = references.first().map_or(0, Vec::len);
    let mut per_run = vec![0; k];
    let mut most = 0;
    for a in 0..k {
        for b in a + 1..k {
            let gap = (truth[a] - truth[b]).abs();
            if gap <= MIN_GAP {
                continue;
            }
            let d: Vec<f64> = residual[a]
                .iter()
                .zip(&residual[b])
                .map(|(x, y)| x - y)
                .collect();
            let noise = sample_variance(&d);
            let fewest = |c: f64| {
                (2..=n)
                    .find(|&m| c * (noise * (1.0 / m as f64 - 1.0 / n as f64)).sqrt() <= gap)
                    .unwrap_or(n)
            };
            let m = fewest(c_plan);
            per_run[a] = per_run[a].max(m);
            per_run[b] = per_run[b].max(m);
            most = most.max(fewest(c_uniform));
        }
    }
    (per_run.iter().sum(), k * most)
}

/// Every judge and rubric of HANNA (`path`, prompt variant `variant`) ranked, with `labels`
/// random labels per system for the labelled column, drawn `samples` times; `design`: the
/// labels each design needs, where asked.
pub fn hanna(
    path: &std::path::Path,
    variant: &str,
    labels: usize,
    samples: usize,
    seed: u64,
    design: Option<Design>,
    looks: usize,
) -> Result<Vec<HannaRow>, String> {
    use super::systems::{cells, read, scored};
    let records = read(path)?;
    let never = std::sync::atomic::AtomicBool::new(false);
    let fit_run = Run::new(&never, &|_| {});
    let mut out = Vec::new();
    for (judge, rubric) in cells(&records, variant) {
        let mine = scored(&records, variant, &judge, &rubric);
        let (anchors, held): (Vec<&super::systems::Record>, Vec<&super::systems::Record>) =
            mine.iter().partition(|r| r.story.is_multiple_of(2));
        let cell = Cell {
            pairs: anchors.iter().map(|r| (r.score, r.human)).collect(),
            scale: (1.0, 5.0),
        };
        let names: Vec<Option<&str>> = anchors.iter().map(|r| Some(r.system.as_str())).collect();
        let (model, bias) = train_with_groups(Method::Bayes, &cell, &names, seed, &fit_run)?;
        let mut systems: Vec<&str> = held.iter().map(|r| r.system.as_str()).collect();
        systems.sort_unstable();
        systems.dedup();
        // The stories every system has a score for, so that the runs pair by story.
        let mut stories: Vec<u64> = held.iter().map(|r| r.story).collect();
        stories.sort_unstable();
        stories.dedup();
        stories.retain(|&s| {
            systems
                .iter()
                .all(|&g| held.iter().any(|r| r.system == g && r.story == s))
        });
        let runs: Vec<(String, Vec<f64>, Vec<f64>)> = systems
            .iter()
            .map(|&g| {
                let (j, y) = stories
                    .iter()
                    .filter_map(|&s| held.iter().find(|r| r.system == g && r.story == s))
                    .map(|r| (r.score, r.human))
                    .unzip();
                (g.to_owned(), j, y)
            })
            .collect();
        let basis = Basis {
            model: &model,
            anchors: &cell,
            groups: bias.as_ref(),
        };
        let settings = AnswerSettings {
            seed,
            ..AnswerSettings::default()
        };
        let human: Vec<f64> = runs.iter().map(|r| mean(&r.2)).collect();
        let raw: Vec<f64> = runs.iter().map(|r| mean(&r.1)).collect();
        let plain = rank::rank(
            basis,
            &with_labels(&runs, &[]),
            &settings,
            &RankSettings::default(),
        )?;
        // Sample 0 is the one the table has always shown; the others vary the stories.
        let samples: Vec<Ranking> = (0..samples.max(1) as u64)
            .map(|d| {
                let mut order: Vec<usize> = (0..stories.len()).collect();
                order.shuffle(&mut Rng::seed_from_u64(
                    seed ^ 0x4A11 ^ d.wrapping_mul(0x9E37_79B9),
                ));
                let picked = vec![order[..labels.min(order.len())].to_vec(); runs.len()];
                rank::rank(
                    basis,
                    &with_labels(&runs, &picked),
                    &settings,
                    &RankSettings::default(),
                )
            })
            .collect::<Result<_, _>>()?;
        let estimates =
            |r: &Ranking| -> Vec<f64> { r.runs.iter().map(|x| x.estimate.mean.estimate).collect() };
        let claims = |r: &Ranking| {
            r.pairs
                .iter()
                .fold((0, 0), |(n, wrong), p| match p.higher() {
                    Some(h) => {
                        let other = if h == p.a { p.b } else { p.a };
                        (n + 1, wrong + usize::from(human[h] < human[other]))
                    }
                    None => (n, wrong),
                })
        };
        let (rp, wp) = claims(&plain);
        let (rl, wl) = samples
            .iter()
            .map(claims)
            .fold((0, 0), |(r, w), (a, b)| (r + a, w + b));
        let m = samples.len() as f64;
        out.push(HannaRow {
            judge: judge.clone(),
            rubric: rubric.clone(),
            systems: runs.len(),
            tau_raw: kendall(&raw, &human),
            tau_plain: kendall(&estimates(&plain), &human),
            tau_labelled: samples
                .iter()
                .map(|r| kendall(&estimates(r), &human))
                .sum::<f64>()
                / m,
            pairs: plain.pairs.len(),
            resolved_plain: rp,
            wrong_plain: wp,
            resolved_labelled: rl,
            wrong_labelled: wl,
            covered_plain: judge_ranks(&plain, &human),
            covered_labelled: samples.iter().filter(|r| judge_ranks(r, &human)).count(),
            samples: samples.len(),
            needed: design
                .map(|d| needed(basis, &runs, &settings, seed, d))
                .transpose()?,
            bound: bound_of(basis, &runs, looks)?,
        });
    }
    Ok(out)
}

fn judge_ranks(r: &Ranking, truth: &[f64]) -> bool {
    judge(r, truth).1
}

pub fn hanna_table(rows: &[HannaRow], labels: usize) -> String {
    let samples = rows.first().map_or(1, |r| r.samples);
    let of = if samples > 1 {
        format!(" ({samples} samples)")
    } else {
        String::new()
    };
    let mut out = format!(
        "| judge | rubric | Kendall τ: raw → de-biased → {labels} labels/system | pairs resolved (wrong order): judge only, {labels} labels{of} | ranks covered | labels to resolve every gap > 0.1: planned, uniform | pair bound: per system, one count |\n|---|---|---:|---:|---:|---:|---:|\n"
    );
    let show = |x: Option<usize>| x.map_or("unreached".to_string(), |x| x.to_string());
    let yes = |b: bool| if b { "yes" } else { "no" };
    for r in rows {
        let covered = if r.samples > 1 {
            format!("{}/{}", r.covered_labelled, r.samples)
        } else {
            yes(r.covered_labelled == r.samples).to_string()
        };
        let needed = r.needed.map_or("–, –".to_string(), |n| {
            format!("{}, {}", show(n.planned), show(n.uniform))
        });
        out.push_str(&format!(
            "| {} | {} | {:.2} → {:.2} → {:.2} | {}/{} ({}), {}/{} ({}) | {}, {covered} | {needed} | {}, {} |\n",
            r.judge,
            r.rubric,
            r.tau_raw,
            r.tau_plain,
            r.tau_labelled,
            r.resolved_plain,
            r.pairs,
            r.wrong_plain,
            r.resolved_labelled,
            r.pairs * r.samples,
            r.wrong_labelled,
            yes(r.covered_plain),
            r.bound.0,
            r.bound.1,
        ));
    }
    let n = rows.len().max(1) as f64;
    let avg = |f: &dyn Fn(&HannaRow) -> f64| rows.iter().map(f).sum::<f64>() / n;
    let sum = |f: &dyn Fn(&HannaRow) -> usize| rows.iter().map(f).sum::<usize>();
    let share = |x: usize, of: usize| 100.0 * x as f64 / of.max(1) as f64;
    out.push_str(&format!(
        "\nMean Kendall τ over {} cells: raw {:.3}, de-biased {:.3}, with {labels} labels {:.3}. Resolved pairs: {:.1}% → {:.1}%, wrong order {} → {} (in {} rankings). Rank intervals covering every system: {} of {} → {} of {}.",
        rows.len(),
        avg(&|r| r.tau_raw),
        avg(&|r| r.tau_plain),
        avg(&|r| r.tau_labelled),
        share(sum(&|r| r.resolved_plain), sum(&|r| r.pairs)),
        share(sum(&|r| r.resolved_labelled), sum(&|r| r.pairs * r.samples)),
        sum(&|r| r.wrong_plain),
        sum(&|r| r.wrong_labelled),
        sum(&|r| r.samples),
        rows.iter().filter(|r| r.covered_plain).count(),
        rows.len(),
        sum(&|r| r.covered_labelled),
        sum(&|r| r.samples),
    ));
    let needed: Vec<Needed> = rows.iter().filter_map(|r| r.needed).collect();
    if !needed.is_empty() {
        let (p, u, both) = totals(&needed);
        out.push_str(&format!(
            " Labels to resolve every pair with a human gap above 0.1, over the {both} cells where both designs reach it: planned {p}, uniform {u} ({:.0}% fewer).",
            100.0 * (1.0 - p as f64 / u.max(1) as f64),
        ));
    }
    let (per_run, one) = (sum(&|r| r.bound.0), sum(&|r| r.bound.1));
    out.push_str(&format!(
        " Pair bound: per-system counts {per_run}, one count {one} ({:.0}% fewer).\n",
        100.0 * (1.0 - per_run as f64 / one.max(1) as f64),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ranking_of_weak_and_biased_judges_makes_few_wrong_claims() {
        // The hard corners of the grid, 40 replications each: K = 12, τ = 0.2, slope 0.2 and
        // 0.8, and the weak judge on a skewed integer scale (K = 4, to keep the test quick);
        // ten labels a run answer pairs on 10 shared items, and the labelling user's second
        // look on 20. A family-wise error of 5% over 40 replications has a binomial sd of 3.4
        // points: more than 6 wrong claims in a cell (15%) would be a real excess. The full
        // grid (`judgecal rank --reps 400`, docs/run-level.md) measures the rates.
        let worlds = [(12, 0.2, false), (12, 0.8, false), (4, 0.2, true)].map(
            |(systems, slope, discrete)| World {
                systems,
                tau: 0.2,
                slope,
                discrete,
            },
        );
        for w in worlds {
            let (_, c) = run(&[w], 40, 2, &|_| {}).unwrap().remove(0);
            eprintln!("{}\n", table(&[(w, c.clone())]));
            assert!(
                c.wrong_once <= 6 && c.wrong_few <= 6 && c.wrong_labelled <= 6,
                "{c:?}"
            );
            assert!(
                c.covered_once >= 34 && c.covered_few >= 34 && c.covered_labelled >= 34,
                "{c:?}"
            );
            // The labels resolve more of the gapped pairs than the judge alone.
            assert!(c.resolved_last > c.resolved_first, "{c:?}");
            // Every run in an open pair is labelled, and its own interval covers at about
            // its level (of dozens of runs, at most 15% short).
            assert!(c.first_combined > 0 && c.combined > 0, "{c:?}");
            assert!(
                c.first_covered as f64 >= 0.85 * c.first_combined as f64,
                "{c:?}"
            );
            assert!(
                c.combined_covered as f64 >= 0.85 * c.combined as f64,
                "{c:?}"
            );
        }
    }

    #[test]
    fn the_pair_bound_settles_a_pair_at_the_closed_form_count() {
        // Two runs 0.5 apart whose residual difference is ±0.5 about the gap: the count that
        // settles is the least m with c²·v·(1/m − 1/N) ≤ gap², c the two-sided normal quantile
        // at the look's family level (one pair).
        let n = 100;
        let corrected = vec![vec![0.0; n]; 2];
        let a: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { 1.0 } else { 0.0 }).collect();
        let references = vec![a, vec![0.0; n]];
        let v = 0.25 * n as f64 / (n - 1) as f64;
        let closed = |family: f64| {
            let c = normal_quantile(1.0 - (1.0 - family) / 2.0);
            (1.0 / (1.0 / n as f64 + 0.25 / (c * c * v))).ceil() as usize
        };
        let (plan, uniform) = (closed(1.0 - 0.05 / 4.0), closed(0.975));
        assert!(plan > uniform && plan < n, "{plan} {uniform}");
        assert_eq!(
            pair_bound(&corrected, &references, 4),
            (2 * plan, 2 * uniform)
        );
        // A gap under MIN_GAP asks for nothing.
        let close = vec![vec![0.05; n], vec![0.0; n]];
        assert_eq!(pair_bound(&corrected, &close, 4), (0, 0));
    }

    #[test]
    fn the_floor_is_below_every_design_that_settles() {
        // The floor counts each run's fewest labels with every other run fully labelled, at
        // one look at 0.95: a uniform count that settles at a stricter level with fewer labels
        // elsewhere gives every run at least its floor, and so does the plan; where the judge
        // alone settles, the floor is 0.
        let w = World {
            systems: 4,
            tau: 0.2,
            slope: 0.8,
            discrete: false,
        };
        let design = Design {
            floor: true,
            ..Design::default()
        };
        for x in labels(&w, 0..2, 2, design).unwrap() {
            let (Some(floor), Some(uniform), Some(planned)) = (x.floor, x.uniform, x.planned)
            else {
                panic!("every design settles: {x:?}");
            };
            assert!(floor <= uniform && floor <= planned, "{x:?}");
            assert!(uniform > 0 || floor == 0, "{x:?}");
        }
    }
}
