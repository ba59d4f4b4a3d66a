//! Pairwise comparisons: stored as anchors are, one transaction per upload, planned by
//! `domain::comparisons::plan` from the rows the cells hold for the batch's items.

use crate::store::families::PairwiseRows;
use sqlx::Row;
use uuid::Uuid;

use crate::domain::covariates;
use crate::domain::ingest::CellKinds;
use crate::domain::pairwise::comparisons::{Comparison, ComparisonBatch, StoredComparison, plan};
use crate::domain::{CellKey, ItemId, JudgeVersion, Scale, now_ms};
use crate::error::{Error, Result};
use crate::store::anchors::{covariates_of, group_of, rater_of};
use crate::store::writer::{self, AnyQuery, Writes, Written};

/// What one cell (one judge version of it) of an upload did.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonIngest {
    pub key: CellKey,
    pub judge_version: Option<JudgeVersion>,
    pub inserted: usize,
    pub unchanged: usize,
    pub replaced: usize,
    /// The cell's comparisons after this upload, of every judge version.
    pub comparison_count: i64,
    /// Rows stored unlabelled that this upload labelled (the same verdicts sent again with a
    /// preference).
    pub newly_labelled: usize,
    /// The rows written (new or replaced) that carry the people's preference, and those newly
    /// labelled: what the drift alarm checks.
    pub labelled: Vec<Comparison>,
}

