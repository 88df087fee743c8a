//! The audit driver: trains the models an audit needs with dpml's own DP-SGD trainer and turns
//! them into attack scores, metrics and ε lower bounds beside the accountant's ε.
//!
//! - [`config`]: the attacks and settings, checked before anything trains.
//! - [`population`]: the 2N audit records (N members, N held-out non-members).
//! - [`models`] and [`cache`]: training side by side, cached on disk by a hash of the recipe,
//!   the training records and the seed.
//! - [`scores`] and [`metrics`]: per-record scores from logits; ROC, AUC, TPR at low FPR,
//!   advantage and the Clopper–Pearson ε lower bound of each attack.
//! - [`canary`]: the one-run audit's mislabelled canaries.
//! - [`attribute`]: attribute inference on the target, scored on substituted audit records.
//! - [`augment`]: LiRA's augmented queries (1-pixel shifts of images).
//! - [`theory`]: the accountant's ε and the f-DP bound on any ROC curve.
//! - [`external`]: the same report from the scores of a model dpml did not train.
//! - [`run`]: [`run_audit`], which does all of it and returns an [`AuditReport`].
//!   [`run_audit_with`] audits a mechanism that acts on the training records instead of in
//!   the trainer (local DP: [`TrainingInputs`]).
//!
//! # Privacy
//! Every reference and canary model is trained with the target's recipe (a target ε is
//! calibrated once, for the target's N, and the same σ is used by all). The attacks measure;
//! nothing here is a private release.
//!
//! # Citations
//! S. Yeom et al., CSF 2018 (loss threshold); N. Carlini et al., "Membership Inference Attacks
//! From First Principles", IEEE S&P 2022 (LiRA); T. Steinke, M. Nasr, M. Jagielski, "Privacy
//! Auditing with One (1) Training Run", NeurIPS 2023. Yeom et al. (above), Section 4, for
//! attribute inference.
//!
//! # Errors
//! [`DriverError`]: invalid settings named with their value, trainer and cache failures.

pub mod attribute;
pub mod augment;
pub mod cache;
pub mod canary;
pub mod config;
pub mod error;
pub mod external;
pub mod metrics;
pub mod models;
pub mod population;
pub mod run;
pub mod scores;
pub mod theory;

pub use attribute::AttributeSettings;
pub use augment::{LIRA_QUERY_NAMES, LiraQueries};
pub use cache::ModelCache;
pub use config::{ATTACK_NAMES, AttackKind, AuditConfig};
pub use error::DriverError;
pub use metrics::AttackMetrics;
pub use models::{Alone, ModelReady, Scored, Spread};
pub use run::{
    AsDrawn, AttackOutcome, AuditReport, OneRunOutcome, TrainingInputs, run_audit,
    run_audit_spread, run_audit_with,
};
pub use theory::Theory;

#[cfg(test)]
mod tests;
