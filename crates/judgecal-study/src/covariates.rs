//! Covariates with known truth (`judgecal-study covariates`): a judge whose score rises with a
//! response's log length beyond what people see in it, and the input layer
//! (`judgecal_stats::covariates`) that takes the length in beside the judge score.
//!
//! Each replication draws a world: lengths log-normal (median 400 tokens, log sd 0.6); a latent
//! quality q ~ N(3, 0.8²) that rises a little with length (correlation 0.2, as people like
//! fuller answers too); the reference q itself (continuous) or q rounded to 1–5 (integer); the
//! judge 0.5 + 0.8·q + γ·0.8·z + ε, z the standardised log length and ε of sd 0.3 × 0.8 (noise
//! about 0.3 reference sd), with γ = 0.5, 0.2 or 0 (half a reference sd per sd of log length, a
//! fifth, none). The layer is fitted to n anchors (`auto`'s candidates: the judge alone, with
//! the length raw, with its log), then 2,000 fresh items of the same world are corrected.
//!
//! Counted per design: how often each candidate is served (log length, raw length, the judge
//! alone); how often the served length coefficient's 95% interval covers its truth (the
//! population least-squares coefficient of the transformed length in the reference on the judge
//! score and it: for log length in closed form with the continuous reference, else from 400,000
//! draws), the length kept (transform still chosen) where `auto` served the judge alone, so that
//! every replication counts and none is counted only because it was selected; the fresh items'
//! MAE with the layer and with the judge alone (the linear corrector on the judge score); and
//! how often the fresh items' 95% band covers their reference (the band a version serves:
//! conformal, per bin of the fused score, from the anchors' cross-fitted fused scores).

use judgecal_stats::Run;
use judgecal_stats::bayes::FitOptions;
use judgecal_stats::conformal::Intervals;
use judgecal_stats::covariates::{Layer, LayerOptions, Row, Transform, fit_layer};
use judgecal_stats::panel::Stats;
use judgecal_stats::rng::{Rng, SeedableRng};
use judgecal_stats::stats::standard_normal;
use judgecal_stats::{Corrected, stats};

/// Log-length's mean (ln 400) and sd.
pub(crate) const LOG_MEAN: f64 = 5.991_464_547_107_982;
pub(crate) const LOG_SD: f64 = 0.6;
/// The quality's mean and sd, its correlation with z, and the judge's slope and noise share.
const Q_MEAN: f64 = 3.0;
const Q_SD: f64 = 0.8;
pub(crate) const RHO: f64 = 0.2;
const SLOPE: f64 = 0.8;
const NOISE: f64 = 0.3;

/// One design of the study.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CovariateDesign {
    /// The judge's length bias, in reference sds per sd of log length.
    pub bias: f64,
    /// References rounded to the integers 1–5.
    pub integer: bool,
    pub anchors: usize,
}

impl CovariateDesign {
    pub fn label(&self) -> String {
        format!(
            "bias {:.1} sd, {} reference, {} anchors",
            self.bias,
            if self.integer {
                "integer"
            } else {
                "continuous"
            },
            self.anchors
        )
    }

    /// One item: (length, judge score, reference).
    fn draw(&self, rng: &mut Rng) -> (f64, f64, f64) {
        let z = standard_normal(rng);
        let q = Q_MEAN + Q_SD * (RHO * z + (1.0 - RHO * RHO).sqrt() * standard_normal(rng));
        let judge = 0.5 + SLOPE * q + self.bias * Q_SD * z + NOISE * Q_SD * standard_normal(rng);
        let reference = if self.integer {
            q.round().clamp(1.0, 5.0)
        } else {
            q
        };
        ((LOG_MEAN + LOG_SD * z).exp(), judge, reference)
    }

    /// The truth: the population least-squares coefficient of log length (per unit of log
    /// length) in the reference on (1, judge, log length).
    pub fn truth(&self, seed: u64) -> f64 {
        if !self.integer {
            // Given z, q ~ N(3 + b·z, c²); E[q | j, z] = 3 + b·z + k·(j − E[j | z]).
            let (b, c2) = (Q_SD * RHO, Q_SD * Q_SD * (1.0 - RHO * RHO));
            let e2 = (NOISE * Q_SD).powi(2);
            let k = SLOPE * c2 / (SLOPE * SLOPE * c2 + e2);
            let per_z = b - k * (SLOPE * b + self.bias * Q_SD);
            return per_z / LOG_SD;
        }
        self.sampled_truth(seed)
    }

    /// The same coefficient from 400,000 draws of the world (least squares).
    fn sampled_truth(&self, seed: u64) -> f64 {
        self.sampled(seed, f64::ln)
    }

    /// The population least-squares coefficient of the raw length (per token).
    pub fn truth_raw(&self, seed: u64) -> f64 {
        self.sampled(seed, |l| l)
    }

