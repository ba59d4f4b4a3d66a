//! judgecal's research harnesses, run by the `judgecal-study` binary: the paper's synthetic
//! study (`experiment`, its tables and figures), how often the run-level intervals cover
//! (`coverage`, `systems`, `rank`), how often each method's predictive interval covers new items
//! (`intervals`), how often the drift alarm fires on healthy cells and how soon on drifting ones
//! (`drift`), judge-version bridges (`bridge`), the sampler's gate (`gate`) and panels (`panel`).
//! They use the same correctors and metrics as the service (`judgecal_stats`), with no database.

pub mod bridge;
pub mod cli;
pub mod covariates;
pub mod covariates_runs;
pub mod design;
pub mod drift;
pub mod experiment;
pub mod figures;
pub mod gate;
pub mod grid;
pub mod intervals;
pub mod llmbar;
pub mod new_group;
pub mod pairwise;
pub mod pairwise_grid;
pub mod panel;
pub mod panel_grid;
pub mod panel_plan;
pub mod rank;
pub mod repeats;
pub mod runlevel;
pub mod sources;
pub mod synthetic;
pub mod systems;

/// Runs `work(thread, threads)` on every core and gathers the results.
pub(crate) fn parallel<T: Send>(work: impl Fn(usize, usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let work = &work;
                s.spawn(move || work(t, threads))
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}
