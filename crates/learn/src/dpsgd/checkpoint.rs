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
//! after the same number of steps. It also holds digests (SHA-256) of the recipe and of the
//! training records, the dpml version, σ and the sampling rate, and resuming with other values
//! is refused naming which part differs (never printing a digest).
//!
//! A checkpoint is an input like any other: it must be a regular file of at most
//! [`MAX_BYTES`], every field is checked against the recipe (a step at or past the end, a
//! parameter that is NaN or infinite, shapes that do not fit the model are refused), and a
//! digest of its whole state guards against edits made by hand (an edited `step` would
//! otherwise make the resumed run apply more noisy steps than it accounts for). The digest is
//! not a key: whoever means to forge a checkpoint can recompute it, and a checkpoint is as
//! trusted as the folder it is kept in.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use dpml_data::Dataset;
use dpml_mechanisms::rng::RngSnapshot;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::accounting::PrivacyPlan;
use super::config::TrainConfig;
use super::error::{DpSgdError, Result, io_failure};
use super::objective::Task;
use super::train::EpochLog;

/// The checkpoint file inside a checkpoint directory.
pub const FILE: &str = "checkpoint.json";
/// The format tag of this version of the file.
const FORMAT: &str = "dpml-checkpoint/2";
/// The largest checkpoint file read (a model of about 20 million parameters with Adam's two
/// moments and an EMA, as decimal JSON).
pub const MAX_BYTES: u64 = 4 << 30;
/// The dpml version that writes and reads checkpoints.
pub const DPML_VERSION: &str = env!("CARGO_PKG_VERSION");

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
    /// The dpml version that wrote it.
    pub dpml_version: String,
    /// SHA-256 of the recipe and the task.
    recipe_digest: String,
    /// SHA-256 of the training records.
    data_digest: String,
    /// σ of the run (`None`: non-private).
    pub noise_multiplier: Option<f64>,
    /// q of the run.
    pub sampling_rate: f64,
    /// SHA-256 of every other field, written last: an edit by hand does not match it.
    #[serde(default)]
    state_digest: String,
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
    /// An empty checkpoint of the run `id` describes (filled in by the training loop).
    pub(crate) fn new(id: &RunIdentity, steps: u64, context: serde_json::Value) -> Self {
        Self {
            format: FORMAT.into(),
            dpml_version: DPML_VERSION.into(),
            recipe_digest: id.recipe_digest.clone(),
            data_digest: id.data_digest.clone(),
            noise_multiplier: id.noise_multiplier,
            sampling_rate: id.sampling_rate,
            state_digest: String::new(),
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

    /// Reads the checkpoint in `dir`: a regular file of at most [`MAX_BYTES`], of this format,
    /// whose state digest matches and whose numbers are all finite.
    ///
    /// # Errors
    /// [`DpSgdError::CheckpointMismatch`] when there is none, it is not a regular file, too
    /// large, not a checkpoint of this version, edited, or holds a NaN or infinite value;
    /// [`DpSgdError::Runtime`] when it cannot be read.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join(FILE);
        let refuse =
            |why: String| DpSgdError::CheckpointMismatch(format!("{}: {why}", path.display()));
        let meta = fs::metadata(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => DpSgdError::CheckpointMismatch(format!(
                "no checkpoint in {}: {} does not exist",
                dir.display(),
                path.display()
            )),
            _ => io_failure(format!("cannot read {}: {e}", path.display()), &e),
        })?;
        // A FIFO or a device would block or never end: only regular files are read.
        if !meta.is_file() {
            return Err(refuse("not a regular file".into()));
        }
        if meta.len() > MAX_BYTES {
            return Err(refuse(format!(
                "{} bytes, more than the {MAX_BYTES} a checkpoint may have",
                meta.len()
            )));
        }
        let mut text = String::new();
        fs::File::open(&path)
            .and_then(|f| std::io::Read::take(f, MAX_BYTES + 1).read_to_string(&mut text))
            .map_err(|e| io_failure(format!("cannot read {}: {e}", path.display()), &e))?;
        let ck: Self = serde_json::from_str(&text)
            .map_err(|e| refuse(format!("not a dpml checkpoint: {e}")))?;
        if ck.format != FORMAT {
            return Err(refuse(format!(
                "format {:?}, this dpml reads {FORMAT:?}",
                ck.format
            )));
        }
        if ck.state_digest != ck.digest() {
            return Err(refuse(
                "its contents do not match its state digest: it was edited outside dpml".into(),
            ));
        }
        ck.check_numbers().map_err(refuse)?;
        Ok(ck)
    }

    /// Every stored number finite: parameters, optimizer moments, averages, σ, q and times.
    fn check_numbers(&self) -> std::result::Result<(), String> {
        let all_finite = |bits: &[u32]| bits.iter().all(|&b| f32::from_bits(b).is_finite());
        if let Some(i) = self.params.iter().position(|p| !all_finite(p)) {
            return Err(format!(
                "parameter tensor {i} holds a NaN or infinite value"
            ));
        }
        if self.optimizer.iter().flatten().any(|b| !all_finite(b)) {
            return Err("the optimizer state holds a NaN or infinite value".into());
        }
        if let Some((_, values)) = &self.ema
            && values.iter().any(|v| !all_finite(v))
        {
            return Err("the averaged parameters hold a NaN or infinite value".into());
        }
        let sigma_ok = self
            .noise_multiplier
            .is_none_or(|s| s.is_finite() && s > 0.0);
        let q_ok = self.sampling_rate > 0.0 && self.sampling_rate <= 1.0;
        if !(sigma_ok && q_ok) {
            return Err(format!(
                "noise multiplier {:?} or sampling rate {} out of range",
                self.noise_multiplier, self.sampling_rate
            ));
        }
        if !(self.loop_seconds.is_finite() && self.loop_seconds >= 0.0) {
            return Err(format!(
                "loop_seconds {} is not finite and >= 0",
                self.loop_seconds
            ));
        }
        Ok(())
    }

    /// SHA-256 of every field but the digest itself.
    fn digest(&self) -> String {
        let mut copy = self.clone();
        copy.state_digest = String::new();
        let bytes = serde_json::to_vec(&copy).unwrap_or_default();
        hex(&Sha256::digest(&bytes))
    }

    /// Checks that this checkpoint was made by the run `id` describes, with the steps and
    /// epochs of `plan`, by this dpml: each refusal names the part that differs (version, σ,
    /// sampling rate, recipe, data), never a digest.
    ///
    /// # Errors
    /// [`DpSgdError::CheckpointMismatch`] naming the part.
    pub(crate) fn check(&self, id: &RunIdentity, plan: &PrivacyPlan) -> Result<()> {
        let steps = plan.steps;
        let refuse = |why: String| {
            Err(DpSgdError::CheckpointMismatch(format!(
                "checkpoint_mismatch: {why}; resume with the same flags, data and dpml"
            )))
        };
        if self.dpml_version != DPML_VERSION {
            return refuse(format!(
                "the checkpoint was written by dpml {}, this is dpml {DPML_VERSION}",
                self.dpml_version
            ));
        }
        if self.noise_multiplier != id.noise_multiplier {
            let sigma =
                |s: Option<f64>| s.map_or_else(|| "none (no noise)".to_string(), |s| s.to_string());
            return refuse(format!(
                "the checkpoint's noise multiplier σ is {}, this run's {}",
                sigma(self.noise_multiplier),
                sigma(id.noise_multiplier)
            ));
        }
        if self.sampling_rate != id.sampling_rate {
            return refuse(format!(
                "the checkpoint's sampling rate q is {}, this run's {}",
                self.sampling_rate, id.sampling_rate
            ));
        }
        if self.recipe_digest != id.recipe_digest {
            return refuse("the checkpoint was made with another recipe".into());
        }
        if self.data_digest != id.data_digest {
            return refuse("the checkpoint was made on other training records".into());
        }
        if self.steps != steps {
            return refuse(format!(
                "the checkpoint's run has {} steps, this run {steps}",
                self.steps
            ));
        }
        if self.step >= steps {
            return refuse(format!(
                "the checkpoint is at step {} of {steps}: a checkpoint is saved before the \
                 last step, never at or past it",
                self.step
            ));
        }
        // One entry for each epoch ended by step `step`, in order, each at a step that ends an
        // epoch: exactly the run's epoch ends up to that step.
        let logged = self.epoch_log.len() as u64 == plan.epochs_logged(self.step)
            && self.epoch_log.windows(2).all(|w| w[0].steps < w[1].steps)
            && self
                .epoch_log
                .iter()
                .all(|e| e.steps <= self.step && plan.ends_epoch(e.steps));
        if !logged
            || (self.optimizer_updates != 0
                && i64::from(self.optimizer_updates) != self.step as i64)
        {
            return refuse(format!(
                "the checkpoint's step {} does not agree with its epoch log and optimizer state",
                self.step
            ));
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
        let mut sealed = self.clone();
        sealed.state_digest = sealed.digest();
        let text = serde_json::to_vec(&sealed).map_err(|e| {
            DpSgdError::Runtime(format!("cannot write checkpoint {}: {e}", tmp.display()))
        })?;
        // A new file, never through what is at its name: a stale temporary file, or a link
        // put there, is removed rather than written through (a link to a ledger would
        // overwrite the ledger).
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(fail(&tmp, &e)),
            _ => {}
        }
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| fail(&tmp, &e))?;
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

