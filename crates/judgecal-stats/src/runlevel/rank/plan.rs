//! The label plan: which items of which runs to label so that the open pairs are settled
//! (see the module's **Labels** section).

use super::super::inference::{self, mean_share};
use super::super::{MIN_LABELLED, RunEstimate, RunItems, chain};
use super::pairs::{shrunk_noise, t_excess};
use super::{Allocation, FIRST_LABELS, LabelGoal, PILOT_LABELS, Ranking, STEP_SHARE};
use crate::rng::{Rng, SeedableRng, SliceRandom};
use crate::stats::{fpc, normal_quantile};

/// What a run's answer would be with `m` labels in all, for planning.
#[derive(Debug, Clone, Copy)]
pub(super) struct Planned {
    /// The plain answer's variance.
    pub(super) plain: f64,
    /// Labels it has now.
    pub(super) labelled: usize,
    pub(super) n: usize,
    /// The noise of one labelled item's residual.
    pub(super) noise: f64,
}

impl Planned {
    /// The labelled answer's variance with `m` labels in all, its t quantile's excess over
    /// the normal folded in (`None` under [`MIN_LABELLED`]).
    pub(super) fn labelled(&self, m: usize, level: f64) -> Option<f64> {
        if m < MIN_LABELLED {
            return None;
        }
        Some(self.noise * fpc(m, self.n) * t_excess(Some(planned_df(m)), level))
    }

    /// The weight of the plain answer in the combined one with `m` labels (1: plain), and
    /// the labelled answer's variance.
    pub(super) fn weight(&self, m: usize, level: f64) -> (f64, f64) {
        match self.labelled(m, level) {
            None => (1.0, 0.0),
            Some(vl) if vl + self.plain > 0.0 => (vl / (vl + self.plain), vl),
            Some(vl) => (0.5, vl),
        }
    }
}

/// The degrees of freedom of a labelled answer on `m` items (one more goes to λ where it is
/// tuned).
pub(super) fn planned_df(m: usize) -> f64 {
    let df = if m < inference::MIN_TUNED {
        m - 1
    } else {
        m - 2
    };
    (df as f64).max(1.0)
}

/// What the plan knows: each run's plain and labelled answers' variances, the plain answers'
/// covariances (from their joint draws), and the correlation of two runs' residuals on items
/// both label.
pub(super) struct PlanModel {
    pub(super) runs: Vec<Planned>,
    /// k × k, row-major.
    pub(super) plain_cov: Vec<f64>,
    pub(super) rho: f64,
    /// Whether `rho` was measured (on labelled runs' shared items) or is the 0 assumed
    /// before any labels.
    pub(super) rho_measured: bool,
    /// Whether every run has the same ids, so that the plan's labels nest and a pair of
    /// labelled runs is answered on the items both labelled.
    pub(super) paired: bool,
    /// k × k: the noise of one item's residual difference between two runs, measured where
    /// both are labelled, otherwise from each run's noise and `rho`.
    pub(super) difference_noise: Vec<f64>,
    pub(super) level: f64,
}

impl PlanModel {
    pub(super) fn new(
        runs: &[RunItems],
        plains: &[RunEstimate],
        ranking: &Ranking,
        plain_errors: &[f64],
        rho: Option<f64>,
        chain: Option<&chain::Chain>,
    ) -> Self {
        let k = runs.len();
        let draws = (plain_errors.len() / k).max(1);
        let mut plain_cov = vec![0.0; k * k];
        for row in plain_errors.chunks_exact(k) {
            for a in 0..k {
                for b in 0..=a {
                    plain_cov[a * k + b] += row[a] * row[b];
                }
            }
        }
        for a in 0..k {
            for b in 0..=a {
                plain_cov[a * k + b] /= draws as f64;
                plain_cov[b * k + a] = plain_cov[a * k + b];
            }
        }
        let planned: Vec<Planned> = runs
            .iter()
            .zip(plains)
            .zip(&ranking.runs)
            .enumerate()
            .map(|(i, ((run, p), r))| {
                let e = &r.estimate;
                Planned {
                    plain: plain_cov[i * k + i],
                    labelled: e.mean.labelled,
                    n: e.mean.n,
                    // The noise of a reference around its corrected score, as the plain
                    // answer measures it for every run alike.
                    noise: p.mean.variance.sampling
                        / mean_share(run.scores.len(), run.clusters.as_deref()),
                }
            })
            .collect();
        let rho_used = rho.unwrap_or(0.0).clamp(0.0, 0.95);
        // Measured where both runs are labelled, shrunk as the ranking's pairs are; otherwise
        // from each run's noise and the pooled correlation.
        let difference_noise = shrunk_noise(chain, k)
            .into_iter()
            .enumerate()
            .map(|(x, noise)| match noise {
                Some(n) => n.shrunk,
                None => {
                    let (na, nb) = (planned[x / k].noise, planned[x % k].noise);
                    na + nb - 2.0 * rho_used * (na * nb).sqrt()
                }
            })
            .collect();
        Self {
            runs: planned,
            plain_cov,
            rho: rho_used,
            rho_measured: rho.is_some(),
            paired: same_ids(runs),
            difference_noise,
            level: ranking.family_level,
        }
    }

