-- Training jobs, calibrator versions and which version each cell serves. Portable SQL, as in
-- the first migration.

-- A durable queue: a process claims a job by moving it to 'running' with its own lease
-- (compare-and-set on state and lease expiry), renews the lease while it works, and finishes
-- the job only while it still holds the lease. A lease that runs out lets another process
-- take the job over.
CREATE TABLE jobs (
    id                  TEXT PRIMARY KEY,
    judge               TEXT NOT NULL,
    method              TEXT NOT NULL,
    -- The request with every default filled in (JSON), so a job can be re-run as it was.
    request             TEXT NOT NULL,
    state               TEXT NOT NULL,
    progress            DOUBLE PRECISION NOT NULL DEFAULT 0,
    error               TEXT,
    attempts            BIGINT NOT NULL DEFAULT 0,
    lease_owner         TEXT,
    lease_expires_at_ms BIGINT,
    created_at_ms       BIGINT NOT NULL,
    started_at_ms       BIGINT,
    finished_at_ms      BIGINT,
    updated_at_ms       BIGINT NOT NULL
);
CREATE INDEX jobs_by_state ON jobs (state, created_at_ms);
CREATE INDEX jobs_by_finish ON jobs (finished_at_ms);

-- Immutable, numbered versions per cell.
CREATE TABLE calibrators (
    id            TEXT PRIMARY KEY,
    cell_id       TEXT NOT NULL REFERENCES cells (id),
    version       BIGINT NOT NULL,
    method        TEXT NOT NULL,
    job_id        TEXT REFERENCES jobs (id),
    anchor_count  BIGINT NOT NULL,
    -- SHA-256 of the anchors the fit saw, in item order: the snapshot's identity.
    anchor_digest TEXT NOT NULL,
    params        TEXT NOT NULL,
    diagnostics   TEXT NOT NULL,
    evaluation    TEXT NOT NULL,
    passed        BIGINT NOT NULL,
    failure       TEXT,
    created_at_ms BIGINT NOT NULL,
    UNIQUE (cell_id, version)
);

-- The version each cell serves. Every process polls this small table to refresh its cache.
CREATE TABLE active_calibrators (
    cell_id         TEXT PRIMARY KEY REFERENCES cells (id),
    calibrator_id   TEXT NOT NULL REFERENCES calibrators (id),
    activated_at_ms BIGINT NOT NULL
);
