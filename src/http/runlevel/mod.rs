//! Run-level answers: a run's de-biased mean (`estimate`), whether model A beats model B
//! (`compare`), and K runs ranked (`rank`). This module holds what the three share: a run's
//! body, the parts of a run's answer, and the rendering of the warnings `judgecal_stats` decides.

pub mod compare;
pub mod estimate;
pub mod rank;
pub mod rank_sessions;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::extract::ScoresOrItems;
use super::schema;
use crate::domain::Problem;
use crate::domain::runlevel::{RawItem, RawRun, RawRunWithGroup};
use crate::service::Loaded;
use judgecal_stats::runlevel::{Advice, GroupAnswer, RunEstimate, Support, Transport};
use judgecal_stats::warning::Warning;

/// One item of a run.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunItemDto {
    /// The item's id: items with the same id in both runs of a comparison are paired. Give
    /// every item an id or none.
    #[schema(
        example = "prompt-17",
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001F\\u007F]+$"
    )]
    pub(super) id: Option<String>,
    /// The raw judge score.
    #[schema(example = 3.5)]
    pub(super) score: Option<f64>,
    /// A panel's item instead: each member's raw score, by judge name (members that did not
    /// score the item left out).
    #[schema(schema_with = schema::member_scores)]
    pub(super) scores: Option<std::collections::BTreeMap<String, f64>>,
    /// A judge's item: its covariates, for a version trained with them.
    #[schema(schema_with = schema::covariates)]
    pub(super) covariates: Option<std::collections::BTreeMap<String, f64>>,
    /// A judge's item: its further scores by the same judge version (the judge asked again),
    /// at most 100. The item is corrected for a judge averaged over its scores (less noisy
    /// than one score: its mean is read at its one-score equivalent), and the run's interval
    /// carries the noise left. The judge's within-item variance is measured on the version's
    /// anchors' repeats and the request's together (`repeats` in the answer).
    #[schema(example = json!([3.0, 4.0]), max_items = 100)]
    pub(super) repeats: Option<Vec<f64>>,
    /// The item's reference score, where this item of the run was labelled. The labelled
    /// items must be a uniform random sample of the run, at least 3.
    pub(super) reference: Option<f64>,
    /// What the item shares its errors with, such as its prompt: items of one cluster are not
    /// counted as independent evidence. Give every item a cluster or none.
    #[schema(example = "prompt-17", min_length = 1, max_length = 256)]
    pub(super) cluster: Option<String>,
}

impl From<RunItemDto> for RawItem {
    fn from(i: RunItemDto) -> Self {
        RawItem {
            id: i.id,
            score: i.score,
            members: i.scores,
            covariates: i.covariates,
            repeats: i.repeats,
            reference: i.reference,
            cluster: i.cluster,
        }
    }
}

/// A run: bare judge scores, or items (with ids, reference scores or clusters).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    /// Raw judge scores, one per item of the run.
    #[schema(example = json!([2.5, 3.0, 4.0]), min_items = 1)]
    pub(super) scores: Option<Vec<f64>>,
    /// The run's items, with ids, reference scores or clusters.
    #[schema(min_items = 1)]
    pub(super) items: Option<Vec<RunItemDto>>,
    #[schema(schema_with = group_schema)]
    pub(super) group: Option<String>,
    /// The judge version that scored the run. Runs of different judge versions are each
    /// corrected by their own version's calibration (409 where one has none), and the interval
    /// carries both calibrations' uncertainty.
    #[schema(schema_with = schema::judge_version)]
    pub(super) judge_version: Option<String>,
}

impl RunBody {
    /// The run as the domain parses it; `prefix` names it.
    pub(super) fn raw(self, prefix: &str) -> RawRunWithGroup {
        RawRunWithGroup {
            run: raw_run(self.scores, self.items, prefix),
            group: self.group,
            judge_version: self.judge_version,
        }
    }
}

/// What every run-level answer ends with: how the runs' items were read (covariates, repeats)
/// and what a reader of the answer must know.
#[derive(Serialize, ToSchema)]
pub struct RunReading {
    /// A version trained with covariates: `as_given` (each item read at its own covariates)
    /// or `held` (at the covariates `hold` names: a length-controlled answer); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    covariates: Option<&'static str>,
    /// Items carried repeats: the judge's within-item variance used and what it did; absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    repeats: Option<RepeatsDto>,
    /// What a reader of the answer must know, each with a stable code (docs/api.md lists
    /// them): runs served by another judge version's calibration, then what the statistics
    /// found (extrapolation, a left-out term, a transport check that found bias, a plan's
    /// shortfall).
    warnings: Vec<Warning>,
}

