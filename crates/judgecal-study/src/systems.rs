//! `judgecal-study systems`: HANNA's systems from one judge, against the human scores. Anchors are
//! every system's stories of even prompts; the runs are each system's stories of odd prompts.
//!
//! - [`systems`]: each system's mean, plain and labelled, and the rankings they give.
//! - [`pairs`]: for every judge and rubric, every pair of systems compared on the plain path
//!   (their stories paired by prompt), against the human difference on those very stories:
//!   how often the interval covers it and how many significant claims have the wrong sign,
//!   before the anchors named their systems (the corrected differences' spread, no group term)
//!   and after (each system a group).

use judgecal_stats::rng::Rng;
use judgecal_stats::rng::SeedableRng;
use judgecal_stats::rng::SliceRandom;

use judgecal_stats::runlevel::inference::Estimand;
use judgecal_stats::runlevel::{self, AnswerSettings, Basis, RunItems};
use judgecal_stats::stats::mean;
use judgecal_stats::train::train_with_groups;
use judgecal_stats::{Cell, Method, Run};

const SCALE: (f64, f64) = (1.0, 5.0);

/// One system's mean on the held-out half of HANNA: raw, estimated (plain, and labelled
/// with a random few of its items) and human.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemRow {
    pub system: String,
    pub n: usize,
    pub raw: f64,
    pub plain: (f64, (f64, f64)),
    pub labelled: (f64, (f64, f64)),
    pub human: f64,
}

/// HANNA's systems ranked: `path` is `hanna_long.csv`; the anchors are every system's stories
/// of even prompts, the runs each system's stories of odd prompts, scored by `judge` (prompt
/// variant `variant`) on `rubric`; `method` corrects, `labels` items of each run are labelled
/// at random for the labelled column. Scores outside 1–5 (failed parses) are dropped.
pub fn systems(
    path: &std::path::Path,
    judge: &str,
    variant: &str,
    rubric: &str,
    method: Method,
    labels: usize,
    seed: u64,
) -> Result<Vec<SystemRow>, String> {
    let (anchors, runs) = split_stories(read(path)?, judge, variant, rubric);
    if anchors.len() < 20 || runs.is_empty() {
        return Err(format!(
            "{judge} (variant {variant}) on {rubric}: {} anchors and {} systems; is the judge, variant or rubric misspelt?",
            anchors.len(),
            runs.len()
        ));
    }
    let cell = Cell {
        pairs: anchors,
        scale: SCALE,
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    let fit_run = Run::new(&never, &|_| {});
    let held_out = vec![vec![None; cell.pairs.len()]];
    let model = method
        .default_options()
        .fit_models(std::slice::from_ref(&cell), seed, &held_out, &fit_run)?
        .remove(0);
    let basis = Basis {
        model: &model,
        anchors: &cell,
        groups: None,
    };
    let settings = AnswerSettings {
        seed,
        ..AnswerSettings::default()
    };
    let mut rng = Rng::seed_from_u64(seed);
    runs.into_iter()
        .map(|(system, items)| {
            let scores: Vec<f64> = items.iter().map(|p| p.0).collect();
            let human: Vec<f64> = items.iter().map(|p| p.1).collect();
            let plain = runlevel::estimate(basis, &RunItems::scores(scores.clone()), &settings)?;
            let mut order: Vec<usize> = (0..items.len()).collect();
            order.shuffle(&mut rng);
            let mut reference = vec![None; items.len()];
            for &i in order.iter().take(labels) {
                reference[i] = Some(human[i]);
            }
            let labelled = runlevel::estimate(
                basis,
                &RunItems {
                    reference,
                    ..RunItems::scores(scores.clone())
                },
                &settings,
            )?;
            Ok(SystemRow {
                system,
                n: items.len(),
                raw: mean(&scores),
                plain: (plain.mean.estimate, plain.mean.interval),
                labelled: (labelled.mean.estimate, labelled.mean.interval),
                human: mean(&human),
            })
        })
        .collect()
}

/// A judge's valid scores (1–5; failed parses dropped) on one rubric and prompt variant: the
/// stories of even prompts as anchors, each system's stories of odd prompts as its run.
#[allow(clippy::type_complexity)]
fn split_stories(
    records: Vec<Record>,
    judge: &str,
    variant: &str,
    rubric: &str,
) -> (
    Vec<(f64, f64)>,
    std::collections::BTreeMap<String, Vec<(f64, f64)>>,
) {
    let mut anchors = Vec::new();
    let mut runs: std::collections::BTreeMap<String, Vec<(f64, f64)>> = Default::default();
    for r in records {
        if r.judge != judge || r.variant != variant || r.rubric != rubric {
            continue;
        }
        if !(1.0..=5.0).contains(&r.score) {
            continue;
        }
        if r.story.is_multiple_of(2) {
            anchors.push((r.score, r.human));
        } else {
            runs.entry(r.system).or_default().push((r.score, r.human));
        }
    }
    (anchors, runs)
}

/// Ranks (1 = lowest), ties sharing their mean rank.
fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut out = vec![0.0; xs.len()];
    let mut i = 0;
    while i < order.len() {
        let mut k = i;
        while k + 1 < order.len() && xs[order[k + 1]] == xs[order[i]] {
            k += 1;
        }
        for &o in &order[i..=k] {
            out[o] = (i + k) as f64 / 2.0 + 1.0;
        }
        i = k + 1;
    }
    out
}

