//! The paper's four figures from one seed of the experiment, and the per-cell report the
//! service draws.

use std::path::Path;

use plotters::style::RGBColor;

use super::design::{Run, Split, StudyOptions};
use judgecal::plots::{Chart, Figure, Mark, Series, colour, write};
use judgecal_stats::Method;
use judgecal_stats::quality::{kde_on_grid, level_spacing};
use judgecal_stats::stats::mean;

pub fn method_colour(m: Method) -> RGBColor {
    Method::ALL
        .iter()
        .position(|&x| x == m)
        .and_then(|i| colour::METHODS.get(i).copied())
        .unwrap_or(colour::OTHER)
}

/// A KDE as a density curve on `points` points over [lo, hi], its bandwidth no narrower than
/// the sample's level spacing (as in the KL).
pub fn density(xs: &[f64], lo: f64, hi: f64, points: usize) -> Vec<(f64, f64)> {
    let step = (hi - lo) / (points - 1) as f64;
    let grid: Vec<f64> = (0..points).map(|i| lo + step * i as f64).collect();
    let mass = kde_on_grid(xs, &grid, level_spacing(xs));
    grid.into_iter()
        .zip(mass)
        .map(|(g, m)| (g, m / step))
        .collect()
}

fn diagonal(lo: f64, hi: f64) -> Series {
    Series::line("y = x", colour::REFERENCE, true, vec![(lo, lo), (hi, hi)])
}

/// Figure 1: the bias mechanism: judge against reference with the mean curve, and the two
/// marginals.
pub fn bias(opts: &StudyOptions, split: &Split) -> Figure {
    let (lo, hi) = opts.scale;
    let all: Vec<(f64, f64)> = split.test.iter().chain(&split.pool).copied().collect();
    let scatter: Vec<(f64, f64)> = all.iter().map(|&(j, y)| (y, j)).collect();
    let curve: Vec<(f64, f64)> = (0..=200)
        .map(|i| {
            let y = lo + (hi - lo) * i as f64 / 200.0;
            (y, opts.judge.mean(y))
        })
        .collect();
    let (j, y): (Vec<f64>, Vec<f64>) = all.iter().copied().unzip();
    let mut left = Chart::fitted(
        "Judge against reference",
        "reference score y",
        "judge score j",
        vec![
            Series::points("items", colour::RAW, Mark::Dot, scatter),
            diagonal(lo, hi),
            Series::line("E[j | y]", colour::FLOW, false, curve),
        ],
    );
    left.x = (lo - 0.2, hi + 0.2);
    left.y = (lo - 0.5, hi + 0.5);
    let right = Chart::fitted(
        &format!(
            "Marginals: mean j {:.2}, mean y {:.2} ({:+.2})",
            mean(&j),
            mean(&y),
            mean(&y) - mean(&j)
        ),
        "score",
        "density",
        vec![
            Series::line(
                "judge j",
                colour::RAW,
                false,
                density(&j, lo - 0.5, hi + 0.5, 300),
            ),
            Series::line(
                "reference y",
                colour::REFERENCE,
                false,
                density(&y, lo - 0.5, hi + 0.5, 300),
            ),
        ],
    );
    Figure {
        title: "Figure 1. The strict-and-compressing judge".into(),
        columns: 2,
        panels: vec![left, right],
    }
}

fn fitted_runs(runs: &[Run]) -> impl Iterator<Item = &Run> {
    runs.iter().filter(|r| r.method != Method::Identity)
}

/// Figure 2: corrected against reference per (method, budget), with the raw judge in grey.
pub fn calibration(opts: &StudyOptions, split: &Split, runs: &[Run]) -> Figure {
    let (lo, hi) = opts.scale;
    let raw: Vec<(f64, f64)> = split.test.iter().map(|&(j, y)| (y, j)).collect();
    let budgets: Vec<usize> = {
        let mut b = opts.budgets.clone();
        b.sort_unstable();
        b.dedup();
        b
    };
    let panels: Vec<Chart> = fitted_runs(runs)
        .filter(|r| r.anchors.is_some_and(|n| budgets.contains(&n)))
        .map(|r| {
            let corrected: Vec<(f64, f64)> = split
                .test
                .iter()
                .zip(&r.predictions)
                .map(|(&(_, y), &p)| (y, p))
                .collect();
            let mut p = Chart::fitted(
                &format!(
                    "{} n={}: MAE {:.3}",
                    r.method,
                    r.anchors.unwrap_or(0),
                    r.evaluation.mae
                ),
                "reference score y",
                "score",
                vec![
                    Series::points("raw judge", colour::RAW, Mark::Cross, raw.clone()),
                    Series::points("corrected", method_colour(r.method), Mark::Dot, corrected),
                    diagonal(lo, hi),
                ],
            );
            p.x = (lo - 0.2, hi + 0.2);
            p.y = (lo - 0.7, hi + 0.7);
            p
        })
        .collect();
    Figure {
        title: "Figure 2. Calibration on the held-out test items".into(),
        columns: budgets.len().max(1),
        panels: transpose(panels, budgets.len()),
    }
}

