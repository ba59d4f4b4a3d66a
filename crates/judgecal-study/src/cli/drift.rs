//! `judgecal-study drift`: the drift alarm's studies, on cells (synthetic and HANNA) or on the
//! dependence grid (`--grid`).

use std::path::PathBuf;

use judgecal::cli::evaluate::FlowArgs;

#[derive(Debug, clap::Args)]
pub struct DriftArgs {
    /// HANNA in long form (../shared/data/hanna/hanna_long.csv); its 30 cells of prompt
    /// variant 1 join the synthetic ones.
    #[arg(long)]
    pub hanna: Option<PathBuf>,
    /// Synthetic cells of each kind (quarter-point and integer references).
    #[arg(long, default_value_t = 10)]
    pub synthetic: usize,
    /// Anchors per synthetic cell: half train the version, half are streamed.
    #[arg(long, default_value_t = 1200)]
    pub anchors: usize,
    /// Anchors per upload batch.
    #[arg(long, default_value_t = 50)]
    pub batch: usize,
    /// Anchors streamed after a shift or a switch of judge.
    #[arg(long, default_value_t = 3000)]
    pub watch: usize,
    /// Methods by name (raw is the identity); default: bayes, isotonic, quantile_map, raw.
    #[arg(long, value_delimiter = ',')]
    pub methods: Vec<String>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub flow: FlowArgs,
    /// The dependence grid instead: false alarms with raters who upload several batches,
    /// delays beside an oracle CUSUM, the fleet alert (`--grid-*` options).
    #[arg(long)]
    pub grid: bool,
    /// Grid: watches per cell.
    #[arg(long, default_value_t = 500)]
    pub grid_runs: usize,
    /// Grid: anchors per healthy watch.
    #[arg(long, default_value_t = 40_000)]
    pub grid_horizon: usize,
    /// Grid: batch sizes.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 50, 100, 500])]
    pub grid_batches: Vec<usize>,
    /// Grid: consecutive batches per rater.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 5, 10])]
    pub grid_per_rater: Vec<usize>,
    /// Grid: the fleet's cells (0: no fleet simulation), and fleets simulated.
    #[arg(long, default_value_t = 200)]
    pub grid_fleet: usize,
    #[arg(long, default_value_t = 1000)]
    pub grid_fleets: usize,
    /// Grid: every alarm bets with the intra-unit correlation declared at most this
    /// (`calibrators.drift_max_rho`; default: estimated from the units seen).
    #[arg(long)]
    pub grid_max_rho: Option<f64>,
    /// Grid: skip the false-alarm cells (delays and fleet only).
    #[arg(long)]
    pub grid_no_alarms: bool,
    /// Grid: each alarm's estimate of the intra-unit correlation starts from the watch's own
    /// units only, not also from its version's training anchors' units (as the service did
    /// before it kept them).
    #[arg(long)]
    pub grid_no_history: bool,
    /// The labelling designs instead (issue 57's table): false alarms, the fleet alert and
    /// delays where raters differ, return, drift or are not named (`--grid-runs`,
    /// `--grid-horizon`, `--grid-fleet`, `--grid-fleets` apply; `--designs-only` picks rows
    /// by number, from 1).
    #[arg(long)]
    pub designs: bool,
    #[arg(long, value_delimiter = ',')]
    pub designs_only: Vec<usize>,
    /// Designs: watches per delay cell.
    #[arg(long, default_value_t = 400)]
    pub designs_delay_runs: usize,
    /// Designs: the judge's shift whose delay is measured, in reference sd.
    #[arg(long, default_value_t = 0.5)]
    pub designs_shift: f64,
}

