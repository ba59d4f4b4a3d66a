//! The drift grid's worlds: a version trained on the paper's synthetic judge (references from
//! the stand-in, as quarter points or rounded to integers) with its conformal band, and the
//! rates at which it misses on fresh anchors, with rater offsets, and after changes.

use judgecal_stats::conformal::Intervals;
use judgecal_stats::cv::Split;
use judgecal_stats::drift::BOUND_DELTA;
use judgecal_stats::rng::{Rng, RngExt, SeedableRng};
use judgecal_stats::stats::{mean, normal_quantile, sample_variance};
use judgecal_stats::{Candidates, Cell, Method, Run};

use super::super::synthetic::{JudgeModel, stand_in_reference};

/// Rater offsets' quantiles.
pub const OFFSETS: usize = 64;

/// The rater offset's variance, as a share of the residual variance.
pub const RATER_SHARE: f64 = 0.2;

/// What a world's version is: its method, trained on `train` anchors.
#[derive(Debug, Clone, Copy)]
pub struct Version<'a> {
    pub method: Method,
    pub candidates: &'a Candidates,
    pub train: usize,
    pub seed: u64,
    /// The judge's shift after a change, in reference sd (`shifted_curve`; 0.5 in the grid).
    pub shift: f64,
}

/// The offsets (in residual sd) the miss-rate curves are measured at: `-CURVE_SPAN..=CURVE_SPAN`
/// in steps of [`CURVE_STEP`].
pub const CURVE_STEP: f64 = 0.1;
const CURVE_SPAN: i32 = 40;

/// Fresh anchors each point of a curve is measured on.
const CURVE_ANCHORS: usize = 5_000;

