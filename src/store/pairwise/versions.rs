//! Pairwise cells' trained versions (`preference_versions`), and what a pairwise training
//! reads: each cell's comparisons of one judge version.

use crate::store::families::PairwiseRows;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::domain::calibration::JobId;
use crate::domain::pairwise::comparisons::Comparison;
use crate::domain::pairwise::version::{NewPreference, PreferenceReport, PreferenceVersion};
use crate::domain::{CellKey, JudgeName, JudgeVersion, RubricName, now_ms};
use crate::error::{Error, Result};
use crate::store::calibrators::{Versions, ensure_cell, next_version, succeed_held_job};

fn corrupt(what: &str) -> Error {
    Error::Internal(format!("stored pairwise version has an unreadable {what}"))
}

/// One judge version's comparisons in one cell of a judge.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonCell {
    pub rubric: RubricName,
    pub judge_version: Option<JudgeVersion>,
    pub comparisons: i64,
    pub labelled: i64,
    /// When its first comparison arrived.
    pub first_at_ms: i64,
}

const COLUMNS: &str = "c.judge, c.rubric, p.version, p.job_id, p.judge_version, \
     p.comparison_count, p.labelled_count, p.comparison_digest, p.report, p.created_at_ms, p.id";

fn version_from_row(r: &AnyRow) -> Result<PreferenceVersion> {
    let job: Option<String> = r.try_get(3)?;
    let version: String = r.try_get(4)?;
    let report: String = r.try_get(8)?;
    Ok(PreferenceVersion {
        key: CellKey {
            judge: JudgeName::parse(&r.try_get::<String, _>(0)?).map_err(|_| corrupt("judge"))?,
            rubric: RubricName::parse(&r.try_get::<String, _>(1)?)
                .map_err(|_| corrupt("rubric"))?,
        },
        version: r.try_get(2)?,
        job_id: job.as_deref().and_then(JobId::parse),
        judge_version: JudgeVersion::from_stored(&version).map_err(|_| corrupt("judge version"))?,
        comparison_count: r.try_get(5)?,
        labelled_count: r.try_get(6)?,
        digest: r.try_get(7)?,
        report: serde_json::from_str::<PreferenceReport>(&report).map_err(|_| corrupt("report"))?,
        created_at_ms: r.try_get(9)?,
        id: r.try_get(10)?,
    })
}

impl PairwiseRows<'_> {
    /// Every judge version's comparisons in `judge`'s cells, by rubric and version.
    pub async fn comparison_cells(&self, judge: &JudgeName) -> Result<Vec<ComparisonCell>> {
        let rows = sqlx::query(
            "SELECT c.rubric, m.judge_version, COUNT(*), COUNT(m.preference), MIN(m.created_at_ms)
             FROM comparisons m JOIN cells c ON c.id = m.cell_id
             WHERE c.judge = $1
             GROUP BY c.rubric, m.judge_version
             ORDER BY c.rubric, m.judge_version",
        )
        .bind(judge.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ComparisonCell {
                    rubric: RubricName::parse(&r.try_get::<String, _>(0)?)
                        .map_err(|_| corrupt("rubric"))?,
                    judge_version: JudgeVersion::from_stored(&r.try_get::<String, _>(1)?)
                        .map_err(|_| corrupt("judge version"))?,
                    comparisons: r.try_get(2)?,
                    labelled: r.try_get(3)?,
                    first_at_ms: r.try_get(4)?,
                })
            })
            .collect()
    }

    /// Stores a pairwise job's versions, numbered per cell, and marks the job succeeded, in
    /// one transaction; `None` (nothing written) where `owner` lost the job's lease.
    pub async fn finish_preference_job(
        &self,
        job: JobId,
        owner: &str,
        judge: &JudgeName,
        judge_version: Option<&JudgeVersion>,
        versions: &[NewPreference],
    ) -> Result<Option<Vec<PreferenceVersion>>> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        if !succeed_held_job(&mut tx, job, owner, now).await? {
            tx.rollback().await?;
            return Ok(None);
        }
        let mut sorted: Vec<&NewPreference> = versions.iter().collect();
        sorted.sort_by(|a, b| a.rubric.cmp(&b.rubric));
        let mut stored = Vec::with_capacity(sorted.len());
        for v in sorted {
            // A pairwise panel's cell holds no comparisons: its first version makes it.
            ensure_cell(&mut tx, judge, &v.rubric, now).await?;
            let (cell_id, version) =
                next_version(&mut tx, judge, &v.rubric, Versions::Preferences).await?;
            let id = uuid::Uuid::new_v4().to_string();
            let report = serde_json::to_string(&v.report)
                .map_err(|e| Error::Internal(format!("cannot encode a pairwise version: {e}")))?;
            sqlx::query(
                "INSERT INTO preference_versions (id, cell_id, version, job_id, judge_version,
                     comparison_count, labelled_count, comparison_digest, report, created_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(&id)
            .bind(&cell_id)
            .bind(version)
            .bind(job.to_string())
            .bind(JudgeVersion::stored(judge_version))
            .bind(v.comparison_count)
            .bind(v.labelled_count)
            .bind(&v.digest)
            .bind(report)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            stored.push(PreferenceVersion {
                key: CellKey {
                    judge: judge.clone(),
                    rubric: v.rubric.clone(),
                },
                version,
                job_id: Some(job),
                judge_version: judge_version.cloned(),
                comparison_count: v.comparison_count,
                labelled_count: v.labelled_count,
                digest: v.digest.clone(),
                report: v.report.clone(),
                created_at_ms: now,
                id,
            });
        }
        tx.commit().await?;
        Ok(Some(stored))
    }

    /// A pairwise cell's versions, newest first (none before its first training). 404 when
    /// the cell does not exist.
    pub async fn preference_versions(&self, key: &CellKey) -> Result<Vec<PreferenceVersion>> {
        let cell_id = self.cell_id(key).await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM preference_versions p JOIN cells c ON c.id = p.cell_id
             WHERE p.cell_id = $1 ORDER BY p.version DESC"
        )))
        .bind(cell_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(version_from_row).collect()
    }

    /// The newest version of every pairwise cell, for the metrics.
    pub async fn newest_preferences(&self) -> Result<Vec<PreferenceVersion>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM preference_versions p JOIN cells c ON c.id = p.cell_id
             WHERE p.version = (SELECT MAX(n.version) FROM preference_versions n
                                WHERE n.cell_id = p.cell_id)
             ORDER BY c.judge, c.rubric"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(version_from_row).collect()
    }

    /// A cell's comparisons of `judge_version` in item order: every one, or only the labelled
    /// ones.
    pub async fn cell_comparisons(
        &self,
        key: &CellKey,
        judge_version: Option<&JudgeVersion>,
        labelled_only: bool,
    ) -> Result<Vec<Comparison>> {
        let cell_id = self.cell_id(key).await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT judge_version, item_id, system_a, system_b, verdict, verdict_swapped, preference,
                 rater, covariates
             FROM comparisons
             WHERE cell_id = $1 AND judge_version = $2{}
             ORDER BY item_id",
            if labelled_only {
                " AND preference IS NOT NULL"
            } else {
                ""
            }
        )))
        .bind(cell_id)
        .bind(JudgeVersion::stored(judge_version))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| crate::store::pairwise::comparisons::stored_row(r).map(|s| s.comparison))
            .collect()
    }
}
