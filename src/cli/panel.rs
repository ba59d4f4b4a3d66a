//! `judgecal panel`: a panel of judges fused into one calibrated score, on real data.

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct PanelArgs {
    /// HANNA in long form (../shared/data/hanna/hanna_long.csv): its five judges as one panel.
    #[arg(long)]
    pub hanna: PathBuf,
    /// The prompt variant whose scores make the panel.
    #[arg(long, default_value = "1")]
    pub variant: String,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// NUTS draws per chain (and as many warm-up iterations, at most 500).
    #[arg(long, default_value_t = 1000)]
    pub draws: u64,
}

pub(super) fn panel(a: PanelArgs) -> Result<(), String> {
    use crate::study::panel;
    let sampler = crate::calibrate::bayes::FitOptions {
        draws: a.draws.max(10),
        warmup: a.draws.clamp(10, 500),
        seed: a.seed,
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let t = panel::hanna(&a.hanna, &a.variant, a.seed, &sampler, &|s| {
        eprintln!("{s} ({:.0} s)", started.elapsed().as_secs_f64())
    })?;
    print!("{}", panel::table(&t));
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
