-- What an `auto` training job saw and decided for a cell (JSON: every candidate's held-out
-- figures, the rule, the winner and why); NULL for versions of a named method.
ALTER TABLE calibrators ADD COLUMN decision TEXT;
