//! Run-level answers: a run's de-biased mean, and whether model A beats model B.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::extract::{Authorized, CorrectScope, Json, ScoresOrItems};
use super::openapi;
use crate::calibrate::runlevel::groups::GroupTerm;
use crate::calibrate::runlevel::rank::Ranking;
use crate::calibrate::runlevel::{
    Advice, GroupAnswer, RunComparison, RunEstimate, Support, THIN_ANCHORS, Term, Transport,
};
use crate::domain::Problem;
use crate::domain::estimate::{RawItem, RawLabels, RawRankOptions, RawRun, RawSettings};
use crate::service::{CompareRequest, EstimateRequest, Loaded, RankRequest};

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
    id: Option<String>,
    /// The raw judge score.
    #[schema(example = 3.5)]
    score: f64,
    /// The item's reference score, where this item of the run was labelled. The labelled
    /// items must be a uniform random sample of the run, at least 3.
    reference: Option<f64>,
    /// What the item shares its errors with, such as its prompt: items of one cluster are not
    /// counted as independent evidence. Give every item a cluster or none.
    #[schema(example = "prompt-17", min_length = 1, max_length = 256)]
    cluster: Option<String>,
}

impl From<RunItemDto> for RawItem {
    fn from(i: RunItemDto) -> Self {
        RawItem {
            id: i.id,
            score: i.score,
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
    scores: Option<Vec<f64>>,
    /// The run's items, with ids, reference scores or clusters.
    #[schema(min_items = 1)]
    items: Option<Vec<RunItemDto>>,
    #[schema(schema_with = group_schema)]
    group: Option<String>,
}

fn group_schema() -> utoipa::openapi::schema::Object {
    openapi::group_name(
        "The system whose outputs the run holds, as the anchors name their groups: a known group \
         gets its own shrunk bias correction, a new one (or none) the between-group variance of \
         the bias.",
    )
}

/// The run's shape, or the problem of giving both or neither; `prefix` names the run.
fn raw_run(
    scores: Option<Vec<f64>>,
    items: Option<Vec<RunItemDto>>,
    prefix: &str,
) -> Result<RawRun, Problem> {
    let item = "{score, id?, reference?, cluster?}";
    Ok(match ScoresOrItems::of(scores, items, prefix, item)? {
        ScoresOrItems::Scores(scores) => RawRun::Scores(scores),
        ScoresOrItems::Items(items) => RawRun::Items(items.into_iter().map(Into::into).collect()),
    })
}

/// The body of POST /v1/estimate: the cell, the run (`scores` or `items`, not both) and how
/// to answer.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EstimateBody {
    #[schema(schema_with = openapi::judge_name)]
    judge: String,
    #[schema(schema_with = openapi::rubric_name)]
    rubric: String,
    /// Raw judge scores, one per item of the run.
    #[schema(example = json!([2.5, 3.0, 4.0]), min_items = 1)]
    scores: Option<Vec<f64>>,
    /// The run's items, with ids, reference scores or clusters.
    #[schema(min_items = 1)]
    items: Option<Vec<RunItemDto>>,
    #[schema(schema_with = group_schema)]
    group: Option<String>,
    /// A version of the cell to use instead of the active one.
    #[schema(minimum = 1)]
    version: Option<i64>,
    /// Of the interval (default 0.95).
    #[schema(minimum = 0.5, maximum = 0.999, example = 0.95)]
    level: Option<f64>,
    /// A half-width to plan for: the answer says whether more anchors (or labelled items)
    /// would reach it, and about how many, or that the run's own size is the limit.
    #[schema(exclusive_minimum = 0.0, example = 0.05)]
    target_half_width: Option<f64>,
}

/// The body of POST /v1/compare: two runs of one cell.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareBody {
    #[schema(schema_with = openapi::judge_name)]
    judge: String,
    #[schema(schema_with = openapi::rubric_name)]
    rubric: String,
    /// Run A (for example model A's outputs).
    a: RunBody,
    /// Run B. Items with the same ids as A's are paired (the same prompts answered by two
    /// models); the pairing needs both runs to have the same set of ids.
    b: RunBody,
    #[schema(minimum = 1)]
    version: Option<i64>,
    #[schema(minimum = 0.5, maximum = 0.999, example = 0.95)]
    level: Option<f64>,
    #[schema(exclusive_minimum = 0.0, example = 0.05)]
    target_half_width: Option<f64>,
    /// What the difference estimates: `runs` (default), the runs' own mean reference
    /// difference, what these very items would show if all were labelled; or `population`,
    /// the mean difference over the prompts the paired items were drawn from.
    #[schema(value_type = Option<String>, example = "runs", pattern = "^(runs|population)$")]
    estimand: Option<String>,
}

