//! What an upload does to the anchors a cell holds, decided before anything is written: each
//! row is new, unchanged, a replacement, or a conflict (or needs a reference the cell does not
//! hold). A pure function of the stored rows of the batch's items and the batch; the store
//! only reads those rows and writes the plan (`Store::ingest`).

use std::collections::HashMap;

use super::anchors::CellBatch;
use super::covariates::{self, Covariates};
use super::{Anchor, CellKey, GroupName, ItemId, JudgeVersion, Problem, RaterName};

/// A stored row of one of a batch's items, in any judge version of the cell.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRow {
    pub item_id: String,
    /// The version as stored: `""` for an unversioned score.
    pub judge_version: String,
    pub judge_score: f64,
    pub reference_score: f64,
    pub group: Option<GroupName>,
    pub rater: Option<RaterName>,
    pub covariates: Covariates,
    pub repeats: Vec<f64>,
    pub created_at_ms: i64,
}

/// What one cell's batch writes: rows to insert (each with the creation time it keeps), rows
/// of the batch's version to delete first (replaced), and references that change for every
/// version of their item.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellPlan {
    pub fresh: Vec<Anchor>,
    /// Replacements, each with its stored row's creation time (a changed reference of an item
    /// new to this version starts now).
    pub replaced: Vec<(Anchor, i64)>,
    pub unchanged: usize,
    /// Items whose one reference changes, for every version that scored them.
    pub new_references: Vec<(ItemId, f64)>,
}

impl CellPlan {
    /// The rows to insert, each with the creation time it keeps.
    pub fn inserts(&self, now: i64) -> Vec<(&Anchor, i64)> {
        self.fresh
            .iter()
            .map(|a| (a, now))
            .chain(self.replaced.iter().map(|(a, created)| (a, *created)))
            .collect()
    }
}

/// The problems that refuse a batch whole: a cell of the other kind, rows with no reference
/// anywhere, and rows stored with other scores (when the batch does not replace).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Refusals {
    /// The first cell that holds pairwise comparisons.
    pub kind: Option<KindConflict>,
    pub missing: Vec<Problem>,
    pub conflicts: Vec<Problem>,
}

impl Refusals {
    pub fn is_empty(&self) -> bool {
        self.kind.is_none() && self.missing.is_empty() && self.conflicts.is_empty()
    }
}

/// What a cell holds of each kind when a batch meets it (read under the cell's lock): a cell
/// holds judge scores (anchors) or pairwise comparisons, not both.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CellKinds {
    pub anchors: i64,
    pub comparisons: i64,
}

/// A batch of one kind refused by a cell of the other: what was refused, and the problem
/// (at the batch's first row of the cell, field `judge`) that says what to do instead.
#[derive(Debug, Clone, PartialEq)]
pub struct KindConflict {
    pub message: String,
    pub problem: Problem,
}

impl CellKinds {
    /// The refusal of an anchor batch for `key` by a cell that holds comparisons.
    pub fn refuses_scores(&self, key: &CellKey, first_row: Option<usize>) -> Option<KindConflict> {
        let n = self.comparisons;
        (n > 0).then(|| KindConflict {
            message: format!(
                "the anchor batch was refused: cell {key} holds {n} pairwise comparison{}; a cell holds scores or \
                 comparisons, not both. Nothing was stored",
                if n == 1 { "" } else { "s" }
            ),
            problem: Problem::at(
                first_row,
                "judge",
                format!(
                    "{} judges rubric {} in pairs: upload its one-item scores under another judge name",
                    key.judge, key.rubric
                ),
            ),
        })
    }

    /// The refusal of a comparison batch for `key` by a cell that holds judge scores.
    pub fn refuses_comparisons(
        &self,
        key: &CellKey,
        first_row: Option<usize>,
    ) -> Option<KindConflict> {
        let n = self.anchors;
        (n > 0).then(|| KindConflict {
            message: format!(
                "the comparison batch was refused: cell {key} holds {n} judge scores (anchors); a cell holds scores \
                 or comparisons, not both. Nothing was stored"
            ),
            problem: Problem::at(
                first_row,
                "judge",
                format!(
                    "{} already scores rubric {} one item at a time: upload its pairwise verdicts under another judge \
                     name (for example {}-pairwise)",
                    key.judge, key.rubric, key.judge
                ),
            ),
        })
    }
}

fn shown<T: std::fmt::Display>(name: Option<&T>) -> String {
    name.map_or_else(|| "(none)".to_owned(), ToString::to_string)
}

