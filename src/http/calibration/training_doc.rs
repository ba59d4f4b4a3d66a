//! The schema of a training request, composed from the real option types.

use serde_json::{Value, json};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use crate::domain::training;
use judgecal_stats::Method;

/// The body of `POST /v1/judges/{judge}/calibrations`: one alternative per method, each with
/// its own options (every field optional; unknown fields are refused). A method's options are
/// the job's (`force`, `folds`, `holdout`, `seed`) and the method's own; `auto` takes its rule
/// and each candidate's options under the candidate's name.
pub struct TrainingRequestDoc;

fn merged(parts: &[&str], extra: Value) -> Value {
    // One object schema with the properties of the named component schemas.
    let sets = training::options_schemas();
    let mut properties = serde_json::Map::new();
    for name in parts {
        if let Some((_, schema, _)) = sets.iter().find(|(n, _, _)| n == name) {
            let schema = serde_json::to_value(schema).unwrap_or_default();
            if let Some(p) = schema.get("properties").and_then(Value::as_object) {
                properties.extend(p.clone());
            }
        }
    }
    if let Value::Object(extra) = extra {
        properties.extend(extra);
    }
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

fn request_schema() -> Value {
    let rubrics = json!({
        "type": ["array", "null"], "minItems": 1,
        "description": "Rubrics to train (default: every cell of the judge with at least jobs.min_anchors anchors). All rubrics of one job are fitted together and share strength.",
        "items": crate::http::schema::name_json(),
    });
    let mut judge_version =
        serde_json::to_value(crate::http::schema::judge_version()).unwrap_or_default();
    judge_version["description"] = json!(
        "Fit this judge version's anchors only (default: the judge's newest version with anchors, the one whose first anchor arrived last). Anchors of different judge versions are never fitted together."
    );
    let member_versions = json!({
        "type": ["object", "null"],
        "description": "A panel's: the judge version of a member's anchors to fit, by member (null: its anchors uploaded without a version). A member not named fits the anchors its unversioned requests are served by: its unversioned anchors where it has any, else its only judge version, else the one its active calibrations were trained on. The job's request shows every member's, resolved.",
        "additionalProperties": crate::http::schema::judge_version(),
    });
    let covariates = json!({
        "type": ["array", "null"], "maxItems": crate::domain::covariates::MAX_FITTED,
        "description": "Covariates the anchors carry (their `covariates`) to consider beside the judge score, e.g. [\"length\"]. Left out, the training considers those every anchor of the judge's fitted cells carries (the first 4 by name); `[]` fits the judge score alone. Each enters raw, logged or piecewise linear in its log, and only where it lowers held-out error in the rubric by more than 1% (the version's `covariates` report lists what was tried, the coefficients and their intervals); the corrector is then trained on the layer's score. Every anchor fitted must carry each one named. Where an unnamed covariate is kept in no rubric the version reads the judge score alone. A version whose layer reads a covariate corrects items that give it ({\"score\", \"covariates\"}); items sent without covariates are corrected by the same training's judge-score-only fit, warned `covariates_missing`.",
        "items": crate::http::schema::name_json(),
    });
    // Each alternative, its method and its options are titled (`BayesTraining`,
    // `BayesMethod`, `BayesTrainingOptions`) so that generated clients name them.
    let alternative = |method: &str, description: String, mut options: Value| {
        let title: String = method
            .split('_')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect();
        options["title"] = json!(format!("{title}TrainingOptions"));
        json!({
            "type": "object",
            "title": format!("{title}Training"),
            "description": description,
            "required": ["method"],
            "additionalProperties": false,
            "properties": {
                "method": {"type": "string", "enum": [method], "title": format!("{title}Method")},
                "rubrics": rubrics,
                "judge_version": judge_version,
                "member_versions": member_versions,
                "covariates": covariates,
                "options": options,
            },
        })
    };
    let mut alternatives: Vec<Value> = Method::ALL
        .iter()
        .map(|m| {
            let (name, _, _) = m.options_schema();
            alternative(
                m.as_str(),
                format!("{}: {}", m.as_str(), m.label()),
                merged(&["JobOptions", &name], json!({})),
            )
        })
        .collect();
    let candidates: serde_json::Map<String, Value> = Method::ALL
        .iter()
        .map(|m| {
            let (name, _, _) = m.options_schema();
            (
                m.as_str().to_owned(),
                json!({"$ref": format!("#/components/schemas/{name}")}),
            )
        })
        .collect();
    alternatives.push(alternative(
        "auto",
        "auto: every method on the same held-out folds, the winner served per cell".into(),
        merged(&["AutoSettings"], Value::Object(candidates)),
    ));
    json!({"oneOf": alternatives})
}

impl PartialSchema for TrainingRequestDoc {
    fn schema() -> RefOr<Schema> {
        serde_json::from_value(request_schema()).expect("a well-formed schema")
    }
}

impl ToSchema for TrainingRequestDoc {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        for (name, schema, refs) in training::options_schemas() {
            schemas.push((name, schema));
            schemas.extend(refs);
        }
    }
}
