//! The flow as a calibration method: its options, the model a version stores per cell (the
//! judge's weights, the cell's rubric index and review threshold), and corrections with
//! MC-dropout σ through the tabulated sub-networks.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::report::{FlowReport, FlowTraining, Recipe};
use super::{FlowWeights, TABLE_POINTS, Table, table_range};
use crate::conformal::Intervals;
use crate::corrector::{Cell, CellModel, Corrected, Corrector, MeanUncertainty, Run};
use crate::cv::Scheme;
use crate::report::{FlowConfig, ReviewAudit, ReviewRule, Schedule};
use crate::stats::quantile;

/// A training recipe: what the flow's unset training options default to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FlowPreset {
    /// Minibatches with a cosine-decaying rate: the paper's held-out quality in a fraction of
    /// its time (docs/methods.md, "The flow's training recipe").
    #[default]
    Fast,
    /// The paper's: full-batch Adam at 3e-3 for 1,500 epochs.
    Paper,
}

impl FlowPreset {
    /// The preset's network, training and inference settings.
    pub fn config(self) -> FlowConfig {
        match self {
            FlowPreset::Paper => FlowConfig::default(),
            FlowPreset::Fast => FlowConfig::fast(),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FlowPreset::Fast => "fast",
            FlowPreset::Paper => "paper",
        }
    }

    /// The preset named `fast` or `paper`.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "fast" => Ok(FlowPreset::Fast),
            "paper" => Ok(FlowPreset::Paper),
            other => Err(format!("no flow preset {other:?}: fast or paper")),
        }
    }
}

/// Network, training and inference settings. The training recipe comes from `preset`; each
/// training option given overrides the preset's value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FlowOptions {
    /// `fast` (the default: minibatches and a cosine schedule) or `paper` (1,500 full-batch
    /// epochs at 3e-3).
    pub preset: FlowPreset,
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
    /// Adam's (starting) learning rate; default: the preset's.
    #[schema(exclusive_minimum = 0, exclusive_maximum = 1)]
    pub learning_rate: Option<f64>,
    /// `constant` or `cosine` (decaying to zero); default: the preset's.
    pub schedule: Option<Schedule>,
    /// Anchors per optimiser step, reshuffled each epoch; 0 for full-batch steps; default:
    /// the preset's.
    #[schema(minimum = 0, maximum = 1000000)]
    pub batch_size: Option<usize>,
    /// Passes over the training anchors (`paper`: 1,500); given without `steps`, training
    /// makes this many epochs.
    #[schema(minimum = 1, maximum = 100000)]
    pub epochs: Option<u64>,
    /// Optimiser steps, however many anchors there are, in place of epochs (`fast`: 220;
    /// 0 counts `epochs` instead).
    #[schema(minimum = 0, maximum = 1000000)]
    pub steps: Option<u64>,
    /// Hold out this fraction of the training anchors and stop when its loss has not
    /// improved for `patience` epochs, keeping the best weights; 0 turns it off; default:
    /// the preset's.
    #[schema(minimum = 0, exclusive_maximum = 0.5)]
    pub early_stopping: Option<f64>,
    /// Default: the preset's.
    pub patience: Option<u64>,
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
            preset: FlowPreset::default(),
            hidden: c.hidden,
            embedding_dim: c.embedding_dim,
            dropout: c.dropout,
            step: c.step,
            learning_rate: None,
            schedule: None,
            batch_size: None,
            epochs: None,
            steps: None,
            early_stopping: None,
            patience: None,
            mc_passes: c.mc_passes,
            review: c.review,
        }
    }
}

impl FlowOptions {
    /// The paper's recipe, every option at its default.
    pub fn paper() -> Self {
        Self {
            preset: FlowPreset::Paper,
            ..Self::default()
        }
    }

