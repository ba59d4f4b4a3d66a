//! `judgecal-study`: the research harnesses' command line. Each subcommand runs a study with
//! known truth (or on HANNA) and prints Markdown tables; none needs a database or the service.

mod covariates;
mod drift;
mod pairwise;
mod panel;
mod studies;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use covariates::{CovariatesArgs, covariates};
use drift::{DriftArgs, drift};
use pairwise::{PairwiseArgs, pairwise};
use panel::{PanelArgs, panel};
use studies::{
    BridgeArgs, CoverageArgs, ExperimentArgs, GateArgs, IntervalsArgs, RankArgs, SystemsArgs,
    bridge, coverage, experiment, gate, intervals, rank, systems,
};

#[derive(Debug, Parser)]
#[command(
    name = "judgecal-study",
    version,
    about = "judgecal's studies: the correctors, intervals and alarms on worlds with known truth"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Reproduce the paper's study: a synthetic strict-and-compressing judge, the nested
    /// split, every method at every anchor budget; prints Table 1 (and Table 2 with --seeds).
    Experiment(Box<ExperimentArgs>),
    /// Count how often the run-level intervals (/v1/estimate, /v1/compare) cover the truth
    /// on the synthetic judge, per method, anchor count and run size; prints a Markdown table.
    Coverage(CoverageArgs),
    /// Count how often each method's 95% predictive interval covers new items on the
    /// synthetic judge, overall and at the ends of the judge's scale; prints a Markdown table.
    Intervals(IntervalsArgs),
    /// Count the drift alarm's false alarms on cells that do not drift (synthetic judge and
    /// HANNA, anchors shuffled or in batches that share raters or prompts), and its delay
    /// after a shift of the judge or a switch to another judge.
    Drift(DriftArgs),
    /// Rank HANNA's story-generation systems from one judge's scores: half of the stories
    /// as anchors, each system's mean estimated on the other half; prints a Markdown table.
    Systems(SystemsArgs),
    /// Rankings of K systems (/v1/rank) on worlds with known truth: how often any pair is
    /// claimed in the wrong order, whether every rank interval covers, and how many labels
    /// the plan needs against one count per system; with --hanna, HANNA's 11 systems by every
    /// judge and rubric against the human ranking. Prints Markdown tables.
    Rank(RankArgs),
    /// The bridge between two judge versions on worlds with known truth (no change, mean
    /// shifts, a slope change, a change at one end, a change in one group of systems): its
    /// verdicts by bridge size and how often they are wrong; and how soon the door check, the
    /// silent-change check and the drift alarm see a change. Prints Markdown tables.
    Bridge(BridgeArgs),
    /// Fit the Bayesian line to every judge of an anchors CSV (rubrics pooled, as a training
    /// job does), on every anchor and with each group (system) left out in turn: how many
    /// versions miss the gate on the sampler's first round and after its extensions.
    Gate(GateArgs),
    /// HANNA's judges as one panel: each judge's and the panel's held-out error per rubric,
    /// `auto`'s nested choice between them, and the judges' weights. Prints Markdown tables.
    Panel(PanelArgs),
    /// Covariates with known truth: judges whose score rises with log length (half a
    /// reference sd per sd, a fifth, none), continuous and integer references, 200 to 5,000
    /// anchors; how often the length coefficient's interval covers, which input is served, the
    /// fresh items' MAE with and without the length, and the bands' coverage.
    Covariates(CovariatesArgs),
    /// Pairwise judges on LLMBar's sets: the held-out log-loss and accuracy of the calibrated
    /// preference (the verdict, both orders, and with the length ratio) against the raw
    /// verdict, and each judge's position, swap and length biases beside the experts'; with
    /// --grid, the ratings' intervals on Bradley–Terry worlds with known truth.
    Pairwise(PairwiseArgs),
}

/// Runs the parsed study; its errors are the user's to fix (exit code 2).
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Experiment(a) => experiment(*a),
        Command::Coverage(a) => coverage(a),
        Command::Intervals(a) => intervals(a),
        Command::Drift(a) => drift(a),
        Command::Systems(a) => systems(a),
        Command::Rank(a) => rank(a),
        Command::Bridge(a) => bridge(a),
        Command::Gate(a) => gate(a),
        Command::Panel(a) => panel(a),
        Command::Covariates(a) => covariates(a),
        Command::Pairwise(a) => pairwise(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("judgecal-study: {e}");
            ExitCode::from(2)
        }
    }
}
