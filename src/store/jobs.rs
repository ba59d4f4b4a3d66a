//! The durable training queue.
//!
//! A process claims a job with one compare-and-set `UPDATE` (state queued, or running with an
//! expired lease → running under its own lease); on Postgres the row lock makes concurrent
//! claims of one job serialise and re-check the condition, so exactly one wins. The owner
//! renews its lease while it works and can finish the job only while it still holds it.

use super::families::JobRows;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::calibrators::version_refs;
use crate::domain::calibration::{Job, JobId, JobKind, JobState};
use crate::domain::training::TrainingRequest;
use crate::domain::{JudgeName, now_ms};
use crate::error::{Error, Result};

/// A job this process now holds the lease on.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: JobId,
    pub judge: JudgeName,
    pub kind: JobKind,
    /// The request as stored; parsed when the job runs, so a request this build cannot read
    /// fails its job with the reason instead of blocking the queue.
    pub request: serde_json::Value,
    /// How many times a process has claimed it, this claim included.
    pub attempts: i64,
}

/// What renewing a lease found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    Held,
    /// Held, and someone asked for the job to be cancelled.
    CancelRequested,
    /// Another process has the job now.
    Lost,
}

/// A finished job, for the training metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedJob {
    pub id: JobId,
    pub kind: JobKind,
    pub state: JobState,
    pub duration_ms: i64,
    pub finished_at_ms: i64,
}

fn corrupt(what: &str) -> Error {
    Error::Internal(format!("stored job has an unreadable {what}"))
}

const JOB_COLUMNS: &str = "id, judge, method, request, state, progress, detail, error, \
     attempts, created_at_ms, started_at_ms, finished_at_ms";

fn job_from_row(row: &AnyRow) -> Result<Job> {
    let id: String = row.try_get("id")?;
    let request: String = row.try_get("request")?;
    Ok(Job {
        id: JobId::parse(&id).ok_or_else(|| corrupt("id"))?,
        judge: JudgeName::parse(&row.try_get::<String, _>("judge")?)
            .map_err(|_| corrupt("judge"))?,
        kind: JobKind::parse(&row.try_get::<String, _>("method")?)
            .map_err(|_| corrupt("method"))?,
        request: serde_json::from_str(&request).map_err(|_| corrupt("request"))?,
        state: JobState::parse(&row.try_get::<String, _>("state")?)
            .ok_or_else(|| corrupt("state"))?,
        progress: row.try_get("progress")?,
        detail: row.try_get("detail")?,
        error: row.try_get("error")?,
        attempts: row.try_get("attempts")?,
        created_at_ms: row.try_get("created_at_ms")?,
        started_at_ms: row.try_get("started_at_ms")?,
        finished_at_ms: row.try_get("finished_at_ms")?,
        versions: Vec::new(),
    })
}

