//! A pairwise cell's trained version (issue 56): what `auto` chose for the calibrated
//! preference, every candidate's held-out figures beside the raw verdict's, how well the
//! held-out predictions are calibrated, and the judge's biases beside the people's. Stored
//! as one JSON report per version (`preference_versions`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::calibration::JobId;
use crate::domain::{CellKey, CovariateName, GroupName, JudgeVersion, RubricName};
use judgecal_stats::conformal::Intervals;
use judgecal_stats::pairwise::preference::{PreferenceMap, Verdicts};

/// Held-out (or, for the raw verdict, in-sample) figures of one way of reading the verdicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Figures {
    pub inputs: String,
    pub log_loss: f64,
    pub accuracy: f64,
}

/// A share with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Share {
    pub estimate: f64,
    pub interval: [f64; 2],
    pub comparisons: usize,
}

/// A system's favouritism: the judge's mean preference for it minus the people's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Favouritism {
    #[schema(value_type = String)]
    pub system: GroupName,
    pub estimate: f64,
    pub interval: [f64; 2],
    pub comparisons: usize,
}

/// The judge's biases beside the people's; a share nothing could be read for is `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Biases {
    /// How often the judge's winner is the people's, over the labelled comparisons (a tie on
    /// one side agrees by half; `None` in versions trained before it was measured). Swap
    /// consistency is 1 − `flips`.
    #[serde(default)]
    pub agreement: Option<Share>,
    pub judge_first: Option<Share>,
    pub people_first: Option<Share>,
    pub flips: Option<Share>,
    /// The covariate whose sign says which answer is longer (`length_diff` or
    /// `log_length_ratio`); `None`: no comparison carries one, and no longer-answer rates.
    #[schema(value_type = Option<String>)]
    pub length_covariate: Option<CovariateName>,
    pub judge_longer: Option<Share>,
    pub people_longer: Option<Share>,
    pub favouritism: Vec<Favouritism>,
}

/// A comparison's verdicts read as one number, the bin of the drift alarm's band and the
/// bridge's level: both orders' mean where the swapped verdict is given.
pub fn verdict_level(v: &Verdicts) -> f64 {
    v.swapped.map_or(v.verdict, |s| (v.verdict + s) / 2.0)
}

/// The fewest labelled comparisons a pairwise cell is trained, or a run rated, from.
pub const MIN_LABELLED: usize = 20;

/// The covariates read as the length difference, in the order they are looked for: positive
/// means a's answer is the longer.
pub const LENGTH_COVARIATES: [&str; 2] = ["length_diff", "log_length_ratio"];

/// One bin of held-out predictions: their mean and the people's mean preference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Reliability {
    pub predicted: f64,
    pub observed: f64,
    pub comparisons: usize,
}

/// What a version serves as trained: the chosen map fitted on every labelled comparison, and
/// the conformal band of the people's preference around its held-out predictions, per bin of
/// the verdict (both orders' mean), whose misses the drift alarm counts. Versions trained
/// before these were kept (2026-12-01) have none: they raise no drift alarm, and a bridge
/// from them fits their choice again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedMap {
    pub map: PreferenceMap,
    pub intervals: Option<Intervals>,
}

/// One member of a pairwise panel's version: the judge version of its comparisons fitted, its
/// comparisons in the rubric before the join, and its own calibrated preference (`auto` over
/// its verdicts alone) held out on the joined labelled comparisons, beside the panel's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PanelMember {
    pub judge: String,
    pub judge_version: Option<String>,
    pub comparisons: usize,
    pub alone: Figures,
}

/// What a pairwise training computed for one cell (stored as JSON; the report route shows
/// all of it but `served`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreferenceReport {
    /// The candidate `auto` chose: the lowest held-out log-loss.
    pub chosen: String,
    pub candidates: Vec<Figures>,
    /// The raw verdict read as the probability that people prefer a (hard verdicts at 0.95).
    pub raw: Figures,
    /// The covariates the map read: those every labelled comparison carries.
    pub covariates: Vec<CovariateName>,
    /// The systems of the labelled comparisons, by name.
    pub systems: Vec<GroupName>,
    /// The chosen map's held-out predictions in ten bins of equal count.
    pub reliability: Vec<Reliability>,
    pub biases: Biases,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served: Option<ServedMap>,
    /// A pairwise panel's version: its members, in the order its map reads them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub panel: Vec<PanelMember>,
}

/// A version to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPreference {
    pub rubric: RubricName,
    pub comparison_count: i64,
    pub labelled_count: i64,
    /// SHA-256 of the comparisons read, in item order.
    pub digest: String,
    pub report: PreferenceReport,
}

/// A stored version. The newest of a cell is the one its report, picture and metrics show.
#[derive(Debug, Clone, PartialEq)]
pub struct PreferenceVersion {
    pub key: CellKey,
    pub version: i64,
    pub job_id: Option<JobId>,
    pub judge_version: Option<JudgeVersion>,
    pub comparison_count: i64,
    pub labelled_count: i64,
    pub digest: String,
    pub report: PreferenceReport,
    pub created_at_ms: i64,
    /// Its row's id, which its drift checks name.
    pub id: String,
}
