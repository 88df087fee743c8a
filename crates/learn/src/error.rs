//! Errors returned by the private learners. Every message names the bad value.

use dpml_accounting::AccountingError;
use dpml_mechanisms::MechanismError;
use thiserror::Error;

/// Errors from the learners in this crate; messages name the bad value.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LearnError {
    /// A parameter is out of range, e.g. "k must be >= 1, got 0".
    #[error("{name} {requirement}, got {value}")]
    InvalidParameter {
        /// Parameter name as a user would type it.
        name: &'static str,
        /// What the parameter must satisfy ("must be finite and > 0").
        requirement: &'static str,
        /// The value that was given, formatted.
        value: String,
    },
    /// The feature buffer does not hold `n × d` values.
    #[error("data has {len} values, expected n x d = {n} x {d} = {expected}")]
    Shape {
        /// Length of the buffer given.
        len: usize,
        /// Number of records declared.
        n: usize,
        /// Number of features declared.
        d: usize,
        /// `n · d` (saturating).
        expected: usize,
    },
    /// The declared bounds cover a different number of dimensions than the data has.
    #[error("bounds cover {bounds} dimensions, but the data has {data}")]
    BoundsDimension {
        /// Dimensions covered by the bounds.
        bounds: usize,
        /// Dimensions of the data.
        data: usize,
    },
    /// A feature value is NaN (infinite values are clamped to the bounds like any other).
    #[error("record {record}, feature {feature} is {value}: features must be numbers")]
    NonFinite {
        /// Record index.
        record: usize,
        /// Feature index.
        feature: usize,
        /// The value found.
        value: f64,
    },
    /// Labels given to a metric do not fit its other arguments.
    #[error("{0}")]
    Labels(String),
    /// A noise sampler refused its parameters (e.g. a scale too large for exact sampling).
    #[error(transparent)]
    Mechanism(#[from] MechanismError),
    /// The accountant refused a calibration.
    #[error(transparent)]
    Accounting(#[from] AccountingError),
}

impl LearnError {
    /// Shorthand for [`LearnError::InvalidParameter`].
    pub(crate) fn invalid(
        name: &'static str,
        requirement: &'static str,
        value: impl ToString,
    ) -> Self {
        LearnError::InvalidParameter {
            name,
            requirement,
            value: value.to_string(),
        }
    }
}
