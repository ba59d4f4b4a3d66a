//! What a training job computes, on a blocking thread: the fit on every anchor, and the
//! held-out evaluation beside the raw judge.

use sha2::{Digest, Sha256};

use crate::calibrate::bayes::{self, SufficientStats};
use crate::calibrate::metrics::{Comparison, Scheme};
use crate::domain::calibration::{Fitted, NewVersion, TrainingOptions};
use crate::domain::{Anchor, RubricName, Scale};

/// One cell's snapshot, as the job read it.
pub struct CellData {
    pub rubric: RubricName,
    pub scale: Scale,
    /// (judge score, reference score), in item order.
    pub pairs: Vec<(f64, f64)>,
    pub digest: String,
}

impl CellData {
    pub fn new(rubric: RubricName, scale: Scale, anchors: &[Anchor]) -> Self {
        Self {
            rubric,
            scale,
            pairs: anchors
                .iter()
                .map(|a| (a.judge_score, a.reference_score))
                .collect(),
            digest: digest(anchors),
        }
    }
}

/// SHA-256 over the anchors in item order (id, then both scores' exact bits): two fits with
/// the same digest saw the same data.
pub fn digest(anchors: &[Anchor]) -> String {
    let mut h = Sha256::new();
    for a in anchors {
        h.update(a.item_id.as_str().as_bytes());
        h.update([0]);
        h.update(a.judge_score.to_bits().to_le_bytes());
        h.update(a.reference_score.to_bits().to_le_bytes());
    }
    crate::auth::hex(&h.finalize())
}

/// The hierarchical Bayesian fit of one judge's cells, and each cell's held-out evaluation.
/// `progress` receives 0 to 1.
pub fn bayes(
    cells: &[CellData],
    options: &TrainingOptions,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<Vec<NewVersion>, String> {
    let fit_options = options.fit();
    let scheme = options.scheme();
    let rounds = match scheme {
        Scheme::Folds(k) => k as f64,
        Scheme::Holdout(_) => 1.0,
    };
    let shares = 1.0 + rounds;
    let stats: Vec<SufficientStats> = cells
        .iter()
        .map(|c| SufficientStats::from_pairs(c.pairs.iter().copied()))
        .collect();
    let fit = bayes::fit(&stats, &fit_options, &|p| progress(p / shares))?;
    let data: Vec<Vec<(f64, f64)>> = cells.iter().map(|c| c.pairs.clone()).collect();
    let held_out = bayes::cross_validate(&data, &fit_options, scheme, &|p| {
        progress((1.0 + p * rounds) / shares)
    })?;
    Ok(cells
        .iter()
        .enumerate()
        .map(|(r, c)| NewVersion {
            rubric: c.rubric.clone(),
            anchor_count: c.pairs.len() as i64,
            anchor_digest: c.digest.clone(),
            fitted: Fitted::Bayes {
                posterior: fit.rubrics[r],
                diagnostics: fit.rubric_diagnostics[r],
            },
            evaluation: Comparison::of(scheme, &held_out[r], &c.pairs, c.scale.min, c.scale.max),
        })
        .collect())
}