impl RunReading {
    /// The served runs' reading, its warnings the version mismatches followed by `found`.
    pub(super) fn of(
        served: &crate::service::Served,
        found: impl IntoIterator<Item = Warning>,
    ) -> Self {
        let mut warnings = served.warnings();
        warnings.extend(found);
        RunReading {
            covariates: covariates_read(served),
            repeats: repeats_read(served),
            warnings,
        }
    }
}

/// How a version trained with covariates read the runs' items: `held` or `as_given`.
fn covariates_read(served: &crate::service::Served) -> Option<&'static str> {
    served
        .runs
        .iter()
        .any(|r| r.version.covariate_layer.is_some())
        .then_some(if served.held { "held" } else { "as_given" })
}

/// How the items' repeats (further scores of an item by the same judge version) were read.
/// Each item is corrected at the one-score equivalent of its scores' mean: the corrector was
/// fitted on one score per anchor, and a mean of k scores, less noisy, says more about the
/// reference. The run's noise term is scaled to what k scores leave.
#[derive(Serialize, ToSchema)]
pub struct RepeatsDto {
    /// The judge's within-item (test–retest) variance of one score, with its 95% interval.
    within: judgecal_stats::agreement::Figure,
    /// Items with repeats it was measured on: among the version's anchors and in this request.
    anchor_items: usize,
    request_items: usize,
    /// That variance as a share of the judge scores' variance over the anchors (1 − the
    /// test–retest reliability).
    noise_share: f64,
    /// The mean over the request's items of their error variance (a reference around its
    /// corrected score) as a share of a one-score item's: 1 without repeats.
    residual_ratio: f64,
}

fn repeats_read(served: &crate::service::Served) -> Option<RepeatsDto> {
    served.repeats.map(|r| RepeatsDto {
        within: judgecal_stats::agreement::Figure {
            value: r.within.variance,
            interval: Some(r.within.interval),
        },
        anchor_items: r.anchor_items,
        request_items: r.run_items,
        noise_share: r.model.noise_share(),
        residual_ratio: r.residual_ratio,
    })
}

pub(super) fn group_schema() -> utoipa::openapi::schema::Object {
    schema::group_name(
        "The system whose outputs the run holds, as the anchors name their groups: a known group \
         gets its own shrunk bias correction, a new one (or none) the between-group variance of \
         the bias.",
    )
}

/// The run's shape, or the problem of giving both or neither; `prefix` names the run.
pub(super) fn raw_run(
    scores: Option<Vec<f64>>,
    items: Option<Vec<RunItemDto>>,
    prefix: &str,
) -> Result<RawRun, Problem> {
    let item = "{score (a panel: scores), covariates?, id?, reference?, cluster?}";
    Ok(match ScoresOrItems::of(scores, items, prefix, item)? {
        ScoresOrItems::Scores(scores) => RawRun::Scores(scores),
        ScoresOrItems::Items(items) => RawRun::Items(items.into_iter().map(Into::into).collect()),
    })
}

/// The variance of an estimate, in its parts.
#[derive(Serialize, ToSchema)]
pub struct VarianceDto {
    /// From the run's own items: the noise of the reference around the corrected scores
    /// (plain), or the labelled sample (labelled).
    pub(super) sampling: f64,
    /// From the corrector's finite anchors (0 on the labelled path, which does not rely on
    /// the corrector; 0 where `corrector_term` is `omitted`).
    pub(super) corrector: f64,
    /// From the system-specific bias of the run's group (plain path, where the anchors carry
    /// groups): see `group`.
    pub(super) group: f64,
    pub(super) total: f64,
}

/// How the judge's system-specific bias entered the answer.
#[derive(Serialize, ToSchema)]
pub struct GroupTermDto {
    /// `known` (the run's group is among the anchors': its shrunk bias is applied), `new` (a
    /// new system's bias is a draw from the between-group distribution: its variance is
    /// added), or `unmeasured` (the anchors carry fewer than two groups, or the labelled path,
    /// which needs no such term).
    pub(super) term: &'static str,
    /// The bias correction applied to the estimate.
    pub(super) shift: f64,
    pub(super) variance: f64,
    /// The between-group standard deviation of the bias the version measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tau: Option<f64>,
    /// Groups behind it.
    pub(super) groups: usize,
    /// `random_effects` (5 groups or more) or `conservative` (fewer: no shrinkage, and the
    /// between-group spread taken whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) rule: Option<String>,
}

