//! Poisson sampling of batches (design invariant 5): at every step each of the N records joins
//! the batch independently with probability q, so batch sizes follow Binomial(N, q), may be 0,
//! and no record appears twice in one step. This is the sampling the accountants analyse.
//!
//! Whether record i joins at step t is decided by a keyed pseudo-random function of
//! (run key, t, i): the 128-bit output number t·N + i of ChaCha20 under the run's 256-bit key
//! (ChaCha20 is a PRF of its block position), compared with the integer threshold ⌊q·2¹²⁸⌋. The threshold is computed
//! exactly from q's binary expansion, so P(join) = ⌊q·2¹²⁸⌋/2¹²⁸, which equals q for every
//! q ≥ 2⁻⁷⁵ (any f64 q ≥ 2⁻⁷⁵ times 2¹²⁸ is an integer) and is below q by less than 2⁻¹²⁸
//! otherwise (a smaller rate only strengthens the guarantee). No floating-point uniform is
//! involved.
//!
//! Because each record's decision depends only on (key, t, i), any subset of the records can
//! be sampled on its own and the union of the subsets is exactly the batch of the whole data
//! set: processes of a data-parallel run ([`super::collective`]) each sample their share of
//! the records with the same key, and a resumed run sampling step t draws the batch the
//! interrupted one would have. The key must stay secret (the amplification by subsampling
//! assumes the batch is hidden); it comes from the run's generator.

use dpml_mechanisms::{ChaChaStream, DpRng};
use rand::RngCore;
use rayon::prelude::*;

use super::error::{Result, config_err};

/// The 256-bit key of a run's batch sampling.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SamplingKey([u8; 32]);

impl SamplingKey {
    /// A fresh key from `rng`.
    pub fn from_rng(rng: &mut DpRng) -> Self {
        let mut key = [0u8; 32];
        for chunk in key.chunks_exact_mut(8) {
            chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        Self(key)
    }

    /// The key as four little-endian words (to send to other processes).
    pub fn to_words(self) -> [u64; 4] {
        let mut w = [0u64; 4];
        for (w, c) in w.iter_mut().zip(self.0.chunks_exact(8)) {
            *w = u64::from_le_bytes(c.try_into().unwrap_or_default());
        }
        w
    }

    /// The key from [`SamplingKey::to_words`].
    pub fn from_words(words: [u64; 4]) -> Self {
        let mut key = [0u8; 32];
        for (c, w) in key.chunks_exact_mut(8).zip(words) {
            c.copy_from_slice(&w.to_le_bytes());
        }
        Self(key)
    }
}

impl std::fmt::Debug for SamplingKey {
    // The key is secret: never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SamplingKey(..)")
    }
}

/// A share of the records: those with index ≡ `rank` (mod `ranks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This share's number, in `0..ranks`.
    pub rank: usize,
    /// Number of shares (≥ 1).
    pub ranks: usize,
}

impl Shard {
    /// All records.
    pub const ALL: Shard = Shard { rank: 0, ranks: 1 };

    /// Whether record `i` is in this share.
    pub fn holds(&self, i: usize) -> bool {
        i % self.ranks.max(1) == self.rank
    }
}

/// Draws Poisson batches of indices into `0..n`.
#[derive(Debug, Clone, PartialEq)]
pub struct PoissonSampler {
    n: usize,
    q: f64,
    /// ⌊q·2¹²⁸⌋, or `None` for q = 1 (every record, every step).
    threshold: Option<u128>,
    key: SamplingKey,
}

impl PoissonSampler {
    /// A sampler over `n` records with inclusion probability `q`, deciding by `key`.
    ///
    /// # Errors
    /// [`super::DpSgdError::InvalidConfig`] when `n` is 0 or `q` is not in (0, 1].
    pub fn new(n: usize, q: f64, key: SamplingKey) -> Result<Self> {
        if n == 0 {
            return Err(config_err(
                "Poisson sampling needs at least one record, got n = 0",
            ));
        }
        if !(q > 0.0 && q <= 1.0) {
            return Err(config_err(format!(
                "sampling_rate must be in (0, 1], got {q}"
            )));
        }
        Ok(Self {
            n,
            q,
            threshold: (q < 1.0).then(|| threshold(q)),
            key,
        })
    }

