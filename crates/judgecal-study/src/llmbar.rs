//! LLMBar's pairwise sets with a length covariate (`judgecal-study covariates --llmbar DIR`):
//! what the input layer does to real judges' held-out error when it is given the answers'
//! length ratio.
//!
//! Each pair becomes one anchor: the judge's score is the share of its two orders that named
//! output 1 the winner (1, ½ or 0; an order without a verdict is left out), the covariate the
//! ratio of output 1's length to output 2's (characters), the reference 1 where the experts
//! preferred output 1 and 0 otherwise. The three sets (MT-Bench, LLMEval2, FairEval) are a
//! judge's three rubrics, pooled as a judge's rubrics are. The layer's candidates (the judge
//! alone, with the ratio, with its log) are cross-fitted; their held-out MAE and mean squared
//! error (the Brier score of a 0/1 reference) are what the table shows. A linear layer on a
//! 0/1 reference is a linear probability model: crude, but it is what would be served.

use std::path::Path;

use judgecal_stats::Run;
use judgecal_stats::covariates::{LayerOptions, Row, fit_layer};

pub const SETS: [&str; 3] = ["MT-Bench", "LLMEval2", "FairEval"];
pub const JUDGES: [&str; 4] = ["GPT-4", "ChatGPT", "LLaMA2", "PaLM2"];

pub(crate) fn read(path: &Path) -> Result<Vec<serde_json::Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// One pair of a set as a judge saw it: its verdict in each order (1: output 1 won, 0:
/// output 2; `None` where that order gave none), the answers' lengths in characters and
/// whether the experts preferred output 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    /// Its row in the set's file (the same pair in every judge's file).
    pub row: usize,
    pub first: Option<f64>,
    /// With output 2 shown first, already mapped back (1 still means output 1).
    pub swapped: Option<f64>,
    pub lengths: (f64, f64),
    pub experts_prefer_1: bool,
}

/// One judge's pairs in one set: those with a verdict in some order, two non-empty answers
/// and the experts' label.
pub fn pairs(dir: &Path, set: &str, judge: &str) -> Result<Vec<Pair>, String> {
    let rows = read(&dir.join(set).join(format!("{judge}.json")))?;
    let mut out = Vec::with_capacity(rows.len());
    for (index, row) in rows.into_iter().enumerate() {
        let text = |k: &str| row[k].as_str().map_or(0, |s| s.chars().count()) as f64;
        let (a, b) = (text("output_1"), text("output_2"));
        let Some(label) = row["label"].as_i64() else {
            continue;
        };
        let verdict = |order: &str| match row["results"][0][order]["winner"].as_str() {
            Some("1") => Some(1.0),
            Some("2") => Some(0.0),
            _ => None,
        };
        let (first, swapped) = (verdict("swap = False"), verdict("swap = True"));
        if (first.is_none() && swapped.is_none()) || a == 0.0 || b == 0.0 {
            continue;
        }
        out.push(Pair {
            row: index,
            first,
            swapped,
            lengths: (a, b),
            experts_prefer_1: label == 1,
        });
    }
    Ok(out)
}

/// One judge's anchors in one set: the judge's score is the share of its orders that named
/// output 1, the covariate output 1's length over output 2's.
pub fn load(dir: &Path, set: &str, judge: &str) -> Result<Vec<Row>, String> {
    Ok(pairs(dir, set, judge)?
        .into_iter()
        .map(|p| {
            let verdicts: Vec<f64> = [p.first, p.swapped].into_iter().flatten().collect();
            Row {
                score: verdicts.iter().sum::<f64>() / verdicts.len() as f64,
                covariates: vec![p.lengths.0 / p.lengths.1],
                reference: f64::from(u8::from(p.experts_prefer_1)),
            }
        })
        .collect())
}

