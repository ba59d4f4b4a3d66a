-- Issue 58's judge repeat noise: an anchor row may carry further scores of its item by the same
-- judge version (the judge re-asked), as a JSON array, NULL where it carries none. The row's
-- judge_score stays the one its corrector is fitted on; the repeats measure the within-item noise.
ALTER TABLE anchors ADD COLUMN repeats TEXT;
