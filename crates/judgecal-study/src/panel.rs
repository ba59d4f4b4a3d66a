//! `judgecal-study panel --hanna`: HANNA's five judges as one panel, against each judge alone.
//!
//! An item is one system's story under one prompt variant; it joins the panel where every
//! judge scored it on the 1–5 scale (the others are failed parses). The items are dealt into
//! five folds, the same for every rubric. Each fold is predicted by fits on the other four:
//! the panel's stacking model (every judge's score, the six rubrics pooled) and each judge's
//! own pooled linear corrector (the stacking model with one member, which is the linear
//! corrector's model term for term). `auto`'s choice between them is made on the training
//! folds alone (an inner five-fold cross-validation of the same candidates, by mean squared
//! error), so the row `auto` is a nested held-out figure: what a panel's served corrector
//! would have scored.

use std::collections::BTreeMap;

use judgecal_stats::bayes::FitOptions;
use judgecal_stats::cv;
use judgecal_stats::panel::{self, StackOptions, Stats};

use super::systems::{Record, read};

/// One item: its rubric's index, every judge's score (in the panel's order) and the reference.
#[derive(Debug, Clone)]
pub(super) struct Item {
    pub(super) rubric: usize,
    system: String,
    story: u64,
    pub(super) scores: Vec<f64>,
    pub(super) reference: f64,
}

/// A held-out prediction: the item's rubric, its corrected score and its reference.
type Prediction = (usize, f64, f64);

/// The judges, the rubrics, and each rubric's items.
pub(super) type Panel = (Vec<String>, Vec<String>, Vec<Vec<Item>>);

/// (rubric, system, story) → per judge its score, and the reference.
type Joined = BTreeMap<(usize, String, u64), (Vec<Option<f64>>, f64)>;

