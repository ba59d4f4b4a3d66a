//! Prometheus metrics, all prefixed `judgecal_`. Labels are bounded sets (route template,
//! method, status, judge, rubric), never item ids. One registry per application, so tests can
//! run several side by side.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use prometheus::{Encoder, HistogramVec, IntCounterVec, IntGaugeVec, Registry, TextEncoder};

use crate::domain::CellKey;
use crate::domain::calibration::{CalibratorVersion, JobKind};
use crate::domain::pairwise::version::PreferenceVersion;
use crate::store::CoverageWindow;
use judgecal_stats::Method;
use judgecal_stats::bridge::Finding;
use judgecal_stats::drift::Watch;

mod gauges;

use gauges::Reg;
pub use gauges::{DriftGauges, PairwiseGauges, VersionGauges};

const CELL: &[&str] = &["judge", "rubric"];
/// A panel member's gauges: the panel (in the `judge` label, as its name serves), the rubric and the member.
const PANEL_MEMBER: &[&str] = &["judge", "rubric", "member"];
/// A covariate's gauges: the cell and the covariate's input (`length`, `log(length)`).
const COVARIATE: &[&str] = &["judge", "rubric", "input"];
/// A pairwise cell's bias gauges: the cell, the diagnostic and whose it is (`judge`, `people`).
const PAIRWISE_BIAS: &[&str] = &["judge", "rubric", "diagnostic", "source"];
/// A pairwise cell's per-system gauges.
const PAIRWISE_SYSTEM: &[&str] = &["judge", "rubric", "system"];

/// The run-level question a request asked: the `kind` label of `judgecal_estimates_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunQuestion {
    Estimate,
    Compare,
    Rank,
}

impl RunQuestion {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Estimate => "estimate",
            Self::Compare => "compare",
            Self::Rank => "rank",
        }
    }
}

