//! `dpml train --checkpoint DIR --checkpoint-every N`, `--resume DIR` and
//! `--stop-after-steps N`: saving a run's state as it goes and continuing it later (see
//! `dpml_core::train::checkpoint` for what is saved and why no noise draw repeats).

use std::path::PathBuf;

use clap::Args;
use dpml_core::train::CheckpointOptions;

use crate::args;

/// Checkpoint flags of `dpml train`.
#[derive(Args, Debug, Clone, Default)]
pub struct CheckpointArgs {
    /// Save the run's state (model, optimizer, EMA, steps, logs) into DIR as it trains, so
    /// that `--resume DIR` can continue it. The directory holds parameters trained on private
    /// data: keep it as you would the data.
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Save every N steps (default: every epoch).
    #[arg(long, value_name = "N", requires = "checkpoint", value_parser = args::at_least_one)]
    pub checkpoint_every: Option<u64>,
    /// Continue the run whose checkpoint is in DIR: give the same recipe, data and --seed
    /// flags (a checkpoint of another run, or another seed, is refused). Also saves there unless --checkpoint says
    /// otherwise.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Stop once N steps are done, saving a checkpoint (for runs cut into pieces by a batch
    /// scheduler's time limit); nothing else is written. Needs --checkpoint or --resume.
    #[arg(long, value_name = "N", value_parser = args::at_least_one)]
    pub stop_after_steps: Option<u64>,
}

impl CheckpointArgs {
    /// The checkpointing these flags ask for, for the library, of a run started with `seed`.
    pub fn options(&self, seed: Option<u64>) -> CheckpointOptions {
        CheckpointOptions {
            checkpoint: self.checkpoint.clone(),
            checkpoint_every: self.checkpoint_every,
            resume: self.resume.clone(),
            stop_after_steps: self.stop_after_steps,
            seed,
        }
    }
}
