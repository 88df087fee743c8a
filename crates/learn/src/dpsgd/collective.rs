//! The communication a data-parallel DP-SGD run needs, behind a trait so that the training
//! loop does not depend on MPI: [`Solo`] is the single process (every operation is the
//! identity), and the `dpml` binary implements it over MPI when built with its `mpi` feature.
//!
//! # Privacy
//! A data-parallel step releases exactly what the single-process step does: every process
//! samples its share of the ONE Poisson batch ([`super::sampler::Shard`]), computes the
//! clipped sum over its members, the sums are added on the root (rank 0), the root adds the
//! noise once, and the noisy sum is broadcast; every process then takes the same optimizer
//! step. The un-noised partial sums travel only between the processes of the job (inside the
//! trust boundary, like the data they are computed from).

use dpml_nn::Sequential;

use super::error::{DpSgdError, Result};

/// Collective operations among the processes of one run (rank 0 is the root).
pub trait Collective {
    /// This process's rank, in `0..size()`.
    fn rank(&self) -> usize;
    /// Number of processes.
    fn size(&self) -> usize;
    /// Adds `values` element-wise over all processes into the root's `values`, in a fixed
    /// order (the result must not depend on timing); other ranks' `values` are left as they
    /// were.
    fn sum_to_root_f32(&self, values: &mut [f32]);
    /// As [`Collective::sum_to_root_f32`] for `f64`.
    fn sum_to_root_f64(&self, values: &mut [f64]);
    /// Copies the root's `values` to every process.
    fn broadcast_f32(&self, values: &mut [f32]);
    /// Copies the root's `values` to every process.
    fn broadcast_u64(&self, values: &mut [u64]);
    /// Every process's `value`, in rank order, on the root (empty elsewhere).
    fn gather_u64(&self, value: u64) -> Vec<u64>;

    /// Whether this process is the root.
    fn is_root(&self) -> bool {
        self.rank() == 0
    }
}

/// One process: nothing to communicate.
#[derive(Debug, Clone, Copy, Default)]
pub struct Solo;

impl Collective for Solo {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn sum_to_root_f32(&self, _: &mut [f32]) {}
    fn sum_to_root_f64(&self, _: &mut [f64]) {}
    fn broadcast_f32(&self, _: &mut [f32]) {}
    fn broadcast_u64(&self, _: &mut [u64]) {}
    fn gather_u64(&self, value: u64) -> Vec<u64> {
        vec![value]
    }
}

/// Every parameter gradient of `model`, concatenated, into `buf` (allocation reused).
pub(crate) fn flatten_grads(model: &Sequential, buf: &mut Vec<f32>) {
    buf.clear();
    for p in model.params() {
        buf.extend_from_slice(&p.grad);
    }
}

/// The inverse of [`flatten_grads`].
pub(crate) fn unflatten_grads(model: &mut Sequential, buf: &[f32]) {
    let mut at = 0;
    model.for_each_param_mut(|_, p| {
        let len = p.grad.len();
        p.grad.copy_from_slice(&buf[at..at + len]);
        at += len;
    });
}

/// Copies the root's parameter values to every process (so that processes seeded from the
/// operating system start from the root's initialisation).
pub(crate) fn broadcast_params(model: &mut Sequential, comm: &dyn Collective) {
    if comm.size() == 1 {
        return;
    }
    let mut buf: Vec<f32> = model
        .params()
        .iter()
        .flat_map(|p| p.value.iter().copied())
        .collect();
    comm.broadcast_f32(&mut buf);
    let mut at = 0;
    model.for_each_param_mut(|_, p| {
        let len = p.value.len();
        p.value.copy_from_slice(&buf[at..at + len]);
        at += len;
    });
}

/// How a fact the processes compare reads in a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    /// A count (N, T).
    Count,
    /// An `f64` carried as its bit pattern (q, σ).
    Real,
    /// A digest (of the recipe, of the data's schema).
    Digest,
}

impl Shown {
    fn show(self, value: u64) -> String {
        match self {
            Shown::Count => value.to_string(),
            Shown::Real => f64::from_bits(value).to_string(),
            Shown::Digest => format!("digest {value:016x}"),
        }
    }
}

/// A fact of the run every process must hold alike: its name, its value as a `u64`, and how
/// that reads.
pub(crate) type Fact<'a> = (&'a str, u64, Shown);

