//! Extractors whose rejections use the service's error shape: JSON bodies, query strings,
//! path segments, anchor uploads (JSON or CSV) and API-key scopes.

use std::marker::PhantomData;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;

use super::AppState;
use super::error::ApiError;
use crate::auth::{Principal, Scope};
use crate::domain::anchors::{self, RawAnchor};
use crate::domain::pairwise::comparisons::{self, RawComparison};
use crate::domain::{CellKey, JudgeName, Problem, RubricName};

/// `axum::Json`, with rejections in the service's error shape: a body that is JSON but not
/// of the request's shape (a wrong type, a missing or unknown field) is a 422 whose `details`
/// name the field by its path, and the row where the field sits in an array.
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !json_content_type(req.headers()) {
            return Err(ApiError::from_status(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "send the body as JSON with `Content-Type: application/json`",
            ));
        }
        let body = Bytes::from_request(req, state)
            .await
            .map_err(bytes_rejection)?;
        parse_json(&body).map(Json)
    }
}

fn json_content_type(headers: &HeaderMap) -> bool {
    let kind = content_type(headers).to_ascii_lowercase();
    kind == "application/json" || (kind.starts_with("application/") && kind.ends_with("+json"))
}

/// Reads a JSON body of type `T`: malformed JSON is a 400, JSON of the wrong shape a 422
/// naming the field (see [`problem_at`]).
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let malformed = |e: serde_json::Error| {
        ApiError::from_status(
            StatusCode::BAD_REQUEST,
            format!("the body is not valid JSON: {e}"),
        )
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        match inner.classify() {
            serde_json::error::Category::Data => ApiError::invalid(
                "the request body was refused",
                vec![problem_at(&path, &inner.to_string())],
            ),
            _ => malformed(inner),
        }
    })?;
    de.end().map_err(malformed)?;
    Ok(value)
}

/// The problem of a body whose value at `path` (serde's `a.items[2].score`) failed with
/// `message`: the row is the last array index there (1-based), the field the path without
/// its indices, extended by the field a "missing field" or "unknown field" message names.
fn problem_at(path: &str, message: &str) -> Problem {
    let mut row = None;
    let mut parts: Vec<String> = Vec::new();
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let name = segment.split('[').next().unwrap_or("");
        if !name.is_empty() {
            parts.push(name.to_owned());
        }
        for index in segment.split('[').skip(1) {
            row = index
                .trim_end_matches(']')
                .parse::<usize>()
                .ok()
                .map(|i| i + 1);
        }
    }
    if let Some(field) = named_field(message)
        && parts.last().map(String::as_str) != Some(field)
    {
        parts.push(field.to_owned());
    }
    // serde_json ends its messages with the position; the field and row say it better.
    let problem = message
        .rsplit_once(" at line ")
        .map_or(message, |(text, _)| text);
    let field = if parts.is_empty() {
        "body".to_owned()
    } else {
        parts.join(".")
    };
    Problem::at(row, &field, problem)
}

/// The field serde's "missing field `x`" or "unknown field `x`" names, wherever in the message.
fn named_field(message: &str) -> Option<&str> {
    ["missing field `", "unknown field `"]
        .iter()
        .find_map(|p| message.split_once(p))
        .and_then(|(_, rest)| rest.split('`').next())
}

fn bytes_rejection(r: BytesRejection) -> ApiError {
    ApiError::from_status(r.status(), r.body_text())
}

/// The scores a body carries: `scores` (numbers) or `items` (objects), never both. The
/// bodies of /v1/correct, /v1/estimate and both runs of /v1/compare hold the two fields and
/// read them through this, so that a wrong body is refused with the field named (an untagged
/// enum could only say that nothing matched); the OpenAPI document shows the two shapes
/// (`openapi::RunShapes`).
pub enum ScoresOrItems<I> {
    Scores(Vec<f64>),
    Items(Vec<I>),
}

impl<I> ScoresOrItems<I> {
    /// The one shape given; `prefix` names the run (`a.`), `item` the items' fields.
    pub fn of(
        scores: Option<Vec<f64>>,
        items: Option<Vec<I>>,
        prefix: &str,
        item: &str,
    ) -> Result<Self, Problem> {
        match (scores, items) {
            (Some(scores), None) => Ok(Self::Scores(scores)),
            (None, Some(items)) => Ok(Self::Items(items)),
            _ => Err(Problem::at(
                None,
                &format!("{prefix}scores"),
                format!("give exactly one of `scores` (numbers) and `items` ({item} objects)"),
            )),
        }
    }
}

/// `axum::extract::Query`, with rejections as 422 naming the parameter.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|r: QueryRejection| {
                let text = r.body_text();
                let field = named_field(&text).unwrap_or("query");
                ApiError::invalid(
                    "the query string was refused",
                    vec![Problem::at(None, field, text.clone())],
                )
            })
    }
}

