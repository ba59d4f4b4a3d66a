//! `auto`'s choice of the calibrated preference (`super::preference`): each candidate map
//! cross-fitted over seeded folds, scored by held-out log-loss and accuracy beside the raw
//! verdict, and the lowest-loss one fitted on every row. A panel's rows add each member alone
//! as candidates.

use super::preference::{
    Candidate, Inputs, Labelled, PreferenceMap, SystemTerms, Verdicts, fit_with, reading,
    system_terms,
};
use crate::rng::{Rng, SeedableRng, SliceRandom};

/// Held-out figures of a preference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeldOutMap {
    /// Mean log-loss, −[y ln p + (1 − y) ln(1 − p)], in nats.
    pub log_loss: f64,
    /// The share of comparisons whose more likely side people preferred (an even call, or a
    /// tie of the people's, counts ½).
    pub accuracy: f64,
    pub comparisons: usize,
}

fn score(predictions: &[(f64, f64)]) -> HeldOutMap {
    let n = predictions.len().max(1) as f64;
    let eps = 1e-12;
    let log_loss = predictions
        .iter()
        .map(|&(p, y)| {
            let p = p.clamp(eps, 1.0 - eps);
            -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
        })
        .sum::<f64>()
        / n;
    let accuracy = predictions
        .iter()
        .map(|&(p, y)| {
            if (p - 0.5).abs() < 1e-12 {
                0.5
            } else if p > 0.5 {
                y
            } else {
                1.0 - y
            }
        })
        .sum::<f64>()
        / n;
    HeldOutMap {
        log_loss,
        accuracy,
        comparisons: predictions.len(),
    }
}

/// The raw verdict read as a probability: its verdicts averaged over the orders it gave,
/// pulled in to [`RAW_SURE`] (a verdict of 1 is read as 95% sure: a 0/1 verdict that people
/// overturn would have an infinite log-loss).
pub fn raw(rows: &[Labelled]) -> HeldOutMap {
    let p: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| {
            let v = &r.verdicts;
            let v = match v.swapped {
                Some(s) => (v.verdict + s) / 2.0,
                None => v.verdict,
            };
            (0.5 + (v - 0.5) * (2.0 * RAW_SURE - 1.0), r.preference)
        })
        .collect();
    score(&p)
}

/// How sure a raw verdict of 1 is read to be.
pub const RAW_SURE: f64 = 0.95;

/// A map cross-fitted over seeded folds: each fold's map (fitted on the other folds), each
/// row's fold, and the held-out figures of every row predicted by its fold's map.
#[derive(Debug, Clone)]
pub struct CrossFit {
    pub maps: Vec<PreferenceMap>,
    pub fold_of: Vec<usize>,
    pub held_out: HeldOutMap,
}

impl CrossFit {
    /// Row `i`'s held-out prediction (by the map that did not see it).
    pub fn held_out_prediction(&self, i: usize, v: &Verdicts) -> f64 {
        self.maps[self.fold_of[i]].predict(v)
    }

    /// A new comparison's prediction: the mean of the folds' maps (none of which is favoured
    /// by the rows it saw).
    pub fn predict(&self, v: &Verdicts) -> f64 {
        self.maps.iter().map(|m| m.predict(v)).sum::<f64>() / self.maps.len() as f64
    }
}

