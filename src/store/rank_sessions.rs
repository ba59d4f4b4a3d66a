//! Ranking sessions (`domain::rank_session`): opened once, a look recorded only where no other
//! look was recorded since its answer was computed.

use sqlx::Row;
use uuid::Uuid;

use super::Store;
use crate::domain::rank_session::{RankSession, Seen, SessionPlan};
use crate::domain::{CellKey, JudgeName, RubricName, now_ms};
use crate::error::{Error, Result};

fn encode<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Internal(format!("cannot encode a session: {e}")))
}

impl Store {
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
            "SELECT judge, rubric, plan, looks, seen, created_at_ms, updated_at_ms
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
            created_at_ms: r.try_get(5)?,
            updated_at_ms: r.try_get(6)?,
        }))
    }

    /// Records look `looks + 1` of `session` with the labels seen after it; `false` (nothing
    /// written) where another look was recorded since `session` was read.
    pub async fn record_rank_look(&self, session: &RankSession, seen: &Seen) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE rank_sessions SET looks = looks + 1, seen = $1, updated_at_ms = $2
             WHERE id = $3 AND looks = $4",
        )
        .bind(encode(seen)?)
        .bind(now_ms())
        .bind(session.id.to_string())
        .bind(session.looks as i64)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(done == 1)
    }
}
