//! Choosing a corrector by its held-out figures: every candidate (the raw judge, the quantile
//! map, the Bayesian line, the flow) predicts the same held-out anchors, and a rule picks the
//! winner per cell. Used by `"method": "auto"` jobs, `judgecal evaluate` and
//! `judgecal experiment`.

use std::fmt;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use super::bayes::{self, FitOptions, RubricPosterior, SufficientStats};
use super::flow::{self, FlowOptions, Table};
use super::metrics::{Comparison, Evaluation, Scheme};
use super::quantile::QuantileMap;

/// A corrector that can be fitted and compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Candidate {
    /// The raw judge score, uncorrected: what doing nothing gives.
    Identity,
    QuantileMap,
    Bayes,
    Flow,
}

impl Candidate {
    pub const ALL: [Candidate; 4] = [
        Candidate::Identity,
        Candidate::QuantileMap,
        Candidate::Bayes,
        Candidate::Flow,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Candidate::Identity => "identity",
            Candidate::QuantileMap => "quantile_map",
            Candidate::Bayes => "bayes",
            Candidate::Flow => "flow",
        }
    }

    /// Accepts `raw` for the identity, as the paper calls it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        match raw {
            "raw" => Ok(Candidate::Identity),
            _ => Self::ALL
                .into_iter()
                .find(|c| c.as_str() == raw)
                .ok_or_else(|| {
                    format!(
                        "unknown method {raw:?}; one of raw, identity, quantile_map, bayes, flow"
                    )
                }),
        }
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A figure a rule compares; lower is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    Mae,
    KlSym,
    W1,
    /// |mean(ŷ) − mean(y)|.
    MeanError,
}

impl Objective {
    pub fn of(&self, e: &Evaluation) -> f64 {
        match self {
            Objective::Mae => e.mae,
            Objective::KlSym => e.kl_sym,
            Objective::W1 => e.w1,
            Objective::MeanError => e.mean_error.abs(),
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Objective::Mae => "mae",
            Objective::KlSym => "kl_sym",
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
            tie_break: Objective::KlSym,
            tie_tolerance: 0.01,
        }
    }
}

impl Rule {
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=0.5).contains(&self.tie_tolerance) {
            return Err(format!(
                "tie_tolerance (relative) must lie in [0, 0.5]; got {}",
                self.tie_tolerance
            ));
        }
        Ok(())
    }

    /// The winner among `scored` (which must include the identity) and why it won.
    pub fn choose(&self, scored: &[(Candidate, Evaluation)]) -> (Candidate, String) {
        let raw = scored
            .iter()
            .find(|(c, _)| *c == Candidate::Identity)
            .map_or(f64::INFINITY, |(_, e)| self.objective.of(e));
        let eligible: Vec<&(Candidate, Evaluation)> = scored
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
                Candidate::Identity,
                "no candidate had finite held-out figures; serving the raw judge".into(),
            );
        };
        let limit = best * (1.0 + self.tie_tolerance) + 1e-12;
        let tied: Vec<&&(Candidate, Evaluation)> = eligible
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
            .map_or(Candidate::Identity, |w| w.0);
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

/// The fitting settings of the methods that have any.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Settings {
    pub bayes: FitOptions,
    pub flow: FlowOptions,
}

/// What a candidate fitted on one judge's rubrics.
pub enum Fitted {
    Identity,
    QuantileMap(Vec<QuantileMap>),
    Bayes(Box<bayes::Fit>),
    Flow {
        weights: Box<flow::FlowWeights>,
        tables: Vec<Table>,
    },
}

impl Fitted {
    /// The corrected score of judge score `j` on rubric `r`.
    pub fn correct(&self, r: usize, j: f64) -> Result<f64, String> {
        Ok(match self {
            Fitted::Identity => j,
            Fitted::QuantileMap(maps) => maps[r].correct(j),
            Fitted::Bayes(fit) => fit.rubrics[r].correct(j).score,
            Fitted::Flow { weights, tables } => match tables[r].correct(j) {
                Some((score, _)) => score,
                None => weights.correct_direct(r, &[j])?[0].0,
            },
        })
    }
}

