-- Ranking sessions: the looks a user plans before the first (`plan`: rounds, level, error
-- rate, label seed, pinned version), the looks taken, and every label seen so far (`seen`:
-- run name -> item -> reference, JSON), which each later look must still carry. A look is
-- recorded only where `looks` is still what the answer was computed for, so two concurrent
-- looks never both spend the same round.
CREATE TABLE rank_sessions (
    id            TEXT PRIMARY KEY,
    judge         TEXT NOT NULL,
    rubric        TEXT NOT NULL,
    plan          TEXT NOT NULL,
    looks         BIGINT NOT NULL,
    seen          TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