    /// The coefficient of t(length) in the reference on (1, judge, t(length)), from 400,000
    /// draws.
    fn sampled(&self, seed: u64, t: fn(f64) -> f64) -> f64 {
        let mut rng = Rng::seed_from_u64(seed ^ 0x7A07_4C0E);
        let rows: Vec<(Vec<f64>, f64)> = (0..400_000)
            .map(|_| {
                let (l, j, y) = self.draw(&mut rng);
                (vec![j, t(l)], y)
            })
            .collect();
        least_squares(&rows)[2]
    }
}

/// The least-squares coefficients (intercept first) of `y` on the two inputs of each row.
pub(crate) fn least_squares(rows: &[(Vec<f64>, f64)]) -> [f64; 3] {
    let stats = Stats::of(2, rows.iter().map(|(x, y)| (x.as_slice(), *y)));
    let beta = stats
        .gram
        .clone()
        .lu()
        .solve(&stats.xty)
        .expect("the design is not singular");
    [beta[0], beta[1], beta[2]]
}

/// What one design measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    pub design: String,
    pub replications: usize,
    /// Replications that served log length, a piecewise-linear term in it (hinges at its
    /// quartiles), length, or the judge alone.
    pub served_log: usize,
    pub served_spline: usize,
    pub served_raw: usize,
    pub served_none: usize,
    /// How often the served coefficient's interval covered its truth (the log length's or the
    /// raw length's, whichever transform is served), over every replication: where `auto`
    /// served the judge alone, the layer with the length kept (its transform still chosen).
    pub covered: usize,
    /// Replications counted in `covered` (all that fitted).
    pub counted: usize,
    pub truth: f64,
    pub truth_raw: f64,
    /// Mean fresh-item MAE with the layer and with the judge alone.
    pub mae_with: f64,
    pub mae_without: f64,
    /// Fresh items inside their 95% band, over all replications.
    pub band_coverage: f64,
}

impl Outcome {
    pub fn coverage(&self) -> Option<f64> {
        (self.counted > 0).then(|| self.covered as f64 / self.counted as f64)
    }
}

/// Whether the layer's coefficient interval (the length kept where `auto` left it out)
/// covers its truth on its own scale: (log length, raw length); `None` where no fit keeps it.
fn coefficient_covers(
    layer: &Layer,
    anchors: &[Row],
    opts: &LayerOptions,
    run: &Run,
    (truth, truth_raw): (f64, f64),
) -> Option<bool> {
    let names = vec!["length".to_owned()];
    // Where `auto` served the judge alone or a bend, the length kept raw or logged.
    let kept = if layer.inputs.len() != 1 {
        let opts = LayerOptions {
            keep_all: true,
            piecewise: false,
            ..opts.clone()
        };
        fit_layer(std::slice::from_ref(&anchors.to_vec()), &names, &opts, run)
            .ok()
            .map(|mut l| l.remove(0))
    } else {
        Some(layer.clone())
    }?;
    // A piecewise-linear term has no one coefficient to hold to the truth.
    if kept.inputs.len() != 1 {
        return None;
    }
    let (input, c) = (&kept.inputs[0], &kept.coefficients[0]);
    let target = match input.transform {
        Transform::Log => truth,
        Transform::Identity => truth_raw,
        Transform::Hinge { .. } => return None,
    };
    Some((c.per_sd_lo / input.scale..=c.per_sd_hi / input.scale).contains(&target))
}

/// The judge alone: the linear corrector on the judge score (closed form).
fn judge_alone(anchors: &[Row]) -> Vec<f64> {
    let alone = Stats::of(
        1,
        anchors
            .iter()
            .map(|a| (std::slice::from_ref(&a.score), a.reference)),
    );
    let (line, _, _) = alone
        .conjugate(&[0.0, 1.0], &[2.0, 2.0])
        .expect("the judge's scores vary");
    line.iter().copied().collect()
}

/// Fresh items' absolute errors with the layer and with the judge alone (`line`), and how many
/// of them the served band (conformal per bin of the fused score, from the cross-fitted
/// anchors) covers, of how many it holds.
fn fresh_errors(
    design: CovariateDesign,
    layer: &Layer,
    line: &[f64],
    seed: u64,
    rng: &mut Rng,
) -> (Vec<f64>, Vec<f64>, (usize, usize)) {
    let held: Vec<Option<Corrected>> = layer
        .anchors
        .iter()
        .map(|(s, _)| Some(Corrected::score(*s)))
        .collect();
    let intervals = Intervals::of(&layer.anchors, &held, seed);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut inside, mut fresh_items) = (0, 0);
    for _ in 0..2000 {
        let (l, j, y) = design.draw(rng);
        let Ok(fused) = layer.fuse(j, &|_| Some(l)) else {
            continue;
        };
        with.push((fused - y).abs());
        without.push((line[0] + line[1] * j - y).abs());
        if let Some(intervals) = &intervals {
            let mut c = [Corrected::score(fused)];
            intervals.apply(&[fused], &mut c);
            if let Some((lo, hi)) = c[0].predictive {
                fresh_items += 1;
                inside += usize::from((lo..=hi).contains(&y));
            }
        }
    }
    (with, without, (inside, fresh_items))
}

