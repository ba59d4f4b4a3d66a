-- Honest numbers. Each version stores its predictive intervals: per bin of the judge score,
-- the band of held-out residuals (or the method's own interval) and how often it covered
-- held-out anchors (JSON; NULL for versions trained before, which then have no interval for a
-- method without its own).
ALTER TABLE calibrators ADD COLUMN intervals TEXT;
-- Each coverage check keeps which of its anchors missed the interval, in arrival order ('1' a
-- miss, '0' inside), so every replica replays the same drift e-process for a version from the
-- checks since its activation. NULL for checks recorded before.
ALTER TABLE anchor_coverage ADD COLUMN misses TEXT;
