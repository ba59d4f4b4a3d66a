//! `judgecal panel --grid`: a panel served as the service serves it (the fusion layer fitted to
//! the members' anchors, the derived judge's corrector fitted to the cross-fitted fused
//! scores, run-level answers from it), in simulated worlds whose truth is known:
//!
//! - `correlated`: two members of one family (a shared error) and one independent member;
//! - `noise`: two useful members and one that is pure noise;
//! - `biased`: a member biased per system (sd 0.4), another a little (0.1), one unbiased;
//! - `missing 10%`, `missing 40%`: the correlated world, each member's score of a served item
//!   missing at random with that chance (anchors are the items every member scored).
//!
//! Each replication draws 12 systems, anchors from 8 of them (40 items each, 2 rubrics), and
//! counts: fresh items inside their 95% band (whole items: the derived judge's posterior
//! predictive; partial items: their sub-panel's), a known and a new system's run of 100 items
//! whose 95% interval holds the run's mean reference, and a compare of two known systems'
//! runs. It also records τ, the between-system sd of the held-out bias, of the panel and of
//! the panel's best member alone (lowest held-out MSE) corrected the same way.

use crate::calibrate::bayes::FitOptions;
use crate::calibrate::panel::fusion::{FusedScore, Fusion, FusionOptions, PanelRows, fit_fusion};
use crate::calibrate::rng::{Rng, RngExt, SeedableRng};
use crate::calibrate::runlevel::{self, AnswerSettings, Basis, RunItems};
use crate::calibrate::stats::{mean, standard_normal};
use crate::calibrate::train::train_with_groups;
use crate::calibrate::{Cell, Method, Run};

const SYSTEMS: usize = 12;
const KNOWN: usize = 8;
const PER_SYSTEM: usize = 40;
const RUN: usize = 100;
const FRESH: usize = 200;

/// A simulated world.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum World {
    Correlated,
    Noise,
    Biased,
    Missing(f64),
}

impl World {
    pub const ALL: [World; 5] = [
        World::Correlated,
        World::Noise,
        World::Biased,
        World::Missing(0.1),
        World::Missing(0.4),
    ];

    pub fn name(&self) -> String {
        match self {
            World::Correlated => "correlated".into(),
            World::Noise => "noise".into(),
            World::Biased => "biased".into(),
            World::Missing(p) => format!("missing {:.0}%", 100.0 * p),
        }
    }

    fn missing(&self) -> f64 {
        match self {
            World::Missing(p) => *p,
            _ => 0.0,
        }
    }
}

/// One draw of a world: each system's members' biases.
struct Draw {
    world: World,
    bias: Vec<[f64; 3]>,
}

impl Draw {
    fn new(world: World, rng: &mut Rng) -> Self {
        let sd = match world {
            World::Biased => [0.4, 0.1, 0.0],
            _ => [0.0; 3],
        };
        let bias = (0..SYSTEMS)
            .map(|_| sd.map(|s| s * standard_normal(rng)))
            .collect();
        Self { world, bias }
    }

    /// An item of system `s`: the members' scores and the reference.
    fn item(&self, s: usize, rng: &mut Rng) -> ([f64; 3], f64) {
        let q = standard_normal(rng) * 0.7;
        let mut e = || standard_normal(rng);
        let b = self.bias[s];
        let js = match self.world {
            World::Correlated | World::Missing(_) => {
                let family = 0.4 * e();
                [
                    3.0 + q + family + 0.4 * e(),
                    3.0 + q + family + 0.4 * e(),
                    3.0 + 0.8 * q + 0.5 * e(),
                ]
            }
            World::Noise => [
                3.0 + q + 0.4 * e(),
                3.0 + 0.8 * q + 0.5 * e(),
                3.0 + 0.7 * e(),
            ],
            World::Biased => [
                3.0 + q + 0.4 * e() + b[0],
                3.0 + 0.8 * q + 0.5 * e() + b[1],
                3.0 + q + 0.6 * e() + b[2],
            ],
        };
        (js, (3.0 + q + 0.3 * e()).clamp(1.0, 5.0))
    }
}

