//! Ratings requests (`POST /v1/ratings`): a run of comparisons of one pairwise cell, read as a
//! comparison batch is (every row and field checked and named), with the answer's settings:
//! `baseline` (the system rated 0), `level`, `control` (covariates the ratings control
//! for, as Arena's style control does) and `target_half_width` (asks for a label plan).
//!
//! A pairwise panel's run carries each member's verdicts in a row's `verdicts` (`{member:
//! outcome}`) and `verdicts_swapped`, in place of `verdict` and `verdict_swapped`; the row is
//! then checked as a comparison whose verdict is the members' mean.

use std::collections::HashMap;

use serde_json::Value;

use crate::domain::covariates;
use crate::domain::pairwise::comparisons::{self, ComparisonBatch};
use crate::domain::{CovariateName, GroupName, JudgeName, Problem};

/// The settings beside the comparisons.
const SETTINGS: [&str; 4] = ["baseline", "level", "control", "target_half_width"];

/// The most comparisons one request may rate.
pub const MAX_RATED: usize = 500_000;

/// A checked ratings request.
#[derive(Debug, Clone)]
pub struct RatingsRequest {
    pub batch: ComparisonBatch,
    pub baseline: Option<GroupName>,
    pub level: f64,
    pub control: Vec<CovariateName>,
    /// The widest rating half-width wanted: the answer plans the labels that reach it.
    pub target_half_width: Option<f64>,
    /// A panel's run: each row's (from 1) members' verdicts and swapped verdicts, by name.
    pub members: HashMap<usize, MemberVerdicts>,
}

/// One panel comparison's verdicts: each member's verdict and swapped verdict, by name.
pub type MemberVerdicts = Vec<(JudgeName, f64, Option<f64>)>;

/// Takes each row's `verdicts` and `verdicts_swapped` out of `body`'s comparisons, putting
/// their mean in `verdict` (so that the row is checked as one judge's); problems name the row
/// and `verdicts.<member>`.
fn take_member_verdicts(
    body: &mut Value,
    problems: &mut Vec<Problem>,
) -> HashMap<usize, MemberVerdicts> {
    let mut out = HashMap::new();
    let Some(rows) = body.get_mut("comparisons").and_then(Value::as_array_mut) else {
        return out;
    };
    for (i, item) in rows.iter_mut().enumerate() {
        let row = i + 1;
        let Some(obj) = item.as_object_mut() else {
            continue;
        };
        let (verdicts, swapped) = (obj.remove("verdicts"), obj.remove("verdicts_swapped"));
        let Some(verdicts) = verdicts.filter(|v| !v.is_null()) else {
            if swapped.is_some_and(|s| !s.is_null()) {
                problems.push(Problem::at(
                    Some(row),
                    "verdicts_swapped",
                    "comes with verdicts ({member: verdict}): a panel's comparison names each member's verdicts",
                ));
            }
            continue;
        };
        for field in ["verdict", "verdict_swapped"] {
            if obj.contains_key(field) {
                problems.push(Problem::at(
                    Some(row),
                    field,
                    "give verdicts ({member: verdict}) for a panel or verdict for a judge, not both",
                ));
            }
        }
        let read = |v: &Value, field: &str, problems: &mut Vec<Problem>| {
            let Some(map) = v.as_object() else {
                problems.push(Problem::at(
                    Some(row),
                    field,
                    "must be an object {member: verdict}",
                ));
                return None;
            };
            map.iter()
                .filter_map(|(name, value)| {
                    let at = format!("{field}.{name}");
                    let judge = JudgeName::parse(name)
                        .map_err(|e| problems.push(Problem::at(Some(row), &at, e)))
                        .ok()?;
                    match comparisons::outcome_of(row, &at, Some(value)) {
                        Ok(Some(x)) => Some((judge, x)),
                        Ok(None) => None,
                        Err(p) => {
                            problems.push(p);
                            None
                        }
                    }
                })
                .collect::<Vec<_>>()
                .into()
        };
        let before = problems.len();
        let first = read(&verdicts, "verdicts", problems);
        let second = swapped
            .filter(|s| !s.is_null())
            .and_then(|s| read(&s, "verdicts_swapped", problems))
            .unwrap_or_default();
        let first = match first {
            Some(f) if !f.is_empty() => f,
            _ => {
                // An empty object, or one of nulls: nothing named what is wrong yet.
                if problems.len() == before {
                    problems.push(Problem::at(
                        Some(row),
                        "verdicts",
                        "give at least one member's verdict, as {member: verdict}",
                    ));
                }
                // The row's other fields are still checked, as one judge's row.
                obj.insert("verdict".into(), Value::from(0.5));
                continue;
            }
        };
        for (name, _) in &second {
            if !first.iter().any(|(m, _)| m == name) {
                problems.push(Problem::at(
                    Some(row),
                    &format!("verdicts_swapped.{name}"),
                    format!("{name} has a swapped verdict but no verdict in verdicts"),
                ));
            }
        }
        let mean = first.iter().map(|(_, x)| x).sum::<f64>() / first.len() as f64;
        obj.insert("verdict".into(), Value::from(mean));
        out.insert(
            row,
            first
                .into_iter()
                .map(|(m, x)| {
                    let s = second.iter().find(|(n, _)| *n == m).map(|(_, s)| *s);
                    (m, x, s)
                })
                .collect(),
        );
    }
    out
}