/// Spearman's rank correlation.
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    judgecal_stats::quality::pearson(&ranks(a), &ranks(b))
}

/// The systems as a Markdown table, with each ranking's rank correlation against the human
/// one and how many intervals cover the human mean.
pub fn systems_table(rows: &[SystemRow]) -> String {
    let mut out = String::from(
        "| system | items | raw judge mean | estimate (plain) | 95% interval | estimate (labelled) | 95% interval | human mean |\n|---|---:|---:|---:|---|---:|---|---:|\n",
    );
    let mut sorted: Vec<&SystemRow> = rows.iter().collect();
    sorted.sort_by(|a, b| b.human.total_cmp(&a.human));
    for r in &sorted {
        out.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | [{:.2}, {:.2}] | {:.2} | [{:.2}, {:.2}] | {:.2} |\n",
            r.system,
            r.n,
            r.raw,
            r.plain.0,
            r.plain.1.0,
            r.plain.1.1,
            r.labelled.0,
            r.labelled.1.0,
            r.labelled.1.1,
            r.human
        ));
    }
    let human: Vec<f64> = rows.iter().map(|r| r.human).collect();
    let col = |f: &dyn Fn(&SystemRow) -> f64| rows.iter().map(f).collect::<Vec<f64>>();
    let covers = |f: &dyn Fn(&SystemRow) -> (f64, f64)| {
        rows.iter()
            .filter(|r| {
                let (lo, hi) = f(r);
                lo <= r.human && r.human <= hi
            })
            .count()
    };
    out.push_str(&format!(
        "\nSpearman against the human ranking: raw judge {:.2}, plain estimate {:.2}, labelled estimate {:.2}. Intervals covering the human mean: plain {} of {}, labelled {} of {}.\n",
        spearman(&col(&|r| r.raw), &human),
        spearman(&col(&|r| r.plain.0), &human),
        spearman(&col(&|r| r.labelled.0), &human),
        covers(&|r| r.plain.1),
        rows.len(),
        covers(&|r| r.labelled.1),
        rows.len(),
    ));
    out
}

/// One row of HANNA in long form.
#[derive(Debug, Clone)]
pub(super) struct Record {
    pub(super) system: String,
    pub(super) story: u64,
    pub(super) rubric: String,
    pub(super) human: f64,
    pub(super) judge: String,
    pub(super) variant: String,
    pub(super) score: f64,
}

/// Every (judge, rubric) of prompt variant `variant`, sorted.
pub(super) fn cells(records: &[Record], variant: &str) -> Vec<(String, String)> {
    let mut cells: Vec<(String, String)> = records
        .iter()
        .filter(|r| r.variant == variant)
        .map(|r| (r.judge.clone(), r.rubric.clone()))
        .collect();
    cells.sort();
    cells.dedup();
    cells
}

/// The records of one cell with a score on the 1–5 scale (others are failed parses).
pub(super) fn scored<'a>(
    records: &'a [Record],
    variant: &str,
    judge: &str,
    rubric: &str,
) -> Vec<&'a Record> {
    records
        .iter()
        .filter(|r| r.variant == variant && r.judge == judge && r.rubric == rubric)
        .filter(|r| (1.0..=5.0).contains(&r.score))
        .collect()
}

