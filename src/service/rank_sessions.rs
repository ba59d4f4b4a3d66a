//! Ranking sessions (`domain::rank_session`): the looks of a labelling user, bound.

use uuid::Uuid;

use super::{RankRequest, Served, Service};
use crate::domain::CellKey;
use crate::domain::rank_session::{RankSession, SessionPlan};
use crate::error::{Error, Result};
use judgecal_stats::runlevel::rank::Ranking;

impl Service {
    /// Opens a session on a cell that has a calibration to answer it (the pinned version, or
    /// an active one): 404 otherwise, before any look is planned.
    pub async fn open_rank_session(
        &self,
        key: &CellKey,
        plan: &SessionPlan,
    ) -> Result<RankSession> {
        self.corrector(key, plan.version).await?;
        self.store.open_rank_session(key, plan).await
    }

    /// The session `id`; 404 where there is none.
    pub async fn rank_session(&self, id: Uuid) -> Result<RankSession> {
        self.store
            .rank_session(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no ranking session {id}")))
    }

    /// Answers `request` as the next look of `session` (the request's round, rounds, level,
    /// error rate, label seed and version are the session's) and records the look with the
    /// labels it carries. 409 where the look drops or changes a label an earlier look saw, or
    /// where another look was recorded since `session` was read (nothing is recorded: ask
    /// again). A request that fails records nothing, so it spends no look.
    pub async fn rank_look(
        &self,
        session: &RankSession,
        request: RankRequest,
    ) -> Result<(Served, Ranking, RankSession)> {
        let problems = session.seen.check(&request.runs);
        if !problems.is_empty() {
            return Err(Error::conflict(
                format!(
                    "this look of ranking session {} drops or changes labels an earlier look saw",
                    session.id
                ),
                problems,
            ));
        }
        let seen = session.seen.after(&request.runs);
        let (served, ranking) = self.rank(request).await?;
        if !self.store.record_rank_look(session, &seen).await? {
            return Err(Error::conflict(
                format!(
                    "another look of ranking session {} was recorded while this one was answered; read the session and ask again",
                    session.id
                ),
                vec![],
            ));
        }
        let after = RankSession {
            looks: session.looks + 1,
            seen,
            updated_at_ms: crate::domain::now_ms(),
            ..session.clone()
        };
        Ok((served, ranking, after))
    }
}