impl PairwiseRows<'_> {
    /// Stores a checked comparison upload in one transaction: all of it or none of it. A cell
    /// that holds judge scores (anchors) is refused: a cell holds one kind.
    pub async fn ingest_comparisons(
        &self,
        cells: &[ComparisonBatch],
        replace: bool,
    ) -> Result<Vec<ComparisonIngest>> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        // Rubrics, then cells, in sorted order, as anchor uploads take them.
        Self::lock_rubrics(&mut tx, cells, now).await?;
        let mut conflicts = Vec::new();
        let mut outcomes = Vec::with_capacity(cells.len());
        for cell in cells {
            let row = sqlx::query(
                "INSERT INTO cells (id, judge, rubric, anchor_count, updated_at_ms)
                 VALUES ($1, $2, $3, 0, $4)
                 ON CONFLICT (judge, rubric) DO UPDATE SET judge = excluded.judge
                 RETURNING id, anchor_count, comparison_count",
            )
            .bind(Uuid::new_v4().to_string())
            .bind(cell.key.judge.as_str())
            .bind(cell.key.rubric.as_str())
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            let cell_id: String = row.try_get(0)?;
            let kinds = CellKinds {
                anchors: row.try_get(1)?,
                comparisons: row.try_get(2)?,
            };
            if let Some(kind) = kinds.refuses_comparisons(&cell.key, cell.rows.first().copied()) {
                return Err(Error::conflict(kind.message, vec![kind.problem]));
            }
            let stored = Self::stored_comparisons(self.backend, &mut tx, cell, &cell_id).await?;
            match plan(cell, &stored, replace) {
                Err(found) => conflicts.extend(found),
                Ok(_) if !conflicts.is_empty() => {}
                Ok(plan) => {
                    outcomes.push(
                        Self::write_comparisons(self.backend, &mut tx, cell, &cell_id, plan, now)
                            .await?,
                    );
                }
            }
        }
        if !conflicts.is_empty() {
            tx.rollback().await?;
            let n = conflicts.len();
            return Err(Error::conflict(
                format!(
                    "{n} comparison{} the stored rows of {} items; nothing was stored",
                    if n == 1 {
                        " conflicts with"
                    } else {
                        "s conflict with"
                    },
                    if n == 1 { "its" } else { "their" }
                ),
                conflicts,
            ));
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    /// Locks (or creates) the batch's rubrics, in sorted order.
    async fn lock_rubrics(
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        cells: &[ComparisonBatch],
        now: i64,
    ) -> Result<()> {
        let mut rubrics: Vec<&str> = cells.iter().map(|c| c.key.rubric.as_str()).collect();
        rubrics.sort_unstable();
        rubrics.dedup();
        for rubric in rubrics {
            sqlx::query(
                "INSERT INTO rubrics (name, scale_min, scale_max, description, updated_at_ms)
                 VALUES ($1, $2, $3, '', $4)
                 ON CONFLICT (name) DO UPDATE SET name = excluded.name",
            )
            .bind(rubric)
            .bind(Scale::DEFAULT.min)
            .bind(Scale::DEFAULT.max)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    /// The rows `cell_id` holds for the batch's items, of every judge version.
    async fn stored_comparisons(
        backend: crate::store::Backend,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        cell: &ComparisonBatch,
        cell_id: &str,
    ) -> Result<Vec<StoredComparison>> {
        let mut stored = Vec::new();
        let items: Vec<&str> = cell
            .comparisons
            .iter()
            .map(|c| c.item_id.as_str())
            .collect();
        let columns = "SELECT t.judge_version, t.item_id, t.system_a, t.system_b, t.verdict, t.verdict_swapped,
                 t.preference, t.rater, t.covariates";
        for (sql, items) in
            crate::store::by_items(backend, columns, "comparisons", "t.cell_id = $1", 1, &items)?
        {
            let mut q = sqlx::query(sql).bind(cell_id);
            for item in items {
                q = q.bind(item);
            }
            for r in q.fetch_all(&mut **tx).await? {
                stored.push(stored_row(&r)?);
            }
        }
        Ok(stored)
    }

    /// Writes one cell's plan inside the upload's transaction and counts the cell again.
    async fn write_comparisons(
        backend: crate::store::Backend,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        cell: &ComparisonBatch,
        cell_id: &str,
        plan: crate::domain::pairwise::comparisons::ComparisonPlan,
        now: i64,
    ) -> Result<ComparisonIngest> {
        let rows: Vec<&Comparison> = plan.fresh.iter().chain(&plan.replaced).collect();
        let writes = Writes {
            labels: &plan.preferences,
            replaced: plan.replaced.iter().map(|c| c.item_id.as_str()).collect(),
            rows: rows.clone(),
            fresh: plan.fresh.len(),
        };
        let version = JudgeVersion::stored(cell.judge_version.as_ref());
        let comparison_count = writer::write(backend, tx, cell_id, version, writes, now).await?;
        Ok(ComparisonIngest {
            key: cell.key.clone(),
            judge_version: cell.judge_version.clone(),
            inserted: plan.fresh.len(),
            unchanged: plan.unchanged,
            replaced: plan.replaced.len(),
            comparison_count,
            newly_labelled: plan.labelled.len(),
            labelled: rows
                .into_iter()
                .filter(|c| c.preference.is_some())
                .chain(&plan.labelled)
                .cloned()
                .collect(),
        })
    }
}

impl Written for &Comparison {
    const TABLE: &'static str = "comparisons";
    const LABEL: &'static str = "preference";
    const COUNT: &'static str = "comparison_count";
    const COLUMNS: &'static str = "item_id, system_a, system_b, verdict, verdict_swapped, preference, rater, covariates, \
                                   created_at_ms, updated_at_ms";
    const WIDTH: usize = 10;
    // An optional outcome bound as NULL would declare its parameter's type from that NULL.
    const PREPARED: bool = false;

    fn bind<'q>(&self, q: AnyQuery<'q>, now: i64) -> AnyQuery<'q> {
        q.bind(self.item_id.as_str())
            .bind(self.a.as_str())
            .bind(self.b.as_str())
            .bind(self.verdict)
            .bind(self.verdict_swapped)
            .bind(self.preference)
            .bind(self.rater.as_ref().map(|r| r.as_str().to_owned()))
            .bind(covariates::to_stored(&self.covariates))
            .bind(now)
            .bind(now)
    }
}

/// A stored comparison row, in the columns `judge_version, item_id, system_a, system_b,
/// verdict, verdict_swapped, preference, rater, covariates`.
pub(in crate::store) fn stored_row(r: &sqlx::any::AnyRow) -> Result<StoredComparison> {
    let version: String = r.try_get(0)?;
    let item: String = r.try_get(1)?;
    let bad = |what: &str| Error::Internal(format!("stored comparison {what}"));
    Ok(StoredComparison {
        judge_version: JudgeVersion::from_stored(&version).map_err(|_| bad("judge version"))?,
        comparison: Comparison {
            item_id: ItemId::from_stored(item).map_err(|_| bad("item id"))?,
            a: group_of(Some(r.try_get(2)?))?.ok_or_else(|| bad("system"))?,
            b: group_of(Some(r.try_get(3)?))?.ok_or_else(|| bad("system"))?,
            verdict: r.try_get(4)?,
            verdict_swapped: r.try_get(5)?,
            preference: r.try_get(6)?,
            rater: rater_of(r.try_get(7)?)?,
            covariates: covariates_of(r.try_get(8)?)?,
        },
    })
}
