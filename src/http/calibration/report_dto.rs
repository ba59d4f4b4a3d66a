//! What a version reports of its method: the β posterior, the sampler's diagnostics, the
//! held-out figures, a flow's recipe and review audit, and `auto`'s decision.

use serde::Serialize;
use utoipa::ToSchema;

use judgecal_stats::bayes::RubricPosterior;
use judgecal_stats::cv::Scheme;
use judgecal_stats::flow::{FlowSummary, Schedule};
use judgecal_stats::quality::{Comparison, Figures};
use judgecal_stats::select::Decision;

#[derive(Serialize, ToSchema)]
pub struct PosteriorDto {
    pub alpha_mean: f64,
    pub beta_mean: f64,
    pub sigma_mean: f64,
    /// 95% credible interval of beta.
    pub beta_interval: [f64; 2],
    /// Pr(beta < collapse_beta | anchors).
    pub beta_collapse_probability: f64,
    /// The judge no longer tracks the reference on this rubric.
    pub canary: bool,
}

#[derive(Serialize, ToSchema)]
pub struct DiagnosticsDto {
    /// Largest rank-normalised split R-hat (null if undefined).
    pub rhat_max: Option<f64>,
    pub ess_bulk_min: Option<f64>,
    pub ess_tail_min: Option<f64>,
    pub divergences: u64,
    /// Rounds the sampler was extended by (longer runs, more chains) because an earlier round
    /// missed the gate; 0 where the first passed. At most 2.
    pub extensions: u32,
}

#[derive(Serialize, ToSchema)]
pub struct EvaluationDto {
    /// Held-out anchors evaluated.
    pub n: usize,
    /// mean(corrected) − mean(reference).
    pub mean_error: f64,
    pub mae: f64,
    pub pearson: f64,
    /// KL(corrected ‖ reference) between KDEs of the two (the paper's KL column); each KDE's
    /// bandwidth is at least the reference's level spacing. Null for versions trained before
    /// it was recorded per direction.
    pub kl_corrected_reference: Option<f64>,
    /// KL(reference ‖ corrected), the other direction.
    pub kl_reference_corrected: Option<f64>,
    /// The mean of the two directions (`auto`'s default tie-break).
    pub kl_mean: Option<f64>,
    /// Wasserstein-1 between corrected and reference scores.
    pub w1: f64,
}

