//! The one source of randomness for everything that touches private data.
//!
//! Every sampler in dpml draws from a [`DpRng`]: ChaCha20 seeded from the operating system, or
//! from a user-given seed for reproducibility. A seeded generator says so ([`DpRng::is_seeded`]),
//! and every output that used one reports `"seeded": true` (design invariant 3). If the
//! operating system cannot supply entropy we fail closed with an error; there is no fallback to
//! a weaker generator.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::MechanismError;

/// A ChaCha20 cryptographically secure generator that remembers whether it was seeded by a user.
#[derive(Debug, Clone)]
pub struct DpRng {
    inner: ChaCha20Rng,
    seeded: bool,
}

impl DpRng {
    /// A generator seeded with 256 bits from the operating system.
    ///
    /// # Errors
    /// [`MechanismError::Entropy`] when the operating system cannot supply entropy.
    pub fn from_os() -> Result<Self, MechanismError> {
        let inner =
            ChaCha20Rng::try_from_os_rng().map_err(|e| MechanismError::Entropy(e.to_string()))?;
        Ok(Self {
            inner,
            seeded: false,
        })
    }

    /// A reproducible generator from a user-given seed. Outputs made with it are not secure
    /// releases and are reported as seeded.
    pub fn seeded(seed: u64) -> Self {
        Self {
            inner: ChaCha20Rng::seed_from_u64(seed),
            seeded: true,
        }
    }

    /// `seed` given: [`DpRng::seeded`]; none: [`DpRng::from_os`].
    ///
    /// # Errors
    /// As [`DpRng::from_os`].
    pub fn new(seed: Option<u64>) -> Result<Self, MechanismError> {
        match seed {
            Some(s) => Ok(Self::seeded(s)),
            None => Self::from_os(),
        }
    }

    /// Whether this generator came from a user-given seed.
    pub fn is_seeded(&self) -> bool {
        self.seeded
    }

    /// An independent child generator (for a parallel worker), seeded from this one's stream.
    /// The child inherits the seeded flag.
    pub fn fork(&mut self) -> Self {
        let mut seed = [0u8; 32];
        self.inner.fill_bytes(&mut seed);
        Self {
            inner: ChaCha20Rng::from_seed(seed),
            seeded: self.seeded,
        }
    }

    /// A uniform `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// A uniform integer in `0..n` without modulo bias (rejection sampling). `n` must be > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "DpRng::below(0)");
        // Reject the top partial block so every residue is equally likely.
        let zone = u64::MAX - (u64::MAX % n + 1) % n;
        loop {
            let x = self.inner.next_u64();
            if x <= zone {
                return x % n;
            }
        }
    }

    /// A uniform `f64` in `[0, 1)` with 53 random bits. For non-release uses only (shuffles,
    /// initialisation, simulation); released noise uses the exact samplers in [`crate::exact`].
    pub fn uniform_f64(&mut self) -> f64 {
        (self.inner.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Access as a `rand` generator, for shuffles and other non-release uses.
    pub fn as_rng(&mut self) -> &mut ChaCha20Rng {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_is_reproducible_and_flagged() {
        let mut a = DpRng::seeded(7);
        let mut b = DpRng::seeded(7);
        assert!(a.is_seeded());
        assert_eq!(a.next_u64(), b.next_u64());
        assert!(!DpRng::from_os().unwrap().is_seeded());
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = DpRng::seeded(1);
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[r.below(3) as usize] += 1;
        }
        // Each count ~ Binomial(30000, 1/3): sd ≈ 81.6; allow 5 sd.
        for c in counts {
            assert!((c as f64 - 10_000.0).abs() < 5.0 * 81.65, "{counts:?}");
        }
    }
}
