//! The studies' subcommands: their arguments, and each run as a function that prints its
//! tables.

use std::path::PathBuf;

use judgecal::cli::evaluate::{FlowArgs, methods, write_json};

#[derive(Debug, clap::Args)]
pub struct ExperimentArgs {
    /// Reference scores from this CSV (with --column); default: the built-in stand-in.
    #[arg(long, requires = "column", conflicts_with = "pairs")]
    pub reference: Option<PathBuf>,
    /// The numeric column of --reference holding the reference scores.
    #[arg(long)]
    pub column: Option<String>,
    /// A given split instead of a synthesised one: columns split,order,judge,reference.
    #[arg(long)]
    pub pairs: Option<PathBuf>,
    /// First seed (the judge's noise, the reference draw and the split).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run this many seeds and print Table 2 (mean and sd per method).
    #[arg(long, default_value_t = 1)]
    pub seeds: usize,
    /// Held-out test items.
    #[arg(long, default_value_t = 200)]
    pub test: usize,
    /// Training pool; budget n trains on its first n items.
    #[arg(long, default_value_t = 1500)]
    pub pool: usize,
    #[arg(long, value_delimiter = ',', default_value = "100,1500")]
    pub budgets: Vec<usize>,
    /// Budgets of Figure 4 (with --figures).
    #[arg(long, value_delimiter = ',', default_value = "50,100,200,400,800,1500")]
    pub sweep: Vec<usize>,
    /// Methods by name (raw is the identity); the default is every method.
    #[arg(long, value_delimiter = ',')]
    pub methods: Vec<String>,
    #[command(flatten)]
    pub flow: FlowArgs,
    /// The rubric's scale: min,max.
    #[arg(long, value_delimiter = ',', default_value = "1,5")]
    pub scale: Vec<f64>,
    /// Where Table 1 (and Table 2) go as JSON.
    #[arg(long, default_value = "experiment.json")]
    pub json: PathBuf,
    /// Write the paper's four figures (SVG and PNG) into this folder.
    #[arg(long)]
    pub figures: Option<PathBuf>,
    #[command(flatten)]
    pub judge: crate::synthetic::JudgeModel,
}

#[derive(Debug, clap::Args)]
pub struct CoverageArgs {
    /// Replications per setting.
    #[arg(long, default_value_t = 500)]
    pub reps: usize,
    #[arg(long, value_delimiter = ',', default_value = "100,1500")]
    pub anchors: Vec<usize>,
    #[arg(long, value_delimiter = ',', default_value = "200,5000")]
    pub runs: Vec<usize>,
    /// Methods by name; default: every method /v1/estimate serves with its corrector term
    /// (bayes, isotonic, quantile_map, identity; the flow leaves its term out).
    #[arg(long, value_delimiter = ',')]
    pub methods: Vec<String>,
    /// Refits per resampled corrector term.
    #[arg(long, default_value_t = 200)]
    pub refits: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// The grid where intervals could break instead (weak judges, an integer scale, groups
    /// with their own bias, few labels, clusters), with the first of `--methods` (default
    /// bayes) and `--reps` replications per cell.
    #[arg(long)]
    pub grid: bool,
    /// With --grid or --repeats: only the rows whose label contains one of these texts
    /// (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// A new system's run alone: the served group term beside a rule calibrated per answer
    /// (not served), over the between-system spread, `--reps` replications per cell.
    #[arg(long)]
    pub new_group: bool,
    /// Runs of known systems whose items the judge scored several times: the top, bottom
    /// and middle of six systems, read around their own anchor mean (served) beside the
    /// pooled mean, with the first of `--methods` (default bayes), `--reps` replications a row.
    #[arg(long)]
    pub repeats: bool,
}

#[derive(Debug, clap::Args)]
pub struct IntervalsArgs {
    #[arg(long, default_value_t = 5)]
    pub seeds: usize,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, default_value_t = 1500)]
    pub anchors: usize,
    /// Fresh test items per seed.
    #[arg(long, default_value_t = 20000)]
    pub test: usize,
    /// Methods by name (raw is the identity), and `auto`; default: every method and `auto`.
    #[arg(long, value_delimiter = ',')]
    pub methods: Vec<String>,
    #[command(flatten)]
    pub flow: FlowArgs,
}

