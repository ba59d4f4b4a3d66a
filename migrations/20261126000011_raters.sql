-- The drift alarm's unit of independence. An anchor may name its rater (the labeller or
-- labelling session whose reference it carries); NULL where the upload named none, and for
-- every anchor stored before. A coverage check keeps each checked anchor's rater beside its
-- miss (JSON: an array of names and nulls, one per checked anchor; NULL where none was named),
-- so the alarm replays raters as units across batches.
ALTER TABLE anchors ADD COLUMN rater TEXT;
ALTER TABLE anchor_coverage ADD COLUMN raters TEXT;
