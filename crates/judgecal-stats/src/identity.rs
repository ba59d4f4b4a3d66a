//! The raw judge score, uncorrected: what doing nothing gives, and what `auto` serves when no
//! corrector beats it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::corrector::{Cell, CellModel, Corrected, Corrector, MeanUncertainty, Run};
use super::report::NoReport;

/// The identity has nothing to set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct IdentityOptions {}

/// The identity's stored model: nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct IdentityModel {}

pub struct Identity;

impl Corrector for Identity {
    const LABEL: &'static str = "raw judge";
    type Options = IdentityOptions;
    type Fit = ();
    type Model = IdentityModel;

    fn fit(_: &IdentityOptions, _: &[Cell], _: u64, _: &Run) -> Result<(), String> {
        Ok(())
    }

    fn predict(_: &(), _: usize, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        Ok(scores.iter().map(|&j| Corrected::score(j)).collect())
    }

    fn model(
        _: &(),
        _: usize,
        _: &Cell,
        _: &[Option<Corrected>],
        _: usize,
    ) -> Result<IdentityModel, String> {
        Ok(IdentityModel {})
    }
}

impl CellModel for IdentityModel {
    type Report = NoReport;

    fn report(&self) -> NoReport {
        NoReport {}
    }

    fn correct(&self, scores: &[f64]) -> Result<Vec<Corrected>, String> {
        Ok(scores.iter().map(|&j| Corrected::score(j)).collect())
    }

    fn mean_uncertainty(&self) -> MeanUncertainty<'_> {
        MeanUncertainty::Offset
    }
}