/// The variance of an estimate, in its parts.
#[derive(Serialize, ToSchema)]
pub struct VarianceDto {
    /// From the run's own items: the noise of the reference around the corrected scores
    /// (plain), or the labelled sample (labelled).
    sampling: f64,
    /// From the corrector's finite anchors (0 on the labelled path, which does not rely on
    /// the corrector; 0 where `corrector_term` is `omitted`).
    corrector: f64,
    /// From the system-specific bias of the run's group (plain path, where the anchors carry
    /// groups): see `group`.
    group: f64,
    total: f64,
}

/// How the judge's system-specific bias entered the answer.
#[derive(Serialize, ToSchema)]
pub struct GroupTermDto {
    /// `known` (the run's group is among the anchors': its shrunk bias is applied), `new` (a
    /// new system's bias is a draw from the between-group distribution: its variance is
    /// added), or `unmeasured` (the anchors carry fewer than two groups, or the labelled path,
    /// which needs no such term).
    term: &'static str,
    /// The bias correction applied to the estimate.
    shift: f64,
    variance: f64,
    /// The between-group standard deviation of the bias the version measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    tau: Option<f64>,
    /// Groups behind it.
    groups: usize,
    /// `random_effects` (5 groups or more) or `conservative` (fewer: no shrinkage, and the
    /// between-group spread taken whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
}

/// The run's judge scores against the anchors' range.
#[derive(Serialize, ToSchema)]
pub struct SupportDto {
    /// The smallest and largest judge score among the version's anchors.
    anchor_range: [f64; 2],
    /// Share of the run's judge scores outside that range.
    outside_share: f64,
    /// More than 5% outside: the corrector's level there is extrapolated.
    extrapolated: bool,
    /// Share of the run's judge scores where the anchors are thin: fewer than 20 anchors
    /// within ± 1/20 of the anchors' range (or, for versions of under 1,600 anchors, fewer
    /// than a quarter of their average count there).
    thin_share: f64,
    /// More than 5% where the anchors are thin.
    sparse: bool,
}

/// The corrector's bias on this run, from its labelled items.
#[derive(Serialize, ToSchema)]
pub struct TransportDto {
    /// Mean of reference − corrected on the labelled items.
    mean_residual: f64,
    /// Its interval at the request's level for this run's own mean residual (the labelled
    /// items are a sample of the run: finite-run corrected).
    interval: [f64; 2],
    /// Its interval for the corrector's bias on the population the run was drawn from (no
    /// finite-run correction); excluding 0, the corrector is biased on runs like this one and
    /// a plain answer would be off by about this much (`warnings` says so).
    bias_interval: [f64; 2],
}

/// What would bring the half-width to `target_half_width`.
#[derive(Serialize, ToSchema)]
pub struct PlanDto {
    /// `reached`, `more_anchors`, `more_labelled` or `run_size` (the run's own items limit the
    /// interval; more anchors cannot help).
    outcome: &'static str,
    /// About how many anchors in all (more_anchors), or labelled items in the run
    /// (more_labelled).
    #[serde(skip_serializing_if = "Option::is_none")]
    needed: Option<usize>,
    message: String,
}

