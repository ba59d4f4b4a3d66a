//! The one JSON error shape, `{"error": {"code", "message", "details"}}`, and the one place
//! where service errors become HTTP statuses.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::Problem;
use crate::error::Error;
use crate::service::AuthFailure;

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `invalid_input`, `conflict`, `not_found`, `unauthorized`,
    /// `forbidden`, `malformed_json`, `unsupported_media_type`, `payload_too_large`,
    /// `method_not_allowed`, `too_many_requests`, `timeout`, `store_unavailable` (503 with
    /// Retry-After: the database cannot be reached; retry), `internal`.
    pub code: String,
    /// What to fix, for a person.
    pub message: String,
    /// One entry per problem; empty when the message says it all.
    pub details: Vec<ProblemDto>,
}

/// One problem: a row (1-based; absent for the request as a whole), a field, and what is wrong.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProblemDto {
    pub row: Option<usize>,
    pub field: String,
    pub problem: String,
}

impl From<Problem> for ProblemDto {
    fn from(p: Problem) -> Self {
        Self {
            row: p.row,
            field: p.field,
            problem: p.problem,
        }
    }
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Vec<ProblemDto>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: Vec::new(),
        }
    }

    pub fn invalid(message: impl Into<String>, details: Vec<Problem>) -> Self {
        Self {
            details: details.into_iter().map(Into::into).collect(),
            ..Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", message)
        }
    }

    /// 503: the database did not answer within `database.acquire_timeout_millis`.
    pub fn store_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "the database cannot be reached just now; retry after the Retry-After header's \
             seconds (an upload sent again is stored once)",
        )
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// The code that goes with a status this service answers when a request never reached a
    /// handler (extractor and middleware rejections).
    pub fn from_status(status: StatusCode, message: impl Into<String>) -> Self {
        let code = match status {
            StatusCode::BAD_REQUEST => "malformed_json",
            StatusCode::UNPROCESSABLE_ENTITY => "invalid_input",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
            StatusCode::NOT_FOUND => "not_found",
            _ => "internal",
        };
        Self::new(status, code, message)
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::Invalid { message, details } => ApiError::invalid(message, details),
            Error::Conflict { message, details } => Self {
                details: details.into_iter().map(Into::into).collect(),
                ..Self::new(StatusCode::CONFLICT, "conflict", message)
            },
            Error::NotFound(message) => Self::not_found(message),
            Error::Storage(ref cause) if crate::store::unreachable(cause) => {
                tracing::warn!(error = ?e, "the store is out of reach");
                Self::store_unavailable()
            }
            Error::TimedOut(message) => {
                tracing::warn!(%message, "work ran past its deadline");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "timeout", message)
            }
            Error::Storage(_) | Error::Migrate(_) | Error::Internal(_) => {
                // 5xx bodies stay generic; the cause chain goes to the log.
                tracing::error!(error = ?e, "request failed");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal error; it has been logged",
                )
            }
        }
    }
}

impl From<AuthFailure> for ApiError {
    fn from(f: AuthFailure) -> Self {
        match f {
            AuthFailure::Unauthenticated(m) => {
                Self::new(StatusCode::UNAUTHORIZED, "unauthorized", m)
            }
            AuthFailure::Forbidden(m) => Self::new(StatusCode::FORBIDDEN, "forbidden", m),
            AuthFailure::Unavailable => Self::store_unavailable(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status;
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
                details: self.details,
            },
        };
        let mut response = (status, axum::Json(body)).into_response();
        match status {
            StatusCode::UNAUTHORIZED => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            StatusCode::TOO_MANY_REQUESTS => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
            }
            _ => {}
        }
        response
    }
}
