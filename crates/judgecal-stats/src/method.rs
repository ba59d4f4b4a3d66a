//! The registry of calibration methods: the one place that lists them. Each line names a
//! method and its [`Corrector`]; the macro makes the closed enums every other module uses —
//! [`Method`] (the names), [`MethodOptions`] (typed options), [`Model`] (what a version stores;
//! its serde tag is the store's `method` column), [`Report`] (what a version's method reports
//! of it, with one schema for them all) and [`Candidates`] (every method's options, as `auto`
//! takes them) — and their dispatch. Every dispatch is an exhaustive `match` generated
//! here, with no fallback arm: a method is either registered in full or not at all.
//!
//! Adding a method: write its module (a marker type implementing [`Corrector`], its options,
//! its [`CellModel`] and that model's report) and add its line to the registry in `lib.rs`.
//! Nothing else changes: a version's answer, the spec, the gauges and the report picture read
//! the report through [`Report`].
//!
//! [`Corrector`]: super::Corrector
//! [`CellModel`]: super::CellModel
//! [`Method`]: super::Method
//! [`MethodOptions`]: super::MethodOptions
//! [`Model`]: super::Model
//! [`Report`]: super::Report
//! [`Candidates`]: super::Candidates

use serde_json::Value;
use utoipa::ToSchema;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{RefOr, Schema};

use super::{Candidates, Method};

/// One rubric's fit, kept to correct scores later: what `MethodOptions::fit_rubric` gives.
pub type Predictor = Box<dyn Fn(&[f64]) -> Result<Vec<super::Corrected>, String> + Send + 'static>;

/// The schema of a type and every schema it refers to.
pub type SchemaSet = (String, RefOr<Schema>, Vec<(String, RefOr<Schema>)>);

pub fn schema_set<T: ToSchema>() -> SchemaSet {
    let mut refs = Vec::new();
    T::schemas(&mut refs);
    (T::name().into_owned(), T::schema(), refs)
}

impl Method {
    /// A method by name; `raw` is the paper's name for the identity.
    pub fn parse(raw: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|m| m.as_str() == raw)
            .ok_or_else(|| {
                format!(
                    "unknown method {raw:?}; one of {}",
                    Self::ALL
                        .iter()
                        .map(|m| m.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Candidates {
    /// Every candidate's options as a JSON object keyed by method name.
    pub fn to_json(&self) -> Value {
        Value::Object(
            Method::ALL
                .iter()
                .map(|m| (m.as_str().to_owned(), self.get(*m).to_json()))
                .collect(),
        )
    }
}

/// The schema of every method's report at once: an object with each report's fields, none
/// required (a version carries its own method's alone). `reports` are (method, its report's
/// schema); a field two methods both report must mean the same in both.
pub fn merged_report(reports: &[(&str, RefOr<Schema>)]) -> RefOr<Schema> {
    let mut merged = ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "What the version's method reports beyond its corrections: the fields of its own method's report.",
        ))
        .build();
    for (method, report) in reports {
        let RefOr::T(Schema::Object(object)) = report else {
            panic!("{method}'s report is not an object schema");
        };
        for (field, schema) in &object.properties {
            if let Some(other) = merged.properties.get(field) {
                assert!(
                    other == schema,
                    "two methods report a field {field} that means different things"
                );
            }
            merged.properties.insert(field.clone(), schema.clone());
        }
    }
    RefOr::T(Schema::Object(merged))
}

/// Generates the registry's enums and their dispatch; invoked once, in `lib.rs`.
macro_rules! registry {
    ($($variant:ident $name:ident => $corrector:ty),* $(,)?) => {
        /// A calibration method: how a cell's corrector is fitted.
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize,
            serde::Deserialize, utoipa::ToSchema,
        )]
        #[serde(rename_all = "snake_case")]
        pub enum Method {
            $($variant),*
        }

        impl Method {
            /// Every method, in the order `auto` lists its candidates.
            pub const ALL: &[Method] = &[$(Method::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Method::$variant => stringify!($name)),*
                }
            }

            /// What the experiment's tables call it.
            pub fn label(self) -> &'static str {
                match self {
                    $(Method::$variant => <$corrector as $crate::Corrector>::LABEL),*
                }
            }

            pub fn default_scheme(self) -> $crate::cv::Scheme {
                match self {
                    $(Method::$variant => <$corrector as $crate::Corrector>::DEFAULT_SCHEME),*
                }
            }

            /// What one fit costs, relative to the others: how `auto` shares out its
            /// progress.
            pub fn cost(self) -> f64 {
                match self {
                    $(Method::$variant => <$corrector as $crate::Corrector>::COST),*
                }
            }

            pub fn auto_min_anchors(self) -> usize {
                match self {
                    $(Method::$variant => <$corrector as $crate::Corrector>::AUTO_MIN_ANCHORS),*
                }
            }

            /// The method's options from JSON, refusing keys it does not know.
            pub fn options(self, value: serde_json::Value) -> Result<MethodOptions, String> {
                match self {
                    $(Method::$variant => serde_json::from_value(value)
                        .map(MethodOptions::$variant)
                        .map_err(|e| e.to_string())),*
                }
            }

            /// Its default options.
            pub fn default_options(self) -> MethodOptions {
                match self {
                    $(Method::$variant => MethodOptions::$variant(Default::default())),*
                }
            }

            /// The schema of its options.
            pub fn options_schema(self) -> $crate::method::SchemaSet {
                match self {
                    $(Method::$variant =>
                        $crate::method::schema_set::<<$corrector as $crate::Corrector>::Options>()),*
                }
            }
        }

