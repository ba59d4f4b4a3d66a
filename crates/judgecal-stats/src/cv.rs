//! Cross-validation: one fold assignment and one routine for every method, for `auto` and for
//! `judgecal evaluate`. The same anchors and seed give the same folds whichever path asks, so
//! held-out figures recorded by different jobs mean the same thing.

use std::sync::atomic::Ordering;

use super::corrector::{Cell, Corrected, Corrector, Run};
pub use super::corrector::{Scheme, folds};

/// How held-out anchors are chosen: the scheme and the seed of the shuffle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    pub scheme: Scheme,
    pub seed: u64,
}

/// Which round holds out each anchor of each rubric. Rubric r is shuffled with its own seed
/// (`seed ^ r·0x9E37`), so adding a rubric does not move another's folds.
#[derive(Debug, Clone, PartialEq)]
pub struct Folds {
    rounds: usize,
    held: Vec<Vec<Option<usize>>>,
}

impl Folds {
    /// The folds of rubrics with `sizes[r]` anchors each.
    pub fn new(split: Split, sizes: &[usize]) -> Self {
        let mut rounds = match split.scheme {
            Scheme::Folds(k) => k,
            Scheme::Holdout(_) => 1,
        };
        let held = sizes
            .iter()
            .enumerate()
            .map(|(r, &n)| {
                let (k, held) = split
                    .scheme
                    .rounds(n, split.seed ^ (r as u64).wrapping_mul(0x9E37));
                rounds = k;
                held
            })
            .collect();
        Self { rounds, held }
    }

    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// Whether anchor `i` of rubric `r` is held out in `round`.
    pub fn held(&self, r: usize, i: usize, round: usize) -> bool {
        self.held[r][i] == Some(round)
    }

    /// Each rubric's anchors without those held out in `round`.
    pub fn train(&self, cells: &[Cell], round: usize) -> Vec<Cell> {
        cells
            .iter()
            .enumerate()
            .map(|(r, c)| Cell {
                pairs: c
                    .pairs
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !self.held(r, *i, round))
                    .map(|(_, p)| *p)
                    .collect(),
                scale: c.scale,
            })
            .collect()
    }
}

/// Held-out predictions: per rubric, per anchor (`None` for anchors never held out).
pub type HeldOut = Vec<Vec<Option<Corrected>>>;

/// The corrected scores of held-out predictions.
pub fn scores(held_out: &[Option<Corrected>]) -> Vec<Option<f64>> {
    held_out.iter().map(|c| c.map(|c| c.score)).collect()
}

/// A single round's fit, with each rubric's count of anchors it was trained on.
pub type RoundFit<F> = Option<(F, Vec<usize>)>;

