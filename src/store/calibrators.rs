//! Calibrator versions, the version each cell serves, and the anchor snapshots fits read.

use super::families::VersionRows;
use std::collections::HashMap;

use sqlx::any::AnyRow;
use sqlx::{AnyPool, Row};

use crate::domain::calibration::{
    BareFit, CalibratorId, CalibratorVersion, JobId, JudgeRange, NewVersion, OnMismatch, VersionRef,
};
use crate::domain::{Anchor, CellKey, JudgeName, JudgeVersion, RubricName, now_ms};
use crate::error::{Error, Result};
use judgecal_stats::agreement::report::HeldOutRow;
use judgecal_stats::{Method, Model};

fn corrupt(what: &str) -> Error {
    Error::Internal(format!("stored calibrator has an unreadable {what}"))
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| Error::Internal(format!("cannot encode a calibrator: {e}")))
}

/// A figure as stored, where it reads back: a non-finite number is written as `null`, which a
/// number does not read from, so a report that does not round-trip is not stored (logged as
/// `what`) rather than stored unreadable.
fn readable<T: serde::Serialize + serde::de::DeserializeOwned>(
    value: Option<&T>,
    what: &str,
) -> Result<Option<String>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let json = to_json(value)?;
    if serde_json::from_str::<T>(&json).is_ok() {
        Ok(Some(json))
    } else {
        tracing::warn!(
            what,
            "a version's figure is not a finite number: not stored"
        );
        Ok(None)
    }
}

/// An optional report read back, or `None` (logged) where it does not read: a version with an
/// unreadable report is still served.
fn optional<T: serde::de::DeserializeOwned>(json: Option<String>, what: &str) -> Option<T> {
    let json = json?;
    serde_json::from_str(&json)
        .map_err(|e| tracing::warn!(what, error = %e, "a stored version's report is unreadable: left out"))
        .ok()
}

const VERSION_COLUMNS: &str = "cal.id, c.judge, c.rubric, cal.version, cal.method, cal.job_id, \
     cal.anchor_count, cal.anchor_digest, cal.params, cal.diagnostics, cal.evaluation, \
     cal.decision, cal.intervals, cal.groups, cal.failure, cal.created_at_ms, cal.judge_version, \
     cal.fusion, cal.judge_min, cal.judge_max, cal.covariate_layer, cal.bare_fit, act.calibrator_id AS active_id";

const VERSION_FROM: &str = "FROM calibrators cal JOIN cells c ON c.id = cal.cell_id \
     LEFT JOIN active_calibrators act ON act.cell_id = cal.cell_id";

