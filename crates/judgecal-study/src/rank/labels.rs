//! The labels study: how many labels each design (the plan, one count for every run, the
//! floor and the pair bound) needs to resolve every pair whose true gap exceeds [`MIN_GAP`].

use super::*;

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
    /// With `LabelDesign::floor`: the sum over runs of each run's fewest labels that settle with
    /// every other run fully labelled, at one look at the level (knowing the references). No
    /// design of per-run counts needs fewer; `None` where full labels do not settle.
    pub floor: Option<usize>,
    /// The pair bound ([`pair_bound`]) at the design's looks: per-run counts, one count.
    pub bound: (usize, usize),
}

/// How the labels study runs the planned design.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelDesign {
    /// The planned design is the allocation made for a budget, not its unbudgeted plan scaled.
    pub by_budget: bool,
    /// The looks the labelling user takes (at least 3): judge scores only (planning a first
    /// sample), `looks − 3` steps, the rest, and the last look.
    pub looks: usize,
    /// Also find the fewest labels any design of per-run counts needs ([`Needed::floor`]).
    pub floor: bool,
}

impl Default for LabelDesign {
    fn default() -> Self {
        LabelDesign {
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
    design: LabelDesign,
) -> Result<Needed, String> {
    let n = runs[0].1.len();
    // One random order of the prompts: every design labels a prefix of it.
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut Rng::seed_from_u64(seed ^ 0xD1CE));
    let mut t = Trial {
        basis,
        runs,
        settings,
        seed,
        truth: runs.iter().map(|r| mean(&r.2)).collect(),
        order,
        n,
        before_plan: Vec::new(),
        before_uniform: Vec::new(),
    };
    let rounds = design.looks.max(3);
    let (first, plan, earlier) = t.plan_looks(rounds)?;
    let rights: Vec<Vec<bool>> = earlier.iter().map(|r| t.right(r)).collect();
    t.before_plan = (0..earlier[0].pairs.len())
        .map(|x| rights.iter().any(|r| r[x]))
        .collect();
    t.before_uniform = t.right(&t.look(&vec![0; runs.len()], 1, 2, None)?);
    let planned = if design.by_budget {
        t.by_budget(&first, rounds)?
    } else {
        t.scaled(&first, &plan, rounds)?
    };
    Ok(Needed {
        planned,
        uniform: t.uniform()?,
        plan: first.iter().sum::<usize>() + plan.iter().sum::<usize>(),
        floor: if design.floor { t.floor()? } else { None },
        bound: bound_of(basis, runs, design.looks)?,
    })
}

/// A grid of 5% steps from `from` to at least `to`.
fn grid(from: f64, to: f64) -> Vec<f64> {
    let mut out = vec![from];
    while out[out.len() - 1] < to {
        out.push(out[out.len() - 1] * 1.05);
    }
    out
}

/// The labels study's trials on one world's runs: designs are per-run counts of labels, each a
/// prefix of one random order of the prompts.
struct Trial<'a> {
    basis: Basis<'a>,
    runs: &'a [(String, Vec<f64>, Vec<f64>)],
    settings: &'a AnswerSettings,
    seed: u64,
    /// Each run's true mean.
    truth: Vec<f64>,
    order: Vec<usize>,
    /// Prompts per run.
    n: usize,
    /// The pairs the plan's earlier looks resolved rightly.
    before_plan: Vec<bool>,
    /// The pairs one count's first look resolved rightly.
    before_uniform: Vec<bool>,
}

