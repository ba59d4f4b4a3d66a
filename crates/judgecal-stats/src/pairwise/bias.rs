//! A pairwise judge's biases beside the people's, each with a 95% interval: how often the
//! judge agrees with the people (over the labelled comparisons), how often the answer shown
//! first wins (the judge: over both orders where given; the people: answer a,
//! which the judge's own verdict shows first), how often the winner flips when the answers
//! swap places, how often the longer answer wins (judge and people), and each system's
//! favouritism: the judge's mean preference for it minus the people's, over the labelled
//! comparisons it is in.
//!
//! Outcomes count as everywhere in `pairwise`: a tie is one half for each side, a share is
//! itself. Each comparison is one unit: a share over both orders of one comparison is a ratio
//! of sums whose variance is taken over comparisons (the two orders of one pair are not
//! independent), and its interval is Wilson's at that variance's effective size, which stays
//! inside [0, 1] near the ends of the scale.

use crate::stats::{normal_quantile, t_quantile};

/// A favouritism needs this many labelled comparisons of its system, or it is not given.
pub const MIN_FAVOURITISM: usize = 10;

/// One comparison, as the diagnostics read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// The judge's verdict, a shown first: the probability that a is better.
    pub verdict: f64,
    /// The judge's verdict with b shown first, mapped back (so it still speaks of a).
    pub swapped: Option<f64>,
    /// The people's preference for a, where labelled.
    pub preference: Option<f64>,
    /// Whether a's answer is the longer; `None` where the lengths are equal or not known.
    pub a_longer: Option<bool>,
    /// The two systems' indices.
    pub systems: Option<(usize, usize)>,
}

impl Judged {
    /// The judge's preference for a over the orders it was asked in.
    fn judge(&self) -> f64 {
        match self.swapped {
            Some(s) => 0.5 * (self.verdict + s),
            None => self.verdict,
        }
    }
}

/// A share with its interval and how many comparisons it read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    pub estimate: f64,
    pub interval: [f64; 2],
    pub comparisons: usize,
}

/// A system's favouritism: the judge's mean preference for it minus the people's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Favouritism {
    pub system: usize,
    pub estimate: f64,
    pub interval: [f64; 2],
    pub comparisons: usize,
}

/// Every diagnostic; a share with no comparison to read is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct Biases {
    /// How often the judge's winner is the people's, over the labelled comparisons: per
    /// comparison j·y + (1 − j)(1 − y) for the judge's preference j (both orders' mean) and the
    /// people's y, so a tie on one side agrees by half.
    pub agreement: Option<Share>,
    pub judge_first: Option<Share>,
    pub people_first: Option<Share>,
    pub flips: Option<Share>,
    pub judge_longer: Option<Share>,
    pub people_longer: Option<Share>,
    /// Systems with at least [`MIN_FAVOURITISM`] labelled comparisons, by index.
    pub favouritism: Vec<Favouritism>,
}

/// The winner a verdict names: 1 for a, -1 for b, 0 for a tie.
fn winner(v: f64) -> f64 {
    if v > 0.5 {
        1.0
    } else if v < 0.5 {
        -1.0
    } else {
        0.0
    }
}

/// The share Σhits / Σcounts over units `(hits, count)`, its interval at level 95%.
fn share(units: impl Iterator<Item = (f64, f64)>) -> Option<Share> {
    let units: Vec<(f64, f64)> = units.collect();
    let n = units.len();
    let total: f64 = units.iter().map(|u| u.1).sum();
    if n == 0 || total <= 0.0 {
        return None;
    }
    let p = units.iter().map(|u| u.0).sum::<f64>() / total;
    // The ratio's variance over units (delta method); with one unit, or every unit alike,
    // the effective size is the number of units.
    let spread: f64 = units.iter().map(|(h, c)| (h - p * c).powi(2)).sum();
    let variance = if n > 1 {
        spread / (total * total) * n as f64 / (n as f64 - 1.0)
    } else {
        0.0
    };
    let effective = if variance > 0.0 && p > 0.0 && p < 1.0 {
        p * (1.0 - p) / variance
    } else {
        n as f64
    };
    let z = normal_quantile(0.975);
    let z2 = z * z / effective;
    let centre = (p + z2 / 2.0) / (1.0 + z2);
    let half = z * (p * (1.0 - p) / effective + z2 / (4.0 * effective)).sqrt() / (1.0 + z2);
    Some(Share {
        estimate: p,
        interval: [(centre - half).max(0.0), (centre + half).min(1.0)],
        comparisons: n,
    })
}

