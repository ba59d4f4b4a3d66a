//! Whether a run's missing member scores look missing at random. A partial item is corrected
//! from the members present (its sub-panel), which is right where a member's absence says
//! nothing about the score it would have given beyond what the others gave. A judge that fails
//! on hard items breaks that, and no run-level interval can know by how much; but it leaves a
//! trace the run itself shows: what the other members say of the items the failing member
//! missed is lower than what they say of those it scored (the scores of one item move
//! together). Where a member's scores are missing completely at random the two groups of items
//! are exchangeable, so a test of that difference flags such a run at its level. See
//! docs/panels.md for its rates.

use crate::runlevel::inference::satterthwaite;
use crate::stats::{chi_square_cdf, mean, normal_quantile, sample_variance, two_sided_p};

/// Items each side of a member's test needs before it is made.
pub const MIN_ITEMS: usize = 8;

/// The chance a request whose runs' scores are missing completely at random is flagged.
pub const LEVEL: f64 = 0.01;

/// A run's items' scores, each in the panel's member order (`None`: that member did not score
/// it).
pub type Scored = Vec<Vec<Option<f64>>>;

/// The strongest evidence in a run that a member's absence tracks the scores.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreDependence {
    /// The member whose scores are missing (its index in the panel's order).
    pub missing: usize,
    /// The item count and mean of what the other members say (`others`) on the items
    /// `missing` did not score.
    pub without: (usize, f64),
    /// The same on the items `missing` scored, its own score left out.
    pub with: (usize, f64),
    /// The Welch test's two-sided p-value of the difference.
    pub p_value: f64,
    /// The p-value of the members tested together: twice the smaller of that p-value times
    /// the members tested (Bonferroni) and the χ² test's, at most 1.
    pub adjusted: f64,
}

