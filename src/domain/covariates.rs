//! Covariates: numeric inputs beside the judge score (a response's length, a count of its
//! markdown), carried by anchor rows and by the items to correct. Read at the edge: names follow
//! the name rule, values are finite, and every problem names its row and `covariates.<name>`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{CovariateName, Problem};

/// An item's covariates by name; empty where it carries none.
pub type Covariates = BTreeMap<CovariateName, f64>;

/// The JSON field of an anchor row or an item that holds its covariates.
pub const FIELD: &str = "covariates";
/// A CSV column `covariate.<name>` holds one covariate.
pub const CSV_PREFIX: &str = "covariate.";
/// The most covariates one row may carry.
pub const MAX_PER_ROW: usize = 16;
/// The most covariates one training considers beside the judge score: each enters raw, logged
/// or not at all, so the candidates number 3 to this power.
pub const MAX_FITTED: usize = 4;
/// The largest magnitude a covariate may take.
const MAX_ABS: f64 = 1e12;

/// The field a problem with covariate `name` is reported at.
pub fn field_of(name: &str) -> String {
    format!("{FIELD}.{name}")
}

/// One covariate's value, checked: finite and within ±1e12.
pub fn check_value(row: Option<usize>, name: &str, x: f64) -> Result<f64, Problem> {
    if x.is_finite() && x.abs() <= MAX_ABS {
        Ok(x)
    } else {
        Err(Problem::at(
            row,
            &field_of(name),
            format!(
                "must be a finite number within ±1e12, got {}",
                super::shown(x)
            ),
        ))
    }
}

/// A covariate's name, checked.
pub fn check_name(row: Option<usize>, name: &str) -> Result<CovariateName, Problem> {
    CovariateName::parse(name).map_err(|e| Problem::at(row, &field_of(name), e))
}

/// A JSON `covariates` value (absent or null: none): an object of name → number. Problems go
/// to `problems`; the covariates that passed are returned.
pub fn from_json(
    row: Option<usize>,
    value: Option<&Value>,
    problems: &mut Vec<Problem>,
) -> Covariates {
    let mut out = Covariates::new();
    let object = match value {
        None | Some(Value::Null) => return out,
        Some(Value::Object(o)) => o,
        Some(_) => {
            problems.push(Problem::at(
                row,
                FIELD,
                "must be an object of name → number, e.g. {\"length\": 812}",
            ));
            return out;
        }
    };
    if object.len() > MAX_PER_ROW {
        problems.push(Problem::at(
            row,
            FIELD,
            format!("{} covariates; at most {MAX_PER_ROW}", object.len()),
        ));
    }
    for (name, v) in object {
        let value = match v.as_f64() {
            Some(x) => check_value(row, name, x),
            None => Err(Problem::at(
                row,
                &field_of(name),
                format!("must be a number, not {}", kind(v)),
            )),
        };
        match (check_name(row, name), value) {
            (Ok(n), Ok(x)) => {
                out.insert(n, x);
            }
            (n, x) => problems.extend(n.err().into_iter().chain(x.err())),
        }
    }
    out
}

/// Covariates sent as an object of name → number (an item's, or a request's `hold`), checked:
/// each problem at `row` and `{field}.{name}`.
pub fn from_map(
    row: Option<usize>,
    field: &str,
    raw: &std::collections::BTreeMap<String, f64>,
    problems: &mut Vec<Problem>,
) -> Covariates {
    raw.iter()
        .filter_map(|(name, &x)| {
            let value = x.is_finite() && x.abs() <= MAX_ABS;
            match (CovariateName::parse(name), value) {
                (Ok(n), true) => Some((n, x)),
                (n, _) => {
                    let at = format!("{field}.{name}");
                    if let Err(e) = n {
                        problems.push(Problem::at(row, &at, e));
                    }
                    if !value {
                        problems.push(Problem::at(
                            row,
                            &at,
                            format!(
                                "must be a finite number within ±1e12, got {}",
                                super::shown(x)
                            ),
                        ));
                    }
                    None
                }
            }
        })
        .collect()
}

