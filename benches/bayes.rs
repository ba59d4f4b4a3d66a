//! Bayesian fit speed: one rubric × 1,500 anchors, and one judge with 20 rubrics × 1,500
//! anchors, each 2 chains × (500 warm-up + 1,000 draws) at target acceptance 0.9.
//!
//!     cargo bench --bench bayes

use std::time::Instant;

use judgecal_stats::bayes::{FitOptions, SufficientStats, fit};

/// Anchors on a deterministic grid with bounded noise; the fit's speed does not depend on it.
fn stats(rubric: usize, n: usize) -> SufficientStats {
    SufficientStats::from_pairs((0..n).map(|i| {
        let j = 1.0 + 4.0 * ((i * 7919 + rubric * 31) % n) as f64 / n as f64;
        let noise = (((i * 104_729 + rubric) % 997) as f64 / 997.0 - 0.5) * 1.2;
        (
            j,
            0.8 + 0.05 * rubric as f64 + (0.85 - 0.01 * rubric as f64) * j + noise,
        )
    }))
}

fn time(label: &str, rubrics: usize) {
    let stats: Vec<SufficientStats> = (0..rubrics).map(|r| stats(r, 1500)).collect();
    let mut times = Vec::new();
    let mut passed = 0;
    let mut worst_rhat = 0.0_f64;
    let mut worst_ess = f64::INFINITY;
    for seed in 0..5 {
        let opts = FitOptions {
            seed,
            ..FitOptions::default()
        };
        let started = Instant::now();
        let f = fit(&stats, &opts, &|_| {}).expect("fit");
        times.push(started.elapsed().as_secs_f64() * 1e3);
        passed += usize::from(f.diagnostics.failure().is_none());
        worst_rhat = worst_rhat.max(f.diagnostics.rhat_max);
        worst_ess = worst_ess.min(f.diagnostics.ess_bulk_min);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "bayes fit {label}: median {:.1} ms, best {:.1} ms over 5 seeds; {passed}/5 pass diagnostics (worst R-hat {worst_rhat:.4}, worst bulk ESS {worst_ess:.0})",
        times[2], times[0]
    );
}

fn main() {
    time("1 rubric  x 1500 anchors", 1);
    time("20 rubrics x 1500 anchors", 20);
}