/// One run's de-biased mean.
#[derive(Serialize, ToSchema)]
pub struct RunEstimateDto {
    /// The estimate of the mean reference score the run's items would get if every one were
    /// labelled.
    estimate: f64,
    interval: [f64; 2],
    /// `plain` (judge scores only) or `labelled` (PPI++ with the run's labelled items); in a
    /// ranking, a run with labelled items is `combined`: its plain and labelled estimates
    /// weighted by the inverse of their variances.
    path: &'static str,
    /// Items in the run.
    n: usize,
    /// Items with a reference score.
    labelled: usize,
    variance: VarianceDto,
    /// How the corrector's own uncertainty entered: `posterior` (bayes, closed form),
    /// `resampled` (refits on resampled anchors), `anchor_offset` (identity: the anchors' mean
    /// residual and its standard error), `omitted` (flow; `warnings` says why) or
    /// `not_needed` (labelled path).
    corrector_term: &'static str,
    /// labelled path: the weight PPI++ gave the corrector (0: ignored, 1: trusted fully).
    #[serde(skip_serializing_if = "Option::is_none")]
    lambda: Option<f64>,
    support: SupportDto,
    #[serde(skip_serializing_if = "Option::is_none")]
    transport: Option<TransportDto>,
    group: GroupTermDto,
}

