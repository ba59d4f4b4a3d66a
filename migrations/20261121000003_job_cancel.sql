-- Cancelling running jobs, and what a running job last reported (epoch, loss) for its caller.
ALTER TABLE jobs ADD COLUMN cancel_requested BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN detail TEXT NOT NULL DEFAULT '';
