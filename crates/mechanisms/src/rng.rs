//! The one source of randomness for everything that touches private data.
//!
//! Every sampler in dpml draws from a [`DpRng`]: ChaCha20 seeded from the operating system, or
//! from a user-given seed for reproducibility. A seeded generator says so ([`DpRng::is_seeded`]),
//! and every output that used one reports `"seeded": true` (design invariant 3). If the
//! operating system cannot supply entropy we fail closed with an error; there is no fallback to
//! a weaker generator.

use rand::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::MechanismError;
use crate::chacha::ChaChaStream;

/// A ChaCha20 cryptographically secure generator that remembers whether it was seeded by a user.
#[derive(Debug, Clone)]
pub struct DpRng {
    inner: ChaChaStream,
    seeded: bool,
}

impl DpRng {
    /// A generator seeded with 256 bits from the operating system.
    ///
    /// # Errors
    /// [`MechanismError::Entropy`] when the operating system cannot supply entropy.
    pub fn from_os() -> Result<Self, MechanismError> {
        let inner =
            ChaChaStream::try_from_os_rng().map_err(|e| MechanismError::Entropy(e.to_string()))?;
        Ok(Self {
            inner,
            seeded: false,
        })
    }

    /// A reproducible generator from a user-given seed. Outputs made with it are not secure
    /// releases and are reported as seeded.
    pub fn seeded(seed: u64) -> Self {
        Self {
            inner: ChaChaStream::seed_from_u64(seed),
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

    /// A generator on a 256-bit key that several processes of one job share (the key drawn
    /// from the operating system by one of them and sent to the others, inside the job's
    /// trust boundary), so that they draw the same split, initialisation and sampling key.
    /// Not flagged as seeded: the key is as secret as an operating-system seed.
    pub fn from_shared_key(key: [u8; 32]) -> Self {
        Self {
            inner: ChaChaStream::from_seed(key),
            seeded: false,
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
            inner: ChaChaStream::from_seed(seed),
            seeded: self.seeded,
        }
    }

    /// A fresh 256-bit key for a family of independent ChaCha20 streams, drawn from this
    /// generator's stream (see [`StreamKey`]).
    pub fn stream_key(&mut self) -> StreamKey {
        let mut key = [0u8; 32];
        self.inner.fill_bytes(&mut key);
        StreamKey {
            key,
            seeded: self.seeded,
        }
    }

    /// A uniform `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// A uniform integer in `0..n` without modulo bias. `n` must be > 0.
    ///
    /// Lemire's multiply-and-reject method (ACM TOMS 2019): x·n / 2⁶⁴ for a uniform 64-bit x,
    /// redrawing x when the low half of the product falls below 2⁶⁴ mod n, which leaves
    /// exactly ⌊2⁶⁴/n⌋ values of x for every result. The exact samplers call this for every
    /// coin they flip; unlike the modulo method it needs no division except, rarely, to find
    /// the rejection threshold.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "DpRng::below(0)");
        let mut m = u128::from(self.inner.next_u64()) * u128::from(n);
        if (m as u64) < n {
            // 2⁶⁴ mod n, computed only here (probability n/2⁶⁴ per draw).
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.inner.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// A uniform `f64` in `[0, 1)` with 53 random bits. For non-release uses only (shuffles,
    /// initialisation, simulation); released noise uses the exact samplers in [`crate::exact`].
    pub fn uniform_f64(&mut self) -> f64 {
        (self.inner.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// The position of a user-seeded generator in its stream, to continue it exactly after a
    /// restart ([`DpRng::restore`]); `None` for a generator seeded from the operating system,
    /// whose key never leaves the process (whoever held it could subtract the noise from every
    /// release it made).
    pub fn snapshot(&self) -> Option<RngSnapshot> {
        self.seeded.then(|| RngSnapshot {
            key: self.inner.key(),
            stream: self.inner.stream(),
            word_pos: self.inner.word_pos(),
        })
    }

    /// The user-seeded generator at the position `snap` recorded: its next output is the one
    /// the snapshotted generator would have drawn next, so no draw is ever repeated.
    pub fn restore(snap: &RngSnapshot) -> Self {
        let mut inner = ChaChaStream::new(snap.key, snap.stream);
        inner.set_word_pos(snap.word_pos);
        Self {
            inner,
            seeded: true,
        }
    }

    /// Access as a `rand` generator, for shuffles and other non-release uses.
    pub fn as_rng(&mut self) -> &mut ChaChaStream {
        &mut self.inner
    }
}

/// A 256-bit ChaCha20 key from which numbered streams derive, for drawing one large sample in
/// parallel pieces: piece `i` uses [`StreamKey::stream`]`(i)` whichever thread draws it, so the
/// result depends only on the parent generator, not on the number of threads.
///
/// ChaCha20 with one key and distinct 64-bit stream numbers (its nonce) yields independent
/// pseudorandom streams; the key itself is 256 fresh bits of the parent's CSPRNG stream, so
/// the derived streams are as unpredictable as the parent.
#[derive(Clone)]
pub struct StreamKey {
    key: [u8; 32],
    seeded: bool,
}

impl std::fmt::Debug for StreamKey {
    /// The key stays out of logs and panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamKey")
            .field("seeded", &self.seeded)
            .finish_non_exhaustive()
    }
}

impl StreamKey {
    /// Stream number `index` under this key, as a generator (seeded flag inherited).
    pub fn stream(&self, index: u64) -> DpRng {
        DpRng {
            inner: ChaChaStream::new(self.key, index),
            seeded: self.seeded,
        }
    }
}

/// Where a user-seeded [`DpRng`] stands in its ChaCha20 stream (see [`DpRng::snapshot`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RngSnapshot {
    /// The 256-bit ChaCha20 key (derived from the user's seed).
    key: [u8; 32],
    /// The stream number.
    stream: u64,
    /// The position in the stream, in 32-bit words.
    word_pos: u128,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restored_generator_continues_where_the_snapshot_stood() {
        let mut a = DpRng::seeded(5);
        a.next_u64();
        let snap = a.snapshot().unwrap();
        let mut b = DpRng::restore(&snap);
        assert!(b.is_seeded());
        assert_eq!((a.next_u64(), a.next_u64()), (b.next_u64(), b.next_u64()));
        // An operating-system key is never exported.
        assert!(DpRng::from_os().unwrap().snapshot().is_none());
    }

    #[test]
    fn seeded_is_reproducible_and_flagged() {
        let mut a = DpRng::seeded(7);
        let mut b = DpRng::seeded(7);
        assert!(a.is_seeded());
        assert_eq!(a.next_u64(), b.next_u64());
        assert!(!DpRng::from_os().unwrap().is_seeded());
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let key = DpRng::seeded(3).stream_key();
        assert_eq!(key.stream(5).next_u64(), key.stream(5).next_u64());
        assert_ne!(key.stream(5).next_u64(), key.stream(6).next_u64());
        assert!(key.stream(0).is_seeded());
        // A second key from the same parent differs.
        let mut parent = DpRng::seeded(3);
        let (a, b) = (parent.stream_key(), parent.stream_key());
        assert_ne!(a.stream(0).next_u64(), b.stream(0).next_u64());
    }

    /// For n just above 2⁶³ the plain reduction x mod n makes the lower half of 0..n twice as
    /// likely as the upper half (mean ≈ 0.375·n); an unbiased method gives mean 0.5·n.
    #[test]
    fn below_is_unbiased_for_a_range_near_two_to_the_63() {
        let mut r = DpRng::seeded(4);
        let n = (1u64 << 63) + 1;
        let draws = 40_000;
        let mean = (0..draws)
            .map(|_| r.below(n) as f64 / n as f64)
            .sum::<f64>()
            / draws as f64;
        // Uniform on [0, 1): sd of the mean is √(1/12/draws) ≈ 0.0014; allow 5 sd.
        assert!(
            (mean - 0.5).abs() < 5.0 * (1.0 / 12.0 / draws as f64).sqrt(),
            "{mean}"
        );
        assert_eq!(r.below(1), 0);
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
