//! Which judges to call: what each sub-panel of a panel is worth in human labels, and the
//! cheapest one that reaches a target interval for a run of a given size.
//!
//! The yardstick is the labelled path (PPI): a run of n items, L of them labelled at random,
//! whose mean reference (the run's own, as `/v1/estimate` estimates it) is the fused scores'
//! mean corrected by the labelled items' mean residual. Its variance is σ²_S (1/L − 1/n), where
//! σ²_S is the residual variance of a reference about sub-panel S's fused score (the sampling
//! of the run's items costs nothing: every item is scored). The labels a half-width h needs at
//! level `level` are then
//!
//! ```text
//! L_S = ⌈ 1 / (h² / (z² σ²_S) + 1/n) ⌉ ≤ n,    z the normal quantile of the level.
//! ```
//!
//! A sub-panel's cost is its judge calls for the run (n × the sum of its members' costs per
//! item) plus L_S labels at `label_cost` each; the cheapest is the answer, and the labels it
//! saves are those the best single judge (the smallest σ²) needs, less its own.

use nalgebra::DMatrix;

use super::FITTED_MEMBERS;
use super::fusion::{Fusion, SubPanel};
use crate::stats::normal_quantile;

/// What a plan is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanAsk {
    /// Items in the run.
    pub run_size: usize,
    /// The interval's target half-width, in reference units.
    pub half_width: f64,
    pub level: f64,
    /// Each member's cost per item scored, in the panel's member order.
    pub costs: Vec<f64>,
    /// The cost of one human label, in the same units.
    pub label_cost: f64,
}

/// One sub-panel's part of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct SubPanelPlan {
    pub members: Vec<usize>,
    /// The sum of its members' costs per item.
    pub cost_per_item: f64,
    /// √σ²_S: the sd of a reference about the sub-panel's fused score.
    pub residual_sd: f64,
    /// Labels the target needs (at most the run's items).
    pub labels: usize,
    /// Judge calls for the run plus the labels.
    pub total_cost: f64,
}

/// A panel's plan for one rubric.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelPlan {
    /// 1ᵀR⁻¹1 for R the members' error correlation: the number of independent judges the
    /// panel's members are worth (M where their errors are independent, 1 where they are one
    /// judge's); `None` where the version did not record R.
    pub effective_judges: Option<f64>,
    /// Every sub-panel, in bit-mask order (the full panel last). A panel of more than
    /// [`FITTED_MEMBERS`] members lists each member alone, the cheapest sub-panel of every
    /// size and the full panel (its 2^M − 1 are all weighed, but thousands are not listed).
    pub sub_panels: Vec<SubPanelPlan>,
    /// The sub-panel with the lowest total cost.
    pub cheapest: Option<usize>,
    /// The single judge with the smallest residual (fewest labels).
    pub best_single: Option<usize>,
    /// Labels the best single judge needs, less the cheapest sub-panel's.
    pub labels_saved: Option<i64>,
}

/// Labels that bring a labelled run of `n` items to half-width `h` (`z` the level's normal
/// quantile), for a corrector whose residual variance is `sigma2`: at most `n`.
pub fn labels_needed(sigma2: f64, n: usize, h: f64, z: f64) -> usize {
    let n = n.max(1);
    if sigma2 <= 0.0 {
        return 1;
    }
    let per = (h / z).powi(2) / sigma2 + 1.0 / n as f64;
    ((1.0 / per).ceil() as usize).clamp(1, n)
}

/// 1ᵀR⁻¹1, within [1, M]; R row-major M × M. A singular R (two members' errors identical)
/// counts through its pseudo-inverse.
pub fn effective_judges(corr: &[f64], members: usize) -> Option<f64> {
    if members == 0 || corr.len() != members * members {
        return None;
    }
    let r = DMatrix::from_row_slice(members, members, corr);
    let inv = r.pseudo_inverse(1e-9).ok()?;
    let total: f64 = inv.iter().sum();
    Some(total.clamp(1.0, members as f64))
}

impl Fusion {
    /// The plan for `ask` (its `costs` in member order).
    pub fn plan(&self, ask: &PlanAsk) -> PanelPlan {
        let z = normal_quantile(1.0 - (1.0 - ask.level) / 2.0);
        let weigh = |sub: &SubPanel| {
            let cost_per_item: f64 = sub.members.iter().map(|&k| ask.costs[k]).sum();
            let labels = labels_needed(sub.sigma2, ask.run_size, ask.half_width, z);
            SubPanelPlan {
                members: sub.members.clone(),
                cost_per_item,
                residual_sd: sub.sigma2.max(0.0).sqrt(),
                labels,
                total_cost: ask.run_size as f64 * cost_per_item + labels as f64 * ask.label_cost,
            }
        };
        let m = self.members.len();
        let all: Vec<SubPanelPlan> = (1..(1usize << m))
            .filter_map(|mask| self.fresh_sub_panel(&super::members_of(mask, m)))
            .map(|sub| weigh(&sub))
            .collect();
        let sub_panels = if m <= FITTED_MEMBERS {
            all
        } else {
            let cheapest_of = |size: usize| {
                all.iter()
                    .filter(|s| s.members.len() == size)
                    .min_by(|a, b| a.total_cost.total_cmp(&b.total_cost))
                    .map(|s| s.members.clone())
            };
            let listed: Vec<Vec<usize>> = (1..=m).filter_map(cheapest_of).collect();
            all.into_iter()
                .filter(|s| {
                    s.members.len() == 1 || s.members.len() == m || listed.contains(&s.members)
                })
                .collect()
        };
        let cheapest = (0..sub_panels.len()).min_by(|&a, &b| {
            sub_panels[a]
                .total_cost
                .total_cmp(&sub_panels[b].total_cost)
        });
        let best_single = (0..sub_panels.len())
            .filter(|&i| sub_panels[i].members.len() == 1)
            .min_by(|&a, &b| {
                sub_panels[a]
                    .residual_sd
                    .total_cmp(&sub_panels[b].residual_sd)
            });
        let labels_saved = match (cheapest, best_single) {
            (Some(c), Some(b)) => Some(sub_panels[b].labels as i64 - sub_panels[c].labels as i64),
            _ => None,
        };
        PanelPlan {
            effective_judges: effective_judges(&self.error_corr, self.members.len()),
            sub_panels,
            cheapest,
            best_single,
            labels_saved,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_the_variance_formula() {
        // σ² = 0.25, a run too large to matter: 0.25 / (0.1 / 1.96)² = 96.04, so 97.
        assert_eq!(labels_needed(0.25, 1_000_000_000, 0.1, 1.96), 97);
        // A run of 97: 1 / (1/96.04 + 1/97) = 48.3, so 49; never more than the run.
        assert_eq!(labels_needed(0.25, 97, 0.1, 1.96), 49);
        assert_eq!(labels_needed(4.0, 30, 0.01, 1.96), 30);
    }

    #[test]
    fn independent_judges_count_fully_and_copies_once() {
        let eye = [1.0, 0.0, 0.0, 1.0];
        assert!((effective_judges(&eye, 2).unwrap() - 2.0).abs() < 1e-12);
        // Equicorrelated ρ = 0.5, two judges: 2 / (1 + ρ).
        let half = [1.0, 0.5, 0.5, 1.0];
        assert!((effective_judges(&half, 2).unwrap() - 4.0 / 3.0).abs() < 1e-9);
        // Two copies of one judge and an independent one: two judges' worth.
        let copies = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        assert!((effective_judges(&copies, 3).unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(effective_judges(&eye, 3), None);
    }
}
