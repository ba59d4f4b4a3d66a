//! `judgecal evaluate`: every cell of an anchors file (the upload CSV format), every method
//! cross-validated on the same folds, the three questions per (cell, method), and which
//! method `auto` would choose.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use crate::domain::anchors::{rows_from_csv, validate};
use crate::domain::{JudgeName, RubricName, Scale};
use crate::progress::Bars;
use judgecal_stats::cv::{self, Folds};
use judgecal_stats::quality::Figures;
use judgecal_stats::select::{self, AutoOptions, Predictions};
use judgecal_stats::{Cell, Method, Run};

#[derive(Debug, Clone)]
pub struct Options {
    /// The methods to report; `auto`'s rule always sees the raw judge too.
    pub methods: Vec<Method>,
    /// What `auto` would run: the split, the rule, the flow's floor and each method's options.
    pub auto: AutoOptions,
}

/// Each judge's cells: rubric and (judge, reference) pairs.
pub type Judges = BTreeMap<JudgeName, Vec<(RubricName, Vec<(f64, f64)>)>>;

/// One (cell, method) row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub judge: String,
    pub rubric: String,
    pub anchors: usize,
    pub method: Method,
    pub evaluation: Option<Figures>,
    pub excluded: Option<String>,
    /// `auto` would serve this method for the cell.
    pub chosen: bool,
}

/// Reads an anchors CSV (judge,rubric,item_id,judge_score,reference_score), refusing it whole
/// with every bad row named, as the upload endpoint does.
pub fn read_anchors(path: &Path) -> Result<Judges, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let refused = |problems: Vec<crate::domain::Problem>| {
        let shown: Vec<String> = problems
            .iter()
            .take(10)
            .map(|p| match p.row {
                Some(r) => format!("row {r}, {}: {}", p.field, p.problem),
                None => format!("{}: {}", p.field, p.problem),
            })
            .collect();
        format!(
            "{} was refused ({} problems):\n  {}",
            path.display(),
            problems.len(),
            shown.join("\n  ")
        )
    };
    let rows = rows_from_csv(&bytes).map_err(refused)?;
    let cells = validate(rows, &Default::default(), usize::MAX).map_err(refused)?;
    let mut judges = Judges::new();
    for c in cells {
        if let Some(v) = &c.judge_version {
            return Err(format!(
                "{}: rows of {} carry judge_version {v:?}; evaluate fits one version of a judge, so give it a file without the judge_version column",
                path.display(),
                c.key
            ));
        }
        let pairs = c
            .anchors
            .iter()
            .zip(&c.rows)
            .map(|(a, row)| {
                a.reference_score
                    .map(|y| (a.judge_score, y))
                    .ok_or_else(|| format!("{}: row {row} has no reference_score", path.display()))
            })
            .collect::<Result<_, String>>()?;
        judges
            .entry(c.key.judge)
            .or_default()
            .push((c.key.rubric, pairs));
    }
    Ok(judges)
}

/// Cell r's held-out predictions by each method (an error where the method cannot serve it),
/// with the raw judge's: the rule needs it even when it is not listed.
fn predictions_of(
    opts: &Options,
    held_out: &[(Method, Result<judgecal_stats::cv::HeldOut, String>)],
    r: usize,
    cell: &Cell,
    pairs: &[(f64, f64)],
) -> Vec<Predictions> {
    let mut predictions: Vec<Predictions> = held_out
        .iter()
        .map(|(m, p)| {
            let p = match (opts.auto.too_few(*m, cell.pairs.len()), p) {
                (Some(why), _) => Err(why),
                (None, Ok(h)) => Ok(cv::scores(&h[r])),
                (None, Err(e)) => Err(e.clone()),
            };
            (*m, p)
        })
        .collect();
    if !opts.methods.contains(&Method::Identity) {
        predictions.push((
            Method::Identity,
            Ok(pairs.iter().map(|p| Some(p.0)).collect()),
        ));
    }
    predictions
}

/// Cross-validates every method on every cell of `path`, on the folds `auto` would use.
pub fn run(path: &Path, opts: &Options) -> Result<Vec<Row>, String> {
    opts.auto.split.scheme.check()?;
    let judges = read_anchors(path)?;
    let bars = Bars::new(judges.len() as u64 * opts.methods.len() as u64);
    let never = AtomicBool::new(false);
    let scale = Scale::DEFAULT;
    let mut rows = Vec::new();
    for (judge, named) in &judges {
        let cells: Vec<Cell> = named
            .iter()
            .map(|(_, pairs)| Cell {
                pairs: pairs.clone(),
                scale: (scale.min, scale.max),
            })
            .collect();
        let sizes: Vec<usize> = cells.iter().map(|c| c.pairs.len()).collect();
        let folds = Folds::new(opts.auto.split, &sizes);
        let mut held_out = Vec::new();
        for &m in &opts.methods {
            let floor = opts.auto.floor(m);
            if sizes.iter().all(|&n| n < floor) {
                held_out.push((m, Err(format!("no cell has the {floor} anchors {m} needs"))));
                bars.done();
                continue;
            }
            bars.fit(&format!("{judge}: {m}"));
            let report = |p: f64| bars.within(p);
            let p = opts.auto.candidates.get(m).cross_validate(
                &cells,
                &folds,
                opts.auto.split.seed,
                &Run::new(&never, &report),
            );
            bars.done();
            held_out.push((m, p));
        }
        for (r, ((rubric, pairs), cell)) in named.iter().zip(&cells).enumerate() {
            let predictions = predictions_of(opts, &held_out, r, cell, pairs);
            let (decision, _) = select::decide(
                &opts.auto.rule,
                opts.auto.split.scheme,
                &predictions,
                pairs,
                scale.min,
                scale.max,
            );
            for c in decision.candidates {
                if !opts.methods.contains(&c.method) {
                    continue;
                }
                rows.push(Row {
                    judge: judge.to_string(),
                    rubric: rubric.to_string(),
                    anchors: pairs.len(),
                    method: c.method,
                    evaluation: c.evaluation,
                    excluded: c.excluded,
                    chosen: c.method == decision.chosen,
                });
            }
        }
    }
    bars.finish();
    Ok(rows)
}

/// The rows as a table, the auto winner of each cell starred, and a count of wins.
pub fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<14} {:<11} {:>5}  {:<13} {:>9} {:>7} {:>8} {:>7} {:>7}\n",
        "judge", "rubric", "n", "method", "mean err", "MAE", "Pearson", "KL mean", "W1"
    );
    let mut wins: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        let name = format!("{}{}", r.method, if r.chosen { " *" } else { "" });
        if r.chosen {
            *wins.entry(r.method.as_str()).or_default() += 1;
        }
        out += &match (&r.evaluation, &r.excluded) {
            (Some(e), _) => format!(
                "{:<14} {:<11} {:>5}  {:<13} {:>+9.3} {:>7.3} {:>8.3} {:>7.3} {:>7.3}\n",
                r.judge, r.rubric, r.anchors, name, e.mean_error, e.mae, e.pearson, e.kl_mean, e.w1
            ),
            (None, why) => format!(
                "{:<14} {:<11} {:>5}  {:<13} ({})\n",
                r.judge,
                r.rubric,
                r.anchors,
                name,
                why.as_deref().unwrap_or("no figures")
            ),
        };
    }
    out += "\n* = the method `auto` would serve for the cell\nwins:";
    for (m, n) in wins {
        out += &format!(" {m} {n}");
    }
    out.push('\n');
    out
}