impl From<Figures> for EvaluationDto {
    fn from(e: Figures) -> Self {
        Self {
            n: e.n,
            mean_error: e.mean_error,
            mae: e.mae,
            pearson: e.pearson,
            kl_corrected_reference: finite(e.kl_corrected_reference),
            kl_reference_corrected: finite(e.kl_reference_corrected),
            kl_mean: finite(e.kl_mean),
            w1: e.w1,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct ComparisonDto {
    /// `5-fold` or `holdout 0.2`.
    pub scheme: String,
    /// This version's held-out corrections.
    pub calibrated: EvaluationDto,
    /// The raw judge scores of the same anchors.
    pub raw: EvaluationDto,
}

impl From<Comparison> for ComparisonDto {
    fn from(c: Comparison) -> Self {
        Self {
            scheme: scheme_text(c.scheme),
            calibrated: c.calibrated.into(),
            raw: c.raw.into(),
        }
    }
}

/// How a flow version was trained.
#[derive(Serialize, ToSchema)]
pub struct RecipeDto {
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

#[derive(Serialize, ToSchema)]
pub struct FlowDto {
    pub recipe: RecipeDto,
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
    pub review_audit: Option<ReviewAuditDto>,
}

/// The review routing checked on held-out anchors. Sigma is the spread of the flow's own map
/// over dropout masks (its uncertainty about the mean reference at that judge score), not the
/// reference's noise, which makes most large errors.
#[derive(Serialize, ToSchema)]
pub struct ReviewAuditDto {
    pub held_out: usize,
    /// Share of them routed to review.
    pub routed: f64,
    /// Share of the largest 10% absolute errors that were routed; routing at random catches
    /// `routed`.
    pub large_errors_routed: f64,
    /// The same when as many are routed by the widest 95% interval instead.
    pub large_errors_routed_by_width: Option<f64>,
}

impl From<FlowSummary> for FlowDto {
    fn from(f: FlowSummary) -> Self {
        Self {
            recipe: RecipeDto {
                learning_rate: f.config.learning_rate,
                schedule: f.config.schedule,
                batch_size: f.config.batch_size,
                epochs: f.config.steps.is_none().then_some(f.config.epochs),
                steps: f.config.steps,
                early_stopping: f.config.early_stopping,
            },
            trained_on: f.trained_on,
            epochs_run: f.epochs_run,
            stopped_early: f.stopped_early,
            train_loss: f.train_loss,
            validation_loss: f.validation_loss,
            mc_passes: f.mc_passes,
            review_sigma: f.review_sigma,
            table: [f.table.0, f.table.1],
            review_audit: f.review_audit.map(|a| ReviewAuditDto {
                held_out: a.held_out,
                routed: a.routed,
                large_errors_routed: a.large_errors_routed,
                large_errors_routed_by_width: a.large_errors_routed_by_width,
            }),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct CandidateDto {
    /// identity (the raw judge), quantile_map, bayes or flow.
    pub method: String,
    /// Its held-out figures on the same anchors as every other candidate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<EvaluationDto>,
    /// Why it was not considered for this cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
}

/// What an `auto` job saw and chose for this cell.
#[derive(Serialize, ToSchema)]
pub struct DecisionDto {
    /// `5-fold` or `holdout 0.2`: the anchors every candidate was evaluated on.
    pub scheme: String,
    /// The figure that picked the winner (lower is better), and the tie-break.
    pub objective: String,
    pub tie_break: String,
    /// Candidates within this fraction of the best objective were tied.
    pub tie_tolerance: f64,
    pub candidates: Vec<CandidateDto>,
    pub chosen: String,
    pub reason: String,
    /// The Bayesian fit's beta posterior on every anchor (kept whichever method won, for the
    /// canary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta: Option<PosteriorDto>,
    /// The held-out figures of the choice itself, which the version's `evaluation` records:
    /// each held-out anchor predicted by the method chosen on the other anchors (five groups).
    /// The winner's entry in `candidates` is optimistic: it won on those anchors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nested: Option<EvaluationDto>,
}

fn scheme_text(s: Scheme) -> String {
    match s {
        Scheme::Folds(k) => format!("{k}-fold"),
        Scheme::Holdout(f) => format!("holdout {f}"),
    }
}

pub(super) fn posterior_dto(p: &RubricPosterior) -> PosteriorDto {
    PosteriorDto {
        alpha_mean: p.alpha_mean,
        beta_mean: p.beta_mean,
        sigma_mean: p.sigma_mean,
        beta_interval: [p.beta_lo, p.beta_hi],
        beta_collapse_probability: p.beta_collapse_probability,
        canary: p.canary,
    }
}

impl From<Decision> for DecisionDto {
    fn from(d: Decision) -> Self {
        Self {
            scheme: scheme_text(d.scheme),
            objective: d.rule.objective.as_str().to_owned(),
            tie_break: d.rule.tie_break.as_str().to_owned(),
            tie_tolerance: d.rule.tie_tolerance,
            candidates: d
                .candidates
                .into_iter()
                .map(|c| CandidateDto {
                    method: c.method.to_string(),
                    evaluation: c.evaluation.map(Into::into),
                    excluded: c.excluded,
                })
                .collect(),
            chosen: d.chosen.to_string(),
            reason: d.reason,
            beta: d.beta.as_ref().map(posterior_dto),
            nested: d.nested.map(Into::into),
        }
    }
}

/// A figure the JSON can carry: null where it is not finite.
pub(super) fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}