/// What one world's replications counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GridRow {
    pub world: String,
    pub reps: usize,
    pub band: (usize, usize),
    pub known: (usize, usize),
    pub new: (usize, usize),
    pub compare: (usize, usize),
    pub tau_panel: Vec<f64>,
    pub tau_member: Vec<f64>,
    pub width_panel: Vec<f64>,
    pub width_member: Vec<f64>,
}

/// The member whose own fit (on every anchor) has the lowest mean squared error.
fn best_member(fusion: &Fusion, rows: &PanelRows) -> usize {
    let mse = |m: usize| {
        fusion.sub_panel(&[m]).map_or(f64::INFINITY, |sub| {
            mean(
                &rows
                    .iter()
                    .map(|(js, y)| (sub.score(&[js[m]]) - y).powi(2))
                    .collect::<Vec<_>>(),
            )
        })
    };
    (0..fusion.members.len())
        .min_by(|&a, &b| mse(a).total_cmp(&mse(b)))
        .unwrap_or(0)
}

/// One replication of `world`, added to `row`.
fn replicate(world: World, seed: u64, row: &mut GridRow) -> Result<(), String> {
    let mut rng = Rng::seed_from_u64(seed);
    let draw = Draw::new(world, &mut rng);
    let names: Vec<String> = ["m1", "m2", "m3"].map(String::from).to_vec();
    let mut cells: Vec<PanelRows> = Vec::new();
    let mut groups: Vec<Option<String>> = Vec::new();
    for r in 0..2 {
        let mut rows = PanelRows::new();
        for s in 0..KNOWN {
            for _ in 0..PER_SYSTEM {
                let (js, y) = draw.item(s, &mut rng);
                rows.push((js.to_vec(), y));
                if r == 0 {
                    groups.push(Some(format!("s{s}")));
                }
            }
        }
        cells.push(rows);
    }
    let never = std::sync::atomic::AtomicBool::new(false);
    let run = Run::new(&never, &|_| {});
    let mut opts = FusionOptions::new(3, seed, false);
    opts.stack.sampler = FitOptions {
        warmup: 300,
        draws: 400,
        seed,
        ..FitOptions::default()
    };
    let fusions = fit_fusion(&cells, &names, &opts, &run)?;
    let fusion = &fusions[0];
    let group_names: Vec<Option<&str>> = groups.iter().map(|g| g.as_deref()).collect();
    let derived = Cell {
        pairs: fusion.anchors.clone(),
        scale: (1.0, 5.0),
    };
    let (model, bias) = train_with_groups(Method::Bayes, &derived, &group_names, seed, &run)?;
    row.tau_panel.push(bias.as_ref().map_or(0.0, |b| b.tau));
    // The best member alone, corrected the same way.
    let best = best_member(fusion, &cells[0]);
    let member_cell = Cell {
        pairs: cells[0].iter().map(|(js, y)| (js[best], *y)).collect(),
        scale: (1.0, 5.0),
    };
    let (member_model, member_bias) =
        train_with_groups(Method::Bayes, &member_cell, &group_names, seed, &run)?;
    row.tau_member
        .push(member_bias.as_ref().map_or(0.0, |b| b.tau));

    let missing = world.missing();
    let present = |js: &[f64; 3], rng: &mut Rng| -> Vec<Option<f64>> {
        js.iter()
            .map(|&j| (!rng.random_bool(missing)).then_some(j))
            .collect()
    };
    // Fresh items' bands.
    for _ in 0..FRESH {
        let s = rng.random_range(0..SYSTEMS);
        let (js, y) = draw.item(s, &mut rng);
        let scores = present(&js, &mut rng);
        let band = match fusion.fuse(&scores) {
            Ok(FusedScore::Whole(x)) => model.correct(&[x])?[0].predictive,
            Ok(FusedScore::Partial { fused, .. }) => Some(fused.predictive),
            Err(_) => continue,
        };
        if let Some((lo, hi)) = band {
            row.band.1 += 1;
            row.band.0 += usize::from(lo <= y && y <= hi);
        }
    }
    let settings = AnswerSettings {
        seed,
        ..AnswerSettings::default()
    };
    let basis = Basis {
        model: &model,
        anchors: &derived,
        groups: bias.as_ref(),
    };
    let member_basis = Basis {
        model: &member_model,
        anchors: &member_cell,
        groups: member_bias.as_ref(),
    };
    // A run of system `s`, fused as the service fuses it, the same items scored by the best
    // member alone, and the run's true mean reference.
    let run_of = |s: usize, rng: &mut Rng| -> Result<(RunItems, RunItems, f64), String> {
        let (mut scores, mut member, mut ys) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUN {
            let (js, y) = draw.item(s, rng);
            // An item no member scored is not sent (the service refuses it by row).
            let x = match fusion.fuse(&present(&js, rng)) {
                Ok(FusedScore::Whole(x)) => x,
                Ok(FusedScore::Partial { fused, .. }) => fused.score,
                Err(_) => continue,
            };
            scores.push(x);
            member.push(js[best]);
            ys.push(y);
        }
        let group = Some(format!("s{s}"));
        let items = |scores| RunItems {
            scores,
            group: group.clone(),
            ..RunItems::default()
        };
        Ok((items(scores), items(member), mean(&ys)))
    };
    let known = rng.random_range(0..KNOWN);
    let (run, _, truth) = run_of(known, &mut rng)?;
    let e = runlevel::estimate(basis, &run, &settings)?;
    row.known.1 += 1;
    row.known.0 += usize::from(e.mean.interval.0 <= truth && truth <= e.mean.interval.1);
    let new = KNOWN + rng.random_range(0..SYSTEMS - KNOWN);
    let (run_new, member_new, truth_new) = run_of(new, &mut rng)?;
    let e = runlevel::estimate(basis, &run_new, &settings)?;
    row.new.1 += 1;
    row.new.0 += usize::from(e.mean.interval.0 <= truth_new && truth_new <= e.mean.interval.1);
    row.width_panel.push(e.mean.interval.1 - e.mean.interval.0);
    let m = runlevel::estimate(member_basis, &member_new, &settings)?;
    row.width_member.push(m.mean.interval.1 - m.mean.interval.0);
    let other = (known + 1 + rng.random_range(0..KNOWN - 1)) % KNOWN;
    let (run_b, _, truth_b) = run_of(other, &mut rng)?;
    let c = runlevel::compare(basis, &run, &run_b, &settings)?;
    let diff = truth - truth_b;
    row.compare.1 += 1;
    row.compare.0 +=
        usize::from(c.difference.interval.0 <= diff && diff <= c.difference.interval.1);
    row.reps += 1;
    Ok(())
}

