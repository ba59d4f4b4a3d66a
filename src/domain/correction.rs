//! A correction request, parsed at the edge: the cell, the items (through the one door every
//! endpoint's items take, [`Items::check`]) and the version to use.

use super::inputs::{Door, InputKind, Item, Items, RawRun};
use super::{CellKey, JudgeName, JudgeVersion, Problem, RubricName};

#[derive(Debug, Clone, PartialEq)]
pub struct CorrectionRequest {
    pub key: CellKey,
    /// The items, in order: a judge's scores (with covariates) or a panel's members' scores.
    pub items: Vec<Item>,
    /// What every item gives beside its judge score.
    pub kind: InputKind,
    /// The field problems with the items name: `items`, or `scores` for bare scores.
    pub field: &'static str,
    /// A version to use instead of the active one.
    pub version: Option<i64>,
    /// The judge version that gave the scores.
    pub judge_version: Option<JudgeVersion>,
}

impl CorrectionRequest {
    /// Checks names, items, the version and the judge version; rows count from 1.
    pub fn parse(
        judge: &str,
        rubric: &str,
        items: RawRun,
        version: Option<i64>,
        judge_version: Option<&str>,
    ) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let judge =
            JudgeName::parse(judge).map_err(|e| problems.push(Problem::at(None, "judge", e)));
        let rubric =
            RubricName::parse(rubric).map_err(|e| problems.push(Problem::at(None, "rubric", e)));
        let items = Items::check("", items, Door::CORRECTION, &mut problems);
        if version.is_some_and(|v| v < 1) {
            problems.push(Problem::at(None, "version", "versions count from 1"));
        }
        let judge_version = judge_version
            .map(JudgeVersion::parse)
            .transpose()
            .map_err(|e| problems.push(Problem::at(None, "judge_version", e)))
            .ok()
            .flatten();
        match (judge, rubric, problems.is_empty()) {
            (Ok(judge), Ok(rubric), true) => Ok(Self {
                key: CellKey { judge, rubric },
                field: if items.as_items { "items" } else { "scores" },
                items: items.items,
                kind: items.kind,
                version,
                judge_version,
            }),
            _ => Err(problems),
        }
    }
}
