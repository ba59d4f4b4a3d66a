//! Rubrics, cells and anchors.

use std::collections::HashMap;

use sqlx::Row;
use sqlx::any::AnyRow;
use uuid::Uuid;

use super::Store;
use super::families::DriftRows;
use super::writer::{self, AnyQuery, Writes, Written};
use crate::domain::anchors::CellBatch;
use crate::domain::covariates::{self, Covariates};
use crate::domain::ingest::{CellKinds, CellPlan, Refusals, StoredRow, plan_cell};
use crate::domain::repeats;
use crate::domain::{
    Anchor, CellKey, CellSummary, ItemId, JudgeName, JudgeVersion, RaterName, Rubric, RubricName,
    Scale, now_ms,
};
use crate::error::{Error, Result};

/// An anchor to insert, with the creation time it keeps.
struct Insert<'a>(&'a Anchor, i64);

impl Written for Insert<'_> {
    const TABLE: &'static str = "anchors";
    const LABEL: &'static str = "reference_score";
    const COUNT: &'static str = "anchor_count";
    const COLUMNS: &'static str = "item_id, judge_score, reference_score, updated_at_ms, group_name, created_at_ms, rater, \
                                   covariates, repeats";
    const WIDTH: usize = 9;
    const PREPARED: bool = true;

    fn bind<'q>(&self, q: AnyQuery<'q>, now: i64) -> AnyQuery<'q> {
        let Insert(a, created) = *self;
        q.bind(a.item_id.as_str())
            .bind(a.judge_score)
            .bind(a.reference_score)
            .bind(now)
            .bind(a.group.as_ref().map(|g| g.as_str().to_owned()))
            .bind(created)
            .bind(a.rater.as_ref().map(|r| r.as_str().to_owned()))
            .bind(covariates::to_stored(&a.covariates))
            .bind(repeats::to_stored(&a.repeats))
    }
}

/// What one cell (one judge version of it) of an upload did.
#[derive(Debug, Clone, PartialEq)]
pub struct CellIngest {
    pub key: CellKey,
    pub judge_version: Option<JudgeVersion>,
    pub inserted: usize,
    pub unchanged: usize,
    pub replaced: usize,
    pub anchor_count: i64,
    /// The anchors this batch stored (new or replaced): what the coverage check looks at.
    pub stored: Vec<Anchor>,
    /// How the stored anchors fared against the version the cell served (set by the service).
    pub coverage: Option<super::BatchCoverage>,
    /// The outbox row of the stored anchors' check, where any were stored
    /// (`Store::complete_check` takes it).
    pub pending: Option<String>,
}

pub(super) fn bad_row(what: &str) -> Error {
    Error::Internal(format!("stored {what} failed validation"))
}

fn rubric_from_row(row: &AnyRow) -> Result<Rubric> {
    let name: String = row.try_get("name")?;
    Ok(Rubric {
        name: RubricName::parse(&name).map_err(|_| bad_row("rubric name"))?,
        scale: Scale::from_stored(row.try_get("scale_min")?, row.try_get("scale_max")?)
            .ok_or_else(|| bad_row("rubric scale"))?,
        description: row.try_get("description")?,
        updated_at_ms: row.try_get("updated_at_ms")?,
    })
}