/// Held-out predictions of method `C`: in each round it is fitted on the anchors not held out
/// (seed `seed + 1 + round`) and predicts those that are. With a single round the fit is
/// returned too, with each rubric's count of anchors it was trained on, for a method that
/// serves the fit it was evaluated on.
pub fn cross_validate<C: Corrector>(
    options: &C::Options,
    cells: &[Cell],
    folds: &Folds,
    seed: u64,
    run: &Run,
) -> Result<(HeldOut, RoundFit<C::Fit>), String> {
    let rounds = folds.rounds();
    // One round: its fit, and the predictions of the anchors it held out.
    let one = |round: usize, part: &Run| -> Result<Option<RoundOutcome<C::Fit>>, String> {
        if part.cancelled() {
            return Err("cancelled".into());
        }
        let train = folds.train(cells, round);
        if train.iter().all(|c| c.pairs.is_empty()) {
            return Ok(None);
        }
        let fit = C::fit(options, &train, seed.wrapping_add(1 + round as u64), part)?;
        let mut predicted = Vec::new();
        for (r, cell) in cells.iter().enumerate() {
            let held: Vec<usize> = (0..cell.pairs.len())
                .filter(|&i| folds.held(r, i, round))
                .collect();
            if held.is_empty() {
                continue;
            }
            let scores: Vec<f64> = held.iter().map(|&i| cell.pairs[i].0).collect();
            predicted.push((r, held, C::predict(&fit, r, &scores)?));
        }
        let trained_on = train.iter().map(|c| c.pairs.len()).collect();
        Ok(Some((fit, trained_on, predicted)))
    };
    let workers = if C::PARALLEL_ROUNDS {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(rounds)
    } else {
        1
    };
    let outcomes: Vec<Result<Option<RoundOutcome<C::Fit>>, String>> = if workers > 1 {
        // Rounds on several threads at once, each fit reporting nothing of itself; progress
        // moves as rounds finish.
        let next = std::sync::atomic::AtomicUsize::new(0);
        let finished = std::sync::atomic::AtomicUsize::new(0);
        let quiet = |_: f64| {};
        let slots: Vec<std::sync::Mutex<Option<_>>> =
            (0..rounds).map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    let part = Run::new(run.cancel_flag(), &quiet);
                    loop {
                        let round = next.fetch_add(1, Ordering::Relaxed);
                        if round >= rounds {
                            break;
                        }
                        let outcome = one(round, &part);
                        if let Ok(mut slot) = slots[round].lock() {
                            *slot = Some(outcome);
                        }
                        let done = finished.fetch_add(1, Ordering::Relaxed) + 1;
                        run.report(done as f64 / rounds as f64);
                    }
                });
            }
        });
        slots
            .into_iter()
            .map(|s| {
                s.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| Err("a cross-validation round did not finish".into()))
            })
            .collect()
    } else {
        (0..rounds)
            .map(|round| {
                one(
                    round,
                    &run.part(
                        round as f64 / rounds as f64,
                        (round + 1) as f64 / rounds as f64,
                    ),
                )
            })
            .collect()
    };
    let mut out: HeldOut = cells.iter().map(|c| vec![None; c.pairs.len()]).collect();
    let mut last = None;
    for outcome in outcomes {
        let Some((fit, trained_on, predicted)) = outcome? else {
            continue;
        };
        for (r, held, predictions) in predicted {
            for (i, c) in held.into_iter().zip(predictions) {
                out[r][i] = Some(c);
            }
        }
        if rounds == 1 {
            last = Some((fit, trained_on));
        }
    }
    run.report(1.0);
    Ok((out, last))
}

/// What one round gives: its fit, each rubric's training count, and per rubric the held-out
/// anchors' indices with their predictions.
type RoundOutcome<F> = (F, Vec<usize>, Vec<(usize, Vec<usize>, Vec<Corrected>)>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holdout_holds_out_its_fraction() {
        let (rounds, held) = Scheme::Holdout(0.2).rounds(101, 3);
        assert_eq!(rounds, 1);
        assert_eq!(held.iter().filter(|h| h.is_some()).count(), 21);
        assert!(Scheme::Holdout(1.0).check().is_err());
        assert!(Scheme::Folds(1).check().is_err());
    }

    #[test]
    fn folds_are_balanced_and_seeded() {
        let f = folds(103, 5, 7);
        let mut counts = [0; 5];
        f.iter().for_each(|&k| counts[k] += 1);
        assert!(counts.iter().all(|&c| c == 20 || c == 21), "{counts:?}");
        assert_eq!(f, folds(103, 5, 7));
        assert_ne!(f, folds(103, 5, 8));
    }

    #[test]
    fn the_same_anchors_and_seed_give_the_same_folds() {
        let split = Split {
            scheme: Scheme::Folds(5),
            seed: 3,
        };
        let a = Folds::new(split, &[40, 7]);
        assert_eq!(a, Folds::new(split, &[40, 7]));
        // A rubric's folds do not depend on its siblings.
        let b = Folds::new(split, &[40]);
        assert_eq!(a.held[0], b.held[0]);
        assert_ne!(a, Folds::new(Split { seed: 4, ..split }, &[40, 7]));
    }
}
