//! Pairwise ratings on Bradley–Terry worlds with known truth (`judgecal-study pairwise
//! --grid`): how often the ratings' 95% intervals cover (plain: the cell's anchors as the
//! labelled set; labelled: with a share of the run labelled too), how often every rank
//! interval holds at once, how wide the plain intervals are against Bradley–Terry on the
//! anchors' preferences alone, and how often the win rates' intervals (against the baseline,
//! over the field) cover.
//!
//! A world: K systems with ratings θ ~ N(0, 1) (the baseline, system 0, at 0). A comparison
//! draws a pair uniformly and a quality gap z = θ_a − θ_b + logistic noise: people prefer a
//! when z > 0, so P(a) = σ(θ_a − θ_b), and call a tie with chance `ties` (counted ½, which
//! moves the truth: the truth is the Bradley–Terry fit to every pair's expected outcome,
//! equally weighted). The judge sees z with normal noise (`noise`), plus `position` towards
//! the answer shown first, `length` per unit of the log length ratio (which tracks z a
//! little), and `favour` towards system 1; it calls a tie inside a band that gives the ties'
//! share, and judges both orders.

use judgecal_stats::pairwise::preference::Verdicts;
use judgecal_stats::pairwise::rate::{self, Compared};
use judgecal_stats::pairwise::ratings::{self, Outcome};
use judgecal_stats::rng::{Rng, RngExt, SeedableRng};
use judgecal_stats::stats::standard_normal;

/// One row of the grid.
#[derive(Debug, Clone, Copy)]
pub struct World {
    pub systems: usize,
    pub position: f64,
    pub length: f64,
    pub favour: f64,
    /// The sd of each system's own favouritism by the judge (drawn per replication, normal):
    /// several systems each biased its own way.
    pub favour_sd: f64,
    pub noise: f64,
    pub ties: f64,
    pub anchors: usize,
    pub run: usize,
    /// The run's labelled share on the labelled path.
    pub labelled: f64,
    /// 0: one judge; n ≥ 2: a panel of n judges, each seeing the gap through its own noise
    /// (`noise` each) with the same biases, whose calibrated preference reads every member.
    pub panel: usize,
}

/// The grid's rows: the ranges (2–50 systems: two alone, a weak judge favouring one, first-position win rates near 50–86%,
/// a length bias, a favoured system, 0–30% ties, 200–2,000 anchors, runs of 1,000–100,000).
pub const GRID: [World; 10] = [
    World {
        systems: 2,
        position: 2.5,
        length: 0.5,
        favour: 1.0,
        favour_sd: 0.0,
        noise: 2.5,
        ties: 0.2,
        anchors: 200,
        run: 1_000,
        labelled: 0.05,
        panel: 0,
    },
    World {
        systems: 5,
        position: 0.0,
        length: 0.0,
        favour: 0.0,
        favour_sd: 0.0,
        noise: 0.5,
        ties: 0.0,
        anchors: 200,
        run: 1_000,
        labelled: 0.1,
        panel: 0,
    },
    World {
        systems: 5,
        position: 2.5,
        length: 0.5,
        favour: 1.0,
        favour_sd: 0.0,
        noise: 0.5,
        ties: 0.3,
        anchors: 200,
        run: 10_000,
        labelled: 0.02,
        panel: 0,
    },
    World {
        systems: 20,
        position: 1.0,
        length: 0.5,
        favour: 1.0,
        favour_sd: 0.0,
        noise: 0.5,
        ties: 0.1,
        anchors: 500,
        run: 10_000,
        labelled: 0.02,
        panel: 0,
    },
    World {
        systems: 20,
        position: 1.0,
        length: 0.0,
        favour: 0.5,
        favour_sd: 0.0,
        noise: 2.5,
        ties: 0.1,
        anchors: 2_000,
        run: 10_000,
        labelled: 0.02,
        panel: 0,
    },
    World {
        systems: 20,
        position: 1.0,
        length: 0.5,
        favour: 0.0,
        favour_sd: 0.7,
        noise: 0.5,
        ties: 0.1,
        anchors: 1_000,
        run: 10_000,
        labelled: 0.02,
        panel: 0,
    },
    World {
        systems: 50,
        position: 1.0,
        length: 0.5,
        favour: 1.0,
        favour_sd: 0.0,
        noise: 0.5,
        ties: 0.1,
        anchors: 2_000,
        run: 10_000,
        labelled: 0.02,
        panel: 0,
    },
    World {
        systems: 50,
        position: 2.5,
        length: 0.5,
        favour: 1.0,
        favour_sd: 0.0,
        noise: 0.5,
        ties: 0.2,
        anchors: 2_000,
        run: 100_000,
        labelled: 0.002,
        panel: 0,
    },
    // Panels: two weak judges, and three judges of 20 systems.
    World {
        systems: 5,
        position: 1.0,
        length: 0.5,
        favour: 1.0,
        favour_sd: 0.0,
        noise: 2.5,
        ties: 0.1,
        anchors: 200,
        run: 1_000,
        labelled: 0.05,
        panel: 2,
    },
    World {
        systems: 20,
        position: 1.0,
        length: 0.5,
        favour: 1.0,
        favour_sd: 0.0,
        noise: 1.5,
        ties: 0.1,
        anchors: 1_000,
        run: 10_000,
        labelled: 0.02,
        panel: 3,
    },
];

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// A standard logistic draw.
fn logistic(rng: &mut Rng) -> f64 {
    let u: f64 = rng.random::<f64>().clamp(1e-12, 1.0 - 1e-12);
    (u / (1.0 - u)).ln()
}

