//! `judgecal-study experiment`: the paper's study end to end. A synthetic strict-and-compressing
//! judge over reference scores (a CSV column, or the built-in stand-in), the nested split
//! (test, then a pool whose first n anchors are the budget-n training set), every method
//! fitted at every budget and judged on the same test items by the three questions.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use judgecal_stats::rng::Rng;
use judgecal_stats::rng::SeedableRng;
use judgecal_stats::rng::SliceRandom;
use serde::Serialize;

pub use super::design::{Run, Source, Split, StudyOptions};
use super::figures;
use super::sources::{read_column, read_pairs};
use super::synthetic::stand_in_reference;
use judgecal::progress::Bars;
use judgecal_stats::quality::evaluate;
use judgecal_stats::{Cell, Method, Run as FitRun};

/// Mean and sd over seeds of one (method, budget).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub method: Method,
    pub anchors: Option<usize>,
    pub seeds: usize,
    pub mean: Figures,
    pub sd: Figures,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Figures {
    pub mean_error: f64,
    pub mae: f64,
    pub pearson: f64,
    /// KL(corrected ‖ reference), the paper's column.
    pub kl_corrected_reference: f64,
    pub kl_mean: f64,
    pub w1: f64,
    pub fit_seconds: f64,
}

impl Figures {
    fn of(r: &Run) -> Self {
        let e = &r.evaluation;
        Self {
            mean_error: e.mean_error,
            mae: e.mae,
            pearson: e.pearson,
            kl_corrected_reference: e.kl_corrected_reference,
            kl_mean: e.kl_mean,
            w1: e.w1,
            fit_seconds: r.fit_seconds,
        }
    }

    fn as_array(&self) -> [f64; 7] {
        [
            self.mean_error,
            self.mae,
            self.pearson,
            self.kl_corrected_reference,
            self.kl_mean,
            self.w1,
            self.fit_seconds,
        ]
    }

