//! `judgecal-study drift --designs`: the drift alarm where labellers are real (issue 57's table).
//!
//! Each design is a way references get their rater effects, in residual sd of the version
//! (a [`DriftWorld`]'s miss-rate curve maps an anchor's offset to its chance of missing). Batches of
//! [`BATCH`] anchors; a named rater uploads [`PER_RATER`] consecutive batches. In every design the
//! alarm tests against the design's own mean miss rate, the worst a healthy cell's guarantee
//! allows (the miss rate exactly at the bound):
//! - `offsets 20%` / `offsets 50%`: named raters, normal offsets whose variance is that share of
//!   the residual variance;
//! - `one in ten harsh`: named raters, two-point offsets (one rater in ten far below, the rest a
//!   little above; variance 20%);
//! - `sessions a + b`: named raters with a rater offset (share a) and a fresh offset for each of
//!   their batches (share b);
//! - `drifting (AR 0.7)`: named raters whose offset moves from batch to batch, AR(1) at 0.7
//!   (stationary share 20%);
//! - `not named, k batches`: each labeller uploads k consecutive batches, naming no rater (20%);
//! - `one rater holds half`: half the batches are one named rater's, the rest from raters of
//!   five batches; offsets skewed (a shifted exponential, share 20%);
//! - `independent`: no offsets, no rater named.
//!
//! Per design: false alarms over `horizon` anchors in `runs` watches; the fleet alert (`fleet`
//! cells of `fleet_horizon` anchors each, alerting at 2K/δ); the delay after the judge's scores
//! shift by +0.5 reference sd (or `--designs-shift`) at anchor `healthy` (the same design going on), by default and
//! with independence declared (`calibrators.drift_max_rho = 0`), beside a CUSUM that knows
//! the miss rate before and after, its threshold set on the design's own healthy watches.

use judgecal_stats::drift::{MissAlarm, UnitId, UnitSpread};
use judgecal_stats::rng::{Rng, RngExt, SeedableRng};
use judgecal_stats::stats::{quantile, standard_normal};

use super::super::parallel;
use super::grid::median;
use super::world::DriftWorld;

/// The false-alarm probability of each cell's alarm.
const DELTA: f64 = 0.01;

/// Anchors per upload batch.
pub const BATCH: usize = 50;

/// Consecutive batches a named rater uploads.
pub const PER_RATER: usize = 5;

/// Training anchors per version (24 raters of 50 each, as the review replayed).
const TRAIN: usize = 1200;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LabellingDesign {
    Independent,
    Offsets { share: f64 },
    Harsh,
    Sessions { rater: f64, session: f64 },
    Drifting { ar: f64 },
    NotNamed { batches: usize },
    HalfOneRater,
}

/// The offsets' variance where a design does not set it.
const SHARE: f64 = 0.2;

impl LabellingDesign {
    /// The table, and independent anchors.
    pub fn all() -> Vec<LabellingDesign> {
        vec![
            LabellingDesign::Independent,
            LabellingDesign::Offsets { share: SHARE },
            LabellingDesign::Offsets { share: 0.5 },
            LabellingDesign::Harsh,
            LabellingDesign::Sessions {
                rater: 0.15,
                session: 0.05,
            },
            LabellingDesign::Sessions {
                rater: 0.10,
                session: 0.10,
            },
            LabellingDesign::Drifting { ar: 0.7 },
            LabellingDesign::NotNamed { batches: 2 },
            LabellingDesign::NotNamed { batches: 5 },
            LabellingDesign::HalfOneRater,
        ]
    }

    pub fn label(&self) -> String {
        match self {
            Self::Independent => "independent, no rater named".into(),
            Self::Offsets { share } => format!("named raters, offsets {:.0}%", 100.0 * share),
            Self::Harsh => "named raters, one in ten harsh".into(),
            Self::Sessions { rater, session } => {
                format!("named raters, sessions {rater:.2} + {session:.2}")
            }
            Self::Drifting { ar } => format!("named raters drifting, AR {ar}"),
            Self::NotNamed { batches } => format!("one labeller per {batches} batches, not named"),
            Self::HalfOneRater => "one named rater holds half, skewed".into(),
        }
    }

