//! Privacy auditing for dpml: turns membership-inference attack scores into ROC metrics and
//! empirical lower bounds on ε, to set beside the accountant's upper bound.
//!
//! Everything here works on SCORES (higher = more likely a member); the drivers that train
//! target and reference models only need to produce them.
//!
//! - [`loss_attack`]: single-model scores (loss, confidence, entropy, modified entropy).
//! - [`logits`]: stable log-softmax, cross-entropy and LiRA's logit-scaled confidence.
//! - [`lira`]: the likelihood-ratio attack, online and offline.
//! - [`rmia`]: the robust membership-inference attack (Zarifzadeh et al. 2024), strong with
//!   few reference models.
//! - [`roc`]: exact ROC curves with ties, AUC, TPR at low FPR, attacker advantage.
//! - [`bounds`]: Clopper–Pearson intervals and the empirical ε lower bound of a threshold
//!   chosen on one split and measured on another.
//! - [`one_run`]: the one-run canary audit of Steinke, Nasr and Jagielski (2023).
//! - [`attribute`]: attribute inference from the model's loss (Yeom et al. 2018) on a named
//!   sensitive column of a tabular data set, with its ε lower bound.
//! - [`white_box`]: the white-box gradient-canary audit of DP-SGD (Dirac canaries, one-run
//!   bounds, GDP bound and estimate).
//! - [`worst_case_init`]: the black-box audit of the final model from worst-case initial
//!   parameters (Annamalai & De Cristofaro 2024), runs spread over threads.
//! - [`mia_sweep`]: local against central DP under attack: DP-SGD and local-DP input
//!   perturbation audited with the loss attack and LiRA over an ε grid.
//! - [`driver`]: trains the target, reference and canary models with dpml's DP-SGD trainer
//!   (cached on disk) and runs the attacks end to end ([`driver::run_audit`]).
//!
//! Randomness (splits, canary draws) comes from [`dpml_mechanisms::DpRng`].
//!
//! ```
//! use dpml_audit::bounds::{EpsilonBoundParams, split_epsilon_lower_bound};
//! use dpml_audit::{loss_attack, roc::RocCurve};
//! use dpml_mechanisms::DpRng;
//!
//! # fn main() -> dpml_audit::Result<()> {
//! // Losses of the target model on training members and on held-out non-members.
//! let members = loss_attack::loss_scores(&[0.01, 0.02, 0.5, 0.03, 0.04, 0.02])?;
//! let non_members = loss_attack::loss_scores(&[0.9, 0.3, 1.2, 0.05, 2.0, 0.7])?;
//! let roc = RocCurve::from_scores(&members, &non_members)?;
//! println!("AUC {:.3}, TPR@1% {:.3}", roc.auc(), roc.tpr_at_fpr(0.01)?.tpr);
//!
//! let params = EpsilonBoundParams::new(1e-5, 0.95)?;
//! let mut rng = DpRng::seeded(0);
//! let bound = split_epsilon_lower_bound(&members, &non_members, params, &mut rng)?;
//! assert!(bound.epsilon >= 0.0);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod attribute;
pub mod bounds;
pub mod driver;
pub mod error;
pub mod lira;
pub mod logits;
pub mod loss_attack;
pub mod mia_sweep;
pub mod one_run;
pub mod rmia;
pub mod roc;
mod sampling;
mod validate;
pub mod white_box;
pub mod worst_case_init;

pub use error::{AuditError, Result};
