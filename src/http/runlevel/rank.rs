//! POST /v1/rank: K runs ranked, with intervals that hold together and a label plan.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{RunEstimateDto, RunItemDto, group_schema, identify, name_span, raw_run, run_dto};
use crate::domain::rank_session::RankSession;
use crate::domain::runlevel::{RawLabels, RawRankOptions, RawRunWithGroup, RawSettings};
use crate::http::AppState;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Authorized, CorrectScope, Json};
use crate::http::schema;
use crate::service::{RankRequest, Served};
use judgecal_stats::runlevel::rank::{Allocation, RankedPair, Ranking};
use judgecal_stats::runlevel::warnings::{self, Note};
use judgecal_stats::warning::Warning;

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
    /// The judge version that scored the run. Runs of different judge versions are each
    /// corrected by their own version's calibration (409 where one has none).
    #[schema(schema_with = crate::http::schema::judge_version)]
    judge_version: Option<String>,
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
    #[schema(schema_with = schema::judge_name)]
    judge: String,
    #[schema(schema_with = schema::rubric_name)]
    rubric: String,
    /// 2 to 50 runs.
    #[schema(min_items = 2, max_items = 50)]
    runs: Vec<RankRunBody>,
    #[schema(minimum = 1)]
    version: Option<i64>,
    /// Covariates to hold at one value for every item (`{"length": 500}`): the answer is then
    /// what the runs would score at that value, the judge's reward for it taken out (a
    /// length-controlled estimate). Only for a version trained with those covariates.
    #[schema(schema_with = schema::covariates)]
    hold: Option<std::collections::BTreeMap<String, f64>>,
    /// A panel's runs only: take the members' missing scores as missing at random (their
    /// absence depends on nothing, or only on what the other members scored) without testing
    /// it. By default a run whose members score its partial items differently from its
    /// complete ones (a judge that fails on hard items) is refused, naming the member.
    #[serde(default)]
    assume_missing_at_random: Option<bool>,
    /// Of the intervals (default 0.95): with `familywise`, every pair's interval and every
    /// rank interval hold together at this level (in a session, over all its looks).
    #[schema(minimum = 0.5, maximum = 0.999, example = 0.95)]
    level: Option<f64>,
    /// `familywise` (default: max-t intervals that hold for all pairs at once) or `per_pair`
    /// (each pair's interval on its own; rank intervals then hold only pair by pair).
    #[schema(value_type = Option<String>, example = "familywise", pattern = "^(familywise|per_pair)$")]
    error: Option<String>,
    /// Refused: looks are bound only in a ranking session (`POST /v1/rank/sessions`). A plain
    /// ranking answers one look, at the full level.
    #[schema(minimum = 1, maximum = 10)]
    round: Option<usize>,
    /// Refused, as `round` is: a session plans its looks.
    #[schema(minimum = 1, maximum = 10)]
    rounds: Option<usize>,
    /// Refused: a label plan is for a later look, which only a ranking session binds (ask a
    /// session's look for `labels`).
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

/// A ranking session.
#[derive(Serialize, ToSchema)]
pub struct RankSessionDto {
    id: String,
    judge: String,
    rubric: String,
    rounds: usize,
    /// Looks taken.
    looks: usize,
    /// Looks left: a look past the plan is refused (409).
    looks_left: usize,
    level: f64,
    error: String,
    seed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<i64>,
    /// Labels seen so far over every look, which every later look must still carry.
    labels_seen: usize,
    created_at: String,
    updated_at: String,
}

impl From<RankSession> for RankSessionDto {
    fn from(s: RankSession) -> Self {
        Self {
            id: s.id.to_string(),
            judge: s.key.judge.to_string(),
            rubric: s.key.rubric.to_string(),
            rounds: s.plan.rounds,
            looks: s.looks,
            looks_left: s.plan.rounds.saturating_sub(s.looks),
            level: s.plan.level,
            error: s.plan.error.clone(),
            seed: s.plan.seed,
            version: s.plan.version,
            labels_seen: s.seen.labels(),
            created_at: crate::http::rfc3339(s.created_at_ms),
            updated_at: crate::http::rfc3339(s.updated_at_ms),
        }
    }
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
    /// The ranking session this look belongs to, after it (looks through
    /// `POST /v1/rank/sessions/{id}/looks`); absent for a plain `/v1/rank`, whose guarantee
    /// is for its one look (a warning says so).
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<RankSessionDto>,
    #[serde(flatten)]
    reading: super::RunReading,
}

/// Ranks K runs of one cell: is model A better than B, for every pair at once?
///
/// Each run's de-biased mean is the one `/v1/estimate` gives (plain path with its group term);
/// where the run carries references, its plain and labelled estimates combined by inverse
/// variance (`path`: `combined`), so that labels only ever narrow it. Every pair's difference gets an
/// interval that holds for all pairs together (`error`: `familywise`, max-t over joint draws of
/// every run's error: the runs' own noise, the corrector's shared error, the groups' bias and
/// the labelled runs' sampling, correlated where they labelled the same items), and each run a
/// rank interval that covers its true rank jointly with the others. A session's look with
/// `labels` returns which items of which runs to label so that the pairs left open are
/// resolved: labels go to the runs of close pairs, none to runs already set apart. A plain
/// ranking answers one look: a
/// user who labels and asks again opens a ranking session (`POST /v1/rank/sessions`), which
/// plans the looks from the start (each spends 1/rounds of the error rate), draws the items to
/// label and binds the runs; `round`, `rounds` and `labels` are refused here.
#[utoipa::path(
    post, path = "/v1/rank", tag = "correction",
    request_body = RankBody,
    responses(
        (status = 200, body = RankResponse),
        (status = 404, description = "No active calibrator (the message says how to train one), or no such version", body = ErrorBody),
        (status = 409, description = "The version cannot answer (too few anchors), or runs of different judge versions meet a calibration trained with covariates", body = ErrorBody),
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
    let request = parse(body)?;
    Ok(axum::Json(answer(&state, request, None).await?))
}