pub(super) fn read(path: &std::path::Path) -> Result<Vec<Record>, String> {
    let mut reader =
        csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let headers = reader.headers().map_err(|e| e.to_string())?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("{}: no column {name}", path.display()))
    };
    let c = [
        col("system")?,
        col("story_idx")?,
        col("rubric")?,
        col("human_mean")?,
        col("judge")?,
        col("prompt_variant")?,
        col("judge_score")?,
    ];
    let mut out = Vec::new();
    for (row, record) in reader.records().enumerate() {
        let r = record.map_err(|e| format!("row {}: {e}", row + 2))?;
        let number = |k: usize| {
            r[c[k]]
                .parse::<f64>()
                .map_err(|e| format!("row {}: {}: {e}", row + 2, &headers[c[k]]))
        };
        out.push(Record {
            system: r[c[0]].to_owned(),
            story: number(1)? as u64,
            rubric: r[c[2]].to_owned(),
            human: number(3)?,
            judge: r[c[4]].to_owned(),
            variant: r[c[5]].to_owned(),
            score: number(6)?,
        });
    }
    Ok(out)
}

/// How one way of comparing fared over a cell's pairs of systems.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claims {
    pub pairs: usize,
    /// Intervals covering the human difference.
    pub covered: usize,
    /// p < 0.05, and of those, the ones with the wrong sign.
    pub significant: usize,
    pub wrong: usize,
    /// The intervals' widths, summed.
    pub width: f64,
    /// Per interval, the factor its two arms (estimate to each end) must be stretched by to
    /// hold the human difference (≤ 1 where it does).
    pub stretch: Vec<f64>,
}

impl Claims {
    fn mean_width(&self) -> f64 {
        self.width / self.pairs.max(1) as f64
    }

    /// The mean width these intervals would have had, each stretched about its estimate by one
    /// common factor, to cover `level` of the differences (at least ⌈level·pairs⌉ of them): a
    /// way of comparing two judges' widths at the same coverage. `None` without pairs, or
    /// where no finite factor reaches it.
    pub fn width_at(&self, level: f64) -> Option<f64> {
        let mut k = self.stretch.clone();
        if k.is_empty() {
            return None;
        }
        k.sort_by(f64::total_cmp);
        let need = ((level * k.len() as f64).ceil() as usize).clamp(1, k.len());
        let factor = k[need - 1];
        factor.is_finite().then(|| factor * self.mean_width())
    }

    /// Counts a run's estimate `e` against its human mean `truth` (never significant).
    fn count_estimate(&mut self, e: &judgecal_stats::runlevel::RunEstimate, truth: f64) {
        let (lo, hi) = e.mean.interval;
        self.pairs += 1;
        self.width += hi - lo;
        self.covered += usize::from(lo <= truth && truth <= hi);
        self.stretch
            .push(stretch(e.mean.estimate, e.mean.interval, truth));
    }

    /// Counts `d` against the human difference `truth`.
    fn count(&mut self, d: &judgecal_stats::runlevel::inference::Difference, truth: f64) {
        self.pairs += 1;
        self.width += d.interval.1 - d.interval.0;
        self.covered += usize::from(d.interval.0 <= truth && truth <= d.interval.1);
        self.stretch.push(stretch(d.estimate, d.interval, truth));
        let significant = d.p_value < 0.05;
        self.significant += usize::from(significant);
        self.wrong += usize::from(significant && d.estimate * truth < 0.0);
    }

    fn add(&mut self, o: &Claims) {
        self.pairs += o.pairs;
        self.width += o.width;
        self.covered += o.covered;
        self.significant += o.significant;
        self.wrong += o.wrong;
        self.stretch.extend_from_slice(&o.stretch);
    }
}

/// The factor by which the arm of `interval` on `truth`'s side of `estimate` must grow to
/// reach it: 0 at the estimate, 1 at the interval's end, infinite for an arm of no length.
fn stretch(estimate: f64, interval: (f64, f64), truth: f64) -> f64 {
    let (gap, arm) = if truth < estimate {
        (estimate - truth, estimate - interval.0)
    } else {
        (truth - estimate, interval.1 - estimate)
    };
    if gap <= 0.0 {
        0.0
    } else if arm > 0.0 {
        gap / arm
    } else {
        f64::INFINITY
    }
}

