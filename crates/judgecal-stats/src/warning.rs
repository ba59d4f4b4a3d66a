//! The one vocabulary of what a reader of an answer must know beside its numbers: a stable
//! [`Code`] a program can act on, a message a person can, and what it is about (a request
//! field, systems, items). Every answer that estimates carries a list of them (`warnings`);
//! the statistics decide them where they know them, and the server serialises them as they are.
//! docs/api.md lists every code, and why it warns rather than refuses.

use serde::{Deserialize, Serialize};

/// What a warning is about. Stable: a code is never renamed or reused; new ones are added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = WarningCode)]
pub enum Code {
    /// Served by a calibration trained on another judge version than the request named (or
    /// than untagged requests are served by).
    JudgeVersionMismatch,
    /// A panel served by a version trained on member judge versions other than those the
    /// members' own untagged requests are served by now.
    MemberVersionMismatch,
    /// Judge scores outside the judge scores the version was trained on.
    OutsideAnchors,
    /// A covariate outside the range the version's anchors carried (`field` names it).
    CovariateOutsideAnchors,
    /// Covariates the version does not read were sent and not used.
    CovariatesUnused,
    /// A version whose layer reads covariates got items without them: they were corrected by
    /// the same training's fit of the judge score alone.
    CovariatesMissing,
    /// A run's items lie where the covariate layer's held-out residuals by decile sit off zero:
    /// the bias was added to the interval.
    CovariateMisfit,
    /// Every item was read at held covariates (`hold`).
    CovariatesHeld,
    /// Items of a panel lacked a member the version reads.
    MembersMissing,
    /// A group the version's anchors do not name, answered as a new system.
    NewGroup,
    /// Many of a run's judge scores lie outside the anchors' range.
    Extrapolated,
    /// Many of a run's judge scores lie where the anchors are thin.
    SparseAnchors,
    /// Items with repeats were read at one-score equivalents beyond the anchors' judge scores
    /// through a curved corrector, or corrected past the scale's ends through a line.
    RepeatsBeyondAnchors,
    /// A run of a known system, its items scored several times, was read around the pooled
    /// anchor mean: the system has too few anchors to read it around its own.
    FewSystemAnchors,
    /// The corrector's own uncertainty was left out of an interval.
    CorrectorOmitted,
    /// The corrector is biased on runs like this one (the labelled path corrects it).
    CorrectorBiased,
    /// The version's anchors name fewer than two systems.
    GroupsUnmeasured,
    /// Too few systems to estimate how the bias varies between them.
    GroupsConservative,
    /// Known systems lie further apart than a new one's interval assumes.
    GroupsOutlying,
    /// A label plan that does not reach every target.
    LabelPlanShort,
    /// A ranking asked outside a session: its family holds for this one look.
    SingleLook,
    /// Many held-out anchors share one judge score (agreement's corrected rank figures).
    TiedJudgeScores,
    /// No raw kappa: the judge's scores are on another scale than the reference's levels.
    NoRawKappa,
    /// Re-scored items reverse the old order (slope and rank correlation below 0): a
    /// mirrored or inverted judge, not a shifted one.
    JudgeReversed,
    /// The run lacks an input the cell's map reads (`verdict_swapped`): answered by the
    /// cell's map without it.
    InputMissing,
    /// The run's verdicts are distributed unlike the labelled set's.
    RunUnlikeLabelled,
    /// Systems with no labelled comparison: their ratings rest on the judge alone.
    UnlabelledSystems,
    /// Systems whose labelled share is far below their share of the run.
    UnderlabelledSystems,
    /// Systems the judge says won or lost every comparison: their ratings are unbounded.
    UnboundedSystems,
    /// Every labelled comparison is one named rater's: the between-rater spread cannot be
    /// estimated.
    SingleRater,
    /// One named rater holds most labels: the interval leans on that rater's taste.
    DominantRater,
}