fn version_from_row(row: &AnyRow) -> Result<CalibratorVersion> {
    let id: String = row.try_get("id")?;
    let method =
        Method::parse(&row.try_get::<String, _>("method")?).map_err(|_| corrupt("method"))?;
    let params: serde_json::Value = serde_json::from_str(&row.try_get::<String, _>("params")?)
        .map_err(|_| corrupt("params"))?;
    let job_id: Option<String> = row.try_get("job_id")?;
    let active_id: Option<String> = row.try_get("active_id")?;
    let evaluation: String = row.try_get("evaluation")?;
    let decision: Option<String> = row.try_get("decision")?;
    let intervals: Option<String> = row.try_get("intervals")?;
    let groups: Option<String> = row.try_get("groups")?;
    let judge_version: Option<String> = row.try_get("judge_version")?;
    let fusion: Option<String> = row.try_get("fusion")?;
    let covariate_layer: Option<String> = row.try_get("covariate_layer")?;
    let bare: Option<String> = row.try_get("bare_fit")?;
    let judge_range = match (
        row.try_get::<Option<f64>, _>("judge_min")?,
        row.try_get::<Option<f64>, _>("judge_max")?,
    ) {
        (Some(min), Some(max)) => Some(JudgeRange { min, max }),
        _ => None,
    };
    Ok(CalibratorVersion {
        judge_range,
        id: CalibratorId::parse(&id).ok_or_else(|| corrupt("id"))?,
        key: CellKey {
            judge: JudgeName::parse(&row.try_get::<String, _>("judge")?)
                .map_err(|_| corrupt("judge"))?,
            rubric: RubricName::parse(&row.try_get::<String, _>("rubric")?)
                .map_err(|_| corrupt("rubric"))?,
        },
        version: row.try_get("version")?,
        job_id: job_id.as_deref().and_then(JobId::parse),
        anchor_count: row.try_get("anchor_count")?,
        anchor_digest: row.try_get("anchor_digest")?,
        model: Model::from_params(method, params).map_err(|_| corrupt(method.as_str()))?,
        evaluation: optional(Some(evaluation), "evaluation").flatten(),
        decision: optional(decision, "decision"),
        intervals: intervals
            .map(|i| serde_json::from_str(&i).map_err(|_| corrupt("intervals")))
            .transpose()?,
        groups: optional(groups, "groups"),
        failure: row.try_get("failure")?,
        created_at_ms: row.try_get("created_at_ms")?,
        active: active_id.as_deref() == Some(id.as_str()),
        judge_version: JudgeVersion::from_stored(judge_version.as_deref().unwrap_or(""))
            .map_err(|_| corrupt("judge version"))?,
        fusion: fusion
            .map(|f| serde_json::from_str(&f).map_err(|_| corrupt("fusion")))
            .transpose()?,
        covariate_layer: covariate_layer
            .map(|f| serde_json::from_str(&f).map_err(|_| corrupt("covariate layer")))
            .transpose()?,
        bare: bare
            .map(|b| {
                BareFit::from_stored(&b)
                    .map(Box::new)
                    .map_err(|_| corrupt("bare fit"))
            })
            .transpose()?,
    })
}

/// The cell of a row whose first two columns are its judge and rubric.
fn cell_key(r: &AnyRow) -> Result<CellKey> {
    Ok(CellKey {
        judge: JudgeName::parse(&r.try_get::<String, _>(0)?).map_err(|_| corrupt("judge"))?,
        rubric: RubricName::parse(&r.try_get::<String, _>(1)?).map_err(|_| corrupt("rubric"))?,
    })
}

/// The versions a job produced.
pub(super) async fn version_refs(pool: &AnyPool, job: JobId) -> Result<Vec<VersionRef>> {
    let rows = sqlx::query(
        // A pairwise cell's versions (`preference_versions`) pass, and its newest is the one it
        // shows.
        "SELECT c.rubric, cal.version, cal.failure, cal.id, act.calibrator_id
         FROM calibrators cal JOIN cells c ON c.id = cal.cell_id
         LEFT JOIN active_calibrators act ON act.cell_id = cal.cell_id
         WHERE cal.job_id = $1
         UNION ALL
         SELECT c.rubric, p.version, NULL, p.id,
             (SELECT n.id FROM preference_versions n WHERE n.cell_id = p.cell_id
              ORDER BY n.version DESC LIMIT 1)
         FROM preference_versions p JOIN cells c ON c.id = p.cell_id
         WHERE p.job_id = $2
         ORDER BY 1",
    )
    .bind(job.to_string())
    .bind(job.to_string())
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            let failure: Option<String> = r.try_get(2)?;
            let id: String = r.try_get(3)?;
            let active: Option<String> = r.try_get(4)?;
            Ok(VersionRef {
                rubric: RubricName::parse(&r.try_get::<String, _>(0)?)
                    .map_err(|_| corrupt("rubric"))?,
                version: r.try_get(1)?,
                passed: failure.is_none(),
                active: active.as_deref() == Some(id.as_str()),
            })
        })
        .collect()
}

