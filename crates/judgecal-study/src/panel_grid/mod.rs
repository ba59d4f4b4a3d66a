//! `judgecal-study panel --grid`: a panel served as the service serves it (the fusion layer fitted to
//! the members' anchors, the derived judge's corrector fitted to the cross-fitted fused
//! scores, run-level answers from it), in simulated worlds whose truth is known.
//!
//! How it works, and why: docs/internals.md, "crates/judgecal-study/src/panel_grid/mod.rs".

use judgecal_stats::bayes::FitOptions;
use judgecal_stats::panel::fusion::{FusedScore, Fusion, FusionOptions, PanelRows, fit_fusion};
use judgecal_stats::panel::missing::{self, Scored, score_dependent};
use judgecal_stats::rng::{Rng, RngExt, SeedableRng};
use judgecal_stats::runlevel::groups::MIN_GROUPS;
use judgecal_stats::runlevel::new_group::Rules;
use judgecal_stats::runlevel::{self, AnswerSettings, Basis, RunItems};
use judgecal_stats::stats::mean;
use judgecal_stats::train::{train_served, train_with_groups};
use judgecal_stats::{Cell, Method, Run};

mod world;

pub use world::PanelWorld;
use world::{Draw, SYSTEMS};

const RUN: usize = 100;
const FRESH: usize = 200;

/// What one world's replications counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GridRow {
    pub world: String,
    pub reps: usize,
    pub band: (usize, usize),
    /// Of those, the items some member did not score: their sub-panel's band, stretched and floored at the
    /// band a complete item gets at their corrected score (as the service serves them).
    pub partial_band: (usize, usize),
    pub known: (usize, usize),
    pub new: (usize, usize),
    pub compare: (usize, usize),
    /// Of the known runs, new runs and compares, those the service refuses: a run whose
    /// missing scores track the scores given (`panel::missing`); the three above count the
    /// answered ones only.
    pub refused: [usize; 3],
    pub tau_panel: Vec<f64>,
    pub tau_member: Vec<f64>,
    pub width_panel: Vec<f64>,
    pub width_member: Vec<f64>,
    /// The new run under the calibrated rule of `runlevel::new_group` (measured, not served;
    /// 5 systems or more).
    pub new_rule: (usize, usize),
    pub width_rule: Vec<f64>,
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
fn replicate(
    world: PanelWorld,
    seed: u64,
    row: &mut GridRow,
    rules: &mut Rules,
) -> Result<(), String> {
    let mut rng = Rng::seed_from_u64(seed);
    let draw = Draw::new(world, &mut rng);
    let (cells, groups) = anchors(world, &draw, &mut rng);
    let never = std::sync::atomic::AtomicBool::new(false);
    let run = Run::new(&never, &|_| {});
    let mut opts = FusionOptions::new(3, seed, false);
    opts.stack.sampler = FitOptions {
        warmup: 300,
        draws: 400,
        seed,
        ..FitOptions::default()
    };
    let names: Vec<String> = ["m1", "m2", "m3"].map(String::from).to_vec();
    let mut fusions = fit_fusion(&cells, &names, &opts, &run)?;
    let group_names: Vec<Option<&str>> = groups.iter().map(Option::as_deref).collect();
    fusions[0].set_group_means(&cells[0], &group_names);
    let fusion = &fusions[0];
    let derived = Cell {
        pairs: fusion.anchors.clone(),
        scale: (1.0, 5.0),
    };
    let (model, bias, intervals) = train_served(Method::Bayes, &derived, &group_names, seed, &run)?;
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
    let served = |x: f64| -> Result<Option<(f64, f64)>, String> {
        let mut c = model.correct(&[x])?;
        if let Some(iv) = &intervals {
            iv.apply(&[x], &mut c);
        }
        Ok(c[0].predictive)
    };
    let replication = Replication {
        world,
        draw: &draw,
        fusion,
        best,
        known_systems: world.anchors().0,
        settings: AnswerSettings {
            seed,
            ..AnswerSettings::default()
        },
    };
    replication.fresh_bands(&served, row, &mut rng)?;
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
    replication.runs(basis, member_basis, row, rules, &mut rng)?;
    row.reps += 1;
    Ok(())
}