/// `scores[i][m]` is member `m`'s score of item `i` (`None`: not scored); `others` maps an
/// item's scores with some member's taken out to what the members left say of it (a panel's
/// sub-panel score of those present; `None` where none is). For each member of `input` (those
/// the version reads: an item missing one is partial) missing on at least [`MIN_ITEMS`] items
/// and present on as many, Welch's test of `others` between the items it did not score and
/// those it did, its score taken out: a fixed function of the other members' scores, so the
/// two groups share one law where the member's absence is independent of every score.
///
/// Two tests of the members together, each at half of `level`: the smallest p-value times the
/// members tested (Bonferroni: one member missing by its scores), and the χ² of the members'
/// normal scores (several members each a little, as a panel of judges that all time out on
/// hard items: where absences are independent of the scores, the members' splits of the items
/// are independent, and so nearly are their statistics). The member with the smallest p-value,
/// where either test is below its half; `None` where neither is (or nothing could be tested).
pub fn score_dependent(
    scores: &[Vec<Option<f64>>],
    input: &[usize],
    level: f64,
    mut others: impl FnMut(&[Option<f64>]) -> Option<f64>,
) -> Option<ScoreDependence> {
    let mut tests = Vec::new();
    let mut rest = Vec::new();
    for &k in input {
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for item in scores {
            rest.clone_from(item);
            let scored = rest.get_mut(k).and_then(Option::take).is_some();
            if let Some(x) = others(&rest) {
                if scored {
                    with.push(x);
                } else {
                    without.push(x);
                }
            }
        }
        if without.len() < MIN_ITEMS || with.len() < MIN_ITEMS {
            continue;
        }
        let (va, vb) = (
            sample_variance(&without) / without.len() as f64,
            sample_variance(&with) / with.len() as f64,
        );
        if va + vb <= 0.0 {
            continue;
        }
        let df = satterthwaite(&[
            (va, (without.len() - 1) as f64),
            (vb, (with.len() - 1) as f64),
        ]);
        let (ma, mb) = (mean(&without), mean(&with));
        tests.push(ScoreDependence {
            missing: k,
            without: (without.len(), ma),
            with: (with.len(), mb),
            p_value: two_sided_p((ma - mb) / (va + vb).sqrt(), Some(df)),
            adjusted: 1.0,
        });
    }
    let count = tests.len();
    // Each member's statistic as the normal score of its two-sided p-value.
    let chi2: f64 = tests
        .iter()
        .map(|t| normal_quantile(1.0 - (t.p_value / 2.0).max(1e-300)).powi(2))
        .sum();
    let together = 1.0 - chi_square_cdf(chi2, count);
    tests
        .into_iter()
        .min_by(|a, b| a.p_value.total_cmp(&b.p_value))
        .map(|t| ScoreDependence {
            adjusted: (2.0 * (t.p_value * count as f64).min(together)).min(1.0),
            ..t
        })
        .filter(|t| t.adjusted < level)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Rng, RngExt, SeedableRng};
    use crate::stats::standard_normal;

    /// A run of `n` items scored by three members (two of one family, one apart, as the panel
    /// grid's correlated world), member m's score j missing with chance `missing(m, j)`;
    /// `integer` rounds the scores onto a 1–5 scale skewed toward its top.
    fn run(n: usize, integer: bool, missing: impl Fn(usize, f64) -> f64, rng: &mut Rng) -> Scored {
        (0..n)
            .map(|_| {
                let centre = if integer { 4.2 } else { 3.0 };
                let q = 0.7 * standard_normal(rng);
                let family = 0.4 * standard_normal(rng);
                let js = [
                    centre + q + family + 0.4 * standard_normal(rng),
                    centre + q + family + 0.4 * standard_normal(rng),
                    centre + 0.8 * q + 0.5 * standard_normal(rng),
                ];
                js.iter()
                    .enumerate()
                    .map(|(m, &j)| {
                        let j = if integer {
                            j.round().clamp(1.0, 5.0)
                        } else {
                            j
                        };
                        (!rng.random_bool(missing(m, j))).then_some(j)
                    })
                    .collect()
            })
            .collect()
    }

    /// The plain mean of the scores present (a fixed function of them, as a sub-panel's score is).
    fn average(scores: &[Option<f64>]) -> Option<f64> {
        let present: Vec<f64> = scores.iter().flatten().copied().collect();
        (!present.is_empty()).then(|| mean(&present))
    }

    /// How many of `reps` runs the test flags at `LEVEL`.
    fn flagged(
        reps: u64,
        n: usize,
        integer: bool,
        missing: impl Fn(usize, f64) -> f64 + Copy,
    ) -> usize {
        (0..reps)
            .filter(|&k| {
                let mut rng = Rng::seed_from_u64(7_000 + k);
                let scores = run(n, integer, missing, &mut rng);
                score_dependent(&scores, &[0, 1, 2], LEVEL, average).is_some()
            })
            .count()
    }

    #[test]
    fn a_known_difference_is_found_and_named() {
        // Member 1 scored the items where member 0 gave 4 or 5 and missed those where it gave
        // 1 or 2: member 0 means 1.5 on the 10 items without member 1 and 4.5 on the 10 with.
        let scores: Vec<Vec<Option<f64>>> = (0..20)
            .map(|i| {
                let low = i % 2 == 0;
                let j = if low {
                    1.0 + (i % 4) as f64 / 2.0
                } else {
                    4.0 + (i % 4 - 1) as f64 / 2.0
                };
                vec![Some(j), (!low).then_some(j)]
            })
            .collect();
        let found = score_dependent(&scores, &[0, 1], LEVEL, average).expect("flagged");
        assert_eq!(found.missing, 1);
        assert_eq!(found.without.0, 10);
        assert_eq!(found.with.0, 10);
        assert!((found.without.1 - 1.5).abs() < 1e-12, "{found:?}");
        assert!((found.with.1 - 4.5).abs() < 1e-12, "{found:?}");
        // Member 0 is never missing, so it is not tested as the missing one: one test, which
        // the two tests of the members together each take at half the level.
        assert!(
            (found.adjusted - 2.0 * found.p_value).abs() < 1e-9 * found.p_value,
            "{found:?}"
        );
        // Too few items on a side: nothing is tested.
        assert_eq!(
            score_dependent(&scores[..12], &[0, 1], LEVEL, average),
            None
        );
    }

    #[test]
    fn scores_missing_at_random_are_flagged_at_most_at_the_level() {
        // 600 runs of 100 items, every score missing with chance 0.3 whatever it is, on a
        // continuous and on a skewed integer scale (ties; Welch's t is then approximate): the
        // rate is below the level (0.8% of 6,000 continuous runs); at most 2.5% (15 of 600, 1%
        // being 6 with sd 2.4) is asked of each.
        for integer in [false, true] {
            let k = flagged(600, 100, integer, |_, _| 0.3);
            eprintln!("missing at random, integer {integer}: {k} of 600 flagged");
            assert!(k <= 15, "integer {integer}: {k} of 600");
        }
    }

    #[test]
    fn scores_missing_where_they_would_be_low_are_flagged() {
        // The panel grid's `systems missing low 30%`: a score below 3 missing with chance 0.6,
        // above it 0.075 (a judge that fails on hard items), for every member. Nine runs of 100
        // items in ten are flagged (90.5% of 200; 80% by the Bonferroni test alone), every run
        // of 300; at least 85% and 98% are asked.
        let low = |_: usize, j: f64| if j < 3.0 { 0.6 } else { 0.075 };
        let k100 = flagged(200, 100, false, low);
        let k300 = flagged(200, 300, false, low);
        eprintln!("missing when low: {k100} of 200 runs of 100 flagged, {k300} of 200 of 300");
        assert!(k100 >= 170, "{k100}");
        assert!(k300 >= 196, "{k300}");
    }

    #[test]
    fn one_member_missing_where_it_would_score_low_is_flagged_or_not_by_what_the_others_see() {
        // One member fails on hard items (its score below 3 missing with chance 0.6, above it
        // 0.075), the others score every item, runs of 100 items. A member of the family,
        // whose errors its sibling shares, is seen well (159 of 200 runs flagged); the member
        // apart, whose score the others see only through the quality, less (91 of 200): its
        // absences move its partial items' corrected scores less, and so their bias. At least
        // 70% and 30% are asked.
        let one = |who: usize| {
            move |m: usize, j: f64| match (m == who, j < 3.0) {
                (false, _) => 0.0,
                (true, true) => 0.6,
                (true, false) => 0.075,
            }
        };
        let family = flagged(200, 100, false, one(0));
        let apart = flagged(200, 100, false, one(2));
        eprintln!("one member missing when low: family {family} of 200, apart {apart} of 200");
        assert!(family >= 140, "{family}");
        assert!(apart >= 60, "{apart}");
    }
}
