//! `judgecal-study drift`: how often the drift alarm fires on cells that do not drift, and how soon
//! it fires on cells that do.
//!
//! Each cell's anchors are put in an exchangeable order, so nothing drifts: a version is
//! trained on the first half (each method as a job trains it: its default held-out scheme,
//! then `conformal::Intervals`), and the second half is streamed in upload batches, each
//! checked against the version's band. Any alarm is then false. Two orders:
//! - `shuffled`: anchors shuffled one by one;
//! - `batched`: anchors arrive in batches that share something. On HANNA a batch holds whole
//!   prompts (every system's story for a prompt: the same raters' task); on the synthetic judge
//!   each batch of anchors shares a rater offset whose variance is 20% of the residual variance
//!   (on the training half as on the streamed one, so the cell stays healthy).
//!
//! "before" replays what the service did until now: a bet per anchor against the nominal 5%,
//! with the Bayesian version serving its posterior predictive as is. "after" is the service
//! today: a bet per batch against the version's miss-rate bound, on bands conformalised for
//! every method.
//!
//! Detection, on shuffled cells: the streamed half (resampled up to `--watch` anchors) with the
//! judge's scores shifted up by half the cell's reference sd, and with another judge's scores
//! for the same items (HANNA: the next judge of the list; synthetic: a judge of slope 0.4 and
//! twice the noise). The delay is the number of streamed anchors until the alarm.

pub mod designs;
pub mod grid;
pub mod scenario;
pub mod world;

use std::sync::atomic::AtomicBool;

use judgecal_stats::rng::Rng;
use judgecal_stats::rng::SliceRandom;
use judgecal_stats::rng::{RngExt, SeedableRng};

use super::synthetic::{JudgeModel, stand_in_reference};
use super::systems::Record;
use judgecal_stats::conformal::Intervals;
use judgecal_stats::cv::Split;
use judgecal_stats::drift::{BOUND_DELTA, CheckedBatch, Dependence, MissAlarm, UnitSpread, drift};
use judgecal_stats::stats::{mean, quantile, sample_variance, standard_normal};
use judgecal_stats::{Candidates, Cell, Method, Run};

/// The false-alarm probability of each cell's alarm.
const DELTA: f64 = 0.01;

#[derive(Debug, Clone)]
pub struct DriftOptions {
    /// HANNA in long form; `None` runs the synthetic cells only.
    pub hanna: Option<std::path::PathBuf>,
    /// Synthetic cells per kind of reference (quarter points, and integers).
    pub synthetic: usize,
    /// Anchors per synthetic cell (half trains, half streams).
    pub anchors: usize,
    /// Anchors per upload batch.
    pub batch: usize,
    /// Anchors streamed when watching for a shift or a switch of judge.
    pub watch: usize,
    pub methods: Vec<Method>,
    pub candidates: Candidates,
    pub seed: u64,
}

/// One cell: its anchors, and what a batch shares.
struct Source {
    name: String,
    /// (judge score, reference), one per item.
    pairs: Vec<(f64, f64)>,
    /// The item's prompt (HANNA) or batch (synthetic): items sharing one arrive together in
    /// the batched order.
    unit: Vec<u64>,
    /// Another judge's scores of the same items.
    other: Vec<f64>,
}

/// The false alarms of one method over one kind of cell, and its detection delays.
#[derive(Debug, Clone, Default)]
pub struct DriftRow {
    pub source: String,
    pub order: &'static str,
    pub method: Option<Method>,
    pub cells: usize,
    pub before: usize,
    pub after: usize,
    /// The e-values at the end of each cell's watch (after).
    pub e_values: Vec<f64>,
    /// The miss-rate bounds the versions were tested against.
    pub bounds: Vec<f64>,
    /// Anchors until the alarm after a shift and after a switch of judge (`None`: not within
    /// the watch).
    pub shift: Vec<Option<u64>>,
    pub switch: Vec<Option<u64>>,
}

