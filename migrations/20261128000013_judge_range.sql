-- The range of judge scores a version was trained on: /v1/correct and the run-level answers
-- refuse a score far outside it and flag one just outside (issue 54). Versions trained before
-- read the range of their cell's anchors of the same judge version as they stand now.
ALTER TABLE calibrators ADD COLUMN judge_min DOUBLE PRECISION;
ALTER TABLE calibrators ADD COLUMN judge_max DOUBLE PRECISION;
UPDATE calibrators SET
    judge_min = (SELECT MIN(a.judge_score) FROM anchors a
        WHERE a.cell_id = calibrators.cell_id
            AND a.judge_version = COALESCE(calibrators.judge_version, '')),
    judge_max = (SELECT MAX(a.judge_score) FROM anchors a
        WHERE a.cell_id = calibrators.cell_id
            AND a.judge_version = COALESCE(calibrators.judge_version, ''))
WHERE fusion IS NULL;