/// The map reading `inputs` (and `systems`' terms), cross-fitted over `folds` seeded folds.
pub fn cross_fit(
    rows: &[Labelled],
    inputs: Inputs,
    systems: Option<SystemTerms>,
    folds: usize,
    seed: u64,
) -> Result<CrossFit, String> {
    let folds = folds.clamp(2, rows.len().max(2));
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.shuffle(&mut Rng::seed_from_u64(seed));
    let mut fold_of = vec![0; rows.len()];
    for (rank, &i) in order.iter().enumerate() {
        fold_of[i] = rank % folds;
    }
    let maps = (0..folds)
        .map(|f| {
            let train: Vec<Labelled> = (0..rows.len())
                .filter(|&i| fold_of[i] != f)
                .map(|i| rows[i].clone())
                .collect();
            fit_with(&train, inputs, systems).map(|(map, _)| map)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let predictions: Vec<(f64, f64)> = rows
        .iter()
        .zip(&fold_of)
        .map(|(r, &f)| (maps[f].predict(&r.verdicts), r.preference))
        .collect();
    Ok(CrossFit {
        maps,
        fold_of,
        held_out: score(&predictions),
    })
}

/// The map reading `inputs`, cross-fitted over `folds` seeded folds: each fold predicted by
/// the map fitted on the others.
pub fn held_out(
    rows: &[Labelled],
    inputs: Inputs,
    folds: usize,
    seed: u64,
) -> Result<HeldOutMap, String> {
    cross_fit(rows, inputs, None, folds, seed).map(|c| c.held_out)
}

/// `auto`'s choice: every candidate's held-out figures, and the one of lowest held-out
/// log-loss, fitted on every row and cross-fitted.
#[derive(Debug, Clone)]
pub struct Choice {
    pub candidate: Candidate,
    pub map: PreferenceMap,
    pub cross_fit: CrossFit,
    pub candidates: Vec<(Candidate, HeldOutMap)>,
}

/// Chooses among the candidates the rows can feed by held-out log-loss: both orders where
/// any row has a swapped verdict, covariates where the rows carry some, per-system terms
/// where `systems` (the number of systems the rows' indices run over) is 2 or more. The
/// per-system terms' prior sd is chosen on every row by evidence, before the folds.
pub fn choose(
    rows: &[Labelled],
    systems: Option<usize>,
    folds: usize,
    seed: u64,
) -> Result<Choice, String> {
    choose_among(rows, systems, folds, seed, None)
}

/// As [`choose`], over `only` where given (a stored version's choice, fitted again on the rows
/// of now); an error where the rows cannot feed it (no swapped verdict, no covariates, fewer
/// than two systems).
pub fn choose_among(
    rows: &[Labelled],
    systems: Option<usize>,
    folds: usize,
    seed: u64,
    only: Option<Candidate>,
) -> Result<Choice, String> {
    let swapped = rows.iter().any(|r| r.verdicts.swapped.is_some());
    let covariates = rows
        .first()
        .is_some_and(|r| !r.verdicts.covariates.is_empty());
    let mut candidates = vec![Inputs::Verdict];
    if swapped {
        candidates.push(Inputs::BothOrders);
    }
    if covariates {
        // Without a swapped verdict its missing indicator is constant: the prior keeps that
        // weight beside the intercept's.
        candidates.push(Inputs::WithCovariates);
    }
    let per_system = systems.filter(|&k| k >= 2);
    let mut fits: Vec<(Candidate, Option<SystemTerms>, CrossFit)> = Vec::new();
    let wanted = |c: Candidate| only.is_none_or(|o| o == c);
    // A panel's rows: the panel's map and each member's alone.
    let members = rows.first().map_or(0, |r| r.verdicts.members.len());
    for alone in std::iter::once(None).chain((0..members).map(Some)) {
        let read = reading(rows, alone);
        for &inputs in &candidates {
            let plain = Candidate {
                inputs,
                systems: false,
                alone,
            };
            if wanted(plain) {
                let fit = cross_fit(&read, inputs, None, folds, seed)?;
                fits.push((plain, None, fit.reading_member(members, alone)));
            }
            let with_systems = Candidate {
                systems: true,
                ..plain
            };
            if let Some(count) = per_system.filter(|_| wanted(with_systems)) {
                let terms = system_terms(&read, inputs, count)?;
                let fit = cross_fit(&read, inputs, Some(terms), folds, seed)?;
                fits.push((
                    with_systems,
                    Some(terms),
                    fit.reading_member(members, alone),
                ));
            }
        }
    }
    if let (Some(o), true) = (only, fits.is_empty()) {
        return Err(format!(
            "these comparisons cannot feed the map {}",
            o.name()
        ));
    }
    let table: Vec<(Candidate, HeldOutMap)> =
        fits.iter().map(|(c, _, f)| (*c, f.held_out)).collect();
    let (candidate, terms, cross_fit) = fits
        .into_iter()
        .min_by(|a, b| a.2.held_out.log_loss.total_cmp(&b.2.held_out.log_loss))
        .ok_or("no candidate to choose from")?;
    let (map, _) = fit_with(&reading(rows, candidate.alone), candidate.inputs, terms)?;
    Ok(Choice {
        candidate,
        map: map.reading_member(members, candidate.alone),
        cross_fit,
        candidates: table,
    })
}

impl CrossFit {
    fn reading_member(mut self, members: usize, alone: Option<usize>) -> Self {
        self.maps = self
            .maps
            .into_iter()
            .map(|m| m.reading_member(members, alone))
            .collect();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairwise::preference::fit;
    use crate::pairwise::sigmoid;
    use crate::rng::RngExt;
    use crate::stats::standard_normal;

    /// People prefer a with chance σ(2q), q ~ N(0, 1) the answers' quality gap; the judge
    /// sees the gap with noise (sd 0.5), favours the answer shown first by `position` and the
    /// longer answer by `length` (per unit of the log length ratio, which also tracks quality
    /// a little), and names a winner in each order.
    fn world(n: usize, position: f64, length: f64, rng: &mut Rng) -> Vec<Labelled> {
        (0..n)
            .map(|_| {
                let q = standard_normal(rng);
                let ratio = 0.3 * q + standard_normal(rng);
                let seen = q + 0.5 * standard_normal(rng) + length * ratio;
                let first = f64::from(u8::from(seen + position > 0.0));
                // Swapped: b is shown first, so the bias helps b.
                let swapped = f64::from(u8::from(seen - position > 0.0));
                let preference = f64::from(u8::from(rng.random::<f64>() < sigmoid(2.0 * q)));
                Labelled {
                    verdicts: Verdicts {
                        verdict: first,
                        swapped: Some(swapped),
                        covariates: vec![ratio],
                        systems: None,
                        members: Vec::new(),
                    },
                    preference,
                }
            })
            .collect()
    }

    #[test]
    fn a_stored_choice_is_fitted_again_alone_or_refused_where_the_rows_cannot_feed_it() {
        for inputs in Inputs::ALL {
            for systems in [false, true] {
                let c = Candidate {
                    inputs,
                    systems,
                    alone: None,
                };
                assert_eq!(Candidate::parse(&c.name()), Some(c));
                let c = Candidate {
                    alone: Some(2),
                    ..c
                };
                assert_eq!(Candidate::parse(&c.name()), Some(c));
            }
        }
        assert_eq!(Candidate::parse("both orders + everything"), None);
        let rows = world(400, 1.0, 0.5, &mut Rng::seed_from_u64(8));
        let only = Candidate {
            inputs: Inputs::BothOrders,
            systems: false,
            alone: None,
        };
        let chosen = choose_among(&rows, None, 5, 0, Some(only)).expect("fitted");
        assert_eq!((chosen.candidate, chosen.candidates.len()), (only, 1));
        // The same folds as `auto`'s: the same held-out figures for that candidate.
        let all = choose(&rows, None, 5, 0).expect("auto");
        let same = all
            .candidates
            .iter()
            .find(|(c, _)| *c == only)
            .expect("a candidate");
        assert_eq!(same.1, chosen.candidates[0].1);
        // Per-system terms need systems; without a swapped verdict, both orders cannot be read.
        let with_systems = Candidate {
            systems: true,
            ..only
        };
        assert!(choose_among(&rows, None, 5, 0, Some(with_systems)).is_err());
        let one_order: Vec<Labelled> = rows
            .iter()
            .map(|r| Labelled {
                verdicts: Verdicts {
                    swapped: None,
                    ..r.verdicts.clone()
                },
                ..r.clone()
            })
            .collect();
        assert!(choose_among(&one_order, None, 5, 0, Some(only)).is_err());
    }

    /// Held-out log-loss falls with each input that carries a bias the judge has, and is no
    /// worse (within 0.01 nats) where it has none. Measured (3,000 comparisons, 10 folds):
    /// position- and length-biased judge 0.630 (verdict) → 0.591 (both orders) → 0.576 (and
    /// the length), the raw verdict 0.660; a fair judge 0.578 → 0.578 → 0.572 (the length
    /// tracks quality a little, which a 0/1 verdict loses).
    #[test]
    fn the_swapped_verdict_and_the_length_lower_held_out_loss_where_the_judge_is_biased() {
        let mut rng = Rng::seed_from_u64(5);
        let biased = world(3_000, 1.0, 0.8, &mut rng);
        let loss = |rows: &[Labelled], inputs| held_out(rows, inputs, 10, 1).expect("fit").log_loss;
        let [alone, both, with] = Inputs::ALL.map(|i| loss(&biased, i));
        eprintln!(
            "biased: {alone:.4} {both:.4} {with:.4}, raw {:.4}",
            raw(&biased).log_loss
        );
        assert!(both < alone - 0.01, "{alone} {both}");
        assert!(with < both - 0.01, "{both} {with}");
        // Every calibrated candidate beats the raw verdict read as 95% sure.
        assert!(alone < raw(&biased).log_loss, "{alone}");
        let fair = world(3_000, 0.0, 0.0, &mut rng);
        let [alone, both, with] = Inputs::ALL.map(|i| loss(&fair, i));
        eprintln!("fair: {alone:.4} {both:.4} {with:.4}");
        assert!(
            both < alone + 0.01 && with < both + 0.01,
            "{alone} {both} {with}"
        );
    }

    /// A panel's map reads each member's verdicts: two judges that see the answers' quality
    /// gap through independent noise (one favouring the answer shown first) and one that
    /// guesses. Held out, the panel's map beats each member's own map, and the guessing
    /// member's weight is zero within its error.
    #[test]
    fn a_panel_map_weighs_its_members_and_beats_each_alone() {
        let mut rng = Rng::seed_from_u64(11);
        let call = |x: f64| f64::from(u8::from(x > 0.0));
        let rows: Vec<Labelled> = (0..3_000)
            .map(|_| {
                let q = standard_normal(&mut rng);
                let first = q + standard_normal(&mut rng);
                let second = q + standard_normal(&mut rng);
                let members = vec![
                    (call(first + 0.6), Some(call(first - 0.6))),
                    (call(second), None),
                    (call(standard_normal(&mut rng)), None),
                ];
                let preference = f64::from(u8::from(rng.random::<f64>() < sigmoid(2.0 * q)));
                Labelled {
                    verdicts: Verdicts::of_panel(members),
                    preference,
                }
            })
            .collect();
        let panel = choose(&rows, None, 5, 2).expect("the panel's map");
        assert_eq!(panel.map.members, 3);
        let alone: Vec<f64> = (0..3)
            .map(|m| {
                let own: Vec<Labelled> = rows
                    .iter()
                    .map(|r| {
                        let (v, s) = r.verdicts.members[m];
                        Labelled {
                            verdicts: Verdicts::of(v, s),
                            preference: r.preference,
                        }
                    })
                    .collect();
                choose(&own, None, 5, 2)
                    .expect("alone")
                    .cross_fit
                    .held_out
                    .log_loss
            })
            .collect();
        let best = alone.iter().copied().fold(f64::INFINITY, f64::min);
        let loss = panel.cross_fit.held_out.log_loss;
        eprintln!(
            "panel {loss:.4} ({}), alone {alone:?}",
            panel.candidate.name()
        );
        assert!(loss < best - 0.01, "panel {loss}, best member {best}");
        // The guesser's verdict: weight index 1 + 3 per member before it (both orders read).
        let d = panel.map.weights.len();
        let j = if panel.map.inputs == Inputs::Verdict {
            3
        } else {
            7
        };
        let (w, se) = (panel.map.weights[j], panel.map.covariance[j * d + j].sqrt());
        assert!(w.abs() < 3.0 * se, "the guesser's weight {w} ± {se}");
        // A map fitted on a panel's rows refuses rows of another panel size.
        let mut mixed = rows[..50].to_vec();
        mixed.push(Labelled {
            verdicts: Verdicts::of(1.0, None),
            preference: 1.0,
        });
        assert!(fit(&mixed, Inputs::Verdict).is_err());
    }
}