impl Code {
    /// The code as it is written on the wire.
    pub fn as_str(self) -> &'static str {
        CODES
            .iter()
            .find(|(c, _)| *c == self)
            .map_or("unknown", |(_, s)| *s)
    }
}

/// Every code with its wire name, for the docs' table and its test (which also holds it equal
/// to the enum's schema in the OpenAPI document).
pub const CODES: [(Code, &str); 31] = [
    (Code::JudgeVersionMismatch, "judge_version_mismatch"),
    (Code::MemberVersionMismatch, "member_version_mismatch"),
    (Code::OutsideAnchors, "outside_anchors"),
    (Code::CovariateOutsideAnchors, "covariate_outside_anchors"),
    (Code::CovariatesUnused, "covariates_unused"),
    (Code::CovariatesMissing, "covariates_missing"),
    (Code::CovariateMisfit, "covariate_misfit"),
    (Code::CovariatesHeld, "covariates_held"),
    (Code::MembersMissing, "members_missing"),
    (Code::NewGroup, "new_group"),
    (Code::Extrapolated, "extrapolated"),
    (Code::SparseAnchors, "sparse_anchors"),
    (Code::RepeatsBeyondAnchors, "repeats_beyond_anchors"),
    (Code::FewSystemAnchors, "few_system_anchors"),
    (Code::CorrectorOmitted, "corrector_omitted"),
    (Code::CorrectorBiased, "corrector_biased"),
    (Code::GroupsUnmeasured, "groups_unmeasured"),
    (Code::GroupsConservative, "groups_conservative"),
    (Code::GroupsOutlying, "groups_outlying"),
    (Code::LabelPlanShort, "label_plan_short"),
    (Code::SingleLook, "single_look"),
    (Code::TiedJudgeScores, "tied_judge_scores"),
    (Code::NoRawKappa, "no_raw_kappa"),
    (Code::JudgeReversed, "judge_reversed"),
    (Code::InputMissing, "input_missing"),
    (Code::RunUnlikeLabelled, "run_unlike_labelled"),
    (Code::UnlabelledSystems, "unlabelled_systems"),
    (Code::UnderlabelledSystems, "underlabelled_systems"),
    (Code::UnboundedSystems, "unbounded_systems"),
    (Code::SingleRater, "single_rater"),
    (Code::DominantRater, "dominant_rater"),
];

/// One thing to know about an answer (`AnswerWarning` in the API's schema, so that a client's
/// generated type does not shadow a language's own `Warning`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = AnswerWarning)]
pub struct Warning {
    pub code: Code,
    /// What is off and what to do, in words.
    pub message: String,
    /// The request field it is about (`covariates.length`, `comparisons.verdict_swapped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The systems (groups, runs of a ranking) it is about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub systems: Vec<String>,
    /// The items it is about: at most 20 ids (or rows counted from 1 where the request gave
    /// no ids).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<String>,
}

/// A warning names at most this many items.
pub const MAX_ITEMS: usize = 20;

impl Warning {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: None,
            systems: Vec::new(),
            items: Vec::new(),
        }
    }

    /// About this request field.
    pub fn at(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// About these systems.
    pub fn systems<S: ToString>(mut self, systems: impl IntoIterator<Item = S>) -> Self {
        self.systems = systems.into_iter().map(|s| s.to_string()).collect();
        self
    }

    /// About these items (the first [`MAX_ITEMS`]).
    pub fn items<S: ToString>(mut self, items: impl IntoIterator<Item = S>) -> Self {
        self.items = items
            .into_iter()
            .take(MAX_ITEMS)
            .map(|s| s.to_string())
            .collect();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_listed_once_under_its_wire_name() {
        let mut seen = std::collections::HashSet::new();
        for (code, name) in CODES {
            assert_eq!(serde_json::to_value(code).unwrap(), name);
            assert_eq!(code.as_str(), name);
            assert!(seen.insert(name), "{name} twice");
        }
    }
}
