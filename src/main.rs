use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match judgecal::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let first = std::env::args().nth(1);
            if let Some(hint) = judgecal::cli::moved_to_study(first.as_deref()) {
                eprintln!("{hint}");
                return ExitCode::from(2);
            }
            e.exit()
        }
    };
    judgecal::cli::run(cli).await
}
