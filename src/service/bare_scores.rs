//! Items sent without covariates to a version whose layer reads some: served by the same
//! training's judge-score-only fit (`BareFit`), said with `covariates_missing`; where a version
//! predates that fit, refused as before.

use std::sync::Arc;

use super::versions::Loaded;
use crate::error::{Error, Result};
use judgecal_stats::warning::{Code, Warning};

impl Loaded {
    /// Whether its covariate layer reads a covariate (in this rubric: a layer that kept none
    /// reads the judge score alone).
    pub fn reads_covariates(&self) -> bool {
        self.version
            .covariate_layer
            .as_ref()
            .is_some_and(|l| !l.inputs.is_empty())
    }

    /// What serves items that carry no covariates: this version, or where its layer reads
    /// some, its judge-score-only fit with the warning that says so (`None` where it predates
    /// that fit and so cannot serve them).
    pub fn for_bare_scores(self: &Arc<Self>) -> Option<(Arc<Loaded>, Option<Warning>)> {
        if !self.reads_covariates() {
            return Some((self.clone(), None));
        }
        let bare = self.bare.clone()?;
        let v = &self.version;
        // The covariates by name, each once (a bent one enters as its log and its hinges).
        let mut kept: Vec<&str> = Vec::new();
        for input in v.covariate_layer.iter().flat_map(|l| &l.inputs) {
            if !kept.contains(&input.name.as_str()) {
                kept.push(&input.name);
            }
        }
        let mae = |c: &Option<judgecal_stats::quality::Comparison>| {
            c.as_ref().map(|c| format!("{:.3}", c.calibrated.mae))
        };
        let figures = match (mae(&v.evaluation), mae(&bare.version.evaluation)) {
            (Some(with), Some(without)) => {
                format!(" (held-out MAE {without} without them, {with} with them)")
            }
            _ => String::new(),
        };
        let warning = Warning::new(
            Code::CovariatesMissing,
            format!(
                "version {} of {} reads covariates ({}) and the items gave none: they were corrected by the same \
                 training's fit of the judge score alone{figures}; send {{\"score\", \"covariates\"}} for its \
                 covariate-aware correction",
                v.version,
                v.key,
                kept.join(", ")
            ),
        );
        Some((bare, Some(warning)))
    }

    /// 409 where the version corrects at covariates, which `what` (an answer that reads judge
    /// scores alone) does not carry: a version trained with covariates must never read a bare
    /// judge score as if it were its layer's score.
    pub fn without_covariates(&self, what: &str) -> Result<()> {
        let v = &self.version;
        let Some(layer) = &v.covariate_layer else {
            return Ok(());
        };
        let names: Vec<String> = layer.inputs.iter().map(|i| i.label()).collect();
        let names = if names.is_empty() {
            "none kept".to_owned()
        } else {
            names.join(", ")
        };
        Err(Error::conflict(
            format!(
                "version {} of {} was trained with covariates (kept: {names}); {what} reads judge scores alone and \
                 is not served for such versions yet: correct items with their covariates through POST /v1/correct, \
                 or name a version trained without covariates (`version`)",
                v.version, v.key
            ),
            vec![],
        ))
    }
}
