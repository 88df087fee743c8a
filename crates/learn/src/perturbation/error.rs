//! Errors of the perturbation learners; every message names the bad value.

use dpml_mechanisms::MechanismError;
use thiserror::Error;

/// Errors from input or output perturbation.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PerturbationError {
    /// A parameter or an input is out of range, e.g. "epsilon must be finite and > 0, got NaN".
    #[error("{0}")]
    Invalid(String),
    /// A noise sampler refused its parameters.
    #[error(transparent)]
    Mechanism(#[from] MechanismError),
}

/// Shorthand for [`PerturbationError::Invalid`].
pub(crate) fn invalid(msg: impl Into<String>) -> PerturbationError {
    PerturbationError::Invalid(msg.into())
}

/// Checks that ε is finite and > 0, naming `name` and the value.
pub(crate) fn check_epsilon(name: &str, epsilon: f64) -> Result<(), PerturbationError> {
    if epsilon.is_finite() && epsilon > 0.0 {
        Ok(())
    } else {
        Err(invalid(format!(
            "{name} must be finite and > 0, got {epsilon}"
        )))
    }
}