/// Reads and checks the body; every problem at once.
pub fn parse(mut body: Value) -> Result<RatingsRequest, Vec<Problem>> {
    let Some(obj) = body.as_object_mut() else {
        return Err(vec![Problem::at(
            None,
            "body",
            "must be a JSON object with judge, rubric and comparisons",
        )]);
    };
    let mut problems = Vec::new();
    // The settings come out of the body; what is left is a comparison batch's envelope.
    let settings: Vec<Option<Value>> = SETTINGS.iter().map(|k| obj.remove(*k)).collect();
    let [baseline, level, controlled, target] = [0, 1, 2, 3].map(|i| settings[i].as_ref());
    let baseline = parse_baseline(baseline, &mut problems);
    let level = number(level, |l| (0.5..=0.999).contains(&l))
        .map_err(|v| format!("must be a number in [0.5, 0.999]; got {v}"));
    let level = ok(&mut problems, "level", level).flatten().unwrap_or(0.95);
    let target = number(target, |w| w > 0.0 && w.is_finite())
        .map_err(|v| format!("must be a positive number (log-odds); got {v}"));
    let target_half_width = ok(&mut problems, "target_half_width", target).flatten();
    let control = parse_control(controlled, &mut problems);
    let members = take_member_verdicts(&mut body, &mut problems);
    let batch = the_batch(&body, problems)?;
    let mut problems = Vec::new();
    for (c, &row) in batch.comparisons.iter().zip(&batch.rows) {
        for name in &control {
            if !c.covariates.contains_key(name) {
                problems.push(Problem::at(
                    Some(row),
                    &covariates::field_of(name.as_str()),
                    format!("is missing: the ratings control for {name} (control), so every comparison carries it"),
                ));
            }
        }
    }
    if let Some(b) = &baseline
        && !batch.comparisons.iter().any(|c| &c.a == b || &c.b == b)
    {
        problems.push(Problem::at(
            None,
            "baseline",
            format!("{b} is in no comparison of the run"),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(RatingsRequest {
        batch,
        baseline,
        level,
        control,
        target_half_width,
        members,
    })
}

/// A setting's number where `valid`; `Err` with the value sent where not; `Ok(None)` where
/// absent or null.
fn number(v: Option<&Value>, valid: impl Fn(f64) -> bool) -> Result<Option<f64>, Value> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if valid(x) => Ok(Some(x)),
            _ => Err(v.clone()),
        },
    }
}

/// The value, or `None` with the problem at `field` added to `problems`.
fn ok<T>(problems: &mut Vec<Problem>, field: &str, r: Result<T, String>) -> Option<T> {
    r.map_err(|e| problems.push(Problem::at(None, field, e)))
        .ok()
}

/// The system rated 0, where one is named.
fn parse_baseline(v: Option<&Value>, problems: &mut Vec<Problem>) -> Option<GroupName> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => ok(problems, "baseline", GroupName::parse(s)),
        Some(_) => {
            problems.push(Problem::at(None, "baseline", "must be a system's name"));
            None
        }
    }
}

/// The covariates the ratings control for, each named once.
fn parse_control(v: Option<&Value>, problems: &mut Vec<Problem>) -> Vec<CovariateName> {
    let mut control = Vec::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Array(names)) => {
            for (i, n) in names.iter().enumerate() {
                let field = format!("control[{i}]");
                match n.as_str().map(|s| covariates::check_name(None, s)) {
                    Some(Ok(name)) if !control.contains(&name) => control.push(name),
                    Some(Ok(name)) => {
                        problems.push(Problem::at(None, &field, format!("{name} is named twice")))
                    }
                    Some(Err(p)) => problems.push(Problem::at(None, &field, p.problem)),
                    None => problems.push(Problem::at(None, &field, "must be a covariate's name")),
                }
            }
        }
        Some(_) => problems.push(Problem::at(
            None,
            "control",
            "must be an array of covariate names",
        )),
    }
    control
}

