//! The flow as a calibration method: its options, the model a version stores per cell (the
//! judge's weights, the cell's rubric index and review threshold), and corrections with
//! MC-dropout σ through the tabulated sub-networks.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{FlowConfig, FlowWeights, ReviewRule, TABLE_POINTS, Table, table_range};
use crate::calibrate::corrector::{Cell, CellModel, Corrected, Corrector, MeanUncertainty, Run};
use crate::calibrate::cv::Scheme;
use crate::calibrate::stats::quantile;

/// Network, training and inference settings; the defaults are the paper's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FlowOptions {
    /// Hidden width of the three-layer tanh MLP.
    #[schema(minimum = 2, maximum = 1024)]
    pub hidden: i64,
    /// Size of the learned rubric embedding.
    #[schema(minimum = 1, maximum = 64)]
    pub embedding_dim: i64,
    /// Dropout on every hidden layer.
    #[schema(minimum = 0, exclusive_maximum = 0.9)]
    pub dropout: f64,
    /// RK4 step on [0, 1]; must divide 1 (0.1, 0.05, 0.25, ...).
    #[schema(exclusive_minimum = 0, maximum = 1)]
    pub step: f64,
    /// Adam learning rate.
    #[schema(exclusive_minimum = 0, exclusive_maximum = 1)]
    pub learning_rate: f64,
    /// Full-batch epochs.
    #[schema(minimum = 1, maximum = 100000)]
    pub epochs: u64,
    /// Hold out this fraction of the training anchors and stop when its loss has not
    /// improved for `patience` epochs, keeping the best weights (off by default).
    #[schema(exclusive_minimum = 0, exclusive_maximum = 0.5)]
    pub early_stopping: Option<f64>,
    pub patience: u64,
    /// MC-dropout passes per correction.
    #[schema(minimum = 2, maximum = 1000)]
    pub mc_passes: usize,
    /// `{"top_percent": 5}` (the 5% highest σ on the cell's anchors) or `{"sigma_above": 0.3}`.
    pub review: ReviewRule,
}

impl Default for FlowOptions {
    fn default() -> Self {
        let c = FlowConfig::default();
        Self {
            hidden: c.hidden,
            embedding_dim: c.embedding_dim,
            dropout: c.dropout,
            step: c.step,
            learning_rate: c.learning_rate,
            epochs: c.epochs,
            early_stopping: c.early_stopping,
            patience: c.patience,
            mc_passes: c.mc_passes,
            review: c.review,
        }
    }
}

impl FlowOptions {
    /// The training configuration with `seed`.
    pub fn config(&self, seed: u64) -> FlowConfig {
        FlowConfig {
            hidden: self.hidden,
            embedding_dim: self.embedding_dim,
            dropout: self.dropout,
            step: self.step,
            learning_rate: self.learning_rate,
            epochs: self.epochs,
            seed,
            early_stopping: self.early_stopping,
            patience: self.patience,
            mc_passes: self.mc_passes,
            review: self.review,
        }
    }
}

/// What a flow version holds for its cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowModel {
    /// The judge's flow (shared by its rubrics) and this cell's rubric index in it.
    pub weights: FlowWeights,
    pub rubric: usize,
    /// σ above this routes a corrected score to review.
    pub review_sigma: f64,
    /// The range of judge scores tabulated for corrections.
    pub table_lo: f64,
    pub table_hi: f64,
    /// Anchors of this cell the flow was trained on (the rest were held out).
    pub trained_on: usize,
    /// The MC-dropout sub-networks tabulated over [table_lo, table_hi], built once.
    #[serde(skip)]
    table: OnceLock<Table>,
}

impl PartialEq for FlowModel {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.weights,
            self.rubric,
            self.review_sigma,
            self.table_lo,
            self.table_hi,
            self.trained_on,
        ) == (
            &other.weights,
            other.rubric,
            other.review_sigma,
            other.table_lo,
            other.table_hi,
            other.trained_on,
        )
    }
}

/// What a flow version reports of its training.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowSummary {
    pub trained_on: usize,
    pub epochs_run: u64,
    pub stopped_early: bool,
    pub train_loss: f64,
    pub validation_loss: Option<f64>,
    pub mc_passes: usize,
    pub review_sigma: f64,
    pub table: (f64, f64),
}

/// The neural-ODE score transport (libtorch), with MC-dropout σ.
pub struct Flow;

impl Corrector for Flow {
    const LABEL: &'static str = "neural-ODE flow";
    /// One training, not k: a full-size flow takes a while to train.
    const DEFAULT_SCHEME: Scheme = Scheme::Holdout(0.2);
    const SERVES_HOLDOUT_FIT: bool = true;
    /// About ten times what the line needs.
    const AUTO_MIN_ANCHORS: usize = 1000;
    const COST: f64 = 50.0;
    type Options = FlowOptions;
    type Fit = FlowWeights;
    type Model = FlowModel;