/// The run's judge scores against the anchors' range.
#[derive(Serialize, ToSchema)]
pub struct SupportDto {
    /// The smallest and largest judge score among the version's anchors.
    pub(super) anchor_range: [f64; 2],
    /// Share of the run's judge scores outside that range.
    pub(super) outside_share: f64,
    /// More than 5% outside: the corrector's level there is extrapolated.
    pub(super) extrapolated: bool,
    /// Share of the run's judge scores where the anchors are thin: fewer than 20 anchors
    /// within ± 1/20 of the anchors' range (or, for versions of under 1,600 anchors, fewer
    /// than a quarter of their average count there).
    pub(super) thin_share: f64,
    /// More than 5% where the anchors are thin.
    pub(super) sparse: bool,
}

/// The corrector's bias on this run, from its labelled items.
#[derive(Serialize, ToSchema)]
pub struct TransportDto {
    /// Mean of reference − corrected on the labelled items.
    pub(super) mean_residual: f64,
    /// Its interval at the request's level for this run's own mean residual (the labelled
    /// items are a sample of the run: finite-run corrected).
    pub(super) interval: [f64; 2],
    /// Its interval for the corrector's bias on the population the run was drawn from (no
    /// finite-run correction); excluding 0, the corrector is biased on runs like this one and
    /// a plain answer would be off by about this much (`warnings` says so).
    pub(super) bias_interval: [f64; 2],
}

/// What would bring the half-width to `target_half_width`.
#[derive(Serialize, ToSchema)]
pub struct PlanDto {
    /// `reached`, `more_anchors`, `more_labelled` or `run_size` (the run's own items limit the
    /// interval; more anchors cannot help).
    pub(super) outcome: &'static str,
    /// About how many anchors in all (more_anchors), or labelled items in the run
    /// (more_labelled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) needed: Option<usize>,
    pub(super) message: String,
    /// With `costs`: re-asking the judge against labelling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) design: Option<DesignDto>,
}

/// Re-asking the judge against labelling, for a run's target half-width: every item scored
/// `repeats` times (the judge asked again) and `labels` of them labelled at random, whose
/// labelled-path half-width reaches the target, at the least cost.
#[derive(Serialize, ToSchema)]
pub struct DesignDto {
    /// The cheapest design (absent where the judge's repeat noise is not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    best: Option<judgecal_stats::repeats::Design>,
    /// Every design considered, one per number of scores per item from the run's own to 20.
    options: Vec<judgecal_stats::repeats::Design>,
    message: String,
}

impl DesignDto {
    pub(super) fn of(
        advice: std::result::Result<crate::service::DesignAdvice, String>,
        target: f64,
    ) -> Self {
        match advice {
            Err(message) => Self {
                best: None,
                options: Vec::new(),
                message,
            },
            Ok(a) => {
                let best = a.designs[a.best];
                let at_current = a.designs[0];
                let message = if best.repeats == a.current {
                    format!(
                        "labelling is the cheaper way to ±{target}: about {} labelled items of this run at {} score(s) per item (cost {:.4}); re-asking the judge costs more than the labels it saves",
                        best.labels, best.repeats, best.cost
                    )
                } else {
                    format!(
                        "re-asking is cheaper: score every item {} times and label about {} of them (cost {:.4}), against {} labels at {} score(s) per item (cost {:.4})",
                        best.repeats,
                        best.labels,
                        best.cost,
                        at_current.labels,
                        at_current.repeats,
                        at_current.cost
                    )
                };
                Self {
                    best: Some(best),
                    options: a.designs,
                    message,
                }
            }
        }
    }
}

