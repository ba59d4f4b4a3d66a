//! A drift alarm with a stated guarantee (groundwork for the open issue on honest numbers; not
//! yet wired to versions, the store or /metrics).
//!
//! Each new anchor either falls outside the version's 95% interval (a miss, 1) or not (0).
//! While the cell is healthy, misses occur at most at the nominal rate α = 0.05. The alarm
//! bets against that: its wealth starts at 1 and each anchor multiplies it by
//! 1 + λ_t·(x_t − α), with λ_t in [0, 1/α) chosen from the anchors before t only. Under the
//! healthy hypothesis each factor has expectation at most 1, so the wealth is a nonnegative
//! supermartingale and, by Ville's inequality, the chance that it *ever* reaches 1/δ is at
//! most δ: the alarm (wealth ≥ 1/δ) is anytime-valid, however long the cell is watched.
//!
//! λ_t is the Kelly bet for the recent miss rate: (p̂ − α) / (α(1 − α)), clipped to
//! [0, `MAX_BET`/α], where p̂ is the miss rate over the last `WINDOW` anchors shrunk towards α.
//! A healthy cell keeps λ near 0, so its wealth does not waste away while nothing happens and
//! a later jump is caught quickly.

use std::collections::VecDeque;

/// Recent anchors the bet is sized on.
pub const WINDOW: usize = 100;

/// The bet never stakes more than this share of the wealth on a miss-free anchor.
const MAX_BET: f64 = 0.5;

/// Pseudo-anchors at the nominal rate that p̂ is shrunk with.
const PRIOR: f64 = 20.0;

/// A test martingale of "misses occur at most at rate `alpha`".
#[derive(Debug, Clone, PartialEq)]
pub struct MissAlarm {
    alpha: f64,
    delta: f64,
    /// log of the wealth (kept in logs: it can grow past f64 on a broken cell).
    log_wealth: f64,
    recent: VecDeque<bool>,
    misses: usize,
    pub seen: u64,
    /// The anchor (1-based) at which the wealth first reached 1/δ.
    pub alarmed_at: Option<u64>,
}

impl MissAlarm {
    /// An alarm for a nominal miss rate `alpha` (0.05 for a 95% interval) and false-alarm
    /// probability `delta` (0.01 by default).
    pub fn new(alpha: f64, delta: f64) -> Self {
        Self {
            alpha,
            delta,
            log_wealth: 0.0,
            recent: VecDeque::with_capacity(WINDOW),
            misses: 0,
            seen: 0,
            alarmed_at: None,
        }
    }

    /// The bet on the next anchor, from the anchors before it.
    fn bet(&self) -> f64 {
        let n = self.recent.len() as f64;
        let p = (self.misses as f64 + PRIOR * self.alpha) / (n + PRIOR);
        ((p - self.alpha) / (self.alpha * (1.0 - self.alpha))).clamp(0.0, MAX_BET / self.alpha)
    }

    /// One new anchor: `miss` when it fell outside the interval. Returns whether the alarm is
    /// raised (it stays raised).
    pub fn observe(&mut self, miss: bool) -> bool {
        let lambda = self.bet();
        let x = if miss { 1.0 } else { 0.0 };
        self.log_wealth += (1.0 + lambda * (x - self.alpha)).ln();
        self.seen += 1;
        if self.recent.len() == WINDOW && self.recent.pop_front() == Some(true) {
            self.misses -= 1;
        }
        self.recent.push_back(miss);
        self.misses += usize::from(miss);
        if self.alarmed_at.is_none() && self.log_wealth >= (1.0 / self.delta).ln() {
            self.alarmed_at = Some(self.seen);
        }
        self.alarmed_at.is_some()
    }

    /// The e-value: the wealth so far (≥ 1/δ raises the alarm).
    pub fn e_value(&self) -> f64 {
        self.log_wealth.exp()
    }
}

/// What the drift alarm says of one cell's active version.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drift {
    /// Anchors checked since the version was activated.
    pub anchors: usize,
    /// The e-process's current value (its wealth); the alarm fires when it reaches 1/δ.
    pub e_value: f64,
    /// Whether it has reached 1/δ since the activation (it stays raised until the next).
    pub alarm: bool,
}

/// Replays `misses` through a fresh alarm.
pub fn drift(misses: &[bool], delta: f64) -> Drift {
    let mut alarm = MissAlarm::new(1.0 - crate::calibrate::conformal::LEVEL, delta);
    for &m in misses {
        alarm.observe(m);
    }
    Drift {
        anchors: misses.len(),
        e_value: alarm.e_value(),
        alarm: alarm.alarmed_at.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use nuts_rs::rand::rngs::ChaCha8Rng;
    use nuts_rs::rand::{RngExt, SeedableRng};

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

    fn run(rng: &mut ChaCha8Rng, rates: &[(usize, f64)]) -> Vec<bool> {
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
        let mut rng = ChaCha8Rng::seed_from_u64(1);
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

    #[test]
    fn the_wealth_is_a_product_of_fair_bets() {
        let mut alarm = MissAlarm::new(0.05, 0.01);
        // No history: p̂ = α, so the first bet is 0 and the wealth stays 1.
        alarm.observe(true);
        assert_eq!(alarm.e_value(), 1.0);
        // After one miss in one anchor, p̂ = (1 + 1)/(1 + 20) and λ = (p̂ − α)/(α(1 − α)).
        let p: f64 = 2.0 / 21.0;
        let lambda = (p - 0.05) / (0.05 * 0.95);
        alarm.observe(false);
        assert!((alarm.e_value() - (1.0 - lambda * 0.05)).abs() < 1e-12);
    }
}