/// One covariate's value from a CSV cell's text.
pub fn from_text(row: usize, name: &str, text: &str) -> Result<f64, Problem> {
    let x = text.parse::<f64>().map_err(|_| {
        Problem::at(
            Some(row),
            &field_of(name),
            format!("{text:?} is not a number"),
        )
    })?;
    check_value(Some(row), name, x)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
        Value::Number(_) => "a number",
    }
}

/// As the store keeps them: a JSON object, or nothing where there are none.
pub fn to_stored(c: &Covariates) -> Option<String> {
    (!c.is_empty()).then(|| {
        let object: serde_json::Map<String, Value> = c
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), Value::from(*v)))
            .collect();
        Value::Object(object).to_string()
    })
}

/// Read back from the store.
pub fn from_stored(raw: Option<&str>) -> Result<Covariates, String> {
    match raw {
        None | Some("") => Ok(Covariates::new()),
        Some(text) => serde_json::from_str(text).map_err(|e| format!("stored covariates: {e}")),
    }
}

/// `{length: 812, markdown: 3}`, or `(none)`.
pub fn describe(c: &Covariates) -> String {
    if c.is_empty() {
        return "(none)".into();
    }
    let parts: Vec<String> = c.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_json_object_is_read_with_each_problem_at_its_name() {
        let mut problems = Vec::new();
        let good = from_json(
            Some(3),
            Some(&json!({"length": 812, "md": 2.5})),
            &mut problems,
        );
        assert!(problems.is_empty());
        assert_eq!(good.len(), 2);
        assert_eq!(good[&CovariateName::parse("length").unwrap()], 812.0);
        let bad = from_json(
            Some(4),
            Some(&json!({"length": "long", "bad name": 1, "ok": 1})),
            &mut problems,
        );
        assert_eq!(bad.len(), 1);
        let fields: Vec<(Option<usize>, &str)> =
            problems.iter().map(|p| (p.row, p.field.as_str())).collect();
        assert_eq!(
            fields,
            vec![
                (Some(4), "covariates.bad name"),
                (Some(4), "covariates.length")
            ]
        );
        problems.clear();
        from_json(Some(5), Some(&json!([1, 2])), &mut problems);
        assert_eq!(problems[0].field, "covariates");
        assert!(from_text(2, "length", "1e400").is_err());
        assert_eq!(from_text(2, "length", "40").unwrap(), 40.0);
    }

    #[test]
    fn a_map_of_covariates_names_each_problem_under_its_field() {
        let mut problems = Vec::new();
        let raw = std::collections::BTreeMap::from([
            ("length".to_owned(), 400.0),
            ("bad name".to_owned(), 1.0),
            ("md".to_owned(), f64::INFINITY),
        ]);
        let got = from_map(Some(7), "a.covariates", &raw, &mut problems);
        assert_eq!(got.len(), 1);
        let named: Vec<(Option<usize>, &str)> =
            problems.iter().map(|p| (p.row, p.field.as_str())).collect();
        assert_eq!(
            named,
            [
                (Some(7), "a.covariates.bad name"),
                (Some(7), "a.covariates.md")
            ]
        );
    }

    #[test]
    fn stored_covariates_read_back_exactly_and_none_is_stored_as_nothing() {
        let mut c = Covariates::new();
        assert_eq!(to_stored(&c), None);
        c.insert(CovariateName::parse("length").unwrap(), 0.1 + 0.2);
        c.insert(CovariateName::parse("md").unwrap(), -3.0);
        let stored = to_stored(&c).unwrap();
        assert_eq!(from_stored(Some(&stored)).unwrap(), c);
        assert_eq!(from_stored(None).unwrap(), Covariates::new());
        assert_eq!(describe(&c), "{length: 0.30000000000000004, md: -3}");
    }
}
