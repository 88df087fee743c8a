//! The crate's error type: every message names the bad value.

use thiserror::Error;

/// Errors from model construction, shape checks, training utilities and save/load.
#[derive(Debug, Error)]
pub enum NnError {
    /// A hyper-parameter or argument is outside its valid range.
    #[error("{0}")]
    InvalidParameter(String),
    /// A tensor or record shape does not match what a layer or model expects.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// An unknown architecture or layer name.
    #[error("unknown model {name:?}; known models: {known}")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The names that exist, comma-separated.
        known: String,
    },
    /// A layer that cannot be trained privately (e.g. BatchNorm) was requested.
    #[error("{0}")]
    NotDpCompatible(String),
    /// Reading or writing a saved model failed.
    #[error("model file: {0}")]
    Io(String),
}

/// Shorthand for results in this crate.
pub type Result<T> = std::result::Result<T, NnError>;

/// An [`NnError::InvalidParameter`] with a formatted message.
pub(crate) fn invalid(msg: impl Into<String>) -> NnError {
    NnError::InvalidParameter(msg.into())
}
