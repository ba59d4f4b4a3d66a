//! A cell's judge versions: which its anchors carry, the items two versions both scored (a
//! bridge's data), the items a new version has not re-scored, one version's scores by item.

use super::families::VersionRows;
use std::collections::HashMap;

use sqlx::Row;

use super::anchors::{anchor_of_named, bad_row, group_of};
use crate::domain::{Anchor, CellKey, GroupName, ItemId, JudgeName, JudgeVersion, RubricName};
use crate::error::Result;

impl VersionRows<'_> {
    /// The judge versions the anchors of `judge`'s cells carry (of `rubric` only, when
    /// given): per cell, each version with its anchor count and when its first anchor
    /// arrived, oldest first.
    pub async fn judge_versions(
        &self,
        judge: &JudgeName,
        rubric: Option<&RubricName>,
    ) -> Result<Vec<(RubricName, VersionAnchors)>> {
        let rows = sqlx::query(
            "SELECT c.rubric, a.judge_version, COUNT(*), MIN(a.created_at_ms)
             FROM anchors a JOIN cells c ON c.id = a.cell_id
             WHERE c.judge = $1 AND ($2 = '' OR c.rubric = $3)
             GROUP BY c.rubric, a.judge_version
             ORDER BY c.rubric, MIN(a.created_at_ms), a.judge_version",
        )
        .bind(judge.as_str())
        .bind(rubric.map_or("", RubricName::as_str))
        .bind(rubric.map_or("", RubricName::as_str))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    RubricName::parse(&r.try_get::<String, _>(0)?)
                        .map_err(|_| bad_row("rubric name"))?,
                    VersionAnchors {
                        judge_version: JudgeVersion::from_stored(&r.try_get::<String, _>(1)?)
                            .map_err(|_| bad_row("judge version"))?,
                        anchor_count: r.try_get(2)?,
                        first_at_ms: r.try_get(3)?,
                    },
                ))
            })
            .collect()
    }

    /// The pairs two judge versions give the items both scored (the bridge's data), in item
    /// order: (item, `from`'s score, `to`'s score, the item's reference, its group and
    /// covariates).
    pub async fn shared_items(
        &self,
        key: &CellKey,
        from: Option<&JudgeVersion>,
        to: Option<&JudgeVersion>,
    ) -> Result<Vec<SharedItem>> {
        let cell_id = self.cell_id(key).await?;
        let rows = sqlx::query(
            "SELECT a.item_id, a.judge_score, b.judge_score, a.reference_score, a.group_name,
                 a.covariates
             FROM anchors a JOIN anchors b ON b.cell_id = a.cell_id AND b.item_id = a.item_id
             WHERE a.cell_id = $1 AND a.judge_version = $2 AND b.judge_version = $3
             ORDER BY a.item_id",
        )
        .bind(&cell_id)
        .bind(JudgeVersion::stored(from))
        .bind(JudgeVersion::stored(to))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(SharedItem {
                    item_id: ItemId::from_stored(r.try_get::<String, _>(0)?)
                        .map_err(|_| bad_row("item id"))?,
                    from_score: r.try_get(1)?,
                    to_score: r.try_get(2)?,
                    reference_score: r.try_get(3)?,
                    group: group_of(r.try_get(4)?)?,
                    covariates: super::anchors::covariates_of(r.try_get(5)?)?,
                })
            })
            .collect()
    }

    /// The items of a cell that hold a reference but no score of `version` (what to re-score),
    /// in item order, each with its group (the first its rows name).
    pub async fn items_to_rescore(
        &self,
        key: &CellKey,
        version: &JudgeVersion,
    ) -> Result<Vec<(ItemId, Option<GroupName>)>> {
        let cell_id = self.cell_id(key).await?;
        let rows = sqlx::query(
            "SELECT a.item_id, MIN(a.group_name) FROM anchors a WHERE a.cell_id = $1 AND NOT EXISTS (
                 SELECT 1 FROM anchors b WHERE b.cell_id = a.cell_id AND b.item_id = a.item_id
                     AND b.judge_version = $2)
             GROUP BY a.item_id ORDER BY a.item_id",
        )
        .bind(&cell_id)
        .bind(version.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    ItemId::from_stored(r.try_get::<String, _>(0)?)
                        .map_err(|_| bad_row("item id"))?,
                    group_of(r.try_get(1)?)?,
                ))
            })
            .collect()
    }

    /// A cell's anchors of one judge version, by item.
    pub async fn version_scores(
        &self,
        key: &CellKey,
        version: Option<&JudgeVersion>,
    ) -> Result<HashMap<ItemId, Anchor>> {
        let cell_id = self.cell_id(key).await?;
        let rows = sqlx::query(
            "SELECT a.item_id, a.judge_score, a.reference_score, a.group_name, a.rater, a.judge_version,
                 a.covariates, a.repeats, CAST(NULL AS BIGINT) AS reference_at_ms
             FROM anchors a WHERE a.cell_id = $1 AND a.judge_version = $2",
        )
        .bind(&cell_id)
        .bind(JudgeVersion::stored(version))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| anchor_of_named(r).map(|a| (a.item_id.clone(), a)))
            .collect()
    }
}

/// One judge version's anchors in a cell.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionAnchors {
    pub judge_version: Option<JudgeVersion>,
    pub anchor_count: i64,
    pub first_at_ms: i64,
}

/// An item two judge versions both scored.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedItem {
    pub item_id: ItemId,
    pub from_score: f64,
    pub to_score: f64,
    pub reference_score: f64,
    pub group: Option<GroupName>,
    /// The item's covariates (its `from` row's: an answer's length is the same whichever judge
    /// version scored it).
    pub covariates: crate::domain::covariates::Covariates,
}
