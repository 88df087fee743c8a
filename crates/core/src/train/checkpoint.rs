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
    /// The seed the run's generator was started with (`None`: from the operating system). A
    /// resumed run continues the generator its checkpoint saved, so it must say the same.
    pub seed: Option<u64>,
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
    /// A checkpoint whose run was started with another `--seed` (or with one where this run
    /// gives none, or the other way round) is refused by name: the resumed run would continue
    /// the saved generator while claiming another seed.
    pub fn resumed(&self) -> Result<Option<Checkpoint>> {
        let Some(dir) = self.resume.as_deref() else {
            return Ok(None);
        };
        let ck = Checkpoint::load(dir)?;
        // Checkpoints written before the seed was kept have no entry to compare.
        if let Some(saved) = ck.context.get(SEED_KEY) {
            let saved = saved.as_u64();
            if saved != self.seed {
                let say = |s: Option<u64>| s.map_or("none".to_string(), |s| s.to_string());
                return Err(Error::usage(format!(
                    "--seed {} differs from the seed of the checkpoint's run ({}): resume with the same --seed",
                    say(self.seed),
                    say(saved)
                )));
            }
        }
        Ok(Some(ck))
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

/// The checkpoint context's entry for the run's seed.
const SEED_KEY: &str = "seed";

/// What a workflow keeps in a checkpoint besides the training state: the split key (the
/// resumed run must hold out the same records) and the seed it was started with.
pub fn context(split_key: Option<SplitKey>, seed: Option<u64>) -> serde_json::Value {
    json!({ "split_key": split_key.map(|k| k.to_string()), SEED_KEY: seed })
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
