//! What a training job computes, on a blocking thread: the fit on every anchor, and the
//! held-out evaluation beside the raw judge.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::calibrate::bayes::{self, SufficientStats};
use crate::calibrate::flow::{self, FlowWeights, ReviewRule, Table};
use crate::calibrate::metrics::{Comparison, Scheme};
use crate::calibrate::quantile::QuantileMap;
use crate::calibrate::select::{self, Candidate, HeldOut, Settings};
use crate::domain::calibration::{
    AutoOptions, EvaluationOptions, Fitted, FlowFit, FlowTrainingOptions, Method, NewVersion,
    TrainingOptions,
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
            decision: None,
        })
        .collect())
}

/// The judge-score range a flow version of `cell` tabulates.
fn range(cell: &CellData) -> (f64, f64) {
    flow::table_range((cell.scale.min, cell.scale.max), &cell.pairs)
}

/// One cell's flow version: its table's range, and the review threshold set from the σ of
/// the cell's anchors.
fn flow_fit(
    weights: &FlowWeights,
    r: usize,
    cell: &CellData,
    trained_on: usize,
) -> Result<(FlowFit, Vec<f64>), String> {
    let (lo, hi) = range(cell);
    let table = Table::build(weights, r, lo, hi, flow::TABLE_POINTS)?;
    let corrected: Vec<(f64, f64)> = cell
        .pairs
        .iter()
        .map(|p| table.correct(p.0).unwrap_or((f64::NAN, f64::NAN)))
        .collect();
    let sigmas: Vec<f64> = corrected.iter().map(|c| c.1).collect();
    let review_sigma = match weights.options.review {
        ReviewRule::SigmaAbove(s) => s,
        ReviewRule::TopPercent(q) => bayes::diagnostics::quantile(&sigmas, 1.0 - q / 100.0),
    };
    let fit = FlowFit {
        weights: weights.clone(),
        rubric: r,
        review_sigma,
        table_lo: lo,
        table_hi: hi,
        trained_on,
    };
    Ok((fit, corrected.into_iter().map(|c| c.0).collect()))
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
    let data: Vec<Vec<(f64, f64)>> = cells.iter().map(|c| c.pairs.clone()).collect();
    let held: Vec<Vec<bool>> = select::assignment(scheme, &data, opts.seed)
        .into_iter()
        .map(|a| a.iter().map(Option::is_some).collect())
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
        let (fit, corrected) = flow_fit(&weights, r, c, train[r].len())?;
        let predictions: Vec<Option<f64>> = corrected
            .iter()
            .zip(&held[r])
            .map(|(c, h)| h.then_some(*c))
            .collect();
        versions.push(NewVersion {
            rubric: c.rubric.clone(),
            anchor_count: c.pairs.len() as i64,
            anchor_digest: c.digest.clone(),
            fitted: Fitted::Flow(Box::new(fit)),
            evaluation: Comparison::of(scheme, &predictions, &c.pairs, c.scale.min, c.scale.max),
            decision: None,
        });
        progress.set(0.95 + 0.05 * (r + 1) as f64 / cells.len() as f64);
    }
    Ok(versions)
}

/// `quantile_map` or `identity`: fitted per cell on every anchor, evaluated on held-out folds.
pub fn plain(
    cells: &[CellData],
    method: Method,
    options: &EvaluationOptions,
    progress: &Progress,
) -> Result<Vec<NewVersion>, String> {
    let candidate = match method {
        Method::QuantileMap => Candidate::QuantileMap,
        _ => Candidate::Identity,
    };
    let scheme = options.scheme();
    let data: Vec<Vec<(f64, f64)>> = cells.iter().map(|c| c.pairs.clone()).collect();
    let ranges: Vec<(f64, f64)> = cells.iter().map(range).collect();
    let assignment = select::assignment(scheme, &data, options.seed);
    let held_out = select::cross_validate(
        candidate,
        &Settings::default(),
        &data,
        &ranges,
        scheme,
        &assignment,
        &progress.cancel,
        &|p| progress.set(p),
    )?;
    cells
        .iter()
        .enumerate()
        .map(|(r, c)| {
            Ok(NewVersion {
                rubric: c.rubric.clone(),
                anchor_count: c.pairs.len() as i64,
                anchor_digest: c.digest.clone(),
                fitted: match candidate {
                    Candidate::QuantileMap => Fitted::QuantileMap(QuantileMap::fit(&c.pairs)?),
                    _ => Fitted::Identity,
                },
                evaluation: Comparison::of(
                    scheme,
                    &held_out[r],
                    &c.pairs,
                    c.scale.min,
                    c.scale.max,
                ),
                decision: None,
            })
        })
        .collect()
}

