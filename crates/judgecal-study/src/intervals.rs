//! `judgecal-study intervals`: how often each method's 95% predictive interval covers new items, on
//! the paper's synthetic judge (whose noise grows towards the ends of the scale). Each seed
//! draws fresh anchors and test items, trains every method as a job would (its default
//! held-out scheme, then `conformal::Intervals` from the held-out predictions), and counts the
//! test items inside their interval: overall, in the lowest and in the highest bin of the judge
//! score. Beside the flow's, the band it used before: the 2.5% and 97.5% quantiles of its
//! residuals on the anchors it was fitted on (in-sample). `auto` (5 folds, every candidate)
//! is a row of its own: its band is cut from the winner's held-out residuals, the ones the
//! choice looked at, so this row measures what that choice costs the band.

use std::sync::atomic::AtomicBool;

use judgecal_stats::rng::Rng;
use judgecal_stats::rng::SeedableRng;

use super::synthetic::{JudgeModel, stand_in_reference};
use judgecal_stats::conformal::Intervals;
use judgecal_stats::cv::{Scheme, Split};
use judgecal_stats::flow::ReviewAudit;
use judgecal_stats::select::{AutoOptions, Rule, auto};
use judgecal_stats::stats::quantile;
use judgecal_stats::{Candidates, Cell, Corrected, Method, Model, Report, Run};

#[derive(Debug, Clone)]
pub struct IntervalOptions {
    pub seeds: usize,
    pub seed: u64,
    pub anchors: usize,
    pub test: usize,
    pub methods: Vec<Method>,
    /// A row for `auto` after the methods' rows.
    pub auto: bool,
    pub candidates: Candidates,
    pub judge: JudgeModel,
}

/// Test items inside, of how many.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Count {
    pub inside: usize,
    pub of: usize,
}

impl Count {
    fn add(&mut self, hit: bool) {
        self.inside += usize::from(hit);
        self.of += 1;
    }

    pub fn rate(&self) -> f64 {
        self.inside as f64 / self.of.max(1) as f64
    }
}

/// One method's intervals over the seeds.
#[derive(Debug, Clone, Default)]
pub struct IntervalRow {
    /// `None` for `auto`.
    pub method: Option<Method>,
    pub seeds: usize,
    /// On the test items: all, the lowest bin, the highest bin.
    pub all: Count,
    pub lowest: Count,
    pub highest: Count,
    /// Mean width of the test items' intervals.
    pub width: f64,
    /// The held-out coverage the versions recorded (mean over seeds).
    pub recorded: f64,
    /// The in-sample band on the same test items (flow).
    pub in_sample: Option<[Count; 3]>,
    /// The flow's review audit (mean over seeds of each share).
    pub audit: Option<ReviewAudit>,
    /// Versions (seeds) whose miss rate on the test items exceeds 5%: the training-conditional
    /// miss rate, which a band's marginal 95% does not bound.
    pub over: usize,
    /// Versions whose miss rate exceeds their own miss-rate bound (`Intervals::miss_bound`).
    pub over_bound: usize,
    /// Sum over seeds of that bound.
    pub bound: f64,
}

fn draw(judge: &JudgeModel, n: usize, rng: &mut Rng) -> Vec<(f64, f64)> {
    stand_in_reference(n, (1.0, 5.0), rng)
        .into_iter()
        .map(|y| (judge.draw(y, (1.0, 5.0), rng), y))
        .collect()
}

