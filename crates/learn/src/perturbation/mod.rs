//! Perturbation learners: noise added to a model's OUTPUTS (central DP on each released
//! prediction, [`output`]) or to each training record's INPUTS before training (local DP,
//! [`input`]), plus the vector Laplace mechanism they and label DP share ([`vector_laplace`]).

pub mod error;
pub mod input;
pub mod output;
pub mod vector_laplace;

pub use error::PerturbationError;
pub use input::{
    FeatureValue, InputBudget, InputMechanism, PerFeature, PerturbationReport, perturb_dataset,
    perturb_dataset_in, perturb_dataset_with, perturb_records,
};
pub use output::{OutputPerturbation, softmax_rows};
pub use vector_laplace::VectorLaplace;