    /// One draw of a rater's offset from the design's law (for sessions: the total).
    fn offset(&self, rng: &mut Rng) -> f64 {
        match *self {
            Self::Independent => 0.0,
            Self::Offsets { share } => share.sqrt() * standard_normal(rng),
            Self::Harsh => {
                let c = (SHARE / 0.09).sqrt();
                if rng.random::<f64>() < 0.1 {
                    -0.9 * c
                } else {
                    0.1 * c
                }
            }
            Self::Sessions { rater, session } => (rater + session).sqrt() * standard_normal(rng),
            Self::Drifting { .. } | Self::NotNamed { .. } => SHARE.sqrt() * standard_normal(rng),
            Self::HalfOneRater => {
                let e: f64 = -(1.0 - rng.random::<f64>()).ln();
                SHARE.sqrt() * (e - 1.0)
            }
        }
    }

    /// The design's mean miss rate: the rate its watches are tested against.
    pub fn rate(&self, w: &DriftWorld, shifted: bool) -> f64 {
        let mut rng = Rng::seed_from_u64(0x5EED);
        let n = 200_000;
        (0..n)
            .map(|_| w.at(self.offset(&mut rng), shifted))
            .sum::<f64>()
            / n as f64
    }
}

/// The batches of one watch: per batch its rater (where named) and its anchors' chance of
/// missing.
struct Stream<'a> {
    design: LabellingDesign,
    world: &'a DriftWorld,
    batch: usize,
    rater: UnitId,
    /// The current rater's offset (for sessions: the rater's part).
    offset: f64,
    /// The held rater's, in `HalfOneRater`.
    held: f64,
    /// Raters of the ordinary sequence (in `HalfOneRater`) and their batches.
    turns: usize,
}

impl<'a> Stream<'a> {
    fn new(design: LabellingDesign, world: &'a DriftWorld, rng: &mut Rng) -> Self {
        Self {
            design,
            world,
            batch: 0,
            rater: 0,
            offset: 0.0,
            held: design.offset(rng),
            turns: 0,
        }
    }

    /// The next batch: its rater's key (named) and its chance of missing.
    fn next(&mut self, shifted: bool, rng: &mut Rng) -> (Option<UnitId>, f64) {
        let b = self.batch;
        self.batch += 1;
        let first = b.is_multiple_of(PER_RATER);
        let at = |o: f64| self.world.at(o, shifted);
        match self.design {
            LabellingDesign::Independent => (None, at(0.0)),
            LabellingDesign::Offsets { .. } | LabellingDesign::Harsh => {
                if first {
                    self.rater += 1;
                    self.offset = self.design.offset(rng);
                }
                (Some(self.rater), at(self.offset))
            }
            LabellingDesign::Sessions { rater, session } => {
                if first {
                    self.rater += 1;
                    self.offset = rater.sqrt() * standard_normal(rng);
                }
                let o = self.offset + session.sqrt() * standard_normal(rng);
                (Some(self.rater), at(o))
            }
            LabellingDesign::Drifting { ar } => {
                if first {
                    self.rater += 1;
                    self.offset = self.design.offset(rng);
                } else {
                    let innovation = (SHARE * (1.0 - ar * ar)).sqrt() * standard_normal(rng);
                    self.offset = ar * self.offset + innovation;
                }
                (Some(self.rater), at(self.offset))
            }
            LabellingDesign::NotNamed { batches } => {
                if b.is_multiple_of(batches) {
                    self.offset = self.design.offset(rng);
                }
                (None, at(self.offset))
            }
            LabellingDesign::HalfOneRater => {
                if rng.random::<f64>() < 0.5 {
                    return (Some(0), at(self.held));
                }
                if self.turns.is_multiple_of(PER_RATER) {
                    self.rater += 1;
                    self.offset = self.design.offset(rng);
                }
                self.turns += 1;
                (Some(self.rater), at(self.offset))
            }
        }
    }
}

fn misses(n: usize, p: f64, rng: &mut Rng) -> Vec<bool> {
    (0..n).map(|_| rng.random::<f64>() < p).collect()
}

/// The version's training units: [`TRAIN`] anchors from raters of one batch each, offsets from
/// the design's law, as the service counts them when it trains.
fn training(design: LabellingDesign, w: &DriftWorld, rng: &mut Rng) -> UnitSpread {
    let named = !matches!(
        design,
        LabellingDesign::Independent | LabellingDesign::NotNamed { .. }
    );
    if named {
        return UnitSpread::of((0..TRAIN / BATCH).map(|_| {
            let p = w.at(design.offset(rng), false);
            let m = misses(BATCH, p, rng).iter().filter(|&&m| m).count();
            (BATCH as f64, m as f64)
        }));
    }
    // Uploads naming no rater, in order, as the watch's come: one labeller over consecutive
    // uploads where the design has it.
    let mut stream = Stream::new(design, w, rng);
    let uploads: Vec<(f64, f64)> = (0..TRAIN / BATCH)
        .map(|_| {
            let (_, p) = stream.next(false, rng);
            let m = misses(BATCH, p, rng).iter().filter(|&&m| m).count();
            (BATCH as f64, m as f64)
        })
        .collect();
    UnitSpread::of(uploads.iter().copied()).with_uploads(&uploads)
}