impl Trial<'_> {
    /// The planned design looks `rounds` times: judge scores only (planning a first sample),
    /// with that sample (planning a step), after each step (the last such look plans the rest,
    /// within `budget`), and with all the labels; one count for every run looks twice. Each
    /// holds its family-wise error over its own looks.
    fn look(
        &self,
        counts: &[usize],
        round: usize,
        rounds: usize,
        budget: Option<usize>,
    ) -> Result<Ranking, judgecal_stats::error::CalibrateError> {
        let prefixes: Vec<Vec<usize>> = counts
            .iter()
            .map(|&c| self.order[..c.min(self.n)].to_vec())
            .collect();
        rank::rank(
            self.basis,
            &with_labels(self.runs, &prefixes),
            self.settings,
            &RankSettings {
                round,
                rounds,
                labels: (round < rounds).then_some(LabelGoal {
                    min_gap: MIN_GAP,
                    seed: self.seed,
                    budget,
                    ..LabelGoal::default()
                }),
                ..RankSettings::default()
            },
        )
    }

    /// Which pairs a ranking resolves rightly. A pair resolved at one look stays resolved: the
    /// looks' Bonferroni split holds every claim of every look at once.
    fn right(&self, r: &Ranking) -> Vec<bool> {
        r.pairs
            .iter()
            .map(|p| {
                p.higher().is_some_and(|h| {
                    let other = if h == p.a { p.b } else { p.a };
                    self.truth[h] > self.truth[other]
                })
            })
            .collect()
    }

    /// The plan's looks as the service makes them: a first sample, steps toward the plan; the
    /// first sample, the plan's rest and every look's ranking.
    #[allow(clippy::type_complexity)]
    fn plan_looks(&self, rounds: usize) -> Result<(Vec<usize>, Vec<usize>, Vec<Ranking>), String> {
        let mut labelled = vec![0; self.runs.len()];
        let mut earlier: Vec<Ranking> = Vec::new();
        for round in 1..rounds - 1 {
            let r = self.look(&labelled, round, rounds, None)?;
            let add = &r.allocation.as_ref().ok_or("no allocation")?.add;
            for (have, a) in labelled.iter_mut().zip(add) {
                *have = (*have + a).min(self.n);
            }
            earlier.push(r);
        }
        let last = self.look(&labelled, rounds - 1, rounds, None)?;
        let plan = last.allocation.as_ref().ok_or("no allocation")?.add.clone();
        earlier.push(last);
        Ok((labelled, plan, earlier))
    }

    /// Whether the last of `rounds` looks at `counts` resolves every pair whose true gap
    /// exceeds [`MIN_GAP`] (with the design's earlier looks).
    fn settles(&self, counts: &[usize], rounds: usize) -> Result<bool, String> {
        let r = self.look(counts, rounds, rounds, None)?;
        let earlier = if rounds > 2 {
            &self.before_plan
        } else {
            &self.before_uniform
        };
        let now = self.right(&r);
        Ok(r.pairs.iter().enumerate().all(|(x, p)| {
            (self.truth[p.a] - self.truth[p.b]).abs() <= MIN_GAP || now[x] || earlier[x]
        }))
    }

    /// The smallest total of `points` (growing designs) that settles, found by bisection (more
    /// labels are a superset of fewer: settling is all but monotone).
    fn smallest(&self, points: &[Vec<usize>], rounds: usize) -> Result<Option<usize>, String> {
        let Some(last) = points.last() else {
            return Ok(None);
        };
        if !self.settles(last, rounds)? {
            return Ok(None);
        }
        let (mut lo, mut hi) = (0, points.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.settles(&points[mid], rounds)? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(Some(points[lo].iter().sum()))
    }

    /// The first sample with `add` on top of it.
    fn with_first(&self, first: &[usize], add: &[usize]) -> Vec<usize> {
        first
            .iter()
            .zip(add)
            .map(|(f, a)| (f + a).min(self.n))
            .collect()
    }

    /// The first sample, then the plan's shape scaled on top of it.
    fn scaled(
        &self,
        first: &[usize],
        plan: &[usize],
        rounds: usize,
    ) -> Result<Option<usize>, String> {
        let mut designs: Vec<Vec<usize>> = vec![first.to_vec()];
        if plan.iter().sum::<usize>() > 0 {
            for f in grid(0.05, 8.0) {
                let add: Vec<usize> = plan
                    .iter()
                    .map(|&a| match (a as f64 * f).round() as usize {
                        0 => 0,
                        c => c.max(rank::FIRST_LABELS),
                    })
                    .collect();
                let counts = self.with_first(first, &add);
                if designs.last() != Some(&counts) {
                    designs.push(counts);
                }
            }
        }
        self.smallest(&designs, rounds)
    }

    /// The plan made for each budget on a grid: the smallest budget whose plan settles.
    fn by_budget(&self, first: &[usize], rounds: usize) -> Result<Option<usize>, String> {
        let budgets: Vec<usize> =
            grid(rank::FIRST_LABELS as f64, (self.n * self.runs.len()) as f64)
                .into_iter()
                .map(|b| b.round() as usize)
                .collect();
        let design = |budget: Option<usize>| -> Result<Vec<usize>, String> {
            let plan = self
                .look(first, rounds - 1, rounds, budget)?
                .allocation
                .ok_or("no allocation")?
                .add;
            Ok(self.with_first(first, &plan))
        };
        if !self.settles(&design(budgets.last().copied())?, rounds)? {
            return Ok(None);
        }
        let (mut lo, mut hi) = (0, budgets.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.settles(&design(Some(budgets[mid]))?, rounds)? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(Some(design(Some(budgets[lo]))?.iter().sum()))
    }

    /// One count for every run, on the grid.
    fn uniform(&self) -> Result<Option<usize>, String> {
        let mut designs: Vec<Vec<usize>> = vec![vec![0; self.runs.len()]];
        for per in grid(rank::FIRST_LABELS as f64, self.n as f64) {
            let per = (per.round() as usize).min(self.n);
            let counts = vec![per; self.runs.len()];
            if designs.last() != Some(&counts) {
                designs.push(counts);
            }
        }
        self.smallest(&designs, 2)
    }

    /// Each run's fewest labels with every other run fully labelled, at one look at the
    /// level: a design of per-run counts on this order of items that settles gives each run
    /// at least that many (labels on other runs all but never unsettle a pair).
    fn floor(&self) -> Result<Option<usize>, String> {
        let (n, runs) = (self.n, self.runs.len());
        if !self.settles(&vec![n; runs], 1)? {
            return Ok(None);
        }
        // A labelled run carries at least MIN_LABELLED labels.
        let allowed = |c: usize| if c > 0 { c.max(MIN_LABELLED) } else { 0 };
        let mut total = 0;
        for i in 0..runs {
            let (mut lo, mut hi) = (0, n);
            while lo < hi {
                let mid = (lo + hi) / 2;
                let mut trial = vec![n; runs];
                trial[i] = allowed(mid);
                if self.settles(&trial, 1)? {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            total += allowed(hi);
        }
        Ok(Some(total))
    }
}

/// The labels study on `w`: worlds `worlds`, each design's labels needed, on `threads` threads.
pub fn labels(
    w: &RankWorld,
    worlds: std::ops::Range<usize>,
    threads: usize,
    design: LabelDesign,
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

/// [`pair_bound`] for `runs` (name, judge scores, references) corrected by `basis`'s model.
pub(super) fn bound_of(
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
