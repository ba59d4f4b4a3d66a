//! A pairwise cell's drift checks (migration 18): each upload's labelled comparisons checked
//! against the band of the cell's newest version, read back as the drift alarm replays them
//! beside the cells of judge scores.

use crate::store::families::{DriftRows, PairwiseRows};
use std::collections::HashMap;

use sqlx::Row;
use uuid::Uuid;

use crate::domain::{CellKey, JudgeName, RubricName, now_ms};
use crate::error::{Error, Result};
use crate::store::coverage::{decode_batch, encode_batch};
use crate::store::{CellMisses, CoverageWindow};
use judgecal_stats::drift::CheckedBatch;

fn corrupt(what: &str) -> Error {
    Error::Internal(format!("stored pairwise coverage has an unreadable {what}"))
}

impl DriftRows<'_> {
    /// Records one upload's check against pairwise version `version_id`: `batch.misses[i]`
    /// whether its i-th labelled comparison missed the band, `inside` how many did not.
    pub async fn record_preference_coverage(
        &self,
        version_id: &str,
        batch: &CheckedBatch,
        inside: i64,
    ) -> Result<()> {
        let (misses, raters) = encode_batch(batch)?;
        sqlx::query(
            "INSERT INTO preference_coverage (id, version_id, checked, inside, misses, raters,
                 created_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(Uuid::new_v4().to_string())
        .bind(version_id)
        .bind(batch.misses.len() as i64)
        .bind(inside)
        .bind(misses)
        .bind(raters)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Per pairwise cell (or `only` that one), the checks of its newest version in arrival
    /// order with the version's band (`calibrator` is the version's id, `activated_at_ms` when
    /// it was trained), and the newest checks until at least `window` comparisons. Cells whose
    /// newest version has no checks are left out.
    pub async fn preference_misses(
        &self,
        window: i64,
        only: Option<&CellKey>,
    ) -> Result<(Vec<CoverageWindow>, Vec<CellMisses>)> {
        macro_rules! checks {
            ($filter:literal) => {
                concat!(
                    "SELECT c.judge, c.rubric, p.id, p.created_at_ms, cov.misses, cov.raters,
                            cov.checked, cov.inside
                     FROM preference_coverage cov
                     JOIN preference_versions p ON p.id = cov.version_id
                     JOIN cells c ON c.id = p.cell_id
                     WHERE p.version = (SELECT MAX(n.version) FROM preference_versions n
                                        WHERE n.cell_id = p.cell_id)",
                    $filter,
                    " ORDER BY c.judge, c.rubric, cov.created_at_ms, cov.id"
                )
            };
        }
        let rows = match only {
            None => sqlx::query(checks!("")),
            Some(key) => sqlx::query(checks!(" AND c.judge = $1 AND c.rubric = $2"))
                .bind(key.judge.as_str())
                .bind(key.rubric.as_str()),
        }
        .fetch_all(&self.pool)
        .await?;
        if rows.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        // The versions' bands, from their reports.
        let newest = match only {
            None => PairwiseRows(self).newest_preferences().await?,
            Some(key) => self
                .pairwise_rows()
                .preference_versions(key)
                .await?
                .into_iter()
                .take(1)
                .collect(),
        };
        let mut bands: HashMap<String, _> = newest
            .into_iter()
            .map(|v| (v.id, v.report.served.and_then(|s| s.intervals)))
            .collect();
        let mut cells: Vec<CellMisses> = Vec::new();
        let mut counts: Vec<Vec<(i64, i64)>> = Vec::new();
        for r in &rows {
            let id: String = r.try_get(2)?;
            let batch = decode_batch(r.try_get(4)?, r.try_get(5)?)?;
            let count = (r.try_get::<i64, _>(6)?, r.try_get::<i64, _>(7)?);
            match cells.last_mut() {
                Some(cell) if cell.calibrator == id => {
                    cell.batches.push(batch);
                    if let Some(c) = counts.last_mut() {
                        c.push(count);
                    }
                }
                _ => {
                    let judge: String = r.try_get(0)?;
                    let rubric: String = r.try_get(1)?;
                    cells.push(CellMisses {
                        key: CellKey {
                            judge: JudgeName::parse(&judge).map_err(|_| corrupt("judge"))?,
                            rubric: RubricName::parse(&rubric).map_err(|_| corrupt("rubric"))?,
                        },
                        intervals: bands.remove(&id).flatten(),
                        calibrator: id,
                        activated_at_ms: r.try_get(3)?,
                        batches: vec![batch],
                    });
                    counts.push(vec![count]);
                }
            }
        }
        let windows = cells
            .iter()
            .zip(&counts)
            .map(|(cell, counts)| {
                let (mut checked, mut inside) = (0, 0);
                for &(c, i) in counts.iter().rev() {
                    if checked >= window {
                        break;
                    }
                    checked += c;
                    inside += i;
                }
                CoverageWindow {
                    key: cell.key.clone(),
                    checked,
                    inside,
                }
            })
            .collect();
        Ok((windows, cells))
    }
}