/// `reps` replications of every world (seeds `seed`, `seed + 1`, ...), on two threads.
pub fn grid(
    reps: usize,
    seed: u64,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Vec<GridRow>, String> {
    let mut rows = Vec::new();
    for world in World::ALL {
        let halves: Vec<Result<GridRow, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|t| {
                    scope.spawn(move || {
                        let mut row = GridRow::default();
                        for k in (t..reps).step_by(2) {
                            replicate(world, seed.wrapping_add(k as u64), &mut row)?;
                        }
                        Ok(row)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a replication panicked".into()))
                })
                .collect()
        });
        let mut row = GridRow {
            world: world.name(),
            ..GridRow::default()
        };
        for half in halves {
            let h = half?;
            row.reps += h.reps;
            for (to, from) in [
                (&mut row.band, h.band),
                (&mut row.known, h.known),
                (&mut row.new, h.new),
                (&mut row.compare, h.compare),
            ] {
                to.0 += from.0;
                to.1 += from.1;
            }
            row.tau_panel.extend(h.tau_panel);
            row.tau_member.extend(h.tau_member);
            row.width_panel.extend(h.width_panel);
            row.width_member.extend(h.width_member);
        }
        progress(&format!("{}: {} replications", row.world, row.reps));
        rows.push(row);
    }
    Ok(rows)
}

pub fn grid_table(rows: &[GridRow]) -> String {
    let pct = |(k, n): (usize, usize)| 100.0 * k as f64 / n.max(1) as f64;
    let mut out = String::from(
        "| world | reps | bands | known run | new run | compare (known) | τ panel | τ best member | new-run width panel / member |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.1}% | {:.1}% | {:.1}% | {:.1}% | {:.3} | {:.3} | {:.3} / {:.3} |\n",
            r.world,
            r.reps,
            pct(r.band),
            pct(r.known),
            pct(r.new),
            pct(r.compare),
            mean(&r.tau_panel),
            mean(&r.tau_member),
            mean(&r.width_panel),
            mean(&r.width_member),
        ));
    }
    out
}
