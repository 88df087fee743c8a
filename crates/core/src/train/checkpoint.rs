//! Saving a run's state as it goes and continuing it later (see
//! [`dpml_learn::dpsgd::checkpoint`] for what is saved and why no noise draw repeats).

use std::path::PathBuf;

use dpml_data::SplitKey;
use dpml_learn::dpsgd::{Checkpoint, CheckpointPlan};
use serde_json::json;

use crate::error::{Error, Result};

/// Where a run saves its state, and what it continues.
#[derive(Debug, Clone, Default)]
pub struct CheckpointOptions {
    /// Save the run's state into this directory as it trains.
    pub checkpoint: Option<PathBuf>,
    /// Save every so many steps (default: every epoch).
    pub checkpoint_every: Option<u64>,
    /// Continue the run whose checkpoint is in this directory (and save there unless
    /// [`CheckpointOptions::checkpoint`] says otherwise).
    pub resume: Option<PathBuf>,
    /// Stop once this many steps are done, saving a checkpoint.
    pub stop_after_steps: Option<u64>,
}

impl CheckpointOptions {
    /// Whether any checkpointing is asked for.
    pub fn any(&self) -> bool {
        self.checkpoint.is_some() || self.resume.is_some()
    }

    /// The checkpoint to resume from, if any.
    ///
    /// # Errors
    /// As [`Checkpoint::load`].
    pub fn resumed(&self) -> Result<Option<Checkpoint>> {
        self.resume
            .as_deref()
            .map(Checkpoint::load)
            .transpose()
            .map_err(Error::from)
    }

    /// Where to save, and how often (0: every epoch).
    ///
    /// # Errors
    /// A usage error for stopping early without a place to save.
    pub fn plan(&self) -> Result<Option<CheckpointPlan>> {
        let dir = self.checkpoint.clone().or_else(|| self.resume.clone());
        if dir.is_none() && self.stop_after_steps.is_some() {
            return Err(Error::usage(
                "--stop-after-steps needs --checkpoint DIR (or --resume DIR) to save the run in",
            ));
        }
        Ok(dir.map(|dir| CheckpointPlan {
            dir,
            every: self.checkpoint_every.unwrap_or(0),
        }))
    }
}

/// What a workflow keeps in a checkpoint besides the training state: the split key (the
/// resumed run must hold out the same records).
pub fn context(split_key: Option<SplitKey>) -> serde_json::Value {
    json!({ "split_key": split_key.map(|k| k.to_string()) })
}

/// The split key a checkpoint's run used, if it kept one.
///
/// # Errors
/// A usage error when the checkpoint's key does not parse.
pub fn split_key(ck: &Checkpoint) -> Result<Option<SplitKey>> {
    match ck.context.get("split_key").and_then(|v| v.as_str()) {
        Some(hex) => hex.parse().map(Some).map_err(|e: dpml_data::DataError| {
            Error::usage(format!("checkpoint split_key {hex:?}: {e}"))
        }),
        None => Ok(None),
    }
}
