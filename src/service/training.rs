//! What a training job computes, on a blocking thread: the fit on every anchor, and the
//! held-out evaluation beside the raw judge.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::calibrate::bayes::{self, SufficientStats};
use crate::calibrate::flow::{self, ReviewRule, Table};
use crate::calibrate::metrics::{Comparison, Scheme};
use crate::domain::calibration::{
    Fitted, FlowFit, FlowTrainingOptions, NewVersion, TrainingOptions,
};
use crate::domain::{Anchor, RubricName, Scale};

/// Shared between a running job's worker and its training thread: how far it is, what it last
/// reported, and whether it should stop.
#[derive(Default)]
pub struct Progress {
    share: AtomicU64,
    detail: Mutex<String>,
    pub cancel: AtomicBool,
}

impl Progress {
    pub fn set(&self, share: f64) {
        self.share
            .store(share.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
    }

    pub fn share(&self) -> f64 {
        f64::from_bits(self.share.load(Ordering::Relaxed))
    }

    pub fn set_detail(&self, detail: String) {
        if let Ok(mut d) = self.detail.lock() {
            *d = detail;
        }
    }

    pub fn detail(&self) -> String {
        self.detail.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

/// Points of each rubric's MC-dropout table.
pub const TABLE_POINTS: usize = 1025;

/// The judge scores a flow version tabulates: the rubric's scale and the anchors' judge
/// scores, widened by half their width on each side.
pub fn table_range(scale: Scale, pairs: &[(f64, f64)]) -> (f64, f64) {
    let lo = pairs.iter().map(|p| p.0).fold(scale.min, f64::min);
    let hi = pairs.iter().map(|p| p.0).fold(scale.max, f64::max);
    let pad = 0.5 * (hi - lo);
    (lo - pad, hi + pad)
}

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

/// The flow of one judge's cells: trained on all but a held-out fraction of each rubric's
/// anchors, evaluated on that fraction beside the raw judge; each cell's review threshold set
/// from the σ of its anchors.
pub fn flow(
    cells: &[CellData],
    options: &FlowTrainingOptions,
    progress: &Progress,
) -> Result<Vec<NewVersion>, String> {
    let opts = options.flow();
    let scheme = Scheme::Holdout(options.holdout);
    let held: Vec<Vec<bool>> = cells
        .iter()
        .enumerate()
        .map(|(r, c)| {
            let (_, a) = scheme.rounds(c.pairs.len(), opts.seed ^ (r as u64).wrapping_mul(0x9E37));
            a.iter().map(Option::is_some).collect()
        })
        .collect();
    let train: Vec<Vec<(f64, f64)>> = cells
        .iter()
        .zip(&held)
        .map(|(c, h)| {
            c.pairs
                .iter()
                .zip(h)
                .filter(|(_, held)| !**held)
                .map(|(p, _)| *p)
                .collect()
        })
        .collect();
    let weights = flow::train(
        &train,
        &opts,
        &|e| {
            progress.set(0.95 * e.epoch as f64 / opts.epochs as f64);
            progress.set_detail(format!(r#"{{"epoch": {}, "loss": {}}}"#, e.epoch, e.loss));
        },
        &progress.cancel,
    )?;
    let mut versions = Vec::with_capacity(cells.len());
    for (r, c) in cells.iter().enumerate() {
        let (lo, hi) = table_range(c.scale, &c.pairs);
        let table = Table::build(&weights, r, lo, hi, TABLE_POINTS)?;
        let corrected: Vec<(f64, f64)> = c
            .pairs
            .iter()
            .map(|p| table.correct(p.0).unwrap_or((f64::NAN, f64::NAN)))
            .collect();
        let predictions: Vec<Option<f64>> = corrected
            .iter()
            .zip(&held[r])
            .map(|(c, h)| h.then_some(c.0))
            .collect();
        let sigmas: Vec<f64> = corrected.iter().map(|c| c.1).collect();
        let review_sigma = match opts.review {
            ReviewRule::SigmaAbove(s) => s,
            ReviewRule::TopPercent(q) => bayes::diagnostics::quantile(&sigmas, 1.0 - q / 100.0),
        };
        versions.push(NewVersion {
            rubric: c.rubric.clone(),
            anchor_count: c.pairs.len() as i64,
            anchor_digest: c.digest.clone(),
            fitted: Fitted::Flow(Box::new(FlowFit {
                weights: weights.clone(),
                rubric: r,
                review_sigma,
                table_lo: lo,
                table_hi: hi,
                trained_on: train[r].len(),
            })),
            evaluation: Comparison::of(scheme, &predictions, &c.pairs, c.scale.min, c.scale.max),
        });
        progress.set(0.95 + 0.05 * (r + 1) as f64 / cells.len() as f64);
    }
    Ok(versions)
}
