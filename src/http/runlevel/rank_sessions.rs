//! Ranking sessions: `POST /v1/rank/sessions` opens one, `POST /v1/rank/sessions/{id}/looks`
//! answers its next look, `GET /v1/rank/sessions/{id}` reads it (`domain::rank_session`).

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::name_span;
use super::rank::{RankResponse, RankRunBody, RankSessionDto, answer, parse_runs};
use crate::domain::rank_session::{MAX_LOOKS, SessionPlan};
use crate::domain::runlevel::{RawLabels, RawRankOptions, RawSettings};
use crate::domain::{CellKey, JudgeName, Problem, RubricName};
use crate::http::AppState;
use crate::http::error::{ApiError, ErrorBody};
use crate::http::extract::{Authorized, CorrectScope, Json};
use crate::http::schema;
use judgecal_stats::runlevel::rank::ErrorRate;

/// The body of POST /v1/rank/sessions.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenSessionBody {
    #[schema(schema_with = schema::judge_name)]
    judge: String,
    #[schema(schema_with = schema::rubric_name)]
    rubric: String,
    /// The looks planned in all, fixed now: each is made at family-wise level
    /// 1 − (1 − level)/rounds, so that every look's claims hold together.
    #[schema(minimum = 1, maximum = 10, example = 4)]
    rounds: usize,
    /// Of the family over all looks (default 0.95).
    #[schema(minimum = 0.5, maximum = 0.999, example = 0.95)]
    level: Option<f64>,
    /// `familywise` (default) or `per_pair`.
    #[schema(value_type = Option<String>, example = "familywise", pattern = "^(familywise|per_pair)$")]
    error: Option<String>,
    /// Seeds every look's label plan (default 0).
    seed: Option<u64>,
    /// Answer every look by this calibrator version (default: the cell's active one at each
    /// look).
    #[schema(minimum = 1)]
    version: Option<i64>,
}

/// A label plan for the next look (its seed is the session's).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LookLabelsBody {
    /// The most labels in all.
    #[schema(minimum = 1, example = 200)]
    budget: Option<usize>,
    /// Gaps smaller than this need not be resolved (default 0.1).
    #[schema(exclusive_minimum = 0.0, example = 0.1)]
    min_gap: Option<f64>,
    /// The chance of resolving a pair whose true gap is the one planned for (default 0.8).
    #[schema(minimum = 0.5, maximum = 0.99, example = 0.8)]
    power: Option<f64>,
}

/// The body of a look: the runs as `/v1/rank` takes them, each with every label an earlier
/// look of the session carried.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LookBody {
    /// 2 to 50 runs.
    #[schema(min_items = 2, max_items = 50)]
    runs: Vec<RankRunBody>,
    /// Plan labels for the next look.
    labels: Option<LookLabelsBody>,
    /// A panel's runs only: as `/v1/rank`'s, take the members' missing scores as missing at
    /// random without testing it.
    #[serde(default)]
    assume_missing_at_random: Option<bool>,
}

/// Opens a ranking session: a user who labels and asks again fixes the looks first, and every
/// look's claims then hold together at `level` (each look spends 1/rounds of the error rate).
/// The session binds the looks (one past the plan is refused), the label seed, every label
/// seen (a later look must carry each unchanged), the items its label plans draw (a label of
/// any other item is refused) and the runs its looks see (another session's look at them is
/// refused).
#[utoipa::path(
    post, path = "/v1/rank/sessions", tag = "correction",
    request_body = OpenSessionBody,
    responses(
        (status = 201, body = RankSessionDto),
        (status = 404, description = "The cell has no calibrator to answer it (or no such pinned version)", body = ErrorBody),
        (status = 422, description = "Bad judge, rubric, rounds, level, error or version", body = ErrorBody),
    ),
    security(("api_key" = ["correct"]))
)]
pub async fn open_rank_session(
    State(state): State<AppState>,
    _auth: Authorized<CorrectScope>,
    Json(body): Json<OpenSessionBody>,
) -> Result<impl IntoResponse, ApiError> {
    name_span(&body.judge, &body.rubric);
    let mut problems = Vec::new();
    let judge = JudgeName::parse(&body.judge)
        .map_err(|e| problems.push(Problem::at(None, "judge", e)))
        .ok();
    let rubric = RubricName::parse(&body.rubric)
        .map_err(|e| problems.push(Problem::at(None, "rubric", e)))
        .ok();
    if !(1..=MAX_LOOKS).contains(&body.rounds) {
        problems.push(Problem::at(
            None,
            "rounds",
            format!("1 to {MAX_LOOKS} looks"),
        ));
    }
    let level = body.level.unwrap_or(0.95);
    if !(0.5..=0.999).contains(&level) {
        problems.push(Problem::at(None, "level", "between 0.5 and 0.999"));
    }
    let error = body.error.unwrap_or_else(|| "familywise".into());
    if ErrorRate::parse(&error).is_none() {
        problems.push(Problem::at(None, "error", "familywise or per_pair"));
    }
    if body.seed.is_some_and(|s| i64::try_from(s).is_err()) {
        problems.push(Problem::at(None, "seed", "0 to 9223372036854775807"));
    }
    if body.version.is_some_and(|v| v < 1) {
        problems.push(Problem::at(None, "version", "a version number, from 1"));
    }
    let (Some(judge), Some(rubric), true) = (judge, rubric, problems.is_empty()) else {
        return Err(ApiError::invalid(
            "the ranking session was refused",
            problems,
        ));
    };
    let plan = SessionPlan {
        rounds: body.rounds,
        level,
        error,
        seed: body.seed.unwrap_or(0),
        version: body.version,
    };
    let session = state
        .service
        .runs()
        .open_rank_session(&CellKey { judge, rubric }, &plan)
        .await?;
    let location = format!("/v1/rank/sessions/{}", session.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(RankSessionDto::from(session)),
    ))
}

