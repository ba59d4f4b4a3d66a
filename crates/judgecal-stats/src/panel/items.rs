//! A served panel's items: what its version's corrector reads for them, and each item's answer
//! from what it says (a whole item's own; a partial item's sub-panel fit, floored).

use super::fusion::{FusedScore, Fusion};
use crate::corrector::Corrected;

/// What a served panel's corrector reads for its items: every whole item's fused score (in
/// order), then every partial item's corrected score, where the band a complete item gets
/// floors the partial item's ([`answers`]).
pub fn corrector_inputs(fused: &[FusedScore]) -> Vec<f64> {
    let whole = fused.iter().filter_map(|f| match f {
        FusedScore::Whole(s) => Some(*s),
        FusedScore::Partial { .. } => None,
    });
    let partial = fused.iter().filter_map(|f| match f {
        FusedScore::Whole(_) => None,
        FusedScore::Partial { fused, .. } => Some(fused.score),
    });
    whole.chain(partial).collect()
}

/// The items (0-based) of whole items named by their rank among the whole items.
pub fn whole_items(fused: &[FusedScore], ranks: &[usize]) -> Vec<usize> {
    fused
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f, FusedScore::Whole(_)))
        .map(|(i, _)| i)
        .enumerate()
        .filter(|(rank, _)| ranks.binary_search(rank).is_ok())
        .map(|(_, i)| i)
        .collect()
}

/// Each item's answer, from the corrector's answers to [`corrector_inputs`]: a whole item's
/// own; a partial item's sub-panel fit, its predictive band floored at the band a complete
/// item gets at its corrected score ([`Fusion::floored`]).
pub fn answers(fusion: &Fusion, fused: &[FusedScore], corrected: Vec<Corrected>) -> Vec<Corrected> {
    let whole_count = fused
        .iter()
        .filter(|f| matches!(f, FusedScore::Whole(_)))
        .count();
    let mut corrected = corrected.into_iter();
    let mut whole: Vec<Corrected> = corrected.by_ref().take(whole_count).collect();
    whole.reverse();
    fused
        .iter()
        .map(|f| match f {
            FusedScore::Whole(_) => whole.pop().unwrap_or_default(),
            FusedScore::Partial { fused, .. } => Corrected {
                score: fused.score,
                credible: Some(fused.credible),
                predictive: Some(fusion.floored(
                    fused.predictive,
                    corrected.next().and_then(|c| c.predictive),
                )),
                ..Corrected::default()
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bayes::LineCorrected;

    fn partial(score: f64) -> FusedScore {
        FusedScore::Partial {
            members: vec![0],
            fused: LineCorrected {
                score,
                credible: (score - 0.1, score + 0.1),
                predictive: (score - 1.0, score + 1.0),
            },
        }
    }

    #[test]
    fn the_corrector_reads_whole_items_first_and_outside_ranks_map_back_to_items() {
        let fused = [
            partial(1.5),
            FusedScore::Whole(2.0),
            partial(4.5),
            FusedScore::Whole(3.0),
            FusedScore::Whole(9.0),
        ];
        assert_eq!(corrector_inputs(&fused), vec![2.0, 3.0, 9.0, 1.5, 4.5]);
        // The second and third whole items (ranks 1 and 2) are items 3 and 4.
        assert_eq!(whole_items(&fused, &[1, 2]), vec![3, 4]);
        assert_eq!(whole_items(&fused, &[]), Vec::<usize>::new());
    }
}
