//! The metrics' registrar and the groups of gauges a cell's version, pairwise version and
//! drift alarm set.

use prometheus::core::Collector;
use prometheus::{
    GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
};

use super::{CELL, COVARIATE, PAIRWISE_BIAS, PAIRWISE_SYSTEM, PANEL_MEMBER};

fn register<C: Collector + Clone + 'static>(registry: &Registry, c: C) -> C {
    registry
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

/// Registers each metric it builds in one registry.
pub(super) struct Reg<'a>(pub &'a Registry);

impl Reg<'_> {
    pub fn gauge(&self, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
        register(
            self.0,
            GaugeVec::new(Opts::new(name, help), labels).expect("valid metric"),
        )
    }

    pub fn int_gauge(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        register(
            self.0,
            IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"),
        )
    }

    pub fn counter(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        register(
            self.0,
            IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"),
        )
    }

    pub fn histogram(
        &self,
        name: &str,
        help: &str,
        buckets: Vec<f64>,
        labels: &[&str],
    ) -> HistogramVec {
        let opts = HistogramOpts::new(name, help).buckets(buckets);
        register(
            self.0,
            HistogramVec::new(opts, labels).expect("valid metric"),
        )
    }
}

/// The anchors' coverage and the drift alarm's gauges of the version each cell serves.
#[derive(Clone)]
pub struct DriftGauges {
    pub coverage: GaugeVec,
    pub coverage_anchors: IntGaugeVec,
    pub evalue: GaugeVec,
    pub evalue_peak: GaugeVec,
    pub miss_bound: GaugeVec,
    pub alarm: IntGaugeVec,
    pub anchors: IntGaugeVec,
    pub units: IntGaugeVec,
    pub rho: GaugeVec,
    pub clustered: IntGaugeVec,
    pub fleet_evalue_peak: GaugeVec,
    pub fleet_miss_bound: GaugeVec,
    pub fleet_alarm: IntGaugeVec,
}

impl DriftGauges {
    /// Drops a cell's drift gauges (not its coverage's).
    pub(super) fn remove(&self, labels: &[&str]) {
        for g in [
            &self.evalue,
            &self.evalue_peak,
            &self.miss_bound,
            &self.rho,
            &self.fleet_evalue_peak,
            &self.fleet_miss_bound,
        ] {
            let _ = g.remove_label_values(labels);
        }
        for g in [
            &self.alarm,
            &self.anchors,
            &self.units,
            &self.clustered,
            &self.fleet_alarm,
        ] {
            let _ = g.remove_label_values(labels);
        }
    }

    pub(super) fn new(reg: &Reg) -> Self {
        Self {
            coverage: reg.gauge(
                "judgecal_anchor_coverage",
                "Share of recently arrived anchors inside the active version's 95% predictive interval; well below 0.95 means the judge or the raters shifted",
                CELL,
            ),
            coverage_anchors: reg.int_gauge(
                "judgecal_anchor_coverage_anchors",
                "Anchors behind judgecal_anchor_coverage (the newest batches checked against the active version)",
                CELL,
            ),
            evalue: reg.gauge(
                "judgecal_drift_evalue",
                "The drift alarm's e-value for the active version: the wealth of a bet, anchor by anchor with raters (or batches naming none) as independent units, against \"new anchors miss its 95% interval at most at judgecal_drift_miss_bound\", over every anchor checked since the activation; the alarm fires when it has reached 1/calibrators.drift_delta",
                CELL,
            ),
            evalue_peak: reg.gauge(
                "judgecal_drift_evalue_peak",
                "The largest drift e-value since the active version's activation: a healthy cell's ever reaches c with probability at most 1/c (plus the bound's failure, one version in 1,000)",
                CELL,
            ),
            miss_bound: reg.gauge(
                "judgecal_drift_miss_bound",
                "The miss rate the drift alarm tests against: a bound on the active version's miss rate that holds given its training anchors except for one version in 1,000 (0.05 for versions with no such bound)",
                CELL,
            ),
            alarm: reg.int_gauge(
                "judgecal_drift_alarm",
                "1 once the drift e-value has reached 1/calibrators.drift_delta since the active version's activation (a healthy cell ever does so with probability at most delta); resets when a version is activated",
                CELL,
            ),
            anchors: reg.int_gauge(
                "judgecal_drift_anchors",
                "Anchors checked against the active version since its activation (behind judgecal_drift_evalue)",
                CELL,
            ),
            units: reg.int_gauge(
                "judgecal_drift_units",
                "Independent units behind judgecal_drift_evalue: the raters named, plus one per upload batch naming none (each expected from the upload before it)",
                CELL,
            ),
            rho: reg.gauge(
                "judgecal_drift_rho",
                "How alike one session's misses are taken to be (the intra-session correlation the drift alarm bets its next anchor with, from the version's training units and the sessions checked since; a session is one named rater's anchors in one upload, or an upload's anchors naming none): a session of n anchors counts for about n/(1 + (n - 1)*rho) anchors",
                CELL,
            ),
            clustered: reg.int_gauge(
                "judgecal_drift_clustered",
                "1 while uploads naming no rater miss together beyond what the drift alarm assumes (their misses are correlated two uploads apart: one labeller uploading many batches unnamed). The alarm's false-alarm rate then exceeds calibrators.drift_delta; name raters in the rows (the rater column) rather than reading drift into its alarm",
                CELL,
            ),
            fleet_evalue_peak: reg.gauge(
                "judgecal_drift_fleet_evalue_peak",
                "The largest e-value of the fleet's drift e-process since the activation: the same bet against judgecal_drift_fleet_miss_bound; judgecal_drift_fleet_alarm fires at 2*calibrators.fleet_cells/calibrators.fleet_delta",
                CELL,
            ),
            fleet_miss_bound: reg.gauge(
                "judgecal_drift_fleet_miss_bound",
                "The active version's miss-rate bound at the fleet alert's level, calibrators.fleet_delta/(2*calibrators.fleet_cells)",
                CELL,
            ),
            fleet_alarm: reg.int_gauge(
                "judgecal_drift_fleet_alarm",
                "1 once judgecal_drift_fleet_evalue_peak has reached 2*calibrators.fleet_cells/calibrators.fleet_delta: across at most fleet_cells cells, any healthy cell ever does so, or has a failed bound, with probability at most fleet_delta (the JudgecalDrift alert)",
                CELL,
            ),
        }
    }
}