/// What identifies a run to its checkpoints: digests of the recipe and of the records, σ and q.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunIdentity {
    recipe_digest: String,
    data_digest: String,
    noise_multiplier: Option<f64>,
    sampling_rate: f64,
}

impl RunIdentity {
    /// The identity of a run of `cfg` for `task` on `data`, with σ and q as planned.
    pub(crate) fn new(
        cfg: &TrainConfig,
        task: Task,
        data: &Dataset,
        noise_multiplier: Option<f64>,
        sampling_rate: f64,
    ) -> Self {
        let mut recipe = Sha256::new();
        recipe.update(serde_json::to_vec(cfg).unwrap_or_default());
        recipe.update(task.name().as_bytes());
        let mut h = Sha256::new();
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
        Self {
            recipe_digest: hex(&recipe.finalize()),
            data_digest: hex(&h.finalize()),
            noise_multiplier,
            sampling_rate,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

    fn identity(sigma: Option<f64>, q: f64) -> RunIdentity {
        RunIdentity {
            recipe_digest: "ab".repeat(32),
            data_digest: "cd".repeat(32),
            noise_multiplier: sigma,
            sampling_rate: q,
        }
    }

    /// A run of 10 steps, 5 an epoch (50 records, batches of 10, 2 epochs).
    fn plan() -> PrivacyPlan {
        let cfg = crate::dpsgd::TrainConfig {
            epochs: 2.0,
            batch_size: 10,
            privacy: crate::dpsgd::Privacy::NonPrivate,
            ..crate::dpsgd::TrainConfig::default()
        };
        PrivacyPlan::new(&cfg, 50).unwrap()
    }

    fn saved(dir: &Path) -> Checkpoint {
        let mut ck = Checkpoint::new(&identity(Some(1.1), 0.1), 10, serde_json::json!({"k": 1}));
        ck.step = 4;
        ck.params = vec![to_bits(&[0.1, f32::MIN_POSITIVE, -0.0])];
        ck.epoch_log = Vec::new();
        ck.save(dir).unwrap();
        ck
    }

    /// Edits the saved checkpoint's JSON with `edit` (keeping its old state digest).
    fn edit(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
        let path = dir.join(FILE);
        let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        edit(&mut v);
        fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    }

    fn refusal(dir: &Path) -> String {
        match Checkpoint::load(dir) {
            Err(DpSgdError::CheckpointMismatch(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// What sits at the temporary file's name (a link to another file, a stale file) is
    /// replaced, never written through.
    #[cfg(unix)]
    #[test]
    fn save_never_writes_through_a_link_at_its_temporary_name() {
        let dir = tempfile::tempdir().unwrap();
        let ck_dir = dir.path().join("ck");
        let ck = saved(&ck_dir);
        let other = dir.path().join("ledger");
        fs::write(&other, b"precious").unwrap();
        std::os::unix::fs::symlink(&other, ck_dir.join(format!("{FILE}.tmp"))).unwrap();
        ck.save(&ck_dir).unwrap();
        assert_eq!(fs::read(&other).unwrap(), b"precious");
        assert_eq!(Checkpoint::load(&ck_dir).unwrap().step, ck.step);
    }

    #[test]
    fn save_is_atomic_and_load_refuses_other_runs_and_junk() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join("ck");
        let mut ck = saved(&dir);
        // A second save replaces the first and leaves no temporary file.
        ck.samples = 77;
        ck.save(&dir).unwrap();
        assert!(!dir.join(format!("{FILE}.tmp")).exists());
        let back = Checkpoint::load(&dir).unwrap();
        assert_eq!((back.step, back.samples), (4, 77));
        assert_eq!(from_bits(&back.params[0])[2].to_bits(), (-0.0f32).to_bits());
        assert!(back.check(&identity(Some(1.1), 0.1), &plan()).is_ok());
        // Each mismatch names its part, never a digest.
        for (id, part) in [
            (identity(Some(1.2), 0.1), "noise multiplier"),
            (identity(Some(1.1), 0.2), "sampling rate"),
            (
                RunIdentity {
                    recipe_digest: "ef".repeat(32),
                    ..identity(Some(1.1), 0.1)
                },
                "another recipe",
            ),
            (
                RunIdentity {
                    data_digest: "ef".repeat(32),
                    ..identity(Some(1.1), 0.1)
                },
                "other training records",
            ),
        ] {
            let msg = back.check(&id, &plan()).unwrap_err().to_string();
            assert!(msg.contains(part), "{msg}");
            assert!(
                !msg.contains(&"ab".repeat(8)) && !msg.contains(&"cd".repeat(8)),
                "{msg}"
            );
        }
        let mut old = back.clone();
        old.dpml_version = "0.0.1".into();
        assert!(
            old.check(&identity(Some(1.1), 0.1), &plan())
                .unwrap_err()
                .to_string()
                .contains("dpml 0.0.1")
        );
        fs::write(dir.join(FILE), "{").unwrap();
        assert!(refusal(&dir).contains("not a dpml checkpoint"));
        fs::remove_dir_all(&dir).unwrap();
        assert!(refusal(&dir).contains("does not exist"));
    }

    #[test]
    fn an_edited_step_nan_parameters_or_a_step_past_the_end_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        saved(dir.path());
        // The review's case: `step` edited by hand.
        edit(dir.path(), |v| v["step"] = 2.into());
        assert!(refusal(dir.path()).contains("edited outside dpml"));
        // NaN parameters, written with a matching digest, are refused by name.
        let mut ck = saved(dir.path());
        ck.params = vec![to_bits(&[f32::NAN])];
        ck.save(dir.path()).unwrap();
        assert!(refusal(dir.path()).contains("NaN or infinite"));
        // A step at or past the end, or one that disagrees with the epoch log, is refused.
        let mut ck = saved(dir.path());
        ck.step = 10;
        let id = identity(Some(1.1), 0.1);
        assert!(
            ck.check(&id, &plan())
                .unwrap_err()
                .to_string()
                .contains("past it")
        );
        ck.step = 6;
        assert!(
            ck.check(&id, &plan())
                .unwrap_err()
                .to_string()
                .contains("epoch log")
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_device_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(FILE);
        if std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(refusal(dir.path()).contains("not a regular file"));
        }
        let dev = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dev.path().join(FILE)).unwrap();
        assert!(refusal(dev.path()).contains("not a regular file"));
    }
}
