//! The pairwise path from a cell's labelled comparisons and a run to ratings: `auto` chooses
//! the calibrated preference on the anchors (held-out log-loss), its folds' maps predict the
//! run, and the ratings are prediction-powered with the anchors (held-out predictions) and
//! the run's own labelled comparisons as the labelled set.
//!
//! Systems are indices: the run's first (`0..rated`), then any the anchors alone compare
//! (`rated..known`). The map has a term for every known system; the ratings are of the run's
//! systems, and an anchor comparing a system the run does not rate helps fit the map but
//! cannot enter the labelled set. Each system's win rates (against the baseline, over the
//! field) come from the same predictions and labels (`win_rate`).

use super::choice::{self, Choice};
use super::powered::{self, Observed, Powered, Predicted};
use super::preference::{Candidate, Labelled, Verdicts};
use super::ratings::RatingError;
use super::win_rate::{WinRate, win_rate};

/// One comparison: the judge's verdicts (their systems set), the controls' values, and the
/// people's preference where it was labelled.
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    pub verdicts: Verdicts,
    pub controls: Vec<f64>,
    pub preference: Option<f64>,
    /// Who gave the preference, where named (any key that tells raters apart): the
    /// intervals count raters as the independent units (`powered::Observed::rater`).
    pub rater: Option<u64>,
}

/// Ratings with the preference map behind them.
#[derive(Debug, Clone)]
pub struct Rated {
    pub powered: Powered,
    pub choice: Choice,
    /// Anchors in the labelled set (both systems rated).
    pub anchors_used: usize,
    /// The run's labelled comparisons in it.
    pub run_labelled: usize,
    /// Each rated system's win rate against the baseline (`None` for the baseline itself, or
    /// where too few comparisons are labelled) and over the field.
    pub win_rates: Vec<[Option<WinRate>; 2]>,
}

/// Why no ratings came.
#[derive(Debug, Clone, PartialEq)]
pub enum RateError {
    /// The preference map could not be fitted (no anchors, inconsistent covariates).
    Map(String),
    Ratings(RatingError),
}

impl std::fmt::Display for RateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RateError::Map(e) => write!(f, "the calibrated preference: {e}"),
            RateError::Ratings(e) => write!(f, "{e}"),
        }
    }
}

/// The folds of the held-out choice and of the cross-fitted predictions.
pub const FOLDS: usize = 5;

fn systems(c: &Compared) -> Result<(usize, usize), RateError> {
    c.verdicts
        .systems
        .ok_or_else(|| RateError::Map("every comparison names its two systems".to_owned()))
}

/// How a rating is made, besides its comparisons.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateOptions {
    /// The system rated 0.
    pub baseline: usize,
    /// The control columns every comparison carries.
    pub controls: usize,
    pub seed: u64,
    /// A stored version's choice of map, fitted again on the anchors; `None`: `auto` chooses
    /// among every candidate now.
    pub candidate: Option<Candidate>,
}

/// The anchors as the map is chosen on: each must carry the people's preference.
fn labelled_rows(anchors: &[Compared]) -> Result<Vec<Labelled>, RateError> {
    anchors
        .iter()
        .map(|c| {
            Ok(Labelled {
                verdicts: c.verdicts.clone(),
                preference: c.preference.ok_or_else(|| {
                    RateError::Map("an anchor comparison carries the people's preference".into())
                })?,
            })
        })
        .collect::<Result<_, RateError>>()
}

/// Rates the `rated` systems of `run` (indices below `rated`) from `anchors` (labelled, over
/// `known` systems), the baseline at 0, with `controls` control columns.
pub fn rate(
    rated: usize,
    known: usize,
    anchors: &[Compared],
    run: &[Compared],
    options: &RateOptions,
) -> Result<Rated, RateError> {
    let RateOptions {
        baseline,
        controls,
        seed,
        candidate,
    } = *options;
    let rows = labelled_rows(anchors)?;
    let choice =
        choice::choose_among(&rows, Some(known), FOLDS, seed, candidate).map_err(RateError::Map)?;
    let predicted = |c: &Compared, p: f64| -> Result<Predicted, RateError> {
        let (a, b) = systems(c)?;
        Ok(Predicted {
            a,
            b,
            predicted: p,
            controls: c.controls.clone(),
        })
    };
    let mut labelled = Vec::new();
    for (i, c) in anchors.iter().enumerate() {
        let (a, b) = systems(c)?;
        if a < rated && b < rated {
            labelled.push(Observed {
                comparison: predicted(c, choice.cross_fit.held_out_prediction(i, &c.verdicts))?,
                preference: rows[i].preference,
                rater: c.rater,
            });
        }
    }
    let anchors_used = labelled.len();
    let mut run_predicted = Vec::with_capacity(run.len());
    for c in run {
        let p = predicted(c, choice.cross_fit.predict(&c.verdicts))?;
        if let Some(y) = c.preference {
            labelled.push(Observed {
                comparison: p.clone(),
                preference: y,
                rater: c.rater,
            });
        }
        run_predicted.push(p);
    }
    let run_labelled = labelled.len() - anchors_used;
    let powered = powered::fit(rated, &run_predicted, &labelled, baseline, controls)
        .map_err(RateError::Ratings)?;
    // Each system's own comparisons, so that every win rate reads its own rows only.
    let mut run_of: Vec<Vec<&Predicted>> = vec![Vec::new(); rated];
    for c in &run_predicted {
        run_of[c.a].push(c);
        run_of[c.b].push(c);
    }
    let mut labelled_of: Vec<Vec<&Observed>> = vec![Vec::new(); rated];
    for o in &labelled {
        labelled_of[o.comparison.a].push(o);
        labelled_of[o.comparison.b].push(o);
    }
    let win_rates = (0..rated)
        .map(|s| {
            let (run, labelled) = (&run_of[s], &labelled_of[s]);
            [
                (s != baseline)
                    .then(|| win_rate(s, Some(baseline), run, labelled))
                    .flatten(),
                win_rate(s, None, run, labelled),
            ]
        })
        .collect();
    Ok(Rated {
        powered,
        choice,
        anchors_used,
        run_labelled,
        win_rates,
    })
}
