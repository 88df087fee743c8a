//! The privacy model and the release/diagnostics split live in the library
//! ([`dpml_core::privacy_model`]); the command line only prints what they build.

pub use dpml_core::privacy_model::*;
