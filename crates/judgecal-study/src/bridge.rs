//! `judgecal-study bridge`: how often the bridge between two judge versions decides, and how often it
//! decides wrongly, on worlds with known truth; and how soon each of the three checks sees a
//! change (the door check, the silent-change check, the drift alarm on labelled anchors).
//!
//! A world: reference scores from the stand-in, the paper's synthetic judge as version A.
//! Each item keeps the judge's persistent error (what a judge family sees in an item), and
//! every scoring adds repeat noise (an LLM judge need not give an item the same score twice),
//! so even an unchanged version re-scored disagrees with its stored scores. Version A's
//! calibration is the least-squares line of reference on A's scores over 1,000 anchors,
//! clipped to the scale. Version B is A changed by the scenario. The truth of a scenario is the
//! shift of the corrected mean, E f(B) − E f(A), over 20,000 fresh items; a `carry_over` is
//! wrong where it exceeds the tolerance, a `refit` where it is within it.

use crate::synthetic::{JudgeModel, stand_in_reference};
use judgecal_stats::bridge::{self, Pair, Verdict};
use judgecal_stats::drift::MissAlarm;
use judgecal_stats::rng::{Rng, SeedableRng};
use judgecal_stats::stats::{least_squares, mean, sample_variance, standard_normal};

const SCALE: (f64, f64) = (1.0, 5.0);
/// Systems the items come from (the one-group scenario changes the last).
const GROUPS: usize = 4;

/// How version B differs from A, in reference standard deviations where it is a shift.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    None,
    Shift(f64),
    /// B = centre + s·(A − centre): the same mean, a steeper or flatter judge.
    Slope(f64),
    /// Scores above 3.5 pushed up by this share of their distance from 3.5.
    TopEnd(f64),
    /// A shift in one group of systems only (reference sd).
    OneGroup(f64),
    /// Items from `systems` systems, the last of which moved `times` the tolerance in
    /// corrected units (through the calibration's slope).
    OneOf {
        systems: usize,
        times: f64,
    },
}

impl Change {
    pub fn label(self) -> String {
        match self {
            Change::None => "no change".into(),
            Change::Shift(s) => format!("mean shift {s} sd"),
            Change::Slope(s) => format!("slope x{s}"),
            Change::TopEnd(s) => format!("top end +{s}·(j − 3.5)"),
            Change::OneGroup(s) => format!("one group of {GROUPS} shifted {s} sd"),
            Change::OneOf { systems, times } => {
                format!("one system of {systems} moved {times}x the tolerance")
            }
        }
    }

    /// How many systems the items come from.
    fn systems(self) -> usize {
        match self {
            Change::OneOf { systems, .. } => systems,
            _ => GROUPS,
        }
    }

    fn apply(self, j: f64, group: usize, w: &World) -> f64 {
        match self {
            Change::None => j,
            Change::Shift(s) => j + s * w.sd,
            Change::Slope(s) => 3.0 + s * (j - 3.0),
            Change::TopEnd(s) => j + s * (j - 3.5).max(0.0),
            Change::OneGroup(s) if group == GROUPS - 1 => j + s * w.sd,
            Change::OneGroup(_) => j,
            Change::OneOf { systems, times } if group == systems - 1 => {
                j + times * tolerance() / w.line.1
            }
            Change::OneOf { .. } => j,
        }
    }
}

/// The study's tolerance: the service's default on the 1–5 scale.
fn tolerance() -> f64 {
    bridge::TOLERANCE_SHARE * (SCALE.1 - SCALE.0)
}

/// The study's settings.
#[derive(Debug, Clone)]
pub struct BridgeOptions {
    pub sizes: Vec<usize>,
    pub replications: usize,
    /// The judge's repeat noise (sd of two scorings of one item by one version, over √2).
    pub repeat_noise: f64,
    pub anchors: usize,
    /// Labelled anchors per upload batch in the drift alarm's delay.
    pub batch: usize,
    pub seed: u64,
}

