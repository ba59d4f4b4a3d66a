//! `judgecal-study panel --hanna FILE --plan`: the "which judges to call" answer on HANNA checked
//! against brute force. The answer (`POST /v1/panels/{name}/plan`) reads each sub-panel's
//! residual variance from its fit on every item; brute force measures each of the 31
//! sub-panels' held-out MSE (5 folds, fits on the other four) and works out the labels and cost
//! from that. Per rubric: the cheapest sub-panel by each, the labels it saves against the best
//! single judge by each, and what the answer's choice costs under the held-out figures against
//! the brute-force optimum.

use judgecal_stats::Run;
use judgecal_stats::bayes::FitOptions;
use judgecal_stats::cv;
use judgecal_stats::panel::fusion::{FusionOptions, PanelRows, fit_fusion};
use judgecal_stats::panel::plan::{PlanAsk, labels_needed};
use judgecal_stats::panel::{self, StackOptions, Stats, members_of};
use judgecal_stats::stats::normal_quantile;

/// Per-item costs of HANNA's judges (alphabetical: Beluga-13B, ChatGPT, Llama-13B, Mistral-7B,
/// OrcaPlatypus): a hosted model at 1, 13B open models at 0.3, a 7B at 0.15.
pub const COSTS: [f64; 5] = [0.3, 1.0, 0.3, 0.15, 0.3];

/// One rubric's check.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanCheck {
    pub rubric: String,
    /// The answer's cheapest sub-panel (judge names) and its labels saved.
    pub answer: (Vec<String>, i64),
    /// Brute force's, from held-out MSE.
    pub brute: (Vec<String>, i64),
    /// The answer's choice's cost under the held-out figures, over the optimum's (1 = optimal).
    pub regret: f64,
    /// Labels the answer predicts for its choice, and brute force's labels for that choice.
    pub labels: (usize, usize),
}

/// Each rubric's items as a panel's anchors: the members' scores and the reference.
fn rows_of(by_rubric: &[Vec<super::panel::Item>]) -> Vec<PanelRows> {
    by_rubric
        .iter()
        .map(|items| {
            items
                .iter()
                .map(|i| (i.scores.clone(), i.reference))
                .collect()
        })
        .collect()
}

/// sq[s][r]: sub-panel s's held-out squared errors in rubric r, over five folds.
fn held_out_errors(
    by_rubric: &[Vec<super::panel::Item>],
    m: usize,
    sampler: FitOptions,
    seed: u64,
    progress: &dyn Fn(&str),
) -> Result<Vec<Vec<Vec<f64>>>, String> {
    const FOLDS: usize = 5;
    let mut sq: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); by_rubric.len()]; (1usize << m) - 1];
    let folds: Vec<Vec<usize>> = by_rubric
        .iter()
        .enumerate()
        .map(|(r, items)| cv::folds(items.len(), FOLDS, seed ^ (r as u64 + 7)))
        .collect();
    for f in 0..FOLDS {
        progress(&format!("fold {}/{FOLDS}: 31 sub-panels", f + 1));
        let stats: Vec<Stats> = by_rubric
            .iter()
            .zip(&folds)
            .map(|(items, fold)| {
                Stats::of(
                    m,
                    items
                        .iter()
                        .zip(fold)
                        .filter(|(_, k)| **k != f)
                        .map(|(i, _)| (i.scores.as_slice(), i.reference)),
                )
            })
            .collect();
        let opts = StackOptions {
            sampler,
            ..StackOptions::new(m)
        };
        let fits = panel::fit_sub_panels(&stats, &opts, &|_| {})?;
        for (s, fit) in fits.fits.iter().enumerate() {
            let keep = members_of(s + 1, m);
            for (r, (items, fold)) in by_rubric.iter().zip(&folds).enumerate() {
                for (i, _) in items.iter().zip(fold).filter(|(_, k)| **k == f) {
                    let xs: Vec<f64> = keep.iter().map(|&k| i.scores[k]).collect();
                    let e = fit.rubrics[r].correct(&xs).score - i.reference;
                    sq[s][r].push(e * e);
                }
            }
        }
    }
    Ok(sq)
}

