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

use judgecal_stats::pairwise::preference::{self, HeldOut, Inputs, Labelled, Verdicts};

use crate::llmbar::{JUDGES, Pair, SETS, pairs};

/// A share with its 95% Wilson interval.
fn share(hits: f64, n: usize) -> String {
    if n == 0 {
        return "—".into();
    }
    let n = n as f64;
    let p = hits / n;
    let z: f64 = 1.96;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    format!(
        "{:.1}% ({:.1}–{:.1})",
        100.0 * p,
        100.0 * (centre - half),
        100.0 * (centre + half)
    )
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
        },
        preference: f64::from(u8::from(p.experts_prefer_1)),
    }
}

/// The judge's and the experts' biases over `pairs`, as table cells: the share of verdicts
/// naming the answer shown first (each order a verdict; the experts saw output 1 first), the
/// share of pairs with both orders whose winner flips, and the share won by the longer
/// answer (judge: the first order, else the swapped; pairs of equal length left out).
pub fn biases(pairs: &[Pair]) -> [String; 5] {
    let (mut first_wins, mut verdicts) = (0.0, 0);
    let (mut flips, mut both) = (0.0, 0);
    let (mut judge_longer, mut people_longer, mut unequal) = (0.0, 0.0, 0);
    for p in pairs {
        if let Some(f) = p.first {
            first_wins += f;
            verdicts += 1;
        }
        if let Some(s) = p.swapped {
            // Output 2 was shown first: it won where the mapped-back verdict is 0.
            first_wins += 1.0 - s;
            verdicts += 1;
        }
        if let (Some(f), Some(s)) = (p.first, p.swapped) {
            flips += f64::from(u8::from(f != s));
            both += 1;
        }
        let (a, b) = p.lengths;
        if a != b {
            unequal += 1;
            let verdict = p.first.or(p.swapped).unwrap_or(0.5);
            let a_longer = a > b;
            judge_longer += if a_longer { verdict } else { 1.0 - verdict };
            people_longer += f64::from(u8::from(p.experts_prefer_1 == a_longer));
        }
    }
    let people_first = pairs.iter().filter(|p| p.experts_prefer_1).count() as f64;
    [
        share(first_wins, verdicts),
        share(people_first, pairs.len()),
        share(flips, both),
        share(judge_longer, unequal),
        share(people_longer, unequal),
    ]
}

/// Both tables, Markdown.
pub fn report(dir: &Path, folds: usize, seed: u64) -> Result<String, String> {
    let mut held = String::from(
        "| judge | set | pairs | raw verdict: log-loss (read 95% sure) / accuracy | calibrated verdict | both orders | both orders + log length ratio | lowest loss |\n|---|---|---:|---|---|---|---|---|\n",
    );
    let mut bias = String::from(
        "| judge | pairs | judge: the answer shown first wins | experts: output 1 (shown first) wins | judge: flips when swapped | judge: the longer answer wins | experts: the longer answer wins |\n|---|---:|---|---|---|---|---|\n",
    );
    let cell = |h: &HeldOut| format!("{:.3} / {:.1}%", h.log_loss, 100.0 * h.accuracy);
    for judge in JUDGES {
        let mut all = Vec::new();
        for set in SETS {
            let pairs = pairs(dir, set, judge)?;
            let rows: Vec<Labelled> = pairs.iter().map(labelled).collect();
            let fitted = Inputs::ALL
                .iter()
                .map(|&i| preference::held_out(&rows, i, folds, seed))
                .collect::<Result<Vec<_>, _>>()?;
            let best = Inputs::ALL
                .iter()
                .zip(&fitted)
                .min_by(|a, b| a.1.log_loss.total_cmp(&b.1.log_loss))
                .map_or("—", |(i, _)| i.name());
            held.push_str(&format!(
                "| {judge} | {set} | {} | {} | {} | {} | {} | {best} |\n",
                rows.len(),
                cell(&preference::raw(&rows)),
                cell(&fitted[0]),
                cell(&fitted[1]),
                cell(&fitted[2]),
            ));
            all.extend(pairs);
        }
        let [first, people_first, flips, longer, people_longer] = biases(&all);
        bias.push_str(&format!(
            "| {judge} | {} | {first} | {people_first} | {flips} | {longer} | {people_longer} |\n",
            all.len()
        ));
    }
    Ok(format!("{held}\n{bias}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(first: Option<f64>, swapped: Option<f64>, a: f64, b: f64, prefer_1: bool) -> Pair {
        Pair {
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
        let [first, people_first, flips, longer, people_longer] = biases(&pairs);
        // Five verdicts; the first shown won three: both of the first pair's, the second
        // pair's swapped one (output 2 shown first, output 2 won).
        assert!(first.starts_with("60.0%"), "{first}");
        assert!(people_first.starts_with("33.3%"), "{people_first}");
        assert!(flips.starts_with("50.0%"), "{flips}");
        assert!(longer.starts_with("100.0%"), "{longer}");
        assert!(people_longer.starts_with("100.0%"), "{people_longer}");
        let row = labelled(&pairs[2]);
        let v = &row.verdicts;
        assert_eq!((v.verdict, v.swapped, row.preference), (1.0, None, 0.0));
        assert!(v.covariates[0].abs() < 1e-12);
    }
}
