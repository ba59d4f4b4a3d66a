-- Issue 86, signed webhooks for alarms. A webhook is an endpoint that alarms are posted to:
-- one configured for the whole service (`webhooks.url`, id 'configured', owner NULL), or one a
-- key made over the API (owner: the key's prefix; a revoked or expired key's hooks get nothing
-- new). The secret signs each delivery (Standard Webhooks: HMAC-SHA256), so it is kept as
-- written; deleting a hook keeps its row and its log.
CREATE TABLE webhooks (
    id            TEXT PRIMARY KEY,
    url           TEXT NOT NULL,
    secret        TEXT NOT NULL,
    events        TEXT NOT NULL,
    owner         TEXT,
    created_at_ms BIGINT NOT NULL,
    deleted_at_ms BIGINT
);
-- The delivery log and queue in one: an alarm enqueues one row per hook it reaches, once
-- (its event id is the idempotency key: the same alarm raised again, by this or another
-- replica, adds nothing). A sender claims a due row by moving its next attempt past its
-- timeout, so one replica sends it at a time; a row is sent until the receiver answers 2xx
-- (at least once) or its attempts run out.
CREATE TABLE webhook_deliveries (
    id                 TEXT PRIMARY KEY,
    webhook_id         TEXT NOT NULL REFERENCES webhooks (id),
    event_id           TEXT NOT NULL,
    event              TEXT NOT NULL,
    payload            TEXT NOT NULL,
    state              TEXT NOT NULL,
    attempts           BIGINT NOT NULL,
    next_attempt_at_ms BIGINT NOT NULL,
    last_status        BIGINT,
    last_error         TEXT,
    created_at_ms      BIGINT NOT NULL,
    delivered_at_ms    BIGINT,
    UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at_ms);
CREATE INDEX webhook_deliveries_by_hook ON webhook_deliveries (webhook_id, created_at_ms);
