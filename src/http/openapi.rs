//! The OpenAPI document, generated from the handlers' annotations. `openapi.yaml` at the top
//! of the repository is this document; a test fails when they differ.

use serde_json::{Value, json};
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{Modify, OpenApi, ToSchema};

use super::correct::CorrectRequest;
use super::error;
use super::runlevel::RunBody;
use super::runlevel::estimate::EstimateBody;
use super::runlevel::rank::RankRunBody;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "judgecal",
        description = "De-biases LLM-as-a-judge scores. Labelling teams upload anchors (items with both a judge \
score and a trusted reference score) per (judge, rubric) cell; calibrators fitted on them correct new judge scores.\n\n\
Every error has the shape `{\"error\": {\"code\", \"message\", \"details\"}}`; `details` lists `{row, field, problem}`.\n\n\
Authentication: `Authorization: Bearer <key>`; keys carry scopes `ingest`, `correct`, `train`, `metrics` (`GET /metrics` where `auth.protect_metrics` is on, and webhooks), `admin` (admin allows all).",
    ),
    components(schemas(error::ErrorBody, error::ErrorDetail, error::ProblemDto)),
    tags(
        (name = "anchors", description = "Anchor uploads and cells"),
        (name = "rubrics", description = "Rubric scales"),
        (name = "calibration", description = "Training jobs and calibrator versions"),
        (name = "correction", description = "Corrected scores with their uncertainty"),
        (name = "operations", description = "Health, readiness, metrics"),
        (name = "webhooks", description = "Alarms posted, signed, to your endpoints, and their delivery log"),
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

/// The bodies that take `scores` or `items` (`extract::ScoresOrItems`), and the two shapes
/// each is sent in: (body, its shape with `scores`, its shape with `items`), the shapes named
/// after the body's type (`EstimateBody`: `EstimateScores`, `EstimateItems`).
fn run_shapes() -> Vec<(String, String, String)> {
    let bodies = [
        CorrectRequest::name(),
        EstimateBody::name(),
        RunBody::name(),
        RankRunBody::name(),
    ];
    bodies
        .into_iter()
        .map(|body| {
            let stem = body
                .strip_suffix("Request")
                .or_else(|| body.strip_suffix("Body"))
                .unwrap_or(&body);
            let shapes = (format!("{stem}Scores"), format!("{stem}Items"));
            (body.to_string(), shapes.0, shapes.1)
        })
        .collect()
}

/// States each body of `run_shapes` as one of its two shapes: a copy with `scores` required
/// and no `items`, and one the other way round. The handlers read one type with both fields
/// optional, which a schema would otherwise show as taking both or neither.
struct RunShapes;

impl Modify for RunShapes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (body, scores, items) in run_shapes() {
            let (body, scores, items) = (body.as_str(), scores.as_str(), items.as_str());
            let schema = components
                .schemas
                .get(body)
                .unwrap_or_else(|| panic!("{body} is among the document's schemas"));
            let mut whole = serde_json::to_value(schema).expect("a schema serialises");
            let description = whole.as_object_mut().and_then(|o| o.remove("description"));
            for (name, keep, drop) in [(scores, "scores", "items"), (items, "items", "scores")] {
                let mut shape = whole.clone();
                if let Some(properties) = shape["properties"].as_object_mut() {
                    properties.remove(drop);
                }
                shape["properties"][keep]["type"] = json!("array");
                match shape["required"].as_array_mut() {
                    Some(required) => required.push(json!(keep)),
                    None => shape["required"] = json!([keep]),
                }
                components
                    .schemas
                    .insert(name.to_owned(), piece::<RefOr<Schema>>(shape));
            }
            let ref_to = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
            let mut either = json!({"oneOf": [ref_to(scores), ref_to(items)]});
            if let Some(description) = description {
                either["description"] = description;
            }
            components.schemas.insert(body.to_owned(), piece(either));
        }
    }
}

/// What the handlers accept, which the annotations cannot say: the name rules of path
/// segments, and every refusal an operation can give (the extractors and the tower layers
/// answer 400, 401, 403, 413, 415, 422, 429 and 503 before a handler runs). The handlers'
/// annotations list only their own answers.
struct Refusals;

fn piece<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a well-formed OpenAPI piece")
}

impl Modify for Refusals {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let name = super::schema::name_json();
        for (path, item) in openapi.paths.paths.iter_mut() {
            let ops = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ];
            for op in ops.into_iter().flatten() {
                let has_body = op.request_body.is_some();
                let scopes: Vec<String> = serde_json::to_value(&op.security)
                    .ok()
                    .and_then(|v| v.pointer("/0/api_key").cloned())
                    .and_then(|v| serde_json::from_value(v).ok())
                    .unwrap_or_default();
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
                    add("401", "No API key, or an unknown, revoked or expired one");
                    if let Some(scope) = scopes.first() {
                        add("403", &format!("The key lacks the {scope} scope"));
                    }
                    add(
                        "429",
                        "Over server.max_concurrent_requests, or this key over server.max_concurrent_per_key; retry after Retry-After",
                    );
                    add(
                        "503",
                        "Not answered within server.request_timeout_secs (`timeout`), or the store is out of reach (`store_unavailable`); retry after Retry-After",
                    );
                }
            }
        }
    }
}

/// The whole document: the description above, the routes' operations and schemas (from the
/// router's own route list), and what the annotations cannot say.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi().merge_from(super::documented_routes());
    for modifier in [&BearerAuth as &dyn Modify, &RunShapes, &Refusals] {
        modifier.modify(&mut doc);
    }
    doc
}

/// The document as YAML, as `judgecal openapi` prints it.
pub fn yaml() -> String {
    document()
        .to_yaml()
        .expect("the generated document serialises")
}