        /// One method's options, typed.
        #[derive(Debug, Clone, PartialEq)]
        pub enum MethodOptions {
            $($variant(<$corrector as $crate::Corrector>::Options)),*
        }

        impl MethodOptions {
            pub fn method(&self) -> Method {
                match self {
                    $(MethodOptions::$variant(_) => Method::$variant),*
                }
            }

            /// The method's rules across fields.
            pub fn check(&self) -> Result<(), String> {
                match self {
                    $(MethodOptions::$variant(o) => <$corrector as $crate::Corrector>::check(o)),*
                }
            }

            /// The options with every default filled in.
            pub fn to_json(&self) -> serde_json::Value {
                match self {
                    $(MethodOptions::$variant(o) => serde_json::to_value(o)),*
                }
                .unwrap_or_default()
            }

            /// Held-out predictions of every anchor under `split`, then a model per cell:
            /// what a job of this method computes.
            pub fn train(
                &self,
                cells: &[$crate::Cell],
                split: $crate::cv::Split,
                run: &$crate::Run,
            ) -> Result<(Vec<Model>, $crate::cv::HeldOut), String> {
                match self {
                    $(MethodOptions::$variant(o) => {
                        let (models, held_out) =
                            $crate::train::train::<$corrector>(o, cells, split, run)?;
                        Ok((models.into_iter().map(Model::$variant).collect(), held_out))
                    }),*
                }
            }

            /// Held-out predictions of every anchor on the given folds.
            pub fn cross_validate(
                &self,
                cells: &[$crate::Cell],
                folds: &$crate::cv::Folds,
                seed: u64,
                run: &$crate::Run,
            ) -> Result<$crate::cv::HeldOut, String> {
                match self {
                    $(MethodOptions::$variant(o) => $crate::cv::cross_validate::<$corrector>(
                        o, cells, folds, seed, run,
                    )
                    .map(|(held_out, _)| held_out)),*
                }
            }

            /// A model per cell fitted on every anchor; `held_out` as `cross_validate` gave.
            pub fn fit_models(
                &self,
                cells: &[$crate::Cell],
                seed: u64,
                held_out: &$crate::cv::HeldOut,
                run: &$crate::Run,
            ) -> Result<Vec<Model>, String> {
                match self {
                    $(MethodOptions::$variant(o) => Ok(
                        $crate::train::fit_models::<$corrector>(o, cells, seed, held_out, run)?
                            .into_iter()
                            .map(Model::$variant)
                            .collect(),
                    )),*
                }
            }

