//! The DP-SGD trainer's error type: every message names the bad value.

use dpml_accounting::AccountingError;
use dpml_mechanisms::MechanismError;
use dpml_nn::NnError;
use thiserror::Error;

/// Errors from configuring, running, evaluating, saving or loading DP-SGD training.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DpSgdError {
    /// A configuration value is out of range, e.g. "batch_size must be >= 1, got 0".
    #[error("{0}")]
    InvalidConfig(String),
    /// The data do not fit the configuration or the model (shape, labels, size, values).
    #[error("{0}")]
    Data(String),
    /// The model engine refused something (unknown model, BatchNorm, shapes, model file).
    #[error(transparent)]
    Nn(#[from] NnError),
    /// The accountant refused a calibration or an ε computation.
    #[error(transparent)]
    Accounting(#[from] AccountingError),
    /// A noise sampler refused its parameters or the OS gave no entropy.
    #[error(transparent)]
    Mechanism(#[from] MechanismError),
    /// A checkpoint was made by a run with another configuration or data set, or is not a
    /// checkpoint at all: resuming from it would not continue that run.
    #[error("{0}")]
    CheckpointMismatch(String),
    /// A path the caller named does not fit (a checkpoint folder under a missing folder, a
    /// file where the folder belongs): the caller's to fix.
    #[error("{0}")]
    Path(String),
    /// The environment failed the run: a checkpoint could not be written or read, or the
    /// processes of a data-parallel run ended up with different models.
    #[error("{0}")]
    Runtime(String),
}

/// A failed file operation as the caller's path mistake ([`DpSgdError::Path`]) or the
/// environment's failure ([`DpSgdError::Runtime`]), by the I/O error's kind.
pub(crate) fn io_failure(message: String, e: &std::io::Error) -> DpSgdError {
    if dpml_accounting::ledger::is_path_mistake(e) {
        DpSgdError::Path(message)
    } else {
        DpSgdError::Runtime(message)
    }
}

impl DpSgdError {
    /// Whether the failure is the environment's (retrying may help) rather than the input's.
    pub fn is_runtime(&self) -> bool {
        matches!(self, DpSgdError::Runtime(_))
    }
}

/// Shorthand for results of this module.
pub type Result<T> = std::result::Result<T, DpSgdError>;

/// A [`DpSgdError::InvalidConfig`] with a formatted message.
pub(crate) fn config_err(msg: impl Into<String>) -> DpSgdError {
    DpSgdError::InvalidConfig(msg.into())
}

/// A [`DpSgdError::Data`] with a formatted message.
pub(crate) fn data_err(msg: impl Into<String>) -> DpSgdError {
    DpSgdError::Data(msg.into())
}
