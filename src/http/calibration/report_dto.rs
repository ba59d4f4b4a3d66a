//! What a version reports of its evaluation: the held-out figures and `auto`'s decision. Its
//! method's own report (a posterior, a flow's training) is the method's type
//! (`judgecal_stats::Report`), which the version carries as it is.

use serde::Serialize;
use utoipa::ToSchema;

use judgecal_stats::cv::Scheme;
use judgecal_stats::quality::{Comparison, Figures};
use judgecal_stats::report::PosteriorReport;
use judgecal_stats::select::Decision;

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
    pub beta: Option<PosteriorReport>,
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
            beta: d.beta.as_ref().map(PosteriorReport::from),
            nested: d.nested.map(Into::into),
        }
    }
}

/// A figure the JSON can carry: null where it is not finite.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}
