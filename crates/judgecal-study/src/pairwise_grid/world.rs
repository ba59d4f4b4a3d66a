//! A Bradley–Terry world of the pairwise grid: its systems, the judge, the people who label
//! (and the raters among them), the comparisons it draws and the truth the answers are
//! checked against.
//!
//! K systems with ratings θ ~ N(0, 1) (the baseline, system 0, at 0). A comparison draws a
//! pair (uniformly, or a system against the baseline as b) and a quality gap z = θ_a − θ_b +
//! γ·r + logistic noise, r the answers' log length ratio and γ the people's own taste for
//! length: people prefer a when z > 0 (moved by the rater's taste for each system, where
//! raters differ), and call a tie with chance `ties` (counted ½). Where neither people nor
//! systems differ in length, r = 0.2·z + N(0, 1) tracks quality a little; where they do, r is
//! the systems' mean length difference plus N(0, 1). The judge sees z with normal noise, plus
//! `position` towards the answer shown first, `length` per unit of r, and `favour` towards
//! system 1; it calls a tie inside a band that gives the ties' share, and judges both orders.

use judgecal_stats::pairwise::powered::{self, Observed, Predicted};
use judgecal_stats::pairwise::preference::Verdicts;
use judgecal_stats::pairwise::rate::Compared;
use judgecal_stats::pairwise::ratings::{self, Outcome};
use judgecal_stats::rng::{Rng, RngExt};
use judgecal_stats::stats::{normal_quantile, standard_normal};

/// One row of the grid.
#[derive(Debug, Clone, Copy)]
pub struct PairwiseWorld {
    pub systems: usize,
    pub position: f64,
    pub length: f64,
    pub favour: f64,
    /// The sd of each system's own favouritism by the judge (drawn per replication, normal):
    /// several systems each biased its own way.
    pub favour_sd: f64,
    pub noise: f64,
    pub ties: f64,
    pub anchors: usize,
    pub run: usize,
    /// The run's labelled share on the labelled path.
    pub labelled: f64,
    /// 0: one judge; n ≥ 2: a panel of n judges, each seeing the gap through its own noise
    /// (`noise` each) with the same biases, whose calibrated preference reads every member.
    pub panel: usize,
    /// The people's own taste for the longer answer: log-odds per unit of the log length
    /// ratio (0: people judge quality alone).
    pub people_length: f64,
    /// The sd of the systems' mean log length (drawn per replication, the baseline's 0):
    /// systems that differ in verbosity.
    pub verbose: f64,
    /// The ratings control for the length ratio (Arena's style control): their truth is then
    /// the ratings at equal length.
    pub controlled: bool,
    /// Every comparison puts a system (as a) against the baseline (as b), AlpacaEval's layout.
    pub against_baseline: bool,
    /// The labels come in batches of `rater_batch`, each from one rater whose taste for each
    /// system is N(0, rater_sd²) log-odds (0: raters do not differ).
    pub rater_sd: f64,
    pub rater_batch: usize,
    /// Each label names its rater (`rater`), so that the intervals count raters.
    pub named: bool,
    /// The run's labels arrive in this many equal batches, and the run is rated after each.
    pub looks: usize,
    /// A new system (the last) that the anchors compare in only this many comparisons, while
    /// the run draws it as often as any (0: off); the judge favours it, not system 1.
    pub new_labels: usize,
    /// The run's systems drawn with chances ∝ 1/(rank + 1) (Zipf: a few systems fight most
    /// battles); the anchors' uniformly.
    pub zipf: bool,
    /// This share of each labelled set is one rater's (the rest in batches of
    /// `rater_batch`): one rater holding most labels.
    pub lead_share: f64,
    /// The judge cannot read the last system: its verdicts on that system's comparisons
    /// are coin flips (a logistic draw of their own, plus any favouritism), not the gap.
    pub blind: bool,
}