#[derive(Serialize, ToSchema)]
pub struct EstimateResponse {
    judge: String,
    rubric: String,
    /// The calibrator version that made every number.
    version: i64,
    method: String,
    level: f64,
    #[serde(flatten)]
    run: RunEstimateDto,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<PlanDto>,
    /// What a reader of the interval must know: extrapolation, a left-out term, a transport
    /// check that found bias.
    warnings: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct CompareResponse {
    judge: String,
    rubric: String,
    version: i64,
    method: String,
    level: f64,
    /// Each run's own estimate.
    a: RunEstimateDto,
    b: RunEstimateDto,
    /// mean(A) − mean(B), de-biased.
    difference: f64,
    interval: [f64; 2],
    /// Two-sided, against no difference.
    p_value: f64,
    /// The probability that A's mean is the higher, from the interval's own distribution (the
    /// t or normal centred on `difference` with its standard error): an approximation, not a
    /// posterior; on every path.
    #[serde(skip_serializing_if = "Option::is_none")]
    prob_a_greater: Option<f64>,
    /// `plain` or `labelled` (either run has labelled items).
    path: &'static str,
    /// Whether the items were paired by id.
    paired: bool,
    /// `runs` (the runs' own difference) or `population` (over the prompts).
    estimand: &'static str,
    /// Items paired.
    pairs: usize,
    variance: VarianceDto,
    corrector_term: &'static str,
    /// The group term of the difference: cancelled where both runs name one group.
    group: GroupTermDto,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<PlanDto>,
    warnings: Vec<String>,
}

fn variance(v: crate::calibrate::runlevel::inference::Variance) -> VarianceDto {
    VarianceDto {
        sampling: v.sampling,
        corrector: v.corrector,
        group: v.group,
        total: v.total(),
    }
}

fn group(g: &GroupAnswer) -> GroupTermDto {
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

fn run_dto(e: &RunEstimate) -> RunEstimateDto {
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
    }
}

fn plan(advice: Option<Advice>, target: Option<f64>) -> Option<PlanDto> {
    let target = target?;
    Some(match advice? {
        Advice::Reached => PlanDto {
            outcome: "reached",
            needed: None,
            message: format!("the interval is already within ±{target}"),
        },
        Advice::Anchors(n) => PlanDto {
            outcome: "more_anchors",
            needed: Some(n),
            message: format!(
                "about {n} anchors in all (drawn like the present ones) would bring the half-width to {target}; retrain after uploading them"
            ),
        },
        Advice::Labels(n) => PlanDto {
            outcome: "more_labelled",
            needed: Some(n),
            message: format!(
                "about {n} labelled items of this run, drawn at random, would bring the half-width to {target}"
            ),
        },
        Advice::RunSize => PlanDto {
            outcome: "run_size",
            needed: None,
            message: format!(
                "the run's own items limit the interval: even a perfect corrector leaves it wider than ±{target}; score more items, or label a sample of the run"
            ),
        },
    })
}

/// What the reader must know about one run's answer; `name` prefixes run-specific notes.
fn warnings(name: &str, e: &RunEstimate, level: f64, out: &mut Vec<String>) {
    if e.support.extrapolated() {
        out.push(format!(
            "{name}{:.1}% of the judge scores lie outside the anchors' range [{}, {}]: the corrected level there is extrapolated; upload anchors covering those scores, or label a sample of the run",
            100.0 * e.support.outside,
            e.support.anchor_range.0,
            e.support.anchor_range.1
        ));
    }
    if e.support.sparse() && !e.support.extrapolated() {
        out.push(format!(
            "{name}{:.1}% of the judge scores lie where the anchors are thin (fewer than {THIN_ANCHORS} anchors nearby, or a quarter of their average there): the corrected level there rests on few anchors; upload anchors near those scores, or label a sample of the run",
            100.0 * e.support.thin
        ));
    }
    if let Term::Omitted(why) = e.term {
        out.push(format!("{name}{why}"));
    }
    if let Some(t) = e.transport.filter(Transport::biased) {
        out.push(format!(
            "{name}the corrector is biased on runs like this one: its mean residual on the labelled items is {:.3} ({:.0}% interval for the bias [{:.3}, {:.3}]); the labelled path corrects for it, a plain estimate would not",
            t.mean_residual,
            100.0 * level,
            t.bias_interval.0,
            t.bias_interval.1
        ));
    }
}

/// What the reader must know about the group term of a plain answer.
fn group_warnings(g: &GroupAnswer, out: &mut Vec<String>) {
    match (g.term, g.rule.as_deref()) {
        (GroupTerm::Unmeasured, _) => out.push(
            "the version's anchors name fewer than two groups: system-specific bias (a judge rating one system's outputs differently from another's at the same score) is not accounted for; upload anchors with `group` set to the system whose output was judged, from several systems, and retrain".into(),
        ),
        (_, Some("conservative")) => out.push(format!(
            "the version's anchors name {} groups: too few to estimate how the judge's bias varies between systems, so the conservative rule applies (the group's own bias unshrunk, or the whole between-group spread for a new system)",
            g.groups
        )),
        _ => {}
    }
}

/// Names the request's cell on its span.
fn name_span(judge: &str, rubric: &str) {
    let span = tracing::Span::current();
    span.record("judge", judge);
    span.record("rubric", rubric);
}

fn identify(v: &Loaded) -> (String, String, i64, String) {
    let v = &v.version;
    (
        v.key.judge.to_string(),
        v.key.rubric.to_string(),
        v.version,
        v.method().to_string(),
    )
}

/// A run's de-biased mean with its interval.
///
/// The estimand is the mean reference score the run's items would get if every one were
/// labelled. With judge scores only, the estimate is the mean corrected score of the cell's
/// version (active, or `version`); its interval adds the corrector's own uncertainty from its
/// finite anchors to the run's noise, and assumes that the reference given the judge score is
/// distributed on the run as on the anchors' groups, up to a group bias drawn as theirs were.
/// Where the anchors name groups (systems), a run of a known `group` gets that group's shrunk
/// bias and a run of a new one (or none) the between-group variance; where they do not,
/// `warnings` says that system-specific bias is not accounted for. Items that carry a
/// `reference` (a random sample of the run, at least 3) switch to the labelled path, which
/// needs no such assumption, and add a transport check of the corrector on this run.
#[utoipa::path(
    post, path = "/v1/estimate", tag = "correction",
    request_body = EstimateBody,
    responses(
        (status = 200, body = EstimateResponse),
        (status = 404, description = "No active calibrator (the message says how to train one), or no such version", body = ErrorBody),
        (status = 409, description = "The version cannot answer (too few anchors)", body = ErrorBody),
        (status = 422, description = "Bad judge, rubric, score, reference, id, cluster, level or target; too few labelled items; too many scores", body = ErrorBody),
    ),
    security(("api_key" = ["correct"]))
)]
pub async fn estimate(
    State(state): State<AppState>,
    _auth: Authorized<CorrectScope>,
    Json(body): Json<EstimateBody>,
) -> Result<axum::Json<EstimateResponse>, ApiError> {
    name_span(&body.judge, &body.rubric);
    let request = EstimateRequest::parse(
        &body.judge,
        &body.rubric,
        (raw_run(body.scores, body.items, ""), body.group),
        body.version,
        RawSettings {
            level: body.level,
            target_half_width: body.target_half_width,
            estimand: None,
        },
    )
    .map_err(|p| ApiError::invalid("the estimate request was refused", p))?;
    let settings = request.settings;
    let (loaded, e) = state.service.estimate(request).await?;
    let (judge, rubric, version, method) = identify(&loaded);
    let mut notes = Vec::new();
    warnings("", &e, settings.level, &mut notes);
    if e.path == crate::calibrate::runlevel::Path::Plain {
        group_warnings(&e.group, &mut notes);
    }
    Ok(axum::Json(EstimateResponse {
        judge,
        rubric,
        version,
        method,
        level: settings.level,
        run: run_dto(&e),
        plan: plan(e.advice, settings.target),
        warnings: notes,
    }))
}

