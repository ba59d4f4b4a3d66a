-- Issue 85, covariates on by default.
-- A version whose covariate layer reads a covariate keeps the same training's fit of the judge
-- score alone (its model, held-out figures and bands as JSON): items sent without their
-- covariates are corrected by it, with a warning, instead of refused.
ALTER TABLE calibrators ADD COLUMN bare_fit TEXT;