/// `auto`: every candidate predicts the same held-out folds of every cell (the flow only
/// where a cell has `flow_min_anchors`; the Bayesian line only where its fit on all anchors
/// passes its diagnostics); each cell gets the winner under the options' rule, fitted on all
/// its anchors, with the decision recorded.
pub fn auto(
    cells: &[CellData],
    options: &AutoOptions,
    progress: &Progress,
) -> Result<Vec<NewVersion>, String> {
    let scheme = options.scheme();
    let rule = options.rule();
    let settings = Settings {
        bayes: options.bayes,
        flow: options.flow,
    };
    let data: Vec<Vec<(f64, f64)>> = cells.iter().map(|c| c.pairs.clone()).collect();
    let ranges: Vec<(f64, f64)> = cells.iter().map(range).collect();
    let assignment = select::assignment(scheme, &data, options.seed);
    let with_flow = cells
        .iter()
        .any(|c| c.pairs.len() >= options.flow_min_anchors);
    // Shares of the progress bar: the flow's trainings dominate when it runs.
    let rounds = match scheme {
        Scheme::Folds(k) => k as f64,
        Scheme::Holdout(_) => 1.0,
    };
    let (bayes_share, flow_share) = if with_flow { (0.05, 0.95) } else { (1.0, 0.0) };
    let flow_trainings = rounds + 1.0;
    let step = |name: &str| progress.set_detail(format!(r#"{{"step": "{name}"}}"#));

    step("bayes");
    let bayes_all = bayes::fit(
        &data
            .iter()
            .map(|d| SufficientStats::from_pairs(d.iter().copied()))
            .collect::<Vec<_>>(),
        &settings.bayes,
        &|p| progress.set(bayes_share * p / (rounds + 1.0)),
    );
    let mut candidates = vec![
        Candidate::Identity,
        Candidate::QuantileMap,
        Candidate::Bayes,
    ];
    if with_flow {
        candidates.push(Candidate::Flow);
    }
    let mut held_out: Vec<(Candidate, Result<HeldOut, String>)> = Vec::new();
    for &c in &candidates {
        step(&format!("cross-validating {c}"));
        let share = |p: f64| match c {
            Candidate::Bayes => progress.set(bayes_share * (1.0 + p * rounds) / (rounds + 1.0)),
            Candidate::Flow => progress.set(bayes_share + flow_share * p * rounds / flow_trainings),
            _ => {}
        };
        let result = match (&bayes_all, c) {
            (Err(e), Candidate::Bayes) => Err(format!("the fit failed: {e}")),
            _ => select::cross_validate(
                c,
                &settings,
                &data,
                &ranges,
                scheme,
                &assignment,
                &progress.cancel,
                &share,
            ),
        };
        if progress.cancel.load(Ordering::Relaxed) {
            return Err("cancelled".into());
        }
        held_out.push((c, result));
    }
    let decisions: Vec<_> = cells
        .iter()
        .enumerate()
        .map(|(r, cell)| {
            let mut predictions =
                select::cell_predictions(&held_out, r, cell.pairs.len(), options.flow_min_anchors);
            // A Bayesian fit that fails its diagnostics on all anchors is not a candidate.
            for (c, p) in &mut predictions {
                if *c == Candidate::Bayes
                    && p.is_ok()
                    && let Ok(fit) = &bayes_all
                    && let Some(why) = fit.rubric_diagnostics[r].failure()
                {
                    *p = Err(format!("failed its diagnostics: {why}"));
                }
            }
            select::decide(
                &rule,
                scheme,
                &predictions,
                &cell.pairs,
                cell.scale.min,
                cell.scale.max,
            )
        })
        .collect();
    // The served flow is trained on every anchor, once, if any cell chose it.
    let flow_all = if decisions.iter().any(|(d, _)| d.chosen == Candidate::Flow) {
        step("training the flow on every anchor");
        let epochs = settings.flow.epochs as f64;
        Some(flow::train(
            &data,
            &settings.flow,
            &|e| {
                progress.set(
                    bayes_share + flow_share * (rounds + e.epoch as f64 / epochs) / flow_trainings,
                )
            },
            &progress.cancel,
        )?)
    } else {
        None
    };
    let mut versions = Vec::with_capacity(cells.len());
    for (r, (cell, (mut decision, evaluation))) in cells.iter().zip(decisions).enumerate() {
        decision.beta = bayes_all.as_ref().ok().map(|fit| fit.rubrics[r]);
        let fitted = match (decision.chosen, &bayes_all, &flow_all) {
            (Candidate::Bayes, Ok(fit), _) => Fitted::Bayes {
                posterior: fit.rubrics[r],
                diagnostics: fit.rubric_diagnostics[r],
            },
            (Candidate::Flow, _, Some(w)) => {
                Fitted::Flow(Box::new(flow_fit(w, r, cell, cell.pairs.len())?.0))
            }
            (Candidate::QuantileMap, ..) => Fitted::QuantileMap(QuantileMap::fit(&cell.pairs)?),
            _ => Fitted::Identity,
        };
        tracing::info!(rubric = %cell.rubric, chosen = %decision.chosen, reason = %decision.reason, "auto chose");
        versions.push(NewVersion {
            rubric: cell.rubric.clone(),
            anchor_count: cell.pairs.len() as i64,
            anchor_digest: cell.digest.clone(),
            fitted,
            evaluation,
            decision: Some(decision),
        });
    }
    progress.set(1.0);
    Ok(versions)
}