pub(super) fn drift(a: DriftArgs) -> Result<(), String> {
    use crate::drift::{self, DriftOptions as Options};
    let mut candidates = judgecal_stats::Candidates::default();
    a.flow.apply(&mut candidates.flow);
    if a.grid {
        return grid(a, candidates);
    }
    if a.designs {
        return designs(a, candidates);
    }
    let methods = if a.methods.is_empty() {
        vec![
            "bayes".into(),
            "isotonic".into(),
            "quantile_map".into(),
            "raw".into(),
        ]
    } else {
        a.methods
    };
    let opts = Options {
        hanna: a.hanna,
        synthetic: a.synthetic,
        anchors: a.anchors,
        batch: a.batch.max(1),
        watch: a.watch,
        methods: judgecal::cli::evaluate::methods(&methods)?,
        candidates,
        seed: a.seed,
    };
    let started = std::time::Instant::now();
    let rows = drift::run(&opts, &|step| eprintln!("{step}"))?;
    print!("{}", drift::table(&rows, &opts));
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn grid(a: DriftArgs, candidates: judgecal_stats::Candidates) -> Result<(), String> {
    use crate::drift::grid::{self, GridOptions};
    let method = match a.methods.first() {
        Some(m) => judgecal_stats::Method::parse(m)?,
        None => judgecal_stats::Method::QuantileMap,
    };
    let opts = GridOptions {
        runs: a.grid_runs,
        horizon: a.grid_horizon,
        healthy: 1000,
        cap: 10_000,
        batches: a.grid_batches.iter().map(|&b| b.max(1)).collect(),
        per_rater: a.grid_per_rater.iter().map(|&b| b.max(1)).collect(),
        method,
        candidates,
        train: a.anchors.max(200),
        fleet: a.grid_fleet,
        fleets: a.grid_fleets,
        fleet_horizon: 5000,
        max_rho: a.grid_max_rho,
        history: !a.grid_no_history,
        seed: a.seed,
    };
    let started = std::time::Instant::now();
    let progress = |s: &str| eprintln!("{s}");
    let worlds = [grid::world(&opts, true)?, grid::world(&opts, false)?];
    let (mut alarms, mut delays) = (Vec::new(), Vec::new());
    for w in &worlds {
        if !a.grid_no_alarms {
            alarms.extend(grid::alarms(&opts, w, &progress));
        }
        delays.extend(grid::delays(&opts, w));
        progress(&format!(
            "{}: delays ({:.0} s)",
            w.reference,
            started.elapsed().as_secs_f64()
        ));
    }
    let fleet = (opts.fleet > 0).then(|| grid::fleet(&opts, &worlds[1], 120));
    print!(
        "{}",
        grid::table(&opts, &worlds, &alarms, &delays, fleet.as_ref())
    );
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn designs(a: DriftArgs, candidates: judgecal_stats::Candidates) -> Result<(), String> {
    use crate::drift::designs::{self, LabellingDesign as Design};
    use crate::drift::world::{self, Version};
    let version = Version {
        method: judgecal_stats::Method::QuantileMap,
        candidates: &candidates,
        train: a.anchors.max(200),
        seed: a.seed,
        shift: a.designs_shift,
    };
    let opts = designs::DesignOptions {
        runs: a.grid_runs,
        horizon: a.grid_horizon,
        fleet: a.grid_fleet,
        fleets: a.grid_fleets,
        fleet_horizon: 5000,
        delay_runs: a.designs_delay_runs,
        healthy: 1000,
        cap: 10_000,
        seed: a.seed,
        shift: a.designs_shift,
    };
    let all = Design::all();
    let chosen: Vec<Design> = if a.designs_only.is_empty() {
        all
    } else {
        a.designs_only
            .iter()
            .filter_map(|&k| all.get(k.wrapping_sub(1)).copied())
            .collect()
    };
    let started = std::time::Instant::now();
    let progress = |s: &str| eprintln!("{s}");
    let mut rows = Vec::new();
    for integer in [true, false] {
        let w = world::world(version, integer)?;
        rows.extend(designs::run(&opts, &w, &chosen, &progress));
    }
    print!("{}", designs::table(&opts, &rows));
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