fn synthetic(opts: &DriftOptions, integer: bool, k: usize) -> Source {
    let mut rng = Rng::seed_from_u64(opts.seed ^ (k as u64 * 7919 + u64::from(integer)));
    let judge = JudgeModel::default();
    let weak = JudgeModel::weak();
    let mut ys = stand_in_reference(opts.anchors, (1.0, 5.0), &mut rng);
    // The rater offset a batch shares: 20% of the residual variance of the judge around the
    // reference (about 0.3² for this judge), added to the reference.
    let offset_sd = (0.2f64 * 0.3 * 0.3).sqrt();
    let unit: Vec<u64> = (0..opts.anchors).map(|i| (i / opts.batch) as u64).collect();
    let offsets: Vec<f64> = (0..=opts.anchors / opts.batch)
        .map(|_| offset_sd * standard_normal(&mut rng))
        .collect();
    for (y, &u) in ys.iter_mut().zip(&unit) {
        *y = (*y + offsets[u as usize]).clamp(1.0, 5.0);
        if integer {
            *y = y.round();
        }
    }
    let pairs = ys
        .iter()
        .map(|&y| (judge.draw(y, (1.0, 5.0), &mut rng), y))
        .collect();
    let other = ys
        .iter()
        .map(|&y| weak.draw(y, (1.0, 5.0), &mut rng))
        .collect();
    Source {
        name: if integer {
            "synthetic, integer".into()
        } else {
            "synthetic".into()
        },
        pairs,
        unit,
        other,
    }
}

fn hanna(path: &std::path::Path) -> Result<Vec<Source>, String> {
    let records = super::systems::read(path)?;
    let judges: Vec<String> = {
        let mut j: Vec<String> = records.iter().map(|r| r.judge.clone()).collect();
        j.sort();
        j.dedup();
        j
    };
    let mut rubrics: Vec<String> = records.iter().map(|r| r.rubric.clone()).collect();
    rubrics.sort();
    rubrics.dedup();
    let valid = |s: f64| (1.0..=5.0).contains(&s);
    // Per (judge, rubric): its records of prompt variant 1.
    let mut by_cell: std::collections::BTreeMap<(&str, &str), Vec<&Record>> = Default::default();
    for r in records.iter().filter(|r| r.variant == "1") {
        by_cell.entry((&r.judge, &r.rubric)).or_default().push(r);
    }
    let mut out = Vec::new();
    for (j, judge) in judges.iter().enumerate() {
        let next = &judges[(j + 1) % judges.len()];
        for rubric in &rubrics {
            let (Some(items), Some(others)) = (
                by_cell.get(&(judge.as_str(), rubric.as_str())),
                by_cell.get(&(next.as_str(), rubric.as_str())),
            ) else {
                continue;
            };
            let other_of: std::collections::HashMap<(&str, u64), f64> = others
                .iter()
                .map(|r| ((r.system.as_str(), r.story), r.score))
                .collect();
            let mut source = Source {
                name: "HANNA".into(),
                pairs: Vec::new(),
                unit: Vec::new(),
                other: Vec::new(),
            };
            for r in items {
                let Some(&o) = other_of.get(&(r.system.as_str(), r.story)) else {
                    continue;
                };
                if valid(r.score) && valid(o) {
                    source.pairs.push((r.score, r.human));
                    source.unit.push(r.story);
                    source.other.push(o);
                }
            }
            out.push(source);
        }
    }
    Ok(out)
}

/// Whether each of `stream` (judge, reference) missed the version's band.
fn misses(
    model: &judgecal_stats::Model,
    intervals: Option<&Intervals>,
    stream: &[(f64, f64)],
) -> Result<Vec<bool>, String> {
    let js: Vec<f64> = stream.iter().map(|p| p.0).collect();
    let mut corrected = model.correct(&js)?;
    if let Some(iv) = intervals {
        iv.apply(&js, &mut corrected);
    }
    corrected
        .iter()
        .zip(stream)
        .map(|(c, &(_, y))| {
            let (lo, hi) = c.predictive.ok_or("a version without an interval")?;
            Ok(!(lo..=hi).contains(&y))
        })
        .collect()
}

/// Whether each of `stream` (judge, reference) missed the version's band as the drift alarm
/// counts: ties at the band's edges broken by a uniform draw from `rng`.
fn alarm_misses(
    model: &judgecal_stats::Model,
    intervals: &Intervals,
    stream: &[(f64, f64)],
    rng: &mut Rng,
) -> Result<Vec<bool>, String> {
    let js: Vec<f64> = stream.iter().map(|p| p.0).collect();
    model
        .correct(&js)?
        .iter()
        .zip(stream)
        .map(|(c, &(j, y))| {
            intervals
                .misses(j, y, c, rng.random())
                .ok_or_else(|| "a version without an interval".to_owned())
        })
        .collect()
}

/// The anchor at which an alarm against `bound` first fires, streaming `misses` in batches,
/// its estimate of ρ starting from the version's training units `history`.
fn delay(misses: &[bool], batch: usize, bound: f64, history: Option<&UnitSpread>) -> Option<u64> {
    let mut alarm = MissAlarm::new(bound, DELTA).with_history(history);
    for b in misses.chunks(batch) {
        if alarm.observe_batch(b) {
            break;
        }
    }
    alarm.alarmed_at
}

