//! A correction request, parsed at the edge: the cell, the scores (with item ids when the
//! caller sent items) and the version to use.

use std::collections::BTreeMap;

use super::covariates::{self, Covariates};
use super::inputs::ItemInputs;
use super::panel::parse_member_scores;
use super::{CellKey, ItemId, JudgeName, JudgeVersion, Problem, RubricName};

#[derive(Debug, Clone, PartialEq)]
pub struct CorrectionRequest {
    pub key: CellKey,
    /// A judge's scores (empty for panel items).
    pub scores: Vec<f64>,
    /// What the items give beside the judge score: their covariates, or a panel's members'
    /// scores.
    pub inputs: ItemInputs,
    /// One per score, when the caller sent `items`.
    pub ids: Option<Vec<ItemId>>,
    /// A version to use instead of the active one.
    pub version: Option<i64>,
    /// The judge version that gave the scores.
    pub judge_version: Option<JudgeVersion>,
}

/// A correction's items as they arrived: a judge's scores (with each item's covariates where
/// any item gave some) or a panel's members' scores, and ids where the caller sent items.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawItems {
    pub scores: Vec<f64>,
    pub panel: Option<Vec<BTreeMap<String, f64>>>,
    pub covariates: Vec<BTreeMap<String, f64>>,
    pub ids: Option<Vec<String>>,
}

impl CorrectionRequest {
    /// Checks names, scores (finite), covariates, ids and the version; rows count from 1.
    pub fn parse(
        judge: &str,
        rubric: &str,
        items: RawItems,
        version: Option<i64>,
        judge_version: Option<&str>,
    ) -> Result<Self, Vec<Problem>> {
        let RawItems {
            scores,
            panel,
            covariates: raw_covariates,
            ids,
        } = items;
        let mut problems = Vec::new();
        let judge =
            JudgeName::parse(judge).map_err(|e| problems.push(Problem::at(None, "judge", e)));
        let rubric =
            RubricName::parse(rubric).map_err(|e| problems.push(Problem::at(None, "rubric", e)));
        let (field, score_field) = if ids.is_some() {
            ("items", "score")
        } else {
            ("scores", "scores")
        };
        if scores.is_empty() && panel.as_ref().is_none_or(Vec::is_empty) {
            problems.push(Problem::at(None, field, "give at least one score"));
        }
        let panel = panel.map(|items| parse_member_scores(items, "scores", &mut problems));
        let covariates: Vec<Covariates> = raw_covariates
            .iter()
            .enumerate()
            .map(|(i, item)| {
                covariates::from_map(Some(i + 1), covariates::FIELD, item, &mut problems)
            })
            .collect();
        if version.is_some_and(|v| v < 1) {
            problems.push(Problem::at(None, "version", "versions count from 1"));
        }
        let judge_version = judge_version
            .map(JudgeVersion::parse)
            .transpose()
            .map_err(|e| problems.push(Problem::at(None, "judge_version", e)))
            .ok()
            .flatten();
        for (i, s) in scores.iter().enumerate() {
            if let Err(e) = super::bounded(*s) {
                problems.push(Problem::at(Some(i + 1), score_field, e));
            }
        }
        let ids: Option<Vec<ItemId>> = ids.map(|ids| {
            ids.iter()
                .enumerate()
                .filter_map(|(i, id)| {
                    ItemId::named(id)
                        .map_err(|e| problems.push(Problem::at(Some(i + 1), "id", e)))
                        .ok()
                })
                .collect()
        });
        let inputs = match panel {
            Some(members) => ItemInputs::Members(members),
            None if covariates.is_empty() => ItemInputs::Score,
            None => ItemInputs::Covariates(covariates),
        };
        match (judge, rubric, problems.is_empty()) {
            (Ok(judge), Ok(rubric), true) => Ok(Self {
                key: CellKey { judge, rubric },
                scores,
                inputs,
                ids,
                version,
                judge_version,
            }),
            _ => Err(problems),
        }
    }

    /// How many items it corrects.
    pub fn item_count(&self) -> usize {
        self.inputs.members().map_or(self.scores.len(), <[_]>::len)
    }

    /// The name of the field that holds the scores.
    pub fn field(&self) -> &'static str {
        if self.ids.is_some() || self.inputs.is_panel() || self.inputs.covariates().is_some() {
            "items"
        } else {
            "scores"
        }
    }
}
