-- Numeric covariates beside the judge score (a response's length), per anchor row: a JSON object
-- of name -> number, NULL where the row carries none (issue 55). A calibration trained on named
-- covariates keeps its input layer beside its corrector, as a panel's keeps its fusion.
ALTER TABLE anchors ADD COLUMN covariates TEXT;
ALTER TABLE calibrators ADD COLUMN covariate_layer TEXT;
