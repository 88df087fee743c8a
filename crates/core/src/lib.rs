//! dpml's library facade: one crate that re-exports the layers (accounting, mechanisms, data,
//! nn, learn, audit) and holds the workflows built from them: training a model from a data
//! source with a recipe, cross-validation, and the JSON release each private computation
//! produces (its guarantee, with the diagnostics kept apart).
//!
//! The fronts (the `dpml` command line, the Python bindings) are thin: they parse their own
//! arguments into the plain option structs here, call one workflow, and print or convert what
//! it returns. Nothing here prints or reads a terminal; long work reports progress through an
//! [`observe::Observer`] the caller may pass ([`observe::Silent`] for none).

#![deny(missing_docs)]

pub use dpml_accounting as accounting;
pub use dpml_audit as audit;
pub use dpml_data as data;
pub use dpml_learn as learn;
pub use dpml_mechanisms as mechanisms;
pub use dpml_nn as nn;

pub mod account;
pub mod arch;
pub mod audit_workflow;
pub mod budget;
pub mod error;
pub mod kmeans;
pub mod label_dp;
pub mod ledger_json;
pub mod model_file;
pub mod numbers;
pub mod observe;
pub mod output_path;
pub mod predict;
pub mod privacy_model;
pub mod query;
pub mod release;
pub mod rr;
pub mod schedule;
pub mod schema;
pub mod sweep;
pub mod tradeoff;
pub mod train;
pub mod tune;

pub use error::{Error, Result};
