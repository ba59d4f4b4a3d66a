//! What can go wrong in the statistics, by kind: the service answers each differently (a run
//! with too few anchors is the caller's to fix, a numerical failure is not).

/// A failure of a fit or an answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrateError {
    /// The data cannot support the answer: too few anchors, labelled items or clusters.
    #[error("{0}")]
    TooFew(String),
    /// The work was asked to stop.
    #[error("cancelled")]
    Cancelled,
    /// The computation itself failed.
    #[error("{0}")]
    Numerical(String),
}

/// Fits and predictions report failures as text; those are numerical unless classified.
impl From<String> for CalibrateError {
    fn from(message: String) -> Self {
        CalibrateError::Numerical(message)
    }
}

pub type Result<T> = std::result::Result<T, CalibrateError>;

/// For the command-line studies, which report failures as text.
impl From<CalibrateError> for String {
    fn from(e: CalibrateError) -> Self {
        e.to_string()
    }
}