impl World {
    /// The half-width of the judge's tie band: its seen gap is about normal with sd
    /// √(π²/3·spread + noise²); the band holds `ties` of it.
    fn tie_band(&self) -> f64 {
        let sd = (std::f64::consts::PI.powi(2) / 3.0 + 1.0 + self.noise * self.noise).sqrt();
        judgecal_stats::stats::normal_quantile(0.5 + self.ties / 2.0) * sd
    }

    fn comparison(&self, theta: &[f64], own: &[f64], rng: &mut Rng) -> (Compared, f64) {
        let k = self.systems;
        let a = rng.random_range(0..k);
        let b = (a + rng.random_range(1..k)) % k;
        let z = theta[a] - theta[b] + logistic(rng);
        let y = if rng.random::<f64>() < self.ties {
            0.5
        } else {
            f64::from(u8::from(z > 0.0))
        };
        let ratio = 0.2 * z + standard_normal(rng);
        let favour = self.favour * (f64::from(u8::from(a == 1)) - f64::from(u8::from(b == 1)))
            + own[a]
            - own[b];
        let biased = z + self.length * ratio + favour;
        let band = self.tie_band();
        let call = |x: f64| {
            if x > band {
                1.0
            } else if x < -band {
                0.0
            } else {
                0.5
            }
        };
        let mut judge = || {
            let seen = biased + self.noise * standard_normal(rng);
            (call(seen + self.position), Some(call(seen - self.position)))
        };
        let base = if self.panel == 0 {
            let (v, s) = judge();
            Verdicts::of(v, s)
        } else {
            Verdicts::of_panel((0..self.panel).map(|_| judge()).collect())
        };
        let verdicts = Verdicts {
            covariates: vec![ratio],
            systems: Some((a, b)),
            ..base
        };
        (
            Compared {
                verdicts,
                controls: vec![],
                preference: None,
            },
            y,
        )
    }

    /// A pair's expected outcome for a: a tie ½, else σ(θ_a − θ_b).
    fn expected(&self, theta: &[f64], a: usize, b: usize) -> f64 {
        self.ties / 2.0 + (1.0 - self.ties) * sigmoid(theta[a] - theta[b])
    }

    /// Each system's true win rate against the baseline (none for the baseline) and over
    /// the field (opponents drawn uniformly).
    fn win_rates(&self, theta: &[f64]) -> Vec<[Option<f64>; 2]> {
        let k = self.systems;
        (0..k)
            .map(|s| {
                let field = (0..k)
                    .filter(|&b| b != s)
                    .map(|b| self.expected(theta, s, b))
                    .sum::<f64>()
                    / (k - 1) as f64;
                [(s != 0).then(|| self.expected(theta, s, 0)), Some(field)]
            })
            .collect()
    }

    /// The truth: Bradley–Terry on every ordered pair's expected outcome.
    fn truth(&self, theta: &[f64]) -> Vec<f64> {
        let k = self.systems;
        let mut outcomes = Vec::new();
        for a in 0..k {
            for b in 0..k {
                if a != b {
                    outcomes.push(Outcome {
                        a,
                        b,
                        a_better: self.expected(theta, a, b),
                    });
                }
            }
        }
        ratings::fit(k, &outcomes, 0).map_or_else(|_| theta.to_vec(), |r| r.ratings)
    }
}