impl Default for BridgeOptions {
    fn default() -> Self {
        Self {
            sizes: vec![50, 100, 200, 500],
            replications: 400,
            repeat_noise: 0.25,
            anchors: 1000,
            batch: 50,
            seed: 0,
        }
    }
}

/// One row: a scenario at one bridge size.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeRow {
    pub change: Change,
    /// The true shift of the corrected mean, and whether it exceeds the tolerance.
    pub truth: f64,
    pub beyond: bool,
    /// The largest true shift of a part (a band of the score or a group), and whether it
    /// exceeds the tolerance.
    pub worst_part: f64,
    pub part_beyond: bool,
    pub size: usize,
    pub carry_over: f64,
    pub refit: f64,
    pub more_items: f64,
}

impl BridgeRow {
    /// The share of wrong verdicts: `carry_over` where the corrected mean, or a band of the
    /// score or a group, moved beyond the tolerance; `refit` where none did.
    pub fn wrong(&self) -> f64 {
        if self.beyond || self.part_beyond {
            self.carry_over
        } else {
            self.refit
        }
    }
}

/// One world's items: reference, group, and the judge's persistent score (before repeat noise).
struct Items {
    y: Vec<f64>,
    group: Vec<usize>,
    base: Vec<f64>,
}

fn items(n: usize, systems: usize, judge: &JudgeModel, rng: &mut Rng) -> Items {
    let y = stand_in_reference(n, SCALE, rng);
    let base = y.iter().map(|&y| judge.draw(y, SCALE, rng)).collect();
    Items {
        group: (0..n).map(|i| i % systems).collect(),
        y,
        base,
    }
}

/// The calibration of version A: the least-squares line, clipped to the scale.
struct Line(f64, f64);

impl Line {
    fn at(&self, j: f64) -> f64 {
        (self.0 + self.1 * j).clamp(SCALE.0, SCALE.1)
    }
}

/// Scenario truths, the calibration, and the reference sd, for one seed.
struct World {
    line: Line,
    sd: f64,
    /// The residual sd of the line on its anchors (the drift alarm's interval).
    resid: f64,
}

fn world(opts: &BridgeOptions, judge: &JudgeModel, rng: &mut Rng) -> World {
    let anchors = items(opts.anchors, GROUPS, judge, rng);
    let scored: Vec<f64> = anchors
        .base
        .iter()
        .map(|b| b + opts.repeat_noise * standard_normal(rng))
        .collect();
    let pairs: Vec<(f64, f64)> = scored
        .iter()
        .copied()
        .zip(anchors.y.iter().copied())
        .collect();
    let (a, b) = least_squares(&pairs).unwrap_or((0.0, 1.0));
    let line = Line(a, b);
    let resid: Vec<f64> = pairs.iter().map(|&(j, y)| y - line.at(j)).collect();
    World {
        line,
        sd: sample_variance(&anchors.y).sqrt(),
        resid: sample_variance(&resid).sqrt(),
    }
}

/// The true shift of the corrected mean, and the largest of its parts' (the score's tertile
/// bands and the groups).
fn truth(w: &World, change: Change, judge: &JudgeModel, rng: &mut Rng) -> (f64, f64) {
    let fresh = items(20_000, change.systems(), judge, rng);
    let d: Vec<f64> = fresh
        .base
        .iter()
        .zip(&fresh.group)
        .map(|(&b, &g)| w.line.at(change.apply(b, g, w)) - w.line.at(b))
        .collect();
    let mut sorted = fresh.base.clone();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let cuts = [
        f64::NEG_INFINITY,
        sorted[n / 3],
        sorted[2 * n / 3],
        f64::INFINITY,
    ];
    let part = |keep: &dyn Fn(usize) -> bool| -> f64 {
        judgecal_stats::stats::mean_of((0..n).filter(|&i| keep(i)).map(|i| d[i]))
    };
    let bands = (0..3).map(|b| part(&|i| fresh.base[i] >= cuts[b] && fresh.base[i] < cuts[b + 1]));
    let groups = (0..change.systems()).map(|g| part(&|i| fresh.group[i] == g));
    let worst = bands
        .chain(groups)
        .fold(0.0f64, |m, x| if x.abs() > m.abs() { x } else { m });
    (mean(&d), worst)
}

