//! LLMBar's pairwise sets through the pairwise statistics (`judgecal-study pairwise --llmbar
//! DIR`): per judge and set, the held-out log-loss and accuracy of the calibrated preference
//! (`judgecal_stats::pairwise::preference`) reading the first order's verdict, both orders'
//! verdicts, and both with the answers' log length ratio, against the raw verdict; and per
//! judge, its biases beside the experts': how often the answer shown first wins, how often
//! the verdict flips when the answers swap places, and how often the longer answer wins.
//!
//! A pair is one comparison of output 1 (a) with output 2 (b); the experts' label is the
//! reference (1 or 0: LLMBar removed ties). A pair with no first-order verdict takes its
//! swapped verdict as its verdict. The sets carry no system names, so no per-system
//! favouritism is reported.

use std::path::Path;

use judgecal_stats::pairwise::bias::{Biases, Judged, Share};
use judgecal_stats::pairwise::choice::{self, HeldOutMap};
use judgecal_stats::pairwise::preference::{Inputs, Labelled, Verdicts};

use crate::llmbar::{JUDGES, Pair, SETS, pairs};

/// A share with its 95% interval, as a table cell.
fn share(s: Option<Share>) -> String {
    s.map_or("—".into(), |s| {
        format!(
            "{:.1}% ({:.1}–{:.1})",
            100.0 * s.estimate,
            100.0 * s.interval[0],
            100.0 * s.interval[1]
        )
    })
}

/// A pair as a labelled comparison: its verdict, its swapped verdict, log(len a / len b).
pub fn labelled(p: &Pair) -> Labelled {
    let (verdict, swapped) = match (p.first, p.swapped) {
        (Some(f), s) => (f, s),
        (None, s) => (s.unwrap_or(0.5), None),
    };
    Labelled {
        verdicts: Verdicts {
            verdict,
            swapped,
            covariates: vec![(p.lengths.0 / p.lengths.1).ln()],
            systems: None,
            members: Vec::new(),
        },
        preference: f64::from(u8::from(p.experts_prefer_1)),
    }
}

/// The judge's and the experts' biases over `pairs`, by the diagnostics a pairwise cell's
/// version reports (`judgecal_stats::pairwise::bias`), as table cells: the share of verdicts
/// naming the answer shown first (each order a verdict; the experts saw output 1 first), the
/// share of pairs with both orders whose winner flips, and the share won by the longer answer
/// (the judge's preference over the orders it gave; pairs of equal length left out), each
/// with its 95% interval over pairs. A pair judged only with output 2 shown first is read as
/// that one verdict with output 2 as a, so that it counts for the answer shown first; and the
/// number of pairs read.
pub fn biases(pairs: &[Pair]) -> ([String; 5], usize) {
    let rows: Vec<Judged> = pairs
        .iter()
        .filter_map(|p| {
            let (a, b) = p.lengths;
            let longer = (a != b).then_some(a > b);
            let expert = f64::from(u8::from(p.experts_prefer_1));
            match (p.first, p.swapped) {
                (Some(verdict), swapped) => Some(Judged {
                    verdict,
                    swapped,
                    preference: Some(expert),
                    a_longer: longer,
                    systems: None,
                }),
                (None, Some(s)) => Some(Judged {
                    verdict: 1.0 - s,
                    swapped: None,
                    preference: Some(1.0 - expert),
                    a_longer: longer.map(|l| !l),
                    systems: None,
                }),
                (None, None) => None,
            }
        })
        .collect();
    let b = Biases::of(&rows, 0);
    // The experts' share for output 1, which they saw first: a pair read with output 2 as a
    // counts the experts' preference for output 1 all the same.
    let people_first = Biases::of(
        &pairs
            .iter()
            .map(|p| Judged {
                verdict: 0.5,
                swapped: None,
                preference: Some(f64::from(u8::from(p.experts_prefer_1))),
                a_longer: None,
                systems: None,
            })
            .collect::<Vec<_>>(),
        0,
    )
    .people_first;
    (
        [
            share(b.judge_first),
            share(people_first),
            share(b.flips),
            share(b.judge_longer),
            share(b.people_longer),
        ],
        rows.len(),
    )
}

