-- The drift alarm of a pairwise cell (issue 56): each labelled comparison that reaches a cell
-- after its newest version was trained, of that version's judge version, is checked against
-- the version's band of the people's preference around the calibrated preference. One row
-- per upload, as `anchor_coverage` holds them for judge scores: `misses` is '1' or '0' per
-- comparison in order, `raters` (JSON, where any is named) who labelled each, `inside` how
-- many fell inside the band.
CREATE TABLE preference_coverage (
    id            TEXT PRIMARY KEY,
    version_id    TEXT NOT NULL REFERENCES preference_versions (id),
    checked       BIGINT NOT NULL,
    inside        BIGINT NOT NULL,
    misses        TEXT NOT NULL,
    raters        TEXT,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX preference_coverage_by_version ON preference_coverage (version_id, created_at_ms);
