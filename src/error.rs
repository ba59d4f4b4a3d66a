//! The one error type of the service layer. It knows nothing of HTTP: `http::error` maps each
//! variant to a status in one exhaustive `match`.

use crate::domain::Problem;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input breaks a rule; `details` names every row and field at fault.
    #[error("{message}")]
    Invalid {
        message: String,
        details: Vec<Problem>,
    },
    /// The input contradicts what is stored (an anchor stored with other scores).
    #[error("{message}")]
    Conflict {
        message: String,
        details: Vec<Problem>,
    },
    #[error("{0}")]
    NotFound(String),
    #[error("storage failed")]
    Storage(#[from] sqlx::Error),
    #[error("migrations failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Work that ran past its deadline (a drawing); retrying later may succeed.
    #[error("{0}")]
    TimedOut(String),
    #[error("{0}")]
    Internal(String),
}

/// One conversion for the statistics' failures: too little data is the caller's to fix (409,
/// saying what is missing); a numerical failure or a cancelled computation is the service's.
impl From<judgecal_stats::error::CalibrateError> for Error {
    fn from(e: judgecal_stats::error::CalibrateError) -> Self {
        use judgecal_stats::error::CalibrateError;
        match e {
            CalibrateError::TooFew(why) => Error::conflict(
                format!("this version cannot give the answer: {why}"),
                vec![],
            ),
            CalibrateError::Cancelled => Error::Internal("the computation was cancelled".into()),
            CalibrateError::Numerical(why) => Error::Internal(why),
        }
    }
}

/// Runs `f` on a blocking thread: the one place a panic there becomes an error (`what` names
/// the work in it).
pub async fn blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| Error::Internal(format!("{what} panicked; see the service log")))
}

/// At most this many problems travel in one error body; the message says how many there were.
pub const MAX_DETAILS: usize = 1000;

impl Error {
    /// Refused input that was to be stored: the message says nothing was.
    pub fn invalid(what: &str, details: Vec<Problem>) -> Self {
        Self::problems(what, details, "; nothing was stored")
    }

    /// Refused input that stores nothing anyway (a query, a correction, a job request).
    pub fn rejected(what: &str, details: Vec<Problem>) -> Self {
        Self::problems(what, details, "")
    }

    fn problems(what: &str, mut details: Vec<Problem>, suffix: &str) -> Self {
        let total = details.len();
        details.truncate(MAX_DETAILS);
        let message = if total > MAX_DETAILS {
            format!("{what}: {total} problems, the first {MAX_DETAILS} listed{suffix}")
        } else {
            format!(
                "{what}: {total} problem{}{suffix}",
                if total == 1 { "" } else { "s" }
            )
        };
        Self::Invalid { message, details }
    }

    pub fn conflict(message: String, mut details: Vec<Problem>) -> Self {
        details.truncate(MAX_DETAILS);
        Self::Conflict { message, details }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
