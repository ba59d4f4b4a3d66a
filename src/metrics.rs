//! Prometheus metrics, all prefixed `judgecal_`. Labels are bounded sets (route template,
//! method, status, judge, rubric), never item ids. One registry per application, so tests can
//! run several side by side.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use prometheus::core::Collector;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use crate::domain::CellKey;
use crate::domain::calibration::{CalibratorVersion, JobKind};
use crate::domain::preference::PreferenceVersion;
use crate::store::CoverageWindow;
use judgecal_stats::Method;
use judgecal_stats::bridge::Finding;
use judgecal_stats::drift::Watch;

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
    /// Of the version each cell serves.
    pub active_version: IntGaugeVec,
    pub beta_mean: GaugeVec,
    pub beta_collapse: GaugeVec,
    pub beta_canary: IntGaugeVec,
    /// A panel's active version: each member's standardised weight and canary.
    pub panel_weight: GaugeVec,
    pub panel_canary: IntGaugeVec,
    /// A version trained with covariates: each kept covariate's coefficient per sd.
    pub covariate_coefficient: GaugeVec,
    /// A pairwise cell's newest version: its biases, and each system's favouritism.
    pub pairwise_version: IntGaugeVec,
    pub pairwise_bias: GaugeVec,
    pub pairwise_favouritism: GaugeVec,
    pub pairwise_favoured: IntGaugeVec,
    pub rhat_max: GaugeVec,
    pub ess_min: GaugeVec,
    pub corrections: IntCounterVec,
    pub estimates: IntCounterVec,
    pub training_jobs: IntCounterVec,
    pub training_duration: HistogramVec,
    pub dropout_sigma: HistogramVec,
    pub review_routed: IntCounterVec,
    pub anchor_coverage: GaugeVec,
    pub anchor_coverage_anchors: IntGaugeVec,
    pub drift_evalue: GaugeVec,
    pub drift_evalue_peak: GaugeVec,
    pub drift_miss_bound: GaugeVec,
    pub drift_alarm: IntGaugeVec,
    pub drift_anchors: IntGaugeVec,
    pub drift_units: IntGaugeVec,
    pub drift_rho: GaugeVec,
    pub drift_clustered: IntGaugeVec,
    pub drift_fleet_evalue_peak: GaugeVec,
    pub drift_fleet_miss_bound: GaugeVec,
    pub drift_fleet_alarm: IntGaugeVec,
    pub judge_version_mismatch: IntCounterVec,
    pub judge_changed: IntGaugeVec,
    pub calibrator_unreadable: IntGaugeVec,
    /// The cells the coverage gauges are set for, to drop those whose version changed.
    coverage_cells: Arc<Mutex<HashSet<CellKey>>>,
    /// The cells the drift gauges are set for.
    drift_cells: Arc<Mutex<HashSet<CellKey>>>,
    /// The covariate inputs each cell's gauges are set for, to drop those a new version lacks.
    covariate_inputs: Arc<Mutex<HashMap<CellKey, Vec<String>>>>,
}

fn register<C: Collector + Clone + 'static>(registry: &Registry, c: C) -> C {
    registry
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

