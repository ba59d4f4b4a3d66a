//! The command line: `serve` (the default), `migrate`, `openapi`, `keys create` and
//! `evaluate` (every method cross-validated on an anchors file, off the async runtime). The
//! studies are the `judgecal-study` binary's.

pub mod evaluate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::auth::Scope;
use crate::config::Settings;
use crate::startup::{Application, shutdown_signal};
use crate::store::Store;
use evaluate::{EvaluateArgs, evaluate};

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

/// The research studies that were `judgecal` subcommands before the workspace split and are
/// now `judgecal-study`'s (its CLI test checks the list is whole).
pub const MOVED_TO_STUDY: &[&str] = &[
    "experiment",
    "coverage",
    "intervals",
    "drift",
    "systems",
    "rank",
    "bridge",
    "gate",
    "panel",
    "covariates",
    "pairwise",
];

/// What to tell someone who ran a study under the server's binary, where `first` is their
/// first argument.
pub fn moved_to_study(first: Option<&str>) -> Option<String> {
    let name = first.filter(|a| MOVED_TO_STUDY.contains(a))?;
    Some(format!(
        "error: `judgecal {name}` moved to the research binary: run `judgecal-study {name}` \
         (cargo run --release -p judgecal-study -- {name} ...); `judgecal --help` lists the server's commands"
    ))
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
    /// Cross-validate every method on every cell of an anchors CSV and print the figures.
    Evaluate(EvaluateArgs),
    /// Manage API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Webhooks' helpers.
    Webhooks {
        #[command(subcommand)]
        command: WebhooksCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Print a new signing secret for `webhooks.secret` (whsec_ and 32 random bytes in
    /// base64).
    Secret,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it once; only its hash is stored.
    Create {
        /// ingest, correct, train, metrics or admin; repeat or comma-separate for several.
        #[arg(long = "scope", required = true, value_delimiter = ',')]
        scopes: Vec<Scope>,
        /// A note saying whose key it is (`keys revoke` takes it too).
        #[arg(long, default_value = "")]
        name: String,
        /// The key stops working this many days from now.
        #[arg(long)]
        expires_in_days: Option<u32>,
    },
    /// List every key: prefix, name, scopes, and when it was made, expires or was revoked.
    List,
    /// Revoke a key, named by the key itself, its prefix (as `keys list` shows it) or its
    /// name (every live key of that name). Every replica refuses it within
    /// auth.key_cache_secs.
    Revoke {
        /// The key, its prefix (`jc_1a2b3c4d`) or its name.
        which: String,
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
        Command::Evaluate(a) => return offline(move || evaluate(a)).await,
        Command::Webhooks {
            command: WebhooksCommand::Secret,
        } => {
            println!("{}", crate::webhooks::new_secret());
            return ExitCode::SUCCESS;
        }
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
        Command::Keys { command } => keys(settings, command).await,
        Command::Openapi | Command::Evaluate(_) | Command::Webhooks { .. } => {
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

/// Runs an offline command off the async runtime; its errors are the user's to fix.
async fn offline(f: impl FnOnce() -> Result<(), String> + Send + 'static) -> ExitCode {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("judgecal: {e}");
            ExitCode::from(2)
        }
        Err(_) => {
            eprintln!("judgecal: the run panicked");
            ExitCode::FAILURE
        }
    }
}

async fn serve(settings: Settings, demo: bool) -> crate::Result<()> {
    let app = Application::build(settings).await?;
    if demo {
        let report = app.service().scores().load_demo().await?;
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
        let jobs = app.service().scores().train_demo().await?;
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
            match service.operations().job(id).await {
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
    let store = Store::connect(&settings.database.url, 1, settings.acquire_timeout()).await?;
    store.migrate().await?;
    println!("migrations applied");
    Ok(())
}

/// `judgecal keys …`: the store is migrated first, so a fresh database takes a first key.
async fn keys(settings: Settings, command: KeysCommand) -> crate::Result<()> {
    let store = Store::connect(&settings.database.url, 1, settings.acquire_timeout()).await?;
    store.migrate().await?;
    let service = crate::service::Service::new(store, crate::metrics::Metrics::new(), &settings);
    match command {
        KeysCommand::Create {
            scopes,
            name,
            expires_in_days,
        } => {
            let key = service
                .operations()
                .create_expiring_key(&scopes, &name, expires_in_days)
                .await?;
            println!("{key}");
            eprintln!("Store this key now: judgecal keeps only its hash and cannot show it again.");
        }
        KeysCommand::List => {
            println!("prefix\tname\tscopes\tcreated\texpires\trevoked");
            let when = |ms: Option<i64>| ms.map_or_else(|| "-".to_owned(), crate::domain::rfc3339);
            for k in service.operations().keys().await? {
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    k.prefix,
                    if k.name.is_empty() { "-" } else { &k.name },
                    k.scopes,
                    when(Some(k.created_at_ms)),
                    when(k.expires_at_ms),
                    when(k.revoked_at_ms),
                );
            }
        }
        KeysCommand::Revoke { which } => {
            for k in service.operations().revoke_key(&which).await? {
                println!("revoked {} ({})", k.prefix, k.name);
            }
            eprintln!(
                "Every replica refuses it within auth.key_cache_secs ({} s).",
                settings.auth.key_cache_secs
            );
        }
    }
    Ok(())
}
