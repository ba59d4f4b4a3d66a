-- The runs a ranking session has looked at, by fingerprint (a hash of each run's item ids, or
-- positions, and judge scores; never its labels). A run belongs to the first session that
-- looked at it: a look of another session at the same run is refused, so that a user who
-- re-asks cannot open a fresh session (a fresh error budget) for each look on the same runs.
CREATE TABLE rank_session_runs (
    judge       TEXT NOT NULL,
    rubric      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    run         TEXT NOT NULL,
    bound_at_ms BIGINT NOT NULL,
    PRIMARY KEY (judge, rubric, fingerprint)
);

-- The items the session's label plans drew (run name -> item names, JSON): a later look's
-- labels must be of these. Sessions opened before this have none recorded; their labels
-- seen so far pass.
ALTER TABLE rank_sessions ADD COLUMN drawn TEXT NOT NULL DEFAULT '{}';
