//! What the paper's experiment (`judgecal-study experiment`) is asked and what one fit yields: the
//! types its run, its figures and its sources share, so none of them imports another.

use std::path::PathBuf;

use serde::Serialize;

use super::synthetic::JudgeModel;
use judgecal_stats::flow::FlowPreset;
use judgecal_stats::quality::Figures as Quality;
use judgecal_stats::{Candidates, Method};

/// Where the reference scores come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Source {
    /// The built-in stand-in (see [`stand_in_reference`]).
    StandIn,
    /// A numeric column of a CSV file with a header row.
    Column { file: PathBuf, column: String },
    /// A given split: columns `split,order,judge,reference`.
    Pairs(PathBuf),
}

#[derive(Debug, Clone, Serialize)]
pub struct StudyOptions {
    pub source: Source,
    pub judge: JudgeModel,
    pub scale: (f64, f64),
    pub seed: u64,
    pub seeds: usize,
    pub test: usize,
    pub pool: usize,
    pub budgets: Vec<usize>,
    /// Extra budgets fitted for the budget figure only.
    pub sweep: Vec<usize>,
    pub methods: Vec<Method>,
    /// Each method's options (the flow's recipe is `flow_preset`, its epochs `flow_epochs`).
    #[serde(skip)]
    pub settings: Candidates,
    pub flow_preset: FlowPreset,
    /// The preset's when `None`.
    pub flow_epochs: Option<u64>,
}

/// One split: the test items and the ordered training pool, as (judge, reference).
pub struct Split {
    pub test: Vec<(f64, f64)>,
    pub pool: Vec<(f64, f64)>,
}

/// One fitted (method, budget) on one seed: its test predictions and figures.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub seed: u64,
    pub method: Method,
    /// None for the raw judge.
    pub anchors: Option<usize>,
    pub evaluation: Quality,
    pub fit_seconds: f64,
    #[serde(skip)]
    pub predictions: Vec<f64>,
}
