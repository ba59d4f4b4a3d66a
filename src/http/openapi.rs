//! The OpenAPI document, generated from the handlers' annotations. `openapi.yaml` at the top
//! of the repository is this document; a test fails when they differ.

use serde_json::{Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{anchors, calibration, correct, error, estimate, ops, rubrics};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "judgecal",
        description = "De-biases LLM-as-a-judge scores. Labelling teams upload anchors (items with both a judge \
score and a trusted reference score) per (judge, rubric) cell; calibrators fitted on them correct new judge scores.\n\n\
Every error has the shape `{\"error\": {\"code\", \"message\", \"details\"}}`; `details` lists `{row, field, problem}`.\n\n\
Authentication: `Authorization: Bearer <key>`; keys carry scopes `ingest`, `correct`, `train`, `admin` (admin allows all).",
    ),
    paths(
        anchors::upload,
        anchors::list_cells,
        anchors::list_anchors,
        anchors::delete_anchor,
        rubrics::list_rubrics,
        rubrics::put_rubric,
        calibration::train,
        calibration::job,
        calibration::cancel,
        calibration::versions,
        calibration::activate,
        calibration::report,
        correct::correct,
        estimate::estimate,
        estimate::compare,
        ops::healthz,
        ops::readyz,
        ops::metrics,
    ),
    components(schemas(error::ErrorBody, error::ErrorDetail, error::ProblemDto)),
    modifiers(&BearerAuth, &Refusals),
    tags(
        (name = "anchors", description = "Anchor uploads and cells"),
        (name = "rubrics", description = "Rubric scales"),
        (name = "calibration", description = "Training jobs and calibrator versions"),
        (name = "correction", description = "Corrected scores with their uncertainty"),
        (name = "operations", description = "Health, readiness, metrics"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("An API key from `judgecal keys create --scope ...`"))
                    .build(),
            ),
        );
    }
}

/// What the handlers accept, which the annotations cannot say: the name rules of path
/// segments, and every refusal an operation can give (the extractors and the tower layers
/// answer 400, 413, 415, 422, 429 and 503 before a handler runs).
struct Refusals;

fn piece<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a well-formed OpenAPI piece")
}

impl Modify for Refusals {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let name = json!({
            "type": "string", "minLength": 1, "maxLength": 64,
            "pattern": "^[A-Za-z0-9][A-Za-z0-9._:-]*$",
        });
        for (path, item) in openapi.paths.paths.iter_mut() {
            let ops = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ];
            for op in ops.into_iter().flatten() {
                let has_body = op.request_body.is_some();
                let params = op.parameters.iter_mut().flatten();
                let mut takes_input = has_body;
                for p in params {
                    takes_input = true;
                    let RefOr::T(p) = p else {
                        continue;
                    };
                    let schema = match (p.name.as_str(), &p.parameter_in) {
                        ("judge" | "rubric", ParameterIn::Path) => name.clone(),
                        ("item_id", _) => json!({
                            "type": "string", "minLength": 1, "maxLength": 256,
                            "pattern": "^[^\\u0000-\\u001F\\u007F]+$",
                        }),
                        ("id", _) => json!({"type": "string", "format": "uuid"}),
                        ("version", _) => {
                            json!({"type": "integer", "format": "int64", "minimum": 1})
                        }
                        _ => continue,
                    };
                    p.schema = Some(piece(schema));
                }
                let responses = &mut op.responses.responses;
                let mut add = |status: &str, description: &str| {
                    responses.entry(status.to_owned()).or_insert_with(|| {
                        piece(json!({
                            "description": description,
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                        }))
                    });
                };
                if has_body {
                    add("400", "The body is not valid JSON");
                    add("413", "The body is over server.max_body_bytes");
                    add(
                        "415",
                        "The body's Content-Type is not one this operation reads",
                    );
                }
                if takes_input {
                    add(
                        "422",
                        "A path segment, query parameter or field is invalid (named in details)",
                    );
                }
                if path.starts_with("/v1/") {
                    add("401", "No API key, or an unknown one");
                    add("429", "Over server.max_concurrent_requests; retry later");
                    add("503", "Not answered within server.request_timeout_secs");
                }
            }
        }
    }
}

/// The document as YAML, as `judgecal openapi` prints it.
pub fn yaml() -> String {
    ApiDoc::openapi()
        .to_yaml()
        .expect("the generated document serialises")
}
