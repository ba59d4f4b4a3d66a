//! Ranking sessions (`domain::rank_session`): opened once, a look recorded only where no other
//! look was recorded since its answer was computed, and every run it looked at bound to it
//! (`rank_session_runs`), in the same transaction.

use super::families::SessionRows;
use sqlx::Row;
use uuid::Uuid;

use crate::domain::rank_session::{Drawn, RankSession, Seen, SessionPlan};
use crate::domain::{CellKey, JudgeName, RubricName, now_ms};
use crate::error::{Error, Result};

fn encode<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Internal(format!("cannot encode a session: {e}")))
}

impl SessionRows<'_> {
    /// Opens a session; returns it as stored.
    pub async fn open_rank_session(
        &self,
        key: &CellKey,
        plan: &SessionPlan,
    ) -> Result<RankSession> {
        let now = now_ms();
        let session = RankSession {
            id: Uuid::new_v4(),
            key: key.clone(),
            plan: plan.clone(),
            looks: 0,
            seen: Seen::default(),
            drawn: Drawn::default(),
            created_at_ms: now,
            updated_at_ms: now,
        };
        sqlx::query(
            "INSERT INTO rank_sessions (id, judge, rubric, plan, looks, seen, created_at_ms, updated_at_ms)
             VALUES ($1, $2, $3, $4, 0, $5, $6, $7)",
        )
        .bind(session.id.to_string())
        .bind(key.judge.as_str())
        .bind(key.rubric.as_str())
        .bind(encode(plan)?)
        .bind(encode(&session.seen)?)
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(session)
    }

    /// The session `id`, if there is one.
    pub async fn rank_session(&self, id: Uuid) -> Result<Option<RankSession>> {
        let Some(r) = sqlx::query(
            "SELECT judge, rubric, plan, looks, seen, created_at_ms, updated_at_ms, drawn
             FROM rank_sessions WHERE id = $1",
        )
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        let corrupt =
            |what: &str| Error::Internal(format!("ranking session {id}: unreadable {what}"));
        let decode_plan: SessionPlan =
            serde_json::from_str(&r.try_get::<String, _>(2)?).map_err(|_| corrupt("plan"))?;
        let seen: Seen =
            serde_json::from_str(&r.try_get::<String, _>(4)?).map_err(|_| corrupt("labels"))?;
        let drawn: Drawn =
            serde_json::from_str(&r.try_get::<String, _>(7)?).map_err(|_| corrupt("draws"))?;
        Ok(Some(RankSession {
            id,
            key: CellKey {
                judge: JudgeName::parse(&r.try_get::<String, _>(0)?)
                    .map_err(|_| corrupt("judge"))?,
                rubric: RubricName::parse(&r.try_get::<String, _>(1)?)
                    .map_err(|_| corrupt("rubric"))?,
            },
            plan: decode_plan,
            looks: usize::try_from(r.try_get::<i64, _>(3)?).map_err(|_| corrupt("looks"))?,
            seen,
            drawn,
            created_at_ms: r.try_get(5)?,
            updated_at_ms: r.try_get(6)?,
        }))
    }

    /// The sessions other than `session` that hold any of `runs` (name, fingerprint): each
    /// run's name as sent and the session that holds it.
    pub async fn rank_runs_held_elsewhere(
        &self,
        session: &RankSession,
        runs: &[(String, String)],
    ) -> Result<Vec<(String, Uuid)>> {
        let mut held = Vec::new();
        for (name, fingerprint) in runs {
            if let Some(owner) = self.rank_run_owner(session, fingerprint).await? {
                held.push((name.clone(), owner));
            }
        }
        Ok(held)
    }

    async fn rank_run_owner(
        &self,
        session: &RankSession,
        fingerprint: &str,
    ) -> Result<Option<Uuid>> {
        let owner: Option<String> = sqlx::query_scalar(
            "SELECT session_id FROM rank_session_runs
             WHERE judge = $1 AND rubric = $2 AND fingerprint = $3",
        )
        .bind(session.key.judge.as_str())
        .bind(session.key.rubric.as_str())
        .bind(fingerprint)
        .fetch_optional(&self.pool)
        .await?;
        let owner = owner
            .map(|o| {
                Uuid::parse_str(&o)
                    .map_err(|_| Error::Internal(format!("a bound run names no session: {o:?}")))
            })
            .transpose()?;
        Ok(owner.filter(|o| *o != session.id))
    }

    /// Records look `looks + 1` of `session` with the labels seen and the items drawn after
    /// it, and binds its `runs` (name, fingerprint) to it, all or nothing: `Raced` where
    /// another look was recorded since `session` was read, `Held` where another session bound
    /// one of the runs meanwhile.
    pub async fn record_rank_look(
        &self,
        session: &RankSession,
        seen: &Seen,
        drawn: &Drawn,
        runs: &[(String, String)],
    ) -> Result<Recorded> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE rank_sessions SET looks = looks + 1, seen = $1, drawn = $2, updated_at_ms = $3
             WHERE id = $4 AND looks = $5",
        )
        .bind(encode(seen)?)
        .bind(encode(drawn)?)
        .bind(now_ms())
        .bind(session.id.to_string())
        .bind(session.looks as i64)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if done != 1 {
            return Ok(Recorded::Raced);
        }
        for (name, fingerprint) in runs {
            sqlx::query(
                "INSERT INTO rank_session_runs (judge, rubric, fingerprint, session_id, run, bound_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (judge, rubric, fingerprint) DO NOTHING",
            )
            .bind(session.key.judge.as_str())
            .bind(session.key.rubric.as_str())
            .bind(fingerprint)
            .bind(session.id.to_string())
            .bind(name)
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
            let owner: String = sqlx::query_scalar(
                "SELECT session_id FROM rank_session_runs
                 WHERE judge = $1 AND rubric = $2 AND fingerprint = $3",
            )
            .bind(session.key.judge.as_str())
            .bind(session.key.rubric.as_str())
            .bind(fingerprint)
            .fetch_one(&mut *tx)
            .await?;
            if owner != session.id.to_string() {
                return Ok(Recorded::Held {
                    run: name.clone(),
                    session: owner,
                });
            }
        }
        tx.commit().await?;
        Ok(Recorded::Done)
    }
}

/// What recording a look did.
#[derive(Debug, Clone, PartialEq)]
pub enum Recorded {
    Done,
    /// Another look of the session was recorded first: nothing written.
    Raced,
    /// Another session holds this run: nothing written.
    Held {
        run: String,
        session: String,
    },
}
