//! The error type of the audit driver: bad audit settings, training failures, cache I/O.

use dpml_learn::dpsgd::DpSgdError;

use crate::error::AuditError;

/// Errors from setting up, training for, or scoring an audit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// An audit setting is invalid; the message names the value (e.g. "canaries must be at
    /// most the target size (100), got 500").
    #[error("{0}")]
    Invalid(String),
    /// The trainer refused the recipe or the data, or failed while training.
    #[error(transparent)]
    Train(#[from] DpSgdError),
    /// Scoring or bounding failed (the scoring core's error).
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The accountant failed on the target's privacy event.
    #[error(transparent)]
    Accounting(#[from] dpml_accounting::AccountingError),
    /// Reading or writing the model cache failed.
    #[error("model cache {path}: {message}")]
    Cache {
        /// The file or folder involved.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A model of one point of a sweep produced non-finite outputs (training diverged): a
    /// runtime failure naming the point, not a bad setting of the point itself.
    #[error("{point}: {message}")]
    Diverged {
        /// The point, e.g. "local-dp at epsilon = 1".
        point: String,
        /// What was not finite, and what to try instead.
        message: String,
    },
    /// A worker pool could not be built.
    #[error("cannot start {threads} training threads: {message}")]
    Threads {
        /// Threads asked for.
        threads: usize,
        /// The reason.
        message: String,
    },
}

impl DriverError {
    /// Whether the error comes from the user's settings, data or paths (exit code 2 in the
    /// CLI) rather than an internal failure.
    pub fn is_user_error(&self) -> bool {
        match self {
            DriverError::Invalid(_) | DriverError::Train(_) | DriverError::Cache { .. } => true,
            DriverError::Audit(e) => !matches!(e, AuditError::Numeric(_)),
            DriverError::Accounting(_) => true,
            DriverError::Threads { .. } | DriverError::Diverged { .. } => false,
        }
    }
}

/// Result alias for the driver.
pub type Result<T> = std::result::Result<T, DriverError>;