/// One judge and rubric's pairs of systems.
#[derive(Debug, Clone, PartialEq)]
pub struct PairRow {
    pub judge: String,
    pub rubric: String,
    /// Before groups (the corrected differences' spread, no group term).
    pub before: Claims,
    /// Each system a group the anchors know.
    pub known: Claims,
    /// Each known system's run estimated alone (its held-out stories against their human
    /// mean).
    pub estimates: Claims,
    /// One system of each pair new: the anchors without its stories (each pair twice, each
    /// side new once).
    pub new: Claims,
    /// The version's between-system sd of the bias.
    pub tau: f64,
}

/// Every pair of HANNA's systems compared by every judge (prompt variant `variant`) on every
/// rubric, with `method` trained as a job trains it (5 folds, then the fit).
pub fn pairs(
    path: &std::path::Path,
    variant: &str,
    method: Method,
    seed: u64,
    new_systems: bool,
) -> Result<Vec<PairRow>, String> {
    pairs_of(
        &read(path)?,
        variant,
        method,
        seed,
        new_systems,
        &Default::default(),
    )
}

/// [`pairs`] over `records` (HANNA's, and possibly more judges'). Where a new system is left
/// out of the anchors, a judge whose scores depend on the anchors (a panel's stacked score) is
/// read from `refits[system]`, its scores refitted without that system's anchors, where that
/// holds the judge's records.
pub(super) fn pairs_of(
    records: &[Record],
    variant: &str,
    method: Method,
    seed: u64,
    new_systems: bool,
    refits: &std::collections::HashMap<String, Vec<Record>>,
) -> Result<Vec<PairRow>, String> {
    let never = std::sync::atomic::AtomicBool::new(false);
    let fit_run = Run::new(&never, &|_| {});
    let mut out = Vec::new();
    for (judge, rubric) in cells(records, variant) {
        let mine = scored(records, variant, &judge, &rubric);
        let (anchors, held): (Vec<&Record>, Vec<&Record>) =
            mine.iter().partition(|r| r.story.is_multiple_of(2));
        let cell = Cell {
            pairs: anchors.iter().map(|r| (r.score, r.human)).collect(),
            scale: SCALE,
        };
        let names: Vec<Option<&str>> = anchors.iter().map(|r| Some(r.system.as_str())).collect();
        let (model, bias) = train_with_groups(method, &cell, &names, seed, &fit_run)?;
        let mut systems: Vec<&str> = held.iter().map(|r| r.system.as_str()).collect();
        systems.sort_unstable();
        systems.dedup();
        let mut row = PairRow {
            judge: judge.clone(),
            rubric: rubric.clone(),
            before: Claims::default(),
            known: Claims::default(),
            estimates: Claims::default(),
            new: Claims::default(),
            tau: bias.as_ref().map_or(0.0, |b| b.tau),
        };
        let settings = AnswerSettings {
            seed,
            ..AnswerSettings::default()
        };
        let basis = Basis {
            model: &model,
            anchors: &cell,
            groups: bias.as_ref(),
        };
        known_pairs(basis, &settings, &held, &systems, &mut row)?;
        if new_systems {
            let left = LeftOut {
                records: (&anchors, &held),
                refits,
                cell: (variant, &judge, &rubric),
                method,
                seed,
            };
            left.compare(&systems, &settings, &mut row)?;
        }
        out.push(row);
    }
    Ok(out)
}

/// Each system in turn left out of the anchors, and compared with every other: a new
/// system's pairs.
struct LeftOut<'a> {
    /// The cell's anchors and held-out stories.
    records: (&'a [&'a Record], &'a [&'a Record]),
    refits: &'a std::collections::HashMap<String, Vec<Record>>,
    /// (variant, judge, rubric).
    cell: (&'a str, &'a str, &'a str),
    method: Method,
    seed: u64,
}