/// Runs the study: one row per method.
pub fn run(opts: &IntervalOptions, progress: &dyn Fn(&str)) -> Result<Vec<IntervalRow>, String> {
    let mut rows: Vec<IntervalRow> = opts
        .methods
        .iter()
        .map(|&m| IntervalRow {
            method: Some(m),
            ..IntervalRow::default()
        })
        .chain(opts.auto.then(IntervalRow::default))
        .collect();
    let never = AtomicBool::new(false);
    let run = Run::new(&never, &|_| {});
    for s in 0..opts.seeds {
        let seed = opts.seed + s as u64;
        let mut rng = Rng::seed_from_u64(seed);
        let cells = [Cell {
            pairs: draw(&opts.judge, opts.anchors, &mut rng),
            scale: (1.0, 5.0),
        }];
        let test = draw(&opts.judge, opts.test, &mut rng);
        let js: Vec<f64> = test.iter().map(|t| t.0).collect();
        for row in rows.iter_mut() {
            let name = label(row.method);
            progress(&format!("seed {seed}: {name}"));
            let (model, held_out) = fit(opts, row.method, &cells, seed, &run)?;
            let intervals = Intervals::of(&cells[0].pairs, &held_out, seed)
                .ok_or_else(|| format!("{name}: too few held-out anchors for an interval"))?;
            let mut corrected = model.correct(&js)?;
            intervals.apply(&js, &mut corrected);
            let lowest = &intervals.bins[0];
            let highest = &intervals.bins[intervals.bins.len() - 1];
            let in_lowest = |j: f64| lowest.holds(j);
            let in_highest = |j: f64| highest.holds(j);
            let in_sample = in_sample_band(row.method, &model, &cells[0]);
            let mut counts = row.in_sample.unwrap_or_default();
            let mut version = Count::default();
            for (c, &(j, y)) in corrected.iter().zip(&test) {
                let (lo, hi) = c.predictive.ok_or_else(|| format!("{name}: no interval"))?;
                let hit = (lo..=hi).contains(&y);
                row.all.add(hit);
                version.add(hit);
                row.width += hi - lo;
                if in_lowest(j) {
                    row.lowest.add(hit);
                }
                if in_highest(j) {
                    row.highest.add(hit);
                }
                if let Some((blo, bhi)) = in_sample {
                    let hit = (c.score + blo..=c.score + bhi).contains(&y);
                    counts[0].add(hit);
                    if in_lowest(j) {
                        counts[1].add(hit);
                    }
                    if in_highest(j) {
                        counts[2].add(hit);
                    }
                }
            }
            if in_sample.is_some() {
                row.in_sample = Some(counts);
            }
            row.recorded += intervals.held_out_coverage.unwrap_or(f64::NAN);
            let bound = intervals.miss_bound(judgecal_stats::drift::BOUND_DELTA);
            row.over += usize::from(1.0 - version.rate() > 0.05);
            row.over_bound += usize::from(1.0 - version.rate() > bound);
            row.bound += bound;
            row.seeds += 1;
            add_audit(row, &model);
        }
    }
    rows.iter_mut().for_each(IntervalRow::average);
    Ok(rows)
}

/// The in-sample band, as versions without a noise model had it before (the flow's only).
fn in_sample_band(method: Option<Method>, model: &Model, cell: &Cell) -> Option<(f64, f64)> {
    if method != Some(Method::Flow) {
        return None;
    }
    let fitted: Vec<f64> = cell.pairs.iter().map(|p| p.0).collect();
    let own = model.correct(&fitted).ok()?;
    let r: Vec<f64> = cell
        .pairs
        .iter()
        .zip(&own)
        .map(|(p, c)| p.1 - c.score)
        .collect();
    Some((quantile(&r, 0.025), quantile(&r, 0.975)))
}

/// The flow's review audit added to the row's sum.
fn add_audit(row: &mut IntervalRow, model: &Model) {
    let audit = match model.report() {
        Report::Flow(f) => f.flow.review_audit,
        _ => None,
    };
    if let Some(a) = audit.filter(|_| row.method == Some(Method::Flow)) {
        let mut sum = row.audit.unwrap_or(ReviewAudit {
            held_out: 0,
            routed: 0.0,
            large_errors_routed: 0.0,
            large_errors_routed_by_width: Some(0.0),
        });
        sum.held_out += a.held_out;
        sum.routed += a.routed;
        sum.large_errors_routed += a.large_errors_routed;
        sum.large_errors_routed_by_width = sum
            .large_errors_routed_by_width
            .zip(a.large_errors_routed_by_width)
            .map(|(x, y)| x + y);
        row.audit = Some(sum);
    }
}

impl IntervalRow {
    /// The sums over seeds as means: width per item, the recorded coverage, bound and audit
    /// per seed.
    fn average(&mut self) {
        self.width /= self.all.of.max(1) as f64;
        let k = self.seeds.max(1) as f64;
        self.recorded /= k;
        self.bound /= k;
        if let Some(a) = self.audit.as_mut() {
            a.routed /= k;
            a.large_errors_routed /= k;
            a.large_errors_routed_by_width = a.large_errors_routed_by_width.map(|x| x / k);
        }
    }
}

/// A row's name: its method's, or `auto`.
fn label(method: Option<Method>) -> String {
    method.map_or("auto".to_owned(), |m| m.to_string())
}

/// One version as a job would train it: `method` with its default held-out scheme, or `auto`
/// (5 folds); its model and the held-out predictions its band is cut from.
fn fit(
    opts: &IntervalOptions,
    method: Option<Method>,
    cells: &[Cell],
    seed: u64,
    run: &Run,
) -> Result<(Model, Vec<Option<Corrected>>), String> {
    match method {
        Some(m) => {
            let split = Split {
                scheme: m.default_scheme(),
                seed,
            };
            let (mut models, mut held_out) = opts.candidates.get(m).train(cells, split, run)?;
            Ok((models.remove(0), held_out.remove(0)))
        }
        None => {
            let options = AutoOptions {
                split: Split {
                    scheme: Scheme::Folds(5),
                    seed,
                },
                rule: Rule::default(),
                flow_min_anchors: 1000,
                candidates: opts.candidates.clone(),
            };
            let chosen = auto(cells, &options, run)?.remove(0);
            Ok((chosen.model, chosen.held_out))
        }
    }
}