/// One run's de-biased mean.
#[derive(Serialize, ToSchema)]
pub struct RunEstimateDto {
    /// The estimate of the mean reference score the run's items would get if every one were
    /// labelled.
    pub(super) estimate: f64,
    pub(super) interval: [f64; 2],
    /// `plain` (judge scores only) or `labelled` (PPI++ with the run's labelled items); in a
    /// ranking, a run with labelled items is `combined`: its plain and labelled estimates
    /// weighted by the inverse of their variances.
    pub(super) path: &'static str,
    /// Items in the run.
    pub(super) n: usize,
    /// Items with a reference score.
    pub(super) labelled: usize,
    pub(super) variance: VarianceDto,
    /// How the corrector's own uncertainty entered: `posterior` (bayes, closed form),
    /// `resampled` (refits on resampled anchors), `anchor_offset` (identity: the anchors' mean
    /// residual and its standard error), `omitted` (flow; `warnings` says why) or
    /// `not_needed` (labelled path).
    pub(super) corrector_term: &'static str,
    /// labelled path: the weight PPI++ gave the corrector (0: ignored, 1: trusted fully).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) lambda: Option<f64>,
    pub(super) support: SupportDto,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) transport: Option<TransportDto>,
    pub(super) group: GroupTermDto,
    /// Where the runs named different judge versions: the calibrator version that corrected
    /// this run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) calibrator: Option<i64>,
    /// And the judge version that version was trained on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) judge_version: Option<String>,
}

impl RunEstimateDto {
    /// Names the run's own calibration where the runs were corrected by different versions.
    pub(super) fn corrected_by(self, served: &crate::service::Served, run: usize) -> Self {
        match served.runs.get(run) {
            Some(loaded) if served.across_versions() => Self {
                calibrator: Some(loaded.version.version),
                judge_version: loaded
                    .version
                    .judge_version
                    .as_ref()
                    .map(|v| v.as_str().to_owned()),
                ..self
            },
            _ => self,
        }
    }
}

pub(super) fn variance(v: judgecal_stats::runlevel::inference::Variance) -> VarianceDto {
    VarianceDto {
        sampling: v.sampling,
        corrector: v.corrector,
        group: v.group,
        total: v.total(),
    }
}

pub(super) fn group(g: &GroupAnswer) -> GroupTermDto {
    GroupTermDto {
        term: g.term.as_str(),
        shift: g.shift,
        variance: g.variance,
        tau: g.tau,
        groups: g.groups,
        rule: g.rule.clone(),
    }
}

fn support(s: &Support) -> SupportDto {
    SupportDto {
        anchor_range: [s.anchor_range.0, s.anchor_range.1],
        outside_share: s.outside,
        extrapolated: s.extrapolated(),
        thin_share: s.thin,
        sparse: s.sparse(),
    }
}

pub(super) fn run_dto(e: &RunEstimate) -> RunEstimateDto {
    RunEstimateDto {
        estimate: e.mean.estimate,
        interval: [e.mean.interval.0, e.mean.interval.1],
        path: e.path.as_str(),
        n: e.mean.n,
        labelled: e.mean.labelled,
        variance: variance(e.mean.variance),
        corrector_term: e.term.as_str(),
        lambda: e.mean.lambda,
        support: support(&e.support),
        transport: e.transport.map(|t: Transport| TransportDto {
            mean_residual: t.mean_residual,
            interval: [t.interval.0, t.interval.1],
            bias_interval: [t.bias_interval.0, t.bias_interval.1],
        }),
        group: group(&e.group),
        calibrator: None,
        judge_version: None,
    }
}

pub(super) fn plan(advice: Option<Advice>, target: Option<f64>) -> Option<PlanDto> {
    let target = target?;
    Some(match advice? {
        Advice::Reached => PlanDto {
            design: None,
            outcome: "reached",
            needed: None,
            message: format!("the interval is already within ±{target}"),
        },
        Advice::Anchors(n) => PlanDto {
            design: None,
            outcome: "more_anchors",
            needed: Some(n),
            message: format!(
                "about {n} anchors in all (drawn like the present ones) would bring the half-width to {target}; retrain after uploading them"
            ),
        },
        Advice::Labels(n) => PlanDto {
            design: None,
            outcome: "more_labelled",
            needed: Some(n),
            message: format!(
                "about {n} labelled items of this run, drawn at random, would bring the half-width to {target}"
            ),
        },
        Advice::RunSize => PlanDto {
            design: None,
            outcome: "run_size",
            needed: None,
            message: format!(
                "the run's own items limit the interval: even a perfect corrector leaves it wider than ±{target}; score more items, or label a sample of the run"
            ),
        },
    })
}

/// Names the request's cell on its span.
pub(super) fn name_span(judge: &str, rubric: &str) {
    let span = tracing::Span::current();
    span.record("judge", judge);
    span.record("rubric", rubric);
}

pub(super) fn identify(v: &Loaded) -> (String, String, i64, String) {
    let v = &v.version;
    (
        v.key.judge.to_string(),
        v.key.rubric.to_string(),
        v.version,
        v.method().to_string(),
    )
}
