//! A drift alarm with a stated guarantee.
//!
//! Each new anchor either falls outside the version's 95% interval (a miss, 1) or not (0).
//! While the cell is healthy (new anchors exchangeable with those the version was trained
//! on), a batch's anchors miss at most at the version's rate a: the bound on its miss rate that
//! holds given its training anchors ([`crate::calibrate::conformal::Intervals::miss_bound`],
//! failing for one version in 1/[`BOUND_DELTA`]). The alarm bets against that once per upload batch: its wealth starts at
//! 1 and each batch multiplies it by 1 + λ_b·(x̄_b − a), where x̄_b is the batch's miss share
//! and λ_b in [0, 1/a) is chosen from earlier batches only. The batch's anchors may share
//! raters or prompts, and so miss together; the expectation of x̄_b is still at most a,
//! so each factor has expectation at most 1, the wealth is a nonnegative supermartingale and,
//! by Ville's inequality, the chance that it *ever* reaches 1/δ is at most δ: the alarm
//! (wealth ≥ 1/δ) is anytime-valid, however long the cell is watched and however its anchors
//! are batched. Betting on each anchor instead would need them to be independent given the
//! past, which batches sharing a rater are not: a shared offset then raises false alarms.
//!
//! λ_b is the Kelly bet for the recent batches: (p̂ − a)·n/(d·a(1 − a)), clipped to
//! [0, `MAX_BET`/a], where p̂ is the miss rate over the recent anchors shrunk towards a, n the
//! recent batches' mean size, and d ≥ 1 their design effect: the spread of their miss shares
//! around p̂ over what independent anchors would give (p̂(1 − p̂)/n), shrunk towards 1. For
//! anchors one at a time this is the Kelly bet on a coin, (p̂ − a)/(a(1 − a)). A batch of many
//! independent anchors says more than one anchor, so the bet grows with the batch; batches
//! whose anchors miss together show it in d, which shrinks the bet back. The recent ones are
//! the last `WINDOW` anchors or the last `BATCH_WINDOW` batches, whichever reach further back.
//! A healthy cell keeps λ near 0, so its wealth does not waste away while nothing happens and
//! a later jump is caught quickly.

use std::collections::VecDeque;

/// Recent anchors the bet is sized on (whole batches; at least the last one)...
pub const WINDOW: usize = 100;

/// ...or recent batches, whichever reach further back.
pub const BATCH_WINDOW: usize = 10;

/// Pseudo-batches at the independent-anchor spread that the design effect is shrunk with.
const PRIOR_BATCHES: f64 = 2.0;

/// The bet never stakes more than this share of the wealth on a miss-free batch.
const MAX_BET: f64 = 0.5;

/// Pseudo-anchors at the null rate that p̂ is shrunk with.
const PRIOR: f64 = 20.0;

/// The chance that a version's miss rate exceeds the bound the alarm tests against, over the
/// draw of its training anchors. A cell's alarm is false with probability at most
/// `calibrators.drift_delta` + this.
pub const BOUND_DELTA: f64 = 0.001;

/// A test supermartingale of "batches miss at most at rate `alpha`".
#[derive(Debug, Clone, PartialEq)]
pub struct MissAlarm {
    alpha: f64,
    delta: f64,
    /// log of the wealth (kept in logs: it can grow past f64 on a broken cell).
    log_wealth: f64,
    /// The largest log wealth so far.
    log_peak: f64,
    /// Recent batches: (anchors, misses).
    recent: VecDeque<(usize, usize)>,
    recent_anchors: usize,
    recent_misses: usize,
    /// Anchors seen.
    pub seen: u64,
    /// The anchor (1-based) whose batch first brought the wealth to 1/δ.
    pub alarmed_at: Option<u64>,
}

impl MissAlarm {
    /// An alarm for a null miss rate `alpha` (0.05 for a 95% interval, or the version's bound)
    /// and false-alarm probability `delta` (0.01 by default).
    pub fn new(alpha: f64, delta: f64) -> Self {
        Self {
            alpha,
            delta,
            log_wealth: 0.0,
            log_peak: 0.0,
            recent: VecDeque::new(),
            recent_anchors: 0,
            recent_misses: 0,
            seen: 0,
            alarmed_at: None,
        }
    }

