//! How `auto` chooses a corrector per cell: every candidate method predicts the same held-out
//! anchors (the one cross-validation routine, on one fold assignment), and a rule picks the
//! winner on held-out figures. Also used by `judgecal evaluate`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::bayes::RubricPosterior;
use super::corrector::{Cell, Corrected, MeanUncertainty, Run};
use super::cv::{self, Folds, HeldOut, Scheme, Split};
use super::quality::{Comparison, Figures};
use super::{Candidates, Method, Model};

/// A figure a rule compares; lower is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    Mae,
    /// The mean of KL(corrected ‖ reference) and KL(reference ‖ corrected); `kl_sym`, its
    /// old name, is read as this.
    #[serde(alias = "kl_sym")]
    KlMean,
    W1,
    /// |mean(ŷ) − mean(y)|.
    MeanError,
}

impl Objective {
    pub fn of(&self, e: &Figures) -> f64 {
        match self {
            Objective::Mae => e.mae,
            Objective::KlMean => e.kl_mean,
            Objective::W1 => e.w1,
            Objective::MeanError => e.mean_error.abs(),
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Objective::Mae => "mae",
            Objective::KlMean => "kl_mean",
            Objective::W1 => "w1",
            Objective::MeanError => "mean_error",
        }
    }
}

/// How the winner is picked: the lowest `objective`; candidates within `tie_tolerance`
/// (relative) of it are tied, and the lowest `tie_break` among them wins. A candidate whose
/// objective is worse than the raw judge's never wins, so the choice is never worse than
/// doing nothing on the objective.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rule {
    pub objective: Objective,
    pub tie_break: Objective,
    pub tie_tolerance: f64,
}

impl Default for Rule {
    fn default() -> Self {
        Self {
            objective: Objective::Mae,
            tie_break: Objective::KlMean,
            tie_tolerance: 0.01,
        }
    }
}

impl Rule {
    /// The winner among `scored` (which must include the identity) and why it won.
    pub fn choose(&self, scored: &[(Method, Figures)]) -> (Method, String) {
        let raw = scored
            .iter()
            .find(|(c, _)| *c == Method::Identity)
            .map_or(f64::INFINITY, |(_, e)| self.objective.of(e));
        let eligible: Vec<&(Method, Figures)> = scored
            .iter()
            .filter(|(_, e)| {
                let v = self.objective.of(e);
                v.is_finite() && v <= raw
            })
            .collect();
        let Some(best) = eligible
            .iter()
            .map(|(_, e)| self.objective.of(e))
            .min_by(f64::total_cmp)
        else {
            return (
                Method::Identity,
                "no candidate had finite held-out figures; serving the raw judge".into(),
            );
        };
        let limit = best * (1.0 + self.tie_tolerance) + 1e-12;
        let tied: Vec<&&(Method, Figures)> = eligible
            .iter()
            .filter(|(_, e)| self.objective.of(e) <= limit)
            .collect();
        let winner = tied
            .iter()
            .min_by(|a, b| {
                self.tie_break
                    .of(&a.1)
                    .total_cmp(&self.tie_break.of(&b.1))
                    .then(a.0.cmp(&b.0))
            })
            .map_or(Method::Identity, |w| w.0);
        let o = self.objective.as_str();
        let reason = if tied.len() > 1 {
            format!(
                "{} within {:.1}% of the lowest held-out {o} ({best:.4}): {}; lowest {} among them: {winner}",
                tied.len(),
                self.tie_tolerance * 100.0,
                tied.iter()
                    .map(|t| t.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.tie_break.as_str()
            )
        } else {
            format!("lowest held-out {o}: {winner} ({best:.4}; raw judge {raw:.4})")
        };
        (winner, reason)
    }
}

/// A candidate's held-out predictions for one cell, or why it is not a candidate there.
pub type Predictions = (Method, Result<Vec<Option<f64>>, String>);

/// The options of `"method": "auto"`.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoOptions {
    /// The held-out anchors every candidate is judged on.
    pub split: Split,
    pub rule: Rule,
    /// A cell needs this many anchors for the flow to be a candidate.
    pub flow_min_anchors: usize,
    /// Each candidate's settings.
    pub candidates: Candidates,
}

