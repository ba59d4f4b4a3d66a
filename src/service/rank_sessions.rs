//! Ranking sessions (`domain::rank_session`): the looks of a labelling user, bound.

use super::families::{Runs, Versions};
use uuid::Uuid;

use super::{RankRequest, Served};
use crate::domain::CellKey;
use crate::domain::rank_session::{RankSession, SessionPlan, fingerprint};
use crate::error::{Error, Result};
use crate::store::Recorded;
use judgecal_stats::runlevel::rank::Ranking;

impl Runs<'_> {
    /// Opens a session on a cell that has a calibration to answer it (the pinned version, or
    /// an active one): 404 otherwise, before any look is planned.
    pub async fn open_rank_session(
        &self,
        key: &CellKey,
        plan: &SessionPlan,
    ) -> Result<RankSession> {
        Versions(self).corrector(key, plan.version).await?;
        self.store.session_rows().open_rank_session(key, plan).await
    }

    /// The session `id`; 404 where there is none.
    pub async fn rank_session(&self, id: Uuid) -> Result<RankSession> {
        self.store
            .session_rows()
            .rank_session(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no ranking session {id}")))
    }

    /// Answers `request` as the next look of `session` (the request's round, rounds, level,
    /// error rate, label seed and version are the session's) and records the look with the
    /// labels it carries and the items its label plan draws, binding its runs to the session.
    /// 409 where the look drops or changes a label an earlier look saw, carries a label of an
    /// item no plan of the session drew, looks at a run another session holds, or where
    /// another look was recorded since `session` was read (nothing is recorded: ask again). A
    /// request that fails records nothing, so it spends no look.
    pub async fn rank_look(
        &self,
        session: &RankSession,
        request: RankRequest,
    ) -> Result<(Served, Ranking, RankSession)> {
        let fingerprints: Vec<(String, String)> = request
            .runs
            .iter()
            .map(|(name, run)| (name.clone(), fingerprint(run)))
            .collect();
        let held = self
            .store
            .session_rows()
            .rank_runs_held_elsewhere(session, &fingerprints)
            .await?;
        if let Some((run, other)) = held.first() {
            return Err(held_elsewhere(session, run, &other.to_string()));
        }
        same_labels(session, &request)?;
        // The runs' ids name the items a label plan draws (only a look that asks for one).
        let keys: Vec<(String, Option<Vec<String>>)> = if request.rank.labels.is_some() {
            request
                .runs
                .iter()
                .map(|(name, run)| (name.clone(), run.ids.clone()))
                .collect()
        } else {
            Vec::new()
        };
        let seen = session.seen.after(&request.runs);
        let (served, ranking) = self.ranked(request).await?;
        let drawn = match &ranking.allocation {
            Some(plan) => session.drawn.after(&keys, &plan.items),
            None => session.drawn.clone(),
        };
        match self
            .store
            .session_rows()
            .record_rank_look(session, &seen, &drawn, &fingerprints)
            .await?
        {
            Recorded::Done => {}
            Recorded::Raced => {
                return Err(Error::conflict(
                    format!(
                        "another look of ranking session {} was recorded while this one was answered; read the session and ask again",
                        session.id
                    ),
                    vec![],
                ));
            }
            Recorded::Held {
                run,
                session: other,
            } => {
                return Err(held_elsewhere(session, &run, &other));
            }
        }
        let after = RankSession {
            looks: session.looks + 1,
            seen,
            drawn,
            updated_at_ms: crate::domain::now_ms(),
            ..session.clone()
        };
        Ok((served, ranking, after))
    }
}

/// A look keeps every label an earlier look saw, and labels only items the session's label
/// plans drew.
fn same_labels(session: &RankSession, request: &RankRequest) -> Result<()> {
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
    let problems = session.drawn.check(&session.seen, &request.runs);
    if !problems.is_empty() {
        return Err(Error::conflict(
            format!(
                "this look of ranking session {} labels items its label plans did not draw",
                session.id
            ),
            problems,
        ));
    }
    Ok(())
}

/// The refusal of a look at a run another session holds.
fn held_elsewhere(session: &RankSession, run: &str, other: &str) -> Error {
    Error::conflict(
        format!(
            "run {run:?} (the same items and judge scores) belongs to ranking session {other}, which looked at it first; a second session on the same runs would start a fresh error budget for the same question. Continue that session (POST /v1/rank/sessions/{other}/looks), or rank once without a session (POST /v1/rank: its guarantee is for that one look). This look of session {} spent nothing",
            session.id
        ),
        vec![],
    )
}
