//! Checkpoints of a DP-SGD run: everything needed to continue it after an interruption
//! (parameters, optimizer moments, EMA, step counter, per-epoch logs and, for a user-seeded
//! run only, the generator's position and the batch-sampling key), in one JSON file written
//! atomically (a temporary file, synced, then renamed over the old one: an interrupted save
//! leaves the previous checkpoint intact).
//!
//! # Privacy
//! The run's privacy cost is `dp_sgd(σ, q, T)` for its T steps whether or not it was
//! interrupted: the accountant is a function of the step count, which the checkpoint carries,
//! so the resumed run reports ε for all T steps. No noise draw is used twice: a seeded run
//! continues its generator from the saved position; a run seeded from the operating system
//! stores neither its generator key nor its sampling key (whoever held them could subtract
//! the noise from the parameters) and continues with fresh keys from the operating system,
//! which are independent of everything drawn before. Batches drawn with a fresh sampling key
//! are still independent Poisson samples, so the analysis is unchanged.
//!
//! A checkpoint holds parameters trained on private data; it is as sensitive as the model
//! after the same number of steps. It also holds a fingerprint (SHA-256) of the recipe and
//! the training records, and resuming from a checkpoint of another run is refused.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use dpml_data::Dataset;
use dpml_mechanisms::rng::RngSnapshot;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::config::TrainConfig;
use super::error::{DpSgdError, Result, io_failure};
use super::objective::Task;
use super::train::EpochLog;

/// The checkpoint file inside a checkpoint directory.
pub const FILE: &str = "checkpoint.json";
/// The format tag of this version of the file.
const FORMAT: &str = "dpml-checkpoint/1";

/// Where and how often a run saves checkpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointPlan {
    /// The directory (created if missing).
    pub dir: PathBuf,
    /// Save after every this many steps (0: after every epoch).
    pub every: u64,
}

/// The saved state of a run after `step` of its `steps` steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    format: String,
    fingerprint: String,
    /// Steps done.
    pub step: u64,
    /// Steps of the whole run.
    pub steps: u64,
    /// The caller's own facts about the run (e.g. the command line's split key).
    pub context: serde_json::Value,
    /// Parameter values as `f32` bit patterns (exact, unlike decimal text).
    pub(crate) params: Vec<Vec<u32>>,
    pub(crate) optimizer_updates: i32,
    pub(crate) optimizer: Vec<Vec<Vec<u32>>>,
    /// EMA: updates folded in and averaged values.
    pub(crate) ema: Option<(u64, Vec<Vec<u32>>)>,
    pub(crate) epoch_log: Vec<EpochLog>,
    /// The current epoch's accumulators: records, loss sum (f64 bits), correct.
    pub(crate) acc: (usize, u64, usize),
    pub(crate) samples: usize,
    pub(crate) loop_seconds: f64,
    /// Seeded runs only: the generator's position.
    pub(crate) rng: Option<RngSnapshot>,
    /// Seeded runs only: the batch-sampling key.
    pub(crate) sampling_key: Option<[u64; 4]>,
}

impl Checkpoint {
    /// An empty checkpoint of the run with `fingerprint` (filled in by the training loop).
    pub(crate) fn new(fingerprint: String, steps: u64, context: serde_json::Value) -> Self {
        Self {
            format: FORMAT.into(),
            fingerprint,
            step: 0,
            steps,
            context,
            params: Vec::new(),
            optimizer_updates: 0,
            optimizer: Vec::new(),
            ema: None,
            epoch_log: Vec::new(),
            acc: (0, 0, 0),
            samples: 0,
            loop_seconds: 0.0,
            rng: None,
            sampling_key: None,
        }
    }

