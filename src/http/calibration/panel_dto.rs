//! A panel version's fusion layer as the versions' listing shows it.

use serde::Serialize;
use utoipa::ToSchema;

use judgecal_stats::panel::fusion::Fusion;

/// A panel version's fusion layer in one rubric. `anchor_count` and every held-out figure of
/// the version are the panel's: the items every member scored, the corrector fitted on their
/// cross-fitted fused scores.
#[derive(Serialize, ToSchema)]
pub struct PanelVersionDto {
    pub members: Vec<String>,
    /// The members whose fused score the corrector reads: every member, or (`auto`) one
    /// member alone, where its fused score had the lowest held-out MAE.
    pub input: Vec<String>,
    /// Each member's weight in the full panel's stacking fit.
    pub weights: Vec<MemberWeightDto>,
    /// The inputs compared: the full panel and, with `auto`, each member alone; held-out MAE
    /// and MSE of their cross-fitted fused scores against the references.
    pub considered: Vec<PanelInputDto>,
    /// The judge version of each member's anchors fitted, in member order (null: its
    /// unversioned anchors); absent for versions trained before panels recorded them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member_versions: Option<Vec<Option<String>>>,
    /// Each member's anchors in the rubric before the join, in member order; the join kept
    /// `anchor_count` items.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member_anchors: Option<Vec<usize>>,
}

#[derive(Serialize, ToSchema)]
pub struct MemberWeightDto {
    pub judge: String,
    /// Posterior mean of its coefficient (reference units per judge-score unit) and its 95%
    /// credible interval.
    pub weight: f64,
    pub weight_lo: f64,
    pub weight_hi: f64,
    /// Its coefficient × its scores' sd ÷ the references' sd (posterior mean): comparable
    /// across members.
    pub standardised: f64,
    /// Pr(standardised weight < 0.02 | anchors).
    pub below_floor: f64,
    /// The member adds nothing the others do not (below_floor > 0.05).
    pub canary: bool,
}

#[derive(Serialize, ToSchema)]
pub struct PanelInputDto {
    pub judges: Vec<String>,
    pub mae: f64,
    pub mse: f64,
}

impl From<Fusion> for PanelVersionDto {
    fn from(f: Fusion) -> Self {
        let names = |ms: &[usize]| ms.iter().map(|&m| f.members[m].clone()).collect();
        Self {
            input: names(&f.input),
            weights: f
                .members
                .iter()
                .zip(&f.weights)
                .map(|(judge, w)| MemberWeightDto {
                    judge: judge.clone(),
                    weight: w.weight,
                    weight_lo: w.weight_lo,
                    weight_hi: w.weight_hi,
                    standardised: w.standardised,
                    below_floor: w.below_floor,
                    canary: w.canary,
                })
                .collect(),
            considered: f
                .considered
                .iter()
                .map(|c| PanelInputDto {
                    judges: names(&c.members),
                    mae: c.mae,
                    mse: c.mse,
                })
                .collect(),
            member_versions: (!f.member_versions.is_empty()).then_some(f.member_versions),
            member_anchors: (!f.member_anchors.is_empty()).then_some(f.member_anchors),
            members: f.members,
        }
    }
}