/// One healthy watch of `horizon` anchors against `rate`, alarming at 1/`delta`: the anchor at
/// which it fired, if it did, and its peak e-value.
fn healthy_watch(
    design: LabellingDesign,
    w: &DriftWorld,
    (rate, delta): (f64, f64),
    horizon: usize,
    rng: &mut Rng,
) -> (Option<u64>, f64) {
    let history = training(design, w, rng);
    let mut alarm = MissAlarm::new(rate, delta).with_history(Some(&history));
    let mut stream = Stream::new(design, w, rng);
    let mut seen = 0;
    while seen < horizon && alarm.alarmed_at.is_none() {
        let (rater, p) = stream.next(false, rng);
        alarm.observe_session(rater, &misses(BATCH, p, rng));
        seen += BATCH;
    }
    (alarm.alarmed_at, alarm.peak())
}

/// `runs` healthy watches of `horizon` anchors: per watch, the anchor at which it fired, if it
/// did, and its peak e-value.
pub fn watches(
    design: LabellingDesign,
    w: &DriftWorld,
    (rate, delta): (f64, f64),
    (runs, horizon): (usize, usize),
    seed: u64,
) -> Vec<(Option<u64>, f64)> {
    parallel(|t, threads| {
        (t..runs)
            .step_by(threads)
            .map(|r| {
                let mut rng = Rng::seed_from_u64(seed ^ r as u64);
                healthy_watch(design, w, (rate, delta), horizon, &mut rng)
            })
            .collect::<Vec<_>>()
    })
    .concat()
}

#[derive(Debug, Clone)]
pub struct DesignOptions {
    pub runs: usize,
    pub horizon: usize,
    pub fleet: usize,
    pub fleets: usize,
    pub fleet_horizon: usize,
    /// Watches per delay cell, healthy anchors before the change and the anchors watched after.
    pub delay_runs: usize,
    pub healthy: usize,
    pub cap: usize,
    pub seed: u64,
    /// The judge's shift, in reference sd (as the world was built with).
    pub shift: f64,
}

/// One design's figures.
#[derive(Debug, Clone)]
pub struct DesignRow {
    pub design: LabellingDesign,
    pub reference: &'static str,
    pub rate: f64,
    pub after: f64,
    pub alarms: usize,
    pub runs: usize,
    /// Watches whose peak e-value reached the fleet's threshold 2K/δ.
    pub over_fleet: usize,
    pub fleets_alerting: usize,
    pub fleets: usize,
    /// Anchors after the change until the alarm: by default, independence declared, oracle.
    pub delays: [Vec<Option<u64>>; 3],
}

/// The rows of one world.
pub fn run(
    opts: &DesignOptions,
    w: &DriftWorld,
    designs: &[LabellingDesign],
    progress: &dyn Fn(&str),
) -> Vec<DesignRow> {
    let threshold = 2.0 * opts.fleet as f64 / DELTA;
    designs
        .iter()
        .map(|&design| {
            let started = std::time::Instant::now();
            let rate = design.rate(w, false);
            let after = design.rate(w, true);
            let seed = opts.seed ^ design.label().bytes().map(u64::from).sum::<u64>() << 20;
            let watches = watches(design, w, (rate, DELTA), (opts.runs, opts.horizon), seed);
            let fleets: usize = parallel(|t, threads| {
                (t..opts.fleets)
                    .step_by(threads)
                    .filter(|&f| {
                        let mut rng = Rng::seed_from_u64(seed ^ 0xF1EE7 ^ (f as u64) << 32);
                        (0..opts.fleet).any(|_| {
                            let cell = (rate, 1.0 / threshold);
                            healthy_watch(design, w, cell, opts.fleet_horizon, &mut rng)
                                .0
                                .is_some()
                        })
                    })
                    .count()
            })
            .iter()
            .sum();
            let delays = delays(opts, w, design, (rate, after), seed);
            let row = DesignRow {
                design,
                reference: w.reference,
                rate,
                after,
                alarms: watches.iter().filter(|x| x.0.is_some()).count(),
                runs: watches.len(),
                over_fleet: watches.iter().filter(|x| x.1 >= threshold).count(),
                fleets_alerting: fleets,
                fleets: opts.fleets,
                delays,
            };
            progress(&format!(
                "{} / {}: {} of {} false alarms ({:.0} s)",
                w.reference,
                design.label(),
                row.alarms,
                row.runs,
                started.elapsed().as_secs_f64()
            ));
            row
        })
        .collect()
}

