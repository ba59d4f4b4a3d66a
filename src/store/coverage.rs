//! Anchor coverage: how many anchors of each batch fell inside the 95% predictive interval of
//! the version their cell served when they arrived.

use super::families::DriftRows;
use sqlx::Row;
use uuid::Uuid;

use crate::domain::calibration::{CalibratorId, CalibratorVersion};
use crate::domain::{CellKey, JudgeName, RubricName, now_ms};
use crate::error::{Error, Result};
use judgecal_stats::conformal::Intervals;
use judgecal_stats::drift::CheckedBatch;

fn corrupt(what: &str) -> Error {
    Error::Internal(format!("stored coverage has an unreadable {what}"))
}

/// One batch's check, as the upload reports it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchCoverage {
    /// The version the anchors were checked against.
    pub version: i64,
    pub checked: i64,
    pub inside: i64,
}

/// The newest coverage checks of one cell's active version.
#[derive(Debug, Clone, PartialEq)]
pub struct CoverageWindow {
    pub key: CellKey,
    pub checked: i64,
    pub inside: i64,
}

/// How many batches one cell's active version has had checked since its activation: a
/// replay of the same count is the same replay (checks are only ever added).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckCount {
    pub key: CellKey,
    pub calibrator: String,
    pub activated_at_ms: i64,
    pub batches: i64,
}

/// One cell's checks since its active version's activation.
#[derive(Debug, Clone, PartialEq)]
pub struct CellMisses {
    pub key: CellKey,
    /// The active version, and its intervals, which the anchors were checked against.
    pub calibrator: String,
    pub activated_at_ms: i64,
    pub intervals: Option<Intervals>,
    /// Per batch, in arrival order: whether each anchor missed the interval, and its rater.
    pub batches: Vec<CheckedBatch>,
}

/// A checked batch as stored: '1' or '0' per anchor, and the raters as JSON where any is named.
pub(super) fn encode_batch(batch: &CheckedBatch) -> Result<(String, Option<String>)> {
    let misses: String = batch
        .misses
        .iter()
        .map(|&m| if m { '1' } else { '0' })
        .collect();
    let raters = if batch.raters.iter().any(Option::is_some) {
        Some(
            serde_json::to_string(&batch.raters)
                .map_err(|e| Error::Internal(format!("encoding raters: {e}")))?,
        )
    } else {
        None
    };
    Ok((misses, raters))
}

/// A checked batch read back from its stored misses and raters.
pub(super) fn decode_batch(misses: String, raters: Option<String>) -> Result<CheckedBatch> {
    Ok(CheckedBatch {
        misses: misses.bytes().map(|b| b == b'1').collect(),
        raters: match raters {
            Some(r) => serde_json::from_str(&r).map_err(|_| corrupt("raters"))?,
            None => Vec::new(),
        },
    })
}