impl JobRows<'_> {
    /// Queues a training job.
    /// Queues `request` as job `id`, unless an identical request is queued already: then that
    /// job's id. The unique index on `queued_key` among queued jobs settles simultaneous
    /// requests on both backends.
    pub async fn insert_job(&self, id: JobId, request: &TrainingRequest) -> Result<JobId> {
        let json = request.to_json().to_string();
        let key = crate::auth::hash_key(&format!("{}\0{json}", request.judge.as_str()));
        // Twice at most: the queued twin may start between the insert and the look-up.
        for _ in 0..2 {
            let now = now_ms();
            let inserted = sqlx::query(
                "INSERT INTO jobs (id, judge, method, request, state, created_at_ms, updated_at_ms,
                     queued_key)
                 VALUES ($1, $2, $3, $4, 'queued', $5, $6, $7)
                 ON CONFLICT (queued_key) WHERE state = 'queued' DO NOTHING",
            )
            .bind(id.to_string())
            .bind(request.judge.as_str())
            .bind(request.kind().as_str())
            .bind(&json)
            .bind(now)
            .bind(now)
            .bind(&key)
            .execute(&self.pool)
            .await?
            .rows_affected();
            if inserted == 1 {
                return Ok(id);
            }
            let twin: Option<String> =
                sqlx::query("SELECT id FROM jobs WHERE queued_key = $1 AND state = 'queued'")
                    .bind(&key)
                    .fetch_optional(&self.pool)
                    .await?
                    .map(|r| r.try_get(0))
                    .transpose()?;
            if let Some(twin) = twin.as_deref().and_then(JobId::parse) {
                return Ok(twin);
            }
        }
        Err(Error::Internal(
            "a training request's queued twin kept changing; send it again".into(),
        ))
    }

    /// A job with the versions it produced.
    pub async fn job(&self, id: JobId) -> Result<Option<Job>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1");
        let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let mut job = job_from_row(&row)?;
        job.versions = version_refs(&self.pool, id).await?;
        Ok(Some(job))
    }

    /// Claims the oldest job that is queued or whose lease has run out, for `lease_ms`.
    /// Returns `None` when there is nothing to do.
    pub async fn claim_job(&self, owner: &str, lease_ms: i64) -> Result<Option<ClaimedJob>> {
        let now = now_ms();
        let candidates = sqlx::query(
            "SELECT id FROM jobs
             WHERE state = 'queued' OR (state = 'running' AND lease_expires_at_ms < $1)
             ORDER BY created_at_ms LIMIT 8",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        for candidate in candidates {
            let id: String = candidate.try_get(0)?;
            let claimed = sqlx::query(
                "UPDATE jobs SET state = 'running', lease_owner = $1, lease_expires_at_ms = $2,
                     attempts = attempts + 1, started_at_ms = $3, updated_at_ms = $4
                 WHERE id = $5
                   AND (state = 'queued' OR (state = 'running' AND lease_expires_at_ms < $6))
                 RETURNING request, attempts, judge, method",
            )
            .bind(owner)
            .bind(now + lease_ms)
            .bind(now)
            .bind(now)
            .bind(&id)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
            if let Some(row) = claimed {
                let request: String = row.try_get(0)?;
                return Ok(Some(ClaimedJob {
                    id: JobId::parse(&id).ok_or_else(|| corrupt("id"))?,
                    judge: JudgeName::parse(&row.try_get::<String, _>(2)?)
                        .map_err(|_| corrupt("judge"))?,
                    kind: JobKind::parse(&row.try_get::<String, _>(3)?)
                        .map_err(|_| corrupt("method"))?,
                    request: serde_json::from_str(&request).map_err(|_| corrupt("request"))?,
                    attempts: row.try_get(1)?,
                }));
            }
        }
        Ok(None)
    }

    /// Extends the lease and records progress (`detail`: what the job last reported).
    pub async fn renew_lease(
        &self,
        id: JobId,
        owner: &str,
        lease_ms: i64,
        progress: f64,
        detail: &str,
    ) -> Result<Lease> {
        let now = now_ms();
        let row = sqlx::query(
            "UPDATE jobs SET lease_expires_at_ms = $1, progress = $2, detail = $3, updated_at_ms = $4
             WHERE id = $5 AND lease_owner = $6 AND state = 'running'
             RETURNING cancel_requested",
        )
        .bind(now + lease_ms)
        .bind(progress)
        .bind(detail)
        .bind(now)
        .bind(id.to_string())
        .bind(owner)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            None => Lease::Lost,
            Some(r) if r.try_get::<i64, _>(0)? != 0 => Lease::CancelRequested,
            Some(_) => Lease::Held,
        })
    }

    /// Cancels a queued job at once, or asks the process running it to stop. Returns the
    /// job's state afterwards (`running` while the cancel is on its way), or `None` when there
    /// is no such job.
    pub async fn cancel_job(&self, id: JobId) -> Result<Option<JobState>> {
        let now = now_ms();
        let queued = sqlx::query(
            "UPDATE jobs SET state = 'cancelled', error = 'cancelled before it started',
                 finished_at_ms = $1, updated_at_ms = $2
             WHERE id = $3 AND state = 'queued'",
        )
        .bind(now)
        .bind(now)
        .bind(id.to_string())
        .execute(&self.pool)
        .await?
        .rows_affected();
        if queued == 1 {
            return Ok(Some(JobState::Cancelled));
        }
        sqlx::query(
            "UPDATE jobs SET cancel_requested = 1, updated_at_ms = $1
             WHERE id = $2 AND state = 'running'",
        )
        .bind(now)
        .bind(id.to_string())
        .execute(&self.pool)
        .await?;
        Ok(self.job(id).await?.map(|j| j.state))
    }

    /// Puts a job this process holds back in the queue (at shutdown), for any process to take.
    pub async fn release_job(&self, id: JobId, owner: &str) -> Result<()> {
        sqlx::query(
            // Back in the queue without its key: a twin queued meanwhile keeps its own.
            "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires_at_ms = NULL,
                 attempts = attempts - 1, progress = 0, updated_at_ms = $1, queued_key = NULL
             WHERE id = $2 AND lease_owner = $3 AND state = 'running'",
        )
        .bind(now_ms())
        .bind(id.to_string())
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Ends a job this process holds as failed or cancelled, with `error`; `false` when
    /// `owner` no longer holds it. Its attempts are counted up to `max_attempts`: the claim
    /// that finds a job past them gives it up without attempting it.
    pub async fn end_job(
        &self,
        id: JobId,
        owner: &str,
        state: JobState,
        error: &str,
        max_attempts: i64,
    ) -> Result<bool> {
        let now = now_ms();
        let done = sqlx::query(
            "UPDATE jobs SET state = $1, error = $2, finished_at_ms = $3, updated_at_ms = $4,
                 lease_owner = NULL, lease_expires_at_ms = NULL,
                 attempts = CASE WHEN attempts > $5 THEN $6 ELSE attempts END
             WHERE id = $7 AND lease_owner = $8 AND state = 'running'",
        )
        .bind(state.as_str())
        .bind(error)
        .bind(now)
        .bind(now)
        .bind(max_attempts)
        .bind(max_attempts)
        .bind(id.to_string())
        .bind(owner)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(done == 1)
    }

    /// Jobs that finished at or after `since_ms`, oldest first.
    pub async fn finished_jobs(&self, since_ms: i64) -> Result<Vec<FinishedJob>> {
        let rows = sqlx::query(
            "SELECT id, method, state, started_at_ms, finished_at_ms FROM jobs
             WHERE finished_at_ms >= $1 ORDER BY finished_at_ms",
        )
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let finished: i64 = r.try_get(4)?;
                let started: Option<i64> = r.try_get(3)?;
                Ok(FinishedJob {
                    id: JobId::parse(&r.try_get::<String, _>(0)?).ok_or_else(|| corrupt("id"))?,
                    kind: JobKind::parse(&r.try_get::<String, _>(1)?)
                        .map_err(|_| corrupt("method"))?,
                    state: JobState::parse(&r.try_get::<String, _>(2)?)
                        .ok_or_else(|| corrupt("state"))?,
                    duration_ms: finished - started.unwrap_or(finished),
                    finished_at_ms: finished,
                })
            })
            .collect()
    }
}
