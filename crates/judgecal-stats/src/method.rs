//! The registry of calibration methods: the one place that lists them. Each line names a
//! method and its [`Corrector`]; the macro makes the closed enums every other module uses —
//! [`Method`] (the names), [`MethodOptions`] (typed options), [`Model`] (what a version stores;
//! its serde tag is the store's `method` column) and [`Candidates`] (every method's options, as
//! `auto` takes them) — and their dispatch. Every dispatch is an exhaustive `match` generated
//! here, with no fallback arm: a method is either registered in full or not at all.
//!
//! Adding a method: write its module (a marker type implementing [`Corrector`], its options and
//! its [`CellModel`]) and add its line to the registry in `lib.rs`.
//!
//! [`Corrector`]: super::Corrector
//! [`CellModel`]: super::CellModel
//! [`Method`]: super::Method
//! [`MethodOptions`]: super::MethodOptions
//! [`Model`]: super::Model
//! [`Candidates`]: super::Candidates

use serde_json::Value;
use utoipa::ToSchema;
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

            pub fn posterior(&self) -> Option<&$crate::bayes::RubricPosterior> {
                match self {
                    $(Model::$variant(m) => $crate::CellModel::posterior(m)),*
                }
            }

            pub fn diagnostics(&self) -> Option<&$crate::bayes::FitDiagnostics> {
                match self {
                    $(Model::$variant(m) => $crate::CellModel::diagnostics(m)),*
                }
            }

            pub fn flow(&self) -> Option<$crate::flow::FlowSummary> {
                match self {
                    $(Model::$variant(m) => $crate::CellModel::flow(m)),*
                }
            }

            pub fn mean_uncertainty(&self) -> $crate::corrector::MeanUncertainty<'_> {
                match self {
                    $(Model::$variant(m) => $crate::CellModel::mean_uncertainty(m)),*
                }
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