/// Both tables, Markdown.
pub fn report(dir: &Path, folds: usize, seed: u64) -> Result<String, String> {
    let mut held = String::from(
        "| judge | set | pairs | raw verdict: log-loss (read 95% sure) / accuracy | calibrated verdict | both orders | both orders + log length ratio | lowest loss |\n|---|---|---:|---|---|---|---|---|\n",
    );
    let mut bias = String::from(
        "| judge | pairs | judge: the answer shown first wins | experts: output 1 (shown first) wins | judge: flips when swapped | judge: the longer answer wins | experts: the longer answer wins |\n|---|---:|---|---|---|---|---|\n",
    );
    let cell = |h: &HeldOutMap| format!("{:.3} / {:.1}%", h.log_loss, 100.0 * h.accuracy);
    for judge in JUDGES {
        let mut all = Vec::new();
        for set in SETS {
            let pairs = pairs(dir, set, judge)?;
            let rows: Vec<Labelled> = pairs.iter().map(labelled).collect();
            let fitted = Inputs::ALL
                .iter()
                .map(|&i| choice::held_out(&rows, i, folds, seed))
                .collect::<Result<Vec<_>, _>>()?;
            let best = Inputs::ALL
                .iter()
                .zip(&fitted)
                .min_by(|a, b| a.1.log_loss.total_cmp(&b.1.log_loss))
                .map_or("—", |(i, _)| i.name());
            held.push_str(&format!(
                "| {judge} | {set} | {} | {} | {} | {} | {} | {best} |\n",
                rows.len(),
                cell(&choice::raw(&rows)),
                cell(&fitted[0]),
                cell(&fitted[1]),
                cell(&fitted[2]),
            ));
            all.extend(pairs);
        }
        let ([first, people_first, flips, longer, people_longer], read) = biases(&all);
        bias.push_str(&format!(
            "| {judge} | {read} | {first} | {people_first} | {flips} | {longer} | {people_longer} |\n"
        ));
    }
    Ok(format!("{held}\n{bias}\n{}", panels(dir, folds, seed)?))
}

/// The pairs of `set` that every judge of `judges` gave a verdict on (by their row in the
/// set's files, the same answers' lengths), as a panel's labelled comparisons: each judge's
/// verdicts in the order of `judges`, the log length ratio, the experts' label.
pub fn panel_rows(dir: &Path, set: &str, judges: &[&str]) -> Result<Vec<Labelled>, String> {
    let mut by_judge = Vec::with_capacity(judges.len());
    for judge in judges {
        let of: std::collections::HashMap<usize, Pair> = pairs(dir, set, judge)?
            .into_iter()
            .map(|p| (p.row, p))
            .collect();
        by_judge.push(of);
    }
    let mut rows: Vec<usize> = by_judge[0].keys().copied().collect();
    rows.sort_unstable();
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let judged: Vec<&Pair> = by_judge
                .iter()
                .map(|j| j.get(&row))
                .collect::<Option<_>>()?;
            let first = judged[0];
            if judged.iter().any(|p| p.lengths != first.lengths) {
                return None;
            }
            let members = judged
                .iter()
                .map(|&p| {
                    let v = labelled(p).verdicts;
                    (v.verdict, v.swapped)
                })
                .collect();
            Some(Labelled {
                verdicts: Verdicts {
                    covariates: vec![(first.lengths.0 / first.lengths.1).ln()],
                    ..Verdicts::of_panel(members)
                },
                preference: f64::from(u8::from(first.experts_prefer_1)),
            })
        })
        .collect())
}

/// `auto`'s held-out figures for `rows` (its lowest-loss map over the candidates), as a cell.
fn chosen(rows: &[Labelled], folds: usize, seed: u64) -> Result<(HeldOutMap, String), String> {
    let choice = choice::choose(rows, None, folds, seed)?;
    Ok((choice.cross_fit.held_out, choice.candidate.name()))
}

