//! `judgecal-study gate`: how often a Bayesian fit misses its gate (R̂ ≥ 1.01, bulk ESS < 400 or a
//! divergence) on real anchors, on the sampler's first round and after its extensions
//! (`bayes::fit_extending`). Each judge of an anchors CSV is fitted as a training job fits it
//! (its rubrics pooled, default options), once on every anchor and once with each group
//! (system) left out in turn; every rubric of a fit is one version.

use std::collections::BTreeMap;
use std::path::Path;

use judgecal::domain::anchors::{rows_from_csv, validate};
use judgecal_stats::bayes::{self, FitOptions, SufficientStats};

/// One fit: a judge on every anchor, or with one group left out.
#[derive(Debug, Clone, PartialEq)]
pub struct GateRow {
    pub judge: String,
    /// The group left out (`None`: every anchor).
    pub left_out: Option<String>,
    pub rubrics: usize,
    /// Versions (rubrics) that missed the gate on the first round, and after the extensions.
    pub failed_first: usize,
    pub failed_after: usize,
    pub extensions: u32,
    /// The first round's worst R̂ and least bulk ESS over the rubrics.
    pub rhat_max: f64,
    pub ess_bulk_min: f64,
}

/// Each judge's rubrics: (judge score, reference, group) per anchor.
type Anchors = BTreeMap<String, Vec<Vec<(f64, f64, Option<String>)>>>;

fn read(path: &Path) -> Result<Anchors, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let refused =
        |p: Vec<judgecal::domain::Problem>| format!("{} was refused: {p:?}", path.display());
    let rows = rows_from_csv(&bytes).map_err(refused)?;
    let mut judges = Anchors::new();
    for c in validate(rows, &Default::default(), usize::MAX).map_err(refused)? {
        let cell = c
            .anchors
            .iter()
            .filter_map(|a| {
                let y = a.reference_score?;
                Some((a.judge_score, y, a.group.as_ref().map(|g| g.to_string())))
            })
            .collect();
        judges
            .entry(c.key.judge.to_string())
            .or_default()
            .push(cell);
    }
    Ok(judges)
}

/// Every judge of `path`, fitted on all its anchors and with each group left out.
pub fn run(path: &Path, seed: u64) -> Result<Vec<GateRow>, String> {
    let judges = read(path)?;
    let mut rows = Vec::new();
    for (judge, cells) in &judges {
        let mut groups: Vec<&str> = cells
            .iter()
            .flatten()
            .filter_map(|a| a.2.as_deref())
            .collect();
        groups.sort_unstable();
        groups.dedup();
        for left_out in std::iter::once(None).chain(groups.iter().map(|g| Some(*g))) {
            let stats: Vec<SufficientStats> = cells
                .iter()
                .map(|c| {
                    SufficientStats::from_pairs(
                        c.iter()
                            .filter(|a| left_out.is_none() || a.2.as_deref() != left_out)
                            .map(|a| (a.0, a.1)),
                    )
                })
                .collect();
            let opts = FitOptions {
                seed,
                ..FitOptions::default()
            };
            let first = bayes::fit(&stats, &opts, &|_| {})?;
            let after = bayes::fit_extending(&stats, &opts, &|_| {}, &|_, _| {})?;
            let failed = |f: &bayes::Fit| {
                f.rubric_diagnostics
                    .iter()
                    .filter(|d| d.failure().is_some())
                    .count()
            };
            rows.push(GateRow {
                judge: judge.clone(),
                left_out: left_out.map(str::to_owned),
                rubrics: stats.len(),
                failed_first: failed(&first),
                failed_after: failed(&after),
                extensions: after.diagnostics.extensions,
                rhat_max: first.diagnostics.rhat_max,
                ess_bulk_min: first.diagnostics.ess_bulk_min,
            });
        }
    }
    Ok(rows)
}

/// The rows as a Markdown table, with the totals.
pub fn table(rows: &[GateRow]) -> String {
    let mut out = String::from(
        "| judge | left out | rubrics | failed, first round | failed, after extensions | extensions | first round's max R̂ | min bulk ESS |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {:.4} | {:.0} |\n",
            r.judge,
            r.left_out.as_deref().unwrap_or("(none)"),
            r.rubrics,
            r.failed_first,
            r.failed_after,
            r.extensions,
            r.rhat_max,
            r.ess_bulk_min
        );
    }
    let versions: usize = rows.iter().map(|r| r.rubrics).sum();
    let first: usize = rows.iter().map(|r| r.failed_first).sum();
    let after: usize = rows.iter().map(|r| r.failed_after).sum();
    out += &format!(
        "\n{versions} versions in {} fits: {first} missed the gate on the first round ({:.1}%), {after} after the extensions ({:.1}%).\n",
        rows.len(),
        100.0 * first as f64 / versions.max(1) as f64,
        100.0 * after as f64 / versions.max(1) as f64
    );
    out
}