/// One world's counts over its repetitions.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub reps: usize,
    pub agreement: f64,
    pub first_wins: f64,
    pub covered: [usize; 2],
    pub intervals: usize,
    pub ranks_held: [usize; 2],
    pub width: [f64; 2],
    pub alone_width: f64,
    pub alone_rated: usize,
    /// Win rates (against the baseline, over the field) that covered, and were given,
    /// plain and labelled.
    pub wins_covered: [usize; 2],
    pub wins: [usize; 2],
    pub failures: usize,
}

impl Counts {
    fn add(mut self, o: Counts) -> Counts {
        self.reps += o.reps;
        self.agreement += o.agreement;
        self.first_wins += o.first_wins;
        for p in 0..2 {
            self.covered[p] += o.covered[p];
            self.ranks_held[p] += o.ranks_held[p];
            self.width[p] += o.width[p];
        }
        self.intervals += o.intervals;
        self.alone_width += o.alone_width;
        self.alone_rated += o.alone_rated;
        for p in 0..2 {
            self.wins_covered[p] += o.wins_covered[p];
            self.wins[p] += o.wins[p];
        }
        self.failures += o.failures;
        self
    }
}

/// Runs `reps` repetitions of `world` from `seed`, on every core.
pub fn run(world: &World, reps: usize, seed: u64) -> Counts {
    crate::parallel(|t, threads| {
        let mine: Vec<usize> = (t..reps).step_by(threads).collect();
        repetitions(world, &mine, seed)
    })
    .into_iter()
    .fold(Counts::default(), Counts::add)
}

