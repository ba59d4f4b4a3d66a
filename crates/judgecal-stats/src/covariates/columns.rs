//! The input layer's full design and its candidates: each covariate raw, logged, or piecewise
//! linear in its log (hinges at quantiles of the anchors' logs), standardised over every
//! anchor; a candidate takes one option per covariate, or none; and which is served.

use super::{Column, ConsideredInputs, Input, Row, Transform};

/// The anchors' quantiles of log value where the piecewise-linear candidates bend: a coarse
/// one (quartiles) and a fine one, which follows a reward that levels off in the top tenth.
const KNOTS: [&[f64]; 2] = [&[0.25, 0.5, 0.75], &[0.1, 0.25, 0.5, 0.75, 0.9]];

/// The full design's columns: the judge, then every covariate under every transform its
/// anchors allow, standardised over all anchors; with, per covariate, its options (each a set
/// of columns entering together: raw, logged, or logged with hinges at quantiles of the log).
pub(super) fn full_columns(
    cells: &[Vec<Row>],
    names: &[String],
    piecewise: bool,
) -> Result<(Vec<Column>, Options), String> {
    let mut columns = vec![Column::Judge];
    let mut options: Options = Vec::with_capacity(names.len());
    for (c, name) in names.iter().enumerate() {
        let raw: Vec<f64> = cells
            .iter()
            .flatten()
            .map(|row| row.covariates[c])
            .collect();
        let range = raw
            .iter()
            .fold([f64::INFINITY, f64::NEG_INFINITY], |[lo, hi], &x| {
                [lo.min(x), hi.max(x)]
            });
        let mut column = |transform: Transform| -> Result<Option<usize>, String> {
            let Some(values) = raw
                .iter()
                .map(|&x| transform.apply(x))
                .collect::<Option<Vec<f64>>>()
            else {
                return Ok(None);
            };
            let n = values.len() as f64;
            let centre = values.iter().sum::<f64>() / n;
            let var = values.iter().map(|v| (v - centre).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
            if var.is_nan() || var <= 0.0 {
                return match transform {
                    // A knot past which (nearly) no anchor lies bends nothing.
                    Transform::Hinge { .. } => Ok(None),
                    _ => Err(format!(
                        "covariate {name} takes one value on every anchor; it cannot be fitted"
                    )),
                };
            }
            columns.push(Column::Covariate(Input {
                name: name.clone(),
                transform,
                centre,
                scale: var.sqrt(),
                range: Some(range),
            }));
            Ok(Some(columns.len() - 1))
        };
        let mut these: Vec<Vec<usize>> = Vec::new();
        these.extend(column(Transform::Identity)?.map(|i| vec![i]));
        if let Some(log) = column(Transform::Log)? {
            these.push(vec![log]);
            let mut logs: Vec<f64> = raw.iter().map(|x| x.ln()).collect();
            logs.sort_by(f64::total_cmp);
            let mut hinges: Vec<(f64, usize)> = Vec::new();
            for knots in KNOTS.into_iter().filter(|_| piecewise) {
                let mut spline = vec![log];
                for &q in knots {
                    let knot = crate::stats::quantile_sorted(&logs, q);
                    // A knot two splines share is one column.
                    match hinges.iter().find(|(k, _)| *k == knot) {
                        Some(&(_, col)) => spline.push(col),
                        None => {
                            if let Some(col) = column(Transform::Hinge { knot })? {
                                hinges.push((knot, col));
                                spline.push(col);
                            }
                        }
                    }
                }
                spline.sort_unstable();
                if spline.len() > 1 && !these.contains(&spline) {
                    these.push(spline);
                }
            }
        }
        options.push(these);
    }
    Ok((columns, options))
}

/// Per covariate, its options: each the columns that enter together.
pub(super) type Options = Vec<Vec<Vec<usize>>>;

/// Candidates: for each covariate one of its options (or, unless all are kept, none); each a
/// list of member indices (0 the judge) in column order.
pub(super) fn candidates_of(options: &Options, keep_all: bool) -> Vec<Vec<usize>> {
    let mut candidates: Vec<Vec<usize>> = vec![vec![0]];
    for these in options {
        let mut next = Vec::new();
        for cand in &candidates {
            if !keep_all {
                next.push(cand.clone());
            }
            for cols in these {
                let mut with = cand.clone();
                with.extend(cols);
                next.push(with);
            }
        }
        candidates = next;
    }
    candidates
}

/// A covariate is kept only where it lowers held-out MAE by more than this share: a covariate
/// the judge ignores lowers it by chance only (by about 1/n), and would make every item sent
/// without it a second-best answer.
pub const KEEP_GAIN: f64 = 0.01;

/// The candidate served: the covariates are the fewest among the candidates within
/// `KEEP_GAIN` of the lowest held-out MAE (the lowest MAE of those on a tie); their shape the
/// one with the lowest held-out MAE. A shape is not held to the margin: a coarser bend within
/// 1% overall can still miss by 0.03 where the longest answers lie (a reward that levels off,
/// read with knots at the quartiles only). `sets[c]`: candidate c's covariates.
pub(super) fn served_candidate(figures: &[ConsideredInputs], sets: &[Vec<&str>]) -> usize {
    let best = figures.iter().map(|f| f.mae).fold(f64::INFINITY, f64::min);
    let lowest = |among: &mut dyn Iterator<Item = usize>| {
        among.min_by(|&a, &b| figures[a].mae.total_cmp(&figures[b].mae))
    };
    let Some(kept) = lowest(
        &mut (0..figures.len())
            .filter(|&c| figures[c].mae <= best * (1.0 + KEEP_GAIN))
            .filter(|&c| {
                let fewest = (0..figures.len())
                    .filter(|&d| figures[d].mae <= best * (1.0 + KEEP_GAIN))
                    .map(|d| sets[d].len())
                    .min();
                Some(sets[c].len()) == fewest
            }),
    ) else {
        return 0;
    };
    lowest(&mut (0..figures.len()).filter(|&c| sets[c] == sets[kept])).unwrap_or(kept)
}
