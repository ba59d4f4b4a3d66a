//! One thread's repetitions of a pairwise world: the anchors and the run drawn, rated on each
//! path and at each look, and counted against the world's truth.

use judgecal_stats::pairwise::rate::{self, Compared, Rated};
use judgecal_stats::pairwise::ratings::{self, Outcome};
use judgecal_stats::rng::{Rng, SeedableRng};

use super::PairwiseCounts;
use super::world::{self, PairwiseDrawn, PairwiseWorld};

/// Draws `n` comparisons of `world`; the first `labelled` carry the people's preference, by
/// a new rater every `rater_batch` of them (numbered from `first_rater`, and named where the
/// world names raters).
fn comparisons(
    world: &PairwiseWorld,
    d: &PairwiseDrawn,
    (n, labelled): (usize, usize),
    first_rater: u64,
    pick: &dyn Fn(usize) -> world::Pick,
    rng: &mut Rng,
) -> Vec<(Compared, f64)> {
    let mut taste = vec![0.0; world.systems];
    let batch = world.rater_batch.max(1);
    // The first `lead` labels are one rater's; the rest come in batches.
    let lead = (world.lead_share * labelled as f64).round() as usize;
    (0..n)
        .map(|i| {
            if i < labelled && (i == 0 || (i >= lead && (i - lead).is_multiple_of(batch))) {
                taste = world.rater(rng);
            } else if i == labelled {
                taste = vec![0.0; world.systems];
            }
            let (mut c, y) = world.comparison(d, &taste, pick(i), rng);
            if i < labelled {
                c.preference = Some(y);
                if world.named {
                    let batch_of = if i < lead {
                        0
                    } else {
                        (i - lead) / batch + usize::from(lead > 0)
                    };
                    c.rater = Some(first_rater + batch_of as u64);
                }
            }
            (c, y)
        })
        .collect()
}

/// The repetitions `reps` (numbers) of `world`.
pub(super) fn repetitions(world: &PairwiseWorld, reps: &[usize], seed: u64) -> PairwiseCounts {
    let mut c = PairwiseCounts::default();
    for &rep in reps {
        let mut rng = Rng::seed_from_u64(seed ^ (rep as u64).wrapping_mul(0x9E37_79B9));
        let d = world.draw(&mut rng);
        let (truth, gamma) = world.truth(&d);
        let (anchors, run, labelled_n) = draw_comparisons(world, &d, &mut rng);
        agreement(world, &run, &mut c);
        let repetition = Repetition {
            world,
            d: &d,
            truth: &truth,
            gamma,
            labelled: run.into_iter().map(|(c, _)| c).collect(),
            labelled_n,
            options: rate::RateOptions {
                seed: seed ^ rep as u64,
                controls: usize::from(world.controlled),
                ..rate::RateOptions::default()
            },
            anchors,
        };
        match repetition.paths(&mut c, &mut rng) {
            Some(last_width) => repetition.alone(last_width, &mut c),
            None => c.failures += 1,
        }
    }
    c
}

/// The anchors and the run (its first share labelled), and how many of the run are.
fn draw_comparisons(
    world: &PairwiseWorld,
    d: &PairwiseDrawn,
    rng: &mut Rng,
) -> (Vec<Compared>, Vec<(Compared, f64)>, usize) {
    // A new system's few anchors are spread through the anchors; the rest leave it out.
    let anchor_pick = |i: usize| match world.new_labels {
        0 => world::Pick::Usual,
        m if i.is_multiple_of((world.anchors / m).max(1)) && i / (world.anchors / m).max(1) < m => {
            world::Pick::Last
        }
        _ => world::Pick::WithoutLast,
    };
    let run_pick = |_: usize| {
        if world.zipf {
            world::Pick::Zipf
        } else {
            world::Pick::Usual
        }
    };
    let anchors: Vec<Compared> = comparisons(
        world,
        d,
        (world.anchors, world.anchors),
        0,
        &anchor_pick,
        rng,
    )
    .into_iter()
    .map(|(c, _)| c)
    .collect();
    let labelled_n = (world.labelled * world.run as f64).round() as usize;
    let run = comparisons(world, d, (world.run, labelled_n), 1 << 32, &run_pick, rng);
    (anchors, run, labelled_n)
}

/// The judge's agreement with people on the run, and its first-position wins.
fn agreement(world: &PairwiseWorld, run: &[(Compared, f64)], c: &mut PairwiseCounts) {
    for (comp, y) in run {
        // A panel's judge columns are its first member's.
        let (v, s) = comp
            .verdicts
            .members
            .first()
            .copied()
            .unwrap_or((comp.verdicts.verdict, comp.verdicts.swapped));
        c.agreement += if (v - 0.5).abs() < 1e-9 || (y - 0.5).abs() < 1e-9 {
            0.5
        } else {
            f64::from(u8::from((v > 0.5) == (*y > 0.5)))
        } / world.run as f64;
        // The answer shown first: a in the first order, b in the swapped one.
        let s = s.unwrap_or(v);
        c.first_wins += (v + 1.0 - s) / 2.0 / world.run as f64;
    }
}

