//! What the job routes answer: a training job and the versions it made.

use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::calibration::Job;
use crate::http::rfc3339;

#[derive(Serialize, ToSchema)]
pub struct JobVersionDto {
    pub rubric: String,
    pub version: i64,
    /// Passed its diagnostics.
    pub passed: bool,
    /// The version the cell serves now.
    pub active: bool,
}

#[derive(Serialize, ToSchema)]
pub struct JobDto {
    pub id: String,
    pub judge: String,
    pub method: String,
    /// `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub state: String,
    /// 0 to 1.
    pub progress: f64,
    /// What the job last reported: for a flow, `{"epoch", "loss"}`; for auto, `{"step"}`; a
    /// panel's, `{"joined": {rubric: {"items", "member_anchors"}}}` (the items every member
    /// scored, and each member's anchors before the join) once done.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub detail: Option<serde_json::Value>,
    /// Times a process has taken the job (more than 1 after a process died running it).
    pub attempts: i64,
    /// The request with every default filled in.
    #[schema(value_type = Object)]
    pub request: serde_json::Value,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub versions: Vec<JobVersionDto>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

impl From<Job> for JobDto {
    fn from(j: Job) -> Self {
        Self {
            id: j.id.to_string(),
            judge: j.judge.to_string(),
            method: j.kind.to_string(),
            state: j.state.as_str().to_owned(),
            progress: j.progress,
            detail: serde_json::from_str(&j.detail).ok(),
            attempts: j.attempts,
            request: j.request,
            error: j.error,
            versions: j
                .versions
                .into_iter()
                .map(|v| JobVersionDto {
                    rubric: v.rubric.to_string(),
                    version: v.version,
                    passed: v.passed,
                    active: v.active,
                })
                .collect(),
            created_at: rfc3339(j.created_at_ms),
            started_at: j.started_at_ms.map(rfc3339),
            finished_at: j.finished_at_ms.map(rfc3339),
        }
    }
}