/// How a comparison's two systems are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// As the row draws them (uniform pairs, or against the baseline).
    Usual,
    /// Uniform pairs of every system but the last.
    WithoutLast,
    /// The last system against a uniform other.
    Last,
    /// Each of the two systems by its Zipf chance, apart.
    Zipf,
}

/// A world with none of the later rows' features: the first rows name theirs beside it.
pub const PLAIN: PairwiseWorld = PairwiseWorld {
    systems: 5,
    position: 0.0,
    length: 0.0,
    favour: 0.0,
    favour_sd: 0.0,
    noise: 0.5,
    ties: 0.0,
    anchors: 200,
    run: 1_000,
    labelled: 0.0,
    panel: 0,
    people_length: 0.0,
    verbose: 0.0,
    controlled: false,
    against_baseline: false,
    rater_sd: 0.0,
    rater_batch: 1,
    named: false,
    looks: 1,
    new_labels: 0,
    zipf: false,
    lead_share: 0.0,
    blind: false,
};

/// The nodes of a standard normal's quadrature: the midpoints of 24 equal-probability slices.
fn normal_nodes() -> Vec<f64> {
    const NODES: usize = 24;
    (0..NODES)
        .map(|j| normal_quantile((j as f64 + 0.5) / NODES as f64))
        .collect()
}

pub(super) fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// A standard logistic draw.
fn logistic(rng: &mut Rng) -> f64 {
    let u: f64 = rng.random::<f64>().clamp(1e-12, 1.0 - 1e-12);
    (u / (1.0 - u)).ln()
}

/// One replication's draws of the world: the ratings, the judge's favouritism of each
/// system, and each system's mean log length.
#[derive(Debug, Clone)]
pub struct PairwiseDrawn {
    pub theta: Vec<f64>,
    pub own: Vec<f64>,
    pub longer: Vec<f64>,
}

impl PairwiseWorld {
    /// Whether the length ratio is the systems' difference in verbosity (and people's taste
    /// for it) rather than a reading of quality.
    fn styled(&self) -> bool {
        self.people_length != 0.0 || self.verbose != 0.0
    }

    /// Draws a replication's systems. The later draws are made only where the row asks for
    /// them, so that the other rows' draws stay as they were.
    pub fn draw(&self, rng: &mut Rng) -> PairwiseDrawn {
        let k = self.systems;
        let theta: Vec<f64> = (0..k)
            .map(|i| if i == 0 { 0.0 } else { standard_normal(rng) })
            .collect();
        let own: Vec<f64> = if self.favour_sd > 0.0 {
            (0..k)
                .map(|_| self.favour_sd * standard_normal(rng))
                .collect()
        } else {
            vec![0.0; k]
        };
        let longer: Vec<f64> = if self.verbose > 0.0 {
            (0..k)
                .map(|i| {
                    if i == 0 {
                        0.0
                    } else {
                        self.verbose * standard_normal(rng)
                    }
                })
                .collect()
        } else {
            vec![0.0; k]
        };
        PairwiseDrawn { theta, own, longer }
    }

    /// A rater's taste for each system (zeros where raters do not differ).
    pub fn rater(&self, rng: &mut Rng) -> Vec<f64> {
        if self.rater_sd > 0.0 {
            (0..self.systems)
                .map(|_| self.rater_sd * standard_normal(rng))
                .collect()
        } else {
            vec![0.0; self.systems]
        }
    }

    /// The half-width of the judge's tie band: its seen gap is about normal with sd
    /// √(π²/3·spread + noise²); the band holds `ties` of it.
    fn tie_band(&self) -> f64 {
        let sd = (std::f64::consts::PI.powi(2) / 3.0 + 1.0 + self.noise * self.noise).sqrt();
        normal_quantile(0.5 + self.ties / 2.0) * sd
    }

    /// The system the judge favours by `favour`: the new one where the row has one.
    fn favoured(&self) -> usize {
        if self.new_labels > 0 {
            self.systems - 1
        } else {
            1
        }
    }

