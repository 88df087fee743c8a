//! The processes this `dpml` runs on: one, or the ranks of an MPI job (`mpirun -np K dpml …`)
//! when built with the `mpi` feature. Rank 0 is the root: it alone adds DP-SGD noise, prints
//! results and writes files; the others compute their share and stay silent.
//!
//! A rank that fails exits without finalising MPI, so the launcher (mpirun, srun) ends the
//! whole job with a non-zero status and names the rank; the root never prints a result the
//! other ranks did not finish.

use dpml_audit::driver::{DriverError, Scored, Spread};
use dpml_learn::dpsgd::Collective;
#[cfg(not(feature = "mpi"))]
use dpml_learn::dpsgd::Solo;
use dpml_mechanisms::DpRng;
use serde_json::{Value, json};

#[cfg(feature = "mpi")]
mod mpi_comm;

/// Keeps MPI initialised while alive (finalises on drop); nothing without the feature.
pub struct Guard {
    #[cfg(feature = "mpi")]
    _universe: Option<mpi::environment::Universe>,
}

/// Initialises MPI when built with the feature (a single process started without mpirun is a
/// world of one). Call once, first thing in `main`, and keep the guard until the end.
pub fn init() -> Guard {
    #[cfg(feature = "mpi")]
    {
        Guard {
            _universe: mpi_comm::init(),
        }
    }
    #[cfg(not(feature = "mpi"))]
    {
        Guard {}
    }
}

/// Runs `f` with the processes of this run.
pub fn with_comm<T>(f: impl FnOnce(&dyn Collective) -> T) -> T {
    #[cfg(feature = "mpi")]
    {
        mpi_comm::with_world(f)
    }
    #[cfg(not(feature = "mpi"))]
    {
        f(&Solo)
    }
}

/// This process's rank and the number of processes.
pub fn rank_size() -> (usize, usize) {
    with_comm(|c| (c.rank(), c.size()))
}

/// Whether this process prints results and writes files.
pub fn is_root() -> bool {
    rank_size().0 == 0
}

/// Every process's `items` (each the JSON of its results, by item index) joined on the root
/// into one list in item order; `None` on the other ranks. With one process it is `items`.
pub fn gather_items(
    n: usize,
    items: Vec<(usize, serde_json::Value)>,
) -> Option<Vec<serde_json::Value>> {
    let text = serde_json::to_string(&items).unwrap_or_default();
    #[cfg(feature = "mpi")]
    let all = mpi_comm::gather_strings(text);
    #[cfg(not(feature = "mpi"))]
    let all = Some(vec![text]);
    let mut slots: Vec<Option<serde_json::Value>> = vec![None; n];
    for part in all? {
        let part: Vec<(usize, serde_json::Value)> = serde_json::from_str(&part).unwrap_or_default();
        for (i, v) in part {
            if let Some(s) = slots.get_mut(i) {
                *s = Some(v);
            }
        }
    }
    slots.into_iter().collect()
}

/// `rng` itself in a single process or when user-seeded (every rank builds the same one);
/// otherwise a generator on a key the root drew from `rng` and sent to every rank, so that
/// all ranks draw the same split, initialisation and keys.
pub fn shared_rng(mut rng: DpRng) -> DpRng {
    with_comm(|c| {
        if c.size() == 1 || rng.is_seeded() {
            return rng;
        }
        let mut words = [0u64; 4].map(|_| rng.next_u64());
        c.broadcast_u64(&mut words);
        let mut key = [0u8; 32];
        for (chunk, w) in key.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        DpRng::from_shared_key(key)
    })
}

/// Audit models divided among the ranks (model i on rank i mod K), gathered on the root bit
/// for bit (logits as `f32` bit patterns).
pub struct Ranks;

impl Spread for Ranks {
    fn takes(&self, i: usize, _: usize) -> bool {
        let (rank, size) = rank_size();
        i % size == rank
    }

    fn gather(
        &self,
        n: usize,
        mine: Vec<(usize, Scored)>,
    ) -> Result<Option<Vec<Scored>>, DriverError> {
        let encoded = mine
            .into_iter()
            .map(|(i, s)| {
                let bits: Vec<u32> = s.logits.iter().map(|v| v.to_bits()).collect();
                (i, json!([s.role, bits, s.classes, s.from_cache]))
            })
            .collect();
        let root = is_root();
        let Some(all) = gather_items(n, encoded) else {
            return if root {
                Err(DriverError::Invalid(
                    "an audit model is missing from the gathered results".into(),
                ))
            } else {
                Ok(None)
            };
        };
        all.iter()
            .map(|v| {
                decode_scored(v).ok_or_else(|| {
                    DriverError::Invalid(format!("malformed gathered audit model: {v}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// The inverse of the encoding in [`Ranks::gather`].
fn decode_scored(v: &Value) -> Option<Scored> {
    Some(Scored {
        role: v.get(0)?.as_str()?.to_string(),
        logits: v
            .get(1)?
            .as_array()?
            .iter()
            .map(|b| b.as_u64().map(|b| f32::from_bits(b as u32)))
            .collect::<Option<Vec<_>>>()?,
        classes: v.get(2)?.as_u64()? as usize,
        from_cache: v.get(3)?.as_bool()?,
    })
}