    /// The bet on the next batch, from the batches before it.
    fn bet(&self) -> f64 {
        let a = self.alpha;
        let n = self.recent_anchors as f64;
        let p = (self.recent_misses as f64 + PRIOR * a) / (n + PRIOR);
        let batches = self.recent.len() as f64;
        let size = if batches > 0.0 { n / batches } else { 1.0 };
        // The design effect: the spread of the batches' miss shares against what independent
        // anchors would give, at least 1.
        let binomial = p * (1.0 - p) / size;
        let spread: f64 = self
            .recent
            .iter()
            .map(|&(k, m)| (m as f64 / k as f64 - p).powi(2))
            .sum();
        let observed = (spread + PRIOR_BATCHES * binomial) / (batches + PRIOR_BATCHES);
        let design = (observed / binomial).max(1.0);
        let v = design * a * (1.0 - a) / size;
        ((p - a) / v).clamp(0.0, MAX_BET / a)
    }

    /// One upload batch: whether each of its anchors fell outside the interval. Returns
    /// whether the alarm is raised (it stays raised).
    pub fn observe_batch(&mut self, misses: &[bool]) -> bool {
        if !misses.is_empty() {
            let lambda = self.bet();
            let missed = misses.iter().filter(|&&m| m).count();
            let share = missed as f64 / misses.len() as f64;
            self.log_wealth += (1.0 + lambda * (share - self.alpha)).ln();
            self.log_peak = self.log_peak.max(self.log_wealth);
            self.seen += misses.len() as u64;
            self.recent.push_back((misses.len(), missed));
            self.recent_anchors += misses.len();
            self.recent_misses += missed;
            while self.recent.len() > BATCH_WINDOW && self.recent_anchors > WINDOW {
                let (n, m) = self.recent.pop_front().expect("more than one batch");
                self.recent_anchors -= n;
                self.recent_misses -= m;
            }
        }
        if self.alarmed_at.is_none() && self.log_peak >= (1.0 / self.delta).ln() {
            self.alarmed_at = Some(self.seen);
        }
        self.alarmed_at.is_some()
    }

    /// One anchor, a batch of its own.
    pub fn observe(&mut self, miss: bool) -> bool {
        self.observe_batch(&[miss])
    }

    /// The e-value: the wealth so far (≥ 1/δ raises the alarm).
    pub fn e_value(&self) -> f64 {
        self.log_wealth.exp()
    }

    /// The largest e-value so far: by Ville's inequality a healthy cell's ever reaches c with
    /// probability at most 1/c, which is what a fleet-wide alert needs (for K cells, alert at
    /// K/δ).
    pub fn peak(&self) -> f64 {
        self.log_peak.exp()
    }
}

/// What the drift alarm says of one cell's active version.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drift {
    /// Anchors checked since the version was activated.
    pub anchors: usize,
    /// The miss rate tested against: the version's bound.
    pub miss_bound: f64,
    /// The e-process's current value (its wealth); the alarm fires when it reaches 1/δ.
    pub e_value: f64,
    /// The largest e-value since the activation.
    pub peak: f64,
    /// Whether it has reached 1/δ since the activation (it stays raised until the next).
    pub alarm: bool,
}