/// Runs `replications` of `design` from `seed`.
pub fn run(
    design: CovariateDesign,
    replications: usize,
    seed: u64,
    sampler: FitOptions,
) -> Outcome {
    let truth = design.truth(seed);
    let truth_raw = design.truth_raw(seed);
    let names = vec!["length".to_owned()];
    let (mut served_log, mut served_spline, mut served_raw, mut served_none) = (0, 0, 0, 0);
    let (mut covered, mut counted) = (0, 0);
    let (mut mae_with, mut mae_without) = (Vec::new(), Vec::new());
    let (mut inside, mut fresh_items) = (0usize, 0usize);
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let quiet = |_: f64| {};
    for rep in 0..replications {
        let mut rng = Rng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(rep as u64));
        let anchors: Vec<Row> = (0..design.anchors)
            .map(|_| {
                let (l, j, y) = design.draw(&mut rng);
                Row {
                    score: j,
                    covariates: vec![l],
                    reference: y,
                }
            })
            .collect();
        let opts = LayerOptions {
            sampler: FitOptions {
                seed: seed ^ rep as u64,
                ..sampler
            },
            ..LayerOptions::default()
        };
        let run = Run::new(&cancel, &quiet);
        let Ok(layers) = fit_layer(std::slice::from_ref(&anchors), &names, &opts, &run) else {
            continue;
        };
        let layer = &layers[0];
        match layer.inputs.first().map(|i| i.transform) {
            Some(Transform::Log) if layer.inputs.len() > 1 => served_spline += 1,
            Some(Transform::Log) => served_log += 1,
            Some(Transform::Identity) => served_raw += 1,
            Some(Transform::Hinge { .. }) | None => served_none += 1,
        }
        // The coefficient's interval against its truth, the length kept where `auto` left it
        // out.
        if let Some(hit) = coefficient_covers(layer, &anchors, &opts, &run, (truth, truth_raw)) {
            counted += 1;
            covered += usize::from(hit);
        }
        let line = judge_alone(&anchors);
        let (with, without, band) = fresh_errors(design, layer, &line, seed ^ rep as u64, &mut rng);
        inside += band.0;
        fresh_items += band.1;
        mae_with.push(stats::mean(&with));
        mae_without.push(stats::mean(&without));
    }
    Outcome {
        design: design.label(),
        replications,
        served_log,
        served_spline,
        served_raw,
        served_none,
        covered,
        counted,
        truth,
        truth_raw,
        mae_with: stats::mean(&mae_with),
        mae_without: stats::mean(&mae_without),
        band_coverage: inside as f64 / fresh_items.max(1) as f64,
    }
}

/// The study's designs: three judges, two reference scales, three anchor counts.
pub fn designs() -> Vec<CovariateDesign> {
    let mut out = Vec::new();
    for bias in [0.5, 0.2, 0.0] {
        for integer in [false, true] {
            for anchors in [200, 1000, 5000] {
                out.push(CovariateDesign {
                    bias,
                    integer,
                    anchors,
                });
            }
        }
    }
    out
}

/// The Markdown table of the outcomes.
pub fn table(rows: &[Outcome]) -> String {
    let mut out = String::from(
        "| design | served: log / spline / raw / none | coefficient covers its truth | truth (per unit of log length) | fresh MAE with / without | MAE change | 95% band covers |\n|---|---|---:|---:|---|---:|---:|\n",
    );
    for r in rows {
        let coverage = r
            .coverage()
            .map_or("—".to_owned(), |c| format!("{:.1}%", 100.0 * c));
        out.push_str(&format!(
            "| {} | {} / {} / {} / {} | {} | {:+.4} | {:.4} / {:.4} | {:+.1}% | {:.1}% |\n",
            r.design,
            r.served_log,
            r.served_spline,
            r.served_raw,
            r.served_none,
            coverage,
            r.truth,
            r.mae_with,
            r.mae_without,
            100.0 * (r.mae_with / r.mae_without - 1.0),
            100.0 * r.band_coverage
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closed_form_truth_is_the_large_samples_least_squares_coefficient() {
        for bias in [0.5, 0.0] {
            let d = CovariateDesign {
                bias,
                integer: false,
                anchors: 0,
            };
            let (closed, sampled) = (d.truth(1), d.sampled_truth(1));
            assert!(
                (closed - sampled).abs() < 0.01,
                "{bias}: {closed} vs {sampled}"
            );
        }
    }

    #[test]
    fn a_half_sd_length_bias_is_served_and_cuts_the_error_by_a_third() {
        let d = CovariateDesign {
            bias: 0.5,
            integer: false,
            anchors: 1000,
        };
        let out = run(d, 12, 3, FitOptions::default());
        // The length is kept in every replication: logged, or bent in its log where that
        // wins on held-out MAE (the shape is not held to the 1% margin).
        assert_eq!(out.served_log + out.served_spline, 12, "{out:?}");
        assert!(out.served_log >= 6, "{out:?}");
        assert!(out.mae_with < 0.7 * out.mae_without, "{out:?}");
        assert!((0.93..=0.97).contains(&out.band_coverage), "{out:?}");
    }
}