/// The run as one comparison batch, or every problem (`problems`, the settings', first). A
/// field the envelope lacks is named against the ratings request's fields (the settings were
/// taken out before the comparisons were read).
fn the_batch(body: &Value, mut problems: Vec<Problem>) -> Result<ComparisonBatch, Vec<Problem>> {
    let batches =
        comparisons::rows_from_json(body).and_then(|rows| comparisons::validate(rows, MAX_RATED));
    match batches {
        Ok(mut batches) if batches.len() == 1 && problems.is_empty() => Ok(batches.remove(0)),
        Ok(_) => Err(problems),
        Err(more) => {
            let fields: Vec<&str> = ["judge", "rubric", "judge_version", "comparisons"]
                .into_iter()
                .chain(SETTINGS)
                .collect();
            problems.extend(more.into_iter().map(|p| {
                if p.row.is_none()
                    && p.problem
                        .starts_with("is not a field of the comparison batch")
                {
                    Problem::at(
                        None,
                        &p.field,
                        format!(
                            "is not a field of a ratings request (its fields: {})",
                            fields.join(", ")
                        ),
                    )
                } else {
                    p
                }
            }));
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(body: Value) -> Vec<(Option<usize>, String)> {
        parse(body)
            .expect_err("refused")
            .into_iter()
            .map(|p| (p.row, p.field))
            .collect()
    }

    #[test]
    fn a_run_is_read_with_its_settings_and_every_bad_field_named() {
        let ok = parse(json!({
            "judge": "gpt-4o", "rubric": "overall", "baseline": "y", "level": 0.9,
            "control": ["length"],
            "comparisons": [
                {"item_id": "p1", "a": "x", "b": "y", "verdict": "a", "covariates": {"length": 0.2}},
                {"item_id": "p2", "a": "y", "b": "x", "verdict": "tie", "preference": "b",
                 "covariates": {"length": -0.1}}
            ]
        }))
        .expect("a good run");
        assert_eq!(ok.batch.comparisons.len(), 2);
        assert_eq!(ok.batch.comparisons[1].verdict, 0.5);
        assert_eq!(ok.batch.comparisons[1].preference, Some(0.0));
        assert_eq!(ok.level, 0.9);
        assert_eq!(ok.baseline.as_ref().map(|b| b.as_str()), Some("y"));
        // A missing control covariate, an unknown baseline, a bad level and a bad verdict are
        // all named, by row where they have one.
        let named = fields(json!({
            "judge": "gpt-4o", "rubric": "overall", "baseline": "z", "level": 2,
            "control": ["length"],
            "comparisons": [
                {"item_id": "p1", "a": "x", "b": "y", "verdict": "a", "covariates": {"length": 0.2}},
                {"item_id": "p2", "a": "y", "b": "x", "verdict": "maybe"}
            ]
        }));
        assert!(named.contains(&(None, "level".into())), "{named:?}");
        assert!(named.contains(&(Some(2), "verdict".into())), "{named:?}");
        let named = fields(json!({
            "judge": "gpt-4o", "rubric": "overall", "baseline": "z", "control": ["length"],
            "comparisons": [
                {"item_id": "p1", "a": "x", "b": "y", "verdict": "a", "covariates": {"length": 0.2}},
                {"item_id": "p2", "a": "y", "b": "x", "verdict": "b"}
            ]
        }));
        assert_eq!(
            named,
            vec![
                (Some(2), "covariates.length".into()),
                (None, "baseline".into())
            ]
        );
    }

    #[test]
    fn a_panels_row_is_read_from_verdicts_and_each_bad_member_named_once() {
        let ok = parse(json!({
            "judge": "jury", "rubric": "overall",
            "comparisons": [{"item_id": "p1", "a": "x", "b": "y",
                             "verdicts": {"m1": "a", "m2": 0.0}, "verdicts_swapped": {"m1": "b"}}]
        }))
        .expect("a panel's row");
        // Checked as one judge's row whose verdict is the members' mean.
        assert_eq!(ok.batch.comparisons[0].verdict, 0.5);
        let mut members = ok.members[&1].clone();
        members.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<(&str, f64, Option<f64>)> = members
            .iter()
            .map(|(m, v, s)| (m.as_str(), *v, *s))
            .collect();
        assert_eq!(names, [("m1", 1.0, Some(0.0)), ("m2", 0.0, None)]);
        let named = fields(json!({
            "judge": "jury", "rubric": "overall",
            "comparisons": [
                {"item_id": "p1", "a": "x", "b": "y", "verdicts": "a"},
                {"item_id": "p2", "a": "x", "b": "y", "verdicts": {}},
                {"item_id": "p2n", "a": "x", "b": "y", "verdicts": {"m1": null}},
                {"item_id": "p3", "a": "x", "b": "y", "verdicts": {"m1": "maybe"}},
                {"item_id": "p4", "a": "x", "b": "y", "verdicts": {"m1": "a"}, "verdict": "a"},
                {"item_id": "p5", "a": "x", "b": "y", "verdicts": {"m1": "a"}, "verdicts_swapped": {"m2": "a"}},
                {"item_id": "p6", "a": "x", "b": "y", "verdict": "a", "verdicts_swapped": {"m2": "a"}}
            ]
        }));
        assert_eq!(
            named,
            vec![
                (Some(1), "verdicts".into()),
                (Some(2), "verdicts".into()),
                (Some(3), "verdicts".into()),
                (Some(4), "verdicts.m1".into()),
                (Some(5), "verdict".into()),
                (Some(6), "verdicts_swapped.m2".into()),
                (Some(7), "verdicts_swapped".into()),
            ]
        );
    }
}