impl Store {
    pub async fn rubrics(&self) -> Result<Vec<Rubric>> {
        let rows = sqlx::query(
            "SELECT name, scale_min, scale_max, description, updated_at_ms FROM rubrics ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rubric_from_row).collect()
    }

    pub async fn rubric_scales(&self) -> Result<HashMap<RubricName, Scale>> {
        Ok(self
            .rubrics()
            .await?
            .into_iter()
            .map(|r| (r.name, r.scale))
            .collect())
    }

    /// Sets a rubric's scale. Refused (and nothing changed) when stored anchors of the rubric
    /// have reference scores outside the new scale.
    pub async fn put_rubric(
        &self,
        name: &RubricName,
        scale: Scale,
        description: &str,
    ) -> Result<Rubric> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO rubrics (name, scale_min, scale_max, description, updated_at_ms)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (name) DO UPDATE SET scale_min = excluded.scale_min,
                 scale_max = excluded.scale_max, description = excluded.description,
                 updated_at_ms = excluded.updated_at_ms",
        )
        .bind(name.as_str())
        .bind(scale.min)
        .bind(scale.max)
        .bind(description)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let outside: i64 = sqlx::query(
            "SELECT COUNT(*) FROM anchors a JOIN cells c ON c.id = a.cell_id
             WHERE c.rubric = $1 AND (a.reference_score < $2 OR a.reference_score > $3)",
        )
        .bind(name.as_str())
        .bind(scale.min)
        .bind(scale.max)
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        if outside > 0 {
            tx.rollback().await?;
            return Err(Error::conflict(
                format!(
                    "{outside} stored anchors of rubric {name} have reference scores outside [{}, {}]; \
                     delete or fix them first",
                    scale.min, scale.max
                ),
                vec![],
            ));
        }
        tx.commit().await?;
        Ok(Rubric {
            name: name.clone(),
            scale,
            description: description.to_owned(),
            updated_at_ms: now,
        })
    }

    /// Stores a validated upload in one transaction: all of it or none of it.
    ///
    /// `scales` are the rubric scales the batch was validated against; if a rubric's scale
    /// changed since, the upload is refused rather than stored against a stale check. An
    /// anchor already stored with the same scores is `unchanged`; with other scores it is a
    /// conflict unless `replace` is set.
    pub async fn ingest(
        &self,
        cells: &[CellBatch],
        scales: &HashMap<RubricName, Scale>,
        replace: bool,
    ) -> Result<Vec<CellIngest>> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;

        Self::lock_rubrics(&mut tx, cells, scales, now).await?;
        let mut refusals = Refusals::default();
        let mut outcomes = Vec::with_capacity(cells.len());
        for cell in cells {
            let (cell_id, kinds) = Self::lock_cell(&mut tx, cell, now).await?;
            if let Some(kind) = kinds.refuses_scores(&cell.key, cell.rows.first().copied()) {
                refusals.kind.get_or_insert(kind);
                continue;
            }

            // The rows the cell holds for the batch's items, of every version, then the plan,
            // decided without the database.
            let stored =
                Self::stored_rows(self.backend, &mut tx, cell, &cell_id, kinds.anchors).await?;
            let plan = plan_cell(cell, &stored, replace, now, &mut refusals);
            if !refusals.is_empty() {
                continue;
            }
            let mut outcome =
                Self::write_plan(self.backend, &mut tx, cell, &cell_id, &plan, now).await?;
            if !outcome.stored.is_empty() {
                outcome.pending = Some(
                    DriftRows::queue_check(
                        &mut tx,
                        &cell_id,
                        cell.judge_version.as_ref(),
                        &outcome.stored,
                        now,
                    )
                    .await?,
                );
            }
            outcomes.push(outcome);
        }
        if let Some(refused) = refused(refusals) {
            tx.rollback().await?;
            return Err(refused);
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    /// Locks (or creates) the batch's rubrics, in sorted order, so two uploads never wait on
    /// each other in a cycle (the cells are locked after them, also in order). The first
    /// statement writes, which on SQLite takes the write lock at once instead of failing to
    /// upgrade later. A rubric whose scale changed since the batch was checked refuses it.
    async fn lock_rubrics(
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        cells: &[CellBatch],
        scales: &HashMap<RubricName, Scale>,
        now: i64,
    ) -> Result<()> {
        let mut rubrics: Vec<&RubricName> = cells.iter().map(|c| &c.key.rubric).collect();
        rubrics.sort();
        rubrics.dedup();
        for rubric in rubrics {
            let row = sqlx::query(
                "INSERT INTO rubrics (name, scale_min, scale_max, description, updated_at_ms)
                 VALUES ($1, $2, $3, '', $4)
                 ON CONFLICT (name) DO UPDATE SET name = excluded.name
                 RETURNING scale_min, scale_max",
            )
            .bind(rubric.as_str())
            .bind(Scale::DEFAULT.min)
            .bind(Scale::DEFAULT.max)
            .bind(now)
            .fetch_one(&mut **tx)
            .await?;
            let stored = Scale {
                min: row.try_get(0)?,
                max: row.try_get(1)?,
            };
            if stored != scales.get(rubric).copied().unwrap_or(Scale::DEFAULT) {
                return Err(Error::conflict(
                    format!(
                        "rubric {rubric}'s scale changed while this batch was checked; send it again"
                    ),
                    vec![],
                ));
            }
        }
        Ok(())
    }

    /// Locks (or creates) a batch's cell: its id and what it holds of each kind.
    async fn lock_cell(
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        cell: &CellBatch,
        now: i64,
    ) -> Result<(String, CellKinds)> {
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
        .fetch_one(&mut **tx)
        .await?;
        let kinds = CellKinds {
            anchors: row.try_get(1)?,
            comparisons: row.try_get(2)?,
        };
        Ok((row.try_get(0)?, kinds))
    }

    /// The rows `cell_id` holds for the batch's items, of every judge version. A new (empty)
    /// cell needs no look-up; a batch of at least half the cell's rows reads the whole cell in
    /// one statement; a smaller one looks its items up (`by_items`), so that its cost follows
    /// the batch, not the cell.
    async fn stored_rows(
        backend: super::Backend,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        cell: &CellBatch,
        cell_id: &str,
        stored_count: i64,
    ) -> Result<Vec<StoredRow>> {
        const COLUMNS: &str =
            "SELECT t.judge_version, t.item_id, t.judge_score, t.reference_score, t.group_name,
                 t.created_at_ms, t.rater, t.covariates, t.repeats";
        let mut stored = Vec::new();
        if stored_count == 0 {
            return Ok(stored);
        }
        let whole = usize::try_from(stored_count).unwrap_or(usize::MAX) <= 2 * cell.anchors.len();
        let statements = if whole {
            vec![(
                sqlx::AssertSqlSafe(format!("{COLUMNS} FROM anchors AS t WHERE t.cell_id = $1")),
                Vec::new(),
            )]
        } else {
            let items: Vec<&str> = cell.anchors.iter().map(|a| a.item_id.as_str()).collect();
            super::by_items(backend, COLUMNS, "anchors", "t.cell_id = $1", 1, &items)?
        };
        for (sql, items) in statements {
            let mut q = sqlx::query(sql).bind(cell_id);
            for item in items {
                q = q.bind(item);
            }
            for r in q.fetch_all(&mut **tx).await? {
                stored.push(StoredRow {
                    judge_version: r.try_get(0)?,
                    item_id: r.try_get(1)?,
                    judge_score: r.try_get(2)?,
                    reference_score: r.try_get(3)?,
                    group: group_of(r.try_get(4)?)?,
                    created_at_ms: r.try_get(5)?,
                    rater: rater_of(r.try_get(6)?)?,
                    covariates: covariates_of(r.try_get(7)?)?,
                    repeats: repeats_of(r.try_get(8)?)?,
                });
            }
        }
        Ok(stored)
    }

    /// Writes one cell's plan inside the upload's transaction and counts the cell again.
    async fn write_plan(
        backend: super::Backend,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        cell: &CellBatch,
        cell_id: &str,
        plan: &CellPlan,
        now: i64,
    ) -> Result<CellIngest> {
        let inserts = plan.inserts(now);
        let writes = Writes {
            labels: &plan.new_references,
            replaced: plan
                .replaced
                .iter()
                .map(|(a, _)| a.item_id.as_str())
                .collect(),
            rows: inserts
                .iter()
                .map(|&(a, created)| Insert(a, created))
                .collect(),
            fresh: plan.fresh.len(),
        };
        let version = JudgeVersion::stored(cell.judge_version.as_ref());
        let anchor_count = writer::write(backend, tx, cell_id, version, writes, now).await?;
        Ok(CellIngest {
            key: cell.key.clone(),
            judge_version: cell.judge_version.clone(),
            inserted: plan.fresh.len(),
            unchanged: plan.unchanged,
            replaced: plan.replaced.len(),
            anchor_count,
            stored: inserts.into_iter().map(|(a, _)| a.clone()).collect(),
            coverage: None,
            pending: None,
        })
    }

    pub async fn cells(&self) -> Result<Vec<CellSummary>> {
        let rows = sqlx::query(
            "SELECT judge, rubric, anchor_count, updated_at_ms, comparison_count FROM cells
             ORDER BY judge, rubric",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(CellSummary {
                    key: CellKey {
                        judge: JudgeName::parse(&r.try_get::<String, _>(0)?)
                            .map_err(|_| bad_row("judge name"))?,
                        rubric: RubricName::parse(&r.try_get::<String, _>(1)?)
                            .map_err(|_| bad_row("rubric name"))?,
                    },
                    anchor_count: r.try_get(2)?,
                    updated_at_ms: r.try_get(3)?,
                    comparison_count: r.try_get(4)?,
                })
            })
            .collect()
    }

    pub(super) async fn cell_id(&self, key: &CellKey) -> Result<String> {
        sqlx::query("SELECT id FROM cells WHERE judge = $1 AND rubric = $2")
            .bind(key.judge.as_str())
            .bind(key.rubric.as_str())
            .fetch_optional(&self.pool)
            .await?
            .map(|r| r.try_get(0))
            .transpose()?
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "cell {key} has no anchors; upload some with POST /v1/anchors"
                ))
            })
    }

    /// One page of a cell's anchors in (item id, judge version) order, after `after`
    /// (exclusive), of one judge version when `only` names one. Returns the page and whether
    /// more follow.
    pub async fn anchors_page(
        &self,
        key: &CellKey,
        only: Option<&JudgeVersion>,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<(Vec<Anchor>, bool)> {
        let cell_id = self.cell_id(key).await?;
        let (item, version) = after.unwrap_or(("", ""));
        let rows = sqlx::query(
            "SELECT a.item_id, a.judge_score, a.reference_score, a.group_name, a.rater, a.judge_version,
                 a.covariates, a.repeats, CAST(NULL AS BIGINT) AS reference_at_ms
             FROM anchors a WHERE a.cell_id = $1 AND (a.item_id > $2 OR (a.item_id = $3 AND a.judge_version > $4))
                 AND ($5 = '' OR a.judge_version = $6)
             ORDER BY a.item_id, a.judge_version LIMIT $7",
        )
        .bind(&cell_id)
        .bind(item)
        .bind(item)
        .bind(version)
        .bind(JudgeVersion::stored(only))
        .bind(JudgeVersion::stored(only))
        .bind(i64::try_from(limit + 1).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        let more = rows.len() > limit;
        let anchors = rows
            .iter()
            .take(limit)
            .map(anchor_of_named)
            .collect::<Result<_>>()?;
        Ok((anchors, more))
    }

    /// Removes an anchor item's row of judge version `version` (`None`: its unversioned row)
    /// and no other: rows of other versions keep their scores and references. Returns the
    /// cell's new anchor count.
    pub async fn delete_anchor(
        &self,
        key: &CellKey,
        item_id: &str,
        version: Option<&JudgeVersion>,
    ) -> Result<i64> {
        let mut tx = self.pool.begin().await?;
        let cell_id: String = sqlx::query(
            "UPDATE cells SET updated_at_ms = $1 WHERE judge = $2 AND rubric = $3 RETURNING id",
        )
        .bind(now_ms())
        .bind(key.judge.as_str())
        .bind(key.rubric.as_str())
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| Error::NotFound(format!("cell {key} does not exist")))?
        .try_get(0)?;
        let deleted = sqlx::query(
            "DELETE FROM anchors WHERE cell_id = $1 AND item_id = $2 AND judge_version = $3",
        )
        .bind(&cell_id)
        .bind(item_id)
        .bind(JudgeVersion::stored(version))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if deleted == 0 {
            tx.rollback().await?;
            return Err(Error::NotFound(match version {
                Some(v) => format!("cell {key} has no anchor {item_id:?} of judge_version {v:?}"),
                None => format!(
                    "cell {key} has no unversioned anchor {item_id:?}; name its judge_version to delete a versioned row \
                     (GET /v1/cells/{}/{}/judge-versions lists them)",
                    key.judge, key.rubric
                ),
            }));
        }
        let count: i64 = sqlx::query(
            "UPDATE cells SET anchor_count = (SELECT COUNT(*) FROM anchors WHERE cell_id = $1)
             WHERE id = $2 RETURNING anchor_count",
        )
        .bind(&cell_id)
        .bind(&cell_id)
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        tx.commit().await?;
        Ok(count)
    }
}

