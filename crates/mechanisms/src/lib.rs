//! Noise mechanisms for dpml: one secure randomness source, exact samplers, the Laplace,
//! Gaussian, randomized-response and exponential mechanisms, and DP statistics over a column.
//!
//! Each mechanism validates its parameters, states its privacy in its doc comment (`# Privacy`,
//! `# Citations`, `# Errors`), and returns the released value together with its cost as a
//! [`PrivacyEvent`].
#![deny(missing_docs)]

pub mod event;
pub mod rng;

pub use event::PrivacyEvent;
pub use rng::DpRng;

/// Errors from mechanism construction and sampling. Messages name the bad value.
#[derive(Debug, thiserror::Error)]
pub enum MechanismError {
    /// A parameter is outside its valid range (the message names it and its value).
    #[error("{0}")]
    InvalidParameter(String),
    /// The operating system could not supply entropy; we refuse to run without it.
    #[error("cannot seed the secure random generator from the operating system: {0}")]
    Entropy(String),
}