    fn check(options: &FlowOptions) -> Result<(), String> {
        options.config(0).check()
    }

    fn fit(
        options: &FlowOptions,
        cells: &[Cell],
        seed: u64,
        run: &Run,
    ) -> Result<FlowWeights, String> {
        let data: Vec<Vec<(f64, f64)>> = cells.iter().map(|c| c.pairs.clone()).collect();
        let epochs = options.epochs as f64;
        super::train(
            &data,
            &options.config(seed),
            &|e| {
                run.report(e.epoch as f64 / epochs);
                run.detail(format!(r#"{{"epoch": {}, "loss": {}}}"#, e.epoch, e.loss));
            },
            run.cancel_flag(),
        )
    }

    fn predict(fit: &FlowWeights, r: usize, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        Ok(fit
            .correct_direct(r, scores)?
            .into_iter()
            .map(|(score, sigma)| Corrected {
                sigma: Some(sigma),
                ..Corrected::score(score)
            })
            .collect())
    }

    /// Tabulates the cell's sub-networks and sets its review threshold from the σ of its
    /// anchors.
    fn model(
        fit: &FlowWeights,
        r: usize,
        cell: &Cell,
        _: &[Option<Corrected>],
        trained_on: usize,
    ) -> Result<FlowModel, String> {
        let (lo, hi) = table_range(cell.scale, &cell.pairs);
        let table = Table::build(fit, r, lo, hi, TABLE_POINTS)?;
        let sigmas: Vec<f64> = cell
            .pairs
            .iter()
            .map(|p| table.correct(p.0).map_or(f64::NAN, |c| c.1))
            .collect();
        let review_sigma = match fit.options.review {
            ReviewRule::SigmaAbove(s) => s,
            ReviewRule::TopPercent(q) => quantile(&sigmas, 1.0 - q / 100.0),
        };
        Ok(FlowModel {
            weights: fit.clone(),
            rubric: r,
            review_sigma,
            table_lo: lo,
            table_hi: hi,
            trained_on,
            table: OnceLock::from(table),
        })
    }
}

impl FlowModel {
    fn table(&self) -> Option<&Table> {
        self.table.get()
    }
}

impl CellModel for FlowModel {
    fn prepare(&self) -> Result<(), String> {
        if self.table.get().is_none() {
            let table = Table::build(
                &self.weights,
                self.rubric,
                self.table_lo,
                self.table_hi,
                TABLE_POINTS,
            )?;
            let _ = self.table.set(table);
        }
        Ok(())
    }

    fn heavy(&self, scores: &[f64]) -> bool {
        self.table()
            .is_none_or(|t| scores.iter().any(|&j| !t.covers(j)))
    }

    /// MC-dropout mean and σ from the table; scores off it (far outside the anchors) are
    /// evaluated directly.
    fn correct(&self, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        let mut out: Vec<Option<(f64, f64)>> = match self.table() {
            Some(t) => scores.iter().map(|&j| t.correct(j)).collect(),
            None => vec![None; scores.len()],
        };
        let off: Vec<usize> = (0..scores.len()).filter(|&i| out[i].is_none()).collect();
        if !off.is_empty() {
            let xs: Vec<f64> = off.iter().map(|&i| scores[i]).collect();
            let direct = self.weights.correct_direct(self.rubric, &xs)?;
            for (i, d) in off.into_iter().zip(direct) {
                out[i] = Some(d);
            }
        }
        Ok(out
            .into_iter()
            .map(|c| {
                let (score, sigma) = c.unwrap_or((f64::NAN, f64::NAN));
                Corrected {
                    sigma: Some(sigma),
                    review: Some(sigma > self.review_sigma),
                    ..Corrected::score(score)
                }
            })
            .collect())
    }

    fn failure(&self) -> Option<String> {
        (!self.weights.train_loss.is_finite()).then(|| "the training loss is not finite".to_owned())
    }

    /// Refitting a flow takes seconds to minutes per fit, and its version keeps neither its
    /// anchors' fits nor a posterior: the term is left out, and the answer says so.
    fn mean_uncertainty(&self) -> MeanUncertainty<'_> {
        MeanUncertainty::Omitted(
            "a flow version carries no measure of its own fit's uncertainty (refitting it on resampled anchors takes minutes), so the interval leaves the corrector's uncertainty out and is too narrow when anchors are few; send labelled items, or estimate with a bayes or isotonic version",
        )
    }

    fn flow(&self) -> Option<FlowSummary> {
        let w = &self.weights;
        Some(FlowSummary {
            trained_on: self.trained_on,
            epochs_run: w.epochs_run,
            stopped_early: w.stopped_early,
            train_loss: w.train_loss,
            validation_loss: w.validation_loss,
            mc_passes: w.options.mc_passes,
            review_sigma: self.review_sigma,
            table: (self.table_lo, self.table_hi),
        })
    }
}