/// A version's miss rates.
#[derive(Debug, Clone)]
pub struct DriftWorld {
    pub reference: &'static str,
    pub free: f64,
    pub by_offset: Vec<f64>,
    /// The mean of `by_offset`: the miss rate where raters add offsets.
    pub rated: f64,
    /// The version's bound, as the service tests against.
    pub bound: f64,
    /// Per change: its name and the miss rate after it.
    pub changes: Vec<(&'static str, f64)>,
    /// The miss rate where a rater adds an offset of k·[`CURVE_STEP`] residual sd, for k in
    /// −40..=40; and the same after the judge's scores shift by the version's `shift` (in
    /// reference sd).
    pub curve: Vec<f64>,
    pub shifted_curve: Vec<f64>,
}

impl DriftWorld {
    /// The miss rate at an offset of `o` residual sd (linear between the measured offsets,
    /// flat beyond them), healthy or after the shift.
    pub fn at(&self, o: f64, shifted: bool) -> f64 {
        let c = if shifted {
            &self.shifted_curve
        } else {
            &self.curve
        };
        let x = (o / CURVE_STEP + f64::from(CURVE_SPAN)).clamp(0.0, (c.len() - 1) as f64);
        let (i, f) = (x.floor() as usize, x.fract());
        let next = c[(i + 1).min(c.len() - 1)];
        c[i] + f * (next - c[i])
    }
}

pub fn version_misses(
    model: &judgecal_stats::Model,
    intervals: &Intervals,
    pairs: &[(f64, f64)],
    rng: &mut Rng,
) -> Result<f64, String> {
    let js: Vec<f64> = pairs.iter().map(|p| p.0).collect();
    let corrected = model.correct(&js)?;
    let mut missed = 0usize;
    for (c, &(j, y)) in corrected.iter().zip(pairs) {
        let miss = intervals
            .misses(j, y, c, rng.random())
            .ok_or("a version without an interval")?;
        missed += usize::from(miss);
    }
    Ok(missed as f64 / pairs.len().max(1) as f64)
}

/// Builds a world: trains the version, then measures its miss rates.
pub fn world(opts: Version<'_>, integer: bool) -> Result<DriftWorld, String> {
    let mut rng = Rng::seed_from_u64(opts.seed ^ u64::from(integer));
    let scale = (1.0, 5.0);
    let judge = JudgeModel::default();
    let weak = JudgeModel::weak();
    let reference = |t: f64| {
        let y = t.clamp(scale.0, scale.1);
        if integer { y.round() } else { y }
    };
    // Items: (truth, the judge's score, the weak judge's).
    let items = |n: usize, rng: &mut Rng| -> Vec<(f64, f64, f64)> {
        stand_in_reference(n, scale, rng)
            .into_iter()
            .map(|t| (t, judge.draw(t, scale, rng), weak.draw(t, scale, rng)))
            .collect()
    };
    let train: Vec<(f64, f64)> = items(opts.train, &mut rng)
        .iter()
        .map(|&(t, j, _)| (j, reference(t)))
        .collect();
    let cells = [Cell {
        pairs: train,
        scale,
    }];
    let never = std::sync::atomic::AtomicBool::new(false);
    let run = Run::new(&never, &|_| {});
    let split = Split {
        scheme: opts.method.default_scheme(),
        seed: opts.seed,
    };
    let (models, held_out) = opts
        .candidates
        .get(opts.method)
        .train(&cells, split, &run)?;
    let model = &models[0];
    let intervals = Intervals::of(&cells[0].pairs, &held_out[0], opts.seed)
        .ok_or("the version has no conformal band")?;
    let fresh = items(100_000, &mut rng);
    let healthy: Vec<(f64, f64)> = fresh.iter().map(|&(t, j, _)| (j, reference(t))).collect();
    let free = version_misses(model, &intervals, &healthy, &mut rng)?;
    let js: Vec<f64> = healthy.iter().map(|p| p.0).collect();
    let residuals: Vec<f64> = model
        .correct(&js)?
        .iter()
        .zip(&healthy)
        .map(|(c, &(_, y))| y - c.score)
        .collect();
    let offset_sd = (RATER_SHARE * sample_variance(&residuals)).sqrt();
    let by_offset = (0..OFFSETS)
        .map(|k| {
            let o = offset_sd * normal_quantile((k as f64 + 0.5) / OFFSETS as f64);
            let pairs: Vec<(f64, f64)> = fresh[..20_000]
                .iter()
                .map(|&(t, j, _)| (j, reference(t + o)))
                .collect();
            version_misses(model, &intervals, &pairs, &mut rng)
        })
        .collect::<Result<Vec<f64>, String>>()?;
    let sd = sample_variance(&healthy.iter().map(|p| p.1).collect::<Vec<_>>()).sqrt();
    let mut changes = Vec::new();
    for (name, shift) in [("shift +0.5 sd", 0.5), ("shift +1.0 sd", 1.0)] {
        let pairs: Vec<(f64, f64)> = healthy.iter().map(|&(j, y)| (j + shift * sd, y)).collect();
        changes.push((name, version_misses(model, &intervals, &pairs, &mut rng)?));
    }
    let switched: Vec<(f64, f64)> = fresh.iter().map(|&(t, _, w)| (w, reference(t))).collect();
    changes.push((
        "judge switch",
        version_misses(model, &intervals, &switched, &mut rng)?,
    ));
    let residual_sd = sample_variance(&residuals).sqrt();
    let mut curves = [Vec::new(), Vec::new()];
    for (c, shift) in curves.iter_mut().zip([0.0, opts.shift * sd]) {
        for k in -CURVE_SPAN..=CURVE_SPAN {
            let o = residual_sd * CURVE_STEP * f64::from(k);
            let pairs: Vec<(f64, f64)> = fresh[..CURVE_ANCHORS]
                .iter()
                .map(|&(t, j, _)| (j + shift, reference(t + o)))
                .collect();
            c.push(version_misses(model, &intervals, &pairs, &mut rng)?);
        }
    }
    let [curve, shifted_curve] = curves;
    Ok(DriftWorld {
        reference: if integer { "integer" } else { "quarter points" },
        free,
        rated: mean(&by_offset),
        by_offset,
        bound: intervals.miss_bound(BOUND_DELTA),
        changes,
        curve,
        shifted_curve,
    })
}
