//! Errors of label-DP runs; every message names the bad value.

use dpml_mechanisms::MechanismError;
use dpml_nn::NnError;
use thiserror::Error;

use crate::dpsgd::DpSgdError;
use crate::perturbation::PerturbationError;

/// Errors from configuring or running a label-DP experiment.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LabelDpError {
    /// A configuration value or combination makes no sense, e.g. "epsilon must be finite and
    /// > 0, got NaN" or "task regression needs mechanism laplace, got rr".
    #[error("{0}")]
    InvalidConfig(String),
    /// The training configuration or the data were refused by the trainer.
    #[error(transparent)]
    Train(#[from] DpSgdError),
    /// The model engine refused something.
    #[error(transparent)]
    Nn(#[from] NnError),
    /// A noise sampler refused its parameters.
    #[error(transparent)]
    Mechanism(#[from] MechanismError),
    /// The vector Laplace mechanism refused its parameters.
    #[error(transparent)]
    Perturbation(#[from] PerturbationError),
}

/// Shorthand for [`LabelDpError::InvalidConfig`].
pub(crate) fn config_err(msg: impl Into<String>) -> LabelDpError {
    LabelDpError::InvalidConfig(msg.into())
}
