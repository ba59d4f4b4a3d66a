//! `judgecal-study covariates`: the input layer on judges with a known length bias.

use std::path::PathBuf;

use judgecal::cli::evaluate::write_json;
use judgecal_stats::bayes::FitOptions;

use crate::covariates::{self, CovariateDesign as Design};

#[derive(Debug, clap::Args)]
pub struct CovariatesArgs {
    /// Replications per design.
    #[arg(long, default_value_t = 200)]
    pub reps: usize,
    /// Anchor counts (every bias and reference scale is run at each).
    #[arg(long, value_delimiter = ',', default_value = "200,1000,5000")]
    pub anchors: Vec<usize>,
    /// The judges' length biases, in reference sds per sd of log length.
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.2,0")]
    pub biases: Vec<f64>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Instead of the simulation: LLMBar's pairwise sets in this folder
    /// (../shared/data/llmbar), each judge's verdicts with the answers' length ratio.
    #[arg(long)]
    pub llmbar: Option<PathBuf>,
    /// Instead of the input layer's designs: run-level answers with covariates (a run's own
    /// estimate, the length held, a compare) in the worlds where they could break.
    #[arg(long)]
    pub runs: bool,
    /// Also write the outcomes as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub(super) fn covariates(a: CovariatesArgs) -> Result<(), String> {
    let started = std::time::Instant::now();
    if let Some(dir) = &a.llmbar {
        print!("{}", crate::llmbar::report(dir, a.seed)?);
        eprintln!("{:.0} s", started.elapsed().as_secs_f64());
        return Ok(());
    }
    if a.runs {
        let worlds = crate::covariates_runs::worlds();
        let per_thread = crate::parallel(|t, threads| {
            worlds
                .iter()
                .enumerate()
                .filter(|(i, _)| i % threads == t)
                .map(|(i, w)| {
                    (
                        i,
                        crate::covariates_runs::run(*w, a.reps, a.seed.wrapping_add(i as u64)),
                    )
                })
                .collect::<Vec<_>>()
        });
        let mut rows: Vec<_> = per_thread.into_iter().flatten().collect();
        rows.sort_by_key(|(i, _)| *i);
        let rows = rows
            .into_iter()
            .map(|(_, r)| r)
            .collect::<Result<Vec<_>, String>>()?;
        print!("{}", crate::covariates_runs::table(&rows));
        if let Some(path) = a.json {
            write_json(&path, &rows)?;
        }
        eprintln!("{:.0} s", started.elapsed().as_secs_f64());
        return Ok(());
    }
    let designs: Vec<Design> = covariates::designs()
        .into_iter()
        .filter(|d| {
            a.anchors.contains(&d.anchors) && a.biases.iter().any(|b| (b - d.bias).abs() < 1e-9)
        })
        .collect();
    if designs.is_empty() {
        return Err("no design matches --anchors and --biases".into());
    }
    let per_thread = crate::parallel(|t, threads| {
        designs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % threads == t)
            .map(|(i, d)| {
                (
                    i,
                    covariates::run(
                        *d,
                        a.reps,
                        a.seed.wrapping_add(i as u64),
                        FitOptions::default(),
                    ),
                )
            })
            .collect::<Vec<_>>()
    });
    let mut rows: Vec<_> = per_thread.into_iter().flatten().collect();
    rows.sort_by_key(|(i, _)| *i);
    let rows: Vec<_> = rows.into_iter().map(|(_, r)| r).collect();
    print!("{}", covariates::table(&rows));
    if let Some(path) = a.json {
        write_json(&path, &rows)?;
    }
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