/// Panels come method-major; the figure shows one budget per column.
fn transpose(panels: Vec<Chart>, columns: usize) -> Vec<Chart> {
    if columns <= 1 {
        return panels;
    }
    let methods = panels.len() / columns;
    let mut cells: Vec<Option<Chart>> = panels.into_iter().map(Some).collect();
    let mut out = Vec::new();
    for m in 0..methods {
        for b in 0..columns {
            // Runs are budget-major: budget b, method m sits at b·methods + m.
            if let Some(p) = cells.get_mut(b * methods + m).and_then(Option::take) {
                out.push(p);
            }
        }
    }
    out
}

/// Figure 3: KDEs of the reference and corrected scores, one panel per budget.
pub fn shapes(opts: &StudyOptions, split: &Split, runs: &[Run]) -> Figure {
    let (lo, hi) = opts.scale;
    let y: Vec<f64> = split.test.iter().map(|p| p.1).collect();
    let j: Vec<f64> = split.test.iter().map(|p| p.0).collect();
    let mut budgets = opts.budgets.clone();
    budgets.sort_unstable();
    budgets.dedup();
    let panels = budgets
        .iter()
        .map(|&n| {
            let mut series = vec![
                Series::line(
                    "reference",
                    colour::REFERENCE,
                    false,
                    density(&y, lo, hi, 300),
                ),
                Series::line("raw judge", colour::RAW, true, density(&j, lo, hi, 300)),
            ];
            for r in fitted_runs(runs).filter(|r| r.anchors == Some(n)) {
                series.push(Series::line(
                    &format!(
                        "{} (KL(ŷ‖y) {:.3})",
                        r.method, r.evaluation.kl_corrected_reference
                    ),
                    method_colour(r.method),
                    false,
                    density(&r.predictions, lo, hi, 300),
                ));
            }
            Chart::fitted(&format!("n = {n} anchors"), "score", "density", series)
        })
        .collect();
    Figure {
        title: "Figure 3. Shape: reference and corrected score densities (test items)".into(),
        columns: budgets.len().max(1),
        panels,
    }
}

/// Figure 4: MAE and KL against the anchor budget, the raw judge dashed.
pub fn budget(runs: &[Run]) -> Figure {
    let raw = runs.iter().find(|r| r.method == Method::Identity);
    let mut methods: Vec<Method> = fitted_runs(runs).map(|r| r.method).collect();
    methods.sort();
    methods.dedup();
    let budgets: Vec<f64> = fitted_runs(runs)
        .filter_map(|r| r.anchors.map(|n| n as f64))
        .collect();
    let (b_lo, b_hi) = budgets
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &b| {
            (l.min(b), h.max(b))
        });
    let panel = |name: &str, get: fn(&Run) -> f64| {
        let mut series: Vec<Series> = methods
            .iter()
            .flat_map(|&m| {
                let mut pts: Vec<(f64, f64)> = fitted_runs(runs)
                    .filter(|r| r.method == m)
                    .filter_map(|r| r.anchors.map(|n| (n as f64, get(r))))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                [
                    Series::line(m.as_str(), method_colour(m), false, pts.clone()),
                    Series::points("", method_colour(m), Mark::Dot, pts),
                ]
            })
            .collect();
        if let Some(r) = raw {
            series.push(Series::line(
                "raw judge",
                colour::RAW,
                true,
                vec![(b_lo, get(r)), (b_hi, get(r))],
            ));
        }
        let mut p = Chart::fitted(name, "anchors", name, series);
        p.y.0 = p.y.0.min(0.0);
        p
    };
    Figure {
        title: "Figure 4. Held-out error against the anchor budget".into(),
        columns: 2,
        panels: vec![
            panel("MAE", |r| r.evaluation.mae),
            panel("KL(ŷ‖y)", |r| r.evaluation.kl_corrected_reference),
        ],
    }
}

/// Writes the four figures as SVG and PNG into `dir`.
pub fn write_all(
    dir: &Path,
    opts: &StudyOptions,
    split: &Split,
    runs: &[Run],
) -> Result<(), String> {
    write(&bias(opts, split), &dir.join("figure1_bias"))?;
    write(
        &calibration(opts, split, runs),
        &dir.join("figure2_calibration"),
    )?;
    write(&shapes(opts, split, runs), &dir.join("figure3_shapes"))?;
    write(&budget(runs), &dir.join("figure4_budget"))
}