/// An anchor from a row with the columns `item_id, judge_score, reference_score, group_name,
/// rater, judge_version, covariates, repeats, reference_at_ms` by name.
pub(super) fn anchor_of_named(r: &AnyRow) -> Result<Anchor> {
    Ok(Anchor {
        item_id: ItemId::from_stored(r.try_get::<String, _>("item_id")?)
            .map_err(|_| bad_row("item id"))?,
        judge_score: r.try_get("judge_score")?,
        reference_score: r.try_get("reference_score")?,
        group: group_of(r.try_get("group_name")?)?,
        rater: rater_of(r.try_get("rater")?)?,
        judge_version: JudgeVersion::from_stored(&r.try_get::<String, _>("judge_version")?)
            .map_err(|_| bad_row("judge version"))?,
        reference_at_ms: r.try_get("reference_at_ms")?,
        covariates: covariates_of(r.try_get("covariates")?)?,
        repeats: repeats_of(r.try_get("repeats")?)?,
    })
}

/// Stored repeats, read back.
pub(super) fn repeats_of(raw: Option<String>) -> Result<Vec<f64>> {
    repeats::from_stored(raw.as_deref()).map_err(|_| bad_row("repeats"))
}

/// Stored covariates, read back.
pub(super) fn covariates_of(raw: Option<String>) -> Result<Covariates> {
    covariates::from_stored(raw.as_deref()).map_err(|_| bad_row("covariates"))
}