    /// The variance of run a's answer less run b's with `m[i]` labels on run i (nested
    /// samples of the same items where both are labelled).
    pub(super) fn pair(&self, m: &[usize], a: usize, b: usize) -> f64 {
        let k = self.runs.len();
        let (pa, pb) = (&self.runs[a], &self.runs[b]);
        let (wa, la) = pa.weight(m[a], self.level);
        let (wb, lb) = pb.weight(m[b], self.level);
        let plain = wa * wa * self.plain_cov[a * k + a] + wb * wb * self.plain_cov[b * k + b]
            - 2.0 * wa * wb * self.plain_cov[a * k + b];
        let (ua, ub) = (1.0 - wa, 1.0 - wb);
        let shared = if ua > 0.0 && ub > 0.0 {
            self.rho * (pa.noise * pb.noise).sqrt() * fpc(m[a].max(m[b]), pa.n.max(pb.n))
        } else {
            0.0
        };
        let of_runs = (plain + ua * ua * la + ub * ub * lb - 2.0 * ua * ub * shared).max(0.0);
        let c = |x: usize, y: usize| self.plain_cov[x * k + y];
        let vp = (c(a, a) + c(b, b) - 2.0 * c(a, b)).max(0.0);
        // The pair's own answer on the items both labelled, weighed with its plain
        // difference.
        if !self.paired || m[a].min(m[b]) < MIN_LABELLED {
            return of_runs;
        }
        let both = m[a].min(m[b]);
        let vl = self.difference_noise[a * k + b]
            * fpc(both, pa.n.max(pb.n))
            * t_excess(Some(planned_df(both)), self.level);
        let own = if vl + vp > 0.0 {
            vl * vp / (vl + vp)
        } else {
            0.0
        };
        of_runs.min(own)
    }
}

/// An open pair: its runs, and the variance of its answer that settles it.
type Open = (usize, usize, f64);

/// What planning labels works with: the model, the open pairs and the runs each touches, the
/// labels each run has, and the budget.
struct Planner<'a> {
    model: &'a PlanModel,
    open: Vec<Open>,
    touching: Vec<Vec<usize>>,
    start: Vec<usize>,
    budget: usize,
}