    /// Reads the checkpoint in `dir`.
    ///
    /// # Errors
    /// [`DpSgdError::CheckpointMismatch`] when there is none or it is not a checkpoint of
    /// this version; [`DpSgdError::Runtime`] when it cannot be read.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(FILE);
        let text = fs::read_to_string(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => DpSgdError::CheckpointMismatch(format!(
                "no checkpoint in {}: {} does not exist",
                dir.display(),
                path.display()
            )),
            _ => io_failure(format!("cannot read {}: {e}", path.display()), &e),
        })?;
        let ck: Self = serde_json::from_str(&text).map_err(|e| {
            DpSgdError::CheckpointMismatch(format!(
                "{} is not a dpml checkpoint: {e}",
                path.display()
            ))
        })?;
        if ck.format != FORMAT {
            return Err(DpSgdError::CheckpointMismatch(format!(
                "{} has format {:?}, this dpml reads {FORMAT:?}",
                path.display(),
                ck.format
            )));
        }
        Ok(ck)
    }

    /// Checks that this checkpoint was made by the run with `fingerprint`.
    ///
    /// # Errors
    /// [`DpSgdError::CheckpointMismatch`] naming both fingerprints.
    pub(crate) fn check(&self, fingerprint: &str) -> Result<()> {
        if self.fingerprint != fingerprint {
            return Err(DpSgdError::CheckpointMismatch(format!(
                "checkpoint_mismatch: the checkpoint was made by a run with another recipe or data \
                 set (fingerprint {}, this run {fingerprint}); resume with the same flags and data",
                short(&self.fingerprint),
            )));
        }
        Ok(())
    }

    /// Writes this checkpoint into `dir` atomically (temporary file, sync, rename).
    ///
    /// # Errors
    /// [`DpSgdError::Runtime`] naming the path that failed.
    pub(crate) fn save(&self, dir: &Path) -> Result<()> {
        let fail = |what: &Path, e: &std::io::Error| {
            io_failure(
                format!("cannot write checkpoint {}: {e}", what.display()),
                e,
            )
        };
        fs::create_dir_all(dir).map_err(|e| fail(dir, &e))?;
        let tmp = dir.join(format!("{FILE}.tmp"));
        let text = serde_json::to_vec(self).map_err(|e| {
            DpSgdError::Runtime(format!("cannot write checkpoint {}: {e}", tmp.display()))
        })?;
        let mut f = fs::File::create(&tmp).map_err(|e| fail(&tmp, &e))?;
        f.write_all(&text).map_err(|e| fail(&tmp, &e))?;
        f.sync_all().map_err(|e| fail(&tmp, &e))?;
        let path = dir.join(FILE);
        fs::rename(&tmp, &path).map_err(|e| fail(&path, &e))?;
        // Make the rename itself durable where directories can be synced.
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// The first 16 hex digits of a fingerprint (enough to tell runs apart in a message).
fn short(fingerprint: &str) -> &str {
    fingerprint.get(..16).unwrap_or(fingerprint)
}

/// SHA-256 of the recipe, the task and the training records (values and labels, bit for
/// bit): two runs with the same fingerprint take the same steps on the same data.
pub(crate) fn fingerprint(cfg: &TrainConfig, task: Task, data: &Dataset) -> String {
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(cfg).unwrap_or_default());
    h.update(task.name().as_bytes());
    h.update((data.n as u64).to_le_bytes());
    for d in &data.record_shape {
        h.update((*d as u64).to_le_bytes());
    }
    for chunk in data.x.chunks(1 << 16) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
        h.update(&bytes);
    }
    for y in &data.y {
        h.update(y.to_le_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `f32` values as their bit patterns.
pub(crate) fn to_bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// The inverse of [`to_bits`].
pub(crate) fn from_bits(bits: &[u32]) -> Vec<f32> {
    bits.iter().map(|&b| f32::from_bits(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_is_atomic_and_load_refuses_other_runs_and_junk() {
        let dir = std::env::temp_dir().join(format!("dpml-ck-{}", std::process::id()));
        let mut ck = Checkpoint::new("ab".repeat(32), 10, serde_json::json!({"k": 1}));
        ck.step = 4;
        ck.params = vec![to_bits(&[0.1, f32::MIN_POSITIVE, -0.0])];
        ck.save(&dir).unwrap();
        // A second save replaces the first and leaves no temporary file.
        ck.step = 5;
        ck.save(&dir).unwrap();
        assert!(!dir.join(format!("{FILE}.tmp")).exists());
        let back = Checkpoint::load(&dir).unwrap();
        assert_eq!(back, ck);
        assert_eq!(from_bits(&back.params[0])[2].to_bits(), (-0.0f32).to_bits());
        assert!(back.check(&"ab".repeat(32)).is_ok());
        let msg = back.check(&"cd".repeat(32)).unwrap_err().to_string();
        assert!(msg.contains("checkpoint_mismatch"), "{msg}");
        fs::write(dir.join(FILE), "{").unwrap();
        assert!(matches!(
            Checkpoint::load(&dir),
            Err(DpSgdError::CheckpointMismatch(_))
        ));
        fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(
            Checkpoint::load(&dir),
            Err(DpSgdError::CheckpointMismatch(_))
        ));
    }
}
