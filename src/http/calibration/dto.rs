//! What the version routes answer: a calibrator version, with its method's report.

use serde::Serialize;
use utoipa::ToSchema;

use super::covariates_dto::CovariateLayerDto;
use super::panel_dto::PanelVersionDto;
use super::{ComparisonDto, DecisionDto, IntervalsDto};
use crate::domain::calibration::CalibratorVersion;
use crate::http::rfc3339;

#[derive(Serialize, ToSchema)]
pub struct VersionDto {
    pub judge: String,
    pub rubric: String,
    pub version: i64,
    pub method: String,
    /// The version the cell serves.
    pub active: bool,
    /// Passed its diagnostics.
    pub passed: bool,
    /// Why it did not pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The judge version whose anchors it was fitted on; absent for unversioned anchors. It
    /// serves requests naming that judge version (the newest passed one does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_version: Option<String>,
    /// Anchors the fit saw, and the SHA-256 of that snapshot.
    pub anchor_count: i64,
    pub anchor_digest: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    pub created_at: String,
    /// What its method reports of it: `posterior` and `diagnostics` for bayes, `flow` for
    /// flow, nothing more for the others.
    #[serde(flatten)]
    pub report: judgecal_stats::Report,
    /// Absent when the cell had too few anchors to hold some out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<ComparisonDto>,
    /// Versions made by an `auto` job: every candidate's figures and why this one won.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionDto>,
    /// Its 95% predictive intervals per bin of the judge score, with their held-out coverage;
    /// absent when none could be made (under 39 held-out anchors for a method without its
    /// own interval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<IntervalsDto>,
    /// How the version's held-out bias varies between the groups its anchors name (the
    /// systems whose outputs were judged): each group's mean residual with its standard
    /// error, and the between-group standard deviation τ that run-level answers use. Absent
    /// where the anchors name fewer than two groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<judgecal_stats::runlevel::groups::GroupBias>,
    /// A panel's version: how its members' scores are fused, and what each member is worth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub panel: Option<PanelVersionDto>,
    /// A version trained with covariates: how the judge score and an item's covariates
    /// become the score its corrector reads, with each covariate's coefficient.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covariates: Option<CovariateLayerDto>,
}

impl From<CalibratorVersion> for VersionDto {
    fn from(v: CalibratorVersion) -> Self {
        let method = v.method().to_string();
        let report = v.model.report();
        Self {
            judge: v.key.judge.to_string(),
            rubric: v.key.rubric.to_string(),
            version: v.version,
            method,
            active: v.active,
            passed: v.failure.is_none(),
            failure: v.failure,
            judge_version: v.judge_version.map(String::from),
            anchor_count: v.anchor_count,
            anchor_digest: v.anchor_digest,
            job_id: v.job_id.map(|j| j.to_string()),
            created_at: rfc3339(v.created_at_ms),
            report,
            evaluation: v.evaluation.map(Into::into),
            decision: v.decision.map(Into::into),
            intervals: v.intervals.map(Into::into),
            groups: v.groups,
            panel: v.fusion.map(Into::into),
            covariates: v.covariate_layer.map(Into::into),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct VersionsResponse {
    /// Newest first.
    pub versions: Vec<VersionDto>,
}