    /// A comparison's two systems, drawn as `pick` says.
    fn pair(&self, pick: Pick, rng: &mut Rng) -> (usize, usize) {
        let k = self.systems;
        let zipf = |rng: &mut Rng| {
            let total: f64 = (1..=k).map(|r| 1.0 / r as f64).sum();
            let mut u = rng.random::<f64>() * total;
            for s in 0..k {
                u -= 1.0 / (s + 1) as f64;
                if u <= 0.0 {
                    return s;
                }
            }
            k - 1
        };
        match pick {
            Pick::Usual if self.against_baseline => (rng.random_range(1..k), 0),
            Pick::Usual => {
                let a = rng.random_range(0..k);
                (a, (a + rng.random_range(1..k)) % k)
            }
            Pick::WithoutLast => {
                let a = rng.random_range(0..k - 1);
                (a, (a + rng.random_range(1..k - 1)) % (k - 1))
            }
            Pick::Last => {
                let other = rng.random_range(0..k - 1);
                if rng.random::<f64>() < 0.5 {
                    (k - 1, other)
                } else {
                    (other, k - 1)
                }
            }
            Pick::Zipf => {
                let a = zipf(rng);
                let mut b = zipf(rng);
                while b == a {
                    b = zipf(rng);
                }
                (a, b)
            }
        }
    }

    /// One comparison judged, and the people's preference by a rater of taste `taste`.
    pub fn comparison(
        &self,
        d: &PairwiseDrawn,
        taste: &[f64],
        pick: Pick,
        rng: &mut Rng,
    ) -> (Compared, f64) {
        let (a, b) = self.pair(pick, rng);
        let styled = self.styled();
        let styled_ratio = if styled {
            d.longer[a] - d.longer[b] + standard_normal(rng)
        } else {
            0.0
        };
        let z = d.theta[a] - d.theta[b] + self.people_length * styled_ratio + logistic(rng);
        let y = if rng.random::<f64>() < self.ties {
            0.5
        } else {
            f64::from(u8::from(z + taste[a] - taste[b] > 0.0))
        };
        let ratio = if styled {
            styled_ratio
        } else {
            0.2 * z + standard_normal(rng)
        };
        let f = self.favoured();
        let favour = self.favour * (f64::from(u8::from(a == f)) - f64::from(u8::from(b == f)))
            + d.own[a]
            - d.own[b];
        // Drawn only where the row is blind, so that the other rows' draws stay as they were.
        let read = if self.blind && (a == self.systems - 1 || b == self.systems - 1) {
            logistic(rng)
        } else {
            z
        };
        let biased = read + self.length * ratio + favour;
        let band = self.tie_band();
        let call = |x: f64| {
            if x > band {
                1.0
            } else if x < -band {
                0.0
            } else {
                0.5
            }
        };
        let mut judge = || {
            let seen = biased + self.noise * standard_normal(rng);
            (call(seen + self.position), Some(call(seen - self.position)))
        };
        let base = if self.panel == 0 {
            let (v, s) = judge();
            Verdicts::of(v, s)
        } else {
            Verdicts::of_panel((0..self.panel).map(|_| judge()).collect())
        };
        let verdicts = Verdicts {
            covariates: vec![ratio],
            systems: Some((a, b)),
            ..base
        };
        let controls = if self.controlled { vec![ratio] } else { vec![] };
        (
            Compared {
                verdicts,
                controls,
                preference: None,
                rater: None,
            },
            y,
        )
    }

    /// The ordered pairs the world compares, each as likely as the others.
    fn pairs(&self) -> Vec<(usize, usize)> {
        let k = self.systems;
        if self.against_baseline {
            (1..k).map(|a| (a, 0)).collect()
        } else {
            (0..k)
                .flat_map(|a| (0..k).filter(move |&b| b != a).map(move |b| (a, b)))
                .collect()
        }
    }

