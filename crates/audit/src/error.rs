//! The error type of the audit crate. Every message names the bad value.

/// Errors from attack scoring, ROC metrics and privacy-bound computations.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AuditError {
    /// A score set that must hold at least one value is empty.
    #[error("{what} is empty: at least one score is needed")]
    Empty {
        /// Which input was empty (e.g. "member scores").
        what: &'static str,
    },
    /// A score, logit or other value that must be a finite number is NaN or infinite.
    #[error("{what}[{index}] must be finite, got {value}")]
    NonFinite {
        /// Which input holds the value.
        what: &'static str,
        /// Position of the value in that input.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// A probability-like value (confidence, p, δ, FPR target) is outside its valid range.
    #[error("{name} must be in {range}, got {value}")]
    OutOfRange {
        /// The parameter's name.
        name: &'static str,
        /// The valid range, written out (e.g. "(0, 1)").
        range: &'static str,
        /// The offending value.
        value: f64,
    },
    /// Any other invalid argument: the message names the parameter and its value.
    #[error("{0}")]
    Invalid(String),
    /// A numerical routine failed on inputs that passed validation (an internal bug).
    #[error("numerical failure in {0}")]
    Numeric(String),
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, AuditError>;
