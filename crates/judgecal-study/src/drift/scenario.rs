//! The review's scenario for the drift alarm: a quantile map trained on the paper's judge,
//! healthy anchors, then the judge shifted by +0.8, all in batches of 100 naming no rater,
//! against the version's bound as the service tests.

use judgecal_stats::conformal::Intervals;
use judgecal_stats::cv::Split;
use judgecal_stats::drift::{BOUND_DELTA, MissAlarm};
use judgecal_stats::rng::{Rng, RngExt, SeedableRng};
use judgecal_stats::{Candidates, Cell, Method, Run};

use super::super::synthetic::{JudgeModel, stand_in_reference};

/// The false-alarm probability of the alarm.
const DELTA: f64 = 0.01;

/// The review's scenario: a quantile-map version trained on 1,000 anchors of the paper's judge,
/// 1,000 healthy anchors, then the judge's scores shifted by +0.8, all in batches of 100
/// naming no rater, tested against the version's bound as the service tests. Per watch: the
/// anchors after the shift until the alarm (`None`: not within `cap`; negative: before it).
pub fn scenario(
    candidates: &Candidates,
    watches: usize,
    cap: usize,
    seed: u64,
) -> Result<Vec<Option<i64>>, String> {
    let scale = (1.0, 5.0);
    let judge = JudgeModel::default();
    let never = std::sync::atomic::AtomicBool::new(false);
    let run = Run::new(&never, &|_| {});
    (0..watches)
        .map(|w| {
            let mut rng = Rng::seed_from_u64(seed ^ (w as u64) << 12);
            let pairs = |n: usize, shift: f64, rng: &mut Rng| -> Vec<(f64, f64)> {
                stand_in_reference(n, scale, rng)
                    .into_iter()
                    .map(|y| (judge.draw(y, scale, rng) + shift, y))
                    .collect()
            };
            let cells = [Cell {
                pairs: pairs(1000, 0.0, &mut rng),
                scale,
            }];
            let method = Method::QuantileMap;
            let split = Split {
                scheme: method.default_scheme(),
                seed,
            };
            let (models, held_out) = candidates.get(method).train(&cells, split, &run)?;
            // The training anchors were uploaded in batches of 100 too.
            let units: Vec<Option<usize>> = (0..1000).map(|i| Some(i / 100)).collect();
            let order: Vec<Option<i64>> = units.iter().map(|u| u.map(|b| b as i64)).collect();
            let intervals = Intervals::of(&cells[0].pairs, &held_out[0], seed)
                .ok_or("the version has no conformal band")?
                .with_units(&cells[0].pairs, &held_out[0], (&units, &order), seed);
            let mut alarm = MissAlarm::new(intervals.miss_bound(BOUND_DELTA), DELTA)
                .with_history(intervals.units.as_ref());
            for b in 0..(1000 + cap) / 100 {
                let shift = if b < 10 { 0.0 } else { 0.8 };
                let batch = pairs(100, shift, &mut rng);
                let js: Vec<f64> = batch.iter().map(|p| p.0).collect();
                let corrected = models[0].correct(&js)?;
                let mut misses = Vec::with_capacity(batch.len());
                for (c, &(j, y)) in corrected.iter().zip(&batch) {
                    let missed = intervals
                        .misses(j, y, c, rng.random())
                        .ok_or("a version without an interval")?;
                    misses.push(missed);
                }
                if alarm.observe_batch(&misses) {
                    return Ok(alarm.alarmed_at.map(|t| t as i64 - 1000));
                }
            }
            Ok(None)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reviews_shift_is_caught_after_five_uploads_and_within_1500_anchors() {
        // 40 watches: no alarm before the shift. Five uploads naming no rater may be one
        // labeller's, and carry at most a factor 30 together: none fires within the first
        // five after the shift (500 anchors). Every one fires within 1,500, most within
        // 800 (median 650 when this was written; 700 since the training uploads' misses are
        // counted as a new labeller's and bursts give back what they won: 31 of 40 within 800). Before that cap covered five uploads
        // (issue 85), every one within 600 (median 170, at most 373), and one unnamed
        // labeller of five uploads raised false alarms in 16% of healthy watches. Declaring
        // batches independent (drift_max_rho) removes the cap; see the grid's tests.
        let delays = scenario(&Candidates::default(), 40, 2000, 5).expect("the scenario runs");
        eprintln!("scenario (1): delays {delays:?}");
        assert!(
            delays
                .iter()
                .all(|d| d.is_some_and(|d| d > 500 && d <= 1500)),
            "{delays:?}"
        );
        let within = delays
            .iter()
            .filter(|d| d.is_some_and(|d| d <= 800))
            .count();
        assert!(
            within >= 30,
            "{within} of 40 within 800 anchors: {delays:?}"
        );
    }
}
