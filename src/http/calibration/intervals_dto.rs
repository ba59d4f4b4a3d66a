//! A version's predictive intervals, their held-out coverage, and the training anchors'
//! units the drift alarm starts from.

use serde::Serialize;
use utoipa::ToSchema;

use judgecal_stats::conformal::{BandSource, Intervals};
use judgecal_stats::drift::BOUND_DELTA;

/// One bin of the judge score and its interval.
#[derive(Serialize, ToSchema)]
pub struct IntervalBinDto {
    /// Judge scores from `from` (inclusive) to `to` (exclusive); null is open-ended.
    pub from: Option<f64>,
    pub to: Option<f64>,
    /// Held-out anchors in the bin.
    pub anchors: usize,
    /// The band of held-out residuals (reference − corrected) added to the corrected score
    /// (`conformal`), or the factors the method's own half-width is scaled by (`scaled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<[f64; 2]>,
    /// Share of the bin's held-out anchors inside their interval.
    pub held_out_coverage: Option<f64>,
}

/// A version's 95% predictive intervals and how often they covered anchors it did not see.
#[derive(Serialize, ToSchema)]
pub struct IntervalsDto {
    pub level: f64,
    /// `conformal` (the corrected score plus the band of held-out residuals of the judge
    /// score's bin), `scaled` (the Bayesian posterior predictive, its half-width scaled by the
    /// band of the bin's held-out residuals in units of it) or `method` (the posterior
    /// predictive as is: versions trained before bands were conformalised).
    pub source: String,
    /// Held-out anchors the coverage was measured on (conformal: each checked against bands
    /// made without its fifth of them).
    pub held_out: usize,
    pub held_out_coverage: Option<f64>,
    /// A bound on the share of new anchors the intervals miss, which holds given this
    /// version's training anchors except for one version in 1,000: the miss rate the drift
    /// alarm tests against (the nominal 0.05 for `method`).
    pub miss_bound: f64,
    pub bins: Vec<IntervalBinDto>,
    /// The units (raters, or uploads naming none) this version's training anchors came in,
    /// checked against these intervals: where the drift alarm's estimate of how alike one
    /// unit's misses are starts. Absent for versions trained before units were kept, and where
    /// the anchors came in fewer than two units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training_units: Option<TrainingUnitsDto>,
}

/// The training anchors' units, as the drift alarm starts from them.
#[derive(Serialize, ToSchema)]
pub struct TrainingUnitsDto {
    pub units: usize,
    pub anchors: usize,
    /// Training anchors outside their interval.
    pub misses: usize,
    /// The intra-unit correlation of misses the alarm starts betting with (estimated from
    /// these units, shrunk towards 0.05 and widened by 1.25; a declared
    /// `calibrators.drift_max_rho` caps it).
    pub rho: f64,
}

impl From<Intervals> for IntervalsDto {
    fn from(i: Intervals) -> Self {
        Self {
            level: i.level,
            source: match i.source {
                BandSource::Conformal => "conformal",
                BandSource::Scaled => "scaled",
                BandSource::Method => "method",
            }
            .to_owned(),
            miss_bound: i.miss_bound(BOUND_DELTA),
            held_out: i.held_out,
            held_out_coverage: i.held_out_coverage,
            bins: i
                .bins
                .into_iter()
                .map(|b| IntervalBinDto {
                    from: b.from,
                    to: b.to,
                    anchors: b.anchors,
                    band: b.band.map(|(lo, hi)| [lo, hi]),
                    held_out_coverage: b.held_out_coverage,
                })
                .collect(),
            training_units: i.units.map(|u| TrainingUnitsDto {
                units: u.units.round() as usize,
                anchors: u.anchors.round() as usize,
                misses: u.misses.round() as usize,
                rho: u.rho(),
            }),
        }
    }
}