/// A plain ranking's answer (`session` `None`), or a session's next look.
pub(super) async fn answer(
    state: &AppState,
    request: RankRequest,
    session: Option<&RankSession>,
) -> Result<RankResponse, ApiError> {
    let (settings, how) = (request.settings, request.rank);
    let names: Vec<String> = request.runs.iter().map(|r| r.0.clone()).collect();
    let ids: Vec<Option<Vec<String>>> = request.runs.iter().map(|r| r.1.ids.clone()).collect();
    let (served, r, after) = match session {
        None => {
            let (served, r) = state.service.runs().rank(request).await?;
            (served, r, None)
        }
        Some(s) => {
            let (served, r, after) = state.service.runs().rank_look(s, request).await?;
            (served, r, Some(after))
        }
    };
    let (judge, rubric, version, method) = identify(&served.loaded);
    let estimates: Vec<_> = r.runs.iter().map(|x| &x.estimate).collect();
    let mut notes = warnings::of_runs(&estimates, None, settings.level);
    if let Some(short) = r.allocation.as_ref().and_then(|a| a.shortfall()) {
        notes.push(Note {
            run: None,
            warning: short,
        });
    }
    let resolved = r.pairs.iter().filter(|p| p.higher().is_some()).count();
    let found: Vec<Warning> = notes
        .iter()
        .map(|n| {
            let w = warnings::render(n, |k| format!("{}: ", names[k]));
            match n.run {
                Some(k) if w.systems.is_empty() => w.systems([&names[k]]),
                _ => w,
            }
        })
        .collect();
    Ok(RankResponse {
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
        pairs: r.pairs.iter().map(|p| pair_dto(p, &names)).collect(),
        resolved,
        unresolved: r.pairs.len() - resolved,
        runs: runs_dto(&r, &names, &served),
        labels: r
            .allocation
            .as_ref()
            .map(|a| label_plan(a, how.round + 1, &names, &ids)),
        session: after.map(Into::into),
        reading: super::RunReading::of(&served, found),
    })
}

/// The request as the service takes it, or the problems with it by row and field.
fn parse(body: RankBody) -> Result<RankRequest, ApiError> {
    parse_runs(
        (&body.judge, &body.rubric),
        body.runs,
        body.version,
        RawSettings {
            level: body.level,
            target_half_width: None,
            estimand: None,
            hold: body.hold,
            assume_missing_at_random: body.assume_missing_at_random,
        },
        RawRankOptions {
            error: body.error,
            round: body.round,
            rounds: body.rounds,
            session: false,
            labels: body.labels.map(|l| RawLabels {
                budget: l.budget,
                min_gap: l.min_gap,
                power: l.power,
                seed: l.seed,
            }),
        },
    )
}

/// Runs as sent, with the ranking's settings, as the service takes them.
pub(super) fn parse_runs(
    (judge, rubric): (&str, &str),
    runs: Vec<RankRunBody>,
    version: Option<i64>,
    settings: RawSettings,
    options: RawRankOptions,
) -> Result<RankRequest, ApiError> {
    let runs = runs
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let prefix = format!("runs[{i}].");
            (
                r.name,
                RawRunWithGroup {
                    run: raw_run(r.scores, r.items, &prefix),
                    group: r.group,
                    judge_version: r.judge_version,
                },
            )
        })
        .collect();
    RankRequest::parse(judge, rubric, runs, version, settings, options)
        .map_err(|p| ApiError::invalid("the ranking request was refused", p))
}

fn pair_dto(p: &RankedPair, names: &[String]) -> RankedPairDto {
    RankedPairDto {
        a: names[p.a].clone(),
        b: names[p.b].clone(),
        difference: p.difference,
        interval: [p.interval.0, p.interval.1],
        standard_error: p.standard_error,
        labelled: p.labelled,
        resolved: p.higher().is_some(),
        higher: p.higher().map(|h| names[h].clone()),
    }
}

/// The runs as sent, each with its rank interval and whether it may be the best.
fn runs_dto(r: &Ranking, names: &[String], served: &Served) -> Vec<RankedRunDto> {
    let top: std::collections::HashSet<usize> = r.top().into_iter().collect();
    names
        .iter()
        .zip(&r.runs)
        .enumerate()
        .map(|(k, (name, x))| RankedRunDto {
            name: name.clone(),
            rank: [x.rank.0, x.rank.1],
            top: top.contains(&k),
            run: run_dto(&x.estimate).corrected_by(served, k),
        })
        .collect()
}

/// The label plan, its items named as the caller sent them (`ids`, else positions).
fn label_plan(
    a: &Allocation,
    next_round: usize,
    names: &[String],
    ids: &[Option<Vec<String>>],
) -> LabelPlanDto {
    LabelPlanDto {
        total: a.total(),
        next_round,
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
                items: a.item_names(k, ids[k].as_deref()),
            })
            .collect(),
    }
}