/// Fits `candidate` to `train[r]` = rubric r's (judge, reference) pairs; `ranges[r]` is the
/// judge-score range a flow tabulates for rubric r.
pub fn fit(
    candidate: Candidate,
    settings: &Settings,
    train: &[Vec<(f64, f64)>],
    ranges: &[(f64, f64)],
    cancel: &AtomicBool,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<Fitted, String> {
    Ok(match candidate {
        Candidate::Identity => Fitted::Identity,
        Candidate::QuantileMap => Fitted::QuantileMap(
            train
                .iter()
                .map(|d| QuantileMap::fit(d))
                .collect::<Result<_, _>>()?,
        ),
        Candidate::Bayes => {
            let stats: Vec<SufficientStats> = train
                .iter()
                .map(|d| SufficientStats::from_pairs(d.iter().copied()))
                .collect();
            Fitted::Bayes(Box::new(bayes::fit(&stats, &settings.bayes, &|p| {
                progress(p)
            })?))
        }
        Candidate::Flow => {
            let epochs = settings.flow.epochs as f64;
            let weights = flow::train(
                train,
                &settings.flow,
                &|e| progress(e.epoch as f64 / epochs),
                cancel,
            )?;
            let tables = ranges
                .iter()
                .enumerate()
                .map(|(r, &(lo, hi))| Table::build(&weights, r, lo, hi, flow::TABLE_POINTS))
                .collect::<Result<_, _>>()?;
            Fitted::Flow {
                weights: Box::new(weights),
                tables,
            }
        }
    })
}

/// Which round holds out each anchor: `scheme.rounds` per rubric, seeded per rubric, so every
/// candidate sees the same split.
pub fn assignment(scheme: Scheme, data: &[Vec<(f64, f64)>], seed: u64) -> Vec<Vec<Option<usize>>> {
    data.iter()
        .enumerate()
        .map(|(r, d)| {
            scheme
                .rounds(d.len(), seed ^ (r as u64).wrapping_mul(0x9E37))
                .1
        })
        .collect()
}

/// Held-out predictions of `candidate`: in each round it is fitted on the anchors not held
/// out and predicts those that are. `out[r][i]` is `None` for anchors never held out.
#[allow(clippy::too_many_arguments)]
pub fn cross_validate(
    candidate: Candidate,
    settings: &Settings,
    data: &[Vec<(f64, f64)>],
    ranges: &[(f64, f64)],
    scheme: Scheme,
    assignment: &[Vec<Option<usize>>],
    cancel: &AtomicBool,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<HeldOut, String> {
    let rounds = match scheme {
        Scheme::Folds(k) => k,
        Scheme::Holdout(_) => 1,
    };
    let mut out: Vec<Vec<Option<f64>>> = data.iter().map(|d| vec![None; d.len()]).collect();
    for round in 0..rounds {
        let held = |r: usize, i: usize| assignment[r][i] == Some(round);
        let train: Vec<Vec<(f64, f64)>> = data
            .iter()
            .enumerate()
            .map(|(r, d)| {
                d.iter()
                    .enumerate()
                    .filter(|(i, _)| !held(r, *i))
                    .map(|(_, p)| *p)
                    .collect()
            })
            .collect();
        let fitted = fit(candidate, settings, &train, ranges, cancel, &|p| {
            progress((round as f64 + p) / rounds as f64)
        })?;
        for (r, d) in data.iter().enumerate() {
            for (i, (j, _)) in d.iter().enumerate() {
                if held(r, i) {
                    out[r][i] = Some(fitted.correct(r, *j)?);
                }
            }
        }
    }
    progress(1.0);
    Ok(out)
}

/// Held-out predictions: per rubric, per anchor (`None` where never held out).
pub type HeldOut = Vec<Vec<Option<f64>>>;

/// A candidate's held-out predictions for one cell, or why it is not a candidate there.
pub type Predictions<'a> = (Candidate, Result<&'a [Option<f64>], String>);

/// Cell `r`'s predictions from every candidate's held-out run (`held_out`, per rubric): the
/// flow is not a candidate where the cell has fewer than `flow_min_anchors` of its `anchors`.
pub fn cell_predictions(
    held_out: &[(Candidate, Result<HeldOut, String>)],
    r: usize,
    anchors: usize,
    flow_min_anchors: usize,
) -> Vec<Predictions<'_>> {
    held_out
        .iter()
        .map(|(c, p)| {
            let p = match p {
                Ok(_) if *c == Candidate::Flow && anchors < flow_min_anchors => Err(format!(
                    "{anchors} anchors; the flow needs flow_min_anchors = {flow_min_anchors}"
                )),
                Ok(p) => Ok(p[r].as_slice()),
                Err(e) => Err(e.clone()),
            };
            (*c, p)
        })
        .collect()
}

