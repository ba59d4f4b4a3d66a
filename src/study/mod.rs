//! The command-line studies: `judgecal experiment` (the paper's synthetic study, its tables
//! and figures), `judgecal evaluate` (every method cross-validated on an anchors file) and
//! `judgecal coverage` (how often the run-level intervals cover) and `judgecal intervals` (how
//! often each method's predictive interval covers new items) and `judgecal drift` (how often
//! the drift alarm fires on healthy cells, and how soon on drifting ones).
//! They use the same correctors and metrics as the service, with no database.

pub mod bridge;
pub mod design;
pub mod drift;
pub mod evaluate;
pub mod experiment;
pub mod figures;
pub mod gate;
pub mod grid;
pub mod intervals;
pub mod new_group;
pub mod panel;
pub mod panel_grid;
pub mod panel_plan;
pub mod rank;
pub mod runlevel;
pub mod sources;
pub mod synthetic;
pub mod systems;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar over a run's fits, on stderr; hidden when stderr is not a terminal.
pub struct Bars {
    bar: ProgressBar,
    done: std::sync::atomic::AtomicU64,
}

/// Ticks per fit: the bar moves within a fit as the fit reports.
const TICKS: u64 = 100;

impl Bars {
    pub fn new(fits: u64) -> Self {
        let bar = ProgressBar::new(fits.max(1) * TICKS);
        if let Ok(style) = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {percent:>3}% eta {eta} {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        Self {
            bar,
            done: Default::default(),
        }
    }

    /// A fit starts.
    pub fn fit(&self, what: &str) {
        self.bar.set_message(what.to_owned());
    }

    /// The current fit is `share` (0 to 1) done.
    pub fn within(&self, share: f64) {
        let done = self.done.load(std::sync::atomic::Ordering::Relaxed);
        self.bar
            .set_position(done * TICKS + (share.clamp(0.0, 1.0) * TICKS as f64) as u64);
    }

    /// The current fit is done.
    pub fn done(&self) {
        let done = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        self.bar.set_position(done * TICKS);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

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
