//! The command line: `serve` (the default), `migrate`, `openapi`, `keys create`, and the
//! studies (`studies`: `experiment`, `evaluate`, `coverage`, `intervals`, `drift`, `systems`,
//! `rank`, `panel`), which run off the async runtime.

mod drift;
mod panel;
mod studies;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::auth::Scope;
use crate::config::Settings;
use crate::startup::{Application, shutdown_signal};
use crate::store::Store;
use drift::{DriftArgs, drift};
use panel::{PanelArgs, panel};
use studies::{
    BridgeArgs, CoverageArgs, EvaluateArgs, ExperimentArgs, GateArgs, IntervalsArgs, RankArgs,
    SystemsArgs, bridge, coverage, evaluate, experiment, gate, intervals, rank, study, systems,
};

#[derive(Debug, Parser)]
#[command(
    name = "judgecal",
    version,
    about = "De-biases LLM-as-a-judge scores against trusted anchors"
)]
pub struct Cli {
    /// Folder with default.toml and $JUDGECAL_ENV.toml.
    #[arg(
        long,
        global = true,
        default_value = "config",
        env = "JUDGECAL_CONFIG_DIR"
    )]
    pub config_dir: PathBuf,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service (the default).
    Serve {
        /// Load the bundled HANNA example anchors (5 judges x 6 rubrics) before serving.
        #[arg(long)]
        demo: bool,
    },
    /// Apply pending database migrations and exit.
    Migrate,
    /// Print the OpenAPI document (YAML).
    Openapi,
    /// Reproduce the paper's study: a synthetic strict-and-compressing judge, the nested
    /// split, every method at every anchor budget; prints Table 1 (and Table 2 with --seeds).
    Experiment(Box<ExperimentArgs>),
    /// Cross-validate every method on every cell of an anchors CSV and print the figures.
    Evaluate(EvaluateArgs),
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
    /// Manage API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it once; only its hash is stored.
    Create {
        /// ingest, correct, train or admin; repeat or comma-separate for several.
        #[arg(long = "scope", required = true, value_delimiter = ',')]
        scopes: Vec<Scope>,
        /// A note saying whose key it is.
        #[arg(long, default_value = "")]
        name: String,
    },
}

/// Runs the parsed command; the exit code says whether it worked.
pub async fn run(cli: Cli) -> ExitCode {
    let command = cli.command.unwrap_or(Command::Serve { demo: false });
    let command = match command {
        Command::Openapi => {
            print!("{}", crate::http::openapi::yaml());
            return ExitCode::SUCCESS;
        }
        Command::Experiment(a) => return study(move || experiment(*a)).await,
        Command::Evaluate(a) => return study(move || evaluate(a)).await,
        Command::Coverage(a) => return study(move || coverage(a)).await,
        Command::Intervals(a) => return study(move || intervals(a)).await,
        Command::Drift(a) => return study(move || drift(a)).await,
        Command::Systems(a) => return study(move || systems(a)).await,
        Command::Rank(a) => return study(move || rank(a)).await,
        Command::Bridge(a) => return study(move || bridge(a)).await,
        Command::Gate(a) => return study(move || gate(a)).await,
        Command::Panel(a) => return study(move || panel(a)).await,
        other => other,
    };
    let settings = match Settings::load(&cli.config_dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("judgecal: {e}");
            return ExitCode::from(2);
        }
    };
    crate::telemetry::init(&settings.log);
    let result = match command {
        Command::Serve { demo } => serve(settings, demo).await,
        Command::Migrate => migrate(&settings).await,
        Command::Keys {
            command: KeysCommand::Create { scopes, name },
        } => create_key(settings, &scopes, &name).await,
        Command::Openapi
        | Command::Experiment(_)
        | Command::Evaluate(_)
        | Command::Coverage(_)
        | Command::Intervals(_)
        | Command::Drift(_)
        | Command::Systems(_)
        | Command::Rank(_)
        | Command::Bridge(_)
        | Command::Gate(_)
        | Command::Panel(_) => {
            unreachable!("handled above")
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = ?e, "judgecal failed");
            eprintln!("judgecal: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(settings: Settings, demo: bool) -> crate::Result<()> {
    let app = Application::build(settings).await?;
    if demo {
        let report = app.service().load_demo().await?;
        tracing::info!(
            inserted = report.inserted,
            unchanged = report.unchanged,
            cells = report.cells.len(),
            "demo anchors loaded (HANNA, MIT licence; see demo/hanna/README.md)"
        );
        println!(
            "judgecal demo: {} cells of HANNA anchors at http://{}/v1/cells",
            report.cells.len(),
            app.address()
        );
        let jobs = app.service().train_demo().await?;
        tokio::spawn(announce_demo(app.service().clone(), jobs, app.address()));
    }
    app.run_until_stopped(shutdown_signal())
        .await
        .map_err(|e| crate::Error::Internal(format!("server failed: {e}")))
}

/// Waits for the demo's training jobs and prints a correction to try.
async fn announce_demo(
    service: std::sync::Arc<crate::service::Service>,
    jobs: Vec<crate::domain::calibration::JobId>,
    address: std::net::SocketAddr,
) {
    if !jobs.is_empty() {
        println!(
            "training the demo judges' calibrators ({} jobs)...",
            jobs.len()
        );
    }
    for id in jobs {
        loop {
            match service.job(id).await {
                Ok(job) if !job.state.finished() => {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                Ok(job) => {
                    if let Some(error) = job.error {
                        println!("demo training job {id} failed: {error}");
                    }
                    break;
                }
                Err(e) => {
                    println!("cannot follow demo training job {id}: {e}");
                    break;
                }
            }
        }
    }
    println!(
        "demo ready. Correct two ChatGPT coherence scores:\n  curl -s http://{address}/v1/correct -H 'content-type: application/json' \\\n    -d '{{\"judge\": \"ChatGPT\", \"rubric\": \"coherence\", \"scores\": [2.0, 4.5]}}'"
    );
}

async fn migrate(settings: &Settings) -> crate::Result<()> {
    let store = Store::connect(&settings.database.url, 1).await?;
    store.migrate().await?;
    println!("migrations applied");
    Ok(())
}

async fn create_key(settings: Settings, scopes: &[Scope], name: &str) -> crate::Result<()> {
    let store = Store::connect(&settings.database.url, 1).await?;
    store.migrate().await?;
    let service = crate::service::Service::new(store, crate::metrics::Metrics::new(), &settings);
    let key = service.create_key(scopes, name).await?;
    println!("{key}");
    eprintln!("Store this key now: judgecal keeps only its hash and cannot show it again.");
    Ok(())
}