impl AutoOptions {
    /// The fewest anchors a cell needs for `method` to be a candidate.
    pub fn floor(&self, method: Method) -> usize {
        if method == Method::Flow {
            self.flow_min_anchors
        } else {
            method.auto_min_anchors()
        }
    }

    /// Why a cell of `anchors` anchors is too small for `method`, if it is.
    pub fn too_few(&self, method: Method, anchors: usize) -> Option<String> {
        let floor = self.floor(method);
        let option = if method == Method::Flow {
            " (flow_min_anchors)"
        } else {
            ""
        };
        (anchors < floor).then(|| format!("{anchors} anchors; {method} needs {floor}{option}"))
    }
}

/// One candidate's results on a judge: held-out predictions, and its models fitted on every
/// anchor.
struct Tried {
    method: Method,
    held_out: Result<HeldOut, String>,
    models: Result<Vec<Model>, String>,
}

/// What `auto` serves for one cell, why, and the winner's held-out figures.
pub struct Chosen {
    pub model: Model,
    pub decision: Decision,
    pub evaluation: Option<Comparison>,
    /// The winner's held-out predictions of the cell's anchors.
    pub held_out: Vec<Option<Corrected>>,
}

/// `auto` on one judge's cells: every candidate is cross-validated on the same folds and
/// fitted on every anchor; per cell the rule picks among those that have the anchors they need
/// and whose fit passes its own checks (a Bayesian fit that fails its diagnostics is not a
/// candidate), and the winner's model is served. The Bayesian β posterior is kept in the
/// decision whichever method wins, for the canary.
pub fn auto(cells: &[Cell], options: &AutoOptions, run: &Run) -> Result<Vec<Chosen>, String> {
    let sizes: Vec<usize> = cells.iter().map(|c| c.pairs.len()).collect();
    let folds = Folds::new(options.split, &sizes);
    let seed = options.split.seed;
    let methods: Vec<Method> = Method::ALL
        .iter()
        .copied()
        .filter(|&m| sizes.iter().any(|&n| n >= options.floor(m)))
        .collect();
    let total: f64 = methods.iter().map(|m| m.cost()).sum();
    let mut done = 0.0;
    let mut tried = Vec::with_capacity(methods.len());
    for &m in &methods {
        let part = run.part(done / total, (done + m.cost()) / total);
        done += m.cost();
        let rounds = folds.rounds() as f64;
        let cv_share = rounds / (rounds + 1.0);
        run.detail(format!(r#"{{"step": "cross-validating {m}"}}"#));
        let opts = options.candidates.get(m);
        let held_out = opts.cross_validate(cells, &folds, seed, &part.part(0.0, cv_share));
        if run.cancelled() {
            return Err("cancelled".into());
        }
        run.detail(format!(r#"{{"step": "fitting {m} on every anchor"}}"#));
        let models = match &held_out {
            Ok(h) => opts.fit_models(cells, seed, h, &part.part(cv_share, 1.0)),
            Err(e) => Err(e.clone()),
        };
        if run.cancelled() {
            return Err("cancelled".into());
        }
        tried.push(Tried {
            method: m,
            held_out,
            models,
        });
    }
    let mut chosen = Vec::with_capacity(cells.len());
    for (r, cell) in cells.iter().enumerate() {
        let predictions: Vec<Predictions> = Method::ALL
            .iter()
            .map(|&m| {
                let found = tried.iter().find(|t| t.method == m);
                let p = match (options.too_few(m, cell.pairs.len()), found) {
                    (Some(why), _) => Err(why),
                    (None, None) => Err(format!("no cell has the anchors {m} needs")),
                    (None, Some(t)) => match (&t.held_out, &t.models) {
                        (Err(e), _) | (_, Err(e)) => Err(format!("the fit failed: {e}")),
                        (Ok(h), Ok(models)) => match models[r].failure() {
                            Some(why) => Err(format!("failed its diagnostics: {why}")),
                            None => Ok(cv::scores(&h[r])),
                        },
                    },
                };
                (m, p)
            })
            .collect();
        let (mut decision, _) = decide(
            &options.rule,
            options.split.scheme,
            &predictions,
            &cell.pairs,
            cell.scale.0,
            cell.scale.1,
        );
        // The figures recorded for the version are the choice's own, not the winner's on the
        // anchors it won on.
        let evaluation = nested(
            &options.rule,
            options.split.scheme,
            &predictions,
            &cell.pairs,
            cell.scale,
            seed,
        );
        decision.nested = evaluation.map(|c| c.calibrated);
        // The candidate whose model is a line with a posterior (bayes): its β, for the canary.
        decision.beta = tried
            .iter()
            .filter_map(|t| t.models.as_ref().ok())
            .find_map(|models| match models[r].mean_uncertainty() {
                MeanUncertainty::Line(posterior) => Some(*posterior),
                _ => None,
            });
        let winner = tried.iter().find(|t| t.method == decision.chosen);
        let (model, held_out) = winner
            .and_then(|t| Some((t.models.as_ref().ok()?, t.held_out.as_ref().ok()?)))
            .map(|(models, held_out)| (models[r].clone(), held_out[r].clone()))
            .ok_or_else(|| format!("{} won but has no model", decision.chosen))?;
        chosen.push(Chosen {
            model,
            decision,
            evaluation,
            held_out,
        });
    }
    run.report(1.0);
    Ok(chosen)
}

/// One candidate's held-out figures on a cell, or why it was not considered there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Considered {
    pub method: Method,
    pub evaluation: Option<Figures>,
    pub excluded: Option<String>,
}

/// What an automatic choice saw and decided, as a version records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub rule: Rule,
    pub scheme: Scheme,
    pub candidates: Vec<Considered>,
    pub chosen: Method,
    pub reason: String,
    /// The Bayesian fit on every anchor of the cell, kept whichever method won: the β canary
    /// says whether the judge tracks the reference at all.
    pub beta: Option<RubricPosterior>,
    /// The held-out figures of the choice itself, which the version records: each held-out
    /// anchor predicted by the method the rule picks on the other anchors (see [`nested`]).
    /// The winner's entry in `candidates` is its figure on the anchors it won on, optimistic
    /// by the choice. `None` in decisions recorded before.
    #[serde(default)]
    pub nested: Option<Figures>,
}

/// Groups of the nested check of a choice.
const NESTED_GROUPS: usize = 5;

/// The held-out figures of choosing by `rule`, honest about the choice: the held-out anchors
/// are dealt into five seeded groups; for each group the rule chooses on the candidates'
/// held-out predictions of the other four groups' anchors, and the group's anchors take that
/// choice's predictions. No anchor's prediction is picked by a choice that saw its error.
/// (The candidates' predictions come from the one cross-validation, so an anchor still
/// trained the fits that predicted its neighbours; what is removed is the selection's
/// optimism, the part that grows with the number of candidates.)
pub fn nested(
    rule: &Rule,
    scheme: Scheme,
    predictions: &[Predictions],
    pairs: &[(f64, f64)],
    (lo, hi): (f64, f64),
    seed: u64,
) -> Option<Comparison> {
    let group = cv::folds(pairs.len(), NESTED_GROUPS, seed ^ 0x5E1E_C7ED);
    let mut chosen: Vec<Option<f64>> = vec![None; pairs.len()];
    for g in 0..NESTED_GROUPS {
        let others: Vec<Predictions> = predictions
            .iter()
            .map(|(m, p)| {
                let masked = p.as_ref().map(|p| {
                    p.iter()
                        .zip(&group)
                        .map(|(x, &k)| if k == g { None } else { *x })
                        .collect()
                });
                (*m, masked.map_err(Clone::clone))
            })
            .collect();
        let (decision, _) = decide(rule, scheme, &others, pairs, lo, hi);
        let Some((_, Ok(p))) = predictions.iter().find(|(m, _)| *m == decision.chosen) else {
            continue;
        };
        for (i, x) in p.iter().enumerate() {
            if group[i] == g {
                chosen[i] = *x;
            }
        }
    }
    Comparison::of(scheme, &chosen, pairs, lo, hi)
}

/// Decides one cell: `predictions` holds each candidate's held-out predictions (or why it was
/// excluded); `pairs` the cell's anchors; [lo, hi] its scale. Also returns the winner's
/// comparison with the raw judge.
pub fn decide(
    rule: &Rule,
    scheme: Scheme,
    predictions: &[Predictions],
    pairs: &[(f64, f64)],
    lo: f64,
    hi: f64,
) -> (Decision, Option<Comparison>) {
    let mut candidates = Vec::new();
    let mut scored = Vec::new();
    let mut comparisons = Vec::new();
    for (c, p) in predictions {
        match p {
            Ok(p) => {
                let cmp = Comparison::of(scheme, p, pairs, lo, hi);
                if let Some(cmp) = cmp {
                    scored.push((*c, cmp.calibrated));
                }
                candidates.push(Considered {
                    method: *c,
                    evaluation: cmp.map(|c| c.calibrated),
                    excluded: cmp
                        .is_none()
                        .then(|| "fewer than 2 held-out anchors".to_owned()),
                });
                comparisons.push((*c, cmp));
            }
            Err(why) => candidates.push(Considered {
                method: *c,
                evaluation: None,
                excluded: Some(why.clone()),
            }),
        }
    }
    let (chosen, reason) = rule.choose(&scored);
    let comparison = comparisons
        .into_iter()
        .find(|(c, _)| *c == chosen)
        .and_then(|(_, cmp)| cmp);
    (
        Decision {
            rule: *rule,
            scheme,
            candidates,
            chosen,
            reason,
            beta: None,
            nested: None,
        },
        comparison,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(mae: f64, kl: f64) -> Figures {
        Figures {
            n: 10,
            mean_error: 0.0,
            mae,
            pearson: 0.9,
            kl_corrected_reference: kl,
            kl_reference_corrected: kl,
            kl_mean: kl,
            w1: 0.1,
        }
    }

    #[test]
    fn the_lowest_mae_wins_and_kl_breaks_ties() {
        let rule = Rule::default();
        let scored = [
            (Method::Identity, eval(0.70, 0.15)),
            (Method::QuantileMap, eval(0.40, 0.01)),
            (Method::Bayes, eval(0.36, 0.03)),
            (Method::Flow, eval(0.362, 0.02)),
        ];
        // Bayes and flow are within 1% on MAE; the flow's KL is lower.
        let (winner, reason) = rule.choose(&scored);
        assert_eq!(winner, Method::Flow, "{reason}");
        let strict = Rule {
            tie_tolerance: 0.0,
            ..rule
        };
        assert_eq!(strict.choose(&scored).0, Method::Bayes);
    }

    #[test]
    fn the_nested_figure_removes_the_winners_optimism() {
        // Four candidates of exactly equal quality (reference + N(0, 1) each, independently):
        // the winner's own held-out MAE is the lowest of four noisy figures, below the true
        // E|N(0, 1)| = 0.798; the nested figure, each group scored by the choice made on the
        // others, is not.
        use crate::rng::Rng;
        use crate::rng::SeedableRng;
        let mut rng = Rng::seed_from_u64(4);
        let truth = (2.0 / std::f64::consts::PI).sqrt();
        let (mut won, mut nested_sum) = (0.0, 0.0);
        let reps: u32 = 300;
        for rep in 0..reps {
            let pairs: Vec<(f64, f64)> = (0..100).map(|i| (0.0, f64::from(i) / 20.0)).collect();
            let mut preds: Vec<Predictions> = vec![(
                Method::Identity,
                Ok(pairs.iter().map(|p| Some(p.1 + 3.0)).collect()),
            )];
            for m in [
                Method::QuantileMap,
                Method::Bayes,
                Method::Flow,
                Method::Isotonic,
            ] {
                let p = pairs
                    .iter()
                    .map(|p| Some(p.1 + crate::stats::standard_normal(&mut rng)))
                    .collect();
                preds.push((m, Ok(p)));
            }
            let rule = Rule::default();
            let scheme = Scheme::Folds(5);
            let (decision, cmp) = decide(&rule, scheme, &preds, &pairs, -10.0, 20.0);
            assert_ne!(decision.chosen, Method::Identity);
            won += cmp.unwrap().calibrated.mae;
            let nested =
                nested(&rule, scheme, &preds, &pairs, (-10.0, 20.0), u64::from(rep)).unwrap();
            assert_eq!(nested.calibrated.n, 100);
            nested_sum += nested.calibrated.mae;
        }
        let (won, nested) = (won / f64::from(reps), nested_sum / f64::from(reps));
        eprintln!("winner's own MAE {won:.4}, nested {nested:.4}, truth {truth:.4}");
        assert!(won < truth - 0.04, "{won}");
        assert!((nested - truth).abs() < 0.015, "{nested}");
    }

    #[test]
    fn never_worse_than_the_raw_judge() {
        // Every corrector loses to the raw judge on MAE (a ceiling), and one ties it within
        // tolerance with a far better KL: the raw judge still wins.
        let rule = Rule::default();
        let scored = [
            (Method::Identity, eval(0.50, 0.20)),
            (Method::QuantileMap, eval(0.503, 0.01)),
            (Method::Bayes, eval(0.60, 0.05)),
        ];
        assert_eq!(rule.choose(&scored).0, Method::Identity);
        let nan = [
            (Method::Identity, eval(0.50, 0.20)),
            (Method::Bayes, eval(f64::NAN, 0.05)),
        ];
        assert_eq!(rule.choose(&nan).0, Method::Identity);
    }

    #[test]
    fn every_candidate_predicts_the_same_held_out_anchors() {
        // y = 1 + 0.5·j exactly: the line and the quantile map recover it; identity does not.
        let cells = vec![Cell {
            pairs: (0..60)
                .map(|i| {
                    let j = 1.0 + 4.0 * ((i * 37) % 60) as f64 / 59.0;
                    (j, 1.0 + 0.5 * j)
                })
                .collect(),
            scale: (1.0, 5.0),
        }];
        let split = Split {
            scheme: Scheme::Folds(3),
            seed: 5,
        };
        let folds = Folds::new(split, &[60]);
        let never = std::sync::atomic::AtomicBool::new(false);
        let run = Run::new(&never, &|_| {});
        let mut preds: Vec<Predictions> = Vec::new();
        for m in [Method::Identity, Method::QuantileMap] {
            let p = Candidates::default()
                .get(m)
                .cross_validate(&cells, &folds, 5, &run)
                .unwrap();
            assert!(p[0].iter().all(Option::is_some));
            preds.push((m, Ok(cv::scores(&p[0]))));
        }
        preds.push((
            Method::Flow,
            Err("fewer anchors than flow_min_anchors".into()),
        ));
        let (decision, cmp) = decide(
            &Rule::default(),
            split.scheme,
            &preds,
            &cells[0].pairs,
            1.0,
            5.0,
        );
        assert_eq!(decision.chosen, Method::QuantileMap, "{}", decision.reason);
        let cmp = cmp.unwrap();
        assert!(cmp.calibrated.mae < 0.05, "{:?}", cmp.calibrated);
        assert!(cmp.raw.mae > 0.3);
        assert_eq!(decision.candidates.len(), 3);
        assert!(decision.candidates[2].excluded.is_some());
    }
}
