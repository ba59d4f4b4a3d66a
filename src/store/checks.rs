//! Silent-change checks: re-scores of anchor items under a label the cell holds, with the
//! bridge they gave. Kept apart from the anchors, which they never change.

use super::families::VersionRows;
use sqlx::Row;
use uuid::Uuid;

use crate::domain::{CellKey, JudgeName, JudgeVersion, RubricName, now_ms};
use crate::error::{Error, Result};
use judgecal_stats::bridge::{Bridge, Finding};

/// A check as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCheck {
    pub id: Uuid,
    pub judge_version: Option<JudgeVersion>,
    pub bridge: Bridge,
    /// The calibration version the bridge applied.
    pub calibrator: i64,
    pub created_at_ms: i64,
}

impl VersionRows<'_> {
    /// Stores a check, with the calibration version it applied; returns its id.
    pub async fn record_check(
        &self,
        key: &CellKey,
        judge_version: Option<&JudgeVersion>,
        scores: &(impl serde::Serialize + ?Sized),
        (bridge, calibrator): (&Bridge, i64),
        finding: Finding,
    ) -> Result<Uuid> {
        let cell_id = self.cell_id(key).await?;
        let id = Uuid::new_v4();
        let encode = |v: serde_json::Result<String>| {
            v.map_err(|e| Error::Internal(format!("cannot encode a check: {e}")))
        };
        sqlx::query(
            "INSERT INTO judge_checks (id, cell_id, judge_version, scores, result, changed, created_at_ms,
                 calibrator_version)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(id.to_string())
        .bind(&cell_id)
        .bind(JudgeVersion::stored(judge_version))
        .bind(encode(serde_json::to_string(scores))?)
        .bind(encode(serde_json::to_string(bridge))?)
        .bind(finding.gauge())
        .bind(now_ms())
        .bind(calibrator)
        .execute(&self.pool)
        .await?;
        Ok(id)
    }

    /// A cell's check by its id: its judge version, the bridge it answered and the
    /// calibration version that bridge applied; `None` where the cell holds no such check.
    pub async fn check(&self, key: &CellKey, id: Uuid) -> Result<Option<StoredCheck>> {
        let row = sqlx::query(
            "SELECT k.judge_version, k.result, k.calibrator_version, k.created_at_ms
             FROM judge_checks k JOIN cells c ON c.id = k.cell_id
             WHERE c.judge = $1 AND c.rubric = $2 AND k.id = $3",
        )
        .bind(key.judge.as_str())
        .bind(key.rubric.as_str())
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let corrupt =
            |what: &str| Error::Internal(format!("a stored check has an unreadable {what}"));
        Ok(Some(StoredCheck {
            id,
            judge_version: JudgeVersion::from_stored(&row.try_get::<String, _>(0)?)
                .map_err(|_| corrupt("judge version"))?,
            bridge: serde_json::from_str(&row.try_get::<String, _>(1)?)
                .map_err(|_| corrupt("result"))?,
            calibrator: row.try_get::<Option<i64>, _>(2)?.unwrap_or(0),
            created_at_ms: row.try_get(3)?,
        }))
    }

    /// Each cell's latest check: what it found (the `changed` column holds the gauge's value).
    pub async fn latest_checks(&self) -> Result<Vec<(CellKey, Finding)>> {
        let rows = sqlx::query(
            "SELECT c.judge, c.rubric, k.changed FROM judge_checks k JOIN cells c ON c.id = k.cell_id
             WHERE k.created_at_ms = (SELECT MAX(o.created_at_ms) FROM judge_checks o
                 WHERE o.cell_id = k.cell_id)",
        )
        .fetch_all(&self.pool)
        .await?;
        let corrupt = || Error::Internal("a stored check has an unreadable cell".into());
        rows.iter()
            .map(|r| {
                Ok((
                    CellKey {
                        judge: JudgeName::parse(&r.try_get::<String, _>(0)?)
                            .map_err(|_| corrupt())?,
                        rubric: RubricName::parse(&r.try_get::<String, _>(1)?)
                            .map_err(|_| corrupt())?,
                    },
                    Finding::of_gauge(r.try_get::<i64, _>(2)?),
                ))
            })
            .collect()
    }
}