            /// Fits `cells` and predicts `scores` of rubric `r` (the experiment's test items).
            pub fn fit_predict(
                &self,
                cells: &[$crate::Cell],
                seed: u64,
                r: usize,
                scores: &[f64],
                run: &$crate::Run,
            ) -> Result<Vec<$crate::Corrected>, String> {
                self.fit_rubric(cells, seed, r, run)?(scores)
            }

            /// Fits `cells` and keeps rubric `r`'s fit, to predict any scores later (refits
            /// that many runs' scores are averaged over, fitted once).
            pub fn fit_rubric(
                &self,
                cells: &[$crate::Cell],
                seed: u64,
                r: usize,
                run: &$crate::Run,
            ) -> Result<$crate::method::Predictor, String> {
                match self {
                    $(MethodOptions::$variant(o) => {
                        let fit = <$corrector as $crate::Corrector>::compact(
                            <$corrector as $crate::Corrector>::fit(o, cells, seed, run)?,
                        );
                        Ok(Box::new(move |scores: &[f64]| {
                            <$corrector as $crate::Corrector>::predict(&fit, r, scores)
                        }))
                    }),*
                }
            }
        }

        /// What a version stores for one cell, tagged with its method.
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(tag = "method", content = "params", rename_all = "snake_case")]
        pub enum Model {
            $($variant(<$corrector as $crate::Corrector>::Model)),*
        }

        impl Model {
            pub fn method(&self) -> Method {
                match self {
                    $(Model::$variant(_) => Method::$variant),*
                }
            }

            /// The method's own part, as the store's `params` column holds it.
            pub fn params(&self) -> Result<serde_json::Value, String> {
                match self {
                    $(Model::$variant(m) => serde_json::to_value(m)),*
                }
                .map_err(|e| e.to_string())
            }

            /// Reads a model back from its method and `params`.
            pub fn from_params(method: Method, params: serde_json::Value) -> Result<Self, String> {
                match method {
                    $(Method::$variant => serde_json::from_value(params).map(Model::$variant)),*
                }
                .map_err(|e| e.to_string())
            }

            pub fn prepare(&self) -> Result<(), String> {
                match self {
                    $(Model::$variant(m) => $crate::CellModel::prepare(m)),*
                }
            }

            pub fn heavy(&self, scores: &[f64]) -> bool {
                match self {
                    $(Model::$variant(m) => $crate::CellModel::heavy(m, scores)),*
                }
            }

            pub fn correct(&self, scores: &[f64]) -> Result<Vec<$crate::Corrected>, String> {
                match self {
                    $(Model::$variant(m) => $crate::CellModel::correct(m, scores)),*
                }
            }

            pub fn failure(&self) -> Option<String> {
                match self {
                    $(Model::$variant(m) => $crate::CellModel::failure(m)),*
                }
            }

            /// What its method reports of it.
            pub fn report(&self) -> Report {
                match self {
                    $(Model::$variant(m) => Report::$variant($crate::CellModel::report(m))),*
                }
            }

            pub fn mean_uncertainty(&self) -> $crate::corrector::MeanUncertainty<'_> {
                match self {
                    $(Model::$variant(m) => $crate::CellModel::mean_uncertainty(m)),*
                }
            }
        }

        /// What a version's method reports of it, tagged by method in Rust and written as its
        /// method's report alone (the fields a version's answer carries beside its own); its
        /// schema is every method's report fields at once, none required.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Report {
            $($variant(<<$corrector as $crate::Corrector>::Model as $crate::CellModel>::Report)),*
        }

        impl Report {
            pub fn posterior(&self) -> Option<&$crate::report::PosteriorReport> {
                match self {
                    $(Report::$variant(r) => $crate::report::MethodReport::posterior(r)),*
                }
            }

            pub fn diagnostics(&self) -> Option<&$crate::report::DiagnosticsReport> {
                match self {
                    $(Report::$variant(r) => $crate::report::MethodReport::diagnostics(r)),*
                }
            }

            pub fn headline(&self) -> Option<String> {
                match self {
                    $(Report::$variant(r) => $crate::report::MethodReport::headline(r)),*
                }
            }
        }

        impl serde::Serialize for Report {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(Report::$variant(r) => r.serialize(s)),*
                }
            }
        }

        impl utoipa::PartialSchema for Report {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::method::merged_report(&[$((
                    stringify!($name),
                    <<<$corrector as $crate::Corrector>::Model as $crate::CellModel>::Report
                        as utoipa::PartialSchema>::schema(),
                )),*])
            }
        }

        impl utoipa::ToSchema for Report {
            fn name() -> std::borrow::Cow<'static, str> {
                "MethodReport".into()
            }

            fn schemas(
                schemas: &mut Vec<(
                    String,
                    utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
                )>,
            ) {
                $(<<<$corrector as $crate::Corrector>::Model as $crate::CellModel>::Report
                    as utoipa::ToSchema>::schemas(schemas);)*
            }
        }

        /// Every method's options, as `auto` takes them for its candidates.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Candidates {
            $(pub $name: <$corrector as $crate::Corrector>::Options),*
        }

        impl Candidates {
            /// The options of `method`.
            pub fn get(&self, method: Method) -> MethodOptions {
                match method {
                    $(Method::$variant => MethodOptions::$variant(self.$name.clone())),*
                }
            }

            /// Replaces `method`'s options.
            pub fn set(&mut self, options: MethodOptions) {
                match options {
                    $(MethodOptions::$variant(o) => self.$name = o),*
                }
            }
        }
    };
}