/// Two rubrics' anchors of the known systems, and each anchor's system (the first rubric's).
fn anchors(world: PanelWorld, draw: &Draw, rng: &mut Rng) -> (Vec<PanelRows>, Vec<Option<String>>) {
    let mut cells: Vec<PanelRows> = Vec::new();
    let mut groups: Vec<Option<String>> = Vec::new();
    let (known_systems, per_system) = world.anchors();
    for r in 0..2 {
        let mut rows = PanelRows::new();
        for s in 0..known_systems {
            for _ in 0..per_system {
                let (js, y) = draw.item(s, rng);
                rows.push((js.to_vec(), y));
                if r == 0 {
                    groups.push(Some(format!("s{s}")));
                }
            }
        }
        cells.push(rows);
    }
    (cells, groups)
}

/// A replication's fitted panel and the draws it answers.
struct Replication<'a> {
    world: PanelWorld,
    draw: &'a Draw,
    fusion: &'a Fusion,
    /// The best member alone.
    best: usize,
    known_systems: usize,
    settings: AnswerSettings,
}

impl Replication<'_> {
    /// The members' scores of one item as sent: each missing as the world makes it.
    fn present(&self, js: &[f64; 3], rng: &mut Rng) -> Vec<Option<f64>> {
        js.iter()
            .map(|&j| (!rng.random_bool(self.world.missing(j))).then_some(j))
            .collect()
    }

    /// Fresh items' bands, whole and partial, against their references.
    fn fresh_bands(
        &self,
        served: &dyn Fn(f64) -> Result<Option<(f64, f64)>, String>,
        row: &mut GridRow,
        rng: &mut Rng,
    ) -> Result<(), String> {
        for _ in 0..FRESH {
            let s = rng.random_range(0..SYSTEMS);
            let (js, y) = self.draw.item(s, rng);
            let scores = self.present(&js, rng);
            let (band, partial) = match self.fusion.fuse(&scores) {
                Ok(FusedScore::Whole(x)) => (served(x)?, false),
                Ok(FusedScore::Partial { fused, .. }) => (
                    Some(self.fusion.floored(fused.predictive, served(fused.score)?)),
                    true,
                ),
                Err(_) => continue,
            };
            if let Some((lo, hi)) = band {
                let inside = usize::from(lo <= y && y <= hi);
                row.band.1 += 1;
                row.band.0 += inside;
                if partial {
                    row.partial_band.1 += 1;
                    row.partial_band.0 += inside;
                }
            }
        }
        Ok(())
    }

    /// A run of system `s`, fused as the service fuses it, the same items scored by the best
    /// member alone, the run's true mean reference, and its members' scores as sent.
    fn run_of(&self, s: usize, rng: &mut Rng) -> (RunItems, RunItems, f64, Scored) {
        let (mut scores, mut member, mut ys) = (Vec::new(), Vec::new(), Vec::new());
        let mut sent = Vec::new();
        let mut extra_noise = 0.0;
        for _ in 0..RUN {
            let (js, y) = self.draw.item(s, rng);
            let given = self.present(&js, rng);
            // An item no member scored is not sent (the service refuses it by row).
            let Ok(item) = self.fusion.fuse(&given) else {
                continue;
            };
            let (x, extra) = self.fusion.run_score(&item, Some(&format!("s{s}")));
            extra_noise += extra;
            scores.push(x);
            member.push(js[self.best]);
            ys.push(y);
            sent.push(given);
        }
        let group = Some(format!("s{s}"));
        let items = |scores, extra_noise| RunItems {
            scores,
            group: group.clone(),
            extra_noise,
            ..RunItems::default()
        };
        (
            items(scores, extra_noise),
            items(member, 0.0),
            mean(&ys),
            sent,
        )
    }

    /// Whether the service refuses a request of these runs (each tested at its share of the
    /// level, as `Service::prepare_runs` does).
    fn refuses(&self, runs: &[&Scored]) -> bool {
        let level = missing::LEVEL / runs.len() as f64;
        runs.iter().any(|sent| {
            score_dependent(sent, &self.fusion.input, level, self.fusion.scorer()).is_some()
        })
    }

    /// A known system's run, a new system's (the panel's, the best member's and the
    /// calibrated rule's), and a compare of two known systems.
    fn runs(
        &self,
        basis: Basis,
        member_basis: Basis,
        row: &mut GridRow,
        rules: &mut Rules,
        rng: &mut Rng,
    ) -> Result<(), String> {
        let (known_systems, settings) = (self.known_systems, &self.settings);
        let known = rng.random_range(0..known_systems);
        let (run, _, truth, sent) = self.run_of(known, rng);
        let e = runlevel::estimate(basis, &run, settings)?;
        if self.refuses(&[&sent]) {
            row.refused[0] += 1;
        } else {
            row.known.1 += 1;
            row.known.0 += usize::from(e.mean.interval.0 <= truth && truth <= e.mean.interval.1);
        }
        let new = known_systems + rng.random_range(0..SYSTEMS - known_systems);
        let (run_new, member_new, truth_new, sent_new) = self.run_of(new, rng);
        let e = runlevel::estimate(basis, &run_new, settings)?;
        if self.refuses(&[&sent_new]) {
            row.refused[1] += 1;
        } else {
            row.new.1 += 1;
            row.new.0 +=
                usize::from(e.mean.interval.0 <= truth_new && truth_new <= e.mean.interval.1);
        }
        row.width_panel.push(e.mean.interval.1 - e.mean.interval.0);
        if let Some(b) = basis.groups.filter(|b| b.groups.len() >= MIN_GROUPS) {
            // The same answer with the served group term swapped for the calibrated rule.
            let extra = e.mean.variance.sampling + e.mean.variance.corrector;
            let g = b.groups.len();
            let rule = rules.get(g, b.mean_square_error, extra, 0.95);
            let h = rule.half_width(g, b.mean_square_error, extra, b.spread);
            let centre = e.mean.estimate - b.shift(None).shift() + b.mean;
            row.new_rule.1 += 1;
            row.new_rule.0 += usize::from((truth_new - centre).abs() <= h);
            row.width_rule.push(2.0 * h);
        }
        let m = runlevel::estimate(member_basis, &member_new, settings)?;
        row.width_member.push(m.mean.interval.1 - m.mean.interval.0);
        let other = (known + 1 + rng.random_range(0..known_systems - 1)) % known_systems;
        let (run_b, _, truth_b, sent_b) = self.run_of(other, rng);
        let c = runlevel::compare(basis, &run, &run_b, settings)?;
        let diff = truth - truth_b;
        if self.refuses(&[&sent, &sent_b]) {
            row.refused[2] += 1;
        } else {
            row.compare.1 += 1;
            row.compare.0 +=
                usize::from(c.difference.interval.0 <= diff && diff <= c.difference.interval.1);
        }
        Ok(())
    }
}