/// One rubric's held-out errors.
#[derive(Debug, Clone, PartialEq)]
pub struct Errors {
    pub mae: f64,
    pub mse: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PanelTable {
    pub judges: Vec<String>,
    pub rubrics: Vec<String>,
    /// Items per rubric.
    pub items: Vec<usize>,
    /// Per rubric: the panel's, each judge's, and `auto`'s held-out errors.
    pub panel: Vec<Errors>,
    pub members: Vec<Vec<Errors>>,
    pub auto: Vec<Errors>,
    /// Per rubric, per outer fold: what `auto` chose (`panel` or a judge's name).
    pub chosen: Vec<Vec<String>>,
    /// Per rubric, per judge: the standardised weight and whether its canary fired, from the
    /// full panel's fit on every item.
    pub weights: Vec<Vec<(f64, bool)>>,
    /// Sub-panels fitted on every item (one per set of members present), and the seconds
    /// they took.
    pub sub_panels: usize,
    pub sub_panels_seconds: f64,
}

/// The panel's items of prompt variant `variant`, grouped by rubric.
pub(super) fn items(path: &std::path::Path, variant: &str) -> Result<Panel, String> {
    joined_items(&read(path)?, variant)
}

fn joined_items(records: &[Record], variant: &str) -> Result<Panel, String> {
    let mut judges: Vec<String> = records.iter().map(|r| r.judge.clone()).collect();
    judges.sort();
    judges.dedup();
    let mut rubrics: Vec<String> = records.iter().map(|r| r.rubric.clone()).collect();
    rubrics.sort();
    rubrics.dedup();
    let mut joined = Joined::new();
    for r in records.iter().filter(|r| r.variant == variant) {
        let rubric = rubrics.iter().position(|x| *x == r.rubric).unwrap_or(0);
        let judge = judges.iter().position(|x| *x == r.judge).unwrap_or(0);
        let entry = joined
            .entry((rubric, r.system.clone(), r.story))
            .or_insert_with(|| (vec![None; judges.len()], r.human));
        if (1.0..=5.0).contains(&r.score) {
            entry.0[judge] = Some(r.score);
        }
    }
    let mut by_rubric: Vec<Vec<Item>> = vec![Vec::new(); rubrics.len()];
    for ((rubric, system, story), (scores, reference)) in joined {
        if let Some(scores) = scores.into_iter().collect::<Option<Vec<f64>>>() {
            by_rubric[rubric].push(Item {
                rubric,
                system,
                story,
                scores,
                reference,
            });
        }
    }
    if by_rubric.iter().any(|r| r.len() < 50) {
        return Err(format!(
            "variant {variant}: too few items scored by every judge in some rubric"
        ));
    }
    Ok((judges, rubrics, by_rubric))
}

/// HANNA's items of prompt variant `variant` as the records of one more judge, `panel`, whose
/// score is the five judges' stacked score (clipped to 1–5): the anchors' (even prompts) from
/// five-fold cross-fitting on the anchors, the others' (odd prompts) from the fit on every
/// anchor. With `left_out`, that system's items are no anchors (its even prompts are dropped):
/// the stacking a new system's study needs.
pub(super) fn fused_records(
    records: &[Record],
    variant: &str,
    seed: u64,
    sampler: &FitOptions,
    left_out: Option<&str>,
) -> Result<Vec<Record>, String> {
    const FOLDS: usize = 5;
    let (judges, rubric_names, by_rubric) = joined_items(records, variant)?;
    let (members, rubrics) = (judges.len(), rubric_names.len());
    let all: Vec<&Item> = by_rubric
        .iter()
        .flatten()
        .filter(|i| !i.story.is_multiple_of(2) || left_out != Some(i.system.as_str()))
        .collect();
    let (anchors, runs): (Vec<&Item>, Vec<&Item>) =
        all.iter().partition(|i| i.story.is_multiple_of(2));
    let fold = cv::folds(anchors.len(), FOLDS, seed);
    let mut out = Vec::with_capacity(all.len());
    let record = |i: &Item, score: f64| Record {
        system: i.system.clone(),
        story: i.story,
        rubric: rubric_names[i.rubric].clone(),
        human: i.reference,
        judge: "panel".to_owned(),
        variant: variant.to_owned(),
        score: score.clamp(1.0, 5.0),
    };
    for f in 0..FOLDS {
        let train: Vec<&Item> = (0..anchors.len())
            .filter(|&i| fold[i] != f)
            .map(|i| anchors[i])
            .collect();
        let test: Vec<&Item> = (0..anchors.len())
            .filter(|&i| fold[i] == f)
            .map(|i| anchors[i])
            .collect();
        let predicted = predict(rubrics, members, &train, &test, None, sampler)?;
        out.extend(test.iter().zip(&predicted).map(|(i, p)| record(i, p.1)));
    }
    let predicted = predict(rubrics, members, &anchors, &runs, None, sampler)?;
    out.extend(runs.iter().zip(&predicted).map(|(i, p)| record(i, p.1)));
    Ok(out)
}

/// Every pair of HANNA's systems compared by every judge and by the panel of all five
/// ([`fused_records`]), each corrected by `method` as `systems::pairs` corrects a judge.
pub fn pairs_with_panel(
    path: &std::path::Path,
    variant: &str,
    method: judgecal_stats::Method,
    seed: u64,
    new_systems: bool,
    sampler: &FitOptions,
) -> Result<Vec<super::systems::PairRow>, String> {
    let mut records = read(path)?;
    let fused = fused_records(&records, variant, seed, sampler, None)?;
    // A new system's study refits the stacking without that system's anchors too.
    let mut refits = std::collections::HashMap::new();
    if new_systems {
        let mut systems: Vec<String> = records
            .iter()
            .filter(|r| r.variant == variant)
            .map(|r| r.system.clone())
            .collect();
        systems.sort_unstable();
        systems.dedup();
        for system in systems {
            let refit = fused_records(&records, variant, seed, sampler, Some(&system))?;
            refits.insert(system, refit);
        }
    }
    records.extend(fused);
    super::systems::pairs_of(&records, variant, method, seed, new_systems, &refits)
}

/// The candidates: the panel (`None`) and each member alone.
fn candidates(members: usize) -> Vec<Option<usize>> {
    std::iter::once(None)
        .chain((0..members).map(Some))
        .collect()
}

/// The scores a candidate sees of an item.
fn seen(item: &Item, candidate: Option<usize>) -> Vec<f64> {
    match candidate {
        None => item.scores.clone(),
        Some(m) => vec![item.scores[m]],
    }
}

/// Fits `candidate` on `train` (all rubrics pooled) and predicts `test`: per test item, its
/// rubric, the corrected score and the reference.
fn predict(
    rubrics: usize,
    members: usize,
    train: &[&Item],
    test: &[&Item],
    candidate: Option<usize>,
    sampler: &FitOptions,
) -> Result<Vec<Prediction>, String> {
    let width = candidate.map_or(members, |_| 1);
    let stats: Vec<Stats> = (0..rubrics)
        .map(|r| {
            let rows: Vec<(Vec<f64>, f64)> = train
                .iter()
                .filter(|i| i.rubric == r)
                .map(|i| (seen(i, candidate), i.reference))
                .collect();
            Stats::of(width, rows.iter().map(|(js, y)| (js.as_slice(), *y)))
        })
        .collect();
    let opts = StackOptions {
        sampler: *sampler,
        ..StackOptions::new(width)
    };
    let fit = panel::fit(&stats, &opts, &|_| {})?;
    Ok(test
        .iter()
        .map(|i| {
            let score = fit.rubrics[i.rubric].correct(&seen(i, candidate)).score;
            (i.rubric, score, i.reference)
        })
        .collect())
}

fn errors(predictions: &[Prediction], rubric: usize) -> Errors {
    let own: Vec<f64> = predictions
        .iter()
        .filter(|p| p.0 == rubric)
        .map(|p| p.1 - p.2)
        .collect();
    let n = own.len().max(1) as f64;
    Errors {
        mae: own.iter().map(|e| e.abs()).sum::<f64>() / n,
        mse: own.iter().map(|e| e * e).sum::<f64>() / n,
    }
}

/// `k`-fold predictions of every candidate over `items`.
fn cross_validated(
    rubrics: usize,
    members: usize,
    items: &[&Item],
    k: usize,
    seed: u64,
    sampler: &FitOptions,
) -> Result<Vec<Vec<Prediction>>, String> {
    let fold = cv::folds(items.len(), k, seed);
    let mut out = vec![Vec::new(); members + 1];
    for f in 0..k {
        let train: Vec<&Item> = (0..items.len())
            .filter(|&i| fold[i] != f)
            .map(|i| items[i])
            .collect();
        let test: Vec<&Item> = (0..items.len())
            .filter(|&i| fold[i] == f)
            .map(|i| items[i])
            .collect();
        for (c, candidate) in candidates(members).into_iter().enumerate() {
            out[c].extend(predict(
                rubrics, members, &train, &test, candidate, sampler,
            )?);
        }
    }
    Ok(out)
}

/// The table for HANNA's prompt variant `variant`.
pub fn hanna(
    path: &std::path::Path,
    variant: &str,
    seed: u64,
    sampler: &FitOptions,
    progress: &dyn Fn(&str),
) -> Result<PanelTable, String> {
    const FOLDS: usize = 5;
    let (judges, rubric_names, by_rubric) = items(path, variant)?;
    let (members, rubrics) = (judges.len(), rubric_names.len());
    let all: Vec<&Item> = by_rubric.iter().flatten().collect();
    let fold = cv::folds(all.len(), FOLDS, seed);
    let mut outer = vec![Vec::new(); members + 1];
    let mut auto = Vec::new();
    let mut chosen = vec![Vec::new(); rubrics];
    for f in 0..FOLDS {
        progress(&format!("outer fold {}/{FOLDS}", f + 1));
        let train: Vec<&Item> = (0..all.len())
            .filter(|&i| fold[i] != f)
            .map(|i| all[i])
            .collect();
        let test: Vec<&Item> = (0..all.len())
            .filter(|&i| fold[i] == f)
            .map(|i| all[i])
            .collect();
        let inner = cross_validated(
            rubrics,
            members,
            &train,
            FOLDS,
            seed + 1 + f as u64,
            sampler,
        )?;
        let mut held = Vec::new();
        for (c, candidate) in candidates(members).into_iter().enumerate() {
            held.push(predict(
                rubrics, members, &train, &test, candidate, sampler,
            )?);
            outer[c].extend(held[c].iter().copied());
        }
        // Per rubric, `auto` serves the candidate with the lowest inner held-out MSE.
        for (r, names) in chosen.iter_mut().enumerate() {
            let best = (0..=members)
                .min_by(|&a, &b| {
                    errors(&inner[a], r)
                        .mse
                        .total_cmp(&errors(&inner[b], r).mse)
                })
                .unwrap_or(0);
            names.push(if best == 0 {
                "panel".to_owned()
            } else {
                judges[best - 1].clone()
            });
            auto.extend(held[best].iter().filter(|p| p.0 == r).copied());
        }
    }
    progress("every sub-panel on every item");
    let stats: Vec<Stats> = by_rubric
        .iter()
        .map(|items| {
            Stats::of(
                members,
                items.iter().map(|i| (i.scores.as_slice(), i.reference)),
            )
        })
        .collect();
    let started = std::time::Instant::now();
    let panels = panel::fit_sub_panels(
        &stats,
        &StackOptions {
            sampler: *sampler,
            ..StackOptions::new(members)
        },
        &|_| {},
    )?;
    let sub_panels_seconds = started.elapsed().as_secs_f64();
    let full = panels.full();
    Ok(PanelTable {
        items: by_rubric.iter().map(Vec::len).collect(),
        panel: (0..rubrics).map(|r| errors(&outer[0], r)).collect(),
        members: (0..rubrics)
            .map(|r| (1..=members).map(|c| errors(&outer[c], r)).collect())
            .collect(),
        auto: (0..rubrics).map(|r| errors(&auto, r)).collect(),
        chosen,
        weights: full
            .rubrics
            .iter()
            .map(|p| {
                p.members
                    .iter()
                    .map(|m| (m.standardised, m.canary))
                    .collect()
            })
            .collect(),
        judges,
        rubrics: rubric_names,
        sub_panels: panels.fits.len(),
        sub_panels_seconds,
    })
}

/// The table as Markdown: per rubric, each judge's held-out MSE and MAE, the panel's, `auto`'s
/// (nested), the panel's gain over the best judge, and the judges' standardised weights.
pub fn table(t: &PanelTable) -> String {
    let mut out = format!(
        "Held-out MSE (MAE) per rubric, five folds; auto is nested (chosen on the training folds only). Judges: {}.\n\n| rubric | items | {} | panel | auto | panel vs best judge (MSE) | auto chose |\n|---|---:|{}---:|---:|---:|---|\n",
        t.judges.join(", "),
        t.judges.join(" | "),
        "---:|".repeat(t.judges.len()),
    );
    for (r, name) in t.rubrics.iter().enumerate() {
        let cell = |e: &Errors| format!("{:.3} ({:.3})", e.mse, e.mae);
        let best = t.members[r]
            .iter()
            .map(|e| e.mse)
            .fold(f64::INFINITY, f64::min);
        out += &format!(
            "| {name} | {} | {} | {} | {} | {:+.1}% | {} |\n",
            t.items[r],
            t.members[r]
                .iter()
                .map(cell)
                .collect::<Vec<_>>()
                .join(" | "),
            cell(&t.panel[r]),
            cell(&t.auto[r]),
            100.0 * (t.panel[r].mse / best - 1.0),
            t.chosen[r].join(", "),
        );
    }
    out += &format!(
        "\nStandardised weights (weight × judge sd / reference sd) from a fit on every item; † the member's canary fired (Pr(standardised weight < 0.02) > 0.05).\n\n| rubric | {} |\n|---|{}\n",
        t.judges.join(" | "),
        "---:|".repeat(t.judges.len()),
    );
    for (r, name) in t.rubrics.iter().enumerate() {
        out += &format!(
            "| {name} | {} |\n",
            t.weights[r]
                .iter()
                .map(|(w, c)| format!("{w:.2}{}", if *c { " †" } else { "" }))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    out += &format!(
        "\n{} sub-panels (one per set of members present) fitted on every item of the {} rubrics in {:.1} s.\n",
        t.sub_panels,
        t.rubrics.len(),
        t.sub_panels_seconds
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use judgecal_stats::rng::{Rng, SeedableRng};
    use judgecal_stats::stats::standard_normal;
    use judgecal_stats::train::train_with_groups;
    use judgecal_stats::{Cell, Method, Run};

    /// τ̂ of the systems' bias when `scores` (per anchor) are corrected by the Bayesian line
    /// with each system a group.
    fn tau(anchors: &[&Item], scores: &[f64]) -> f64 {
        let cell = Cell {
            pairs: scores
                .iter()
                .zip(anchors)
                .map(|(&j, i)| (j, i.reference))
                .collect(),
            scale: (-10.0, 10.0),
        };
        let names: Vec<Option<&str>> = anchors.iter().map(|i| Some(i.system.as_str())).collect();
        let never = std::sync::atomic::AtomicBool::new(false);
        let (_, bias) =
            train_with_groups(Method::Bayes, &cell, &names, 1, &Run::new(&never, &|_| {})).unwrap();
        bias.unwrap().tau
    }

    #[test]
    fn a_member_biased_per_system_leaves_less_of_its_bias_in_the_panel() {
        // 12 systems; member 0 is precise but adds its system's own bias (sd 0.4), members 1
        // and 2 are noisier and unbiased. Alone, member 0's corrected scores keep a system
        // bias of about 0.4 × its slope; the panel leans on the unbiased members for it.
        let mut rng = Rng::seed_from_u64(21);
        let bias: Vec<f64> = (0..12).map(|_| 0.4 * standard_normal(&mut rng)).collect();
        let items: Vec<Item> = (0..1200)
            .map(|k| {
                let g = k % 12;
                let q = 3.0 + standard_normal(&mut rng);
                Item {
                    rubric: k % 2,
                    system: format!("s{g}"),
                    story: k as u64,
                    scores: vec![
                        q + bias[g] + 0.3 * standard_normal(&mut rng),
                        q + 0.7 * standard_normal(&mut rng),
                        0.9 * q + 0.7 * standard_normal(&mut rng),
                    ],
                    reference: q + 0.3 * standard_normal(&mut rng),
                }
            })
            .collect();
        let anchors: Vec<&Item> = items.iter().filter(|i| i.rubric == 0).collect();
        let sampler = FitOptions {
            draws: 400,
            warmup: 300,
            ..FitOptions::default()
        };
        // The panel's stacked scores of rubric 0's anchors, cross-fitted in five folds (both
        // rubrics' anchors train it, as a panel pools its rubrics).
        let all: Vec<&Item> = items.iter().collect();
        let fold = cv::folds(all.len(), 5, 3);
        let mut stacked = vec![f64::NAN; all.len()];
        for f in 0..5 {
            let train: Vec<&Item> = (0..all.len())
                .filter(|&i| fold[i] != f)
                .map(|i| all[i])
                .collect();
            let test: Vec<usize> = (0..all.len()).filter(|&i| fold[i] == f).collect();
            let test_items: Vec<&Item> = test.iter().map(|&i| all[i]).collect();
            let p = predict(2, 3, &train, &test_items, None, &sampler).unwrap();
            for (&i, p) in test.iter().zip(p) {
                stacked[i] = p.1;
            }
        }
        let panel_scores: Vec<f64> = (0..all.len())
            .filter(|&i| all[i].rubric == 0)
            .map(|i| stacked[i])
            .collect();
        let member: Vec<f64> = anchors.iter().map(|i| i.scores[0]).collect();
        let (alone, panel) = (tau(&anchors, &member), tau(&anchors, &panel_scores));
        eprintln!("τ̂: biased member alone {alone:.3}, panel {panel:.3}");
        assert!((0.2..=0.6).contains(&alone), "{alone}");
        assert!(panel < 0.7 * alone, "alone {alone}, panel {panel}");
    }
}