/// One candidate's held-out figures on a cell, or why it was not considered there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Considered {
    pub method: Candidate,
    pub evaluation: Option<Evaluation>,
    pub excluded: Option<String>,
}

/// What an automatic choice saw and decided, as a version records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub rule: Rule,
    pub scheme: Scheme,
    pub candidates: Vec<Considered>,
    pub chosen: Candidate,
    pub reason: String,
    /// The Bayesian fit on every anchor of the cell, kept whichever method won: the β canary
    /// says whether the judge tracks the reference at all.
    pub beta: Option<RubricPosterior>,
}

/// Decides one cell: `predictions` holds each candidate's held-out predictions (or why it was
/// excluded); `pairs` the cell's anchors; [lo, hi] its scale. Also returns the winner's
/// comparison with the raw judge.
pub fn decide(
    rule: &Rule,
    scheme: Scheme,
    predictions: &[Predictions<'_>],
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
        },
        comparison,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(mae: f64, kl: f64) -> Evaluation {
        Evaluation {
            n: 10,
            mean_error: 0.0,
            mae,
            pearson: 0.9,
            kl_sym: kl,
            w1: 0.1,
        }
    }

    #[test]
    fn the_lowest_mae_wins_and_kl_breaks_ties() {
        let rule = Rule::default();
        let scored = [
            (Candidate::Identity, eval(0.70, 0.15)),
            (Candidate::QuantileMap, eval(0.40, 0.01)),
            (Candidate::Bayes, eval(0.36, 0.03)),
            (Candidate::Flow, eval(0.362, 0.02)),
        ];
        // Bayes and flow are within 1% on MAE; the flow's KL is lower.
        let (winner, reason) = rule.choose(&scored);
        assert_eq!(winner, Candidate::Flow, "{reason}");
        let strict = Rule {
            tie_tolerance: 0.0,
            ..rule
        };
        assert_eq!(strict.choose(&scored).0, Candidate::Bayes);
    }

    #[test]
    fn never_worse_than_the_raw_judge() {
        // Every corrector loses to the raw judge on MAE (a ceiling), and one ties it within
        // tolerance with a far better KL: the raw judge still wins.
        let rule = Rule::default();
        let scored = [
            (Candidate::Identity, eval(0.50, 0.20)),
            (Candidate::QuantileMap, eval(0.503, 0.01)),
            (Candidate::Bayes, eval(0.60, 0.05)),
        ];
        assert_eq!(rule.choose(&scored).0, Candidate::Identity);
        let nan = [
            (Candidate::Identity, eval(0.50, 0.20)),
            (Candidate::Bayes, eval(f64::NAN, 0.05)),
        ];
        assert_eq!(rule.choose(&nan).0, Candidate::Identity);
    }

    #[test]
    fn every_candidate_predicts_the_same_held_out_anchors() {
        // y = 1 + 0.5·j exactly: the line and the quantile map recover it; identity does not.
        let data: Vec<Vec<(f64, f64)>> = vec![
            (0..60)
                .map(|i| {
                    let j = 1.0 + 4.0 * ((i * 37) % 60) as f64 / 59.0;
                    (j, 1.0 + 0.5 * j)
                })
                .collect(),
        ];
        let scheme = Scheme::Folds(3);
        let a = assignment(scheme, &data, 5);
        let settings = Settings::default();
        let cancel = AtomicBool::new(false);
        let ranges = [(0.0, 6.0)];
        let mut preds = Vec::new();
        for c in [Candidate::Identity, Candidate::QuantileMap] {
            let p =
                cross_validate(c, &settings, &data, &ranges, scheme, &a, &cancel, &|_| {}).unwrap();
            assert!(p[0].iter().all(Option::is_some));
            preds.push((c, p));
        }
        let args: Vec<Predictions<'_>> = preds
            .iter()
            .map(|(c, p)| (*c, Ok(p[0].as_slice())))
            .chain([(
                Candidate::Flow,
                Err("fewer anchors than flow_min_anchors".into()),
            )])
            .collect();
        let (decision, cmp) = decide(&Rule::default(), scheme, &args, &data[0], 1.0, 5.0);
        assert_eq!(
            decision.chosen,
            Candidate::QuantileMap,
            "{}",
            decision.reason
        );
        let cmp = cmp.unwrap();
        assert!(cmp.calibrated.mae < 0.05, "{:?}", cmp.calibrated);
        assert!(cmp.raw.mae > 0.3);
        assert_eq!(decision.candidates.len(), 3);
        assert!(decision.candidates[2].excluded.is_some());
    }
}