/// A pairwise cell's gauges, from its newest version: its biases and each system's favouritism.
#[derive(Clone)]
pub struct PairwiseGauges {
    /// A pairwise cell's newest version: its biases, and each system's favouritism.
    pub version: IntGaugeVec,
    pub bias: GaugeVec,
    pub favouritism: GaugeVec,
    pub favoured: IntGaugeVec,
}

impl PairwiseGauges {
    pub(super) fn new(reg: &Reg) -> Self {
        Self {
            version: reg.int_gauge(
                "judgecal_pairwise_version",
                "The newest trained version of a pairwise cell (the one its report, picture and these gauges show)",
                CELL,
            ),
            bias: reg.gauge(
                "judgecal_pairwise_bias",
                "A pairwise cell's bias diagnostic in its newest version, for the judge and for people: first_position (the share of wins by the answer shown first; people: by answer a), flip (the share of comparisons whose winner changes when the answers swap places; judge only) and longer_answer (the share won by the longer answer)",
                PAIRWISE_BIAS,
            ),
            favouritism: reg.gauge(
                "judgecal_pairwise_favouritism",
                "A system's favouritism in a pairwise cell's newest version: the judge's mean preference for it minus the people's, over the labelled comparisons it is in",
                PAIRWISE_SYSTEM,
            ),
            favoured: reg.int_gauge(
                "judgecal_pairwise_favoured",
                "1 where the judge favours the system beyond people (its favouritism's 95% interval lies above 0), -1 where it disfavours it (below 0), 0 otherwise",
                PAIRWISE_SYSTEM,
            ),
        }
    }
}

/// The gauges of the version each cell serves: its β posterior, a panel's members, covariates,
/// the sampler's diagnostics, and whether it could be read or changed silently.
#[derive(Clone)]
pub struct VersionGauges {
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
    pub rhat_max: GaugeVec,
    pub ess_min: GaugeVec,
    pub calibrator_unreadable: IntGaugeVec,
    pub judge_changed: IntGaugeVec,
}

impl VersionGauges {
    pub(super) fn new(reg: &Reg) -> Self {
        Self {
            active_version: reg.int_gauge(
                "judgecal_calibrator_active_version",
                "The calibrator version each cell serves",
                CELL,
            ),
            beta_mean: reg.gauge(
                "judgecal_beta_posterior_mean",
                "Posterior mean of the judge's slope beta on the rubric (active Bayesian version)",
                CELL,
            ),
            beta_collapse: reg.gauge(
                "judgecal_beta_collapse_probability",
                "Pr(beta < collapse_beta | anchors) of the active Bayesian version",
                CELL,
            ),
            beta_canary: reg.int_gauge(
                "judgecal_beta_canary",
                "1 when the collapse probability exceeds its threshold: the judge no longer tracks the reference",
                CELL,
            ),
            panel_weight: reg.gauge(
                "judgecal_panel_member_weight",
                "Posterior mean of a panel member's standardised weight (its coefficient times its scores' sd over the references' sd) in the panel's active version",
                PANEL_MEMBER,
            ),
            panel_canary: reg.int_gauge(
                "judgecal_panel_member_canary",
                "1 when a panel member adds nothing the others do not: Pr(standardised weight < 0.02 | anchors) > 0.05 in the panel's active version",
                PANEL_MEMBER,
            ),
            covariate_coefficient: reg.gauge(
                "judgecal_covariate_coefficient",
                "A covariate's coefficient in the active version trained with covariates: the reference's change per sd of its (transformed) value at a fixed judge score; negative where the judge rewards it beyond what people do",
                COVARIATE,
            ),
            rhat_max: reg.gauge(
                "judgecal_calibrator_rhat_max",
                "Largest split R-hat of the active version's fit (rubric parameters and shared hyperparameters)",
                CELL,
            ),
            ess_min: reg.gauge(
                "judgecal_calibrator_ess_min",
                "Smallest bulk effective sample size of the active version's fit",
                CELL,
            ),
            calibrator_unreadable: reg.int_gauge(
                "judgecal_calibrator_unreadable",
                "1 where the version a cell serves could not be read from the store: it is skipped, not served (retrain the cell or activate another version)",
                CELL,
            ),
            judge_changed: reg.int_gauge(
                "judgecal_judge_changed",
                "The cell's latest silent-change check under the same judge version label: 1 the corrected mean moved beyond the tolerance (refit), 2 undecided with its shift beyond the tolerance (re-score more items), 0 otherwise",
                CELL,
            ),
        }
    }
}
