-- Panels: a named, ordered set of judges whose scores of one item are fused into one. A
-- panel's name serves wherever a judge's does, so it shares the judges' namespace; its
-- versions live in cells of its own (judge = the panel's name) that hold no anchors.
-- `judges` is the members' names as a JSON array, in order.
CREATE TABLE panels (
    name          TEXT PRIMARY KEY,
    judges        TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);

-- A panel version's fusion layer per rubric (JSON: the members, the sub-panels' posteriors,
-- the members' weights and the cross-fitted fused anchors); NULL for a judge's versions.
ALTER TABLE calibrators ADD COLUMN fusion TEXT;
