//! ChaCha20's keystream as a `rand` generator: RustCrypto's `chacha20` cipher, which picks its
//! AVX-512, AVX2 or SSE2 code at run time (AVX-512 where the build sets `--cfg chacha20_avx512`,
//! as the workspace's `.cargo/config.toml` does).
//!
//! The words are exactly those of `rand_chacha`'s `ChaCha20Rng` (the same "djb" ChaCha20: 256-bit
//! key, 64-bit stream number as the nonce, 64-bit block counter, words read in order), so seeded
//! runs give what they gave before; only the speed differs: on the project's 2-core Xeon with
//! AVX-512, 0.66–0.74 against 2.2–2.4 ns a 32-bit word on a core (`rand_chacha` has no AVX-512
//! code). DP-SGD draws one or two words per parameter per step, so the keystream is a large share
//! of a private step's noise.

use chacha20::ChaCha20LegacyCore;
use chacha20::cipher::array::Array;
use chacha20::cipher::{Block, KeyIvInit, StreamCipherCore};
use rand::{CryptoRng, RngCore, SeedableRng};

/// ChaCha20 blocks made at once: the AVX-512 code works on 16 blocks side by side.
const BLOCKS: usize = 16;
/// Bytes in a ChaCha20 block.
const BLOCK_BYTES: usize = 64;
/// Bytes in the buffer.
const BUF_BYTES: usize = BLOCKS * BLOCK_BYTES;
/// 32-bit words in a ChaCha20 block.
const BLOCK_WORDS: u128 = 16;
/// The stream's length in words: 2⁶⁴ blocks, after which the block counter wraps to 0.
const STREAM_WORDS: u128 = BLOCK_WORDS << 64;

/// A ChaCha20 stream (key and stream number) read 32-bit word by word.
pub struct ChaChaStream {
    key: [u8; 32],
    stream: u64,
    core: ChaCha20LegacyCore,
    /// Keystream made ahead (its words little-endian, as ChaCha20 defines them); bytes from
    /// `next` (a multiple of 4) on are not yet used.
    buf: [Block<ChaCha20LegacyCore>; BLOCKS],
    next: usize,
}

impl ChaChaStream {
    /// Stream number `stream` of `key`, at its first word.
    pub fn new(key: [u8; 32], stream: u64) -> Self {
        Self {
            core: ChaCha20LegacyCore::new(&key.into(), &stream.to_le_bytes().into()),
            key,
            stream,
            buf: Default::default(),
            next: BUF_BYTES,
        }
    }

    /// The 256-bit key.
    pub fn key(&self) -> [u8; 32] {
        self.key
    }

    /// The stream number (ChaCha20's nonce).
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// The position of the next word in the stream.
    pub fn word_pos(&self) -> u128 {
        let made = u128::from(self.core.get_block_pos()) * BLOCK_WORDS;
        let unused = ((BUF_BYTES - self.next) / 4) as u128;
        // Blocks made before the counter wrapped sit at the stream's end.
        (made + STREAM_WORDS - unused) % STREAM_WORDS
    }

    /// Moves to word `pos` of the stream (taken modulo the stream's length, 2⁶⁸ words).
    pub fn set_word_pos(&mut self, pos: u128) {
        let pos = pos % STREAM_WORDS;
        self.core.set_block_pos((pos / BLOCK_WORDS) as u64);
        self.refill();
        self.next = 4 * (pos % BLOCK_WORDS) as usize;
    }

    /// The next [`BLOCKS`] blocks into the buffer (the block counter wraps past 2⁶⁴ − 1, as
    /// `rand_chacha`'s does).
    fn refill(&mut self) {
        self.core.write_keystream_blocks(&mut self.buf);
        self.next = 0;
    }

    fn buffered(&self) -> &[u8] {
        &Array::slice_as_flattened(&self.buf)[self.next..]
    }
}

/// The key and the keystream stay out of logs and panics.
impl std::fmt::Debug for ChaChaStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChaChaStream")
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

impl Clone for ChaChaStream {
    fn clone(&self) -> Self {
        let mut core = ChaCha20LegacyCore::new(&self.key.into(), &self.stream.to_le_bytes().into());
        core.set_block_pos(self.core.get_block_pos());
        Self {
            key: self.key,
            stream: self.stream,
            core,
            buf: self.buf,
            next: self.next,
        }
    }
}

impl RngCore for ChaChaStream {
    fn next_u32(&mut self) -> u32 {
        if self.next == BUF_BYTES {
            self.refill();
        }
        let word = u32::from_le_bytes(self.buffered()[..4].try_into().expect("4 bytes"));
        self.next += 4;
        word
    }

