-- Judge versions. An anchor is now one judge version's score of an item: the key gains
-- `judge_version` (the platform's opaque label of the model snapshot, prompt and decoding;
-- '' for anchors uploaded without one, which is every anchor stored before). An item's
-- reference score does not depend on the judge version: the service keeps it equal across
-- the item's rows. `created_at_ms` is when the row was first stored (replacing a row keeps
-- it), so "the newest judge version" is the one whose first anchor arrived last.
-- Portable SQL: a new table, copied, renamed (SQLite cannot change a primary key in place).
CREATE TABLE anchors_by_version (
    cell_id         TEXT NOT NULL REFERENCES cells (id),
    judge_version   TEXT NOT NULL DEFAULT '',
    item_id         TEXT NOT NULL,
    judge_score     DOUBLE PRECISION NOT NULL,
    reference_score DOUBLE PRECISION NOT NULL,
    updated_at_ms   BIGINT NOT NULL,
    group_name      TEXT,
    created_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (cell_id, judge_version, item_id)
);
INSERT INTO anchors_by_version (cell_id, judge_version, item_id, judge_score, reference_score,
                                updated_at_ms, group_name, created_at_ms)
SELECT cell_id, '', item_id, judge_score, reference_score, updated_at_ms, group_name, updated_at_ms
FROM anchors;
DROP TABLE anchors;
ALTER TABLE anchors_by_version RENAME TO anchors;
-- An item's rows across versions (the stored reference of a re-scored row, the bridge's pairs).
CREATE INDEX anchors_by_item ON anchors (cell_id, item_id);

-- The judge version a calibrator was trained on ('' for anchors without one; NULL for
-- versions trained before, which are read as '').
ALTER TABLE calibrators ADD COLUMN judge_version TEXT;

-- Per-judge settings. `on_version_mismatch`: 'warn' (the default: the answer carries a
-- warning) or 'refuse' (409) when a request names a judge version the served calibration was
-- not trained on.
CREATE TABLE judge_settings (
    judge               TEXT PRIMARY KEY,
    on_version_mismatch TEXT NOT NULL,
    updated_at_ms       BIGINT NOT NULL
);

-- Silent-change checks: a sample of a cell's anchor items re-scored under a version label the
-- cell already holds, tested as a bridge against the stored scores. The scores are kept here,
-- never in `anchors`. `result` is the bridge's answer (JSON); `changed` 1 where the corrected
-- mean moved beyond the tolerance.
CREATE TABLE judge_checks (
    id            TEXT PRIMARY KEY,
    cell_id       TEXT NOT NULL REFERENCES cells (id),
    judge_version TEXT NOT NULL,
    scores        TEXT NOT NULL,
    result        TEXT NOT NULL,
    changed       BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX judge_checks_by_cell ON judge_checks (cell_id, created_at_ms);