/// Runs the study: a row per source, order and method.
pub fn run(opts: &DriftOptions, progress: &dyn Fn(&str)) -> Result<Vec<DriftRow>, String> {
    let mut sources: Vec<Source> = Vec::new();
    for k in 0..opts.synthetic {
        sources.push(synthetic(opts, false, k));
        sources.push(synthetic(opts, true, k));
    }
    if let Some(path) = &opts.hanna {
        sources.extend(hanna(path)?);
    }
    let never = AtomicBool::new(false);
    let run = Run::new(&never, &|_| {});
    let mut rows: Vec<DriftRow> = Vec::new();
    for (k, source) in sources.iter().enumerate() {
        for order in ["shuffled", "batched"] {
            let mut rng = Rng::seed_from_u64(opts.seed ^ (k as u64) << 8);
            let idx = arrival(source, order, &mut rng);
            let half = idx.len() / 2;
            let train: Vec<(f64, f64)> = idx[..half].iter().map(|&i| source.pairs[i]).collect();
            let stream: Vec<(f64, f64)> = idx[half..].iter().map(|&i| source.pairs[i]).collect();
            let cells = [Cell {
                pairs: train,
                scale: (1.0, 5.0),
            }];
            for &m in &opts.methods {
                progress(&format!("{} cell {k} {order}: {m}", source.name));
                let Some(watched) = Watched::fit(opts, m, &cells, &run)? else {
                    continue;
                };
                let row = row_of(&mut rows, source, order, m);
                watched.stream(opts, &stream, row, &mut rng)?;
                if order == "shuffled" {
                    watched.delays(opts, source, &idx, row, &mut rng)?;
                }
            }
        }
    }
    Ok(rows)
}

/// The order the source's anchors arrive in: shuffled, or whole units in a random order (a
/// unit's anchors arrive together).
fn arrival(source: &Source, order: &str, rng: &mut Rng) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..source.pairs.len()).collect();
    idx.shuffle(rng);
    if order == "batched" {
        let mut units: Vec<u64> = source.unit.clone();
        units.sort_unstable();
        units.dedup();
        units.shuffle(rng);
        let rank: std::collections::HashMap<u64, usize> =
            units.iter().enumerate().map(|(r, &u)| (u, r)).collect();
        idx.sort_by_key(|&i| rank[&source.unit[i]]);
    }
    idx
}

/// The row of `source`, `order` and `m`, added where it is new.
fn row_of<'a>(
    rows: &'a mut Vec<DriftRow>,
    source: &Source,
    order: &'static str,
    m: Method,
) -> &'a mut DriftRow {
    match rows
        .iter()
        .position(|r| r.source == source.name && r.order == order && r.method == Some(m))
    {
        Some(at) => &mut rows[at],
        None => {
            rows.push(DriftRow {
                source: source.name.clone(),
                order,
                method: Some(m),
                ..DriftRow::default()
            });
            rows.last_mut().expect("just pushed")
        }
    }
}

/// A method fitted on a cell's training half, with its band and the alarm's bound.
struct Watched {
    model: judgecal_stats::Model,
    intervals: Intervals,
    bound: f64,
}

impl Watched {
    /// `None` where the method gives no band.
    fn fit(
        opts: &DriftOptions,
        m: Method,
        cells: &[Cell; 1],
        run: &Run,
    ) -> Result<Option<Self>, String> {
        let split = Split {
            scheme: m.default_scheme(),
            seed: opts.seed,
        };
        let (mut models, held_out) = opts.candidates.get(m).train(cells, split, run)?;
        let Some(intervals) = Intervals::of(&cells[0].pairs, &held_out[0], opts.seed) else {
            return Ok(None);
        };
        // The training half came in batches as the stream does.
        let units: Vec<Option<usize>> = (0..cells[0].pairs.len())
            .map(|i| Some(i / opts.batch.max(1)))
            .collect();
        let places: Vec<Option<i64>> = units.iter().map(|u| u.map(|b| b as i64)).collect();
        let intervals =
            intervals.with_units(&cells[0].pairs, &held_out[0], (&units, &places), opts.seed);
        Ok(Some(Self {
            model: models.swap_remove(0),
            bound: intervals.miss_bound(BOUND_DELTA),
            intervals,
        }))
    }

