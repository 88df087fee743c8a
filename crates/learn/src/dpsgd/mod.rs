//! DP-SGD: train neural networks with differential privacy (Abadi et al. 2016) on the
//! per-sample-gradient engine of `dpml-nn`.
//!
//! Each step draws a Poisson batch ([`sampler`]), clips every per-sample gradient to norm C
//! and sums them in one backward pass (virtual batches of at most `physical_batch` records),
//! adds Gaussian noise σ·C ([`noise`]; exact discrete Gaussian on request), divides by the
//! expected batch size q·N and takes an optimizer step. The run's privacy cost is
//! returned as the event `dp_sgd(σ, q, T)`, with ε from the PLD accountant by default
//! ([`accounting`]); a target ε is met by calibrating σ before training.
//!
//! ```
//! use dpml_data::{load, LoadOptions, Source};
//! use dpml_learn::dpsgd::{train, Privacy, TrainConfig, Normalization};
//! use dpml_mechanisms::DpRng;
//!
//! let iris = load(&"iris".parse::<Source>()?, &LoadOptions::default())?.train;
//! let cfg = TrainConfig {
//!     model: "logreg".into(),
//!     epochs: 2.0,
//!     batch_size: 30,
//!     privacy: Privacy::TargetEpsilon(2.0),
//!     ..TrainConfig::default()
//! };
//! let out = train(&cfg, &iris, None, &mut DpRng::seeded(1), &mut |_| {})?;
//! assert!(out.report.epsilon.unwrap() <= 2.0);
//! assert_eq!(out.report.steps, 10);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod accounting;
mod batch;
pub mod bench;
pub mod checkpoint;
pub mod collective;
pub mod config;
pub(crate) mod ema;
pub mod error;
pub mod eval;
pub mod io;
pub mod noise;
mod noise_normal;
pub mod normalize;
pub mod objective;
pub mod presets;
pub mod sampler;
mod step;
pub mod step_hook;
pub mod train;

pub use accounting::{PrivacyPlan, accountant};
pub use bench::{BenchEvent, BenchResult, BenchRound, ModeGflops, bench, bench_spec};
pub use checkpoint::{Checkpoint, CheckpointPlan};
pub use collective::{Collective, Solo, model_checksum};
pub use config::{
    AccountantKind, MAX_HIDDEN_WIDTH, OptimizerKind, Privacy, ScheduleKind, TrainConfig,
};
/// The architecture names training accepts (`TrainConfig::model`), for help texts and checks.
pub use dpml_nn::{MODEL_NAMES, ModelSpec, check_model_name};
pub use error::DpSgdError;
pub use eval::{Eval, check_saved_model_fits, evaluate, evaluate_saved, predict_logits};
pub use io::{SavedModel, load, load_saved, save, save_with_facts};
pub use normalize::{FASHION_MNIST_MEAN_STD, InputTransform, MNIST_MEAN_STD, Normalization};
pub use objective::{Objective, Task};
pub use presets::{Preset, preset, presets, tabular_recipe};
pub use sampler::{PoissonSampler, SamplingKey, Shard};
pub use step_hook::{StepContext, StepHook};
pub use train::{
    EpochLog, Progress, Run, RunEnd, TrainOutcome, TrainReport, train, train_hooked, train_run,
    train_task,
};

#[cfg(test)]
mod tests;