impl DriftRows<'_> {
    /// Records one batch's check: `batch.misses[i]` is whether its i-th checked anchor fell
    /// outside the interval as the drift alarm counts (ties at the band's edges broken),
    /// `batch.raters[i]` (where any is named) who labelled it, and `inside` how many fell
    /// inside the interval served.
    pub async fn record_coverage(
        &self,
        calibrator: CalibratorId,
        batch: &CheckedBatch,
        inside: i64,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        Self::insert_coverage(&mut tx, calibrator, batch, inside).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The row of [`Store::record_coverage`], inside `tx`.
    pub(super) async fn insert_coverage(
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        calibrator: CalibratorId,
        batch: &CheckedBatch,
        inside: i64,
    ) -> Result<()> {
        let checked = batch.misses.len() as i64;
        let (misses, raters) = encode_batch(batch)?;
        sqlx::query(
            "INSERT INTO anchor_coverage (id, calibrator_id, checked, inside, created_at_ms, misses,
                 raters)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(Uuid::new_v4().to_string())
        .bind(calibrator.to_string())
        .bind(checked)
        .bind(inside)
        .bind(now_ms())
        .bind(misses)
        .bind(raters)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Per cell (or `only` that one), the newest checks against its active version, whole
    /// batches, until at least `window` anchors are counted. Cells whose active version has no
    /// checks are left out.
    pub async fn coverage(
        &self,
        window: i64,
        only: Option<&CellKey>,
    ) -> Result<Vec<CoverageWindow>> {
        // Every check counts at least one anchor, so the newest `window` checks of a version
        // always fill its window: older rows are never read, however long a version serves.
        macro_rules! recent {
            ($filter:literal) => {
                concat!(
                    "SELECT judge, rubric, checked, inside FROM (
                         SELECT c.judge, c.rubric, cov.checked, cov.inside, cov.created_at_ms,
                                cov.id,
                                ROW_NUMBER() OVER (PARTITION BY cov.calibrator_id
                                                   ORDER BY cov.created_at_ms DESC, cov.id) AS n
                         FROM anchor_coverage cov
                         JOIN active_calibrators act ON act.calibrator_id = cov.calibrator_id
                         JOIN cells c ON c.id = act.cell_id",
                    $filter,
                    "
                     ) recent
                     WHERE n <= $1
                     ORDER BY judge, rubric, created_at_ms DESC, id"
                )
            };
        }
        let rows = match only {
            None => sqlx::query(recent!("")).bind(window),
            Some(key) => sqlx::query(recent!(" WHERE c.judge = $2 AND c.rubric = $3"))
                .bind(window)
                .bind(key.judge.as_str())
                .bind(key.rubric.as_str()),
        }
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<CoverageWindow> = Vec::new();
        for r in &rows {
            let judge: String = r.try_get(0)?;
            let rubric: String = r.try_get(1)?;
            let (checked, inside): (i64, i64) = (r.try_get(2)?, r.try_get(3)?);
            match out.last_mut() {
                Some(w) if w.key.judge.as_str() == judge && w.key.rubric.as_str() == rubric => {
                    if w.checked < window {
                        w.checked += checked;
                        w.inside += inside;
                    }
                }
                _ => out.push(CoverageWindow {
                    key: CellKey {
                        judge: JudgeName::parse(&judge).map_err(|_| corrupt("judge"))?,
                        rubric: RubricName::parse(&rubric).map_err(|_| corrupt("rubric"))?,
                    },
                    checked,
                    inside,
                }),
            }
        }
        Ok(out)
    }

    /// Per cell with checks since its active version's activation, how many batches (those
    /// `misses_since_activation` replays).
    pub async fn check_counts(&self) -> Result<Vec<CheckCount>> {
        let rows = sqlx::query(
            "SELECT c.judge, c.rubric, cal.id, act.activated_at_ms, COUNT(*)
             FROM anchor_coverage cov
             JOIN active_calibrators act ON act.calibrator_id = cov.calibrator_id
             JOIN calibrators cal ON cal.id = act.calibrator_id
             JOIN cells c ON c.id = act.cell_id
             WHERE cov.created_at_ms >= act.activated_at_ms AND cov.misses IS NOT NULL
             GROUP BY c.judge, c.rubric, cal.id, act.activated_at_ms
             ORDER BY c.judge, c.rubric",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let judge: String = r.try_get(0)?;
                let rubric: String = r.try_get(1)?;
                Ok(CheckCount {
                    key: CellKey {
                        judge: JudgeName::parse(&judge).map_err(|_| corrupt("judge"))?,
                        rubric: RubricName::parse(&rubric).map_err(|_| corrupt("rubric"))?,
                    },
                    calibrator: r.try_get(2)?,
                    activated_at_ms: r.try_get(3)?,
                    batches: r.try_get(4)?,
                })
            })
            .collect()
    }

    /// Per cell (or `only` that one), every batch checked against its active version since the
    /// version was last activated, in arrival order (by time, then id), each as whether its
    /// anchors missed the interval and who labelled it, with the version's intervals. What the
    /// drift e-process replays; checks recorded before misses were kept are left out.
    pub async fn misses_since_activation(&self, only: Option<&CellKey>) -> Result<Vec<CellMisses>> {
        macro_rules! since {
            ($filter:literal) => {
                concat!(
                    "SELECT c.judge, c.rubric, cov.misses, cal.intervals, cov.raters, cal.id,
                            act.activated_at_ms
                     FROM anchor_coverage cov
                     JOIN active_calibrators act ON act.calibrator_id = cov.calibrator_id
                     JOIN calibrators cal ON cal.id = act.calibrator_id
                     JOIN cells c ON c.id = act.cell_id
                     WHERE cov.created_at_ms >= act.activated_at_ms AND cov.misses IS NOT NULL",
                    $filter,
                    " ORDER BY c.judge, c.rubric, cov.created_at_ms, cov.id"
                )
            };
        }
        let rows = match only {
            None => sqlx::query(since!("")),
            Some(key) => sqlx::query(since!(" AND c.judge = $1 AND c.rubric = $2"))
                .bind(key.judge.as_str())
                .bind(key.rubric.as_str()),
        }
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<CellMisses> = Vec::new();
        for r in &rows {
            let judge: String = r.try_get(0)?;
            let rubric: String = r.try_get(1)?;
            let batch = decode_batch(r.try_get(2)?, r.try_get(4)?)?;
            match out.last_mut() {
                Some(cell)
                    if cell.key.judge.as_str() == judge && cell.key.rubric.as_str() == rubric =>
                {
                    cell.batches.push(batch)
                }
                _ => {
                    let intervals: Option<String> = r.try_get(3)?;
                    out.push(CellMisses {
                        calibrator: r.try_get(5)?,
                        activated_at_ms: r.try_get(6)?,
                        key: CellKey {
                            judge: JudgeName::parse(&judge).map_err(|_| corrupt("judge"))?,
                            rubric: RubricName::parse(&rubric).map_err(|_| corrupt("rubric"))?,
                        },
                        intervals: intervals
                            .map(|i| serde_json::from_str(&i).map_err(|_| corrupt("intervals")))
                            .transpose()?,
                        batches: vec![batch],
                    })
                }
            }
        }
        Ok(out)
    }

    /// The (judge score, reference score) pairs a version could have been fitted on: its
    /// cell's anchors of its judge version stored no later than the version.
    pub async fn anchors_before(&self, v: &CalibratorVersion) -> Result<Vec<(f64, f64)>> {
        let rows = sqlx::query(
            "SELECT a.judge_score, a.reference_score
             FROM anchors a JOIN cells c ON c.id = a.cell_id
             WHERE c.judge = $1 AND c.rubric = $2 AND a.updated_at_ms <= $3
                 AND a.judge_version = $4",
        )
        .bind(v.key.judge.as_str())
        .bind(v.key.rubric.as_str())
        .bind(v.created_at_ms)
        .bind(crate::domain::JudgeVersion::stored(
            v.judge_version.as_ref(),
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }
}
