-- Drift beyond beta: each anchor batch that reaches a cell with an active version is checked
-- against that version's 95% predictive interval before anyone retrains. One row per (batch,
-- cell); every process reads the recent rows of the active versions for
-- judgecal_anchor_coverage, so all replicas report the same share.
CREATE TABLE anchor_coverage (
    id            TEXT PRIMARY KEY,
    calibrator_id TEXT NOT NULL REFERENCES calibrators (id),
    checked       BIGINT NOT NULL,
    inside        BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX anchor_coverage_by_version ON anchor_coverage (calibrator_id, created_at_ms);
