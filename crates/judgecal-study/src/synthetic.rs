//! The paper's synthetic strict-and-compressing judge (section 6.2), and the stand-in for its
//! reference scores when no CSV column is given.

use clap::Args;
use judgecal_stats::rng::Rng;
use rand_distr::{Bernoulli, Beta, Distribution, Normal};
use serde::{Deserialize, Serialize};

/// j = offset + slope·y + tanh_amp·tanh(tanh_rate·(y − centre))
///     + verbose_bump·1[verbose]·1[|y − centre| < verbose_band] + N(0, σ(y)²),
/// σ(y) = noise_base + noise_slope·|y − centre|, verbose ~ Bernoulli(verbose_prob). Like the
/// paper's, j is not clipped to the scale unless `clip` (clipping piles about 8% of items at the
/// scale's bottom, which no line can follow). The defaults are the paper's.
#[derive(Debug, Clone, Copy, PartialEq, Args, Serialize, Deserialize)]
pub struct JudgeModel {
    #[arg(long, default_value_t = -0.5, allow_negative_numbers = true)]
    pub offset: f64,
    #[arg(long, default_value_t = 0.85)]
    pub slope: f64,
    #[arg(long, default_value_t = 0.4, allow_negative_numbers = true)]
    pub tanh_amp: f64,
    #[arg(long, default_value_t = 0.9)]
    pub tanh_rate: f64,
    #[arg(long, default_value_t = 3.0)]
    pub centre: f64,
    #[arg(long, default_value_t = 0.35, allow_negative_numbers = true)]
    pub verbose_bump: f64,
    #[arg(long, default_value_t = 0.3)]
    pub verbose_prob: f64,
    #[arg(long, default_value_t = 1.5)]
    pub verbose_band: f64,
    #[arg(long, default_value_t = 0.30)]
    pub noise_base: f64,
    #[arg(long, default_value_t = 0.18)]
    pub noise_slope: f64,
    /// Clip judge scores to the scale (the paper's judge is not clipped).
    #[arg(long)]
    pub clip: bool,
}

impl Default for JudgeModel {
    fn default() -> Self {
        Self {
            offset: -0.5,
            slope: 0.85,
            tanh_amp: 0.4,
            tanh_rate: 0.9,
            centre: 3.0,
            verbose_bump: 0.35,
            verbose_prob: 0.3,
            verbose_band: 1.5,
            noise_base: 0.30,
            noise_slope: 0.18,
            clip: false,
        }
    }
}

impl JudgeModel {
    /// A weaker judge than the default: slope 0.4, noisier (the drift studies' second world).
    pub fn weak() -> Self {
        JudgeModel {
            slope: 0.4,
            noise_base: 0.6,
            noise_slope: 0.36,
            ..JudgeModel::default()
        }
    }
}

impl JudgeModel {
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.verbose_prob) {
            return Err("--verbose-prob must lie in [0, 1]".into());
        }
        if self.noise_base < 0.0 || self.noise_slope < 0.0 {
            return Err("--noise-base and --noise-slope must be ≥ 0".into());
        }
        Ok(())
    }

    /// E[j | y] before noise and clipping: the mean curve of the paper's Figure 1.
    pub fn mean(&self, y: f64) -> f64 {
        let d = y - self.centre;
        let bump = if d.abs() < self.verbose_band {
            self.verbose_bump * self.verbose_prob
        } else {
            0.0
        };
        self.offset + self.slope * y + self.tanh_amp * (self.tanh_rate * d).tanh() + bump
    }

    /// One judge score for reference score `y` on the scale [lo, hi].
    pub fn draw(&self, y: f64, (lo, hi): (f64, f64), rng: &mut Rng) -> f64 {
        let d = y - self.centre;
        let verbose = Bernoulli::new(self.verbose_prob)
            .map(|b| b.sample(rng))
            .unwrap_or(false);
        let bump = if verbose && d.abs() < self.verbose_band {
            self.verbose_bump
        } else {
            0.0
        };
        let sd = self.noise_base + self.noise_slope * d.abs();
        let noise = Normal::new(0.0, sd).map_or(0.0, |n| n.sample(rng));
        let j = self.offset
            + self.slope * y
            + self.tanh_amp * (self.tanh_rate * d).tanh()
            + bump
            + noise;
        if self.clip { j.clamp(lo, hi) } else { j }
    }
}

/// The stand-in for UltraFeedback's fine-grained GPT-4 scores (the paper's reference: mean
/// 3.78, sd 1.04 on 1–5): a Beta(1.485, 0.651) stretched to the scale, which has that mean
/// and sd and piles up towards the top like the real scores, rounded to quarter points as a
/// mean of four 1–5 ratings is.
pub fn stand_in_reference(n: usize, (lo, hi): (f64, f64), rng: &mut Rng) -> Vec<f64> {
    let Ok(beta) = Beta::new(1.485, 0.651) else {
        return Vec::new();
    };
    (0..n)
        .map(|_| {
            let y = lo + (hi - lo) * beta.sample(rng);
            ((y * 4.0).round() / 4.0).clamp(lo, hi)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use judgecal_stats::rng::SeedableRng;

    #[test]
    fn the_stand_in_has_the_papers_mean_and_sd() {
        let mut rng = Rng::seed_from_u64(1);
        let y = stand_in_reference(100_000, (1.0, 5.0), &mut rng);
        let m = judgecal_stats::stats::mean(&y);
        let sd = (y.iter().map(|v| (v - m).powi(2)).sum::<f64>() / y.len() as f64).sqrt();
        // Sampling error at n = 100,000 is ~0.003; rounding to quarters moves the sd ~0.003.
        assert!((m - 3.78).abs() < 0.02, "{m}");
        assert!((sd - 1.04).abs() < 0.02, "{sd}");
    }

    #[test]
    fn the_judge_is_strict_and_compressing_as_in_the_paper() {
        // On the stand-in reference the judge's mean is about 0.7 below the reference's, the
        // average of j − E[j | y] is zero up to sampling, and clipping (an option) piles
        // several percent of items at the scale's bottom.
        let mut rng = Rng::seed_from_u64(2);
        let model = JudgeModel::default();
        let y = stand_in_reference(50_000, (1.0, 5.0), &mut rng);
        let j: Vec<f64> = y
            .iter()
            .map(|&y| model.draw(y, (1.0, 5.0), &mut rng))
            .collect();
        let mean = judgecal_stats::stats::mean;
        let gap = mean(&y) - mean(&j);
        assert!((0.55..0.9).contains(&gap), "{gap}");
        let resid: Vec<f64> = y.iter().zip(&j).map(|(&y, &j)| j - model.mean(y)).collect();
        assert!(mean(&resid).abs() < 0.01, "{}", mean(&resid));
        assert!(j.iter().any(|&j| j < 1.0));
        let clipped = JudgeModel {
            clip: true,
            ..model
        };
        let at_bottom = y
            .iter()
            .filter(|&&y| clipped.draw(y, (1.0, 5.0), &mut rng) == 1.0)
            .count() as f64
            / y.len() as f64;
        assert!((0.04..0.12).contains(&at_bottom), "{at_bottom}");
    }
}