    /// A pair's expected outcome for a over people (raters) and answers: a tie ½, else
    /// σ(θ_a − θ_b + γ·r + the rater's taste), with r the length ratio at `ratio` where given
    /// (else over its spread).
    fn expected_at(&self, d: &PairwiseDrawn, a: usize, b: usize, ratio: Option<f64>) -> f64 {
        let gap = d.theta[a] - d.theta[b];
        if !self.styled() && self.rater_sd == 0.0 {
            return self.ties / 2.0 + (1.0 - self.ties) * sigmoid(gap);
        }
        let nodes = normal_nodes();
        let ratios: Vec<f64> = match ratio {
            Some(r) => vec![r],
            None if self.styled() => nodes
                .iter()
                .map(|q| d.longer[a] - d.longer[b] + q)
                .collect(),
            None => vec![0.0],
        };
        let tastes: Vec<f64> = if self.rater_sd > 0.0 {
            nodes
                .iter()
                .map(|q| std::f64::consts::SQRT_2 * self.rater_sd * q)
                .collect()
        } else {
            vec![0.0]
        };
        let mut sum = 0.0;
        for r in &ratios {
            for t in &tastes {
                sum += sigmoid(gap + self.people_length * r + t);
            }
        }
        self.ties / 2.0 + (1.0 - self.ties) * sum / (ratios.len() * tastes.len()) as f64
    }

    /// Each system's true win rate against the baseline (none for the baseline) and over
    /// the field (its opponents as the world draws them).
    pub fn win_rates(&self, d: &PairwiseDrawn) -> Vec<[Option<f64>; 2]> {
        let k = self.systems;
        (0..k)
            .map(|s| {
                let field = if self.against_baseline {
                    if s == 0 {
                        (1..k)
                            .map(|a| 1.0 - self.expected_at(d, a, 0, None))
                            .sum::<f64>()
                            / (k - 1) as f64
                    } else {
                        self.expected_at(d, s, 0, None)
                    }
                } else {
                    (0..k)
                        .filter(|&b| b != s)
                        .map(|b| self.expected_at(d, s, b, None))
                        .sum::<f64>()
                        / (k - 1) as f64
                };
                [
                    (s != 0).then(|| self.expected_at(d, s, 0, None)),
                    Some(field),
                ]
            })
            .collect()
    }

