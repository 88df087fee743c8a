//! Noise mechanisms for dpml: one secure randomness source, exact samplers, the Laplace,
//! Gaussian, randomized-response and exponential mechanisms, and DP statistics over a column.
//!
//! Each mechanism validates its parameters, states its privacy in its doc comment (`# Privacy`,
//! `# Citations`, `# Errors`), and returns the released value together with its cost as a
//! [`PrivacyEvent`].
//!
//! Released noise never comes from floating-point sampling (Mironov 2012): real-valued releases
//! are computed on an integer grid with exact discrete Laplace / discrete Gaussian noise
//! ([`exact`]), and every parameter conversion rounds toward more privacy ([`rational`]).
#![deny(missing_docs)]

mod alias_gaussian;
pub mod bulk;
pub mod calibration;
mod chacha;
pub mod coins;
pub mod discrete;
pub mod event;
pub mod exact;
mod exp_compare;
pub mod exponential;
pub mod gaussian;
mod grid;
pub mod laplace;
pub mod normal;
pub mod rational;
pub mod repetitions;
pub mod rng;
pub mod rr;
pub mod stats;
#[cfg(test)]
mod testing;
mod validate;
pub mod vector;

pub use alias_gaussian::AliasDiscreteGaussian;
pub use calibration::{
    analytic_gaussian_delta, analytic_gaussian_sigma, classic_gaussian_sigma,
    discrete_gaussian_delta,
};
pub use chacha::ChaChaStream;
pub use coins::Coins;
pub use discrete::{DiscreteGaussianMechanism, DiscreteLaplaceMechanism};
pub use event::PrivacyEvent;
pub use exponential::PermuteAndFlip;
pub use gaussian::{Calibration, GaussianMechanism};
pub use laplace::LaplaceMechanism;
pub use rational::Rational;
pub use repetitions::{Repetitions, TrialRelease};
pub use rng::{DpRng, StreamKey};
pub use rr::{FrequencyEstimate, RandomizedResponse};
pub use stats::{Noise, StatRelease, StatValue};

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