impl Planner<'_> {
    /// The counts to plan: the greedy counts, the pairs' shared counts where they do better,
    /// trimmed, and one count for every run where the runs cannot pair yet.
    fn counts(&self) -> Vec<usize> {
        let mut m = self.greedy();
        // Taken where it reaches as many targets for less.
        if self.model.paired {
            let each = self.shared_counts();
            let (now, then) = (self.met(&m), self.met(&each));
            if self.cost(&each) <= self.budget
                && (then > now || (then == now && self.cost(&each) < self.cost(&m)))
            {
                m = each;
            }
        }
        // Only where every target is reached: short of the budget, a run's labels also lower the
        // pairs that stay open.
        let reached = self.met(&m);
        if reached == self.open.len() {
            m = self.trim(m, reached);
        }
        // Before any labels, with every run in an open pair the judge alone places no run: there
        // is no run to leave out, and uneven counts give up the pairing (the residuals' shared
        // part cancels in a difference only where both runs label the same items), which the plan
        // cannot yet measure. Every run then gets one count, the fewest reaching the targets the
        // uneven plan reached.
        if !self.model.paired
            && !self.model.rho_measured
            && self.touching.iter().all(|t| !t.is_empty())
            && let Some(e) = self.equal_counts(&m, reached)
        {
            m = e;
        }
        m
    }

    /// How far open pair `o`'s variance with counts `m` is above its target (0: met).
    fn over(&self, m: &[usize], o: usize) -> f64 {
        let (a, b, target) = self.open[o];
        (self.model.pair(m, a, b) / target - 1.0).max(0.0)
    }

    /// The open pairs whose target counts `m` reach.
    fn met(&self, m: &[usize]) -> usize {
        self.open
            .iter()
            .filter(|&&(a, b, target)| self.model.pair(m, a, b) <= target * (1.0 + 1e-9))
            .count()
    }

    /// The labels counts `m` add.
    fn cost(&self, m: &[usize]) -> usize {
        m.iter().zip(&self.start).map(|(a, b)| a - b).sum()
    }

    /// Before any labels the plan cannot see what the runs' residuals share item by item, nor
    /// their spread where the judge's corrected scores are off within a run, and a plan from
    /// the plain answers' noise alone asks for many times the labels needed. With two looks
    /// to spare, a first sample on every run in an open pair measures both: its counts, where
    /// the budget allows.
    fn first_sample(&self) -> Option<Vec<usize>> {
        let k = self.start.len();
        let m: Vec<usize> = (0..k)
            .map(|i| {
                if self.touching[i].is_empty() {
                    self.start[i]
                } else {
                    self.start[i].max(PILOT_LABELS).min(self.model.runs[i].n)
                }
            })
            .collect();
        (self.cost(&m) <= self.budget).then_some(m)
    }

    /// The counts worth trying next for run i: at least [`FIRST_LABELS`], then steps that
    /// double, so that labels whose gain only shows in number are still seen.
    fn steps(&self, i: usize, now: usize) -> Vec<usize> {
        let most = self.model.runs[i].n;
        let mut out = Vec::new();
        let mut x = if now == self.start[i] {
            (now + FIRST_LABELS).max(FIRST_LABELS)
        } else {
            now + (now / 4).max(1)
        };
        while x < most {
            out.push(x);
            x *= 2;
        }
        if most > now {
            out.push(most);
        }
        out
    }

    /// Raises counts one move at a time, the move that removes the most excess variance per
    /// label, within the budget: one run raised, or both runs of an open pair raised to one
    /// count (their paired labels then cancel what the items share).
    fn greedy(&self) -> Vec<usize> {
        let mut m = self.start.clone();
        loop {
            let spent = self.cost(&m);
            let mut moves: Vec<Vec<(usize, usize)>> = Vec::new();
            for (i, &now) in m.iter().enumerate() {
                if !self.touching[i].is_empty() {
                    moves.extend(self.steps(i, now).into_iter().map(|x| vec![(i, x)]));
                }
            }
            for (o, &(a, b, _)) in self.open.iter().enumerate() {
                if self.over(&m, o) > 0.0 {
                    for x in self.steps(a, m[a].max(m[b])) {
                        moves.push(vec![(a, x), (b, x.min(self.model.runs[b].n))]);
                    }
                }
            }
            let mut best: Option<(f64, Vec<(usize, usize)>)> = None;
            for mv in moves {
                let added: usize = mv.iter().map(|&(i, x)| x.saturating_sub(m[i])).sum();
                if added == 0 || spent + added > self.budget {
                    continue;
                }
                let mut affected: Vec<usize> = mv
                    .iter()
                    .flat_map(|&(i, _)| self.touching[i].clone())
                    .collect();
                affected.sort_unstable();
                affected.dedup();
                let before: f64 = affected.iter().map(|&o| self.over(&m, o)).sum();
                let mut trial = m.clone();
                for &(i, x) in &mv {
                    trial[i] = x;
                }
                let after: f64 = affected.iter().map(|&o| self.over(&trial, o)).sum();
                let gain = (before - after) / added as f64;
                if gain > 1e-12 && best.as_ref().is_none_or(|b| gain > b.0) {
                    best = Some((gain, mv));
                }
            }
            let Some((_, mv)) = best else { break };
            for (i, x) in mv {
                m[i] = x;
            }
        }
        m
    }

    /// Where a pair is answered on the items both its runs labelled, it needs only the count
    /// they share: each open pair at the fewest that settle it, both runs at that count, and
    /// each run at the most its pairs ask.
    fn shared_counts(&self) -> Vec<usize> {
        let start = &self.start;
        let mut each = start.clone();
        for &(a, b, target) in &self.open {
            let at = |x: usize| {
                let mut t = start.clone();
                for i in [a, b] {
                    t[i] = if x > start[i] {
                        x.max(start[i] + FIRST_LABELS).min(self.model.runs[i].n)
                    } else {
                        start[i]
                    };
                }
                t
            };
            let most = self.model.runs[a].n.max(self.model.runs[b].n);
            let x = least(start[a].min(start[b]), most, |x| {
                self.model.pair(&at(x), a, b) <= target * (1.0 + 1e-9)
            });
            let t = at(x);
            each[a] = each[a].max(t[a]);
            each[b] = each[b].max(t[b]);
        }
        each
    }

    /// Trims `m` back to the fewest labels that keep every target it met: first the runs that
    /// share one count, together (each open pair's runs at one count stay paired item for
    /// item), then each run alone.
    fn trim(&self, mut m: Vec<usize>, reached: usize) -> Vec<usize> {
        let (k, start) = (self.start.len(), &self.start);
        let mut sets: Vec<Vec<usize>> = self
            .open
            .iter()
            .filter(|&&(a, b, _)| m[a] > start[a] && m[b] > start[b])
            .map(|&(a, b, _)| vec![a, b])
            .collect();
        sets.extend((0..k).filter(|&i| m[i] > start[i]).map(|i| vec![i]));
        for set in sets {
            // A run alone is not trimmed below the partner it was paired with.
            if let [i] = set[..]
                && self
                    .open
                    .iter()
                    .any(|&(a, b, _)| (a == i || b == i) && m[a] == m[b])
            {
                continue;
            }
            // The set's runs at one count x (a run alone: its own, lowered).
            let at = |x: usize| -> Vec<usize> {
                let mut trial = m.clone();
                for &i in &set {
                    let x = x.max(start[i]).min(self.model.runs[i].n);
                    trial[i] = if x > start[i] && x < start[i] + FIRST_LABELS {
                        start[i] + FIRST_LABELS
                    } else {
                        x
                    }
                    .min(self.model.runs[i].n);
                }
                trial
            };
            let top = set.iter().map(|&i| m[i]).max().unwrap_or(0);
            let floor = set.iter().map(|&i| start[i]).max().unwrap_or(0);
            let hi = least(floor, top, |x| self.met(&at(x)) >= reached);
            // Equal counts for a pair only where they cost no more than the counts as they
            // are (they usually cost less: 1/m is convex), and they keep every target.
            let trial = at(hi);
            if self.met(&trial) >= reached && self.cost(&trial) <= self.cost(&m) {
                m = trial;
            }
        }
        m
    }

    /// One count for every run, the fewest reaching `reached` targets; where it fits the
    /// budget (or costs no more than `m`).
    fn equal_counts(&self, m: &[usize], reached: usize) -> Option<Vec<usize>> {
        let k = self.start.len();
        let equal = |c: usize| -> Vec<usize> {
            (0..k)
                .map(|i| self.start[i].max(c).min(self.model.runs[i].n))
                .collect()
        };
        let most = self.model.runs.iter().map(|p| p.n).max().unwrap_or(0);
        let lo = least(0, most, |c| self.met(&equal(c)) >= reached);
        let e = equal(lo);
        (self.cost(&e) <= self.budget.max(self.cost(m))).then_some(e)
    }

    /// A step: [`STEP_SHARE`] of each run's labels in `add` (at least [`FIRST_LABELS`] where
    /// that share rounds above 0).
    fn step(&self, add: &mut [usize]) {
        for (i, a) in add.iter_mut().enumerate() {
            let x = (*a as f64 * STEP_SHARE).round() as usize;
            *a = if x == 0 {
                0
            } else {
                x.max(FIRST_LABELS)
                    .min(*a)
                    .min(self.model.runs[i].n - self.start[i])
            };
        }
    }
}

