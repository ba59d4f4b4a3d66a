//! The drift check's outbox (`pending_checks`): an upload that stores anchors writes, in its own
//! transaction, which items it stored; the check records the batch's coverage and deletes that
//! row in one transaction. Whoever deletes the row records the check, so a batch is checked
//! exactly once, by the upload's process or, where it died between its commit and its check,
//! by the next refresh of any replica.

use super::families::DriftRows;
use sqlx::Row;
use uuid::Uuid;

use super::anchors::{anchor_of_named, bad_row};
use crate::domain::calibration::CalibratorId;
use crate::domain::{Anchor, CellKey, JudgeName, JudgeVersion, RubricName};
use crate::error::{Error, Result};
use judgecal_stats::drift::CheckedBatch;

/// A stored batch whose check has not been recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCheck {
    pub id: String,
    pub key: CellKey,
    pub judge_version: Option<JudgeVersion>,
    pub item_ids: Vec<String>,
}

impl DriftRows<'_> {
    /// Queues the check of the anchors an upload stored in `cell_id`, inside its transaction;
    /// returns the outbox row's id.
    pub(super) async fn queue_check(
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        cell_id: &str,
        judge_version: Option<&JudgeVersion>,
        stored: &[Anchor],
        now: i64,
    ) -> Result<String> {
        let id = Uuid::new_v4().to_string();
        let items: Vec<&str> = stored.iter().map(|a| a.item_id.as_str()).collect();
        let items = serde_json::to_string(&items)
            .map_err(|e| Error::Internal(format!("encoding a batch's items: {e}")))?;
        sqlx::query(
            "INSERT INTO pending_checks (id, cell_id, judge_version, item_ids, created_at_ms)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&id)
        .bind(cell_id)
        .bind(JudgeVersion::stored(judge_version))
        .bind(items)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        Ok(id)
    }

    /// Records a batch's check (`None`: nothing to record, the cell served no version that
    /// reads it) and takes it off the outbox, in one transaction. `false`, and nothing written,
    /// where another process took it first.
    pub async fn complete_check(
        &self,
        pending: &str,
        record: Option<(CalibratorId, &CheckedBatch, i64)>,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let taken = sqlx::query("DELETE FROM pending_checks WHERE id = $1")
            .bind(pending)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if taken == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        if let Some((calibrator, batch, inside)) = record {
            Self::insert_coverage(&mut tx, calibrator, batch, inside).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// The batches stored before `before_ms` whose checks are not recorded, oldest first.
    pub async fn pending_checks(&self, before_ms: i64) -> Result<Vec<PendingCheck>> {
        let rows = sqlx::query(
            "SELECT p.id, c.judge, c.rubric, p.judge_version, p.item_ids
             FROM pending_checks p JOIN cells c ON c.id = p.cell_id
             WHERE p.created_at_ms < $1 ORDER BY p.created_at_ms, p.id",
        )
        .bind(before_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(PendingCheck {
                    id: r.try_get(0)?,
                    key: CellKey {
                        judge: JudgeName::parse(&r.try_get::<String, _>(1)?)
                            .map_err(|_| bad_row("judge name"))?,
                        rubric: RubricName::parse(&r.try_get::<String, _>(2)?)
                            .map_err(|_| bad_row("rubric name"))?,
                    },
                    judge_version: JudgeVersion::from_stored(&r.try_get::<String, _>(3)?)
                        .map_err(|_| bad_row("judge version"))?,
                    item_ids: serde_json::from_str(&r.try_get::<String, _>(4)?)
                        .map_err(|_| bad_row("pending check"))?,
                })
            })
            .collect()
    }

    /// The anchors of `check`'s items as stored now (an item deleted since is left out).
    pub async fn pending_anchors(&self, check: &PendingCheck) -> Result<Vec<Anchor>> {
        let cell_id = self.cell_id(&check.key).await?;
        let mut anchors = Vec::with_capacity(check.item_ids.len());
        let items: Vec<&str> = check.item_ids.iter().map(String::as_str).collect();
        let columns = "SELECT t.item_id, t.judge_score, t.reference_score, t.group_name, t.rater, t.judge_version,
                 t.covariates, t.repeats, CAST(NULL AS BIGINT) AS reference_at_ms";
        let filter = "t.cell_id = $1 AND t.judge_version = $2";
        for (sql, items) in super::by_items(self.backend, columns, "anchors", filter, 2, &items)? {
            let mut q = sqlx::query(sql)
                .bind(&cell_id)
                .bind(JudgeVersion::stored(check.judge_version.as_ref()));
            for item in items {
                q = q.bind(item);
            }
            for r in q.fetch_all(&self.pool).await? {
                anchors.push(anchor_of_named(&r)?);
            }
        }
        // In the order the upload stored them.
        let order: std::collections::HashMap<&str, usize> = check
            .item_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        anchors.sort_by_key(|a: &Anchor| order.get(a.item_id.as_str()).copied());
        Ok(anchors)
    }
}
