//! Panels: a named, ordered set of judges whose scores of one item are fused into one
//! calibrated score. A panel's name serves wherever a judge's does.

use std::collections::HashMap;

use super::{Anchor, GroupName, JudgeName, Problem, RubricName};
use judgecal_stats::panel::MAX_MEMBERS;

/// One panel item's scores: each member's score, by name.
pub type MemberScores = Vec<(JudgeName, f64)>;

/// Panel items' `scores` objects, checked: member names valid, scores finite, at least one
/// member per item. Problems name the row (from 1) and `{field}` or `{field}.{member}`.
pub fn parse_member_scores(
    items: Vec<std::collections::BTreeMap<String, f64>>,
    field: &str,
    problems: &mut Vec<Problem>,
) -> Vec<MemberScores> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| member_scores(Some(i + 1), field, item, problems))
        .collect()
}

/// One panel item's `scores` object, as [`parse_member_scores`] checks it.
pub fn member_scores(
    row: Option<usize>,
    field: &str,
    item: std::collections::BTreeMap<String, f64>,
    problems: &mut Vec<Problem>,
) -> MemberScores {
    if item.is_empty() {
        problems.push(Problem::at(
            row,
            field,
            "give at least one member's score, as {member: score}",
        ));
    }
    item.into_iter()
        .filter_map(|(name, score)| {
            // The field's name is built only for a problem: a batch has 100,000s.
            let at = || format!("{field}.{name}");
            if super::bounded(score).is_err() {
                problems.push(Problem::at(
                    row,
                    &at(),
                    "must be a finite number within ±1e9",
                ));
            }
            JudgeName::parse(&name)
                .map_err(|e| problems.push(Problem::at(row, &at(), e)))
                .ok()
                .map(|j| (j, score))
        })
        .collect()
}

/// A panel as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panel {
    pub name: JudgeName,
    /// Its members, in order: the order of the fused model's weights.
    pub judges: Vec<JudgeName>,
    pub created_at_ms: i64,
}

/// A panel to define, parsed at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPanel {
    pub name: JudgeName,
    pub judges: Vec<JudgeName>,
}

impl NewPanel {
    /// Checks the name and the members: 2 to 12 distinct judges, none the panel itself.
    pub fn parse(name: &str, judges: &[String]) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let name = JudgeName::parse(name)
            .map_err(|e| problems.push(Problem::at(None, "name", e)))
            .ok();
        if !(2..=MAX_MEMBERS).contains(&judges.len()) {
            problems.push(Problem::at(
                None,
                "judges",
                format!(
                    "a panel has 2 to {MAX_MEMBERS} judges; got {}",
                    judges.len()
                ),
            ));
        }
        let mut members: Vec<JudgeName> = Vec::with_capacity(judges.len());
        for (i, raw) in judges.iter().enumerate() {
            let field = format!("judges[{i}]");
            match JudgeName::parse(raw) {
                Err(e) => problems.push(Problem::at(None, &field, e)),
                Ok(j) if Some(&j) == name.as_ref() => problems.push(Problem::at(
                    None,
                    &field,
                    "a panel cannot be its own member",
                )),
                Ok(j) if members.contains(&j) => problems.push(Problem::at(
                    None,
                    &field,
                    format!("{j} is listed twice; each judge once"),
                )),
                Ok(j) => members.push(j),
            }
        }
        match name {
            Some(name) if problems.is_empty() => Ok(Self {
                name,
                judges: members,
            }),
            _ => Err(problems),
        }
    }
}

/// One rubric's anchors as the panel sees them: the items every member's cell holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Joined {
    pub rubric: RubricName,
    /// Every member's score (in member order) and the reference, in item order.
    pub rows: Vec<(Vec<f64>, f64)>,
    /// Each item's group, where a member's anchor names one.
    pub groups: Vec<Option<GroupName>>,
    /// The members' anchors of those items, member after member: the snapshot's identity.
    pub anchors: Vec<Anchor>,
    /// Each member's anchors in the rubric before the join (in member order): how much the
    /// join kept of each.
    pub member_anchors: Vec<usize>,
}

