//! A new system's run: the served group term beside the calibrated rule of
//! `runlevel::new_group`, by simulation over the between-system spread τ
//! (`judgecal-study coverage --new-group`).
//!
//! Each replication draws G systems' anchors (their held-out residuals: the system's bias
//! u_g ~ N(0, τ²) plus noise of sd 0.5), measures the groups as a version does
//! ([`GroupBias::of`]), and asks for a new system's bias with the answer's other variance v (the
//! run's sampling and the corrector's). The truth is a fresh system's bias plus N(0, v).

use judgecal_stats::rng::{Rng, SeedableRng};
use judgecal_stats::runlevel::groups::GroupBias;
use judgecal_stats::runlevel::new_group::{NewGroupRule, Rules};
use judgecal_stats::stats::standard_normal;

/// One design: anchors per system, and the answer's other variance.
#[derive(Debug, Clone, PartialEq)]
pub struct NewGroupDesign {
    pub label: &'static str,
    pub anchors: Vec<usize>,
    pub extra: f64,
}

/// The designs the study runs: the panel grid's (8 systems of 40, a run of 100), unequal
/// systems, 5 systems, 20 systems with a run of 1,000, and a run of 5,000 (v small).
pub fn designs() -> Vec<NewGroupDesign> {
    vec![
        NewGroupDesign {
            label: "8 systems × 40, run of 100",
            anchors: vec![40; 8],
            extra: 0.0033,
        },
        NewGroupDesign {
            label: "8 systems × 15–100, run of 100",
            anchors: vec![15, 85, 40, 100, 20, 60, 30, 70],
            extra: 0.0033,
        },
        NewGroupDesign {
            label: "5 systems × 40, run of 100",
            anchors: vec![40; 5],
            extra: 0.0033,
        },
        NewGroupDesign {
            label: "20 systems × 20–80, run of 1,000",
            anchors: (0..20).map(|i| 20 + 3 * i).collect(),
            extra: 0.0011,
        },
        NewGroupDesign {
            label: "8 systems × 40, run of 5,000",
            anchors: vec![40; 8],
            extra: 0.0003,
        },
    ]
}

/// How both intervals fared in one design at one τ.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Fared {
    pub served: f64,
    pub served_width: f64,
    pub rule: f64,
    pub rule_width: f64,
}

/// `reps` replications of `design` at spread `tau`.
pub fn fare(design: &NewGroupDesign, tau: f64, reps: usize, seed: u64, rules: &mut Rules) -> Fared {
    let mut rng = Rng::seed_from_u64(seed);
    let mut out = Fared::default();
    let g = design.anchors.len();
    for _ in 0..reps {
        let (mut residuals, mut names) = (Vec::new(), Vec::new());
        for (i, &k) in design.anchors.iter().enumerate() {
            let u = tau * standard_normal(&mut rng);
            for _ in 0..k {
                residuals.push(u + 0.5 * standard_normal(&mut rng));
                names.push(format!("s{i}"));
            }
        }
        let names: Vec<Option<&str>> = names.iter().map(|s| Some(s.as_str())).collect();
        let Some(bias) = GroupBias::of(&residuals, &names) else {
            continue;
        };
        let truth =
            tau * standard_normal(&mut rng) + design.extra.sqrt() * standard_normal(&mut rng);
        let shift = bias.shift(None);
        let (lo, hi) = (
            shift.quantile(0.025, design.extra),
            shift.quantile(0.975, design.extra),
        );
        out.served += f64::from(u8::from(lo <= truth && truth <= hi));
        out.served_width += hi - lo;
        let rule = rules.get(g, bias.mean_square_error, design.extra, 0.95);
        let h = rule.half_width(g, bias.mean_square_error, design.extra, bias.spread);
        out.rule += f64::from(u8::from((truth - bias.mean).abs() <= h));
        out.rule_width += 2.0 * h;
    }
    let n = reps.max(1) as f64;
    Fared {
        served: out.served / n,
        served_width: out.served_width / n,
        rule: out.rule / n,
        rule_width: out.rule_width / n,
    }
}

/// Every design at τ = 0, 0.04, 0.08, 0.13, 0.2 and 0.3, as a Markdown table; then the
/// coverage range the rule reaches by quadrature (where every system has one standard error)
/// against the ratio of the run's own variance to a system mean's, the best these two
/// constants can do.
pub fn table(reps: usize, seed: u64) -> String {
    let mut rules = Rules::default();
    let mut out =
        String::from("| systems | v / s̄² = 0.05 | 0.2 | 0.5 | 2 |\n|---:|---|---|---|---|\n");
    for g in [5, 8, 20] {
        out.push_str(&format!("| {g} |"));
        for ratio in [0.05, 0.2, 0.5, 2.0] {
            let r = NewGroupRule::calibrate(g, 1.0, ratio, 0.95);
            out.push_str(&format!(
                " {:.1}–{:.1}% |",
                100.0 * r.coverage.0,
                100.0 * r.coverage.1
            ));
        }
        out.push('\n');
    }
    out.push('\n');
    out.push_str(
        "| design | τ | served: covers | width | calibrated rule: covers | width |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (d, design) in designs().iter().enumerate() {
        for (t, tau) in [0.0, 0.04, 0.08, 0.13, 0.2, 0.3].into_iter().enumerate() {
            let f = fare(design, tau, reps, seed ^ (d * 16 + t) as u64, &mut rules);
            out.push_str(&format!(
                "| {} | {tau} | {:.1}% | {:.3} | {:.1}% | {:.3} |\n",
                design.label,
                100.0 * f.served,
                f.served_width,
                100.0 * f.rule,
                f.rule_width
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calibrated_rule_covers_where_the_served_term_errs_wide() {
        // The panel grid's design: 8 systems of 40 anchors, a run of 100.
        let design = &designs()[0];
        let mut rules = Rules::default();
        let still = fare(design, 0.0, 1000, 1, &mut rules);
        assert!(still.served > 0.98, "served at τ = 0: {still:?}");
        assert!((0.93..=0.975).contains(&still.rule), "{still:?}");
        assert!(still.rule_width < 0.8 * still.served_width, "{still:?}");
        let apart = fare(design, 0.2, 1000, 2, &mut rules);
        assert!(
            apart.served >= 0.93 && apart.rule >= 0.93,
            "τ = 0.2: {apart:?}"
        );
    }
}
