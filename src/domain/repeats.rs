//! Repeats: further scores of one item by the same judge version (the judge re-asked), carried
//! by anchor rows and by the items of a run. Read at the edge: each a finite score, at most
//! [`MAX_PER_ITEM`], every problem naming its row and `repeats`. An anchor's `judge_score` is
//! the score its corrector is fitted on; its repeats measure the judge's within-item noise.

use serde_json::Value;

use super::Problem;
use super::raw::RawField;

/// The JSON field (and CSV column) that holds an item's further scores.
pub const FIELD: &str = "repeats";
/// In a CSV cell the scores are separated by this.
pub const CSV_SEPARATOR: char = ';';
/// The most further scores one item may carry.
pub const MAX_PER_ITEM: usize = 100;
/// The largest magnitude a score may take (as a run's scores).
const MAX_ABS: f64 = super::MAX_MAGNITUDE;

/// An item's further scores, checked: at most [`MAX_PER_ITEM`], each finite within ±1e9.
pub fn check(row: Option<usize>, field: &str, scores: Vec<f64>) -> Result<Vec<f64>, Problem> {
    if scores.len() > MAX_PER_ITEM {
        return Err(Problem::at(
            row,
            field,
            format!("{} scores; at most {MAX_PER_ITEM}", scores.len()),
        ));
    }
    match scores
        .iter()
        .position(|x| !(x.is_finite() && x.abs() <= MAX_ABS))
    {
        Some(i) => Err(Problem::at(
            row,
            field,
            format!(
                "score {} is {}: each must be a finite number within ±1e9",
                i + 1,
                super::shown(scores[i])
            ),
        )),
        None => Ok(scores),
    }
}

/// A JSON `repeats` value (absent or null: none), at `field`: an array of numbers.
pub fn from_json(
    row: Option<usize>,
    field: &str,
    value: Option<&Value>,
) -> Result<Vec<f64>, Problem> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(Problem::at(
                row,
                field,
                "must be an array of the item's further scores by the same judge version, e.g. [3, 4]",
            ));
        }
    };
    let scores = items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_f64().ok_or_else(|| {
                Problem::at(
                    row,
                    field,
                    format!("score {} must be a number, not {v}", i + 1),
                )
            })
        })
        .collect::<Result<Vec<f64>, Problem>>()?;
    check(row, field, scores)
}

/// A CSV `repeats` cell: scores separated by `;` (empty: none).
pub fn from_csv(row: usize, raw: &RawField) -> Result<Vec<f64>, Problem> {
    let text = match raw {
        RawField::Text(t) => t.trim(),
        _ => return Ok(Vec::new()),
    };
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let scores = text
        .split(CSV_SEPARATOR)
        .enumerate()
        .map(|(i, s)| {
            s.trim().parse::<f64>().map_err(|_| {
                Problem::at(
                    Some(row),
                    FIELD,
                    format!(
                        "score {} ({:?}) is not a number; separate scores with ';', e.g. 3;4;3",
                        i + 1,
                        s.trim()
                    ),
                )
            })
        })
        .collect::<Result<Vec<f64>, Problem>>()?;
    check(Some(row), FIELD, scores)
}

/// As the store keeps them: a JSON array, or NULL for none.
pub fn to_stored(repeats: &[f64]) -> Option<String> {
    (!repeats.is_empty()).then(|| serde_json::to_string(repeats).unwrap_or_default())
}

/// Stored repeats, read back.
pub fn from_stored(raw: Option<&str>) -> Result<Vec<f64>, serde_json::Error> {
    raw.map_or(Ok(Vec::new()), serde_json::from_str)
}

/// A run's items' repeats where any item carries some (an entry per item, empty for one that
/// gives none), each checked, its problem at its row and `{prefix}repeats`; refused where the
/// items carry one score each (`one_score`: a panel's items, or items with covariates).
pub fn of_run(
    prefix: &str,
    given: Vec<Option<Vec<f64>>>,
    one_score: bool,
    problems: &mut Vec<Problem>,
) -> Option<Vec<Vec<f64>>> {
    if given.iter().all(|r| r.as_ref().is_none_or(Vec::is_empty)) {
        return None;
    }
    let field = format!("{prefix}{FIELD}");
    let checked = given.into_iter().enumerate().map(|(i, r)| {
        let (row, r) = (Some(i + 1), r.unwrap_or_default());
        if one_score && !r.is_empty() {
            problems.push(Problem::at(
                row,
                &field,
                "repeats are for a judge's items without covariates (a panel's or a covariate version's items carry one score each)",
            ));
        }
        check(row, &field, r).unwrap_or_else(|p| {
            problems.push(p);
            Vec::new()
        })
    });
    Some(checked.collect())
}

/// One item's scores in all: its score and its repeats.
pub fn all(score: f64, repeats: &[f64]) -> Vec<f64> {
    std::iter::once(score)
        .chain(repeats.iter().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_read_checked_and_named_by_row() {
        assert_eq!(from_json(Some(1), FIELD, None).unwrap(), Vec::<f64>::new());
        let v = serde_json::json!([3, 4.5]);
        assert_eq!(from_json(Some(1), FIELD, Some(&v)).unwrap(), vec![3.0, 4.5]);
        let bad = serde_json::json!([3, "x"]);
        let p = from_json(Some(7), FIELD, Some(&bad)).unwrap_err();
        assert_eq!((p.row, p.field.as_str()), (Some(7), FIELD));
        assert!(p.problem.contains("score 2"), "{}", p.problem);
        let text = RawField::Text(" 3; 4 ;5".into());
        assert_eq!(from_csv(2, &text).unwrap(), vec![3.0, 4.0, 5.0]);
        let p = from_csv(3, &RawField::Text("3,4".into())).unwrap_err();
        assert!(p.problem.contains("';'"), "{}", p.problem);
        let many = serde_json::json!(vec![1.0; MAX_PER_ITEM + 1]);
        assert!(from_json(None, FIELD, Some(&many)).is_err());
        assert_eq!(
            from_stored(to_stored(&[2.0, 3.0]).as_deref()).unwrap(),
            vec![2.0, 3.0]
        );
        assert_eq!(to_stored(&[]), None);
    }
}