    /// Two words, the first in the low half.
    fn next_u64(&mut self) -> u64 {
        let lo = self.next_u32();
        u64::from(lo) | u64::from(self.next_u32()) << 32
    }

    /// The stream's bytes in order, whole words at a time: the unused bytes of a last
    /// partial word are dropped with it. Past the buffer, whole groups of 16 blocks
    /// are written straight into `dst` and the rest comes through a refilled buffer: the
    /// AVX-512 code makes 16 blocks at a time and takes slower narrow paths for fewer (a fill
    /// that started inside the buffer used to leave such a remainder in every bulk block of
    /// noise).
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        let from_buf = self.buffered().len().min(dst.len());
        let (head, rest) = dst.split_at_mut(from_buf);
        head.copy_from_slice(&self.buffered()[..from_buf]);
        self.next += from_buf.next_multiple_of(4);
        if rest.is_empty() {
            return;
        }
        let (whole, tail) = rest.split_at_mut(rest.len() / BUF_BYTES * BUF_BYTES);
        let (blocks, _) = Array::slice_as_chunks_mut(whole);
        self.core.write_keystream_blocks(blocks);
        if !tail.is_empty() {
            self.refill();
            tail.copy_from_slice(&self.buffered()[..tail.len()]);
            self.next = tail.len().next_multiple_of(4);
        }
    }
}

impl CryptoRng for ChaChaStream {}

impl SeedableRng for ChaChaStream {
    type Seed = [u8; 32];

    /// Stream 0 of key `seed`.
    fn from_seed(seed: [u8; 32]) -> Self {
        Self::new(seed, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;

    fn reference(key: [u8; 32], stream: u64) -> ChaCha20Rng {
        let mut r = ChaCha20Rng::from_seed(key);
        r.set_stream(stream);
        r
    }

    /// Every way of reading gives `rand_chacha`'s words, across buffer boundaries, with odd
    /// byte counts and after seeking, including where the block counter wraps.
    #[test]
    fn words_are_those_of_rand_chacha() {
        let key: [u8; 32] = std::array::from_fn(|i| (i * 7 + 3) as u8);
        for stream in [0, 1, u64::MAX] {
            let (mut ours, mut theirs) = (ChaChaStream::new(key, stream), reference(key, stream));
            for round in 0..200usize {
                match round % 4 {
                    0 => assert_eq!(ours.next_u32(), theirs.next_u32()),
                    1 => assert_eq!(ours.next_u64(), theirs.next_u64()),
                    _ => {
                        let n = (round * 37) % 3500;
                        let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
                        ours.fill_bytes(&mut a);
                        theirs.fill_bytes(&mut b);
                        assert_eq!(a, b, "fill of {n} bytes, round {round}");
                    }
                }
                assert_eq!(ours.word_pos(), theirs.get_word_pos(), "round {round}");
            }
        }
        let end = STREAM_WORDS - 5;
        for pos in [0, 15, 16, 255, 256, 1 << 40, end] {
            let (mut ours, mut theirs) = (ChaChaStream::new(key, 9), reference(key, 9));
            ours.set_word_pos(pos);
            theirs.set_word_pos(pos);
            assert_eq!(ours.word_pos(), pos);
            for _ in 0..300 {
                assert_eq!(ours.next_u32(), theirs.next_u32(), "from word {pos}");
                assert_eq!(ours.word_pos(), theirs.get_word_pos(), "from word {pos}");
            }
            // Whole blocks written straight into the destination, across the counter's wrap
            // for the last position.
            let (mut a, mut b) = (vec![0u8; 4099], vec![0u8; 4099]);
            ours.set_word_pos(pos);
            theirs.set_word_pos(pos);
            ours.fill_bytes(&mut a);
            theirs.fill_bytes(&mut b);
            assert_eq!(a, b, "from word {pos}");
            assert_eq!(ours.word_pos(), theirs.get_word_pos(), "from word {pos}");
        }
    }

    #[test]
    fn a_clone_continues_the_same_stream() {
        let mut a = ChaChaStream::new([5; 32], 3);
        a.next_u32();
        let mut b = a.clone();
        let (mut x, mut y) = ([0u8; 5000], [0u8; 5000]);
        a.fill_bytes(&mut x);
        b.fill_bytes(&mut y);
        assert_eq!(x, y);
        assert_eq!(a.word_pos(), b.word_pos());
    }
}
