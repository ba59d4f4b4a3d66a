-- Issue 58's agreement report: each version keeps the anchors it was fitted on with their
-- cross-fitted (held-out) corrections, as a JSON array of rows (item id, group, judge score,
-- reference, held-out corrected score and its 95% band). NULL for versions trained before.
ALTER TABLE calibrators ADD COLUMN held_out TEXT;