/// One repetition's draws, rated.
struct Repetition<'a> {
    world: &'a PairwiseWorld,
    d: &'a PairwiseDrawn,
    truth: &'a [f64],
    /// The length coefficient's truth, where the world has one.
    gamma: Option<f64>,
    anchors: Vec<Compared>,
    /// The run, its first `labelled_n` with the people's preference.
    labelled: Vec<Compared>,
    labelled_n: usize,
    options: rate::RateOptions,
}

impl Repetition<'_> {
    /// The run with the labels of the first `look` of the looks shown (0: the plain path).
    fn at_look(&self, look: usize) -> Vec<Compared> {
        let shown = self.labelled_n * look / self.world.looks.max(1);
        self.labelled
            .iter()
            .enumerate()
            .map(|(i, comp)| Compared {
                preference: comp.preference.filter(|_| i < shown),
                ..comp.clone()
            })
            .collect()
    }

    /// The plain path (the run's labels withheld) and the labelled path, with every earlier
    /// look's intervals; the last system's plain width, or `None` where a rating failed.
    fn paths(&self, c: &mut PairwiseCounts, rng: &mut Rng) -> Option<f64> {
        let k = self.world.systems;
        let mut ok = true;
        let mut every_look = vec![true; k];
        for look in 1..self.world.looks {
            match rate::rate(k, k, &self.anchors, &self.at_look(look), &self.options) {
                Ok(rated) => {
                    let intervals = rated.powered.ratings.intervals(0.95);
                    for (i, held) in every_look.iter_mut().enumerate().skip(1) {
                        let (lo, hi) = intervals[i];
                        *held &= lo <= self.truth[i] && self.truth[i] <= hi;
                    }
                }
                Err(_) => ok = false,
            }
        }
        let mut last_width = f64::NAN;
        for (path, rows) in [self.at_look(0), self.labelled.clone()].iter().enumerate() {
            match rate::rate(k, k, &self.anchors, rows, &self.options) {
                Ok(rated) => {
                    if let Some(w) = self.count(path, &rated, &every_look, c, rng) {
                        last_width = w;
                    }
                }
                Err(_) => ok = false,
            }
        }
        ok.then_some(last_width)
    }

    /// One path's rating against the truth; on the plain path, the last system's width.
    fn count(
        &self,
        path: usize,
        rated: &Rated,
        every_look: &[bool],
        c: &mut PairwiseCounts,
        rng: &mut Rng,
    ) -> Option<f64> {
        let (k, truth) = (self.world.systems, self.truth);
        let r = &rated.powered.ratings;
        let intervals = r.intervals(0.95);
        let mut last_width = None;
        for i in 1..k {
            let (lo, hi) = intervals[i];
            let inside = lo <= truth[i] && truth[i] <= hi;
            c.covered[path] += usize::from(inside);
            if path == 0 {
                c.by_system.resize(k, 0);
                c.by_system[i] += usize::from(inside);
                if i == k - 1 {
                    last_width = Some(hi - lo);
                }
            }
            c.width[path] += hi - lo;
            if path == 0 {
                c.intervals += 1;
            } else {
                c.every_look += usize::from(inside && every_look[i]);
            }
        }
        if let (Some(g), Some(&(estimate, se))) = (self.gamma, rated.powered.controls.first()) {
            c.control_covered[path] += usize::from((estimate - g).abs() <= 1.96 * se);
        }
        let ranks = r.rank_intervals(0.95, 2_000, rng).ranks;
        let mut order: Vec<usize> = (0..k).collect();
        order.sort_by(|&i, &j| truth[j].total_cmp(&truth[i]));
        let held = order.iter().enumerate().all(|(rank, &i)| {
            let (best, worst) = ranks[i];
            best <= rank + 1 && rank < worst
        });
        c.ranks_held[path] += usize::from(held);
        let truths = self.world.win_rates(self.d);
        for (s, rates) in rated.win_rates.iter().enumerate() {
            for (rate, truth) in rates.iter().zip(truths[s]) {
                if let (Some(r), Some(t)) = (rate, truth) {
                    let (lo, hi) = r.interval(0.95);
                    c.wins_covered[path] += usize::from(lo <= t && t <= hi);
                    c.wins[path] += 1;
                }
            }
        }
        last_width
    }

    /// Bradley–Terry on the anchors' preferences alone, for the width (not where the ratings
    /// control for length: that fit has no control).
    fn alone(&self, last_width: f64, c: &mut PairwiseCounts) {
        let k = self.world.systems;
        let outcomes: Vec<Outcome> = self
            .anchors
            .iter()
            .filter_map(|a| {
                let (x, y) = a.verdicts.systems?;
                Some(Outcome {
                    a: x,
                    b: y,
                    a_better: a.preference?,
                })
            })
            .collect();
        if !self.world.controlled
            && let Ok(alone) = ratings::fit(k, &outcomes, 0)
        {
            c.alone_rated += 1;
            c.alone_width += (1..k)
                .map(|i| 2.0 * 1.96 * alone.standard_error(i))
                .sum::<f64>();
            let alone_last = 2.0 * 1.96 * alone.standard_error(k - 1);
            c.last_wider += usize::from(last_width > alone_last);
            c.last_ratio += last_width / alone_last;
        }
        c.reps += 1;
    }
}
