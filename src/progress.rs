//! A progress bar for long offline runs (`judgecal evaluate` and the studies).

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