#[derive(Debug, clap::Args)]
pub struct SystemsArgs {
    /// HANNA in long form (../shared/data/hanna/hanna_long.csv).
    #[arg(long)]
    pub data: PathBuf,
    #[arg(long, default_value = "ChatGPT")]
    pub judge: String,
    #[arg(long, default_value = "1")]
    pub variant: String,
    #[arg(long, default_value = "Coherence")]
    pub rubric: String,
    #[arg(long, default_value = "bayes")]
    pub method: String,
    /// Items of each system's run labelled at random for the labelled column.
    #[arg(long, default_value_t = 12)]
    pub labels: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Every pair of systems, for every judge and rubric: how often the plain comparison
    /// covers the human difference, before and with each system a group.
    #[arg(long)]
    pub pairs: bool,
    /// With --pairs: also each system left out of the anchors in turn and compared, as a new
    /// system, with every other (11 fits per judge and rubric).
    #[arg(long)]
    pub new_systems: bool,
    /// With --pairs: also the five judges as one panel (their stacked score, `judgecal-study panel`),
    /// corrected and compared as each judge is.
    #[arg(long)]
    pub panel: bool,
}

pub(super) fn systems(a: SystemsArgs) -> Result<(), String> {
    use crate::systems;
    let method = judgecal_stats::Method::parse(&a.method)?;
    if a.pairs {
        let rows = if a.panel {
            let sampler = judgecal_stats::bayes::FitOptions {
                seed: a.seed,
                ..Default::default()
            };
            crate::panel::pairs_with_panel(
                &a.data,
                &a.variant,
                method,
                a.seed,
                a.new_systems,
                &sampler,
            )?
        } else {
            systems::pairs(&a.data, &a.variant, method, a.seed, a.new_systems)?
        };
        print!("{}", systems::pairs_table(&rows));
        return Ok(());
    }
    let rows = systems::systems(
        &a.data, &a.judge, &a.variant, &a.rubric, method, a.labels, a.seed,
    )?;
    print!("{}", systems::systems_table(&rows));
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct RankArgs {
    /// Replications per cell of the grid (K = 4, 12, 24; bias sd 0, 0.2; slope 0.2, 0.8; and
    /// with bias sd 0.2 on a skewed integer 1–5 scale).
    #[arg(long, default_value_t = 400)]
    pub reps: usize,
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Worlds per cell for the labels each design needs (K = 12 and 24, bias sd 0.2); 0 skips it.
    #[arg(long, default_value_t = 10)]
    pub label_reps: usize,
    /// Skip the grid (only the labels study, or HANNA).
    #[arg(long)]
    pub no_grid: bool,
    /// Only the cells with this judge slope (0.2 or 0.8).
    #[arg(long)]
    pub slope: Option<f64>,
    /// Only the cells with this many systems (4, 12 or 24; the labels study has 12 and 24).
    #[arg(long)]
    pub systems: Option<usize>,
    /// Only the grid's cells on the continuous scale (`false`) or the integer one (`true`).
    #[arg(long)]
    pub discrete: Option<bool>,
    /// Measure the plan the allocation makes for a budget (the smallest budget that
    /// settles), not its own plan scaled.
    #[arg(long)]
    pub by_budget: bool,
    /// Looks the labelling user takes in the labels study and on HANNA: a first sample,
    /// looks − 3 steps, the rest, and the last look (each at 1 − 0.05/looks).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(3..=10))]
    pub looks: u64,
    /// Only the re-asking user: 4 equal systems, labels at 20/40/80/160, the ranking asked
    /// again after each batch, through /v1/rank's defaults and through a ranking session
    /// (`reps` replications a world).
    #[arg(long)]
    pub reasking: bool,
    /// Only the outlying system: a labelled run of a new system 2.5 τ from the anchors'
    /// systems (or a normal draw) in a ranking, 3/5/10/20 labels (`reps` replications a cell).
    #[arg(long)]
    pub outlier: bool,
    /// Also the floor: each run's fewest labels that settle with every other run fully
    /// labelled (knowing the references), summed: what no design of per-run counts beats.
    #[arg(long)]
    pub floor: bool,
    /// The labels study's first world (worlds are numbered from 0).
    #[arg(long, default_value_t = 0)]
    pub first_world: usize,
    /// HANNA in long form (../shared/data/hanna/hanna_long.csv): rank its systems instead.
    #[arg(long)]
    pub hanna: Option<PathBuf>,
    #[arg(long, default_value = "1")]
    pub variant: String,
    /// With --hanna: labels per system for the labelled column.
    #[arg(long, default_value_t = 10)]
    pub labels: usize,
    /// With --hanna: label samples for the labelled column (each a fresh random set of
    /// stories); with --label-reps 0 the labels each design needs are skipped.
    #[arg(long, default_value_t = 1)]
    pub samples: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub(super) fn rank(a: RankArgs) -> Result<(), String> {
    use crate::rank;
    let started = std::time::Instant::now();
    if a.outlier {
        rank_outlier(&a)?;
        eprintln!("{:.0} s", started.elapsed().as_secs_f64());
        return Ok(());
    }
    if a.reasking {
        rank_reasking(&a)?;
        eprintln!("{:.0} s", started.elapsed().as_secs_f64());
        return Ok(());
    }
    let design = rank::LabelDesign {
        by_budget: a.by_budget,
        looks: a.looks as usize,
        floor: a.floor,
    };
    if let Some(path) = &a.hanna {
        let design = (a.label_reps > 0).then_some(design);
        let looks = a.looks as usize;
        let rows = rank::hanna(path, &a.variant, a.labels, a.samples, a.seed, design, looks)?;
        print!("{}", rank::hanna_table(&rows, a.labels));
        let needed: Vec<rank::Needed> = rows.iter().filter_map(|r| r.needed).collect();
        if let Some(line) = rank::floor_line(&needed) {
            println!("\n{line}");
        }
        eprintln!("{:.0} s", started.elapsed().as_secs_f64());
        return Ok(());
    }
    if !a.no_grid {
        let cells: Vec<rank::RankWorld> = rank::cells()
            .into_iter()
            .filter(|w| {
                a.slope.is_none_or(|s| s == w.slope)
                    && a.systems.is_none_or(|k| k == w.systems)
                    && a.discrete.is_none_or(|d| d == w.discrete)
            })
            .collect();
        let rows = rank::run(&cells, a.reps, a.threads, &|_| {})?;
        print!("{}", rank::table(&rows));
        eprintln!("grid: {:.0} s", started.elapsed().as_secs_f64());
    }
    if a.label_reps > 0 {
        rank_labels(&a, design)?;
        eprintln!("{:.0} s", started.elapsed().as_secs_f64());
    }
    Ok(())
}

/// The outlier study: a run unlike every other.
fn rank_outlier(a: &RankArgs) -> Result<(), String> {
    use crate::rank;
    use rank::outlier::{cells, outlier};
    println!(
        "| cell | replications | the new run's interval covers | wrong claims | mean width |\n|---|---:|---:|---:|---:|"
    );
    for w in cells() {
        let c = outlier(w, a.reps)?;
        println!(
            "| {} | {} | {:.1}% | {:.1}% | {:.3} |",
            w.label(),
            c.reps,
            100.0 * c.rate(c.covered),
            100.0 * c.rate(c.wrong),
            c.width / c.reps.max(1) as f64
        );
    }
    Ok(())
}

/// The re-asking study: /v1/rank at every look against a session.
fn rank_reasking(a: &RankArgs) -> Result<(), String> {
    use crate::rank;
    use rank::reasking::{ReWorld, reasking};
    println!(
        "| judge slope | bias sd | items a run | replications | /v1/rank at every look | through a session | session, stopping at the first resolved pair |\n|---:|---:|---:|---:|---:|---:|---:|"
    );
    for slope in [0.2, 0.8] {
        for (tau, run) in [(0.0, 200), (0.0, 1000), (0.3, 1000)] {
            let w = ReWorld { slope, tau, run };
            let r = reasking(w, a.reps, a.threads)?;
            println!(
                "| {slope} | {tau} | {run} | {} | {:.1}% | {:.1}% | {:.1}% |",
                r.reps,
                100.0 * r.rate(r.plain),
                100.0 * r.rate(r.session),
                100.0 * r.rate(r.stopping)
            );
        }
    }
    Ok(())
}

/// The labels study: labels each design needs to resolve every gap over 0.1.
fn rank_labels(a: &RankArgs, design: crate::rank::LabelDesign) -> Result<(), String> {
    use crate::rank;
    println!(
        "\n| cell | worlds | labels to resolve every gap > 0.1: planned shape, uniform | fewer |\n|---|---:|---:|---:|"
    );
    for w in rank::cells().into_iter().filter(|w| {
        w.systems >= 12
            && w.tau > 0.0
            && !w.discrete
            && a.slope.is_none_or(|s| s == w.slope)
            && a.systems.is_none_or(|k| k == w.systems)
    }) {
        let worlds = a.first_world..a.first_world + a.label_reps;
        let needed = rank::labels(&w, worlds.clone(), a.threads, design)?;
        for (x, world) in needed.iter().zip(worlds) {
            eprintln!("{} world {world}: {x:?}", w.label());
        }
        let (p, u, n) = rank::totals(&needed);
        println!(
            "| {} | {n} of {} | {:.0}, {:.0} | {:.0}% |",
            w.label(),
            needed.len(),
            p as f64 / n.max(1) as f64,
            u as f64 / n.max(1) as f64,
            100.0 * (1.0 - p as f64 / u.max(1) as f64)
        );
        if let Some(line) = rank::floor_line(&needed) {
            println!("\n{}: {line}\n", w.label());
        }
        println!("\n{}: {}\n", w.label(), rank::bound_line(&needed));
    }
    Ok(())
}

pub(super) fn intervals(a: IntervalsArgs) -> Result<(), String> {
    use crate::intervals::{self, IntervalOptions as Options};
    let mut candidates = judgecal_stats::Candidates::default();
    a.flow.apply(&mut candidates.flow);
    // `auto` is not a method: it is a row of its own, after the methods named with it.
    let named: Vec<String> = a
        .methods
        .iter()
        .filter(|m| m.trim() != "auto")
        .cloned()
        .collect();
    let opts = Options {
        seeds: a.seeds,
        seed: a.seed,
        anchors: a.anchors,
        test: a.test,
        methods: if named.is_empty() && !a.methods.is_empty() {
            vec![]
        } else {
            methods(&named)?
        },
        auto: a.methods.len() != named.len() || a.methods.is_empty(),
        candidates,
        judge: crate::synthetic::JudgeModel::default(),
    };
    let started = std::time::Instant::now();
    let rows = intervals::run(&opts, &|step| eprintln!("{step}"))?;
    print!("{}", intervals::table(&rows, &opts));
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

pub(super) fn coverage(a: CoverageArgs) -> Result<(), String> {
    use crate::runlevel::{self, RunLevelOptions as Options};
    if a.new_group {
        let started = std::time::Instant::now();
        print!("{}", crate::new_group::table(a.reps, a.seed));
        eprintln!(
            "{} replications per cell in {:.0} s",
            a.reps,
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    let method = match a.methods.first() {
        Some(m) => judgecal_stats::Method::parse(m)?,
        None => judgecal_stats::Method::Bayes,
    };
    if a.repeats {
        let started = std::time::Instant::now();
        let mut worlds = crate::repeats::worlds();
        if !a.only.is_empty() {
            worlds.retain(|w| a.only.iter().any(|o| w.label().contains(o.as_str())));
        }
        let rows = crate::repeats::run(&worlds, method, a.reps, &|line| eprintln!("{line}"))?;
        print!("{}", crate::repeats::table(&rows));
        eprintln!(
            "{method}, {} replications a row in {:.0} s",
            a.reps,
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    if a.grid {
        let started = std::time::Instant::now();
        let mut cells = crate::grid::cells();
        if !a.only.is_empty() {
            cells.retain(|c| a.only.iter().any(|o| c.label().contains(o.as_str())));
        }
        let rows = crate::grid::run(&cells, method, a.reps, a.threads, &|line| {
            eprintln!("{line}")
        })?;
        print!("{}", crate::grid::table(&rows));
        eprintln!(
            "{method}, {} replications per cell in {:.0} s",
            a.reps,
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    let defaults = Options::default();
    let opts = Options {
        reps: a.reps,
        anchors: a.anchors,
        runs: a.runs,
        methods: if a.methods.is_empty() {
            defaults.methods.clone()
        } else {
            methods(&a.methods)?
        },
        refits: a.refits,
        seed: a.seed,
        threads: a.threads,
        ..defaults
    };
    let started = std::time::Instant::now();
    let rows = runlevel::run(&opts)?;
    print!("{}", runlevel::table(&rows, opts.level));
    eprintln!(
        "{} replications in {:.0} s",
        opts.reps,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

pub(super) fn experiment(a: ExperimentArgs) -> Result<(), String> {
    use crate::experiment::{self, Source, StudyOptions as Options};
    let [lo, hi] = a.scale[..] else {
        return Err("--scale takes min,max".into());
    };
    let source = match (a.pairs, a.reference, a.column) {
        (Some(p), _, _) => Source::Pairs(p),
        (None, Some(file), Some(column)) => Source::Column { file, column },
        _ => Source::StandIn,
    };
    let opts = Options {
        source,
        judge: a.judge,
        scale: (lo, hi),
        seed: a.seed,
        seeds: a.seeds,
        test: a.test,
        pool: a.pool,
        budgets: a.budgets,
        sweep: a.sweep,
        methods: methods(&a.methods)?,
        settings: Default::default(),
        flow_preset: a.flow.flow_preset,
        flow_epochs: a.flow.flow_epochs,
    };
    let report = experiment::run(opts, a.figures.as_deref())?;
    println!(
        "Table 1 (seed {}; on the test items; KL(ŷ‖y) is the paper's column, KL mean the mean of both directions)",
        a.seed
    );
    print!("{}", experiment::table1(&report.table1));
    if !report.table2.is_empty() {
        println!("\nTable 2 (mean ± sd over {} seeds)", a.seeds);
        print!("{}", experiment::table2(&report.table2));
    }
    write_json(&a.json, &report)?;
    println!("\nwrote {}", a.json.display());
    if let Some(dir) = a.figures {
        println!("wrote figures 1-4 (SVG and PNG) to {}", dir.display());
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct BridgeArgs {
    /// Bridge sizes (shared items).
    #[arg(long, value_delimiter = ',', default_value = "50,100,200,500")]
    pub sizes: Vec<usize>,
    #[arg(long, default_value_t = 400)]
    pub replications: usize,
    /// The judge's repeat noise: the sd of one scoring around the judge's own score of the
    /// item.
    #[arg(long, default_value_t = 0.25)]
    pub repeat_noise: f64,
    /// Watches per change in the drift alarm's delay.
    #[arg(long, default_value_t = 20)]
    pub watches: usize,
    /// The drift alarm's miss bound (a version of 1,000 anchors bounds its 95% band's misses
    /// at about this).
    #[arg(long, default_value_t = 0.065)]
    pub miss_bound: f64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub(super) fn bridge(a: BridgeArgs) -> Result<(), String> {
    use crate::bridge::{self, BridgeOptions as Options, Change};
    let judge = crate::synthetic::JudgeModel::default();
    let opts = Options {
        sizes: a.sizes,
        replications: a.replications.max(1),
        repeat_noise: a.repeat_noise,
        seed: a.seed,
        ..Options::default()
    };
    let started = std::time::Instant::now();
    let rows = bridge::run(&opts, &judge);
    let tolerance = judgecal_stats::bridge::TOLERANCE_SHARE * 4.0;
    println!("{}", bridge::table(&rows, tolerance));
    // How soon each check sees a change.
    let sizes = [25, 50, 100, 200, 500, 1000, 2000];
    let delays = Options {
        sizes: sizes.to_vec(),
        replications: (opts.replications / 2).max(1),
        ..opts.clone()
    };
    println!(
        "\nHow soon each check sees a change. The door check: at once, whenever the scores name a judge version with no calibration. The silent-change check: the fewest re-scored items (of {sizes:?}) at which it says `refit` in at least 80% of {} checks. The drift alarm: labelled anchors of the changed judge in batches of {}, against version A's 95% band at miss bound {}, median anchors to the alarm over {} watches (capped at 5,000).\n\n\
         | change | door check | silent-change check (re-scored items, no labels) | drift alarm (labelled anchors) |\n|---|---|---:|---:|",
        delays.replications, opts.batch, a.miss_bound, a.watches
    );
    for change in [
        Change::Shift(0.3),
        Change::Shift(0.5),
        Change::TopEnd(0.8),
        Change::Slope(1.2),
    ] {
        let one = bridge::run_one(&delays, &judge, change);
        let check = one
            .iter()
            .find(|r| r.refit >= 0.8)
            .map_or(format!("> {}", sizes[sizes.len() - 1]), |r| {
                r.size.to_string()
            });
        let mut alarms = bridge::drift_delay(&opts, &judge, change, a.miss_bound, a.watches, 5000);
        alarms.sort();
        let fired: Vec<u64> = alarms.iter().flatten().copied().collect();
        let median = if fired.len() * 2 > alarms.len() {
            fired[alarms.len() / 2 - (alarms.len() - fired.len())].to_string()
        } else {
            "> 5000".into()
        };
        println!(
            "| {} | immediate | {check} | {median} ({} of {} fired) |",
            change.label(),
            fired.len(),
            alarms.len()
        );
    }
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// An anchors CSV with groups: judge,rubric,item_id,judge_score,reference_score,group.
    #[arg(long, default_value = "demo/hanna/anchors.csv")]
    pub anchors: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub(super) fn gate(a: GateArgs) -> Result<(), String> {
    let started = std::time::Instant::now();
    let rows = crate::gate::run(&a.anchors, a.seed)?;
    print!("{}", crate::gate::table(&rows));
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