/// Which cells a refresh of per-cell gauges covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaugeScope {
    /// Every cell: cells left out lose their gauges.
    All,
    /// The cells given: the others keep theirs.
    These,
}

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    pub http_requests: IntCounterVec,
    pub http_duration: HistogramVec,
    pub cell_anchors: IntGaugeVec,
    pub corrections: IntCounterVec,
    pub estimates: IntCounterVec,
    pub training_jobs: IntCounterVec,
    pub training_duration: HistogramVec,
    pub dropout_sigma: HistogramVec,
    pub review_routed: IntCounterVec,
    pub judge_version_mismatch: IntCounterVec,
    pub evaluation_events_dropped: IntCounterVec,
    /// The gauges of the version a cell serves.
    pub version: VersionGauges,
    /// A pairwise cell's gauges, from its newest version.
    pub pairwise: PairwiseGauges,
    /// The coverage and drift gauges.
    pub drift: DriftGauges,
    /// The cells the coverage gauges are set for, to drop those whose version changed.
    coverage_cells: Arc<Mutex<HashSet<CellKey>>>,
    /// The cells the drift gauges are set for.
    drift_cells: Arc<Mutex<HashSet<CellKey>>>,
    /// The covariate inputs each cell's gauges are set for, to drop those a new version lacks.
    covariate_inputs: Arc<Mutex<HashMap<CellKey, Vec<String>>>>,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let reg = Reg(&registry);
        let http = &["route", "method", "status"];
        Self {
            judge_version_mismatch: reg.counter(
                "judgecal_judge_version_mismatch_total",
                "Requests that named a judge version the calibration serving them was not trained on (no calibration of that judge version)",
                CELL,
            ),
            evaluation_events_dropped: reg.counter(
                "judgecal_evaluation_events_dropped_total",
                "Corrected items whose OpenTelemetry evaluation event was dropped because the export queue (otel.queue) was full",
                &[],
            ),
            http_requests: reg.counter(
                "judgecal_http_requests_total",
                "HTTP requests answered",
                http,
            ),
            http_duration: reg.histogram(
                "judgecal_http_request_duration_seconds",
                "Time to answer an HTTP request",
                vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0,
                ],
                http,
            ),
            cell_anchors: reg.int_gauge(
                "judgecal_cell_anchors",
                "Anchors stored per (judge, rubric) cell",
                CELL,
            ),
            corrections: reg.counter(
                "judgecal_corrections_total",
                "Scores corrected by this process",
                &["judge", "rubric", "method"],
            ),
            estimates: reg.counter(
                "judgecal_estimates_total",
                "Run-level answers given by this process: kind is estimate (POST /v1/estimate), compare (POST /v1/compare) or rank (POST /v1/rank)",
                &["judge", "rubric", "kind"],
            ),
            training_jobs: reg.counter(
                "judgecal_training_jobs_total",
                "Training jobs finished, as recorded in the store (every replica reports the same totals)",
                &["method", "outcome"],
            ),
            training_duration: reg.histogram(
                "judgecal_training_duration_seconds",
                "Wall time of finished training jobs, as recorded in the store",
                vec![
                    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                ],
                &["method"],
            ),
            dropout_sigma: reg.histogram(
                "judgecal_dropout_sigma",
                "MC-dropout sd of the flow's corrected scores (score units)",
                vec![0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0],
                CELL,
            ),
            review_routed: reg.counter(
                "judgecal_review_routed_total",
                "Corrected scores whose sigma exceeded the cell's review threshold",
                CELL,
            ),
            version: VersionGauges::new(&reg),
            pairwise: PairwiseGauges::new(&reg),
            drift: DriftGauges::new(&reg),
            coverage_cells: Arc::default(),
            drift_cells: Arc::default(),
            covariate_inputs: Arc::default(),
            registry,
        }
    }

    pub fn set_cell_anchors(&self, key: &CellKey, count: i64) {
        self.cell_anchors
            .with_label_values(&[key.judge.as_str(), key.rubric.as_str()])
            .set(count);
    }

    /// A pairwise cell's gauges, from its newest version.
    pub fn set_preference(&self, v: &PreferenceVersion) {
        let (judge, rubric) = (v.key.judge.as_str(), v.key.rubric.as_str());
        self.pairwise
            .version
            .with_label_values(&[judge, rubric])
            .set(v.version);
        let b = &v.report.biases;
        for (diagnostic, source, share) in [
            ("first_position", "judge", b.judge_first),
            ("first_position", "people", b.people_first),
            ("flip", "judge", b.flips),
            ("longer_answer", "judge", b.judge_longer),
            ("longer_answer", "people", b.people_longer),
        ] {
            let labels = [judge, rubric, diagnostic, source];
            match share {
                Some(s) => self
                    .pairwise
                    .bias
                    .with_label_values(&labels)
                    .set(s.estimate),
                None => {
                    let _ = self.pairwise.bias.remove_label_values(&labels);
                }
            }
        }
        for f in &b.favouritism {
            let labels = [judge, rubric, f.system.as_str()];
            self.pairwise
                .favouritism
                .with_label_values(&labels)
                .set(f.estimate);
            let favoured = if f.interval[0] > 0.0 {
                1
            } else if f.interval[1] < 0.0 {
                -1
            } else {
                0
            };
            self.pairwise
                .favoured
                .with_label_values(&labels)
                .set(favoured);
        }
    }

    /// Whether the version `key` serves could not be read (its gauge is dropped once it can).
    pub fn set_unreadable(&self, key: &CellKey, unreadable: bool) {
        let labels = [key.judge.as_str(), key.rubric.as_str()];
        if unreadable {
            self.version
                .calibrator_unreadable
                .with_label_values(&labels)
                .set(1);
        } else {
            let _ = self
                .version
                .calibrator_unreadable
                .remove_label_values(&labels);
        }
    }

    /// The per-cell gauges of the version a cell now serves.
    pub fn set_active(&self, v: &CalibratorVersion) {
        let labels = [v.key.judge.as_str(), v.key.rubric.as_str()];
        self.version
            .active_version
            .with_label_values(&labels)
            .set(v.version);
        match v.beta() {
            Some(posterior) => {
                self.version
                    .beta_mean
                    .with_label_values(&labels)
                    .set(posterior.beta_mean);
                self.version
                    .beta_collapse
                    .with_label_values(&labels)
                    .set(posterior.beta_collapse_probability);
                self.version
                    .beta_canary
                    .with_label_values(&labels)
                    .set(i64::from(posterior.canary));
            }
            None => {
                // A version with no β posterior: no stale canary from an earlier one.
                for g in [&self.version.beta_mean, &self.version.beta_collapse] {
                    let _ = g.remove_label_values(&labels);
                }
                let _ = self.version.beta_canary.remove_label_values(&labels);
            }
        }
        self.set_covariates(v);
        if let Some(fusion) = &v.fusion {
            for (member, w) in fusion.members.iter().zip(&fusion.weights) {
                let labels = [v.key.judge.as_str(), v.key.rubric.as_str(), member.as_str()];
                self.version
                    .panel_weight
                    .with_label_values(&labels)
                    .set(w.standardised);
                self.version
                    .panel_canary
                    .with_label_values(&labels)
                    .set(i64::from(w.canary));
            }
        }
        match v.model.report().diagnostics() {
            Some(diagnostics) => {
                self.version
                    .rhat_max
                    .with_label_values(&labels)
                    .set(diagnostics.rhat_max.unwrap_or(f64::NAN));
                self.version
                    .ess_min
                    .with_label_values(&labels)
                    .set(diagnostics.ess_bulk_min.unwrap_or(f64::NAN));
            }
            None => {
                let _ = self.version.rhat_max.remove_label_values(&labels);
                let _ = self.version.ess_min.remove_label_values(&labels);
            }
        }
    }

    /// A covariate version's coefficients; a new version's drop the old one's inputs it lacks.
    fn set_covariates(&self, v: &CalibratorVersion) {
        let inputs: Vec<(String, f64)> = v
            .covariate_layer
            .iter()
            .flat_map(|l| l.coefficients.iter().map(|c| (c.input.clone(), c.per_sd)))
            .collect();
        if let Ok(mut set) = self.covariate_inputs.lock() {
            for old in set.remove(&v.key).unwrap_or_default() {
                let _ = self.version.covariate_coefficient.remove_label_values(&[
                    v.key.judge.as_str(),
                    v.key.rubric.as_str(),
                    old.as_str(),
                ]);
            }
            for (input, per_sd) in &inputs {
                self.version
                    .covariate_coefficient
                    .with_label_values(&[v.key.judge.as_str(), v.key.rubric.as_str(), input])
                    .set(*per_sd);
            }
            if !inputs.is_empty() {
                set.insert(v.key.clone(), inputs.into_iter().map(|(i, _)| i).collect());
            }
        }
    }

    /// The coverage of every cell with checks against its active version; cells without
    /// (a new version, or none) lose theirs. With `GaugeScope::These`, `windows` are some cells'
    /// (those an upload touched) and the others keep theirs.
    pub fn set_coverage(&self, windows: &[CoverageWindow], scope: GaugeScope) {
        let Ok(mut cells) = self.coverage_cells.lock() else {
            return;
        };
        let mut now: HashSet<CellKey> = windows.iter().map(|w| w.key.clone()).collect();
        if scope == GaugeScope::These {
            now.extend(cells.iter().cloned());
        }
        for gone in cells.difference(&now) {
            let labels = [gone.judge.as_str(), gone.rubric.as_str()];
            let _ = self.drift.coverage.remove_label_values(&labels);
            let _ = self.drift.coverage_anchors.remove_label_values(&labels);
        }
        for w in windows {
            let labels = [w.key.judge.as_str(), w.key.rubric.as_str()];
            self.drift
                .coverage
                .with_label_values(&labels)
                .set(w.inside as f64 / w.checked as f64);
            self.drift
                .coverage_anchors
                .with_label_values(&labels)
                .set(w.checked);
        }
        *cells = now;
    }

    /// The drift alarm of every cell with checks since its version's activation; cells without
    /// lose theirs. With `GaugeScope::These`, `drifts` are some cells' and the others keep theirs.
    pub fn set_drift(&self, drifts: &[(CellKey, Watch)], scope: GaugeScope) {
        let Ok(mut cells) = self.drift_cells.lock() else {
            return;
        };
        let mut now: HashSet<CellKey> = drifts.iter().map(|(k, _)| k.clone()).collect();
        if scope == GaugeScope::These {
            now.extend(cells.iter().cloned());
        }
        for gone in cells.difference(&now) {
            let labels = [gone.judge.as_str(), gone.rubric.as_str()];
            self.drift.remove(&labels);
        }
        for (key, w) in drifts {
            let labels = [key.judge.as_str(), key.rubric.as_str()];
            let (d, f) = (&w.cell, &w.fleet);
            self.drift
                .units
                .with_label_values(&labels)
                .set(d.units as i64);
            self.drift.rho.with_label_values(&labels).set(d.rho);
            self.drift
                .clustered
                .with_label_values(&labels)
                .set(i64::from(d.clustered));
            self.drift
                .fleet_evalue_peak
                .with_label_values(&labels)
                .set(f.peak);
            self.drift
                .fleet_miss_bound
                .with_label_values(&labels)
                .set(f.miss_bound);
            self.drift
                .fleet_alarm
                .with_label_values(&labels)
                .set(i64::from(f.alarm));
            self.drift.evalue.with_label_values(&labels).set(d.e_value);
            self.drift
                .evalue_peak
                .with_label_values(&labels)
                .set(d.peak);
            self.drift
                .miss_bound
                .with_label_values(&labels)
                .set(d.miss_bound);
            self.drift
                .alarm
                .with_label_values(&labels)
                .set(i64::from(d.alarm));
            self.drift
                .anchors
                .with_label_values(&labels)
                .set(d.anchors as i64);
        }
        *cells = now;
    }

    /// The MC-dropout σ of a flow's corrections and how many went to review.
    pub fn observe_sigma(&self, key: &CellKey, sigmas: impl Iterator<Item = f64>, routed: usize) {
        let labels = [key.judge.as_str(), key.rubric.as_str()];
        let h = self.dropout_sigma.with_label_values(&labels);
        sigmas.for_each(|s| h.observe(s));
        self.review_routed
            .with_label_values(&labels)
            .inc_by(routed as u64);
    }

    pub fn count_corrections(&self, key: &CellKey, method: Method, n: usize) {
        self.corrections
            .with_label_values(&[key.judge.as_str(), key.rubric.as_str(), method.as_str()])
            .inc_by(n as u64);
    }

    /// A request named a judge version with no calibration of its own in `key`.
    pub fn count_version_mismatch(&self, key: &CellKey) {
        self.judge_version_mismatch
            .with_label_values(&[key.judge.as_str(), key.rubric.as_str()])
            .inc();
    }

    /// The finding of a cell's latest silent-change check.
    pub fn set_judge_changed(&self, key: &CellKey, finding: Finding) {
        self.version
            .judge_changed
            .with_label_values(&[key.judge.as_str(), key.rubric.as_str()])
            .set(finding.gauge());
    }

    /// A run-level answer of `kind`.
    pub fn count_estimate(&self, key: &CellKey, kind: RunQuestion) {
        self.estimates
            .with_label_values(&[key.judge.as_str(), key.rubric.as_str(), kind.as_str()])
            .inc();
    }

    /// A finished job; `outcome` is its state (succeeded, failed, cancelled).
    pub fn count_finished_job(&self, kind: JobKind, outcome: &str, seconds: f64) {
        self.training_jobs
            .with_label_values(&[kind.as_str(), outcome])
            .inc();
        self.training_duration
            .with_label_values(&[kind.as_str()])
            .observe(seconds);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding to memory cannot fail");
        String::from_utf8(buf).expect("Prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