/// Joins the members' anchors (`members[m]`: member m's anchors per rubric, each in item
/// order) on item id, per rubric every member holds. The references of an item must agree
/// across members; every item where they do not is named, with the members as `names` gives
/// them (judge and judge version).
pub fn join(
    names: &[String],
    members: &[Vec<(RubricName, Vec<Anchor>)>],
) -> Result<Vec<Joined>, Vec<Problem>> {
    let Some((first, others)) = members.split_first() else {
        return Ok(Vec::new());
    };
    let mut problems = Vec::new();
    let mut joined = Vec::new();
    for (rubric, anchors) in first {
        let cells: Option<Vec<HashMap<&str, &Anchor>>> = others
            .iter()
            .map(|m| {
                m.iter().find(|(r, _)| r == rubric).map(|(_, a)| {
                    a.iter()
                        .map(|a| (a.item_id.as_str(), a))
                        .collect::<HashMap<_, _>>()
                })
            })
            .collect();
        let Some(cells) = cells else { continue };
        let mut out = Joined {
            rubric: rubric.clone(),
            rows: Vec::new(),
            groups: Vec::new(),
            anchors: Vec::new(),
            member_anchors: std::iter::once(anchors.len())
                .chain(cells.iter().map(HashMap::len))
                .collect(),
        };
        let mut held: Vec<Vec<&Anchor>> = Vec::new();
        for a in anchors {
            let Some(rest) = cells
                .iter()
                .map(|c| c.get(a.item_id.as_str()).copied())
                .collect::<Option<Vec<&Anchor>>>()
            else {
                continue;
            };
            for (m, b) in rest.iter().enumerate() {
                if (b.reference_score - a.reference_score).abs() > 1e-9 {
                    problems.push(Problem::at(
                        None,
                        "anchors",
                        format!(
                            "rubric {rubric}, item {:?}: reference {} from member {}'s anchors, {} from member {}'s; correct one and retrain",
                            a.item_id.as_str(),
                            a.reference_score,
                            names[0],
                            b.reference_score,
                            names[m + 1]
                        ),
                    ));
                }
            }
            let mut all = vec![a];
            all.extend(rest);
            out.rows.push((
                all.iter().map(|a| a.judge_score).collect(),
                a.reference_score,
            ));
            out.groups.push(all.iter().find_map(|a| a.group.clone()));
            held.push(all);
        }
        for m in 0..members.len() {
            out.anchors.extend(held.iter().map(|all| all[m].clone()));
        }
        joined.push(out);
    }
    if problems.is_empty() {
        Ok(joined)
    } else {
        Err(problems)
    }
}

/// A "which judges" question, parsed at the edge.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    pub panel: JudgeName,
    pub rubric: RubricName,
    pub run_size: usize,
    pub half_width: f64,
    pub level: f64,
    /// Cost per item of the members named; the others cost 1.
    pub costs: Vec<(JudgeName, f64)>,
    pub label_cost: f64,
}

