-- Portable SQL: this one folder migrates both Postgres and SQLite.
-- Rules: TEXT / BIGINT / DOUBLE PRECISION only, ids are UUID text made by the service,
-- times are Unix milliseconds (BIGINT); no serials, no backend-specific types.

CREATE TABLE rubrics (
    name          TEXT PRIMARY KEY,
    scale_min     DOUBLE PRECISION NOT NULL,
    scale_max     DOUBLE PRECISION NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    updated_at_ms BIGINT NOT NULL
);

CREATE TABLE cells (
    id            TEXT PRIMARY KEY,
    judge         TEXT NOT NULL,
    rubric        TEXT NOT NULL REFERENCES rubrics (name),
    anchor_count  BIGINT NOT NULL DEFAULT 0,
    updated_at_ms BIGINT NOT NULL,
    UNIQUE (judge, rubric)
);

CREATE TABLE anchors (
    cell_id         TEXT NOT NULL REFERENCES cells (id),
    item_id         TEXT NOT NULL,
    judge_score     DOUBLE PRECISION NOT NULL,
    reference_score DOUBLE PRECISION NOT NULL,
    updated_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (cell_id, item_id)
);

CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    key_hash      TEXT NOT NULL UNIQUE,
    prefix        TEXT NOT NULL,
    scopes        TEXT NOT NULL,
    name          TEXT NOT NULL DEFAULT '',
    created_at_ms BIGINT NOT NULL
);