/// The open pairs of `ranking`: neither resolved nor settled as within ±min_gap, each with the
/// variance that settles it at the goal's power: (gap / (c + z))², gap = max(|d̂| − se,
/// min_gap).
fn open_pairs(ranking: &Ranking, goal: &LabelGoal) -> Vec<Open> {
    let z = normal_quantile(goal.power.clamp(0.5, 0.999));
    ranking
        .pairs
        .iter()
        .filter(|p| p.higher().is_none() && !p.within(goal.min_gap))
        .map(|p| {
            let gap = (p.difference.abs() - p.standard_error).max(goal.min_gap);
            (p.a, p.b, (gap / (ranking.critical + z)).powi(2))
        })
        .collect()
}

/// Plans labels for the open pairs of `ranking`: a first sample where none are on the same
/// items yet and two looks remain; otherwise the greedy counts, the pairs' shared counts where
/// they do better, trimmed, one count for every run where the runs cannot pair, and a step of
/// it where two looks remain.
pub(super) fn allocate(
    ranking: &Ranking,
    runs: &[RunItems],
    model: &PlanModel,
    goal: &LabelGoal,
    looks_left: usize,
) -> Allocation {
    let k = runs.len();
    let open = open_pairs(ranking, goal);
    let mut touching: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (o, &(a, b, _)) in open.iter().enumerate() {
        touching[a].push(o);
        touching[b].push(o);
    }
    let planner = Planner {
        model,
        open,
        touching,
        start: model.runs.iter().map(|p| p.labelled).collect(),
        budget: goal.budget.unwrap_or(usize::MAX),
    };
    let allocation = |m: &[usize], add: Vec<usize>, pilot: bool, step: bool| {
        let (items, paired) = draw_items(runs, &add, goal.seed);
        Allocation {
            goal: *goal,
            add,
            items,
            open: planner.open.len(),
            reached: planner.met(m),
            uniform: uniform_total(&planner.open, model),
            paired,
            pilot,
            step,
        }
    };
    let added =
        |m: &[usize]| -> Vec<usize> { m.iter().zip(&planner.start).map(|(a, b)| a - b).collect() };
    if model.paired
        && !model.rho_measured
        && looks_left >= 2
        && let Some(m) = planner.first_sample()
    {
        return allocation(&m, added(&m), true, false);
    }
    let m = planner.counts();
    let mut add = added(&m);
    // With labels on the same items already and two looks to spare, a step: the plan's
    // targets rest on gaps and spreads measured on a few labels, and it asks several times
    // what settles; a share of it sharpens them for the next look's plan.
    let step = model.paired && model.rho_measured && looks_left >= 2;
    if step {
        planner.step(&mut add);
    }
    allocation(&m, add, false, step)
}