impl PlanRequest {
    #[allow(clippy::too_many_arguments)]
    pub fn parse(
        panel: &str,
        rubric: &str,
        run_size: i64,
        half_width: f64,
        level: Option<f64>,
        costs: std::collections::BTreeMap<String, f64>,
        label_cost: f64,
    ) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let panel = JudgeName::parse(panel)
            .map_err(|e| problems.push(Problem::at(None, "name", e)))
            .ok();
        let rubric = RubricName::parse(rubric)
            .map_err(|e| problems.push(Problem::at(None, "rubric", e)))
            .ok();
        if !(1..=100_000_000).contains(&run_size) {
            problems.push(Problem::at(None, "run_size", "1 to 100,000,000 items"));
        }
        if !(half_width.is_finite() && half_width > 0.0) {
            problems.push(Problem::at(
                None,
                "target_half_width",
                "must be a positive number",
            ));
        }
        let level = level.unwrap_or(0.95);
        if !(0.5..=0.999).contains(&level) {
            problems.push(Problem::at(None, "level", "must lie in [0.5, 0.999]"));
        }
        if !(label_cost.is_finite() && label_cost >= 0.0) {
            problems.push(Problem::at(None, "label_cost", "must be a number ≥ 0"));
        }
        let costs = costs
            .into_iter()
            .filter_map(|(name, cost)| {
                let field = format!("costs.{name}");
                if !(cost.is_finite() && cost >= 0.0) {
                    problems.push(Problem::at(None, &field, "must be a number ≥ 0"));
                }
                JudgeName::parse(&name)
                    .map_err(|e| problems.push(Problem::at(None, &field, e)))
                    .ok()
                    .map(|j| (j, cost))
            })
            .collect();
        match (panel, rubric) {
            (Some(panel), Some(rubric)) if problems.is_empty() => Ok(Self {
                panel,
                rubric,
                run_size: run_size as usize,
                half_width,
                level,
                costs,
                label_cost,
            }),
            _ => Err(problems),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchor(item: &str, j: f64, y: f64) -> Anchor {
        Anchor {
            item_id: crate::domain::ItemId::parse(item).unwrap(),
            judge_score: j,
            reference_score: y,
            group: None,
            rater: None,
            judge_version: None,
            reference_at_ms: None,
            repeats: Vec::new(),
            covariates: Default::default(),
        }
    }

    #[test]
    fn members_join_on_the_items_they_all_hold_and_disagreeing_references_are_named() {
        let names = ["a".to_owned(), "b (judge version v2)".to_owned()];
        let (r1, r2) = (
            RubricName::parse("r1").unwrap(),
            RubricName::parse("r2").unwrap(),
        );
        let a = vec![
            (
                r1.clone(),
                vec![anchor("x", 1.0, 3.0), anchor("y", 2.0, 4.0)],
            ),
            (r2.clone(), vec![anchor("x", 1.0, 3.0)]),
        ];
        let b = vec![(
            r1.clone(),
            vec![anchor("y", 5.0, 4.0), anchor("z", 1.0, 1.0)],
        )];
        let joined = join(&names, &[a.clone(), b]).unwrap();
        assert_eq!(joined.len(), 1, "only r1 is held by both");
        assert_eq!(joined[0].rows, vec![(vec![2.0, 5.0], 4.0)]);
        assert_eq!(joined[0].anchors.len(), 2);
        assert_eq!(joined[0].member_anchors, [2, 2]);
        let clash = vec![(r1, vec![anchor("x", 2.0, 3.5), anchor("y", 5.0, 4.0)])];
        let problems = join(&names, &[a, clash]).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].problem.contains("item \"x\""), "{problems:?}");
        assert!(
            problems[0].problem.contains("b (judge version v2)"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_panel_names_two_to_twelve_distinct_judges_other_than_itself() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let ok = NewPanel::parse("jury", &names(&["a", "b", "c"])).unwrap();
        assert_eq!(ok.judges.len(), 3);
        let fields = |r: Result<NewPanel, Vec<Problem>>| -> Vec<String> {
            r.unwrap_err().into_iter().map(|p| p.field).collect()
        };
        assert_eq!(fields(NewPanel::parse("jury", &names(&["a"]))), ["judges"]);
        assert_eq!(
            fields(NewPanel::parse("jury", &names(&["a", "a", "jury", "b c"]))),
            ["judges[1]", "judges[2]", "judges[3]"]
        );
        let twelve: Vec<String> = (0..12).map(|k| format!("m{k}")).collect();
        assert_eq!(NewPanel::parse("jury", &twelve).unwrap().judges.len(), 12);
        let mut thirteen = twelve.clone();
        thirteen.push("m12".into());
        assert_eq!(fields(NewPanel::parse("", &thirteen)), ["name", "judges"]);
    }
}