pub(crate) use registry;

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;
    use utoipa::openapi::schema::Object;

    use super::*;
    use crate::Report;
    use crate::bayes::{BayesReport, FitDiagnostics, RubricPosterior};
    use crate::report::NoReport;

    fn object(schema: RefOr<Schema>) -> Object {
        match schema {
            RefOr::T(Schema::Object(o)) => o,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn the_report_schema_lists_every_field_a_report_writes_and_requires_none() {
        let schema = object(Report::schema());
        assert!(schema.required.is_empty(), "{:?}", schema.required);
        let mut fields: Vec<&str> = schema.properties.keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["diagnostics", "flow", "posterior"]);
        let posterior = RubricPosterior {
            alpha_mean: 0.5,
            beta_mean: 0.8,
            sigma_mean: 0.3,
            alpha_var: 0.01,
            beta_var: 0.001,
            alpha_beta_cov: -0.002,
            sigma2_mean: 0.09,
            beta_lo: 0.74,
            beta_hi: 0.86,
            beta_collapse_probability: 0.0,
            canary: false,
        };
        let diagnostics = FitDiagnostics {
            rhat_max: f64::NAN,
            ess_bulk_min: 900.0,
            ess_tail_min: 800.0,
            divergences: 0,
            extensions: 0,
        };
        let bayes = Report::Bayes(BayesReport {
            posterior: (&posterior).into(),
            diagnostics: (&diagnostics).into(),
        });
        let written = serde_json::to_value(&bayes).unwrap();
        let mut keys: Vec<&str> = written
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["diagnostics", "posterior"]);
        assert_eq!(
            written["posterior"]["beta_interval"],
            serde_json::json!([0.74, 0.86])
        );
        // An R̂ that is not a number is written as null, which JSON can carry.
        assert!(written["diagnostics"]["rhat_max"].is_null(), "{written}");
        assert_eq!(bayes.posterior().map(|p| p.beta_mean), Some(0.8));
        assert_eq!(
            serde_json::to_value(Report::Identity(NoReport {})).unwrap(),
            serde_json::json!({})
        );
    }

    #[test]
    #[should_panic(expected = "means different things")]
    fn two_methods_may_not_report_one_field_with_two_meanings() {
        let a = ObjectBuilder::new()
            .property("fit", ObjectBuilder::new().schema_type(Type::Number))
            .build();
        let b = ObjectBuilder::new()
            .property("fit", ObjectBuilder::new().schema_type(Type::String))
            .build();
        merged_report(&[
            ("a", RefOr::T(Schema::Object(a))),
            ("b", RefOr::T(Schema::Object(b))),
        ]);
    }
}