/// One bridge of `n` shared items: A's stored scores and B's re-scores, each with its own
/// repeat noise.
fn one_bridge(
    w: &World,
    change: Change,
    n: usize,
    opts: &BridgeOptions,
    judge: &JudgeModel,
    tolerance: f64,
    rng: &mut Rng,
) -> Verdict {
    let it = items(n, change.systems(), judge, rng);
    let pairs: Vec<Pair> = (0..n)
        .map(|i| {
            let old = it.base[i] + opts.repeat_noise * standard_normal(rng);
            let new =
                change.apply(it.base[i], it.group[i], w) + opts.repeat_noise * standard_normal(rng);
            Pair {
                old,
                new,
                old_corrected: w.line.at(old),
                new_corrected: w.line.at(new),
                group: Some(format!("system-{}", it.group[i])),
            }
        })
        .collect();
    bridge::bridge(&pairs, tolerance).verdict
}

pub const SCENARIOS: [Change; 14] = [
    Change::None,
    Change::Shift(0.05),
    Change::Shift(0.1),
    Change::Shift(0.3),
    Change::Slope(1.2),
    Change::TopEnd(0.8),
    Change::OneGroup(0.6),
    Change::Shift(0.5),
    Change::OneOf {
        systems: 10,
        times: 1.5,
    },
    Change::OneOf {
        systems: 10,
        times: 2.0,
    },
    Change::OneOf {
        systems: 10,
        times: 3.0,
    },
    Change::OneOf {
        systems: 20,
        times: 1.5,
    },
    Change::OneOf {
        systems: 20,
        times: 2.0,
    },
    Change::OneOf {
        systems: 20,
        times: 3.0,
    },
];

/// Every scenario at every bridge size.
pub fn run(opts: &BridgeOptions, judge: &JudgeModel) -> Vec<BridgeRow> {
    SCENARIOS
        .iter()
        .enumerate()
        .flat_map(|(s, &change)| scenario(opts, judge, change, 1000 * s as u64))
        .collect()
}

/// One scenario at every bridge size.
pub fn run_one(opts: &BridgeOptions, judge: &JudgeModel, change: Change) -> Vec<BridgeRow> {
    scenario(opts, judge, change, 7)
}

fn scenario(opts: &BridgeOptions, judge: &JudgeModel, change: Change, salt: u64) -> Vec<BridgeRow> {
    let tolerance = tolerance();
    let mut rows = Vec::new();
    {
        let mut rng = Rng::seed_from_u64(opts.seed.wrapping_add(salt));
        let w = world(opts, judge, &mut rng);
        let (t, worst) = truth(&w, change, judge, &mut rng);
        for &size in &opts.sizes {
            let mut counts = [0usize; 3];
            for _ in 0..opts.replications {
                let v = one_bridge(&w, change, size, opts, judge, tolerance, &mut rng);
                counts[match v {
                    Verdict::CarryOver => 0,
                    Verdict::Refit => 1,
                    Verdict::MoreItems => 2,
                }] += 1;
            }
            let share = |k: usize| counts[k] as f64 / opts.replications as f64;
            rows.push(BridgeRow {
                change,
                truth: t,
                beyond: t.abs() > tolerance,
                worst_part: worst,
                part_beyond: worst.abs() > tolerance,
                size,
                carry_over: share(0),
                refit: share(1),
                more_items: share(2),
            });
        }
    }
    rows
}

