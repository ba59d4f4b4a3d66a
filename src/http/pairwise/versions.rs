//! GET /v1/cells/{judge}/{rubric}/preferences: a pairwise cell's trained versions, for the
//! people who check a pairwise judge before trusting it: what `auto` chose, its held-out
//! calibration beside the raw verdict's, and the judge's biases beside the people's.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::pairwise::version::{
    Biases, Figures, PanelMember, PreferenceVersion, Reliability,
};
use crate::http::AppState;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{AnyKey, Authorized, Path, cell_key};
use crate::http::rfc3339;

/// One trained version of a pairwise cell.
#[derive(Serialize, ToSchema)]
pub struct PreferenceVersionDto {
    pub version: i64,
    /// The judge version whose comparisons it read (absent: those without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// Comparisons read (the judge's shares read all of them), and how many carry the
    /// people's preference (the map and the people's shares read those).
    pub comparisons: i64,
    pub labelled: i64,
    /// SHA-256 of the comparisons read, in item order.
    pub digest: String,
    /// The candidate `auto` chose: the lowest held-out log-loss (5 folds).
    pub chosen: String,
    /// Every candidate's held-out log-loss and accuracy.
    pub candidates: Vec<Figures>,
    /// The raw verdict as the probability that people prefer a (a hard verdict read as 95%
    /// sure), on the same labelled comparisons, in-sample.
    pub raw: Figures,
    /// The covariates the map read: those every labelled comparison carries.
    pub covariates: Vec<String>,
    pub systems: Vec<String>,
    /// The chosen map's held-out predictions in up to ten bins of equal count, against the
    /// people's mean preference in each.
    pub reliability: Vec<Reliability>,
    pub biases: Biases,
    /// A pairwise panel's version: its members in the order its map reads them, each with the
    /// judge version fitted, its comparisons before the join, and its own map's held-out
    /// figures on the panel's labelled comparisons (does the panel beat its best member?).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub panel: Vec<PanelMember>,
    pub created_at: String,
}

impl From<PreferenceVersion> for PreferenceVersionDto {
    fn from(v: PreferenceVersion) -> Self {
        let r = v.report;
        Self {
            version: v.version,
            judge_version: v.judge_version.map(|j| j.as_str().to_owned()),
            job_id: v.job_id.map(|j| j.to_string()),
            comparisons: v.comparison_count,
            labelled: v.labelled_count,
            digest: v.digest,
            chosen: r.chosen,
            candidates: r.candidates,
            raw: r.raw,
            covariates: r.covariates.iter().map(ToString::to_string).collect(),
            systems: r.systems.iter().map(ToString::to_string).collect(),
            reliability: r.reliability,
            biases: r.biases,
            panel: r.panel,
            created_at: rfc3339(v.created_at_ms),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct PreferencesResponse {
    /// Newest first; the newest is the one the cell's picture and metrics show.
    pub versions: Vec<PreferenceVersionDto>,
}

/// A pairwise cell's trained versions, newest first: `auto`'s choice of the calibrated
/// preference with every candidate's held-out log-loss and accuracy, its held-out
/// calibration, and the bias diagnostics with 95% intervals: the share of wins by the answer
/// shown first (judge; people: answer a), the swap flip rate, the longer answer's share
/// (judge and people, where the comparisons carry `length_diff` or `log_length_ratio`), and
/// each system's favouritism (the judge's mean preference for it minus the people's).
#[utoipa::path(
    get, path = "/v1/cells/{judge}/{rubric}/preferences", tag = "calibration",
    params(("judge" = String, Path), ("rubric" = String, Path)),
    responses(
        (status = 200, body = PreferencesResponse),
        (status = 404, description = "No such cell, a cell of judge scores, or none trained yet", body = ErrorBody),
        (status = 422, description = "Bad judge or rubric name", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn preferences(
    State(state): State<AppState>,
    _auth: Authorized<AnyKey>,
    Path((judge, rubric)): Path<(String, String)>,
) -> Result<axum::Json<PreferencesResponse>, ApiError> {
    let key = cell_key(&judge, &rubric)?;
    let versions = state.service.pairwise().preference_versions(&key).await?;
    Ok(axum::Json(PreferencesResponse {
        versions: versions.into_iter().map(Into::into).collect(),
    }))
}
