-- A pairwise cell's trained versions (issue 56): what `auto` chose for the calibrated
-- preference, every candidate's held-out figures and the judge's biases beside the people's,
-- as one JSON report. Numbered per cell as calibrators are (a cell holds scores or
-- comparisons, never both, so its versions are all in one of the two tables); the newest is
-- the one the cell's report, picture and metrics show. `judge_version` is '' for the
-- unversioned comparisons, as in `comparisons`.
CREATE TABLE preference_versions (
    id                TEXT PRIMARY KEY,
    cell_id           TEXT NOT NULL REFERENCES cells (id),
    version           BIGINT NOT NULL,
    job_id            TEXT REFERENCES jobs (id),
    judge_version     TEXT NOT NULL,
    comparison_count  BIGINT NOT NULL,
    labelled_count    BIGINT NOT NULL,
    comparison_digest TEXT NOT NULL,
    report            TEXT NOT NULL,
    created_at_ms     BIGINT NOT NULL,
    UNIQUE (cell_id, version)
);
CREATE INDEX preference_versions_by_job ON preference_versions (job_id);
