//! Schemas the derive cannot state, shared by the endpoint families' types: judge, rubric and
//! group names, from the name rule in `domain` (stated once there).

use serde_json::{Value, json};
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

use crate::domain::{NAME_MAX_LEN, name_pattern};

fn name(example: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(NAME_MAX_LEN))
        .pattern(Some(name_pattern()))
        .examples([example])
}

/// A judge's name, for `#[schema(schema_with = ...)]`.
pub fn judge_name() -> Object {
    name("gpt-4o-mini").build()
}

/// A rubric's name.
pub fn rubric_name() -> Object {
    name("coherence").build()
}

/// A group's (system's) name, where it may be left out; `description` says what it does
/// there (a field's doc comment does not reach a `schema_with` schema).
pub fn group_name(description: &str) -> Object {
    name("BART")
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .description(Some(description))
        .build()
}

/// An optional rater name (`domain::RaterName`), validated like judge names.
pub fn rater_name(description: &str) -> Object {
    name("labeller-7")
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .description(Some(description))
        .build()
}

/// An item's id (`domain::ItemId`): 1 to 256 characters, no control characters.
pub fn item_id() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(crate::domain::ItemId::MAX_LEN))
        .pattern(Some("^[^\\u0000-\\u001F\\u007F]+$"))
        .examples(["story-17"])
        .description(Some(
            "The item's id: 1 to 256 characters, no control characters; one anchor per item, cell and judge version. \
             Stored in Unicode's composed form (NFC); an uploaded id with an invisible character, a compatibility form \
             (full-width letters, a non-breaking space), a dash that looks like '-', or a leading or trailing space is \
             refused (422).",
        ))
        .build()
}

/// The pattern of a judge version: no control characters, no surrounding white space.
const JUDGE_VERSION_PATTERN: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F\\s]([^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u001F\\u007F-\\u009F\\s])?$";

/// A judge version (`domain::JudgeVersion`): opaque text, optional wherever it appears.
pub fn judge_version() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .min_length(Some(1))
        .max_length(Some(crate::domain::JudgeVersion::MAX_LEN))
        .pattern(Some(JUDGE_VERSION_PATTERN))
        .examples(["gpt-4o-2024-08-06+prompt:9f2c1a"])
        .description(Some(
            "The judge version that gave the scores: the platform's own label (model snapshot, a hash of the prompt template, decoding settings). Leave it out for unversioned scores.",
        ))
        .build()
}

/// The name schema as JSON, for the parts of the document written by hand.
pub fn name_json() -> Value {
    json!({
        "type": "string", "minLength": 1, "maxLength": NAME_MAX_LEN, "pattern": name_pattern(),
    })
}

/// A panel item's scores: each member's score (a number within ±1e9) by judge name, at least
/// one member and at most a panel's six.
/// An anchor row's or an item's covariates: name -> number.
pub fn covariates() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .property_names(Some(name("length")))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(-1e12))
                .maximum(Some(1e12)),
        ))
        .max_properties(Some(crate::domain::covariates::MAX_PER_ROW))
        .examples([json!({"length": 812})])
        .description(Some(
            "Optional numeric inputs beside the judge score, by name (a response's length in tokens, its count of \
             markdown headers). A calibration trained with `covariates` corrects at the judge score and these \
             values; in CSV, one column `covariate.<name>` each (empty: not given).",
        ))
        .build()
}

pub fn member_scores() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .property_names(Some(name("gpt-4o-mini")))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(-crate::domain::runlevel::MAX_SCORE))
                .maximum(Some(crate::domain::runlevel::MAX_SCORE)),
        ))
        .min_properties(Some(1))
        .max_properties(Some(judgecal_stats::panel::MAX_MEMBERS))
        .examples([json!({"gpt-4o-mini": 3.5, "claude-haiku": 4.0})])
        .description(Some(
            "A panel's item: each member's raw score by judge name (members that did not score the item left out); instead of `score`.",
        ))
        .build()
}

/// A pairwise outcome: `"a"`, `"b"`, `"tie"`, or the probability in [0, 1] that a's answer
/// is the better; `nullable` where it may be left out.
pub fn outcome(description: &str, nullable: bool) -> utoipa::openapi::schema::Schema {
    let mut one_of = utoipa::openapi::schema::OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["a", "b", "tie"])),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(0.0))
                .maximum(Some(1.0)),
        );
    if nullable {
        one_of = one_of.item(ObjectBuilder::new().schema_type(Type::Null));
    }
    utoipa::openapi::schema::Schema::OneOf(
        one_of
            .description(Some(description))
            .examples([json!("a")])
            .build(),
    )
}
