//! `dpml train --checkpoint DIR --checkpoint-every N`, `--resume DIR` and
//! `--stop-after-steps N`: saving a run's state as it goes and continuing it later (see
//! `dpml_learn::dpsgd::checkpoint` for what is saved and why no noise draw repeats).

use std::path::PathBuf;

use clap::Args;
use dpml_data::SplitKey;
use dpml_learn::dpsgd::{Checkpoint, CheckpointPlan};
use serde_json::json;

use crate::args;
use crate::error::{CliError, CliResult};

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
    /// Continue the run whose checkpoint is in DIR: give the same recipe and data flags (a
    /// checkpoint of another run is refused). Also saves there unless --checkpoint says
    /// otherwise.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Stop once N steps are done, saving a checkpoint (for runs cut into pieces by a batch
    /// scheduler's time limit); nothing else is written. Needs --checkpoint or --resume.
    #[arg(long, value_name = "N", value_parser = args::at_least_one)]
    pub stop_after_steps: Option<u64>,
}

impl CheckpointArgs {
    /// The checkpoint to resume from, if any.
    ///
    /// # Errors
    /// As [`Checkpoint::load`].
    pub fn resumed(&self) -> CliResult<Option<Checkpoint>> {
        self.resume
            .as_deref()
            .map(Checkpoint::load)
            .transpose()
            .map_err(CliError::from)
    }

    /// Where to save, and how often (0: every epoch).
    ///
    /// # Errors
    /// A usage error for --stop-after-steps without a place to save.
    pub fn plan(&self) -> CliResult<Option<CheckpointPlan>> {
        let dir = self.checkpoint.clone().or_else(|| self.resume.clone());
        if dir.is_none() && self.stop_after_steps.is_some() {
            return Err(CliError::usage(
                "--stop-after-steps needs --checkpoint DIR (or --resume DIR) to save the run in",
            ));
        }
        Ok(dir.map(|dir| CheckpointPlan {
            dir,
            every: self.checkpoint_every.unwrap_or(0),
        }))
    }
}

/// What the command line keeps in a checkpoint besides the training state: the split key
/// (the resumed run must hold out the same records).
pub fn context(split_key: Option<SplitKey>) -> serde_json::Value {
    json!({ "split_key": split_key.map(|k| k.to_string()) })
}

/// The split key a checkpoint's run used, if it kept one.
///
/// # Errors
/// A usage error when the checkpoint's key does not parse.
pub fn split_key(ck: &Checkpoint) -> CliResult<Option<SplitKey>> {
    match ck.context.get("split_key").and_then(|v| v.as_str()) {
        Some(hex) => hex.parse().map(Some).map_err(|e: dpml_data::DataError| {
            CliError::usage(format!("checkpoint split_key {hex:?}: {e}"))
        }),
        None => Ok(None),
    }
}