/// `axum::extract::Path`, with rejections in the service's error shape.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|r: PathRejection| {
                ApiError::invalid(
                    "the URL path was refused",
                    vec![Problem::at(None, "path", r.body_text())],
                )
            })
    }
}

/// Parses the `{judge}/{rubric}` of a URL, recording both on the request's span.
pub fn cell_key(judge: &str, rubric: &str) -> Result<CellKey, ApiError> {
    let span = tracing::Span::current();
    span.record("judge", judge);
    span.record("rubric", rubric);
    let mut problems = Vec::new();
    let judge = JudgeName::parse(judge).map_err(|e| problems.push(Problem::at(None, "judge", e)));
    let rubric =
        RubricName::parse(rubric).map_err(|e| problems.push(Problem::at(None, "rubric", e)));
    match (judge, rubric) {
        (Ok(judge), Ok(rubric)) => Ok(CellKey { judge, rubric }),
        _ => Err(ApiError::invalid("the URL names no valid cell", problems)),
    }
}

/// An anchor upload: `application/json` (one cell) or `text/csv` (any number of cells).
pub struct AnchorUpload(pub Vec<RawAnchor>);

fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim)
        .unwrap_or("")
}

/// What an upload may bring: `server.max_upload_bytes` of body, `limits.max_batch_anchors`
/// rows.
#[derive(Debug, Clone, Copy)]
pub struct UploadLimits {
    pub max_bytes: usize,
    pub max_rows: usize,
}

fn too_large(max: usize) -> ApiError {
    ApiError::from_status(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the upload is over server.max_upload_bytes ({max} bytes); split it into batches of at most \
             limits.max_batch_anchors rows"
        ),
    )
}

/// The most of an over-long upload read and thrown away so that its client, still sending,
/// reads the 413 instead of a broken pipe; past it the connection is dropped.
const DRAIN_BYTES: u64 = 1 << 30;

/// An upload's body, within the deadline for receiving it (`http::deadline`) and at most
/// `max` bytes kept: past the bound (or where `Content-Length` says it will be) the rest is read
/// and thrown away, and the answer is 413, so memory never holds more than `max`.
async fn upload_body(req: Request, max: usize) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > DRAIN_BYTES) {
        return Err(too_large(max));
    }
    let within = req.extensions().get::<super::BodyDeadline>().copied();
    let mut body = req.into_body();
    let read = async move {
        let mut over = declared.is_some_and(|n| n > max as u64);
        let capacity = if over {
            0
        } else {
            declared.unwrap_or(0) as usize
        };
        let mut kept = Vec::with_capacity(capacity);
        let mut seen = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                ApiError::from_status(
                    StatusCode::BAD_REQUEST,
                    format!("the body could not be read: {e}"),
                )
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            seen += data.len() as u64;
            if !over && kept.len() + data.len() > max {
                over = true;
                kept = Vec::new();
            }
            if !over {
                kept.extend_from_slice(&data);
            } else if seen > DRAIN_BYTES {
                break;
            }
        }
        if over {
            Err(too_large(max))
        } else {
            Ok(Bytes::from(kept))
        }
    };
    match within {
        Some(super::BodyDeadline(limit)) => tokio::time::timeout(limit, read)
            .await
            .map_err(|_| super::timed_out())?,
        None => read.await,
    }
}

/// An upload's rows as read, or every problem of its body.
type Rows<T> = Result<Vec<T>, Vec<Problem>>;

/// How an upload's rows are read: the JSON envelope's array of rows (`field`) and the readers of
/// each format; `what` names the batch in its errors ("anchor", "comparison").
struct UploadFormat<T> {
    what: &'static str,
    field: &'static str,
    from_json: fn(&serde_json::Value) -> Rows<T>,
    from_csv: fn(&[u8]) -> Rows<T>,
}

/// Reads an upload's body as JSON or CSV with the batch's own readers. A batch of more rows than
/// `limits.max_rows` is refused on its count, taken before any row is made (JSON walked without
/// keeping a value, CSV records counted without being kept), so memory follows the rows
/// accepted, not the body.
async fn read_upload<T>(
    req: Request,
    limits: UploadLimits,
    format: &UploadFormat<T>,
) -> Result<Vec<T>, ApiError> {
    let kind = content_type(req.headers()).to_ascii_lowercase();
    let what = format.what;
    let refused = |p| {
        ApiError::invalid(
            format!("the {what} batch was refused; nothing was stored"),
            p,
        )
    };
    let over = |n: usize| {
        crate::domain::raw::batch_size(n, limits.max_rows, format.field)
            .err()
            .map(refused)
    };
    match kind.as_str() {
        "application/json" => {
            let body = upload_body(req, limits.max_bytes).await?;
            let malformed = |e: serde_json::Error| {
                ApiError::from_status(
                    StatusCode::BAD_REQUEST,
                    format!("the body is not valid JSON: {e}"),
                )
            };
            // Counted first, keeping nothing: a batch over the limit costs only its body.
            let rows = json_rows(&body, format.field).map_err(malformed)?;
            if rows > limits.max_rows {
                return Err(over(rows).unwrap_or_else(|| too_large(limits.max_bytes)));
            }
            let value: serde_json::Value = serde_json::from_slice(&body).map_err(malformed)?;
            drop(body);
            (format.from_json)(&value).map_err(refused)
        }
        "text/csv" => {
            let body = upload_body(req, limits.max_bytes).await?;
            let rows = crate::domain::raw::count_csv_records(&body);
            if rows > limits.max_rows {
                return Err(over(rows).unwrap_or_else(|| too_large(limits.max_bytes)));
            }
            (format.from_csv)(&body).map_err(refused)
        }
        other => Err(ApiError::from_status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "{what}s are uploaded as `application/json` or `text/csv`, not {:?}",
                if other.is_empty() {
                    "(no Content-Type)"
                } else {
                    other
                }
            ),
        )),
    }
}

