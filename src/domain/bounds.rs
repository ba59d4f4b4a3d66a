//! Numeric bounds checked against a type's own OpenAPI schema, so that a range is stated once,
//! in the `#[schema(...)]` attribute the API document shows, and enforced from there.

use serde_json::Value;

use super::Problem;
use judgecal_stats::method::SchemaSet;

/// The problems of `value` (a serialised options object) against the bounds of `schema`; each
/// problem names its field as `prefix.field` (nested objects as `prefix.outer.inner`).
pub fn check(value: &Value, schema: &SchemaSet, prefix: &str) -> Vec<Problem> {
    let (_, root, refs) = schema;
    let refs: Vec<(String, Value)> = refs
        .iter()
        .map(|(name, s)| (name.clone(), serde_json::to_value(s).unwrap_or_default()))
        .collect();
    let mut problems = Vec::new();
    walk(
        value,
        &serde_json::to_value(root).unwrap_or_default(),
        &refs,
        prefix,
        &mut problems,
    );
    problems
}

fn resolve<'a>(schema: &'a Value, refs: &'a [(String, Value)]) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap_or(r);
            refs.iter()
                .find(|(n, _)| n == name)
                .map_or(schema, |(_, s)| s)
        }
        None => schema,
    }
}

fn walk(
    value: &Value,
    schema: &Value,
    refs: &[(String, Value)],
    field: &str,
    out: &mut Vec<Problem>,
) {
    let schema = resolve(schema, refs);
    if let (Some(x), false) = (value.as_f64(), value.is_null()) {
        let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
        let broken = [
            bound("minimum")
                .filter(|&b| x < b)
                .map(|b| format!("at least {b}")),
            bound("maximum")
                .filter(|&b| x > b)
                .map(|b| format!("at most {b}")),
            bound("exclusiveMinimum")
                .filter(|&b| x <= b)
                .map(|b| format!("greater than {b}")),
            bound("exclusiveMaximum")
                .filter(|&b| x >= b)
                .map(|b| format!("less than {b}")),
        ];
        let broken: Vec<String> = broken.into_iter().flatten().collect();
        if !broken.is_empty() {
            out.push(Problem::at(
                None,
                field,
                format!("must be {}; got {x}", broken.join(" and ")),
            ));
        }
    }
    if let (Some(object), Some(properties)) = (
        value.as_object(),
        schema.get("properties").and_then(Value::as_object),
    ) {
        for (key, v) in object {
            if let Some(s) = properties.get(key) {
                walk(v, s, refs, &format!("{field}.{key}"), out);
            }
        }
    }
    // Schemas composed of alternatives (an optional nested object): check each that applies.
    for key in ["allOf", "oneOf", "anyOf"] {
        for s in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !s.get("type").is_some_and(|t| t == "null") {
                walk(value, s, refs, field, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use judgecal_stats::Method;

    #[test]
    fn bounds_come_from_the_schema_and_name_the_field() {
        let schema = Method::Bayes.options_schema();
        let ok = Method::Bayes.default_options().to_json();
        assert!(check(&ok, &schema, "options").is_empty());
        let mut bad = ok.clone();
        bad["draws"] = 5.into();
        bad["priors"]["alpha_sd"] = 0.0.into();
        let problems = check(&bad, &schema, "options");
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            ["options.draws", "options.priors.alpha_sd"],
            "{problems:?}"
        );
        assert!(problems[0].problem.contains("at least 10"), "{problems:?}");
        // An optional field is checked when present.
        let mut flow = Method::Flow.default_options().to_json();
        flow["early_stopping"] = 0.7.into();
        let problems = check(&flow, &Method::Flow.options_schema(), "options");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "options.early_stopping");
    }
}