impl LeftOut<'_> {
    fn compare(
        &self,
        systems: &[&str],
        settings: &AnswerSettings,
        row: &mut PairRow,
    ) -> Result<(), String> {
        let (anchors, held) = self.records;
        let (variant, judge, rubric) = self.cell;
        let never = std::sync::atomic::AtomicBool::new(false);
        let fit_run = Run::new(&never, &|_| {});
        for left_out in systems {
            // The judge's scores as refitted without the system, where they were.
            let refit = self
                .refits
                .get(*left_out)
                .map(|rs| scored(rs, variant, judge, rubric))
                .filter(|rs| !rs.is_empty());
            let (anchors, held): (Vec<&Record>, Vec<&Record>) = match refit {
                Some(rs) => rs.into_iter().partition(|r| r.story.is_multiple_of(2)),
                None => (anchors.to_vec(), held.to_vec()),
            };
            let kept: Vec<&&Record> = anchors.iter().filter(|r| r.system != *left_out).collect();
            let without = Cell {
                pairs: kept.iter().map(|r| (r.score, r.human)).collect(),
                scale: SCALE,
            };
            let names: Vec<Option<&str>> = kept.iter().map(|r| Some(r.system.as_str())).collect();
            let (model, bias) =
                train_with_groups(self.method, &without, &names, self.seed, &fit_run)?;
            let basis = Basis {
                model: &model,
                anchors: &without,
                groups: bias.as_ref(),
            };
            for other in systems.iter().filter(|s| *s != left_out) {
                let (n, ia, ib, truth) = paired(&held, left_out, other);
                if n >= 10 {
                    row.new.count(
                        &runlevel::compare(basis, &ia, &ib, settings)?.difference,
                        truth,
                    );
                }
            }
        }
        Ok(())
    }
}

/// Every pair of known systems compared, with and without the group term.
fn known_pairs(
    basis: Basis,
    settings: &AnswerSettings,
    held: &[&Record],
    systems: &[&str],
    row: &mut PairRow,
) -> Result<(), String> {
    for system in systems {
        let (run, truth) = alone(held, system);
        if run.scores.len() >= 10 {
            row.estimates
                .count_estimate(&runlevel::estimate(basis, &run, settings)?, truth);
        }
    }
    for (k, a) in systems.iter().enumerate() {
        for b in &systems[k + 1..] {
            let (n, ia, ib, truth) = paired(held, a, b);
            if n < 10 {
                continue;
            }
            row.known.count(
                &runlevel::compare(basis, &ia, &ib, settings)?.difference,
                truth,
            );
            let before = AnswerSettings {
                estimand: Estimand::Population,
                ..*settings
            };
            let old = Basis {
                groups: None,
                ..basis
            };
            row.before.count(
                &runlevel::compare(old, &ia, &ib, &before)?.difference,
                truth,
            );
        }
    }
    Ok(())
}

/// One system's stories of the odd prompts as its run, and their human mean.
fn alone(held: &[&Record], system: &str) -> (RunItems, f64) {
    let (scores, human): (Vec<f64>, Vec<f64>) = held
        .iter()
        .filter(|r| r.system == system)
        .map(|r| (r.score, r.human))
        .unzip();
    let run = RunItems {
        scores,
        group: Some(system.to_owned()),
        ..RunItems::default()
    };
    (run, mean(&human))
}

/// Two systems' stories of the odd prompts, paired by prompt: how many, each system's run, and
/// the human difference.
fn paired(held: &[&Record], a: &str, b: &str) -> (usize, RunItems, RunItems, f64) {
    let run_of = |system: &str| -> std::collections::BTreeMap<u64, (f64, f64)> {
        held.iter()
            .filter(|r| r.system == system)
            .map(|r| (r.story, (r.score, r.human)))
            .collect()
    };
    let (ra, rb) = (run_of(a), run_of(b));
    let shared: Vec<u64> = ra.keys().filter(|s| rb.contains_key(s)).copied().collect();
    let items = |r: &std::collections::BTreeMap<u64, (f64, f64)>, g: &str| RunItems {
        scores: shared.iter().map(|s| r[s].0).collect(),
        ids: Some(shared.iter().map(|s| s.to_string()).collect()),
        group: Some(g.to_owned()),
        ..RunItems::default()
    };
    let truth = mean(&shared.iter().map(|s| ra[s].1 - rb[s].1).collect::<Vec<_>>());
    (shared.len(), items(&ra, a), items(&rb, b), truth)
}