/// How many rows an upload's JSON envelope holds in its array `field`, counted without keeping
/// any (0 where the body is no object or `field` no array: the batch's reader names that).
fn json_rows(body: &[u8], field: &'static str) -> Result<usize, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut rows = 0;
    let mut de = serde_json::Deserializer::from_slice(body);
    counting::Envelope {
        field,
        rows: &mut rows,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(rows)
}

/// The visitors of [`json_rows`]: they walk the body and keep nothing.
mod counting {
    use std::fmt;

    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

    /// The envelope: an object whose `field` is counted by [`Rows`].
    pub struct Envelope<'a> {
        pub field: &'static str,
        pub rows: &'a mut usize,
    }

    impl<'de> DeserializeSeed<'de> for Envelope<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    /// Anything but what a visitor wants is skipped.
    macro_rules! others_are_skipped {
        () => {
            fn visit_bool<E>(self, _: bool) -> Result<(), E> {
                Ok(())
            }
            fn visit_i64<E>(self, _: i64) -> Result<(), E> {
                Ok(())
            }
            fn visit_u64<E>(self, _: u64) -> Result<(), E> {
                Ok(())
            }
            fn visit_f64<E>(self, _: f64) -> Result<(), E> {
                Ok(())
            }
            fn visit_str<E>(self, _: &str) -> Result<(), E> {
                Ok(())
            }
            fn visit_unit<E>(self) -> Result<(), E> {
                Ok(())
            }
        };
    }

    impl<'de> Visitor<'de> for Envelope<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an upload object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if key == self.field {
                    map.next_value_seed(Rows {
                        rows: &mut *self.rows,
                    })?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(())
        }
        others_are_skipped!();
    }

    /// The rows, counted.
    struct Rows<'a> {
        rows: &'a mut usize,
    }

    impl<'de> DeserializeSeed<'de> for Rows<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Rows<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of rows")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {
                *self.rows += 1;
            }
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(())
        }
        others_are_skipped!();
    }
}

impl FromRequest<AppState> for AnchorUpload {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let format = UploadFormat {
            what: "anchor",
            field: "anchors",
            from_json: anchors::rows_from_json,
            from_csv: anchors::rows_from_csv,
        };
        read_upload(req, state.uploads, &format)
            .await
            .map(AnchorUpload)
    }
}

/// A comparison upload: `application/json` (one cell) or `text/csv` (any number of cells).
pub struct ComparisonUpload(pub Vec<RawComparison>);

impl FromRequest<AppState> for ComparisonUpload {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let format = UploadFormat {
            what: "comparison",
            field: "comparisons",
            from_json: comparisons::rows_from_json,
            from_csv: comparisons::rows_from_csv,
        };
        read_upload(req, state.uploads, &format)
            .await
            .map(ComparisonUpload)
    }
}

/// What a route needs of the caller's key; `None` is any valid key.
pub trait Needs {
    const SCOPE: Option<Scope>;
}

macro_rules! scope_marker {
    ($name:ident, $scope:expr) => {
        pub struct $name;
        impl Needs for $name {
            const SCOPE: Option<Scope> = $scope;
        }
    };
}
scope_marker!(AnyKey, None);
scope_marker!(IngestScope, Some(Scope::Ingest));
scope_marker!(AdminScope, Some(Scope::Admin));
scope_marker!(TrainScope, Some(Scope::Train));
scope_marker!(CorrectScope, Some(Scope::Correct));
scope_marker!(MetricsScope, Some(Scope::Metrics));

/// A caller whose API key holds `N`'s scope: who it is, for routes whose answer depends on
/// what else the key may read.
pub struct Authorized<N>(pub Principal, pub PhantomData<N>);

impl<N: Needs> FromRequestParts<AppState> for Authorized<N> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let principal = state
            .service
            .operations()
            .authorize(header, N::SCOPE)
            .await?;
        tracing::Span::current().record("key", principal.label());
        Ok(Authorized(principal, PhantomData))
    }
}
