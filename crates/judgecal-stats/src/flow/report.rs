//! What a flow version reports: how it was trained, its MC-dropout review threshold and what
//! that threshold is worth on held-out anchors.

use serde::Serialize;
use utoipa::ToSchema;

use crate::report::{MethodReport, ReviewAudit, Schedule};

/// A flow version's report: its answer's `flow` field.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct FlowReport {
    /// flow versions: how the flow was trained and how its review threshold performs.
    pub flow: FlowTraining,
}

impl MethodReport for FlowReport {
    fn headline(&self) -> Option<String> {
        let f = &self.flow;
        Some(format!(
            "{} epochs on {} anchors, review above sigma {:.3}",
            f.epochs_run, f.trained_on, f.review_sigma
        ))
    }
}

/// How a flow version was trained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
#[schema(as = RecipeDto)]
pub struct Recipe {
    pub learning_rate: f64,
    pub schedule: Schedule,
    /// Anchors per optimiser step; absent for full-batch steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
    /// Epochs asked for (`epochs_run` says how many ran); absent when `steps` counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epochs: Option<u64>,
    /// Optimiser steps, when they counted in place of epochs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// The validation fraction, when early stopping was on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_stopping: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = FlowDto)]
pub struct FlowTraining {
    pub recipe: Recipe,
    /// Anchors of the cell the flow was trained on (the rest were held out for evaluation).
    pub trained_on: usize,
    pub epochs_run: u64,
    pub stopped_early: bool,
    /// Mean squared error on the training anchors at the last epoch (score units²).
    pub train_loss: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_loss: Option<f64>,
    /// MC-dropout passes per correction.
    pub mc_passes: usize,
    /// σ above this routes a corrected score to review.
    pub review_sigma: f64,
    /// The judge scores the correction table covers; others are evaluated directly.
    pub table: [f64; 2],
    /// How well routing on sigma caught large errors on held-out anchors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_audit: Option<ReviewAudit>,
}
