//! Label differential privacy: only the labels are private, the features are public. Each
//! training label is privatised ONCE (Laplace on the one-hot label or on the label value,
//! k-ary randomized response, or RR-with-prior), then a model is trained WITHOUT further noise
//! on the noisy labels (post-processing). Every record's label is used once, so the run is
//! ε-label-DP per record (parallel composition over records; the guarantee does not cover the
//! features).
//!
//! - [`config`]: what to run ([`LabelDpConfig`]: task, mechanism, post-processing, ε, training).
//! - [`targets`]: the label mechanisms and post-processing rules, and the training targets
//!   they produce.
//! - [`rr_prior`]: RR-with-prior (Ghazi et al. 2021): the top-k rule and the randomizer.
//! - [`fit`]: training on soft, multi-hot or real-valued targets with `dpml-nn` directly (the
//!   DP-SGD trainer takes class labels only).
//! - [`run()`](run::run): the whole experiment, returning a [`LabelDpReport`].

pub mod config;
pub mod error;
pub mod fit;
pub mod rr_prior;
pub mod run;
pub mod targets;

pub use config::{LabelDpConfig, LabelMechanism, PostProcess, Task, default_training};
pub use error::LabelDpError;
pub use rr_prior::{Encoding, Plan, RrWithPrior, TopKRule, best_k};
pub use run::{LabelDpOutcome, LabelDpProgress, LabelDpReport, objective, run, train};
pub use targets::Targets;
