-- Pairwise comparisons (issue 56): a judge's verdict on two systems' answers to one prompt,
-- with the people's preference where it was labelled. A cell holds either judge scores
-- (anchors) or comparisons, never both; `comparison_count` counts the latter as
-- `anchor_count` counts the former. Outcomes are the probability that `system_a`'s answer is
-- the better (1, 0, 0.5 for a tie, or a share between); `verdict_swapped` is the judge's with
-- b shown first, already mapped back. `judge_version` is '' for unversioned rows, as in
-- anchors. An item has one pair of systems and one preference whichever version judged it.
CREATE TABLE comparisons (
    cell_id         TEXT NOT NULL REFERENCES cells (id),
    judge_version   TEXT NOT NULL,
    item_id         TEXT NOT NULL,
    system_a        TEXT NOT NULL,
    system_b        TEXT NOT NULL,
    verdict         DOUBLE PRECISION NOT NULL,
    verdict_swapped DOUBLE PRECISION,
    preference      DOUBLE PRECISION,
    rater           TEXT,
    covariates      TEXT,
    created_at_ms   BIGINT NOT NULL,
    updated_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (cell_id, item_id, judge_version)
);

ALTER TABLE cells ADD COLUMN comparison_count BIGINT NOT NULL DEFAULT 0;
