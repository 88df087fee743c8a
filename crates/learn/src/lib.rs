//! Private learners for dpml: each learner returns, next to the model it fitted, its privacy
//! cost as a value (a [`dpml_mechanisms::PrivacyEvent`] the accountants compose).
//!
//! - [`kmeans`]: plain and differentially private k-means (DPLloyd with Laplace or Gaussian
//!   noise, input perturbation), with clustering metrics.
//! - [`label_dp`]: label differential privacy (Laplace, randomized response, RR-with-prior).
//! - [`perturbation`]: output perturbation of predictions and local-DP input perturbation.
//! - [`model_facts`]: the privacy facts a saved model carries in its metadata.
#![deny(missing_docs)]

pub mod crossval;
pub mod dpsgd;
pub mod error;
pub mod f32_json;
pub mod kmeans;
pub mod label_dp;
pub mod model_facts;
pub mod perturbation;
#[cfg(any(test, feature = "test-data"))]
#[doc(hidden)]
pub mod test_data;

pub use error::LearnError;