    /// The inclusion probability q.
    pub fn sampling_rate(&self) -> f64 {
        self.q
    }

    /// The expected batch size q·N.
    pub fn expected_batch(&self) -> f64 {
        self.q * self.n as f64
    }

    /// Step `step`'s batch: the chosen indices, increasing, written into `out` (cleared first).
    pub fn sample_into(&self, step: u64, out: &mut Vec<usize>) {
        self.sample_shard_into(step, Shard::ALL, out);
    }

    /// The members of step `step`'s batch that `shard` holds, increasing, into `out`.
    pub fn sample_shard_into(&self, step: u64, shard: Shard, out: &mut Vec<usize>) {
        self.sample_shard_with(step, shard, out, &mut Vec::new());
    }

    /// As [`PoissonSampler::sample_shard_into`], with `bits` as scratch (one bit per record;
    /// reused between steps so that a training loop does not allocate).
    ///
    /// The N decisions are independent, so they are made in parallel: pieces of 4,096
    /// records, each seeking to its own place in the stream, set the records' bits, and one
    /// sequential scan of the bits lists the members. The result is the same on any number of
    /// threads.
    pub fn sample_shard_with(
        &self,
        step: u64,
        shard: Shard,
        out: &mut Vec<usize>,
        bits: &mut Vec<u64>,
    ) {
        out.clear();
        let Some(t) = self.threshold else {
            out.extend((0..self.n).filter(|&i| shard.holds(i)));
            return;
        };
        bits.clear();
        bits.resize(self.n.div_ceil(64), 0);
        bits.par_chunks_mut(PIECE / 64)
            .enumerate()
            .for_each(|(p, words)| {
                // Record i's word at step t is the 128-bit output number t·N + i of the key's
                // stream (4 words of 32 bits each, read as two `u64`, the first the high
                // half): one seek per piece, then the stream in bulk fills.
                let first = p * PIECE;
                let mut prf = ChaChaStream::new(self.key.0, 0);
                prf.set_word_pos((u128::from(step) * self.n as u128 + first as u128) * 4);
                let end = (first + PIECE).min(self.n);
                let mut bytes = [0u8; 16 * FILL];
                for start in (first..end).step_by(FILL) {
                    let bytes = &mut bytes[..16 * FILL.min(end - start)];
                    prf.fill_bytes(bytes);
                    for (i, b) in (start..).zip(bytes.chunks_exact(16)) {
                        let (hi, lo) = b.split_at(8);
                        let word = u128::from(u64::from_le_bytes(hi.try_into().expect("8"))) << 64
                            | u128::from(u64::from_le_bytes(lo.try_into().expect("8")));
                        words[(i - first) / 64] |= u64::from(word < t) << (i % 64);
                    }
                }
            });
        for (w, &word) in bits.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let i = 64 * w + word.trailing_zeros() as usize;
                if shard.holds(i) {
                    out.push(i);
                }
                word &= word - 1;
            }
        }
    }
}

/// Records per parallel piece of a step's sampling (a multiple of 64: whole words of bits).
const PIECE: usize = 4096;
/// Records whose stream words are read in one fill (4 KiB).
const FILL: usize = 256;