fn session_id(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id).map_err(|_| {
        ApiError::invalid(
            "the URL names no ranking session",
            vec![Problem::at(
                None,
                "id",
                format!("{id:?} is not a session id (a UUID)"),
            )],
        )
    })
}

/// A ranking session: its plan, the looks taken and left, the labels seen.
#[utoipa::path(
    get, path = "/v1/rank/sessions/{id}", tag = "correction",
    params(("id" = String, Path)),
    responses(
        (status = 200, body = RankSessionDto),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 422, description = "The id is not a UUID", body = ErrorBody),
    ),
    security(("api_key" = ["correct"]))
)]
pub async fn rank_session(
    State(state): State<AppState>,
    _auth: Authorized<CorrectScope>,
    Path(id): Path<String>,
) -> Result<axum::Json<RankSessionDto>, ApiError> {
    let session = state.service.runs().rank_session(session_id(&id)?).await?;
    Ok(axum::Json(session.into()))
}

/// The session's next look: `/v1/rank`'s answer at round looks + 1 of the planned rounds,
/// with the session's level, error rate, label seed and version, recorded with its labels and
/// its plan's draw; its runs become the session's. A request refused (bad input, no
/// calibration, a label outside the draws, a run another session holds) spends no look.
#[utoipa::path(
    post, path = "/v1/rank/sessions/{id}/looks", tag = "correction",
    params(("id" = String, Path)),
    request_body = LookBody,
    responses(
        (status = 200, body = RankResponse),
        (status = 404, description = "No such session, or no calibration to answer it", body = ErrorBody),
        (status = 409, description = "Every planned look is taken; the look drops or changes a label an earlier look saw, or labels an item no plan of the session drew (named by run and item); a run belongs to another session (named); or another look was recorded meanwhile", body = ErrorBody),
        (status = 422, description = "Bad id, run, name, score, reference, id, cluster or labels", body = ErrorBody),
    ),
    security(("api_key" = ["correct"]))
)]
pub async fn rank_look(
    State(state): State<AppState>,
    _auth: Authorized<CorrectScope>,
    Path(id): Path<String>,
    Json(body): Json<LookBody>,
) -> Result<axum::Json<RankResponse>, ApiError> {
    let session = state.service.runs().rank_session(session_id(&id)?).await?;
    name_span(session.key.judge.as_str(), session.key.rubric.as_str());
    let round = session
        .next_round()
        .map_err(|why| crate::error::Error::conflict(why, vec![]))?;
    let request = parse_runs(
        (session.key.judge.as_str(), session.key.rubric.as_str()),
        body.runs,
        session.plan.version,
        RawSettings {
            level: Some(session.plan.level),
            target_half_width: None,
            estimand: None,
            hold: None,
            assume_missing_at_random: body.assume_missing_at_random,
        },
        RawRankOptions {
            error: Some(session.plan.error.clone()),
            round: Some(round),
            rounds: Some(session.plan.rounds),
            session: true,
            labels: body.labels.map(|l| RawLabels {
                budget: l.budget,
                min_gap: l.min_gap,
                power: l.power,
                seed: Some(session.plan.seed),
            }),
        },
    )?;
    Ok(axum::Json(answer(&state, request, Some(&session)).await?))
}