/// The Markdown table: per judge and set, the held-out MAE and squared error of each
/// candidate, the one served (a piecewise-linear one with its held-out MAE), and the
/// covariate's coefficient with the ratio kept raw or logged.
pub fn report(dir: &Path, seed: u64) -> Result<String, String> {
    let mut out = String::from(
        "| judge | set | pairs | held-out MAE: judge / + ratio / + log ratio | held-out Brier: judge / + ratio / + log ratio | served | coefficient per sd, the ratio kept (95%) |\n|---|---|---:|---|---|---|---|\n",
    );
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let quiet = |_: f64| {};
    for judge in JUDGES {
        let cells = SETS
            .iter()
            .map(|set| load(dir, set, judge))
            .collect::<Result<Vec<_>, _>>()?;
        let opts = LayerOptions {
            sampler: judgecal_stats::bayes::FitOptions {
                seed,
                ..Default::default()
            },
            ..LayerOptions::default()
        };
        let names = ["length_ratio".to_owned()];
        let run = Run::new(&cancel, &quiet);
        let layers = fit_layer(&cells, &names, &opts, &run)?;
        // The ratio kept wherever it would not be served, for its coefficient.
        let kept = fit_layer(
            &cells,
            &names,
            &LayerOptions {
                keep_all: true,
                piecewise: false,
                ..opts.clone()
            },
            &run,
        )?;
        for (((set, cell), layer), kept) in SETS.iter().zip(&cells).zip(&layers).zip(&kept) {
            let figure =
                |inputs: &[&str],
                 f: &dyn Fn(&judgecal_stats::covariates::ConsideredInputs) -> f64| {
                    layer
                        .considered
                        .iter()
                        .find(|c| {
                            c.inputs
                                .iter()
                                .map(String::as_str)
                                .eq(inputs.iter().copied())
                        })
                        .map_or("—".to_owned(), |c| format!("{:.3}", f(c)))
                };
            let row = |f: &dyn Fn(&judgecal_stats::covariates::ConsideredInputs) -> f64| {
                format!(
                    "{} / {} / {}",
                    figure(&[], f),
                    figure(&["length_ratio"], f),
                    figure(&["log(length_ratio)"], f)
                )
            };
            let served = served_label(layer);
            let coefficient = kept.coefficients.first().map_or("—".to_owned(), |c| {
                format!(
                    "{}: {:+.3} ({:+.3}, {:+.3})",
                    c.input, c.per_sd, c.per_sd_lo, c.per_sd_hi
                )
            });
            out.push_str(&format!(
                "| {judge} | {set} | {} | {} | {} | {served} | {coefficient} |\n",
                cell.len(),
                row(&|c| c.mae),
                row(&|c| c.mse),
            ));
        }
    }
    Ok(out)
}

/// The candidate a layer serves: the judge alone, the ratio raw or logged, or a bend in its
/// log with its knots and held-out MAE.
fn served_label(layer: &judgecal_stats::covariates::Layer) -> String {
    let labels: Vec<String> = layer.inputs.iter().map(|i| i.label()).collect();
    match labels.len() {
        0 => "judge alone".to_owned(),
        1 => format!("+ {}", labels[0]),
        n => {
            let mae = layer
                .considered
                .iter()
                .find(|c| c.inputs == labels)
                .map_or("—".to_owned(), |c| format!("{:.3}", c.mae));
            format!("+ {} with {} knots (MAE {mae})", labels[0], n - 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_becomes_the_share_of_orders_for_output_1_its_length_ratio_and_the_experts_choice() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("MT-Bench")).unwrap();
        let pair = |a: &str, b: &str, label: i64, first: &str, second: &str| {
            serde_json::json!({"input": "q", "output_1": a, "output_2": b, "label": label,
                "results": [{"swap = False": {"winner": first}, "swap = True": {"winner": second}}]})
        };
        let rows = serde_json::json!([
            pair("aaaa", "aa", 1, "1", "1"),
            pair("aa", "aaaa", 2, "1", "2"),
            pair("a", "a", 2, "2", "none"),
            // No verdict in either order, and an empty answer: left out.
            pair("a", "a", 1, "x", "y"),
            pair("", "a", 1, "1", "1"),
        ]);
        std::fs::write(
            dir.path().join("MT-Bench").join("GPT-4.json"),
            rows.to_string(),
        )
        .unwrap();
        let got = load(dir.path(), "MT-Bench", "GPT-4").unwrap();
        let want = [(1.0, 2.0, 1.0), (0.5, 0.5, 0.0), (0.0, 1.0, 0.0)];
        assert_eq!(got.len(), want.len());
        for (row, (score, ratio, reference)) in got.iter().zip(want) {
            assert_eq!(
                (row.score, row.covariates[0], row.reference),
                (score, ratio, reference)
            );
        }
    }
}