/// The repetitions `reps` (numbers) of `world`.
fn repetitions(world: &World, reps: &[usize], seed: u64) -> Counts {
    let mut c = Counts::default();
    let k = world.systems;
    for &rep in reps {
        let mut rng = Rng::seed_from_u64(seed ^ (rep as u64).wrapping_mul(0x9E37_79B9));
        let theta: Vec<f64> = (0..k)
            .map(|i| {
                if i == 0 {
                    0.0
                } else {
                    standard_normal(&mut rng)
                }
            })
            .collect();
        // Drawn only where asked for, so the other rows' draws stay as they were.
        let own: Vec<f64> = if world.favour_sd > 0.0 {
            (0..k)
                .map(|_| world.favour_sd * standard_normal(&mut rng))
                .collect()
        } else {
            vec![0.0; k]
        };
        let truth = world.truth(&theta);
        let anchors: Vec<Compared> = (0..world.anchors)
            .map(|_| {
                let (mut c, y) = world.comparison(&theta, &own, &mut rng);
                c.preference = Some(y);
                c
            })
            .collect();
        let mut run: Vec<(Compared, f64)> = (0..world.run)
            .map(|_| world.comparison(&theta, &own, &mut rng))
            .collect();
        for (comp, y) in &run {
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
        let plain: Vec<Compared> = run.iter().map(|(c, _)| c.clone()).collect();
        let labelled_n = (world.labelled * world.run as f64).round() as usize;
        for (comp, y) in run.iter_mut().take(labelled_n) {
            comp.preference = Some(*y);
        }
        let labelled: Vec<Compared> = run.into_iter().map(|(c, _)| c).collect();
        let mut ok = true;
        for (path, rows) in [plain, labelled].iter().enumerate() {
            match rate::rate(
                k,
                k,
                &anchors,
                rows,
                &rate::RateOptions {
                    seed: seed ^ rep as u64,
                    ..rate::RateOptions::default()
                },
            ) {
                Ok(rated) => {
                    let r = &rated.powered.ratings;
                    let intervals = r.intervals(0.95);
                    for i in 1..k {
                        let (lo, hi) = intervals[i];
                        c.covered[path] += usize::from(lo <= truth[i] && truth[i] <= hi);
                        c.width[path] += hi - lo;
                        if path == 0 {
                            c.intervals += 1;
                        }
                    }
                    let ranks = r.rank_intervals(0.95, 2_000, &mut rng).ranks;
                    let mut order: Vec<usize> = (0..k).collect();
                    order.sort_by(|&i, &j| truth[j].total_cmp(&truth[i]));
                    let held = order.iter().enumerate().all(|(rank, &i)| {
                        let (best, worst) = ranks[i];
                        best <= rank + 1 && rank < worst
                    });
                    c.ranks_held[path] += usize::from(held);
                    let truths = world.win_rates(&theta);
                    let z = judgecal_stats::stats::normal_quantile(0.975);
                    for (s, rates) in rated.win_rates.iter().enumerate() {
                        for (rate, truth) in rates.iter().zip(truths[s]) {
                            if let (Some(r), Some(t)) = (rate, truth) {
                                let (lo, hi) = r.interval(z);
                                c.wins_covered[path] += usize::from(lo <= t && t <= hi);
                                c.wins[path] += 1;
                            }
                        }
                    }
                }
                Err(_) => ok = false,
            }
        }
        if !ok {
            c.failures += 1;
            continue;
        }
        let outcomes: Vec<Outcome> = anchors
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
        if let Ok(alone) = ratings::fit(k, &outcomes, 0) {
            c.alone_rated += 1;
            c.alone_width += (1..k)
                .map(|i| 2.0 * 1.96 * alone.standard_error(i))
                .sum::<f64>();
        }
        c.reps += 1;
    }
    c
}

/// The grid's table, Markdown: every row, or only `rows` (numbered from 1).
pub fn report(reps: usize, seed: u64, rows: &[usize]) -> Result<String, String> {
    if let Some(r) = rows.iter().find(|&&r| r == 0 || r > GRID.len()) {
        return Err(format!("the grid has rows 1 to {}; got {r}", GRID.len()));
    }
    let mut out = String::from(
        "| systems | judge (panel: its members) | judge: first-position wins | agrees with people | favoured system | ties | anchors | run | run labelled | rating intervals cover: plain / labelled | rank intervals jointly: plain / labelled | plain width ÷ anchors alone | labelled width ÷ plain | win rates cover: plain / labelled | failed reps |\n|---:|---|---|---|---|---|---:|---:|---:|---|---|---|---|---|---:|\n",
    );
    for (i, w) in GRID.iter().enumerate() {
        if !rows.is_empty() && !rows.contains(&(i + 1)) {
            continue;
        }
        let c = run(w, reps, seed);
        let reps_done = c.reps.max(1) as f64;
        let share = |x: usize, n: usize| 100.0 * x as f64 / n.max(1) as f64;
        let ratio = if c.alone_rated > 0 {
            format!(
                "{:.2} (of {} reps with finite ratings alone)",
                (c.width[0] / reps_done) / (c.alone_width / c.alone_rated as f64),
                c.alone_rated
            )
        } else {
            "— (the anchors alone rate no system finitely)".into()
        };
        out.push_str(&format!(
            "| {} | {} | {:.0}% | {:.0}% | {} | {:.0}% | {} | {} | {:.1}% | {:.1}% / {:.1}% | {:.1}% / {:.1}% | {ratio} | {:.3} | {:.1}% / {:.1}% | {} |\n",
            w.systems,
            if w.panel == 0 {
                "one".to_owned()
            } else {
                format!("a panel of {}", w.panel)
            },
            100.0 * c.first_wins / (c.reps + c.failures).max(1) as f64,
            100.0 * c.agreement / (c.reps + c.failures).max(1) as f64,
            if w.favour_sd > 0.0 {
                format!("every system by N(0, {}²) log-odds", w.favour_sd)
            } else {
                format!("+{} log-odds", w.favour)
            },
            100.0 * w.ties,
            w.anchors,
            w.run,
            100.0 * w.labelled,
            share(c.covered[0], c.intervals),
            share(c.covered[1], c.intervals),
            share(c.ranks_held[0], c.reps),
            share(c.ranks_held[1], c.reps),
            c.width[1] / c.width[0].max(f64::MIN_POSITIVE),
            share(c.wins_covered[0], c.wins[0]),
            share(c.wins_covered[1], c.wins[1]),
            c.failures,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_ties_the_truth_is_the_worlds_ratings_and_ties_pull_it_in() {
        let theta = [0.0, 1.2, -0.7, 2.0];
        let world = World {
            systems: 4,
            ties: 0.0,
            ..GRID[0]
        };
        let truth = world.truth(&theta);
        for (t, r) in theta.iter().zip(&truth) {
            assert!((t - r).abs() < 1e-6, "{truth:?}");
        }
        // A third of the comparisons tied: every expected outcome is nearer ½, so every
        // rating is nearer the baseline's, in the same order.
        let tied = World { ties: 0.3, ..world }.truth(&theta);
        for (t, r) in theta.iter().zip(&tied).skip(1) {
            assert!(r.abs() < t.abs() && r.signum() == t.signum(), "{tied:?}");
        }
    }
}