    fn from_array(a: [f64; 7]) -> Self {
        Self {
            mean_error: a[0],
            mae: a[1],
            pearson: a[2],
            kl_corrected_reference: a[3],
            kl_mean: a[4],
            w1: a[5],
            fit_seconds: a[6],
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub options: StudyOptions,
    /// Table 1: the first seed.
    pub table1: Vec<Run>,
    /// Table 2: mean and sd over every seed (present with --seeds > 1).
    pub table2: Vec<Summary>,
}

/// The split of one seed: references drawn (or shuffled from the column), the judge
/// synthesised, the first `test` items for testing and the next `pool` as the pool.
pub fn synthesise(opts: &StudyOptions, column: Option<&[f64]>, seed: u64) -> Result<Split, String> {
    let mut rng = Rng::seed_from_u64(seed);
    let n = opts.test + opts.pool;
    let y: Vec<f64> = match column {
        Some(values) => {
            if values.len() < n {
                return Err(format!(
                    "the reference column has {} values; --test {} plus --pool {} needs {n}",
                    values.len(),
                    opts.test,
                    opts.pool
                ));
            }
            let mut v = values.to_vec();
            v.shuffle(&mut rng);
            v.truncate(n);
            v
        }
        None => stand_in_reference(n, opts.scale, &mut rng),
    };
    let pairs: Vec<(f64, f64)> = y
        .iter()
        .map(|&y| (opts.judge.draw(y, opts.scale, &mut rng), y))
        .collect();
    Ok(Split {
        test: pairs[..opts.test].to_vec(),
        pool: pairs[opts.test..].to_vec(),
    })
}

/// Fits every method at every budget on one split.
pub fn run_split(
    opts: &StudyOptions,
    split: &Split,
    seed: u64,
    budgets: &[usize],
    bars: &Bars,
) -> Result<Vec<Run>, String> {
    let (tj, ty): (Vec<f64>, Vec<f64>) = split.test.iter().copied().unzip();
    let (lo, hi) = opts.scale;
    let mut runs = vec![Run {
        seed,
        method: Method::Identity,
        anchors: None,
        evaluation: evaluate(&tj, &ty, lo, hi),
        fit_seconds: 0.0,
        predictions: tj.clone(),
    }];
    let mut settings = opts.settings.clone();
    settings.flow.preset = opts.flow_preset;
    settings.flow.epochs = opts.flow_epochs.or(settings.flow.epochs);
    let never = AtomicBool::new(false);
    for &n in budgets {
        let train = vec![Cell {
            pairs: split.pool[..n.min(split.pool.len())].to_vec(),
            scale: opts.scale,
        }];
        for &m in opts.methods.iter().filter(|m| **m != Method::Identity) {
            bars.fit(&format!("seed {seed}: {m} on {n} anchors"));
            let started = Instant::now();
            let report = |p: f64| bars.within(p);
            let predictions: Vec<f64> = settings
                .get(m)
                .fit_predict(&train, seed, 0, &tj, &FitRun::new(&never, &report))?
                .into_iter()
                .map(|c| c.score)
                .collect();
            let fit_seconds = started.elapsed().as_secs_f64();
            runs.push(Run {
                seed,
                method: m,
                anchors: Some(n),
                evaluation: evaluate(&predictions, &ty, lo, hi),
                fit_seconds,
                predictions,
            });
            bars.done();
        }
    }
    Ok(runs)
}

fn summarise(runs: &[Run]) -> Vec<Summary> {
    let mut keys: Vec<(Method, Option<usize>)> =
        runs.iter().map(|r| (r.method, r.anchors)).collect();
    keys.sort_by_key(|k| (k.1, k.0));
    keys.dedup();
    keys.into_iter()
        .map(|(method, anchors)| {
            let xs: Vec<[f64; 7]> = runs
                .iter()
                .filter(|r| r.method == method && r.anchors == anchors)
                .map(|r| Figures::of(r).as_array())
                .collect();
            let n = xs.len() as f64;
            let mut mean = [0.0; 7];
            let mut sd = [0.0; 7];
            for k in 0..7 {
                mean[k] = judgecal_stats::stats::mean_of(xs.iter().map(|x| x[k]));
                sd[k] = (xs.iter().map(|x| (x[k] - mean[k]).powi(2)).sum::<f64>()
                    / (n - 1.0).max(1.0))
                .sqrt();
            }
            Summary {
                method,
                anchors,
                seeds: xs.len(),
                mean: Figures::from_array(mean),
                sd: Figures::from_array(sd),
            }
        })
        .collect()
}

/// Table 1 as text.
pub fn table1(runs: &[Run]) -> String {
    let raw_mae = runs
        .iter()
        .find(|r| r.method == Method::Identity)
        .map_or(f64::NAN, |r| r.evaluation.mae);
    let mut out = format!(
        "{:<16} {:>7} {:>9} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8}\n",
        "method",
        "anchors",
        "mean err",
        "MAE",
        "ΔMAE raw",
        "Pearson",
        "KL(ŷ‖y)",
        "KL(y‖ŷ)",
        "KL mean",
        "W1",
        "fit s"
    );
    for r in runs {
        let e = &r.evaluation;
        let delta = if r.method == Method::Identity {
            "—".to_owned()
        } else {
            format!("{:+.1}%", 100.0 * (e.mae - raw_mae) / raw_mae)
        };
        out += &format!(
            "{:<16} {:>7} {:>+9.3} {:>7.3} {:>9} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>7.3} {:>8.2}\n",
            r.method.label(),
            r.anchors.map_or("—".to_owned(), |n| n.to_string()),
            e.mean_error,
            e.mae,
            delta,
            e.pearson,
            e.kl_corrected_reference,
            e.kl_reference_corrected,
            e.kl_mean,
            e.w1,
            r.fit_seconds
        );
    }
    out
}

/// Table 2 as text: mean ± sd over seeds.
pub fn table2(summaries: &[Summary]) -> String {
    let mut out = format!(
        "{:<16} {:>7} {:>5} {:>15} {:>15} {:>15} {:>15} {:>15} {:>15} {:>13}\n",
        "method",
        "anchors",
        "seeds",
        "mean err",
        "MAE",
        "Pearson",
        "KL(ŷ‖y)",
        "KL mean",
        "W1",
        "fit s"
    );
    for s in summaries {
        let pm = |m: f64, sd: f64| format!("{m:.3} ± {sd:.3}");
        out += &format!(
            "{:<16} {:>7} {:>5} {:>15} {:>15} {:>15} {:>15} {:>15} {:>15} {:>13}\n",
            s.method.label(),
            s.anchors.map_or("—".to_owned(), |n| n.to_string()),
            s.seeds,
            format!("{:+.3} ± {:.3}", s.mean.mean_error, s.sd.mean_error),
            pm(s.mean.mae, s.sd.mae),
            pm(s.mean.pearson, s.sd.pearson),
            pm(s.mean.kl_corrected_reference, s.sd.kl_corrected_reference),
            pm(s.mean.kl_mean, s.sd.kl_mean),
            pm(s.mean.w1, s.sd.w1),
            format!("{:.2} ± {:.2}", s.mean.fit_seconds, s.sd.fit_seconds),
        );
    }
    out
}

/// The study's pool, as given (a column of references, or pairs), its budgets checked
/// against the pool's size.
#[allow(clippy::type_complexity)]
fn sources(opts: &StudyOptions) -> Result<(Option<Vec<f64>>, Option<Split>), String> {
    opts.judge.check()?;
    if opts.budgets.is_empty() || opts.methods.is_empty() {
        return Err("give at least one budget and one method".into());
    }
    let column = match &opts.source {
        Source::Column { file, column } => Some(read_column(file, column, opts.scale)?),
        _ => None,
    };
    let given = match &opts.source {
        Source::Pairs(path) => Some(read_pairs(path)?),
        _ => None,
    };
    let pool_len = given.as_ref().map_or(opts.pool, |s| s.pool.len());
    for &b in opts.budgets.iter().chain(&opts.sweep) {
        if b < 2 || b > pool_len {
            return Err(format!(
                "budget {b} must lie between 2 and the pool's {pool_len} anchors"
            ));
        }
    }
    Ok((column, given))
}

/// Runs the study. Returns the report; `figures`, when given, is a folder for the four
/// figures.
pub fn run(opts: StudyOptions, figures_dir: Option<&Path>) -> Result<Report, String> {
    let (column, given) = sources(&opts)?;
    // The first seed also fits the sweep, for the budget figure.
    let mut first_budgets = opts.budgets.clone();
    if figures_dir.is_some() {
        first_budgets.extend(&opts.sweep);
    }
    first_budgets.sort_unstable();
    first_budgets.dedup();
    let mut budgets = opts.budgets.clone();
    budgets.sort_unstable();
    budgets.dedup();
    let seeds = if given.is_some() {
        1
    } else {
        opts.seeds.max(1)
    };
    let fitted_methods = opts
        .methods
        .iter()
        .filter(|m| **m != Method::Identity)
        .count();
    let fits = fitted_methods * (first_budgets.len() + (seeds - 1) * budgets.len());
    let bars = Bars::new(fits as u64);
    let mut all = Vec::new();
    let mut first: Option<(Split, Vec<Run>)> = None;
    for s in 0..seeds {
        let seed = opts.seed + s as u64;
        let split = match &given {
            Some(g) => Split {
                test: g.test.clone(),
                pool: g.pool.clone(),
            },
            None => synthesise(&opts, column.as_deref(), seed)?,
        };
        let runs = run_split(
            &opts,
            &split,
            seed,
            if s == 0 { &first_budgets } else { &budgets },
            &bars,
        )?;
        if s == 0 {
            first = Some((split, runs.clone()));
        }
        all.extend(
            runs.into_iter()
                .filter(|r| r.anchors.is_none_or(|n| budgets.contains(&n))),
        );
    }
    bars.finish();
    let Some((split, first_runs)) = first else {
        return Err("no seed ran".into());
    };
    if let Some(dir) = figures_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        figures::write_all(dir, &opts, &split, &first_runs)?;
    }
    let table1 = first_runs
        .into_iter()
        .filter(|r| r.anchors.is_none_or(|n| budgets.contains(&n)))
        .collect();
    let table2 = if seeds > 1 {
        summarise(&all)
    } else {
        Vec::new()
    };
    Ok(Report {
        options: opts,
        table1,
        table2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::JudgeModel;
    use judgecal_stats::Candidates;
    use judgecal_stats::flow::FlowPreset;

    fn quick(methods: Vec<Method>) -> StudyOptions {
        StudyOptions {
            source: Source::StandIn,
            judge: JudgeModel::default(),
            scale: (1.0, 5.0),
            seed: 3,
            seeds: 1,
            test: 200,
            pool: 600,
            budgets: vec![100, 600],
            sweep: vec![],
            methods,
            settings: Candidates::default(),
            flow_preset: FlowPreset::Paper,
            flow_epochs: Some(40),
        }
    }

    #[test]
    fn correcting_the_synthetic_judge_fixes_the_mean_and_the_line_saturates() {
        let report = run(
            quick(vec![Method::Identity, Method::Bayes, Method::QuantileMap]),
            None,
        )
        .unwrap();
        let get = |m: Method, n: Option<usize>| {
            report
                .table1
                .iter()
                .find(|r| r.method == m && r.anchors == n)
                .unwrap()
                .evaluation
        };
        let raw = get(Method::Identity, None);
        // The judge under-rates by ~0.7; every corrector brings the mean within 0.15.
        assert!(raw.mean_error < -0.5, "{raw:?}");
        for n in [100, 600] {
            let b = get(Method::Bayes, Some(n));
            assert!(b.mean_error.abs() < 0.15, "{b:?}");
            assert!(b.mae < 0.7 * raw.mae, "{b:?} vs {raw:?}");
            // A line cannot change the correlation.
            assert!((b.pearson - raw.pearson).abs() < 1e-9);
        }
        // The line saturates: 6x the anchors changes its MAE by little.
        let gain = get(Method::Bayes, Some(100)).mae - get(Method::Bayes, Some(600)).mae;
        assert!(gain.abs() < 0.05, "{gain}");
        let text = table1(&report.table1);
        assert!(
            text.contains("Bayesian linear") && text.contains("ΔMAE"),
            "{text}"
        );
    }

    #[test]
    fn a_given_split_is_used_as_given_and_bad_rows_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.csv");
        let mut text = "split,order,judge,reference\n".to_owned();
        for i in 0..60 {
            let j = 1.0 + (i % 40) as f64 / 10.0;
            let split = if i < 20 { "test" } else { "train" };
            text += &format!("{split},{},{j},{}\n", 100 - i, 0.5 + 0.9 * j);
        }
        std::fs::write(&path, &text).unwrap();
        let split = read_pairs(&path).unwrap();
        assert_eq!((split.test.len(), split.pool.len()), (20, 40));
        // Train rows come in `order`: the lowest order first (the file's last row).
        assert_eq!(split.pool[0], (1.0 + 19.0 / 10.0, 0.5 + 0.9 * 2.9));
        let mut opts = quick(vec![Method::Identity, Method::QuantileMap]);
        opts.source = Source::Pairs(path.clone());
        opts.budgets = vec![40];
        let report = run(opts, None).unwrap();
        assert_eq!(report.table1.len(), 2);
        assert!(report.table1[1].evaluation.mae < 0.1);

        std::fs::write(&path, "split,order,judge,reference\ntest,1,2.0,x\n").unwrap();
        let e = read_pairs(&path).err().unwrap();
        assert!(e.contains("row 2, column reference"), "{e}");
        std::fs::write(&path, "split,judge\n").unwrap();
        assert!(
            read_pairs(&path)
                .err()
                .unwrap()
                .contains("no column \"order\"")
        );
    }
}