    /// The training configuration with `seed`: the preset's recipe under the options given.
    pub fn config(&self, seed: u64) -> FlowConfig {
        let recipe = self.preset.config();
        FlowConfig {
            hidden: self.hidden,
            embedding_dim: self.embedding_dim,
            dropout: self.dropout,
            step: self.step,
            learning_rate: self.learning_rate.unwrap_or(recipe.learning_rate),
            schedule: self.schedule.unwrap_or(recipe.schedule),
            batch_size: match self.batch_size {
                Some(0) => None,
                Some(b) => Some(b),
                None => recipe.batch_size,
            },
            epochs: self.epochs.unwrap_or(recipe.epochs),
            steps: match (self.steps, self.epochs) {
                (Some(0), _) | (None, Some(_)) => None,
                (Some(s), _) => Some(s),
                (None, None) => recipe.steps,
            },
            seed,
            early_stopping: match self.early_stopping {
                Some(f) if f <= 0.0 => None,
                Some(f) => Some(f),
                None => recipe.early_stopping,
            },
            patience: self.patience.unwrap_or(recipe.patience),
            mc_passes: self.mc_passes,
            review: self.review,
        }
    }
}

/// What a flow version holds for its cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowModel {
    /// The judge's flow (shared by its rubrics) and this cell's rubric index in it.
    pub weights: Box<FlowWeights>,
    pub rubric: usize,
    /// σ above this routes a corrected score to review.
    pub review_sigma: f64,
    /// The range of judge scores tabulated for corrections.
    pub table_lo: f64,
    pub table_hi: f64,
    /// Anchors of this cell the flow was trained on (the rest were held out).
    pub trained_on: usize,
    /// How well its review routing caught the large errors of held-out anchors (`None` with
    /// fewer than 50 of them, and for versions trained before it was recorded).
    #[serde(default)]
    pub review_audit: Option<Box<ReviewAudit>>,
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

/// Anchors an audit needs: the largest 10% of errors are then at least five.
const AUDIT_MIN: usize = 50;