/// The first 8 bytes of the SHA-256 of `bytes`, for a [`Shown::Digest`] fact.
pub(crate) fn digest(bytes: &[u8]) -> u64 {
    use sha2::{Digest as _, Sha256};
    let d = Sha256::digest(bytes);
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// Checks, before the first step, that every process holds the root's value of each of
/// `facts` (N, q, T, σ, the recipe, the data's schema): processes that loaded other data or
/// another recipe would add up gradients of different runs under one privacy claim. The error
/// names the first fact and the first rank that differ, with both values (on every process,
/// so that all stop together).
///
/// # Errors
/// [`DpSgdError::Runtime`] naming the rank, the fact and both values.
pub(crate) fn check_facts_agree(comm: &dyn Collective, facts: &[Fact<'_>]) -> Result<()> {
    if comm.size() == 1 {
        return Ok(());
    }
    for &(name, value, shown) in facts {
        let all = comm.gather_u64(value);
        // [rank that differs (u64::MAX: none), its value, the root's value]
        let mut verdict = match all.iter().position(|&v| v != all[0]) {
            Some(r) => [r as u64, all[r], all[0]],
            None => [u64::MAX, value, value],
        };
        comm.broadcast_u64(&mut verdict);
        if let [rank, theirs, root] = verdict
            && rank != u64::MAX
        {
            return Err(DpSgdError::Runtime(format!(
                "rank {rank} disagrees with rank 0 on the {name}: {} on rank {rank}, {} on rank \
                 0; every process must load the same data with the same recipe; nothing was \
                 trained",
                shown.show(theirs),
                shown.show(root)
            )));
        }
    }
    Ok(())
}

/// FNV-1a over the bit patterns of every parameter value: equal models, equal checksums.
pub fn model_checksum(model: &Sequential) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in model.params() {
        for v in &p.value {
            for b in v.to_bits().to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    h
}

/// Checks that every process holds the root's model; the error names the first rank whose
/// model differs (on every process, so that all stop together).
///
/// # Errors
/// [`DpSgdError::Runtime`] naming the rank.
pub(crate) fn check_models_agree(model: &Sequential, comm: &dyn Collective) -> Result<()> {
    if comm.size() == 1 {
        return Ok(());
    }
    let sums = comm.gather_u64(model_checksum(model));
    let mut bad = [sums
        .iter()
        .position(|&s| s != sums[0])
        .map_or(u64::MAX, |r| r as u64)];
    comm.broadcast_u64(&mut bad);
    match bad[0] {
        u64::MAX => Ok(()),
        r => Err(DpSgdError::Runtime(format!(
            "rank {r}'s model differs from rank 0's (parameter checksum mismatch)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// The root of a job whose other ranks hold `others[i]` of the i-th fact gathered.
    struct Root {
        others: RefCell<Vec<Vec<u64>>>,
    }

    impl Collective for Root {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            3
        }
        fn sum_to_root_f32(&self, _: &mut [f32]) {}
        fn sum_to_root_f64(&self, _: &mut [f64]) {}
        fn broadcast_f32(&self, _: &mut [f32]) {}
        fn broadcast_u64(&self, _: &mut [u64]) {}
        fn gather_u64(&self, value: u64) -> Vec<u64> {
            let mut all = vec![value];
            all.extend(self.others.borrow_mut().remove(0));
            all
        }
    }

    #[test]
    fn a_rank_that_differs_is_named_with_both_values() {
        let facts = [
            ("training-set size N", 100, Shown::Count),
            ("sampling rate q", 0.01f64.to_bits(), Shown::Real),
            ("data schema", digest(b"a"), Shown::Digest),
        ];
        let agreeing = Root {
            others: RefCell::new(vec![
                vec![100, 100],
                vec![0.01f64.to_bits(); 2],
                vec![digest(b"a"); 2],
            ]),
        };
        assert!(check_facts_agree(&agreeing, &facts).is_ok());
        let q = Root {
            others: RefCell::new(vec![
                vec![100, 100],
                vec![0.01f64.to_bits(), 0.02f64.to_bits()],
            ]),
        };
        let msg = check_facts_agree(&q, &facts).unwrap_err().to_string();
        assert!(
            msg.contains("rank 2") && msg.contains("sampling rate q") && msg.contains("0.02"),
            "{msg}"
        );
        let n = Root {
            others: RefCell::new(vec![vec![99, 100]]),
        };
        let msg = check_facts_agree(&n, &facts).unwrap_err().to_string();
        assert!(
            msg.contains("rank 1") && msg.contains("99 on rank 1"),
            "{msg}"
        );
        assert!(check_facts_agree(&Solo, &facts).is_ok());
    }
}