/// Replays `batches` (each: whether its anchors missed) through a fresh alarm against the
/// miss rate `miss_bound`.
pub fn drift(batches: &[Vec<bool>], miss_bound: f64, delta: f64) -> Drift {
    let mut alarm = MissAlarm::new(miss_bound, delta);
    for batch in batches {
        alarm.observe_batch(batch);
    }
    Drift {
        anchors: batches.iter().map(Vec::len).sum(),
        miss_bound,
        e_value: alarm.e_value(),
        peak: alarm.peak(),
        alarm: alarm.alarmed_at.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use crate::calibrate::rng::Rng;
    use crate::calibrate::rng::{RngExt, SeedableRng};

    use super::*;

    /// The window rule judgecal's coverage alert uses: over the last 200 anchors, a share
    /// inside below 85% (checked once at least 50 are in).
    fn window_alarm(misses: &[bool]) -> Option<usize> {
        let mut inside = 0usize;
        for (t, &m) in misses.iter().enumerate() {
            inside += usize::from(!m);
            if t >= 200 {
                inside -= usize::from(!misses[t - 200]);
            }
            let n = (t + 1).min(200);
            if n >= 50 && (inside as f64) < 0.85 * n as f64 {
                return Some(t + 1);
            }
        }
        None
    }

    fn run(rng: &mut Rng, rates: &[(usize, f64)]) -> Vec<bool> {
        rates
            .iter()
            .flat_map(|&(n, p)| (0..n).map(|_| rng.random::<f64>() < p).collect::<Vec<_>>())
            .collect()
    }

    fn first_alarm(misses: &[bool]) -> Option<u64> {
        let mut alarm = MissAlarm::new(0.05, 0.01);
        for &m in misses {
            if alarm.observe(m) {
                break;
            }
        }
        alarm.alarmed_at
    }

    #[test]
    fn a_healthy_cell_almost_never_alarms_and_a_broken_one_soon_does() {
        // 500 runs of 5,000 anchors at exactly the nominal 5% miss rate: Ville's inequality
        // allows at most δ = 1% of runs to ever alarm.
        let mut rng = Rng::seed_from_u64(1);
        let (mut healthy_alarms, mut window_false) = (0, 0);
        let (mut delays, mut window_delays) = (Vec::new(), Vec::new());
        let mut window_missed = 0;
        for _ in 0..500 {
            let misses = run(&mut rng, &[(5000, 0.05)]);
            healthy_alarms += usize::from(first_alarm(&misses).is_some());
            window_false += usize::from(window_alarm(&misses).is_some());
            // 1,000 healthy anchors, then a miss rate of 15%.
            let misses = run(&mut rng, &[(1000, 0.05), (4000, 0.15)]);
            if let Some(t) = first_alarm(&misses) {
                delays.push(t as f64 - 1000.0);
            }
            match window_alarm(&misses) {
                Some(t) => window_delays.push(t as f64 - 1000.0),
                None => window_missed += 1,
            }
        }
        delays.sort_by(f64::total_cmp);
        window_delays.sort_by(f64::total_cmp);
        let median = |v: &[f64]| v.get(v.len() / 2).copied().unwrap_or(f64::NAN);
        eprintln!(
            "e-process: false alarms in {healthy_alarms} of 500 healthy runs; after a jump to 15%, alarmed in {} of 500, median delay {} anchors (an early alarm counts negative); window rule: false alarms in {window_false} of 500, median delay {} ({window_missed} never)",
            delays.len(),
            median(&delays),
            median(&window_delays)
        );
        assert!(healthy_alarms <= 5, "{healthy_alarms} false alarms");
        assert!(delays.len() >= 495, "{} of 500 alarmed", delays.len());
        assert!(median(&delays) < 400.0, "median delay {}", median(&delays));
    }

    /// 5,000 anchors in batches of 50 whose anchors share a rater offset: each batch misses at
    /// its own rate p_b ~ Beta(0.5, 9.5) (mean exactly 5%, so the cell is healthy).
    fn batched(rng: &mut Rng) -> Vec<Vec<bool>> {
        use rand_distr::{Beta, Distribution};
        let rate = Beta::new(0.5, 9.5).expect("valid Beta");
        (0..100)
            .map(|_| {
                let p: f64 = rate.sample(rng);
                (0..50).map(|_| rng.random::<f64>() < p).collect()
            })
            .collect()
    }

    #[test]
    fn batches_that_miss_together_raise_no_more_false_alarms_than_delta() {
        // 500 healthy runs. Betting per batch stays within δ = 1%; betting per anchor, which
        // treats the batch's anchors as independent, fires far more often.
        let mut rng = Rng::seed_from_u64(8);
        let (mut per_batch, mut per_anchor) = (0, 0);
        for _ in 0..500 {
            let batches = batched(&mut rng);
            per_batch += usize::from(drift(&batches, 0.05, 0.01).alarm);
            let anchors: Vec<bool> = batches.concat();
            per_anchor += usize::from(first_alarm(&anchors).is_some());
        }
        eprintln!(
            "batch effect: per-batch bets alarmed in {per_batch} of 500 healthy runs, per-anchor bets in {per_anchor}"
        );
        assert!(per_batch <= 8, "{per_batch} false alarms");
        assert!(
            per_anchor >= 50,
            "{per_anchor}: the batch effect did not bite"
        );
        // A real shift still raises it: the same batches, then batches missing at 25%.
        let mut caught = 0;
        for _ in 0..100 {
            let mut batches = batched(&mut rng);
            batches.truncate(20);
            batches.extend((0..40).map(|_| (0..50).map(|_| rng.random::<f64>() < 0.25).collect()));
            caught += usize::from(drift(&batches, 0.05, 0.01).alarm);
        }
        assert!(caught >= 95, "{caught} of 100 shifted runs alarmed");
    }

    #[test]
    fn testing_against_the_versions_bound_holds_whatever_its_calibration_draw() {
        // 400 versions, each with a band cut from 120 held-out residuals (ranks 3 and 118 of
        // uniforms: the version's true miss rate is 1 − (r₁₁₈ − r₃), above 5% for about 45%
        // of them), watched over 40,000 healthy anchors in batches of 50. Against the nominal 5% the alarm fires
        // for many versions whose calibration draw was unlucky; against the bound at most
        // δ + the bound's own failure rate.
        use crate::calibrate::conformal::{Bin, Intervals, Source};
        let mut rng = Rng::seed_from_u64(9);
        let version = Intervals {
            level: 0.95,
            source: Source::Conformal,
            bins: vec![Bin {
                from: None,
                to: None,
                anchors: 120,
                band: None,
                held_out_coverage: None,
            }],
            held_out: 120,
            held_out_coverage: None,
        };
        let bound = version.miss_bound(BOUND_DELTA);
        let (mut nominal, mut bounded) = (0, 0);
        for _ in 0..400 {
            let mut r: Vec<f64> = (0..120).map(|_| rng.random::<f64>()).collect();
            r.sort_by(f64::total_cmp);
            let miss = 1.0 - (r[117] - r[2]);
            let batches: Vec<Vec<bool>> = (0..800)
                .map(|_| (0..50).map(|_| rng.random::<f64>() < miss).collect())
                .collect();
            nominal += usize::from(drift(&batches, 0.05, 0.01).alarm);
            bounded += usize::from(drift(&batches, bound, 0.01).alarm);
        }
        eprintln!(
            "calibration draw: bound {bound:.3}; alarms in {nominal} of 400 healthy versions against 5%, {bounded} against the bound"
        );
        assert!(nominal >= 20, "{nominal}");
        assert!(bounded <= 6, "{bounded}");
    }

    #[test]
    fn the_wealth_is_a_product_of_fair_bets() {
        let mut alarm = MissAlarm::new(0.05, 0.01);
        // No history: p̂ = α, so the first bet is 0 and the wealth stays 1.
        alarm.observe(true);
        assert_eq!(alarm.e_value(), 1.0);
        // After one miss in one anchor, p̂ = (1 + 1)/(1 + 20); one anchor's spread
        // (1 − p̂)² is above p̂(1 − p̂), so the design effect is
        // ((1 − p̂)² + 2·p̂(1 − p̂))/(3·p̂(1 − p̂)), and λ = (p̂ − α)/(d·α(1 − α)).
        let p: f64 = 2.0 / 21.0;
        let d = ((1.0 - p).powi(2) + 2.0 * p * (1.0 - p)) / (3.0 * p * (1.0 - p));
        let lambda = (p - 0.05) / (d * 0.05 * 0.95);
        alarm.observe(false);
        assert!((alarm.e_value() - (1.0 - lambda * 0.05)).abs() < 1e-12);
    }
}
