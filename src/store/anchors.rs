//! Rubrics, cells and anchors.

use std::collections::HashMap;

use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};
use uuid::Uuid;

use super::{Store, placeholder_list, placeholder_rows};
use crate::domain::anchors::CellBatch;
use crate::domain::{
    Anchor, CellKey, CellSummary, ItemId, JudgeName, Problem, Rubric, RubricName, Scale, now_ms,
};
use crate::error::{Error, Result};

/// Rows per multi-row statement: 6 columns x 1,000 rows stays far below both backends'
/// bind-parameter limits (65,535 on Postgres, 32,766 on SQLite).
const CHUNK: usize = 1000;

/// What one cell of an upload did.
#[derive(Debug, Clone, PartialEq)]
pub struct CellIngest {
    pub key: CellKey,
    pub inserted: usize,
    pub unchanged: usize,
    pub replaced: usize,
    pub anchor_count: i64,
    /// The anchors this batch stored (new or replaced): what the coverage check looks at.
    pub stored: Vec<Anchor>,
    /// How the stored anchors fared against the version the cell served (set by the service).
    pub coverage: Option<super::BatchCoverage>,
}

fn bad_row(what: &str) -> Error {
    Error::Internal(format!("stored {what} failed validation"))
}

fn rubric_from_row(row: &AnyRow) -> Result<Rubric> {
    let name: String = row.try_get("name")?;
    Ok(Rubric {
        name: RubricName::parse(&name).map_err(|_| bad_row("rubric name"))?,
        scale: Scale::new(row.try_get("scale_min")?, row.try_get("scale_max")?)
            .map_err(|_| bad_row("rubric scale"))?,
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

        // Lock (or create) the rubrics first, then the cells, always in sorted order, so two
        // uploads never wait on each other in a cycle. The first statement writes, which on
        // SQLite takes the write lock at once instead of failing to upgrade later.
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
            .fetch_one(&mut *tx)
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

        let mut conflicts = Vec::new();
        let mut outcomes = Vec::with_capacity(cells.len());
        for cell in cells {
            let row = sqlx::query(
                "INSERT INTO cells (id, judge, rubric, anchor_count, updated_at_ms)
                 VALUES ($1, $2, $3, 0, $4)
                 ON CONFLICT (judge, rubric) DO UPDATE SET judge = excluded.judge
                 RETURNING id, anchor_count",
            )
            .bind(Uuid::new_v4().to_string())
            .bind(cell.key.judge.as_str())
            .bind(cell.key.rubric.as_str())
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            let cell_id: String = row.try_get(0)?;
            let stored_count: i64 = row.try_get(1)?;

            // Which of the batch's items are stored already, and with what scores. A new
            // (empty) cell needs no look-up.
            let mut stored: HashMap<String, (f64, f64, Option<String>)> = HashMap::new();
            if stored_count > 0 {
                for chunk in cell.anchors.chunks(CHUNK) {
                    let sql = format!(
                        "SELECT item_id, judge_score, reference_score, group_name FROM anchors
                         WHERE cell_id = $1 AND item_id IN ({})",
                        placeholder_list(chunk.len(), 2)
                    );
                    let mut q = sqlx::query(AssertSqlSafe(sql)).bind(&cell_id);
                    for a in chunk {
                        q = q.bind(a.item_id.as_str());
                    }
                    for r in q.fetch_all(&mut *tx).await? {
                        stored.insert(r.try_get(0)?, (r.try_get(1)?, r.try_get(2)?, r.try_get(3)?));
                    }
                }
            }

            let mut fresh: Vec<&Anchor> = Vec::new();
            let mut changed: Vec<&Anchor> = Vec::new();
            let mut unchanged = 0;
            for (anchor, &batch_row) in cell.anchors.iter().zip(&cell.rows) {
                let group = anchor.group.as_ref().map(|g| g.as_str());
                match stored.get(anchor.item_id.as_str()) {
                    None => fresh.push(anchor),
                    Some((j, y, g))
                        if *j == anchor.judge_score
                            && *y == anchor.reference_score
                            && g.as_deref() == group =>
                    {
                        unchanged += 1;
                    }
                    Some((j, y, g)) => {
                        if !replace {
                            conflicts.push(Problem::at(
                                Some(batch_row),
                                "item_id",
                                format!(
                                    "{:?} is stored for {} with judge_score {j}, reference_score {y} and group {}; \
                                     this batch has {}, {} and {}",
                                    anchor.item_id.as_str(),
                                    cell.key,
                                    g.as_deref().unwrap_or("(none)"),
                                    anchor.judge_score,
                                    anchor.reference_score,
                                    group.unwrap_or("(none)")
                                ),
                            ));
                        }
                        changed.push(anchor);
                    }
                }
            }
            if !conflicts.is_empty() {
                continue;
            }

            for chunk in changed.chunks(CHUNK) {
                let sql = format!(
                    "DELETE FROM anchors WHERE cell_id = $1 AND item_id IN ({})",
                    placeholder_list(chunk.len(), 2)
                );
                let mut q = sqlx::query(AssertSqlSafe(sql)).bind(&cell_id);
                for a in chunk {
                    q = q.bind(a.item_id.as_str());
                }
                q.execute(&mut *tx).await?;
            }
            let to_insert: Vec<&Anchor> = fresh.iter().chain(&changed).copied().collect();
            for chunk in to_insert.chunks(CHUNK) {
                let sql = format!(
                    "INSERT INTO anchors (cell_id, item_id, judge_score, reference_score, updated_at_ms, group_name) VALUES {}",
                    placeholder_rows(chunk.len(), 6, 1)
                );
                let mut q = sqlx::query(AssertSqlSafe(sql));
                for a in chunk {
                    q = q
                        .bind(&cell_id)
                        .bind(a.item_id.as_str())
                        .bind(a.judge_score)
                        .bind(a.reference_score)
                        .bind(now)
                        .bind(a.group.as_ref().map(|g| g.as_str().to_owned()));
                }
                q.execute(&mut *tx).await?;
            }

            let touched = !to_insert.is_empty();
            let anchor_count: i64 = sqlx::query(
                "UPDATE cells SET anchor_count = (SELECT COUNT(*) FROM anchors WHERE cell_id = $1),
                     updated_at_ms = CASE WHEN $2 = 1 THEN $3 ELSE updated_at_ms END
                 WHERE id = $4 RETURNING anchor_count",
            )
            .bind(&cell_id)
            .bind(i64::from(touched))
            .bind(now)
            .bind(&cell_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
            outcomes.push(CellIngest {
                key: cell.key.clone(),
                inserted: fresh.len(),
                unchanged,
                replaced: changed.len(),
                anchor_count,
                stored: to_insert.into_iter().cloned().collect(),
                coverage: None,
            });
        }
        if !conflicts.is_empty() {
            tx.rollback().await?;
            let n = conflicts.len();
            return Err(Error::conflict(
                format!(
                    "{n} anchor{} already stored with different scores; nothing was stored. \
                     Send the batch with ?replace=true to overwrite them",
                    if n == 1 { " is" } else { "s are" }
                ),
                conflicts,
            ));
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    pub async fn cells(&self) -> Result<Vec<CellSummary>> {
        let rows = sqlx::query(
            "SELECT judge, rubric, anchor_count, updated_at_ms FROM cells ORDER BY judge, rubric",
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

    /// One page of a cell's anchors in item-id order, after `after` (exclusive). Returns the
    /// page and whether more follow.
    pub async fn anchors_page(
        &self,
        key: &CellKey,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Anchor>, bool)> {
        let cell_id = self.cell_id(key).await?;
        let rows = sqlx::query(
            "SELECT item_id, judge_score, reference_score, group_name FROM anchors
             WHERE cell_id = $1 AND item_id > $2 ORDER BY item_id LIMIT $3",
        )
        .bind(&cell_id)
        .bind(after.unwrap_or(""))
        .bind(i64::try_from(limit + 1).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        let more = rows.len() > limit;
        let anchors = rows
            .iter()
            .take(limit)
            .map(|r| {
                Ok(Anchor {
                    item_id: ItemId::parse(&r.try_get::<String, _>(0)?)
                        .map_err(|_| bad_row("item id"))?,
                    judge_score: r.try_get(1)?,
                    reference_score: r.try_get(2)?,
                    group: group_of(r.try_get(3)?)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok((anchors, more))
    }

    /// Removes one anchor; returns the cell's new anchor count.
    pub async fn delete_anchor(&self, key: &CellKey, item_id: &str) -> Result<i64> {
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
        let deleted = sqlx::query("DELETE FROM anchors WHERE cell_id = $1 AND item_id = $2")
            .bind(&cell_id)
            .bind(item_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if deleted == 0 {
            tx.rollback().await?;
            return Err(Error::NotFound(format!(
                "cell {key} has no anchor {item_id:?}"
            )));
        }
        let count: i64 = sqlx::query(
            "UPDATE cells SET anchor_count = anchor_count - 1 WHERE id = $1 RETURNING anchor_count",
        )
        .bind(&cell_id)
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        tx.commit().await?;
        Ok(count)
    }
}

/// A stored group name, checked again on the way out.
pub(super) fn group_of(raw: Option<String>) -> Result<Option<crate::domain::GroupName>> {
    raw.map(|g| crate::domain::GroupName::parse(&g).map_err(|_| bad_row("group name")))
        .transpose()
}