/// Is model A better than model B? The difference of two runs' de-biased means.
///
/// By default (`estimand`: `runs`) the difference of the two runs' own mean references: its
/// sampling variance is each run's residual noise (reference around corrected score), paired
/// or not. `population` asks for the mean difference over the prompts the paired items were
/// drawn from, whose sampling variance is the per-item corrected differences'. The
/// corrector's uncertainty, which both runs share, enters the difference once; the runs'
/// groups add their bias difference (cancelled for one group on both sides). Items of either
/// run may carry a `reference`; then the labelled path applies (on the per-item differences
/// where the same items of paired runs are labelled; otherwise a Welch t on the two runs'
/// own answers).
#[utoipa::path(
    post, path = "/v1/compare", tag = "correction",
    request_body = CompareBody,
    responses(
        (status = 200, body = CompareResponse),
        (status = 404, description = "No active calibrator (the message says how to train one), or no such version", body = ErrorBody),
        (status = 409, description = "The version cannot answer (too few anchors)", body = ErrorBody),
        (status = 422, description = "Bad judge, rubric, score, reference, id, cluster, level or target; too few labelled items; too many scores", body = ErrorBody),
    ),
    security(("api_key" = ["correct"]))
)]
pub async fn compare(
    State(state): State<AppState>,
    _auth: Authorized<CorrectScope>,
    Json(body): Json<CompareBody>,
) -> Result<axum::Json<CompareResponse>, ApiError> {
    name_span(&body.judge, &body.rubric);
    let side = |run: RunBody, prefix: &str| (raw_run(run.scores, run.items, prefix), run.group);
    let request = CompareRequest::parse(
        &body.judge,
        &body.rubric,
        side(body.a, "a."),
        side(body.b, "b."),
        body.version,
        RawSettings {
            level: body.level,
            target_half_width: body.target_half_width,
            estimand: body.estimand,
        },
    )
    .map_err(|p| ApiError::invalid("the comparison request was refused", p))?;
    let settings = request.settings;
    let (loaded, c): (_, RunComparison) = state.service.compare(request).await?;
    let (judge, rubric, version, method) = identify(&loaded);
    let mut notes = Vec::new();
    warnings("run a: ", &c.a, settings.level, &mut notes);
    warnings("run b: ", &c.b, settings.level, &mut notes);
    if c.a.path == crate::calibrate::runlevel::Path::Plain
        || c.b.path == crate::calibrate::runlevel::Path::Plain
    {
        group_warnings(&c.group, &mut notes);
    }
    notes.dedup();
    let d = &c.difference;
    Ok(axum::Json(CompareResponse {
        judge,
        rubric,
        version,
        method,
        level: settings.level,
        a: run_dto(&c.a),
        b: run_dto(&c.b),
        difference: d.estimate,
        interval: [d.interval.0, d.interval.1],
        p_value: d.p_value,
        prob_a_greater: Some(c.prob_a_greater),
        path: c.path.as_str(),
        paired: d.paired,
        estimand: c.estimand.as_str(),
        pairs: c.pairs,
        variance: variance(d.variance),
        corrector_term: c.term.as_str(),
        group: group(&c.group),
        plan: plan(c.advice, settings.target),
        warnings: notes,
    }))
}