/// The review audit of held-out predictions `held_out` of `pairs` (`None` where not held out),
/// routed as the served model routes them: by `sigmas[i]`, the served flow's σ at anchor i's
/// judge score, above `review_sigma`. σ is a function of the judge score alone, so the held-out
/// anchors' routed share is the rate at which scores distributed like the anchors' are routed.
/// (The σ of the fold models that predicted the held-out anchors is not: each training sets
/// its own scale of σ, and a fold model trained on fewer anchors is less sure everywhere; on a
/// weak judge 60% of held-out anchors sat above the served model's threshold by their fold
/// model's σ.)
pub fn review_audit(
    pairs: &[(f64, f64)],
    held_out: &[Option<Corrected>],
    sigmas: &[f64],
    review_sigma: f64,
) -> Option<ReviewAudit> {
    let held: Vec<(f64, f64, f64)> = pairs
        .iter()
        .zip(held_out)
        .zip(sigmas)
        .filter_map(|((&(j, y), c), &sigma)| Some((j, (y - (*c)?.score).abs(), sigma)))
        .collect();
    let n = held.len();
    if n < AUDIT_MIN || held.iter().any(|h| !h.1.is_finite() || !h.2.is_finite()) {
        return None;
    }
    let mut by_error: Vec<usize> = (0..n).collect();
    by_error.sort_by(|&a, &b| held[b].1.total_cmp(&held[a].1));
    let large = &by_error[..n.div_ceil(10)];
    let routed: Vec<bool> = held.iter().map(|h| h.2 > review_sigma).collect();
    let k = routed.iter().filter(|&&r| r).count();
    // Routing k anchors by the widest interval: all wider than the k-th widest, and an even
    // share of those tied with it.
    let intervals = Intervals::of(pairs, held_out, 0);
    let by_width = intervals.map(|iv| {
        let width = |j: f64| {
            let mut c = [Corrected::score(0.0)];
            iv.apply(&[j], &mut c);
            c[0].predictive.map_or(0.0, |(lo, hi)| hi - lo)
        };
        let widths: Vec<f64> = held.iter().map(|h| width(h.0)).collect();
        let mut sorted = widths.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        if k == 0 {
            return 0.0;
        }
        let cut = sorted[k - 1];
        let above = widths.iter().filter(|&&w| w > cut).count();
        let tied = widths.iter().filter(|&&w| w == cut).count();
        let share_tied = (k - above) as f64 / tied as f64;
        large
            .iter()
            .map(|&i| {
                if widths[i] > cut {
                    1.0
                } else if widths[i] == cut {
                    share_tied
                } else {
                    0.0
                }
            })
            .sum::<f64>()
            / large.len() as f64
    });
    Some(ReviewAudit {
        held_out: n,
        routed: k as f64 / n as f64,
        large_errors_routed: large.iter().filter(|&&i| routed[i]).count() as f64
            / large.len() as f64,
        large_errors_routed_by_width: by_width,
    })
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
    /// Training keeps to one libtorch thread, so two folds train at once on two cores.
    const PARALLEL_ROUNDS: bool = true;
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
        super::train(
            &data,
            &options.config(seed),
            &|e| {
                run.report(e.epoch as f64 / e.of as f64);
                run.detail(format!(r#"{{"epoch": {}, "loss": {}}}"#, e.epoch, e.loss));
            },
            run.cancel_flag(),
        )
    }

    /// More scores than a table has points (held-out anchors of a large cell) go through a
    /// table over their range, as served corrections do: integrating every one K times took
    /// most of `auto`'s time at 200,000 anchors, and its K masks per row 800 MB.
    fn predict(fit: &FlowWeights, r: usize, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        let (lo, hi) = scores
            .iter()
            .filter(|x| x.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        let table = if scores.len() > TABLE_POINTS && lo < hi {
            Some(Table::build(fit, r, lo, hi, TABLE_POINTS)?)
        } else {
            None
        };
        Ok(through_table(table.as_ref(), fit, r, scores)?
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
        held_out: &[Option<Corrected>],
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
            weights: Box::new(fit.clone()),
            rubric: r,
            review_sigma,
            table_lo: lo,
            table_hi: hi,
            trained_on,
            review_audit: review_audit(&cell.pairs, held_out, &sigmas, review_sigma).map(Box::new),
            table: OnceLock::from(table),
        })
    }
}

/// MC-dropout mean and σ of each score: from `table` where it covers the score, by
/// integrating the K sub-networks elsewhere.
fn through_table(
    table: Option<&Table>,
    weights: &FlowWeights,
    rubric: usize,
    scores: &[f64],
) -> Result<Vec<(f64, f64)>, String> {
    let mut out: Vec<Option<(f64, f64)>> = match table {
        Some(t) => scores.iter().map(|&j| t.correct(j)).collect(),
        None => vec![None; scores.len()],
    };
    let off: Vec<usize> = (0..scores.len()).filter(|&i| out[i].is_none()).collect();
    if !off.is_empty() {
        let xs: Vec<f64> = off.iter().map(|&i| scores[i]).collect();
        let direct = weights.correct_direct(rubric, &xs)?;
        for (i, d) in off.into_iter().zip(direct) {
            out[i] = Some(d);
        }
    }
    Ok(out
        .into_iter()
        .map(|c| c.unwrap_or((f64::NAN, f64::NAN)))
        .collect())
}

impl FlowModel {
    fn table(&self) -> Option<&Table> {
        self.table.get()
    }
}

impl CellModel for FlowModel {
    type Report = FlowReport;

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
        Ok(
            through_table(self.table(), &self.weights, self.rubric, scores)?
                .into_iter()
                .map(|(score, sigma)| Corrected {
                    sigma: Some(sigma),
                    review: Some(sigma > self.review_sigma),
                    ..Corrected::score(score)
                })
                .collect(),
        )
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

    fn report(&self) -> FlowReport {
        let w = &self.weights;
        let config = w.options;
        FlowReport {
            flow: FlowTraining {
                recipe: Recipe {
                    learning_rate: config.learning_rate,
                    schedule: config.schedule,
                    batch_size: config.batch_size,
                    epochs: config.steps.is_none().then_some(config.epochs),
                    steps: config.steps,
                    early_stopping: config.early_stopping,
                },
                trained_on: self.trained_on,
                epochs_run: w.epochs_run,
                stopped_early: w.stopped_early,
                train_loss: w.train_loss,
                validation_loss: w.validation_loss,
                mc_passes: config.mc_passes,
                review_sigma: self.review_sigma,
                table: [self.table_lo, self.table_hi],
                review_audit: self.review_audit.as_deref().copied(),
            },
        }
    }
}
