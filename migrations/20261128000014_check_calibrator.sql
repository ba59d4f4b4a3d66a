-- The calibration version a silent-change check applied, so that the check can be read back
-- by its id as it was answered (issue 54). Checks stored before read the newest passed version
-- of their cell created before them: the one the cell served then unless a person had pinned
-- another.
ALTER TABLE judge_checks ADD COLUMN calibrator_version BIGINT;
UPDATE judge_checks SET calibrator_version = COALESCE(
    (SELECT MAX(cal.version) FROM calibrators cal
        WHERE cal.cell_id = judge_checks.cell_id AND cal.passed = 1
            AND cal.created_at_ms <= judge_checks.created_at_ms),
    0);