/// The CUSUM of miss rate `after` against `before`: its log-likelihood ratio per anchor.
fn cusum_steps(before: f64, after: f64) -> (f64, f64) {
    ((after / before).ln(), ((1.0 - after) / (1.0 - before)).ln())
}

/// Delays after the shift: by default, with independence declared, and the oracle's.
fn delays(
    opts: &DesignOptions,
    w: &DriftWorld,
    design: LabellingDesign,
    (before, after): (f64, f64),
    seed: u64,
) -> [Vec<Option<u64>>; 3] {
    let (hit, miss) = cusum_steps(before, after);
    // The oracle's threshold: the 1 − δ quantile of its maximum over healthy watches of the
    // design, as long as a watch before and after the change.
    let maxima: Vec<f64> = parallel(|t, threads| {
        (t..opts.delay_runs.max(1000))
            .step_by(threads)
            .map(|r| {
                let mut rng = Rng::seed_from_u64(seed ^ 0x0AC1E ^ (r as u64) << 24);
                let mut stream = Stream::new(design, w, &mut rng);
                let (mut s, mut top, mut seen) = (0.0f64, 0.0f64, 0);
                while seen < opts.healthy + opts.cap {
                    let (_, p) = stream.next(false, &mut rng);
                    for m in misses(BATCH, p, &mut rng) {
                        s = (s + if m { hit } else { miss }).max(0.0);
                        top = top.max(s);
                    }
                    seen += BATCH;
                }
                top
            })
            .collect::<Vec<_>>()
    })
    .concat();
    let h = quantile(&maxima, 1.0 - DELTA);
    let parts: Vec<Vec<[Option<u64>; 3]>> = parallel(|t, threads| {
        (t..opts.delay_runs)
            .step_by(threads)
            .map(|r| {
                let mut rng = Rng::seed_from_u64(seed ^ 0xDE1A ^ (r as u64) << 24);
                let history = training(design, w, &mut rng);
                let mut alarms = [None, Some(0.0)].map(|max_rho| {
                    MissAlarm::new(before, DELTA)
                        .bounded(max_rho)
                        .with_history(Some(&history))
                });
                let mut stream = Stream::new(design, w, &mut rng);
                let (mut s, mut oracle, mut seen) = (0.0f64, None, 0usize);
                let mut fired = [None, None];
                while seen < opts.healthy + opts.cap {
                    let shifted = seen >= opts.healthy;
                    let (rater, p) = stream.next(shifted, &mut rng);
                    let batch = misses(BATCH, p, &mut rng);
                    for (alarm, f) in alarms.iter_mut().zip(&mut fired) {
                        if f.is_none() && alarm.observe_session(rater, &batch) {
                            *f = Some(seen + BATCH);
                        }
                    }
                    for (i, &m) in batch.iter().enumerate() {
                        s = (s + if m { hit } else { miss }).max(0.0);
                        if oracle.is_none() && s >= h {
                            oracle = Some(seen + i + 1);
                        }
                    }
                    seen += BATCH;
                    if fired.iter().all(Option::is_some) && oracle.is_some() {
                        break;
                    }
                }
                // An alarm before the change is a false one: it never detects the change.
                let after = |t: Option<usize>| {
                    t.filter(|&t| t > opts.healthy)
                        .map(|t| (t - opts.healthy) as u64)
                };
                [after(fired[0]), after(fired[1]), after(oracle)]
            })
            .collect()
    });
    let all: Vec<[Option<u64>; 3]> = parts.concat();
    [0, 1, 2].map(|k| all.iter().map(|d| d[k]).collect())
}

