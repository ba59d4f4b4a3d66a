use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    judgecal_study::cli::run(judgecal_study::cli::Cli::parse())
}
