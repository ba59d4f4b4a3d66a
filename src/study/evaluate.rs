//! `judgecal evaluate`: every cell of an anchors file (the upload CSV format), every method
//! cross-validated on the same folds, the three questions per (cell, method), and which
//! method `auto` would choose.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use super::Bars;
use crate::calibrate::flow;
use crate::calibrate::metrics::{Evaluation, Scheme};
use crate::calibrate::select::{self, Candidate, Rule, Settings};
use crate::domain::anchors::{rows_from_csv, validate};
use crate::domain::{JudgeName, RubricName, Scale};

#[derive(Debug, Clone)]
pub struct Options {
    pub scheme: Scheme,
    pub seed: u64,
    pub methods: Vec<Candidate>,
    pub rule: Rule,
    pub flow_min_anchors: usize,
    pub settings: Settings,
}

/// Each judge's cells: rubric and (judge, reference) pairs.
pub type Judges = BTreeMap<JudgeName, Vec<(RubricName, Vec<(f64, f64)>)>>;

/// One (cell, method) row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub judge: String,
    pub rubric: String,
    pub anchors: usize,
    pub method: Candidate,
    pub evaluation: Option<Evaluation>,
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
        judges.entry(c.key.judge).or_default().push((
            c.key.rubric,
            c.anchors
                .iter()
                .map(|a| (a.judge_score, a.reference_score))
                .collect(),
        ));
    }
    Ok(judges)
}

/// Cross-validates every method on every cell of `path`.
pub fn run(path: &Path, opts: &Options) -> Result<Vec<Row>, String> {
    opts.scheme.check()?;
    let judges = read_anchors(path)?;
    let bars = Bars::new(judges.len() as u64 * opts.methods.len() as u64);
    let never = AtomicBool::new(false);
    let scale = Scale::DEFAULT;
    let mut rows = Vec::new();
    for (judge, cells) in &judges {
        let data: Vec<Vec<(f64, f64)>> = cells.iter().map(|c| c.1.clone()).collect();
        let ranges: Vec<(f64, f64)> = data
            .iter()
            .map(|d| flow::table_range((scale.min, scale.max), d))
            .collect();
        let assignment = select::assignment(opts.scheme, &data, opts.seed);
        let mut held_out = Vec::new();
        for &m in &opts.methods {
            if m == Candidate::Flow && data.iter().all(|d| d.len() < opts.flow_min_anchors) {
                held_out.push((m, Err("no cell has flow_min_anchors".to_owned())));
                bars.done();
                continue;
            }
            bars.fit(&format!("{judge}: {m}"));
            let p = select::cross_validate(
                m,
                &opts.settings,
                &data,
                &ranges,
                opts.scheme,
                &assignment,
                &never,
                &|p| bars.within(p),
            );
            bars.done();
            held_out.push((m, p));
        }
        for (r, (rubric, pairs)) in cells.iter().enumerate() {
            let mut predictions =
                select::cell_predictions(&held_out, r, pairs.len(), opts.flow_min_anchors);
            // The rule needs the raw judge even when it is not listed.
            let identity: Vec<Option<f64>> = pairs.iter().map(|p| Some(p.0)).collect();
            if !opts.methods.contains(&Candidate::Identity) {
                predictions.push((Candidate::Identity, Ok(identity.as_slice())));
            }
            let (decision, _) = select::decide(
                &opts.rule,
                opts.scheme,
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
        "judge", "rubric", "n", "method", "mean err", "MAE", "Pearson", "KL", "W1"
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
                r.judge, r.rubric, r.anchors, name, e.mean_error, e.mae, e.pearson, e.kl_sym, e.w1
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