/// `reps` replications of every world named in `only` (all where it is empty; seeds `seed`,
/// `seed + 1`, ...), on two threads.
pub fn grid(
    reps: usize,
    seed: u64,
    only: &[String],
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Vec<GridRow>, String> {
    let worlds: Vec<PanelWorld> = PanelWorld::ALL
        .into_iter()
        .filter(|w| only.is_empty() || only.contains(&w.name()))
        .collect();
    if worlds.is_empty() {
        let names: Vec<String> = PanelWorld::ALL.iter().map(PanelWorld::name).collect();
        return Err(format!(
            "no world named {only:?}; the worlds: {}",
            names.join(", ")
        ));
    }
    let mut rows = Vec::new();
    for world in worlds {
        let halves: Vec<Result<GridRow, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|t| {
                    scope.spawn(move || {
                        let mut row = GridRow::default();
                        let mut rules = Rules::default();
                        for k in (t..reps).step_by(2) {
                            replicate(world, seed.wrapping_add(k as u64), &mut row, &mut rules)?;
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
                (&mut row.partial_band, h.partial_band),
                (&mut row.known, h.known),
                (&mut row.new, h.new),
                (&mut row.compare, h.compare),
                (&mut row.new_rule, h.new_rule),
            ] {
                to.0 += from.0;
                to.1 += from.1;
            }
            for (to, from) in row.refused.iter_mut().zip(h.refused) {
                *to += from;
            }
            row.tau_panel.extend(h.tau_panel);
            row.tau_member.extend(h.tau_member);
            row.width_panel.extend(h.width_panel);
            row.width_member.extend(h.width_member);
            row.width_rule.extend(h.width_rule);
        }
        progress(&format!("{}: {} replications", row.world, row.reps));
        rows.push(row);
    }
    Ok(rows)
}

pub fn grid_table(rows: &[GridRow]) -> String {
    let pct = |(k, n): (usize, usize)| 100.0 * k as f64 / n.max(1) as f64;
    let mut out = String::from(
        "| world | reps | bands | partial items' bands | known run | new run | compare (known) | τ panel | τ best member | new-run width panel / member | new run, calibrated rule (not served): covers / width | refused: known / new / compare |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let rule = if r.new_rule.1 == 0 {
            "".to_owned()
        } else {
            format!("{:.1}% / {:.3}", pct(r.new_rule), mean(&r.width_rule))
        };
        let partial = if r.partial_band.1 == 0 {
            "".to_owned()
        } else {
            format!("{:.1}% of {}", pct(r.partial_band), r.partial_band.1)
        };
        out.push_str(&format!(
            "| {} | {} | {:.1}% | {partial} | {:.1}% | {:.1}% | {:.1}% | {:.3} | {:.3} | {:.3} / {:.3} | {rule} | {} / {} / {} |\n",
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
            r.refused[0],
            r.refused[1],
            r.refused[2],
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_bands_cover_on_a_skewed_integer_scale_and_with_few_anchors() {
        // Where a panel could break: integer references mostly 4 and 5 with integer member
        // scores, and 10 anchors per system. 20 replications each of 200 fresh items (one
        // band per replication, so the rate varies by replication: about 0.3 points over 20):
        // the band a version serves covers at least 93% of them, and at most 98% (on integer
        // references its edges fall between levels and it errs wide: 96.5% over 200
        // replications, 97.1% over these 20; 97.3% and at most 98.5% asked before the band's
        // misses were split once), and every run-level answer was made.
        for world in [PanelWorld::Integer, PanelWorld::FewAnchors] {
            let (mut row, mut rules) = (GridRow::default(), Rules::default());
            for k in 0..20 {
                replicate(world, 100 + k, &mut row, &mut rules).expect("a replication runs");
            }
            let share = row.band.0 as f64 / row.band.1 as f64;
            eprintln!("{}: bands cover {share:.3} of {}", world.name(), row.band.1);
            assert_eq!(row.band.1, 20 * FRESH);
            assert!((0.93..=0.98).contains(&share), "{}: {share}", world.name());
            assert_eq!((row.new.1, row.known.1, row.compare.1), (20, 20, 20));
            // 8 known systems: the calibrated rule answers every new run too.
            assert_eq!(row.new_rule.1, 20);
        }
    }

    #[test]
    fn runs_missing_a_member_where_it_would_score_low_are_mostly_refused() {
        // 10 replications of each world, each asking for a known and a new system's run of 100
        // items and a compare: where a member's score is missing when it would have been low,
        // most requests are refused (85–97% of 800 replications per answer); where scores are
        // missing at random, about 1% are (0.8% of 2,400). At least two in three, and at most
        // 3 of 30 (at 2.5% more than 3 has a chance of 0.6%), are asked.
        let refused = |world: PanelWorld| {
            let (mut row, mut rules) = (GridRow::default(), Rules::default());
            for k in 0..10 {
                replicate(world, 500 + k, &mut row, &mut rules).expect("a replication runs");
            }
            let answered = row.known.1 + row.new.1 + row.compare.1;
            assert_eq!(answered + row.refused.iter().sum::<usize>(), 30);
            row.refused.iter().sum::<usize>()
        };
        let low = refused(PanelWorld::MissingLow(0.3));
        let at_random = refused(PanelWorld::SystemsMissing(0.4));
        eprintln!("refused: missing when low {low} of 30, at random {at_random} of 30");
        assert!(low >= 20, "{low}");
        assert!(at_random <= 3, "{at_random}");
    }

    #[test]
    fn missing_member_bands_floored_at_the_complete_items_cover() {
        // 40% of member scores missing at random, 10 replications of 200 fresh items: the
        // partial items' bands (their sub-panel's, stretched as the version stretches the full
        // panel's and floored at the band a complete item gets at their corrected score) cover
        // 93–99% (96.4% of 28,831 over 200 replications).
        let (mut row, mut rules) = (GridRow::default(), Rules::default());
        for k in 0..10 {
            replicate(PanelWorld::Missing(0.4), 300 + k, &mut row, &mut rules)
                .expect("a replication runs");
        }
        let share = row.partial_band.0 as f64 / row.partial_band.1 as f64;
        eprintln!("partial bands cover {share:.3} of {}", row.partial_band.1);
        assert!(row.partial_band.1 > 1000, "{:?}", row.partial_band);
        assert!((0.93..=0.99).contains(&share), "{share}");
    }
}