/// One run of a ranking.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RankRunBody {
    /// The run's name in the answer (a model, a checkpoint): unique within the request.
    #[schema(example = "model-a", min_length = 1, max_length = 256)]
    name: String,
    /// Raw judge scores, one per item of the run.
    #[schema(example = json!([2.5, 3.0, 4.0]), min_items = 1)]
    scores: Option<Vec<f64>>,
    /// The run's items, with ids (the same ids in every run pair them), reference scores or
    /// clusters.
    #[schema(min_items = 1)]
    items: Option<Vec<RunItemDto>>,
    #[schema(schema_with = group_schema)]
    group: Option<String>,
}

/// A label plan to return with the ranking.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelsBody {
    /// The most labels in all; left out: as many as settling every open pair takes.
    #[schema(minimum = 1, example = 200)]
    budget: Option<usize>,
    /// Gaps smaller than this (reference units) need not be resolved (default 0.1): a pair
    /// whose interval lies within ±min_gap is settled as close.
    #[schema(exclusive_minimum = 0.0, example = 0.1)]
    min_gap: Option<f64>,
    /// The chance of resolving a pair whose true gap is the one planned for (default 0.8).
    #[schema(minimum = 0.5, maximum = 0.99, example = 0.8)]
    power: Option<f64>,
    /// Seeds the random sample of items to label (default 0).
    seed: Option<u64>,
}

/// The body of POST /v1/rank: K runs of one cell.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RankBody {
    #[schema(schema_with = openapi::judge_name)]
    judge: String,
    #[schema(schema_with = openapi::rubric_name)]
    rubric: String,
    /// 2 to 50 runs.
    #[schema(min_items = 2, max_items = 50)]
    runs: Vec<RankRunBody>,
    #[schema(minimum = 1)]
    version: Option<i64>,
    /// Of the intervals (default 0.95): with `familywise`, every pair's interval and every
    /// rank interval hold together at this level, over all `rounds` looks.
    #[schema(minimum = 0.5, maximum = 0.999, example = 0.95)]
    level: Option<f64>,
    /// `familywise` (default: max-t intervals that hold for all pairs at once) or `per_pair`
    /// (each pair's interval on its own; rank intervals then hold only pair by pair).
    #[schema(value_type = Option<String>, example = "familywise", pattern = "^(familywise|per_pair)$")]
    error: Option<String>,
    /// This look (default 1). Each look is made at level 1 − (1 − level)/rounds.
    #[schema(minimum = 1, maximum = 10)]
    round: Option<usize>,
    /// The looks planned in all, fixed before the first (default 1). To label and ask again,
    /// plan 2 or more from the start.
    #[schema(minimum = 1, maximum = 10)]
    rounds: Option<usize>,
    /// Plan labels for the next look: which items of which runs to label.
    labels: Option<LabelsBody>,
}

/// One run in a ranking.
#[derive(Serialize, ToSchema)]
pub struct RankedRunDto {
    name: String,
    /// The ranks compatible with the pairs' intervals, 1 the highest mean: [best, worst].
    #[schema(value_type = Vec<i64>, min_items = 2, max_items = 2, example = json!([1, 3]))]
    rank: [usize; 2],
    /// Whether the run may be the best (its rank interval reaches 1).
    top: bool,
    #[serde(flatten)]
    run: RunEstimateDto,
}

/// One pair of runs, A − B.
#[derive(Serialize, ToSchema)]
pub struct RankedPairDto {
    a: String,
    b: String,
    /// mean(A) − mean(B), de-biased.
    difference: f64,
    /// The simultaneous interval (with `familywise`).
    interval: [f64; 2],
    standard_error: f64,
    /// Items both runs labelled that the pair's own answer rests on (the labelled path on
    /// the per-item differences, weighed with the plain difference); 0 where the difference
    /// is of the two runs' answers.
    labelled: usize,
    /// The interval excludes 0.
    resolved: bool,
    /// The run surely higher, where resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    higher: Option<String>,
}

/// Labels to add to one run.
#[derive(Serialize, ToSchema)]
pub struct RunLabelsDto {
    name: String,
    add: usize,
    /// The items to label, in order: their ids where the run has ids, else their 1-based
    /// positions in the run as sent.
    items: Vec<String>,
}