/// A stored rater name, checked again on the way out.
pub(super) fn rater_of(raw: Option<String>) -> Result<Option<RaterName>> {
    raw.map(|r| RaterName::parse(&r).map_err(|_| bad_row("rater name")))
        .transpose()
}

/// A stored group name, checked again on the way out.
pub(super) fn group_of(raw: Option<String>) -> Result<Option<crate::domain::GroupName>> {
    raw.map(|g| crate::domain::GroupName::parse(&g).map_err(|_| bad_row("group name")))
        .transpose()
}

/// An upload's refusals as its one answer, every problem in it; `None` when there is none.
fn refused(refusals: Refusals) -> Option<Error> {
    if let Some(kind) = refusals.kind {
        return Some(Error::conflict(kind.message, vec![kind.problem]));
    }
    let n = refusals.conflicts.len();
    if !refusals.missing.is_empty() {
        let mut problems = refusals.missing;
        problems.extend(refusals.conflicts);
        let what = if n == 0 {
            "re-scored rows need a reference the cell holds; nothing was stored".to_owned()
        } else {
            format!(
                "re-scored rows need a reference the cell holds, and {n} row{} already stored with \
                 different scores (listed too; ?replace=true overwrites them); nothing was stored",
                if n == 1 { " is" } else { "s are" }
            )
        };
        return Some(Error::rejected(&what, problems));
    }
    (n > 0).then(|| {
        Error::conflict(
            format!(
                "{n} anchor{} already stored with different scores; nothing was stored. \
                 Send the batch with ?replace=true to overwrite them",
                if n == 1 { " is" } else { "s are" }
            ),
            refusals.conflicts,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Problem;

    fn problem(row: usize) -> Problem {
        Problem::at(Some(row), "item_id", "stored otherwise")
    }

    #[test]
    fn a_missing_reference_is_a_422_listing_the_conflicts_and_conflicts_alone_a_409() {
        let both = Refusals {
            kind: None,
            missing: vec![problem(2)],
            conflicts: vec![problem(1)],
        };
        let Some(Error::Invalid { details, .. }) = refused(both) else {
            panic!("a missing reference is a 422")
        };
        assert_eq!(details.len(), 2, "the conflict is listed too");
        let conflicts = Refusals {
            kind: None,
            missing: Vec::new(),
            conflicts: vec![problem(1)],
        };
        assert!(matches!(refused(conflicts), Some(Error::Conflict { .. })));
        assert!(refused(Refusals::default()).is_none());
    }

    #[test]
    fn a_cell_of_comparisons_refuses_first_with_its_own_409() {
        let key = CellKey {
            judge: crate::domain::JudgeName::parse("gpt").unwrap(),
            rubric: crate::domain::RubricName::parse("helpful").unwrap(),
        };
        let kinds = CellKinds {
            anchors: 0,
            comparisons: 2,
        };
        let refusals = Refusals {
            kind: kinds.refuses_scores(&key, Some(4)),
            missing: vec![problem(2)],
            conflicts: vec![problem(1)],
        };
        let Some(Error::Conflict { message, details }) = refused(refusals) else {
            panic!("a cell of the other kind is a 409")
        };
        assert!(
            message.contains("holds 2 pairwise comparisons"),
            "{message}"
        );
        assert_eq!(details.len(), 1, "only the kind's problem: {details:?}");
        assert_eq!(details[0].row, Some(4));
    }
}
