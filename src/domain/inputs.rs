//! What a request's items give the corrector beside their judge scores, as one value: nothing
//! more, each item's covariates, or (a panel's items, whose judge score the panel's fusion
//! makes) each member's score. Every request that takes items (a correction, a run of an
//! estimate, a comparison or a ranking) carries one `ItemInputs` instead of a parallel vector
//! per kind of input, so the states the wire refuses (a panel item with covariates, covariates
//! for some runs' items and members for others of one run) cannot be built, and a new kind
//! of input is one variant here, read by the one layer in front of the corrector
//! (`service::layered` for covariates, the panel's fusion for members).

use std::collections::BTreeMap;

use super::covariates::Covariates;
use super::panel::MemberScores;

/// A request's items' inputs beside the judge score, one entry per item where there are any.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ItemInputs {
    /// The judge score is each item's only input.
    #[default]
    Score,
    /// Each item's covariates (empty for an item that gave none); some item gave some.
    Covariates(Vec<Covariates>),
    /// A panel's items: each member's score, by name. The items' judge scores are placeholders
    /// until the service fuses these for the served version.
    Members(Vec<MemberScores>),
    /// Each item's further scores by the same judge version (empty for an item scored once);
    /// some item has some. The service corrects each item at its scores' one-score equivalent.
    Repeats(Vec<Vec<f64>>),
}

impl ItemInputs {
    /// The items' covariates, where they carry some.
    pub fn covariates(&self) -> Option<&[Covariates]> {
        match self {
            ItemInputs::Covariates(c) => Some(c),
            _ => None,
        }
    }

    /// A panel's items' members' scores.
    pub fn members(&self) -> Option<&[MemberScores]> {
        match self {
            ItemInputs::Members(m) => Some(m),
            _ => None,
        }
    }

    /// Each item's further scores, where some item carries repeats.
    pub fn repeats(&self) -> Option<&[Vec<f64>]> {
        match self {
            ItemInputs::Repeats(r) => Some(r),
            _ => None,
        }
    }

    /// Whether these are a panel's items.
    pub fn is_panel(&self) -> bool {
        matches!(self, ItemInputs::Members(_))
    }
}

/// One item of a run as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RawItem {
    pub id: Option<String>,
    /// A judge's score.
    pub score: Option<f64>,
    /// A panel's item: each member's score, by name.
    pub members: Option<BTreeMap<String, f64>>,
    /// A judge's item: its covariates.
    pub covariates: Option<BTreeMap<String, f64>>,
    /// A judge's item: its further scores by the same judge version.
    pub repeats: Option<Vec<f64>>,
    pub reference: Option<f64>,
    pub cluster: Option<String>,
}

/// A run as sent: bare scores, or items.
#[derive(Debug, Clone, PartialEq)]
pub enum RawRun {
    Scores(Vec<f64>),
    Items(Vec<RawItem>),
}
