//! A version's covariate layer as the versions' listing shows it.

use serde::Serialize;
use utoipa::ToSchema;

use judgecal_stats::covariates::{Layer, Transform};

/// How a version trained with covariates reads an item: the reference's posterior mean at the
/// judge score and the covariates it kept (the layer's score), which its corrector then reads.
/// Every held-out figure of the version is of that two-step correction.
#[derive(Serialize, ToSchema)]
pub struct CovariateLayerDto {
    /// The covariates kept, each with its transform (`identity`, `log`, `hinge`) and the anchors'
    /// mean and sd of the transformed value, which standardise it. Empty where none lowered
    /// held-out error: the layer is then a linear map of the judge score alone.
    pub inputs: Vec<CovariateInputDto>,
    /// The judge score's coefficient (reference units per judge-score unit) with its 95%
    /// credible interval, at fixed covariates.
    pub judge_weight: f64,
    pub judge_weight_lo: f64,
    pub judge_weight_hi: f64,
    /// Each kept covariate's coefficient: the reference's change per sd of its transformed
    /// value at a fixed judge score, with its 95% credible interval, and per unit of the
    /// transformed value. A judge that rewards length beyond what people do has a negative
    /// one: a longer answer of the same judge score is worth less to people.
    pub coefficients: Vec<CoefficientDto>,
    /// The candidates compared per rubric on cross-fitted anchors (5 folds): the judge alone
    /// and each covariate absent, raw, logged, or logged with hinges at the log's quartiles
    /// or at five of its quantiles (piecewise linear); of those within 1% of the lowest
    /// held-out MAE, the one with the fewest inputs is served.
    pub considered: Vec<ConsideredDto>,
}

#[derive(Serialize, ToSchema)]
pub struct CovariateInputDto {
    pub name: String,
    /// `identity`, `log`, or `hinge`: how far the log lies past `knot` (0 below it), which
    /// beside the log and the other knots makes a piecewise-linear term in the log.
    pub transform: String,
    /// A hinge's knot, in log units (a quantile of the anchors' log values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub knot: Option<f64>,
    pub centre: f64,
    pub scale: f64,
    /// The anchors' smallest and largest raw value: a request's value outside it is corrected
    /// with the warning `covariate_outside_anchors`, one more than the range's width beyond it
    /// refused (absent for versions trained before it was kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 2, max_items = 2)]
    pub range: Option<[f64; 2]>,
}

#[derive(Serialize, ToSchema)]
pub struct CoefficientDto {
    /// `length` or `log(length)`.
    pub input: String,
    pub per_sd: f64,
    pub per_sd_lo: f64,
    pub per_sd_hi: f64,
    pub per_unit: f64,
}

#[derive(Serialize, ToSchema)]
pub struct ConsideredDto {
    /// The inputs beside the judge score; empty for the judge alone.
    pub inputs: Vec<String>,
    pub mae: f64,
    pub mse: f64,
}

impl From<Layer> for CovariateLayerDto {
    fn from(l: Layer) -> Self {
        Self {
            inputs: l
                .inputs
                .into_iter()
                .map(|i| CovariateInputDto {
                    transform: match i.transform {
                        Transform::Identity => "identity",
                        Transform::Log => "log",
                        Transform::Hinge { .. } => "hinge",
                    }
                    .to_owned(),
                    knot: match i.transform {
                        Transform::Hinge { knot } => Some(knot),
                        _ => None,
                    },
                    name: i.name,
                    centre: i.centre,
                    scale: i.scale,
                    range: i.range,
                })
                .collect(),
            judge_weight: l.judge.weight,
            judge_weight_lo: l.judge.weight_lo,
            judge_weight_hi: l.judge.weight_hi,
            coefficients: l
                .coefficients
                .into_iter()
                .map(|c| CoefficientDto {
                    input: c.input,
                    per_sd: c.per_sd,
                    per_sd_lo: c.per_sd_lo,
                    per_sd_hi: c.per_sd_hi,
                    per_unit: c.per_unit,
                })
                .collect(),
            considered: l
                .considered
                .into_iter()
                .map(|c| ConsideredDto {
                    inputs: c.inputs,
                    mae: c.mae,
                    mse: c.mse,
                })
                .collect(),
        }
    }
}