/// The pairs as a Markdown table, with the totals.
pub fn pairs_table(rows: &[PairRow]) -> String {
    let mut out = String::from(
        "| judge | rubric | pairs | τ | covers before | wrong-sign significant before (of significant) | covers, known systems | mean width | width at 90% / 95% | wrong-sign (of significant) | each known system's run: covers (of runs) | covers, one system new | mean width | width at 90% / 95% | wrong-sign (of significant) |\n|---|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---|\n",
    );
    let pct = |c: &Claims| 100.0 * c.covered as f64 / c.pairs.max(1) as f64;
    let at95 = |c: &Claims| match (c.width_at(0.9), c.width_at(0.95)) {
        (Some(a), Some(b)) => format!("{a:.3} / {b:.3}"),
        _ => "".to_owned(),
    };
    let new = |c: &Claims| {
        if c.pairs == 0 {
            ("".to_owned(), "".to_owned(), "".to_owned(), "".to_owned())
        } else {
            (
                format!("{:.1}%", pct(c)),
                format!("{:.3}", c.mean_width()),
                at95(c),
                format!("{} ({})", c.wrong, c.significant),
            )
        }
    };
    let (mut before, mut known, mut fresh, mut alone) = (
        Claims::default(),
        Claims::default(),
        Claims::default(),
        Claims::default(),
    );
    for r in rows {
        let (nc, nwidth, n95, nw) = new(&r.new);
        out.push_str(&format!(
            "| {} | {} | {} | {:.3} | {:.1}% | {} ({}) | {:.1}% | {:.3} | {} | {} ({}) | {:.1}% ({}) | {nc} | {nwidth} | {n95} | {nw} |\n",
            r.judge,
            r.rubric,
            r.known.pairs,
            r.tau,
            pct(&r.before),
            r.before.wrong,
            r.before.significant,
            pct(&r.known),
            r.known.mean_width(),
            at95(&r.known),
            r.known.wrong,
            r.known.significant,
            pct(&r.estimates),
            r.estimates.pairs,
        ));
        alone.add(&r.estimates);
        before.add(&r.before);
        known.add(&r.known);
        fresh.add(&r.new);
    }
    let share = |c: &Claims| 100.0 * c.wrong as f64 / c.pairs.max(1) as f64;
    out.push_str(&format!(
        "\nAll {} pairs: before, covers {:.1}% and {} wrong-sign significant claims ({:.1}% of pairs); known systems, covers {:.1}% and {} wrong-sign ({:.1}%).",
        known.pairs,
        pct(&before),
        before.wrong,
        share(&before),
        pct(&known),
        known.wrong,
        share(&known),
    ));
    out.push_str(&format!(
        " Each known system's run alone ({} runs): covers {:.1}%.",
        alone.pairs,
        pct(&alone)
    ));
    if fresh.pairs > 0 {
        out.push_str(&format!(
            " One system new ({} comparisons): covers {:.1}% and {} wrong-sign ({:.1}%).",
            fresh.pairs,
            pct(&fresh),
            fresh.wrong,
            share(&fresh)
        ));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_ties_share_their_mean_rank() {
        assert!((spearman(&[1.0, 2.0, 2.0, 4.0], &[10.0, 20.0, 20.0, 30.0]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn widths_compare_at_the_coverage_asked() {
        // Twenty intervals of width 2 about 0 (one of them lopsided), the truths at 0.1, 0.2,
        // …, 2.0 of their arm: the k-th smallest factor is k/10.
        let mut c = Claims::default();
        for k in 1..=20 {
            let mut d = judgecal_stats::runlevel::inference::Difference::new(
                0.0,
                Default::default(),
                None,
                0.95,
                false,
            );
            d.interval = if k == 20 { (-1.5, 0.5) } else { (-1.0, 1.0) };
            let truth = if k == 20 {
                1.0
            } else {
                k as f64 / 10.0 * if k % 2 == 0 { 1.0 } else { -1.0 }
            };
            c.count(&d, truth);
        }
        assert_eq!(c.covered, 10);
        // 95% of 20 is the 19th factor, 1.9; 50% the 10th, 1.0 (those intervals as they are).
        assert!((c.width_at(0.95).unwrap() - 3.8).abs() < 1e-12);
        assert!((c.width_at(0.5).unwrap() - 2.0).abs() < 1e-12);
        // The lopsided one (its upper arm 0.5, its truth 1.0) needs 2: every interval covers.
        assert!((c.width_at(1.0).unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(Claims::default().width_at(0.95), None);
        // An arm of no length cannot be stretched to a truth beyond it.
        assert_eq!(stretch(0.0, (0.0, 1.0), -0.1), f64::INFINITY);
    }
}