/// A pairwise panel's table: per set, on the pairs all four judges judged, each judge's own
/// calibrated preference (`auto`'s choice) against the panel of four and the panel without
/// GPT-4, each `auto`'s choice among the panel's maps and each member's alone (members
/// numbered in the panel's order: GPT-4, ChatGPT, LLaMA2, PaLM2), held out on the same folds.
pub fn panels(dir: &Path, folds: usize, seed: u64) -> Result<String, String> {
    let cell = |h: &HeldOutMap| format!("{:.3} / {:.1}%", h.log_loss, 100.0 * h.accuracy);
    let mut out = format!(
        "| set | pairs | {} | panel of four | its choice | panel without GPT-4 | its choice |\n|---|---:|{}---|---|---|---|\n",
        JUDGES.join(" | "),
        "---|".repeat(JUDGES.len())
    );
    for set in SETS {
        let rows = panel_rows(dir, set, &JUDGES)?;
        let alone = |m: usize| -> Vec<Labelled> {
            rows.iter()
                .map(|r| {
                    let (v, s) = r.verdicts.members[m];
                    Labelled {
                        verdicts: Verdicts::of(v, s).with_inputs(&r.verdicts),
                        preference: r.preference,
                    }
                })
                .collect()
        };
        let mut line = format!("| {set} | {} |", rows.len());
        for m in 0..JUDGES.len() {
            line.push_str(&format!(" {} |", cell(&chosen(&alone(m), folds, seed)?.0)));
        }
        let (four, four_choice) = chosen(&rows, folds, seed)?;
        let without: Vec<Labelled> = rows
            .iter()
            .map(|r| Labelled {
                verdicts: Verdicts::of_panel(r.verdicts.members[1..].to_vec())
                    .with_inputs(&r.verdicts),
                preference: r.preference,
            })
            .collect();
        let (three, three_choice) = chosen(&without, folds, seed)?;
        line.push_str(&format!(
            " {} | {four_choice} | {} | {three_choice} |\n",
            cell(&four),
            cell(&three)
        ));
        out.push_str(&line);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(first: Option<f64>, swapped: Option<f64>, a: f64, b: f64, prefer_1: bool) -> Pair {
        Pair {
            row: 0,
            first,
            swapped,
            lengths: (a, b),
            experts_prefer_1: prefer_1,
        }
    }

    #[test]
    fn biases_count_first_shown_wins_flips_and_longer_answers_as_defined() {
        let pairs = [
            // The first shown wins in both orders (output 1, then output 2): a flip; output 1
            // is the longer.
            pair(Some(1.0), Some(0.0), 10.0, 5.0, true),
            // Consistent for output 2 (the longer): no flip.
            pair(Some(0.0), Some(0.0), 5.0, 10.0, false),
            // Only the swapped order, naming output 1; equal lengths.
            pair(None, Some(1.0), 7.0, 7.0, false),
        ];
        let ([first, people_first, flips, longer, people_longer], read) = biases(&pairs);
        assert_eq!(read, 3);
        // Five verdicts; the first shown won three: both of the first pair's, the second
        // pair's swapped one (output 2 shown first, output 2 won).
        assert!(first.starts_with("60.0%"), "{first}");
        assert!(people_first.starts_with("33.3%"), "{people_first}");
        assert!(flips.starts_with("50.0%"), "{flips}");
        // The judge's preference over the orders it gave: the first pair's orders split (½
        // for the longer), the second's both name the longer.
        assert!(longer.starts_with("75.0%"), "{longer}");
        assert!(people_longer.starts_with("100.0%"), "{people_longer}");
        let row = labelled(&pairs[2]);
        let v = &row.verdicts;
        assert_eq!((v.verdict, v.swapped, row.preference), (1.0, None, 0.0));
        assert!(v.covariates[0].abs() < 1e-12);
    }
}