/// How soon the drift alarm on labelled anchors of the changed judge fires: the anchors until
/// it does in each of `watches` watches (None: not within `cap`), in batches of `opts.batch`
/// against version A's 95% interval, at the miss bound `alpha`.
pub fn drift_delay(
    opts: &BridgeOptions,
    judge: &JudgeModel,
    change: Change,
    alpha: f64,
    watches: usize,
    cap: usize,
) -> Vec<Option<u64>> {
    let mut rng = Rng::seed_from_u64(opts.seed.wrapping_add(77));
    let w = world(opts, judge, &mut rng);
    let half = 1.96 * w.resid;
    (0..watches)
        .map(|_| {
            let mut alarm = MissAlarm::new(alpha, 0.01);
            let mut seen = 0;
            while seen < cap {
                let it = items(opts.batch, change.systems(), judge, &mut rng);
                let misses: Vec<bool> = (0..opts.batch)
                    .map(|i| {
                        let j = change.apply(it.base[i], it.group[i], &w)
                            + opts.repeat_noise * standard_normal(&mut rng);
                        (it.y[i] - w.line.at(j)).abs() > half
                    })
                    .collect();
                seen += opts.batch;
                if alarm.observe_batch(&misses) {
                    return alarm.alarmed_at;
                }
            }
            None
        })
        .collect()
}

/// The Markdown tables.
pub fn table(rows: &[BridgeRow], tolerance: f64) -> String {
    let mut out = format!(
        "Tolerance {tolerance} (reference units; 2.5% of a 1–5 scale). Verdict shares per bridge size; `wrong` is `carry_over` where the corrected mean, a band of the score or a group moved beyond the tolerance, `refit` where none did.\n\n\
         | change | true shift of the corrected mean | largest of a band or group | items | carry_over | refit | more_items | wrong |\n|---|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {:+.3}{} | {:+.3}{} | {} | {:.1}% | {:.1}% | {:.1}% | {:.1}% |\n",
            r.change.label(),
            r.truth,
            if r.beyond { " (beyond)" } else { "" },
            r.worst_part,
            if r.part_beyond { " (beyond)" } else { "" },
            r.size,
            100.0 * r.carry_over,
            100.0 * r.refit,
            100.0 * r.more_items,
            100.0 * r.wrong()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bridge's promises on the synthetic judge with repeat noise, at 200 replications:
    /// a wrong verdict at most 5% of the time (plus binomial slack) in every scenario and size,
    /// and a no-change re-score (a silent-change check of a healthy judge) almost never refit.
    #[test]
    fn bridge_verdicts_keep_their_error_rates_on_the_synthetic_judge() {
        let opts = BridgeOptions {
            sizes: vec![50, 500],
            replications: 200,
            ..BridgeOptions::default()
        };
        let rows = run(&opts, &JudgeModel::default());
        for r in &rows {
            eprintln!(
                "{} n={} truth {:+.3}: carry {:.3} refit {:.3} more {:.3}",
                r.change.label(),
                r.size,
                r.truth,
                r.carry_over,
                r.refit,
                r.more_items
            );
            // 5% + 3 binomial sd at 200 replications.
            assert!(
                r.wrong() <= 0.05 + 3.0 * (0.05f64 * 0.95 / 200.0).sqrt(),
                "{r:?}"
            );
        }
        let at = |change: Change, size: usize| {
            rows.iter()
                .find(|r| r.change == change && r.size == size)
                .unwrap()
        };
        // A large shift is caught by 50 shared items in most replications (84% of 200 with α
        // split between the mean and the parts; 93% when each spent all of it); a change at
        // one end by 500.
        let big = at(Change::Shift(0.3), 50);
        assert!(big.beyond && big.refit > 0.8, "{big:?}");
        let top = at(Change::TopEnd(0.8), 500);
        assert!(top.part_beyond && top.refit > 0.8, "{top:?}");
        // One system of 10 or 20 moved 1.5-3x the tolerance: never called carry_over more
        // than 5% (the wrong-rate bound above); 3x in one of 10 is seen by 500 items (50 of
        // that system's), in one of 20 (25 items) about half the time.
        for systems in [10, 20] {
            let moved = at(
                Change::OneOf {
                    systems,
                    times: 3.0,
                },
                500,
            );
            assert!(moved.part_beyond && moved.carry_over == 0.0, "{moved:?}");
        }
        let seen = at(
            Change::OneOf {
                systems: 10,
                times: 3.0,
            },
            500,
        );
        assert!(seen.refit > 0.9, "{seen:?}");
        // No change is called carry_over by 500 items in most replications.
        let none = at(Change::None, 500);
        assert!(none.carry_over > 0.8, "{none:?}");
    }
}