/// Marks `job` succeeded inside `tx` where `owner` still holds its lease; `false` (and nothing
/// written) where it lost it. The guard writes first: on SQLite that takes the write lock at
/// once.
pub(super) async fn succeed_held_job(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    job: JobId,
    owner: &str,
    now: i64,
) -> Result<bool> {
    let held = sqlx::query(
        "UPDATE jobs SET state = 'succeeded', progress = 1, finished_at_ms = $1,
             updated_at_ms = $2, lease_owner = NULL, lease_expires_at_ms = NULL
         WHERE id = $3 AND lease_owner = $4 AND state = 'running'",
    )
    .bind(now)
    .bind(now)
    .bind(job.to_string())
    .bind(owner)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(held == 1)
}

/// Makes cell (`judge`, `rubric`) where it does not exist: a panel's, whose first version
/// makes it (it holds no anchors or comparisons of its own).
pub(super) async fn ensure_cell(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    judge: &JudgeName,
    rubric: &RubricName,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO cells (id, judge, rubric, anchor_count, updated_at_ms)
         VALUES ($1, $2, $3, 0, $4) ON CONFLICT (judge, rubric) DO NOTHING",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(judge.as_str())
    .bind(rubric.as_str())
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The two kinds of numbered versions a cell may hold.
#[derive(Debug, Clone, Copy)]
pub(super) enum Versions {
    Calibrators,
    Preferences,
}

/// Locks `judge`/`rubric`'s cell row inside `tx`, so two jobs never take the same number, and
/// returns its id and the next version number of `kind`.
pub(super) async fn next_version(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    judge: &JudgeName,
    rubric: &RubricName,
    kind: Versions,
) -> Result<(String, i64)> {
    let cell_id: String =
        sqlx::query("UPDATE cells SET judge = judge WHERE judge = $1 AND rubric = $2 RETURNING id")
            .bind(judge.as_str())
            .bind(rubric.as_str())
            .fetch_optional(&mut **tx)
            .await?
            .ok_or_else(|| Error::Internal(format!("cell {judge}/{rubric} vanished")))?
            .try_get(0)?;
    let next = match kind {
        Versions::Calibrators => {
            "SELECT COALESCE(MAX(version), 0) + 1 FROM calibrators WHERE cell_id = $1"
        }
        Versions::Preferences => {
            "SELECT COALESCE(MAX(version), 0) + 1 FROM preference_versions WHERE cell_id = $1"
        }
    };
    let version: i64 = sqlx::query(next)
        .bind(&cell_id)
        .fetch_one(&mut **tx)
        .await?
        .try_get(0)?;
    Ok((cell_id, version))
}

impl VersionRows<'_> {
    /// Every anchor of `judge_version` in `judge`'s cells (only `rubrics`, when given), per
    /// rubric in item order: one statement, so one consistent snapshot.
    pub async fn judge_anchors(
        &self,
        judge: &JudgeName,
        rubrics: Option<&[RubricName]>,
        judge_version: Option<&JudgeVersion>,
    ) -> Result<Vec<(RubricName, Vec<Anchor>)>> {
        let rows = sqlx::query(
            "SELECT c.rubric, a.item_id, a.judge_score, a.reference_score, a.group_name, a.rater,
                 a.judge_version, a.covariates, a.repeats,
                 (SELECT MIN(b.updated_at_ms) FROM anchors b WHERE b.cell_id = a.cell_id AND b.item_id = a.item_id) AS reference_at_ms
             FROM anchors a JOIN cells c ON c.id = a.cell_id
             WHERE c.judge = $1 AND a.judge_version = $2 ORDER BY c.rubric, a.item_id",
        )
        .bind(judge.as_str())
        .bind(JudgeVersion::stored(judge_version))
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<(RubricName, Vec<Anchor>)> = Vec::new();
        for r in &rows {
            let rubric: String = r.try_get("rubric")?;
            if out.last().is_none_or(|(name, _)| name.as_str() != rubric) {
                let name = RubricName::parse(&rubric).map_err(|_| corrupt("rubric"))?;
                out.push((name, Vec::new()));
            }
            let anchor = super::anchors::anchor_of_named(r)?;
            if let Some((_, anchors)) = out.last_mut() {
                anchors.push(anchor);
            }
        }
        if let Some(wanted) = rubrics {
            out.retain(|(name, _)| wanted.contains(name));
        }
        Ok(out)
    }

    /// Finishes a job this process holds: stores each new version (numbered per cell), makes
    /// it active when it passed its diagnostics or `force` is set, and marks the job
    /// succeeded, all in one transaction. Returns the stored versions, or `None` (and nothing
    /// stored) when `owner` no longer holds the job.
    pub async fn finish_job(
        &self,
        job: JobId,
        owner: &str,
        judge: &JudgeName,
        judge_version: Option<&JudgeVersion>,
        versions: &[NewVersion],
        force: bool,
    ) -> Result<Option<Vec<CalibratorVersion>>> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        if !succeed_held_job(&mut tx, job, owner, now).await? {
            tx.rollback().await?;
            return Ok(None);
        }
        let mut stored = Vec::with_capacity(versions.len());
        let mut sorted: Vec<&NewVersion> = versions.iter().collect();
        sorted.sort_by(|a, b| a.rubric.cmp(&b.rubric));
        for v in sorted {
            if v.fusion.is_some() {
                // A panel's cell holds no anchors: its first version makes it.
                ensure_cell(&mut tx, judge, &v.rubric, now).await?;
            }
            let (cell_id, version) =
                next_version(&mut tx, judge, &v.rubric, Versions::Calibrators).await?;
            let calibrator = CalibratorId::new();
            let id = calibrator.to_string();
            let (failure, intervals_readable) = insert_version(
                &mut tx,
                (&id, &cell_id, version),
                job,
                judge_version,
                v,
                now,
            )
            .await?;
            let active = failure.is_none() || (force && intervals_readable);
            if active {
                set_active(&mut tx, &cell_id, &id, now).await?;
            }
            stored.push(CalibratorVersion {
                id: calibrator,
                key: CellKey {
                    judge: judge.clone(),
                    rubric: v.rubric.clone(),
                },
                version,
                job_id: Some(job),
                anchor_count: v.anchor_count,
                anchor_digest: v.anchor_digest.clone(),
                model: v.model.clone(),
                evaluation: v.evaluation,
                decision: v.decision.clone(),
                intervals: v.intervals.clone(),
                groups: v.groups.clone(),
                failure,
                created_at_ms: now,
                active,
                judge_version: judge_version.cloned(),
                fusion: v.fusion.clone(),
                judge_range: v.judge_range,
                covariate_layer: v.covariate_layer.clone(),
                bare: v.bare.clone(),
            });
        }
        if !force && !stored.is_empty() && stored.iter().all(|v| v.failure.is_some()) {
            sqlx::query("UPDATE jobs SET state = 'failed', error = $1 WHERE id = $2")
                .bind(all_failed(&stored))
                .bind(job.to_string())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Some(stored))
    }

    /// A cell's versions, newest first. 404 when the cell does not exist.
    pub async fn versions(&self, key: &CellKey) -> Result<Vec<CalibratorVersion>> {
        let cell_id = self.cell_id(key).await?;
        let sql = format!(
            "SELECT {VERSION_COLUMNS} {VERSION_FROM} WHERE cal.cell_id = $1 ORDER BY cal.version DESC"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(cell_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(version_from_row).collect()
    }

    /// One version of a cell.
    pub async fn version(&self, key: &CellKey, version: i64) -> Result<Option<CalibratorVersion>> {
        let sql = format!(
            "SELECT {VERSION_COLUMNS} {VERSION_FROM}
             WHERE c.judge = $1 AND c.rubric = $2 AND cal.version = $3"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(key.judge.as_str())
            .bind(key.rubric.as_str())
            .bind(version)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(version_from_row)
            .transpose()
    }

    /// A version's anchors with their held-out corrections (`None` for a version trained
    /// before they were kept).
    pub async fn held_out(&self, id: CalibratorId) -> Result<Option<Vec<HeldOutRow>>> {
        let raw: Option<String> =
            sqlx::query_scalar("SELECT held_out FROM calibrators WHERE id = $1")
                .bind(id.to_string())
                .fetch_optional(&self.pool)
                .await?
                .flatten();
        raw.map(|r| serde_json::from_str(&r).map_err(|_| corrupt("held-out rows")))
            .transpose()
    }

    /// One version by id.
    pub async fn calibrator(&self, id: CalibratorId) -> Result<Option<CalibratorVersion>> {
        let sql = format!("SELECT {VERSION_COLUMNS} {VERSION_FROM} WHERE cal.id = $1");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(version_from_row)
            .transpose()
    }

    /// Makes `version` the one `key` serves.
    pub async fn activate(&self, key: &CellKey, version: &CalibratorVersion) -> Result<()> {
        let cell_id = self.cell_id(key).await?;
        let mut tx = self.pool.begin().await?;
        set_active(&mut tx, &cell_id, &version.id.to_string(), now_ms()).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Which version every cell serves, with when it was activated: what each process polls.
    pub async fn active_calibrators(&self) -> Result<Vec<(CellKey, CalibratorId)>> {
        let rows = sqlx::query(
            "SELECT c.judge, c.rubric, act.calibrator_id
             FROM active_calibrators act JOIN cells c ON c.id = act.cell_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    cell_key(r)?,
                    CalibratorId::parse(&r.try_get::<String, _>(2)?)
                        .ok_or_else(|| corrupt("id"))?,
                ))
            })
            .collect()
    }

    /// The newest passed version of each (cell, judge version), the unversioned anchors'
    /// (`None`) included: what serves requests naming that judge version (or none) when the
    /// active version was trained on another.
    pub async fn judge_version_calibrators(
        &self,
    ) -> Result<Vec<(CellKey, Option<JudgeVersion>, CalibratorId)>> {
        let rows = sqlx::query(
            "SELECT c.judge, c.rubric, COALESCE(cal.judge_version, ''), cal.id
             FROM calibrators cal JOIN cells c ON c.id = cal.cell_id
             WHERE cal.failure IS NULL
                 AND cal.version = (SELECT MAX(o.version) FROM calibrators o
                     WHERE o.cell_id = cal.cell_id
                         AND COALESCE(o.judge_version, '') = COALESCE(cal.judge_version, '')
                         AND o.failure IS NULL)",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    cell_key(r)?,
                    JudgeVersion::from_stored(&r.try_get::<String, _>(2)?)
                        .map_err(|_| corrupt("judge version"))?,
                    CalibratorId::parse(&r.try_get::<String, _>(3)?)
                        .ok_or_else(|| corrupt("id"))?,
                ))
            })
            .collect()
    }

    /// Every judge's `on_version_mismatch` setting that differs from the default.
    pub async fn judge_settings(&self) -> Result<HashMap<JudgeName, OnMismatch>> {
        let rows = sqlx::query("SELECT judge, on_version_mismatch FROM judge_settings")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    JudgeName::parse(&r.try_get::<String, _>(0)?).map_err(|_| corrupt("judge"))?,
                    OnMismatch::parse(&r.try_get::<String, _>(1)?)
                        .ok_or_else(|| corrupt("setting"))?,
                ))
            })
            .collect()
    }

    pub async fn put_judge_setting(&self, judge: &JudgeName, on: OnMismatch) -> Result<()> {
        sqlx::query(
            "INSERT INTO judge_settings (judge, on_version_mismatch, updated_at_ms)
             VALUES ($1, $2, $3)
             ON CONFLICT (judge) DO UPDATE SET on_version_mismatch = excluded.on_version_mismatch,
                 updated_at_ms = excluded.updated_at_ms",
        )
        .bind(judge.as_str())
        .bind(on.as_str())
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

async fn set_active(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    cell_id: &str,
    calibrator_id: &str,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO active_calibrators (cell_id, calibrator_id, activated_at_ms)
         VALUES ($1, $2, $3)
         ON CONFLICT (cell_id) DO UPDATE SET calibrator_id = excluded.calibrator_id,
             activated_at_ms = excluded.activated_at_ms",
    )
    .bind(cell_id)
    .bind(calibrator_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A job's error where none of its versions passed its gate: each rubric's reason, and what
/// the caller can do.
fn all_failed(stored: &[CalibratorVersion]) -> String {
    let reasons: Vec<String> = stored
        .iter()
        .map(|v| format!("{}: {}", v.key.rubric, v.failure.as_deref().unwrap_or("")))
        .collect();
    format!(
        "no version passed its diagnostics ({}); they are stored, not served: retrain with more \
         warm-up and draws, or activate one with force=true",
        reasons.join("; ")
    )
}

/// Inserts version `version` of `cell_id` (its id `id`); gives its failure, if any, and
/// whether its bands read back. A version whose bands do not read back is stored failed,
/// never served.
async fn insert_version(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    (id, cell_id, version): (&str, &str, i64),
    job: JobId,
    judge_version: Option<&JudgeVersion>,
    v: &NewVersion,
    now: i64,
) -> Result<(Option<String>, bool)> {
    let params = v.model.params().map_err(Error::Internal)?.to_string();
    let intervals = readable(v.intervals.as_ref(), "intervals")?;
    let intervals_readable = v.intervals.is_none() || intervals.is_some();
    let failure = v.model.failure().or_else(|| {
        (v.intervals.is_some() && intervals.is_none()).then(|| {
            "its 95% predictive bands are not finite numbers (are the anchors' scores extreme?); not served".to_owned()
        })
    });
    sqlx::query(
        "INSERT INTO calibrators (id, cell_id, version, method, job_id, anchor_count,
             anchor_digest, params, diagnostics, evaluation, decision, intervals, passed,
             failure, created_at_ms, groups, judge_version, fusion, judge_min, judge_max,
             covariate_layer, held_out, bare_fit)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
             $18, $19, $20, $21, $22, $23)",
    )
    .bind(id)
    .bind(cell_id)
    .bind(version)
    .bind(v.model.method().as_str())
    .bind(job.to_string())
    .bind(v.anchor_count)
    .bind(&v.anchor_digest)
    .bind(params)
    // The model's diagnostics are in `params` (migration 6); the column stays empty.
    .bind("{}")
    .bind(readable(v.evaluation.as_ref(), "evaluation")?.unwrap_or_else(|| "null".into()))
    .bind(readable(v.decision.as_ref(), "decision")?)
    .bind(intervals)
    .bind(i64::from(failure.is_none()))
    .bind(failure.clone())
    .bind(now)
    .bind(readable(v.groups.as_ref(), "groups")?)
    .bind(JudgeVersion::stored(judge_version))
    .bind(v.fusion.as_ref().map(to_json).transpose()?)
    .bind(v.judge_range.map(|r| r.min))
    .bind(v.judge_range.map(|r| r.max))
    .bind(v.covariate_layer.as_ref().map(to_json).transpose()?)
    .bind(readable(v.held_out.as_ref(), "held-out rows")?)
    .bind(
        v.bare
            .as_ref()
            .map(|b| b.to_stored())
            .transpose()
            .map_err(Error::Internal)?,
    )
    .execute(&mut **tx)
    .await?;
    Ok((failure, intervals_readable))
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Figure {
        mae: f64,
    }

    #[test]
    fn figures_that_do_not_read_back_are_not_stored() {
        let finite = super::readable(Some(&Figure { mae: 0.5 }), "figure").unwrap();
        assert_eq!(finite.as_deref(), Some(r#"{"mae":0.5}"#));
        for x in [f64::NAN, f64::INFINITY] {
            assert_eq!(
                super::readable(Some(&Figure { mae: x }), "figure").unwrap(),
                None
            );
        }
        // Read back, an unreadable report is left out, never an error.
        assert!(super::optional::<Figure>(Some(r#"{"mae":null}"#.into()), "figure").is_none());
        assert!(super::optional::<Figure>(Some(r#"{"mae":1.5}"#.into()), "figure").is_some());
    }
}