impl Biases {
    /// The diagnostics of `rows`, whose system indices run below `systems`.
    pub fn of(rows: &[Judged], systems: usize) -> Self {
        let first_wins = |r: &Judged| {
            // With b shown first, the first answer won where the mapped-back verdict is low.
            let (hits, count) = match r.swapped {
                Some(s) => (r.verdict + 1.0 - s, 2.0),
                None => (r.verdict, 1.0),
            };
            (hits, count)
        };
        let toward_longer = |p: f64, a_longer: bool| if a_longer { p } else { 1.0 - p };
        let mut favour: Vec<Vec<f64>> = vec![Vec::new(); systems];
        for r in rows {
            if let (Some(y), Some((a, b))) = (r.preference, r.systems)
                && a != b
                && a < systems
                && b < systems
            {
                let d = r.judge() - y;
                favour[a].push(d);
                favour[b].push(-d);
            }
        }
        let z = normal_quantile(0.975);
        let favouritism = favour
            .iter()
            .enumerate()
            .filter(|(_, d)| d.len() >= MIN_FAVOURITISM)
            .map(|(system, d)| {
                let n = d.len() as f64;
                let m = d.iter().sum::<f64>() / n;
                let var = d.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
                let t = t_quantile(0.975, n - 1.0).max(z);
                let half = t * (var / n).sqrt();
                Favouritism {
                    system,
                    estimate: m,
                    interval: [m - half, m + half],
                    comparisons: d.len(),
                }
            })
            .collect();
        Self {
            agreement: share(rows.iter().filter_map(|r| {
                let j = r.judge();
                r.preference.map(|y| (j * y + (1.0 - j) * (1.0 - y), 1.0))
            })),
            judge_first: share(rows.iter().map(first_wins)),
            people_first: share(rows.iter().filter_map(|r| r.preference.map(|y| (y, 1.0)))),
            flips: share(rows.iter().filter_map(|r| {
                r.swapped
                    .map(|s| (((winner(r.verdict) - winner(s)).abs() / 2.0), 1.0))
            })),
            judge_longer: share(rows.iter().filter_map(|r| {
                r.a_longer
                    .map(|longer| (toward_longer(r.judge(), longer), 1.0))
            })),
            people_longer: share(
                rows.iter()
                    .filter_map(|r| match (r.preference, r.a_longer) {
                        (Some(y), Some(longer)) => Some((toward_longer(y, longer), 1.0)),
                        _ => None,
                    }),
            ),
            favouritism,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairwise::sigmoid;
    use crate::rng::{Rng, RngExt, SeedableRng};
    use crate::stats::standard_normal;

    /// Five systems of qualities 0, 0.3, …, 1.2 compared at random; the people prefer a with
    /// chance σ(gap), a tie in one of ten. The judge sees the gap with noise, favours the
    /// answer shown first by `position` log-odds, the longer answer by 0.8, system 0 by +1
    /// and system 3 by −0.6 (several systems, each biased its own way), and names a winner;
    /// 70% of comparisons are judged in both orders, 60% labelled.
    fn world(n: usize, position: f64, rng: &mut Rng) -> Vec<Judged> {
        const SYSTEMS: usize = 5;
        let favour = [1.0, 0.0, 0.0, -0.6, 0.0];
        (0..n)
            .map(|_| {
                let a = rng.random_range(0..SYSTEMS);
                let b = (a + rng.random_range(1..SYSTEMS)) % SYSTEMS;
                let gap = 0.3 * (a as f64 - b as f64) + 0.7 * standard_normal(rng);
                let length = 0.4 * gap + standard_normal(rng);
                let seen = gap + 0.6 * standard_normal(rng) + 0.8 * length.signum() + favour[a]
                    - favour[b];
                let verdict = |shift: f64, rng: &mut Rng| {
                    f64::from(u8::from(rng.random::<f64>() < sigmoid(seen + shift)))
                };
                let first = verdict(position, rng);
                let swapped = (rng.random::<f64>() < 0.7).then(|| verdict(-position, rng));
                let preference = (rng.random::<f64>() < 0.6).then(|| {
                    if rng.random::<f64>() < 0.1 {
                        0.5
                    } else {
                        f64::from(u8::from(rng.random::<f64>() < sigmoid(gap)))
                    }
                });
                Judged {
                    verdict: first,
                    swapped,
                    preference,
                    a_longer: Some(length > 0.0),
                    systems: Some((a, b)),
                }
            })
            .collect()
    }

    /// Every estimate of `b` as a list: the six shares, then the favouritism of systems 0–4.
    fn estimates(b: &Biases) -> Vec<Option<(f64, [f64; 2])>> {
        let shares = [
            b.agreement,
            b.judge_first,
            b.people_first,
            b.flips,
            b.judge_longer,
            b.people_longer,
        ]
        .map(|s| s.map(|s| (s.estimate, s.interval)));
        let favour = (0..5).map(|k| {
            b.favouritism
                .iter()
                .find(|f| f.system == k)
                .map(|f| (f.estimate, f.interval))
        });
        shares.into_iter().chain(favour).collect()
    }

    #[test]
    fn every_interval_covers_the_worlds_truth_93_to_97_percent() {
        const NAMES: [&str; 11] = [
            "agreement",
            "judge first",
            "people first",
            "flips",
            "judge longer",
            "people longer",
            "favouritism 0",
            "favouritism 1",
            "favouritism 2",
            "favouritism 3",
            "favouritism 4",
        ];
        for (position, n, seed) in [(0.0, 300, 1), (1.5, 300, 2), (2.5, 120, 3), (4.0, 60, 4)] {
            // The truth: the same diagnostics over a million comparisons of the same world.
            let mut rng = Rng::seed_from_u64(seed);
            let truth = estimates(&Biases::of(&world(1_000_000, position, &mut rng), 5));
            const REPS: usize = 1_000;
            // Favouritism is not given for a system with too few labelled comparisons: its
            // coverage counts the replications that give it.
            let (mut covered, mut given) = ([0usize; 11], [0usize; 11]);
            for _ in 0..REPS {
                let got = estimates(&Biases::of(&world(n, position, &mut rng), 5));
                for (k, (g, t)) in got.iter().zip(&truth).enumerate() {
                    let Some((t, _)) = t else {
                        panic!("{} missing from the truth", NAMES[k]);
                    };
                    if let Some((_, [lo, hi])) = g {
                        given[k] += 1;
                        covered[k] += usize::from(lo <= t && t <= hi);
                    }
                }
            }
            let rates: Vec<String> = covered
                .iter()
                .zip(&given)
                .zip(NAMES)
                .map(|((c, g), name)| {
                    format!("{name} {:.1}% of {g}", 100.0 * *c as f64 / *g as f64)
                })
                .collect();
            println!("position {position}, {n} comparisons: {}", rates.join(", "));
            for (k, (c, g)) in covered.iter().zip(&given).enumerate() {
                assert!(*g >= REPS / 2, "{} given in {g} of {REPS}", NAMES[k]);
                let rate = *c as f64 / *g as f64;
                assert!(
                    (0.93..=0.97).contains(&rate),
                    "{} covers {:.1}% (position {position}, {n} comparisons)",
                    NAMES[k],
                    100.0 * rate
                );
            }
            // The world's biases are found: the judge favours system 0 and disfavours 3.
            let fav = |k: usize| truth[6 + k].expect("favouritism").0;
            assert!(fav(0) > 0.05 && fav(3) < -0.03, "{:?}", truth);
        }
    }

    #[test]
    fn shares_count_ties_half_and_flips_by_winner() {
        let row = |verdict, swapped, preference| Judged {
            verdict,
            swapped,
            preference,
            a_longer: Some(true),
            systems: None,
        };
        // First order a wins; swapped (b first) a still wins: the first answer won once of
        // two. A tie against a winner is half a flip; a against b a whole one.
        let rows = [
            row(1.0, Some(1.0), Some(1.0)),
            row(1.0, Some(0.5), Some(0.5)),
            row(1.0, Some(0.0), None),
        ];
        let b = Biases::of(&rows, 0);
        let judge_first = b.judge_first.expect("judge first");
        assert!((judge_first.estimate - (1.0 + 1.5 + 2.0) / 6.0).abs() < 1e-12);
        assert!((b.flips.expect("flips").estimate - 0.5).abs() < 1e-12);
        assert!((b.people_first.expect("people").estimate - 0.75).abs() < 1e-12);
        // a is longer in each: the judge's mean over both orders is 1, 0.75, 0.5.
        assert!((b.judge_longer.expect("longer").estimate - 0.75).abs() < 1e-12);
        assert_eq!(b.people_longer.expect("people longer").comparisons, 2);
        // Agreement over the two labelled: the judge's 1 against the people's 1 agrees; its
        // 0.75 against a tie agrees by 0.75·0.5 + 0.25·0.5 = 0.5.
        let agreement = b.agreement.expect("two labelled");
        assert_eq!(agreement.comparisons, 2);
        assert!((agreement.estimate - 0.75).abs() < 1e-12);
        assert!(b.favouritism.is_empty());
        assert!(Biases::of(&[], 3).judge_first.is_none());
    }
}
