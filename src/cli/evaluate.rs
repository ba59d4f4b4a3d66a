//! `judgecal evaluate`: every method cross-validated on the cells of an anchors CSV; and the
//! arguments the studies' commands (`judgecal-study`) share with it.

use std::path::PathBuf;

use judgecal_stats::flow::FlowPreset;

/// The flow's training recipe in the study commands.
#[derive(Debug, clap::Args)]
pub struct FlowArgs {
    /// The flow's training recipe: `fast` (the service's default) or `paper` (1,500
    /// full-batch epochs at 3e-3).
    #[arg(long, value_parser = FlowPreset::parse, default_value = "fast")]
    pub flow_preset: FlowPreset,
    /// Flow training epochs (default: the preset's).
    #[arg(long)]
    pub flow_epochs: Option<u64>,
}

impl FlowArgs {
    pub fn apply(&self, flow: &mut judgecal_stats::flow::FlowOptions) {
        flow.preset = self.flow_preset;
        flow.epochs = self.flow_epochs;
    }
}

#[derive(Debug, clap::Args)]
pub struct EvaluateArgs {
    /// An anchors CSV: judge,rubric,item_id,judge_score,reference_score.
    #[arg(long)]
    pub anchors: PathBuf,
    /// k of k-fold cross-validation.
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Hold out this fraction instead of k folds.
    #[arg(long)]
    pub holdout: Option<f64>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Methods by name (raw is the identity); default: every method.
    #[arg(long, value_delimiter = ',')]
    pub methods: Vec<String>,
    /// A cell needs this many anchors for the flow to be evaluated on it.
    #[arg(long, default_value_t = 1000)]
    pub flow_min_anchors: usize,
    #[command(flatten)]
    pub flow: FlowArgs,
    /// Also write the rows as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Methods by name (`raw` is the paper's name for the identity); none named is every method.
pub fn methods(raw: &[String]) -> Result<Vec<judgecal_stats::Method>, String> {
    use judgecal_stats::Method;
    if raw.is_empty() {
        return Ok(Method::ALL.to_vec());
    }
    let mut out = Vec::new();
    for m in raw {
        let c = match m.trim() {
            "raw" => Method::Identity,
            other => Method::parse(other)?,
        };
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Ok(out)
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

pub(super) fn evaluate(a: EvaluateArgs) -> Result<(), String> {
    use crate::evaluate::{self, Options};
    use judgecal_stats::cv::{Scheme, Split};
    use judgecal_stats::select::AutoOptions;
    let mut candidates = judgecal_stats::Candidates::default();
    a.flow.apply(&mut candidates.flow);
    let opts = Options {
        methods: methods(&a.methods)?,
        auto: AutoOptions {
            split: Split {
                scheme: match a.holdout {
                    Some(f) => Scheme::Holdout(f),
                    None => Scheme::Folds(a.folds),
                },
                seed: a.seed,
            },
            rule: Default::default(),
            flow_min_anchors: a.flow_min_anchors,
            candidates,
        },
    };
    let rows = evaluate::run(&a.anchors, &opts)?;
    print!("{}", evaluate::table(&rows));
    if let Some(path) = a.json {
        write_json(&path, &rows)?;
    }
    Ok(())
}