/// The rows as a Markdown table, then the flow's review audit.
pub fn table(rows: &[IntervalRow], opts: &IntervalOptions) -> String {
    let mut out = format!(
        "95% predictive intervals, {} anchors, {} test items per seed, {} seeds\n\n\
         | method | interval | covers (all) | lowest bin | highest bin | mean width | held-out coverage recorded | versions missing > 5% | mean miss bound | versions over it |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        opts.anchors,
        opts.test,
        rows.first().map_or(0, |r| r.seeds)
    );
    let pct = |c: &Count| format!("{:.1}%", 100.0 * c.rate());
    for r in rows {
        let m = label(r.method);
        let kind = match r.method {
            Some(Method::Bayes) => "posterior predictive, scaled per bin",
            Some(_) => "held-out, per bin",
            None => "the winner's held-out, per bin",
        };
        out += &format!(
            "| {m} | {kind} | {} | {} | {} | {:.3} | {:.1}% | {} of {} | {:.3} | {} |\n",
            pct(&r.all),
            pct(&r.lowest),
            pct(&r.highest),
            r.width,
            100.0 * r.recorded,
            r.over,
            r.seeds,
            r.bound,
            r.over_bound,
        );
        if let Some([all, lo, hi]) = &r.in_sample {
            out += &format!(
                "| {m} | in-sample band (before) | {} | {} | {} | | | | | |\n",
                pct(all),
                pct(lo),
                pct(hi)
            );
        }
    }
    for r in rows {
        if let Some(a) = &r.audit {
            out += &format!(
                "\nflow review routing on held-out anchors (mean over seeds): {:.1}% routed; of the largest 10% absolute errors, {:.1}% routed by sigma, {} routed by the widest interval\n",
                100.0 * a.routed,
                100.0 * a.large_errors_routed,
                a.large_errors_routed_by_width
                    .map_or("—".to_owned(), |x| format!("{:.1}%", 100.0 * x))
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_out_intervals_cover_new_items_for_every_method_and_at_the_ends() {
        // 3 seeds of 1,000 anchors and 4,000 test items (12,000 checks: a binomial sd of
        // 0.2 points at 95%; about 0.5 in each outer bin). The flow trains briefly; its
        // in-sample band is reported beside, not asserted. `auto`'s band, cut from the
        // residuals its choice looked at, is held to the same range.
        let candidates = Candidates {
            flow: judgecal_stats::flow::FlowOptions {
                epochs: Some(60),
                ..judgecal_stats::flow::FlowOptions::paper()
            },
            ..Candidates::default()
        };
        let opts = IntervalOptions {
            seeds: 3,
            seed: 11,
            anchors: 1000,
            test: 4000,
            methods: vec![
                Method::Identity,
                Method::QuantileMap,
                Method::Isotonic,
                Method::Bayes,
                Method::Flow,
            ],
            auto: true,
            candidates,
            judge: JudgeModel::default(),
        };
        let rows = run(&opts, &|_| {}).unwrap();
        eprintln!("{}", table(&rows, &opts));
        for r in &rows {
            let m = label(r.method);
            // The quantile map's corrected scores lie on the reference's quarter-point levels,
            // so its residuals do too, and an interval between two of them holds the whole
            // mass of both ends: conformal's guarantee (at least 95%) with room above. `auto`
            // may serve it.
            let most = if matches!(r.method, Some(Method::QuantileMap) | None) {
                0.985
            } else {
                0.97
            };
            for (what, c) in [
                ("all", &r.all),
                ("lowest", &r.lowest),
                ("highest", &r.highest),
            ] {
                assert!(
                    (0.93..=most).contains(&c.rate()),
                    "{m} {what}: {:.4}",
                    c.rate()
                );
            }
            assert!((0.93..=most).contains(&r.recorded), "{m}: {}", r.recorded);
            // No version misses more than the bound the drift alarm tests it against.
            assert_eq!(r.over_bound, 0, "{m}: bound {}", r.bound);
        }
        let flow = rows
            .iter()
            .find(|r| r.method == Some(Method::Flow))
            .unwrap();
        assert!(flow.in_sample.is_some() && flow.audit.is_some());
    }
}
