//! `judgecal-study panel`: a panel of judges fused into one calibrated score, on real data
//! (`--hanna`) or in simulated worlds served as the service serves a panel (`--grid`).

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct PanelArgs {
    /// HANNA in long form (../shared/data/hanna/hanna_long.csv): its five judges as one panel.
    #[arg(long, required_unless_present = "grid")]
    pub hanna: Option<PathBuf>,
    /// The simulated worlds instead (correlated members, a noise member, a member biased per
    /// system, 10% and 40% missing scores; systems that differ, and with them weak members, a
    /// skewed integer scale, few anchors, two known systems): coverage of bands and run-level
    /// intervals, τ.
    #[arg(long)]
    pub grid: bool,
    /// With `--hanna`: check the "which judges" answer against brute force over every
    /// sub-panel (a run of 2,000 items to ±0.05, a ChatGPT call costing 1).
    #[arg(long)]
    pub plan: bool,
    /// The cost of one human label in `--plan`, in ChatGPT calls.
    #[arg(long, default_value_t = 20.0)]
    pub label_cost: f64,
    /// With `--grid`: only these worlds (comma-separated names, e.g. "systems,two groups").
    #[arg(long, value_delimiter = ',')]
    pub worlds: Vec<String>,
    /// Replications per world of `--grid`.
    #[arg(long, default_value_t = 100)]
    pub reps: usize,
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
    use crate::{panel, panel_grid};
    let started = std::time::Instant::now();
    let Some(hanna) = a.hanna.filter(|_| !a.grid) else {
        let rows = panel_grid::grid(a.reps, a.seed, &a.worlds, &|s| {
            eprintln!("{s} ({:.0} s)", started.elapsed().as_secs_f64())
        })?;
        print!("{}", panel_grid::grid_table(&rows));
        eprintln!("{:.0} s", started.elapsed().as_secs_f64());
        return Ok(());
    };
    if a.plan {
        let rows = crate::panel_plan::hanna_plan(
            &hanna,
            &a.variant,
            a.seed,
            2000,
            0.05,
            a.label_cost,
            &|s| eprintln!("{s} ({:.0} s)", started.elapsed().as_secs_f64()),
        )?;
        print!("{}", crate::panel_plan::plan_table(&rows));
        eprintln!("{:.0} s", started.elapsed().as_secs_f64());
        return Ok(());
    }
    let sampler = judgecal_stats::bayes::FitOptions {
        draws: a.draws.max(10),
        warmup: a.draws.clamp(10, 500),
        seed: a.seed,
        ..Default::default()
    };
    let t = panel::hanna(&hanna, &a.variant, a.seed, &sampler, &|s| {
        eprintln!("{s} ({:.0} s)", started.elapsed().as_secs_f64())
    })?;
    print!("{}", panel::table(&t));
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
