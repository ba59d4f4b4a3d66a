-- One stored form per method: a version's `params` column now holds everything its method's
-- model needs. Bayesian versions kept their posterior in `params` and their convergence
-- diagnostics in `diagnostics`; both move into `params` as {"posterior", "diagnostics"}.
-- Other methods' params are unchanged. `diagnostics` is no longer read.
UPDATE calibrators
SET params = '{"posterior":' || params || ',"diagnostics":' || diagnostics || '}'
WHERE method = 'bayes';