/// Why a row conflicts with the row stored for its item and version: both rows' scores,
/// group, rater, and covariates and repeats where they differ.
fn stored_otherwise(cell: &CellBatch, s: &StoredRow, anchor: &Anchor) -> String {
    let mut said = format!(
        "{:?} is stored for {} (judge_version {}) with judge_score {}, reference_score {}, group {} and rater {}; \
         this batch has {}, {}, {} and {}",
        anchor.item_id.as_str(),
        cell.key,
        JudgeVersion::describe(cell.judge_version.as_ref()),
        s.judge_score,
        s.reference_score,
        shown(s.group.as_ref()),
        shown(s.rater.as_ref()),
        anchor.judge_score,
        anchor.reference_score,
        shown(anchor.group.as_ref()),
        shown(anchor.rater.as_ref()),
    );
    if s.covariates != anchor.covariates {
        said += &format!(
            "; stored covariates {}, this batch's {}",
            covariates::describe(&s.covariates),
            covariates::describe(&anchor.covariates)
        );
    }
    if s.repeats != anchor.repeats {
        said += &format!(
            "; stored repeats {:?}, this batch's {:?}",
            s.repeats, anchor.repeats
        );
    }
    said
}

/// Each item's stored row (its reference, group and rater are one for all its versions), and
/// this batch's version's row of it.
#[allow(clippy::type_complexity)]
fn held_rows<'a>(
    cell: &CellBatch,
    stored: &'a [StoredRow],
) -> (
    HashMap<&'a str, &'a StoredRow>,
    HashMap<&'a str, &'a StoredRow>,
) {
    let version = JudgeVersion::stored(cell.judge_version.as_ref());
    let mut items: HashMap<&str, &StoredRow> = HashMap::with_capacity(stored.len());
    let mut own: HashMap<&str, &StoredRow> = HashMap::new();
    for row in stored {
        items.insert(&row.item_id, row);
        if row.judge_version == version {
            own.insert(&row.item_id, row);
        }
    }
    (items, own)
}

