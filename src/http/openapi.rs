//! The OpenAPI document, generated from the handlers' annotations. `openapi.yaml` at the top
//! of the repository is this document; a test fails when they differ.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{anchors, calibration, correct, error, ops, rubrics};

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
        ops::healthz,
        ops::readyz,
        ops::metrics,
    ),
    components(schemas(error::ErrorBody, error::ErrorDetail, error::ProblemDto)),
    modifiers(&BearerAuth),
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

/// The document as YAML, as `judgecal openapi` prints it.
pub fn yaml() -> String {
    ApiDoc::openapi()
        .to_yaml()
        .expect("the generated document serialises")
}