/// Where labels would settle the ranking.
#[derive(Serialize, ToSchema)]
pub struct LabelPlanDto {
    /// Labels in all.
    total: usize,
    /// The look to send them with.
    next_round: usize,
    min_gap: f64,
    power: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget: Option<usize>,
    seed: u64,
    /// Pairs neither resolved nor settled as within ±min_gap.
    open_pairs: usize,
    /// Of them, those whose target the plan reaches, as its model predicts (for a `step`,
    /// the whole plan it is a share of).
    targets_reached: usize,
    /// The labels one count for every run would take to reach the same targets (`null` where
    /// no count does).
    #[serde(skip_serializing_if = "Option::is_none")]
    uniform_total: Option<usize>,
    /// Whether every run has the same ids, so that the labels fall on the same items.
    paired: bool,
    /// A first sample of `PILOT_LABELS` (20) per run in an open pair, to send back at the
    /// next look, which plans the rest from what it measures (made before any labels where
    /// the runs pair by id and two more looks remain).
    pilot: bool,
    /// A step toward the plan: a tenth of each run's labels in the whole plan (at least 10
    /// where it asks any), to send back at the next look, which plans again on sharper gaps
    /// (made where the runs pair by id, have labels, and two more looks remain).
    step: bool,
    runs: Vec<RunLabelsDto>,
}

#[derive(Serialize, ToSchema)]
pub struct RankResponse {
    judge: String,
    rubric: String,
    version: i64,
    method: String,
    level: f64,
    /// `familywise` or `per_pair`.
    error: &'static str,
    round: usize,
    rounds: usize,
    /// The level this look's pair intervals hold at together: 1 − (1 − level)/rounds.
    family_level: f64,
    /// The critical value the pairs' standard errors are multiplied by (max-t), or the
    /// largest per-pair one.
    critical: f64,
    /// The runs as sent, each with its rank interval.
    runs: Vec<RankedRunDto>,
    /// The run names by estimate, highest first.
    order: Vec<String>,
    /// The runs that may be the best.
    top: Vec<String>,
    /// Every pair, A before B as sent.
    pairs: Vec<RankedPairDto>,
    resolved: usize,
    unresolved: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<LabelPlanDto>,
    warnings: Vec<String>,
}