/// The least x in [lo, hi] where `ok` holds, `ok` false below some point and true from it
/// (`hi` where it holds nowhere below).
pub(super) fn least(mut lo: usize, mut hi: usize, ok: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = (lo + hi) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi
}

/// The fewest labels, one count for every run, that reach every open pair's target.
pub(super) fn uniform_total(open: &[(usize, usize, f64)], model: &PlanModel) -> Option<usize> {
    let counts = |c: usize| -> Vec<usize> {
        model
            .runs
            .iter()
            .map(|p| p.labelled.max(c).min(p.n))
            .collect()
    };
    let ok = |c: usize| {
        let m = counts(c);
        open.iter()
            .all(|&(a, b, target)| model.pair(&m, a, b) <= target * (1.0 + 1e-9))
    };
    let most = model.runs.iter().map(|p| p.n).max().unwrap_or(0);
    if !ok(most) {
        return None;
    }
    let lo = least(0, most, ok);
    Some(
        counts(lo)
            .iter()
            .zip(&model.runs)
            .map(|(m, p)| m - p.labelled)
            .sum(),
    )
}

/// Whether every run has the same ids.
pub(super) fn same_ids(runs: &[RunItems]) -> bool {
    runs[0].ids.is_some()
        && runs
            .windows(2)
            .all(|w| super::super::pairing(&w[0], &w[1]).is_some())
}

/// Which items to label: `add[k]` of run k's unlabelled items, a seeded uniform sample. Where
/// every run has the same ids, one permutation of the ids serves all, so that the labels fall
/// on the same items.
pub(super) fn draw_items(runs: &[RunItems], add: &[usize], seed: u64) -> (Vec<Vec<usize>>, bool) {
    let mut rng = Rng::seed_from_u64(seed ^ 0x1ABE1);
    if same_ids(runs) {
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
