use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    judgecal::cli::run(judgecal::cli::Cli::parse()).await
}
