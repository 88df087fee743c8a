//! Training the audit's models (target, reference models, canary model) with dpml's own
//! trainer, side by side on a fixed number of threads, through the cache, and scoring each on
//! the audit records. Every model gets its own generator: derived from the user's seed and the
//! model's role when seeded (so results do not depend on thread scheduling), forked from the OS
//! generator otherwise.

use std::sync::Arc;

use dpml_data::Dataset;
use dpml_learn::dpsgd::{TrainConfig, predict_logits, train};
use dpml_mechanisms::DpRng;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::cache::{ModelCache, model_key};
use super::error::{DriverError, Result};

/// One model to train.
#[derive(Debug)]
pub struct Job {
    /// What the model is for ("target", "reference 3", "canaries"), for progress and seeds.
    pub role: String,
    /// Its training set.
    pub train: Dataset,
    /// The records it is scored on (logits returned).
    pub eval: Arc<Dataset>,
    /// Its generator.
    pub rng: DpRng,
    /// The seed its generator was built from, when seeded (the cache needs it).
    pub seed: Option<u64>,
}

impl Job {
    /// A job whose generator is derived from the user's `seed` and `role`, or forked from
    /// `os` when there is no seed.
    pub fn new(
        role: impl Into<String>,
        train: Dataset,
        eval: Arc<Dataset>,
        seed: Option<u64>,
        os: &mut DpRng,
    ) -> Self {
        let role = role.into();
        let seed = seed.map(|s| derive_seed(s, &role));
        let rng = match seed {
            Some(s) => DpRng::seeded(s),
            None => os.fork(),
        };
        Self {
            role,
            train,
            eval,
            rng,
            seed,
        }
    }
}

/// A per-model seed: the first 8 bytes of SHA-256(seed, role).
fn derive_seed(seed: u64, role: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update(role.as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_le_bytes(b)
}

/// A finished model, reduced to what the attacks need.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// The job's role.
    pub role: String,
    /// Logits on the evaluation records, row-major `[n, classes]`.
    pub logits: Vec<f32>,
    /// Number of classes.
    pub classes: usize,
    /// Whether the model came from the cache (not trained in this run).
    pub from_cache: bool,
}

/// Told after each model is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelReady {
    /// The job's role.
    pub role: String,
    /// Whether it came from the cache.
    pub from_cache: bool,
}

/// How the jobs are divided among the processes of a job launched by MPI (or any launcher):
/// which jobs this process trains, and how the results come together.
pub trait Spread {
    /// Whether this process trains job `i` (of `n`).
    fn takes(&self, i: usize, n: usize) -> bool;
    /// Every process's scored models (`mine`: this one's, by job index) in job order, on the
    /// process that reports (`None` on the others).
    ///
    /// # Errors
    /// [`DriverError::Invalid`] when a job is missing from what was gathered.
    fn gather(&self, n: usize, mine: Vec<(usize, Scored)>) -> Result<Option<Vec<Scored>>>;
}

/// One process does every job.
#[derive(Debug, Clone, Copy, Default)]
pub struct Alone;

impl Spread for Alone {
    fn takes(&self, _: usize, _: usize) -> bool {
        true
    }
    fn gather(&self, _: usize, mine: Vec<(usize, Scored)>) -> Result<Option<Vec<Scored>>> {
        Ok(Some(mine.into_iter().map(|(_, s)| s).collect()))
    }
}

/// Trains (or loads) every job's model with `recipe` on `threads` threads and returns each
/// one's logits on its evaluation records, in job order.
///
/// # Errors
/// The first training, prediction or cache error; [`DriverError::Threads`] when the thread
/// pool cannot start.
pub fn train_and_score(
    jobs: Vec<Job>,
    recipe: &TrainConfig,
    cache: Option<&ModelCache>,
    threads: usize,
    ready: &(dyn Fn(&ModelReady) + Sync),
) -> Result<Vec<Scored>> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| DriverError::Threads {
            threads,
            message: e.to_string(),
        })?;
    let mine = pool.install(|| {
        jobs.into_par_iter()
            .map(|job| {
                let scored = run_job(job, recipe, cache)?;
                ready(&ModelReady {
                    role: scored.role.clone(),
                    from_cache: scored.from_cache,
                });
                Ok(scored)
            })
            .collect::<Result<Vec<_>>>()
    })?;
    Ok(mine)
}

/// As [`train_and_score`] for the jobs `spread` gives this process; every job's result, in
/// job order, on the reporting process (`None` elsewhere). Each job keeps the generator it
/// was built with, so the results do not depend on which process trained it.
///
/// # Errors
/// As [`train_and_score`] and [`Spread::gather`].
pub fn train_and_score_spread(
    jobs: Vec<Job>,
    recipe: &TrainConfig,
    cache: Option<&ModelCache>,
    threads: usize,
    ready: &(dyn Fn(&ModelReady) + Sync),
    spread: &dyn Spread,
) -> Result<Option<Vec<Scored>>> {
    let n = jobs.len();
    let (idx, mine): (Vec<usize>, Vec<Job>) = jobs
        .into_iter()
        .enumerate()
        .filter(|(i, _)| spread.takes(*i, n))
        .unzip();
    let scored = train_and_score(mine, recipe, cache, threads, ready)?;
    spread.gather(n, idx.into_iter().zip(scored).collect())
}

fn run_job(mut job: Job, recipe: &TrainConfig, cache: Option<&ModelCache>) -> Result<Scored> {
    let cached = match (cache, job.seed) {
        (Some(c), Some(seed)) => Some((c, model_key(recipe, &job.train, seed)?)),
        _ => None,
    };
    let hit = cached.as_ref().and_then(|(c, key)| c.load(key));
    let from_cache = hit.is_some();
    let (mut model, input) = match hit {
        Some(m) => m,
        None => {
            let out = train(recipe, &job.train, None, &mut job.rng, &mut |_| {})?;
            if let Some((c, key)) = &cached {
                c.store(key, &out.model, &out.input)?;
            }
            (out.model, out.input)
        }
    };
    let logits = predict_logits(&mut model, &input, &job.eval)?;
    let classes = logits.shape().get(1).copied().unwrap_or(0);
    Ok(Scored {
        role: job.role,
        logits: logits.into_vec(),
        classes,
        from_cache,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_seeds_depend_on_seed_and_role() {
        assert_eq!(derive_seed(1, "target"), derive_seed(1, "target"));
        assert_ne!(derive_seed(1, "target"), derive_seed(2, "target"));
        assert_ne!(derive_seed(1, "target"), derive_seed(1, "reference 0"));
        let mut os = DpRng::seeded(0);
        let d = dpml_data::Dataset {
            name: "t".into(),
            x: vec![0.0],
            n: 1,
            record_shape: vec![1],
            y: vec![0],
            n_classes: 2,
            feature_names: vec![],
            class_names: vec![],
            feature_range: None,
        };
        let e = Arc::new(d.clone());
        assert_eq!(
            Job::new("a", d.clone(), e.clone(), None, &mut os).seed,
            None
        );
        assert_eq!(
            Job::new("a", d, e, Some(3), &mut os).seed,
            Some(derive_seed(3, "a"))
        );
    }
}