/// Ranks K runs of one cell: is model A better than B, for every pair at once?
///
/// Each run's de-biased mean is the one `/v1/estimate` gives (plain path with its group term);
/// where the run carries references, its plain and labelled estimates combined by inverse
/// variance (`path`: `combined`), so that labels only ever narrow it. Every pair's difference gets an
/// interval that holds for all pairs together (`error`: `familywise`, max-t over joint draws of
/// every run's error: the runs' own noise, the corrector's shared error, the groups' bias and
/// the labelled runs' sampling, correlated where they labelled the same items), and each run a
/// rank interval that covers its true rank jointly with the others. `labels` returns which
/// items of which runs to label so that the pairs left open are resolved: labels go to the
/// runs of close pairs, none to runs already set apart. A user who labels and asks again plans
/// the looks (`rounds`) from the start; each look spends 1/rounds of the error rate.
#[utoipa::path(
    post, path = "/v1/rank", tag = "correction",
    request_body = RankBody,
    responses(
        (status = 200, body = RankResponse),
        (status = 404, description = "No active calibrator (the message says how to train one), or no such version", body = ErrorBody),
        (status = 409, description = "The version cannot answer (too few anchors)", body = ErrorBody),
        (status = 422, description = "Bad judge, rubric, run, name, score, reference, id, cluster, level, error, round or labels; too few labelled items; too many runs or scores", body = ErrorBody),
    ),
    security(("api_key" = ["correct"]))
)]
pub async fn rank(
    State(state): State<AppState>,
    _auth: Authorized<CorrectScope>,
    Json(body): Json<RankBody>,
) -> Result<axum::Json<RankResponse>, ApiError> {
    name_span(&body.judge, &body.rubric);
    let runs = body
        .runs
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let prefix = format!("runs[{i}].");
            (r.name, (raw_run(r.scores, r.items, &prefix), r.group))
        })
        .collect();
    let request = RankRequest::parse(
        &body.judge,
        &body.rubric,
        runs,
        body.version,
        RawSettings {
            level: body.level,
            target_half_width: None,
            estimand: None,
        },
        RawRankOptions {
            error: body.error,
            round: body.round,
            rounds: body.rounds,
            labels: body.labels.map(|l| RawLabels {
                budget: l.budget,
                min_gap: l.min_gap,
                power: l.power,
                seed: l.seed,
            }),
        },
    )
    .map_err(|p| ApiError::invalid("the ranking request was refused", p))?;
    let (settings, how) = (request.settings, request.rank);
    let names: Vec<String> = request.runs.iter().map(|r| r.0.clone()).collect();
    let ids: Vec<Option<Vec<String>>> = request.runs.iter().map(|r| r.1.ids.clone()).collect();
    let (loaded, r): (_, Ranking) = state.service.rank(request).await?;
    let (judge, rubric, version, method) = identify(&loaded);
    let mut notes = Vec::new();
    for (name, run) in names.iter().zip(&r.runs) {
        warnings(
            &format!("{name}: "),
            &run.estimate,
            settings.level,
            &mut notes,
        );
    }
    if let Some(plain) = r
        .runs
        .iter()
        .find(|x| x.estimate.path == crate::calibrate::runlevel::Path::Plain)
    {
        group_warnings(&plain.estimate.group, &mut notes);
    }
    let top: std::collections::HashSet<usize> = r.top().into_iter().collect();
    let resolved = r.pairs.iter().filter(|p| p.higher().is_some()).count();
    let labels = r.allocation.as_ref().map(|a| LabelPlanDto {
        total: a.total(),
        next_round: how.round + 1,
        min_gap: a.goal.min_gap,
        power: a.goal.power,
        budget: a.goal.budget,
        seed: a.goal.seed,
        open_pairs: a.open,
        targets_reached: a.reached,
        uniform_total: a.uniform,
        paired: a.paired,
        pilot: a.pilot,
        step: a.step,
        runs: names
            .iter()
            .enumerate()
            .filter(|(k, _)| a.add[*k] > 0)
            .map(|(k, name)| RunLabelsDto {
                name: name.clone(),
                add: a.add[k],
                items: a.items[k]
                    .iter()
                    .map(|&i| match &ids[k] {
                        Some(ids) => ids[i].clone(),
                        None => (i + 1).to_string(),
                    })
                    .collect(),
            })
            .collect(),
    });
    // A first sample plans no targets; a step's count is the whole plan's.
    if let Some(a) = r
        .allocation
        .as_ref()
        .filter(|a| !a.pilot && a.reached < a.open)
    {
        notes.push(format!(
            "the label plan reaches {} of the {} open pairs' targets: the others need more labels than the budget or the runs' items allow",
            a.reached, a.open
        ));
    }
    Ok(axum::Json(RankResponse {
        judge,
        rubric,
        version,
        method,
        level: settings.level,
        error: how.error.as_str(),
        round: how.round,
        rounds: how.rounds,
        family_level: r.family_level,
        critical: r.critical,
        order: r.order().into_iter().map(|k| names[k].clone()).collect(),
        top: r.top().into_iter().map(|k| names[k].clone()).collect(),
        pairs: r
            .pairs
            .iter()
            .map(|p| RankedPairDto {
                a: names[p.a].clone(),
                b: names[p.b].clone(),
                difference: p.difference,
                interval: [p.interval.0, p.interval.1],
                standard_error: p.standard_error,
                labelled: p.labelled,
                resolved: p.higher().is_some(),
                higher: p.higher().map(|h| names[h].clone()),
            })
            .collect(),
        resolved,
        unresolved: r.pairs.len() - resolved,
        runs: names
            .iter()
            .zip(&r.runs)
            .enumerate()
            .map(|(k, (name, x))| RankedRunDto {
                name: name.clone(),
                rank: [x.rank.0, x.rank.1],
                top: top.contains(&k),
                run: run_dto(&x.estimate),
            })
            .collect(),
        labels,
        warnings: notes,
    }))
}