    /// The truth the ratings estimate: Bradley–Terry on every compared pair's expected
    /// outcome; where the ratings control for length, Bradley–Terry with the length ratio
    /// beside the ratings, over the ratio's spread (then the ratings at equal length and the
    /// people's length coefficient, exactly θ and γ where no tie or rater blurs the model),
    /// with that coefficient.
    pub fn truth(&self, d: &PairwiseDrawn) -> (Vec<f64>, Option<f64>) {
        let k = self.systems;
        if !self.controlled {
            let outcomes: Vec<Outcome> = self
                .pairs()
                .into_iter()
                .map(|(a, b)| Outcome {
                    a,
                    b,
                    a_better: self.expected_at(d, a, b, None),
                })
                .collect();
            let r = ratings::fit(k, &outcomes, 0).map_or_else(|_| d.theta.clone(), |r| r.ratings);
            return (r, None);
        }
        let mut rows = Vec::new();
        for (a, b) in self.pairs() {
            for q in normal_nodes() {
                let ratio = d.longer[a] - d.longer[b] + q;
                let expected = self.expected_at(d, a, b, Some(ratio));
                rows.push(Observed {
                    comparison: Predicted {
                        a,
                        b,
                        predicted: expected,
                        controls: vec![ratio],
                    },
                    preference: expected,
                    rater: None,
                });
            }
        }
        let run: Vec<Predicted> = rows.iter().map(|o| o.comparison.clone()).collect();
        match powered::fit(k, &run, &rows, 0, 1) {
            Ok(fit) => (fit.ratings.ratings, Some(fit.controls[0].0)),
            Err(_) => (d.theta.clone(), Some(self.people_length)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use judgecal_stats::rng::SeedableRng;

    fn drawn(theta: &[f64], longer: &[f64]) -> PairwiseDrawn {
        PairwiseDrawn {
            theta: theta.to_vec(),
            own: vec![0.0; theta.len()],
            longer: longer.to_vec(),
        }
    }

    #[test]
    fn without_ties_the_truth_is_the_worlds_ratings_and_ties_pull_it_in() {
        let d = drawn(&[0.0, 1.2, -0.7, 2.0], &[0.0; 4]);
        let world = PairwiseWorld {
            systems: 4,
            ..PLAIN
        };
        let (truth, _) = world.truth(&d);
        for (t, r) in d.theta.iter().zip(&truth) {
            assert!((t - r).abs() < 1e-6, "{truth:?}");
        }
        // A third of the comparisons tied: every expected outcome is nearer ½, so every
        // rating is nearer the baseline's, in the same order.
        let (tied, _) = PairwiseWorld { ties: 0.3, ..world }.truth(&d);
        for (t, r) in d.theta.iter().zip(&tied).skip(1) {
            assert!(r.abs() < t.abs() && r.signum() == t.signum(), "{tied:?}");
        }
    }

    /// Where the ratings control for length and nothing blurs the model, the truth is the
    /// world's ratings at equal length and the people's length coefficient, in either layout;
    /// raters who differ pull both in, as ties do.
    #[test]
    fn the_controlled_truth_is_the_ratings_at_equal_length_and_raters_pull_it_in() {
        let d = drawn(&[0.0, 1.2, -0.7, 2.0], &[0.0, 0.8, -0.5, 0.3]);
        for against_baseline in [false, true] {
            let world = PairwiseWorld {
                systems: 4,
                people_length: 0.4,
                verbose: 0.5,
                controlled: true,
                against_baseline,
                ..PLAIN
            };
            let (truth, gamma) = world.truth(&d);
            for (t, r) in d.theta.iter().zip(&truth) {
                assert!((t - r).abs() < 1e-6, "{truth:?}");
            }
            let gamma = gamma.expect("a coefficient");
            assert!((gamma - 0.4).abs() < 1e-6, "{gamma}");
            let (blurred, g) = PairwiseWorld {
                rater_sd: 0.7,
                ..world
            }
            .truth(&d);
            for (t, r) in d.theta.iter().zip(&blurred).skip(1) {
                assert!(r.abs() < t.abs() && r.signum() == t.signum(), "{blurred:?}");
            }
            assert!(g.expect("a coefficient") < 0.4);
        }
    }

    /// A rater's taste moves the preference as the truth's quadrature says: the share of a
    /// pair's comparisons people prefer, over many raters, is the expected outcome.
    #[test]
    fn raters_preferences_average_to_the_expected_outcome() {
        let world = PairwiseWorld {
            systems: 3,
            rater_sd: 0.8,
            people_length: 0.5,
            verbose: 0.6,
            ..PLAIN
        };
        let d = drawn(&[0.0, 0.9, -0.4], &[0.0, 0.7, -0.3]);
        let mut rng = Rng::seed_from_u64(3);
        let (mut wins, mut n) = (0.0, 0usize);
        for _ in 0..20_000 {
            let taste = world.rater(&mut rng);
            for _ in 0..10 {
                let (c, y) = world.comparison(&d, &taste, Pick::Usual, &mut rng);
                if c.verdicts.systems == Some((1, 0)) {
                    wins += y;
                    n += 1;
                }
            }
        }
        let share = wins / n as f64;
        let expected = world.expected_at(&d, 1, 0, None);
        // About 33,000 comparisons of the pair: the share's sd is under 0.003.
        assert!((share - expected).abs() < 0.01, "{share} vs {expected}");
    }
}
