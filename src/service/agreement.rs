//! A cell's agreement report (issue 58): how the raw judge and its held-out corrections agree
//! with the reference, read from what a version kept of its anchors when it was trained.

use super::families::{Scores, Versions};
use super::versions::train_hint;
use crate::domain::calibration::CalibratorVersion;
use crate::domain::{CellKey, GroupName, JudgeVersion};
use crate::error::{Error, Result};
use judgecal_stats::agreement::report::AgreementReport;

/// Which version's report, and of which anchors.
#[derive(Debug, Clone, Default)]
pub struct AgreementQuery {
    /// A version by number (default: the active one).
    pub version: Option<i64>,
    /// Instead, the newest version trained on this judge version.
    pub judge_version: Option<JudgeVersion>,
    /// Only the anchors of this group (system).
    pub group: Option<GroupName>,
    /// How many disagreements to list.
    pub top: usize,
}

/// A report beside the version it reads.
pub struct Agreement {
    pub version: CalibratorVersion,
    pub report: AgreementReport,
}

impl Scores<'_> {
    /// The agreement report of `key`'s version that `query` names.
    pub async fn agreement(&self, key: &CellKey, query: &AgreementQuery) -> Result<Agreement> {
        let pairwise = match self.store.pairwise_rows().preference_versions(key).await {
            Ok(versions) => !versions.is_empty(),
            Err(Error::NotFound(_)) => false,
            Err(e) => return Err(e),
        };
        if pairwise {
            return Err(Error::conflict(
                format!(
                    "cell {key} holds pairwise comparisons: how its judge agrees with people (the agreement rate, swap flips, first-shown and longer-answer wins, each system's favouritism) is in GET /v1/cells/{}/{}/preferences, under biases",
                    key.judge, key.rubric
                ),
                vec![],
            ));
        }
        let version = match (query.version, &query.judge_version) {
            (Some(n), _) => self.store.version_rows().version(key, n).await?.ok_or_else(|| {
                Error::NotFound(format!(
                    "cell {key} has no calibrator version {n}; GET /v1/cells/{}/{}/calibrators lists them",
                    key.judge, key.rubric
                ))
            })?,
            (None, Some(jv)) => self
                .store
                .version_rows().versions(key)
                .await?
                .into_iter()
                .find(|v| v.judge_version.as_ref() == Some(jv))
                .ok_or_else(|| {
                    Error::NotFound(format!(
                        "cell {key} has no calibrator trained on judge version {jv}; {}",
                        train_hint(&key.judge)
                    ))
                })?,
            (None, None) => Versions(self).corrector(key, None).await?.version.clone(),
        };
        let rows = self.store.version_rows().held_out(version.id).await?.ok_or_else(|| {
            Error::conflict(
                format!(
                    "version {} of {key} was trained before versions kept their held-out corrections; {} to get a report",
                    version.version,
                    train_hint(&key.judge)
                ),
                vec![],
            )
        })?;
        let top = query.top;
        let report = match &query.group {
            None => AgreementReport::of(&rows, top),
            Some(g) => AgreementReport::of_group(&rows, g.as_str(), top).ok_or_else(|| {
                Error::NotFound(format!(
                    "version {} of {key} holds no anchors of group {g}",
                    version.version
                ))
            })?,
        };
        Ok(Agreement { version, report })
    }
}