impl Metrics {
    pub fn new() -> Self {
        let r = Registry::new();
        let gauge = |name: &str, help: &str| {
            register(
                &r,
                GaugeVec::new(Opts::new(name, help), CELL).expect("valid metric"),
            )
        };
        let int_gauge = |name: &str, help: &str| {
            register(
                &r,
                IntGaugeVec::new(Opts::new(name, help), CELL).expect("valid metric"),
            )
        };
        let counter = |name: &str, help: &str, labels: &[&str]| {
            register(
                &r,
                IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"),
            )
        };
        let histogram = |name: &str, help: &str, buckets: Vec<f64>, labels: &[&str]| {
            register(
                &r,
                HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
                    .expect("valid metric"),
            )
        };
        let http = &["route", "method", "status"];
        Self {
            judge_version_mismatch: counter(
                "judgecal_judge_version_mismatch_total",
                "Requests that named a judge version the calibration serving them was not trained on (no calibration of that judge version)",
                CELL,
            ),
            judge_changed: int_gauge(
                "judgecal_judge_changed",
                "The cell's latest silent-change check under the same judge version label: 1 the corrected mean moved beyond the tolerance (refit), 2 undecided with its shift beyond the tolerance (re-score more items), 0 otherwise",
            ),
            calibrator_unreadable: int_gauge(
                "judgecal_calibrator_unreadable",
                "1 where the version a cell serves could not be read from the store: it is skipped, not served (retrain the cell or activate another version)",
            ),
            http_requests: counter(
                "judgecal_http_requests_total",
                "HTTP requests answered",
                http,
            ),
            http_duration: histogram(
                "judgecal_http_request_duration_seconds",
                "Time to answer an HTTP request",
                vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0,
                ],
                http,
            ),
            cell_anchors: int_gauge(
                "judgecal_cell_anchors",
                "Anchors stored per (judge, rubric) cell",
            ),
            active_version: int_gauge(
                "judgecal_calibrator_active_version",
                "The calibrator version each cell serves",
            ),
            beta_mean: gauge(
                "judgecal_beta_posterior_mean",
                "Posterior mean of the judge's slope beta on the rubric (active Bayesian version)",
            ),
            beta_collapse: gauge(
                "judgecal_beta_collapse_probability",
                "Pr(beta < collapse_beta | anchors) of the active Bayesian version",
            ),
            beta_canary: int_gauge(
                "judgecal_beta_canary",
                "1 when the collapse probability exceeds its threshold: the judge no longer tracks the reference",
            ),
            panel_weight: register(
                &r,
                GaugeVec::new(
                    Opts::new(
                        "judgecal_panel_member_weight",
                        "Posterior mean of a panel member's standardised weight (its coefficient times its scores' sd over the references' sd) in the panel's active version",
                    ),
                    PANEL_MEMBER,
                )
                .expect("valid metric"),
            ),
            panel_canary: register(
                &r,
                IntGaugeVec::new(
                    Opts::new(
                        "judgecal_panel_member_canary",
                        "1 when a panel member adds nothing the others do not: Pr(standardised weight < 0.02 | anchors) > 0.05 in the panel's active version",
                    ),
                    PANEL_MEMBER,
                )
                .expect("valid metric"),
            ),
            covariate_coefficient: register(
                &r,
                GaugeVec::new(
                    Opts::new(
                        "judgecal_covariate_coefficient",
                        "A covariate's coefficient in the active version trained with covariates: the reference's change per sd of its (transformed) value at a fixed judge score; negative where the judge rewards it beyond what people do",
                    ),
                    COVARIATE,
                )
                .expect("valid metric"),
            ),
            pairwise_version: int_gauge(
                "judgecal_pairwise_version",
                "The newest trained version of a pairwise cell (the one its report, picture and these gauges show)",
            ),
            pairwise_bias: register(
                &r,
                GaugeVec::new(
                    Opts::new(
                        "judgecal_pairwise_bias",
                        "A pairwise cell's bias diagnostic in its newest version, for the judge and for people: first_position (the share of wins by the answer shown first; people: by answer a), flip (the share of comparisons whose winner changes when the answers swap places; judge only) and longer_answer (the share won by the longer answer)",
                    ),
                    PAIRWISE_BIAS,
                )
                .expect("valid metric"),
            ),
            pairwise_favouritism: register(
                &r,
                GaugeVec::new(
                    Opts::new(
                        "judgecal_pairwise_favouritism",
                        "A system's favouritism in a pairwise cell's newest version: the judge's mean preference for it minus the people's, over the labelled comparisons it is in",
                    ),
                    PAIRWISE_SYSTEM,
                )
                .expect("valid metric"),
            ),
            pairwise_favoured: register(
                &r,
                IntGaugeVec::new(
                    Opts::new(
                        "judgecal_pairwise_favoured",
                        "1 where the judge favours the system beyond people (its favouritism's 95% interval lies above 0), -1 where it disfavours it (below 0), 0 otherwise",
                    ),
                    PAIRWISE_SYSTEM,
                )
                .expect("valid metric"),
            ),
            rhat_max: gauge(
                "judgecal_calibrator_rhat_max",
                "Largest split R-hat of the active version's fit (rubric parameters and shared hyperparameters)",
            ),
            ess_min: gauge(
                "judgecal_calibrator_ess_min",
                "Smallest bulk effective sample size of the active version's fit",
            ),
            corrections: counter(
                "judgecal_corrections_total",
                "Scores corrected by this process",
                &["judge", "rubric", "method"],
            ),
            estimates: counter(
                "judgecal_estimates_total",
                "Run-level answers given by this process: kind is estimate (POST /v1/estimate), compare (POST /v1/compare) or rank (POST /v1/rank)",
                &["judge", "rubric", "kind"],
            ),
            training_jobs: counter(
                "judgecal_training_jobs_total",
                "Training jobs finished, as recorded in the store (every replica reports the same totals)",
                &["method", "outcome"],
            ),
            training_duration: histogram(
                "judgecal_training_duration_seconds",
                "Wall time of finished training jobs, as recorded in the store",
                vec![
                    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                ],
                &["method"],
            ),
            dropout_sigma: histogram(
                "judgecal_dropout_sigma",
                "MC-dropout sd of the flow's corrected scores (score units)",
                vec![0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0],
                CELL,
            ),
            review_routed: counter(
                "judgecal_review_routed_total",
                "Corrected scores whose sigma exceeded the cell's review threshold",
                CELL,
            ),
            anchor_coverage: gauge(
                "judgecal_anchor_coverage",
                "Share of recently arrived anchors inside the active version's 95% predictive interval; well below 0.95 means the judge or the raters shifted",
            ),
            anchor_coverage_anchors: int_gauge(
                "judgecal_anchor_coverage_anchors",
                "Anchors behind judgecal_anchor_coverage (the newest batches checked against the active version)",
            ),
            drift_evalue: gauge(
                "judgecal_drift_evalue",
                "The drift alarm's e-value for the active version: the wealth of a bet, anchor by anchor with raters (or batches naming none) as independent units, against \"new anchors miss its 95% interval at most at judgecal_drift_miss_bound\", over every anchor checked since the activation; the alarm fires when it has reached 1/calibrators.drift_delta",
            ),
            drift_evalue_peak: gauge(
                "judgecal_drift_evalue_peak",
                "The largest drift e-value since the active version's activation: a healthy cell's ever reaches c with probability at most 1/c (plus the bound's failure, one version in 1,000)",
            ),
            drift_miss_bound: gauge(
                "judgecal_drift_miss_bound",
                "The miss rate the drift alarm tests against: a bound on the active version's miss rate that holds given its training anchors except for one version in 1,000 (0.05 for versions with no such bound)",
            ),
            drift_alarm: int_gauge(
                "judgecal_drift_alarm",
                "1 once the drift e-value has reached 1/calibrators.drift_delta since the active version's activation (a healthy cell ever does so with probability at most delta); resets when a version is activated",
            ),
            drift_anchors: int_gauge(
                "judgecal_drift_anchors",
                "Anchors checked against the active version since its activation (behind judgecal_drift_evalue)",
            ),
            drift_units: int_gauge(
                "judgecal_drift_units",
                "Independent units behind judgecal_drift_evalue: the raters named, plus one per upload batch naming none (each expected from the upload before it)",
            ),
            drift_rho: gauge(
                "judgecal_drift_rho",
                "How alike one session's misses are taken to be (the intra-session correlation the drift alarm bets its next anchor with, from the version's training units and the sessions checked since; a session is one named rater's anchors in one upload, or an upload's anchors naming none): a session of n anchors counts for about n/(1 + (n - 1)*rho) anchors",
            ),
            drift_clustered: int_gauge(
                "judgecal_drift_clustered",
                "1 while uploads naming no rater miss together beyond what the drift alarm assumes (their misses are correlated two uploads apart: one labeller uploading many batches unnamed). The alarm's false-alarm rate then exceeds calibrators.drift_delta; name raters in the rows (the rater column) rather than reading drift into its alarm",
            ),
            drift_fleet_evalue_peak: gauge(
                "judgecal_drift_fleet_evalue_peak",
                "The largest e-value of the fleet's drift e-process since the activation: the same bet against judgecal_drift_fleet_miss_bound; judgecal_drift_fleet_alarm fires at 2*calibrators.fleet_cells/calibrators.fleet_delta",
            ),
            drift_fleet_miss_bound: gauge(
                "judgecal_drift_fleet_miss_bound",
                "The active version's miss-rate bound at the fleet alert's level, calibrators.fleet_delta/(2*calibrators.fleet_cells)",
            ),
            drift_fleet_alarm: int_gauge(
                "judgecal_drift_fleet_alarm",
                "1 once judgecal_drift_fleet_evalue_peak has reached 2*calibrators.fleet_cells/calibrators.fleet_delta: across at most fleet_cells cells, any healthy cell ever does so, or has a failed bound, with probability at most fleet_delta (the JudgecalDrift alert)",
            ),
            coverage_cells: Arc::default(),
            drift_cells: Arc::default(),
            covariate_inputs: Arc::default(),
            registry: r,
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
        self.pairwise_version
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
                    .pairwise_bias
                    .with_label_values(&labels)
                    .set(s.estimate),
                None => {
                    let _ = self.pairwise_bias.remove_label_values(&labels);
                }
            }
        }
        for f in &b.favouritism {
            let labels = [judge, rubric, f.system.as_str()];
            self.pairwise_favouritism
                .with_label_values(&labels)
                .set(f.estimate);
            let favoured = if f.interval[0] > 0.0 {
                1
            } else if f.interval[1] < 0.0 {
                -1
            } else {
                0
            };
            self.pairwise_favoured
                .with_label_values(&labels)
                .set(favoured);
        }
    }

    /// Whether the version `key` serves could not be read (its gauge is dropped once it can).
    pub fn set_unreadable(&self, key: &CellKey, unreadable: bool) {
        let labels = [key.judge.as_str(), key.rubric.as_str()];
        if unreadable {
            self.calibrator_unreadable.with_label_values(&labels).set(1);
        } else {
            let _ = self.calibrator_unreadable.remove_label_values(&labels);
        }
    }

    /// The per-cell gauges of the version a cell now serves.
    pub fn set_active(&self, v: &CalibratorVersion) {
        let labels = [v.key.judge.as_str(), v.key.rubric.as_str()];
        self.active_version
            .with_label_values(&labels)
            .set(v.version);
        match v.beta() {
            Some(posterior) => {
                self.beta_mean
                    .with_label_values(&labels)
                    .set(posterior.beta_mean);
                self.beta_collapse
                    .with_label_values(&labels)
                    .set(posterior.beta_collapse_probability);
                self.beta_canary
                    .with_label_values(&labels)
                    .set(i64::from(posterior.canary));
            }
            None => {
                // A version with no β posterior: no stale canary from an earlier one.
                for g in [&self.beta_mean, &self.beta_collapse] {
                    let _ = g.remove_label_values(&labels);
                }
                let _ = self.beta_canary.remove_label_values(&labels);
            }
        }
        let inputs: Vec<(String, f64)> = v
            .covariate_layer
            .iter()
            .flat_map(|l| l.coefficients.iter().map(|c| (c.input.clone(), c.per_sd)))
            .collect();
        if let Ok(mut set) = self.covariate_inputs.lock() {
            for old in set.remove(&v.key).unwrap_or_default() {
                let _ = self.covariate_coefficient.remove_label_values(&[
                    v.key.judge.as_str(),
                    v.key.rubric.as_str(),
                    old.as_str(),
                ]);
            }
            for (input, per_sd) in &inputs {
                self.covariate_coefficient
                    .with_label_values(&[v.key.judge.as_str(), v.key.rubric.as_str(), input])
                    .set(*per_sd);
            }
            if !inputs.is_empty() {
                set.insert(v.key.clone(), inputs.into_iter().map(|(i, _)| i).collect());
            }
        }
        if let Some(fusion) = &v.fusion {
            for (member, w) in fusion.members.iter().zip(&fusion.weights) {
                let labels = [v.key.judge.as_str(), v.key.rubric.as_str(), member.as_str()];
                self.panel_weight
                    .with_label_values(&labels)
                    .set(w.standardised);
                self.panel_canary
                    .with_label_values(&labels)
                    .set(i64::from(w.canary));
            }
        }
        match v.model.report().diagnostics() {
            Some(diagnostics) => {
                self.rhat_max
                    .with_label_values(&labels)
                    .set(diagnostics.rhat_max.unwrap_or(f64::NAN));
                self.ess_min
                    .with_label_values(&labels)
                    .set(diagnostics.ess_bulk_min.unwrap_or(f64::NAN));
            }
            None => {
                let _ = self.rhat_max.remove_label_values(&labels);
                let _ = self.ess_min.remove_label_values(&labels);
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
            let _ = self.anchor_coverage.remove_label_values(&labels);
            let _ = self.anchor_coverage_anchors.remove_label_values(&labels);
        }
        for w in windows {
            let labels = [w.key.judge.as_str(), w.key.rubric.as_str()];
            self.anchor_coverage
                .with_label_values(&labels)
                .set(w.inside as f64 / w.checked as f64);
            self.anchor_coverage_anchors
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
            let _ = self.drift_evalue.remove_label_values(&labels);
            let _ = self.drift_evalue_peak.remove_label_values(&labels);
            let _ = self.drift_miss_bound.remove_label_values(&labels);
            let _ = self.drift_alarm.remove_label_values(&labels);
            let _ = self.drift_anchors.remove_label_values(&labels);
            let _ = self.drift_units.remove_label_values(&labels);
            let _ = self.drift_rho.remove_label_values(&labels);
            let _ = self.drift_clustered.remove_label_values(&labels);
            let _ = self.drift_fleet_evalue_peak.remove_label_values(&labels);
            let _ = self.drift_fleet_miss_bound.remove_label_values(&labels);
            let _ = self.drift_fleet_alarm.remove_label_values(&labels);
        }
        for (key, w) in drifts {
            let labels = [key.judge.as_str(), key.rubric.as_str()];
            let (d, f) = (&w.cell, &w.fleet);
            self.drift_units
                .with_label_values(&labels)
                .set(d.units as i64);
            self.drift_rho.with_label_values(&labels).set(d.rho);
            self.drift_clustered
                .with_label_values(&labels)
                .set(i64::from(d.clustered));
            self.drift_fleet_evalue_peak
                .with_label_values(&labels)
                .set(f.peak);
            self.drift_fleet_miss_bound
                .with_label_values(&labels)
                .set(f.miss_bound);
            self.drift_fleet_alarm
                .with_label_values(&labels)
                .set(i64::from(f.alarm));
            self.drift_evalue.with_label_values(&labels).set(d.e_value);
            self.drift_evalue_peak
                .with_label_values(&labels)
                .set(d.peak);
            self.drift_miss_bound
                .with_label_values(&labels)
                .set(d.miss_bound);
            self.drift_alarm
                .with_label_values(&labels)
                .set(i64::from(d.alarm));
            self.drift_anchors
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
        self.judge_changed
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