/// The rows, in Markdown.
pub fn table(opts: &DesignOptions, rows: &[DesignRow]) -> String {
    let mut out = format!(
        "Drift alarm by labelling design, δ = {DELTA}, batches of {BATCH}, named raters of {PER_RATER} batches, versions trained on {TRAIN} anchors of {} raters; false alarms over {} anchors, {} watches, miss rate at the tested rate; fleet: {} cells of {} anchors alerting at 2K/δ, {} fleets; delay after the judge shifts +{} sd at anchor {} (median over {} watches, within {}; an alarm before the change counts as never):\n\n| references | design | tested rate → after | false alarms | watches past 2K/δ | fleets alerting | delay (default) | delay (independence declared) | oracle CUSUM | default / oracle |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        TRAIN / BATCH,
        opts.horizon,
        opts.runs,
        opts.fleet,
        opts.fleet_horizon,
        opts.fleets,
        opts.shift,
        opts.healthy,
        opts.delay_runs,
        opts.cap
    );
    for r in rows {
        let show = |d: &[Option<u64>]| median(d).map_or("–".to_owned(), |v| v.to_string());
        let ratio = match (median(&r.delays[0]), median(&r.delays[2])) {
            (Some(a), Some(b)) if b > 0 => format!("{:.1}", a as f64 / b as f64),
            _ => "–".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {:.4} → {:.4} | {} of {} ({:.2}%) | {} | {} of {} | {} | {} | {} | {} |\n",
            r.reference,
            r.design.label(),
            r.rate,
            r.after,
            r.alarms,
            r.runs,
            100.0 * r.alarms as f64 / r.runs.max(1) as f64,
            r.over_fleet,
            r.fleets_alerting,
            r.fleets,
            show(&r.delays[0]),
            show(&r.delays[1]),
            show(&r.delays[2]),
            ratio
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::world::{Version, world};
    use judgecal_stats::{Candidates, Method};

    fn world_of(integer: bool) -> DriftWorld {
        let version = Version {
            method: Method::QuantileMap,
            candidates: &Candidates::default(),
            train: 1200,
            seed: 7,
            shift: 0.5,
        };
        world(version, integer).expect("the world builds")
    }

    #[test]
    fn the_labelling_designs_the_alarm_models_keep_false_alarms_within_delta() {
        // Integer references (a skewed discrete scale), each design of issue 57's table at its
        // own mean miss rate: 300 watches of 10,000 anchors. δ = 1% allows 3 on average; 8 or
        // more happens by chance in 0.4% of cells. The alarm before sessions were nested in
        // raters, uploads chained and one rater's evidence bounded alarmed in 9, 16, 31, 7, 12,
        // 11 and 26 of 300 for the designs of the table that it failed (0 where one rater holds
        // half). Beyond what it models, and printed only: a labeller of five uploads not named
        // (16%, which `clustered` flags; 47% before). The full grid: `judgecal-study drift
        // --designs`.
        let w = world_of(true);
        let limits = [LabellingDesign::NotNamed { batches: 5 }];
        let mut failed = Vec::new();
        for design in LabellingDesign::all() {
            let rate = design.rate(&w, false);
            let found = watches(design, &w, (rate, DELTA), (300, 10_000), 11);
            let alarms = found.iter().filter(|x| x.0.is_some()).count();
            eprintln!("{}: {alarms} of 300", design.label());
            if alarms >= 8 && !limits.contains(&design) {
                failed.push((design.label(), alarms));
            }
        }
        assert!(failed.is_empty(), "{failed:?}");
    }

    #[test]
    fn named_raters_who_return_after_a_change_carry_its_evidence() {
        // Quarter-point references, named raters of five batches with offsets at 20% of the
        // residual variance; the judge shifts +0.5 sd after 1,000 anchors (this version's
        // misses 0.089 → 0.208). Before returning raters were bet on by their own excess, their
        // later sessions lost what first sessions won: 104 of 200 watches alarmed within 10,000
        // anchors, median 7,550. Now 145 of 200, median 4,050 (the oracle CUSUM's: 1,069).
        let w = world_of(false);
        let design = LabellingDesign::Offsets { share: SHARE };
        let opts = DesignOptions {
            runs: 0,
            horizon: 0,
            fleet: 0,
            fleets: 0,
            fleet_horizon: 0,
            delay_runs: 200,
            healthy: 1000,
            cap: 10_000,
            seed: 5,
            shift: 0.5,
        };
        let rates = (design.rate(&w, false), design.rate(&w, true));
        let [default, _, oracle] = delays(&opts, &w, design, rates, 5);
        let detected = default.iter().filter(|d| d.is_some()).count();
        eprintln!(
            "misses {:.3} -> {:.3}: detected in {detected} of 200 within 10,000 anchors, median {:?} (oracle {:?})",
            rates.0,
            rates.1,
            median(&default),
            median(&oracle)
        );
        assert!(detected >= 130, "{detected}");
    }
}