/// Decides one cell's batch against the rows the cell holds for the batch's items (of every
/// judge version). Problems go to `refusals`; the plan is only to be written when, after every
/// cell, `refusals` is empty.
pub fn plan_cell(
    cell: &CellBatch,
    stored: &[StoredRow],
    replace: bool,
    now: i64,
    refusals: &mut Refusals,
) -> CellPlan {
    let (items, own) = held_rows(cell, stored);
    let mut plan = CellPlan::default();
    for (uploaded, &batch_row) in cell.anchors.iter().zip(&cell.rows) {
        let item = uploaded.item_id.as_str();
        let held = items.get(item);
        let stored_item = held.map(|s| {
            (
                s.reference_score,
                s.group.as_ref(),
                s.rater.as_ref(),
                &s.covariates,
            )
        });
        let Some(anchor) = uploaded.anchor(cell.judge_version.as_ref(), stored_item) else {
            refusals.missing.push(Problem::at(
                Some(batch_row),
                "reference_score",
                format!(
                    "is missing, and cell {} holds no reference for item {item:?} under any judge version: \
                     give its reference_score",
                    cell.key
                ),
            ));
            continue;
        };
        let reference_changes = held.is_some_and(|s| s.reference_score != anchor.reference_score);
        match own.get(item) {
            Some(s)
                if s.judge_score == anchor.judge_score
                    && s.reference_score == anchor.reference_score
                    && s.group == anchor.group
                    && s.rater == anchor.rater
                    && s.covariates == anchor.covariates
                    && s.repeats == anchor.repeats =>
            {
                plan.unchanged += 1;
            }
            Some(s) => {
                if !replace {
                    refusals.conflicts.push(Problem::at(
                        Some(batch_row),
                        "item_id",
                        stored_otherwise(cell, s, &anchor),
                    ));
                }
                if reference_changes {
                    plan.new_references
                        .push((anchor.item_id.clone(), anchor.reference_score));
                }
                plan.replaced.push((anchor, s.created_at_ms));
            }
            None if reference_changes => {
                let y = held.map_or(f64::NAN, |s| s.reference_score);
                if !replace {
                    refusals.conflicts.push(Problem::at(
                        Some(batch_row),
                        "reference_score",
                        format!(
                            "{} differs from the reference {y} cell {} holds for item {item:?} (an item has one \
                             reference whichever judge version scored it); leave reference_score empty to use \
                             the stored one, or send ?replace=true to change it for every version",
                            anchor.reference_score, cell.key
                        ),
                    ));
                }
                plan.new_references
                    .push((anchor.item_id.clone(), anchor.reference_score));
                plan.replaced.push((anchor, now));
            }
            None => plan.fresh.push(anchor),
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_of_one_kind_refuses_a_batch_of_the_other_naming_its_first_row() {
        let key = CellKey {
            judge: crate::domain::JudgeName::parse("gpt").unwrap(),
            rubric: crate::domain::RubricName::parse("helpful").unwrap(),
        };
        let empty = CellKinds::default();
        assert!(empty.refuses_scores(&key, Some(1)).is_none());
        assert!(empty.refuses_comparisons(&key, Some(1)).is_none());
        let pairs = CellKinds {
            anchors: 0,
            comparisons: 1,
        };
        let refused = pairs.refuses_scores(&key, Some(3)).unwrap();
        assert!(
            refused.message.contains("holds 1 pairwise comparison;"),
            "{}",
            refused.message
        );
        assert_eq!(
            (refused.problem.row, refused.problem.field.as_str()),
            (Some(3), "judge")
        );
        assert!(pairs.refuses_comparisons(&key, Some(3)).is_none());
        let scores = CellKinds {
            anchors: 7,
            comparisons: 0,
        };
        let refused = scores.refuses_comparisons(&key, Some(2)).unwrap();
        assert!(
            refused.message.contains("holds 7 judge scores"),
            "{}",
            refused.message
        );
        assert!(refused.problem.problem.contains("gpt-pairwise"));
        assert!(scores.refuses_scores(&key, Some(2)).is_none());
    }
    use crate::domain::anchors::Uploaded;
    use crate::domain::{CellKey, JudgeName, RubricName};

    fn batch(version: Option<&str>, rows: &[(&str, f64, Option<f64>)]) -> CellBatch {
        CellBatch {
            key: CellKey {
                judge: JudgeName::parse("gpt").unwrap(),
                rubric: RubricName::parse("coherence").unwrap(),
            },
            judge_version: version.map(|v| JudgeVersion::parse(v).unwrap()),
            anchors: rows
                .iter()
                .map(|&(item, j, y)| Uploaded {
                    item_id: ItemId::parse(item).unwrap(),
                    judge_score: j,
                    reference_score: y,
                    group: None,
                    rater: None,
                    covariates: Covariates::new(),
                    repeats: Vec::new(),
                })
                .collect(),
            rows: (1..=rows.len()).collect(),
        }
    }

    fn stored(item: &str, version: &str, j: f64, y: f64, created: i64) -> StoredRow {
        StoredRow {
            item_id: item.to_owned(),
            judge_version: version.to_owned(),
            judge_score: j,
            reference_score: y,
            group: Some(GroupName::parse("sys-a").unwrap()),
            rater: None,
            covariates: Covariates::new(),
            repeats: Vec::new(),
            created_at_ms: created,
        }
    }

    #[test]
    fn each_row_is_new_unchanged_replaced_or_in_conflict_and_conflicts_name_row_and_field() {
        let held = [
            stored("same", "", 2.0, 3.0, 10),
            stored("moved", "", 2.0, 3.0, 11),
            // Held under another version only: a row of this version is new to it.
            stored("other", "v2", 4.0, 4.5, 12),
        ];
        let rows = [
            ("same", 2.0, Some(3.0)),
            ("moved", 2.5, Some(3.0)),
            ("other", 3.0, Some(4.5)),
            ("fresh", 1.0, Some(1.5)),
        ];
        let mut refusals = Refusals::default();
        // The group is part of a row: "same" was stored with group sys-a, the batch names none.
        let plan = plan_cell(&batch(None, &rows), &held, false, 99, &mut refusals);
        assert_eq!(plan.unchanged, 0);
        assert_eq!(refusals.conflicts.len(), 2, "{refusals:?}");
        assert_eq!(refusals.conflicts[0].row, Some(1));
        assert_eq!(refusals.conflicts[1].row, Some(2));
        assert_eq!(refusals.conflicts[1].field, "item_id");
        assert!(refusals.conflicts[1].problem.contains("judge_score 2"));
        assert!(refusals.missing.is_empty());
        let fresh: Vec<&str> = plan.fresh.iter().map(|a| a.item_id.as_str()).collect();
        assert_eq!(fresh, ["other", "fresh"]);

        // With the group given, "same" is unchanged; with replace, "moved" keeps its creation
        // time and nothing conflicts.
        let mut with_group = batch(None, &rows);
        for a in &mut with_group.anchors {
            a.group = Some(GroupName::parse("sys-a").unwrap());
        }
        let mut refusals = Refusals::default();
        let plan = plan_cell(&with_group, &held, true, 99, &mut refusals);
        assert!(refusals.is_empty(), "{refusals:?}");
        assert_eq!(plan.unchanged, 1);
        assert_eq!(plan.replaced.len(), 1);
        assert_eq!(plan.replaced[0].0.item_id.as_str(), "moved");
        assert_eq!(plan.replaced[0].1, 11);
        assert!(plan.new_references.is_empty());
        let inserts: Vec<(&str, i64)> = plan
            .inserts(99)
            .iter()
            .map(|(a, t)| (a.item_id.as_str(), *t))
            .collect();
        assert_eq!(inserts, [("other", 99), ("fresh", 99), ("moved", 11)]);
    }

    #[test]
    fn a_re_scored_row_takes_the_items_reference_and_a_new_reference_changes_every_version() {
        let held = [stored("x", "", 2.0, 3.0, 10)];
        // Re-scored under v2 with no reference: it takes the stored one, and the group.
        let mut refusals = Refusals::default();
        let plan = plan_cell(
            &batch(Some("v2"), &[("x", 4.0, None)]),
            &held,
            false,
            99,
            &mut refusals,
        );
        assert!(refusals.is_empty());
        assert_eq!(plan.fresh[0].reference_score, 3.0);
        assert_eq!(plan.fresh[0].group.as_ref().unwrap().as_str(), "sys-a");
        assert_eq!(plan.fresh[0].judge_version.as_ref().unwrap().as_str(), "v2");

        // Another reference under v2: a conflict on reference_score, unless replacing, when
        // it changes the item's reference for every version.
        let rows = [("x", 4.0, Some(3.5))];
        let mut refusals = Refusals::default();
        plan_cell(&batch(Some("v2"), &rows), &held, false, 99, &mut refusals);
        assert_eq!(refusals.conflicts.len(), 1);
        assert_eq!(refusals.conflicts[0].field, "reference_score");
        let mut refusals = Refusals::default();
        let plan = plan_cell(&batch(Some("v2"), &rows), &held, true, 99, &mut refusals);
        assert!(refusals.is_empty());
        assert_eq!(plan.new_references, [(ItemId::parse("x").unwrap(), 3.5)]);
        assert_eq!(plan.replaced[0].1, 99, "new to v2: created now");
    }

    #[test]
    fn covariates_are_part_of_a_row_and_a_re_scored_row_takes_its_items() {
        let length = |x: f64| {
            Covariates::from([(crate::domain::CovariateName::parse("length").unwrap(), x)])
        };
        let mut held = stored("x", "", 2.0, 3.0, 10);
        held.covariates = length(812.0);
        let held = [held];
        let with = |x: f64, version: Option<&str>, y: Option<f64>| {
            let mut b = batch(version, &[("x", 2.0, y)]);
            b.anchors[0].group = Some(GroupName::parse("sys-a").unwrap());
            b.anchors[0].covariates = length(x);
            b
        };
        // The same length: unchanged. Another: a conflict that says what differs.
        let mut refusals = Refusals::default();
        let plan = plan_cell(
            &with(812.0, None, Some(3.0)),
            &held,
            false,
            99,
            &mut refusals,
        );
        assert!(refusals.is_empty(), "{refusals:?}");
        assert_eq!(plan.unchanged, 1);
        plan_cell(
            &with(900.0, None, Some(3.0)),
            &held,
            false,
            99,
            &mut refusals,
        );
        assert_eq!(refusals.conflicts.len(), 1);
        assert!(
            refusals.conflicts[0]
                .problem
                .contains("stored covariates {length: 812}, this batch's {length: 900}"),
            "{}",
            refusals.conflicts[0].problem
        );
        // Re-scored under v2 without covariates: it takes the item's.
        let mut refusals = Refusals::default();
        let mut rescored = batch(Some("v2"), &[("x", 4.0, None)]);
        rescored.anchors[0].covariates = Covariates::new();
        let plan = plan_cell(&rescored, &held, false, 99, &mut refusals);
        assert!(refusals.is_empty());
        assert_eq!(plan.fresh[0].covariates, length(812.0));
    }

    #[test]
    fn rows_with_no_reference_anywhere_refuse_the_batch_with_the_conflicts_listed_too() {
        let held = [stored("x", "", 2.0, 3.0, 10)];
        let mut refusals = Refusals::default();
        plan_cell(
            &batch(None, &[("x", 2.5, Some(3.0)), ("new", 1.0, None)]),
            &held,
            false,
            99,
            &mut refusals,
        );
        assert_eq!(refusals.missing.len(), 1);
        assert_eq!(refusals.missing[0].row, Some(2));
        assert_eq!(refusals.missing[0].field, "reference_score");
        assert_eq!(refusals.conflicts.len(), 1, "the conflict is listed too");

        let mut refusals = Refusals::default();
        plan_cell(
            &batch(None, &[("x", 2.5, Some(3.0))]),
            &held,
            false,
            99,
            &mut refusals,
        );
        assert!(refusals.missing.is_empty());
        assert_eq!(refusals.conflicts.len(), 1);
    }
}