/// ⌊q·2¹²⁸⌋ for q in (0, 1), exactly: q = m·2^e with m the 53-bit significand.
fn threshold(q: f64) -> u128 {
    let bits = q.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, e) = if biased == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), biased - 1075)
    };
    let shift = e + 128;
    if shift >= 0 {
        // m·2^e < 1, so m·2^(e+128) < 2^128: no overflow.
        u128::from(m) << shift
    } else {
        u128::from(m) >> (-shift).min(127)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn key(seed: u64) -> SamplingKey {
        SamplingKey::from_rng(&mut DpRng::seeded(seed))
    }

    /// Step `step`'s batch as the union of the members each of `ranks` shares sampled alone.
    fn union_of_shards(s: &PoissonSampler, step: u64, ranks: usize) -> Vec<usize> {
        let mut all = Vec::new();
        let mut part = Vec::new();
        for rank in 0..ranks {
            s.sample_shard_into(step, Shard { rank, ranks }, &mut part);
            all.extend_from_slice(&part);
        }
        all.sort_unstable();
        all
    }

    /// Batch sizes against Binomial(N, q): a chi-square goodness-of-fit test on cells with
    /// expected count ≥ 5 (tails pooled), plus the mean within 4.5 standard errors. The batch
    /// is the union of what 3 shares of the records sampled separately, and it must be the
    /// batch of the whole data set, step by step.
    #[test]
    fn batch_sizes_of_the_union_of_shards_follow_the_binomial_law() {
        let (n, q, steps) = (200usize, 0.05, 20_000usize);
        let s = PoissonSampler::new(n, q, key(17)).unwrap();
        let mut counts = vec![0u64; n + 1];
        let mut whole = Vec::new();
        let mut total = 0usize;
        for step in 0..steps as u64 {
            let batch = union_of_shards(&s, step, 3);
            s.sample_into(step, &mut whole);
            assert_eq!(batch, whole, "step {step}");
            counts[batch.len()] += 1;
            total += batch.len();
        }
        // Binomial pmf by the recurrence p(k+1) = p(k)·(n−k)/(k+1)·q/(1−q).
        let mut pmf = vec![(1.0 - q).powi(n as i32)];
        for k in 0..n {
            let next = pmf[k] * (n - k) as f64 / (k + 1) as f64 * q / (1.0 - q);
            pmf.push(next);
        }
        // Cells: pool everything with expected count < 5 into the nearest tail cell.
        let expected: Vec<f64> = pmf.iter().map(|p| p * steps as f64).collect();
        let lo = expected.iter().position(|&e| e >= 5.0).unwrap();
        let hi = expected.iter().rposition(|&e| e >= 5.0).unwrap();
        let mut chi2 = 0.0;
        let mut cells = 0;
        for k in lo..=hi {
            let (obs, exp) = if k == lo {
                (
                    counts[..=lo].iter().sum::<u64>() as f64,
                    expected[..=lo].iter().sum::<f64>(),
                )
            } else if k == hi {
                (
                    counts[hi..].iter().sum::<u64>() as f64,
                    expected[hi..].iter().sum::<f64>(),
                )
            } else {
                (counts[k] as f64, expected[k])
            };
            chi2 += (obs - exp).powi(2) / exp;
            cells += 1;
        }
        // No parameter is estimated, so df = cells − 1. The 0.1% critical value comes from the
        // Wilson–Hilferty approximation df·(1 − 2/(9df) + z·√(2/(9df)))³ with z = 3.09 (for
        // df = 16 it gives 39.4; the table value is 39.25).
        let df = (cells - 1) as f64;
        let crit = df * (1.0 - 2.0 / (9.0 * df) + 3.09 * (2.0 / (9.0 * df)).sqrt()).powi(3);
        assert!(
            chi2 < crit,
            "chi2 = {chi2:.1} over {cells} cells, critical {crit:.1}"
        );
        // Mean batch size: standard error √(Nq(1−q)/steps) = 0.0218; allow 4.5 SE.
        let mean = total as f64 / steps as f64;
        let se = (n as f64 * q * (1.0 - q) / steps as f64).sqrt();
        assert!((mean - n as f64 * q).abs() < 4.5 * se, "mean {mean}");
    }

    /// Indices increase strictly (so no record twice in a step), stay in range, and every
    /// record is drawn: with q = 0.05 over 2000 steps a given record is missed with
    /// probability 0.95^2000 ≈ 3e-45, so any miss means a bug. Each record's inclusion count
    /// is Binomial(2000, 0.05): mean 100, sd 9.75; all 50 lie within 5.5 sd (two-sided level
    /// 4e-8 each, 2e-6 with Bonferroni over 50).
    #[test]
    fn every_record_can_be_drawn_and_none_twice() {
        let (n, q, steps) = (50usize, 0.05, 2000usize);
        let s = PoissonSampler::new(n, q, key(3)).unwrap();
        let mut hits = vec![0u32; n];
        let mut batch = Vec::new();
        for step in 0..steps as u64 {
            s.sample_into(step, &mut batch);
            assert!(batch.windows(2).all(|w| w[0] < w[1]), "{batch:?}");
            for &i in &batch {
                hits[i] += 1;
            }
        }
        assert!(hits.iter().all(|&h| h > 0), "{hits:?}");
        let sd = (steps as f64 * q * (1.0 - q)).sqrt();
        for h in hits {
            assert!((h as f64 - steps as f64 * q).abs() < 5.5 * sd, "{h}");
        }
        // q = 1 takes everything, once.
        PoissonSampler::new(4, 1.0, key(0))
            .unwrap()
            .sample_into(0, &mut batch);
        assert_eq!(batch, vec![0, 1, 2, 3]);
    }

    /// The parallel, piecewise sampling is the definition read straight through the stream
    /// (record i joins iff the 128-bit output number t·N + i is below the threshold), across
    /// piece boundaries and a last partial word, on one thread or several.
    #[test]
    fn pieces_in_parallel_make_the_batch_of_the_definition() {
        let (n, q, step) = (2 * PIECE + 77, 0.3, 5u64);
        let s = PoissonSampler::new(n, q, key(9)).unwrap();
        let t = threshold(q);
        // rand_chacha's ChaCha20, independently of the sampler's.
        let mut prf = rand_chacha::ChaCha20Rng::from_seed(s.key.0);
        prf.set_word_pos(u128::from(step) * n as u128 * 4);
        let want: Vec<usize> = (0..n)
            .filter(|_| ((u128::from(prf.next_u64()) << 64) | u128::from(prf.next_u64())) < t)
            .collect();
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut got = Vec::new();
            pool.install(|| s.sample_into(step, &mut got));
            assert_eq!(got, want, "{threads} threads");
        }
        assert!(want.len() > 2000 && want.len() < 3000, "{}", want.len());
    }

    /// Time of one step's sampling over MNIST's 60,000 records on 1 and 2 threads (a
    /// measurement, not a check: `cargo test --release -p dpml-learn --lib sampling_speed --
    /// --ignored --nocapture`).
    #[test]
    #[ignore]
    fn sampling_speed() {
        let s = PoissonSampler::new(60_000, 256.0 / 60_000.0, key(1)).unwrap();
        let (mut out, mut bits) = (Vec::new(), Vec::new());
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let steps = 500;
            let tick = std::time::Instant::now();
            pool.install(|| {
                for step in 0..steps {
                    s.sample_shard_with(step, Shard::ALL, &mut out, &mut bits);
                }
            });
            let per_step = tick.elapsed().as_secs_f64() / steps as f64;
            println!("{threads} thread(s): {:.3} ms per step", 1e3 * per_step);
        }
    }

    /// The threshold is q·2¹²⁸ exactly where that is an integer, and the batch depends on the
    /// key and the step (two keys, or two steps, agreeing on all 500 records has probability
    /// far below 10⁻¹⁰⁰ at q = ½).
    #[test]
    fn threshold_is_exact_and_batches_depend_on_key_and_step() {
        assert_eq!(threshold(0.5), 1u128 << 127);
        assert_eq!(threshold(0.25), 1u128 << 126);
        assert_eq!(threshold(0.75), 3u128 << 126);
        assert_eq!(threshold(2f64.powi(-100)), 1u128 << 28);
        let q = 0.1;
        let t = threshold(q);
        assert_eq!(t as f64, q * 2f64.powi(128));
        let (a, b) = (
            PoissonSampler::new(500, 0.5, key(1)).unwrap(),
            PoissonSampler::new(500, 0.5, key(2)).unwrap(),
        );
        let (mut x, mut y) = (Vec::new(), Vec::new());
        a.sample_into(4, &mut x);
        b.sample_into(4, &mut y);
        assert_ne!(x, y);
        a.sample_into(5, &mut y);
        assert_ne!(x, y);
        // The same (key, step) gives the same batch: sampling is a function, not a stream.
        a.sample_into(4, &mut y);
        assert_eq!(x, y);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(
            PoissonSampler::new(0, 0.5, key(0))
                .unwrap_err()
                .to_string()
                .contains("n = 0")
        );
        assert!(
            PoissonSampler::new(5, 0.0, key(0))
                .unwrap_err()
                .to_string()
                .contains("got 0")
        );
        assert!(
            PoissonSampler::new(5, f64::NAN, key(0))
                .unwrap_err()
                .to_string()
                .contains("NaN")
        );
    }
}
