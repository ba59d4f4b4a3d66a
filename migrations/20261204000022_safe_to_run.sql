-- Issue 87, safe to run.
-- Keys can be revoked and can expire: a revoked or expired key is refused by every replica
-- within the key cache's lifetime (auth.key_cache_secs).
ALTER TABLE api_keys ADD COLUMN revoked_at_ms BIGINT;
ALTER TABLE api_keys ADD COLUMN expires_at_ms BIGINT;
-- The drift check's outbox: an upload that stores new anchors in a cell writes one row here in
-- its own transaction; the check that records the batch's coverage deletes it in the same
-- transaction as its record. A process killed between the two leaves the row, and the next
-- refresh (or start) of any replica checks the batch: every stored batch is checked once.
CREATE TABLE pending_checks (
    id            TEXT PRIMARY KEY,
    cell_id       TEXT NOT NULL REFERENCES cells (id),
    judge_version TEXT NOT NULL,
    item_ids      TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX pending_checks_by_time ON pending_checks (created_at_ms);
-- A training request identical to one still queued returns that job instead of queueing
-- another (ten simultaneous requests made ten jobs and ten versions): the request's digest,
-- unique among queued jobs.
ALTER TABLE jobs ADD COLUMN queued_key TEXT;
CREATE UNIQUE INDEX jobs_queued_once ON jobs (queued_key) WHERE state = 'queued';