    /// The healthy stream's alarms, before (the method's own interval where it has one, else
    /// the band, at 0.05) and after (the band at its bound, batches as units).
    fn stream(
        &self,
        opts: &DriftOptions,
        stream: &[(f64, f64)],
        row: &mut DriftRow,
        rng: &mut Rng,
    ) -> Result<(), String> {
        let (model, intervals) = (&self.model, &self.intervals);
        let after = alarm_misses(model, intervals, stream, rng)?;
        let own = model.correct(&[stream[0].0])?[0].predictive.is_some();
        let before = misses(model, (!own).then_some(intervals), stream)?;
        let batches: Vec<CheckedBatch> = after
            .chunks(opts.batch)
            .map(|b| CheckedBatch::unrated(b.to_vec()))
            .collect();
        let history = Dependence {
            max_rho: None,
            history: intervals.units.as_ref(),
        };
        let now = drift(&batches, self.bound, DELTA, history);
        let then = drift(
            &before
                .iter()
                .map(|&b| CheckedBatch::unrated(vec![b]))
                .collect::<Vec<_>>(),
            0.05,
            DELTA,
            Dependence::default(),
        );
        row.cells += 1;
        row.before += usize::from(then.alarm);
        row.after += usize::from(now.alarm);
        row.e_values.push(now.e_value);
        row.bounds.push(self.bound);
        Ok(())
    }

    /// The delays to an alarm once the judge's scores shift by half the references' sd, and
    /// once another judge takes over, on anchors drawn from the stream.
    fn delays(
        &self,
        opts: &DriftOptions,
        source: &Source,
        idx: &[usize],
        row: &mut DriftRow,
        rng: &mut Rng,
    ) -> Result<(), String> {
        let sd = sample_variance(&source.pairs.iter().map(|p| p.1).collect::<Vec<_>>()).sqrt();
        let half = idx.len() / 2;
        let watched: Vec<usize> = (0..opts.watch)
            .map(|_| half + rng.random_range(0..idx.len() - half))
            .collect();
        let shifted: Vec<(f64, f64)> = watched
            .iter()
            .map(|&i| {
                let (j, y) = source.pairs[idx[i]];
                (j + 0.5 * sd, y)
            })
            .collect();
        let switched: Vec<(f64, f64)> = watched
            .iter()
            .map(|&i| (source.other[idx[i]], source.pairs[idx[i]].1))
            .collect();
        let (model, intervals) = (&self.model, &self.intervals);
        row.shift.push(delay(
            &alarm_misses(model, intervals, &shifted, rng)?,
            opts.batch,
            self.bound,
            intervals.units.as_ref(),
        ));
        row.switch.push(delay(
            &alarm_misses(model, intervals, &switched, rng)?,
            opts.batch,
            self.bound,
            intervals.units.as_ref(),
        ));
        Ok(())
    }
}

/// The median of the delays, counting those that never came as later than any that did;
/// "–" where fewer than half came.
fn median_delay(delays: &[Option<u64>]) -> String {
    if delays.is_empty() {
        return "–".into();
    }
    let mut d: Vec<u64> = delays.iter().map(|d| d.unwrap_or(u64::MAX)).collect();
    d.sort_unstable();
    match d[d.len() / 2] {
        u64::MAX => "–".into(),
        v => v.to_string(),
    }
}

/// The rows as a Markdown table.
pub fn table(rows: &[DriftRow], opts: &DriftOptions) -> String {
    let mut out = format!(
        "Drift alarm, δ = {DELTA} per cell; healthy cells: half trains, half streams in batches of {}; detection within {} anchors\n\n",
        opts.batch, opts.watch
    );
    out.push_str("| cells | order | method | cells | false alarms before | false alarms after | e-value 50% / 90% / max | miss bound (median) | shift +0.5 sd: detected, median delay | judge switch: detected, median delay |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let detected = |d: &[Option<u64>]| {
            if d.is_empty() {
                "–".to_owned()
            } else {
                format!(
                    "{} of {}, {}",
                    d.iter().filter(|x| x.is_some()).count(),
                    d.len(),
                    median_delay(d)
                )
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.2} / {:.2} / {:.2} | {:.3} | {} | {} |\n",
            r.source,
            r.order,
            r.method.map_or("–", |m| m.as_str()),
            r.cells,
            r.before,
            r.after,
            quantile(&r.e_values, 0.5),
            quantile(&r.e_values, 0.9),
            r.e_values.iter().copied().fold(0.0, f64::max),
            quantile(&r.bounds, 0.5),
            detected(&r.shift),
            detected(&r.switch),
        ));
    }
    let (cells, after): (usize, usize) = rows
        .iter()
        .fold((0, 0), |(c, a), r| (c + r.cells, a + r.after));
    out.push_str(&format!(
        "\nAll cells and methods: {after} false alarms in {cells} watches ({:.2}%); mean bound {:.3}\n",
        100.0 * after as f64 / cells.max(1) as f64,
        mean(&rows.iter().flat_map(|r| r.bounds.clone()).collect::<Vec<_>>())
    ));
    out
}