/// The check for a run of `run_size` items to ±`half_width` at 95%, labels at `label_cost`.
pub fn hanna_plan(
    path: &std::path::Path,
    variant: &str,
    seed: u64,
    run_size: usize,
    half_width: f64,
    label_cost: f64,
    progress: &dyn Fn(&str),
) -> Result<Vec<PlanCheck>, String> {
    let (judges, rubric_names, by_rubric) = super::panel::items(path, variant)?;
    let (m, rubrics) = (judges.len(), rubric_names.len());
    if m != COSTS.len() {
        return Err(format!(
            "HANNA has {m} judges here, the costs are for {}",
            COSTS.len()
        ));
    }
    let sampler = FitOptions {
        warmup: 300,
        draws: 400,
        seed,
        ..FitOptions::default()
    };
    let subsets = (1usize << m) - 1;
    let sq = held_out_errors(&by_rubric, m, sampler, seed, progress)?;
    progress("the answer: every sub-panel on every item");
    let cells = rows_of(&by_rubric);
    let never = std::sync::atomic::AtomicBool::new(false);
    let mut opts = FusionOptions::new(m, seed, false);
    opts.stack.sampler = sampler;
    let fusions = fit_fusion(&cells, &judges, &opts, &Run::new(&never, &|_| {}))?;
    let ask = PlanAsk {
        run_size,
        half_width,
        level: 0.95,
        costs: COSTS.to_vec(),
        label_cost,
    };
    let z = normal_quantile(0.975);
    let names = |members: &[usize]| members.iter().map(|&k| judges[k].clone()).collect();
    let mut out = Vec::with_capacity(rubrics);
    for (r, fusion) in fusions.iter().enumerate() {
        let plan = fusion.plan(&ask);
        let chosen = plan.cheapest.unwrap_or(0);
        // Brute force: labels and costs from the held-out MSE.
        let labels: Vec<usize> = (0..subsets)
            .map(|s| {
                let mse = sq[s][r].iter().sum::<f64>() / sq[s][r].len().max(1) as f64;
                labels_needed(mse, run_size, half_width, z)
            })
            .collect();
        let cost = |s: usize| {
            let per: f64 = members_of(s + 1, m).iter().map(|&k| COSTS[k]).sum();
            run_size as f64 * per + labels[s] as f64 * label_cost
        };
        let best = (0..subsets)
            .min_by(|&a, &b| cost(a).total_cmp(&cost(b)))
            .unwrap_or(0);
        let single = (0..m)
            .map(|k| (1usize << k) - 1)
            .min_by_key(|&s| labels[s])
            .unwrap_or(0);
        out.push(PlanCheck {
            rubric: rubric_names[r].clone(),
            answer: (
                names(&plan.sub_panels[chosen].members),
                plan.labels_saved.unwrap_or(0),
            ),
            brute: (
                names(&members_of(best + 1, m)),
                labels[single] as i64 - labels[best] as i64,
            ),
            regret: cost(chosen) / cost(best),
            labels: (plan.sub_panels[chosen].labels, labels[chosen]),
        });
    }
    Ok(out)
}

pub fn plan_table(rows: &[PlanCheck]) -> String {
    let mut out = String::from(
        "| rubric | answer: cheapest sub-panel | labels saved | brute force: cheapest | labels saved | answer's cost / optimum (held out) | labels: predicted / held out |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.3} | {} / {} |\n",
            r.rubric,
            r.answer.0.join(" + "),
            r.answer.1,
            r.brute.0.join(" + "),
            r.brute.1,
            r.regret,
            r.labels.0,
            r.labels.1,
        ));
    }
    out
}
