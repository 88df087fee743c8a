//! The standard normal sampler of the floating-point noise path: Marsaglia and Tsang's
//! ziggurat with 1,024 layers, drawn from one 32-bit word of the ChaCha20 stream per sample
//! (99.6% of draws; the rest take more words).
//!
//! Generating the ChaCha20 stream is most of the cost of a normal draw, and rand_distr's
//! sampler spends a 64-bit word on each; here the word is split into 10 bits for the layer, 1
//! for the sign and 21 for the position in the layer, so a step's noise needs half the stream.
//! The layer and the position use separate bits (Marsaglia and Tsang's original reused the
//! low bits of the position as the layer, a dependence Doornik (2005) showed in the output).
//! A 21-bit position resolves each layer to 2⁻²¹ of its width (at most 1.9·10⁻⁶ standard
//! deviations, in the widest layer): the variance differs from 1 by far less than any test
//! over a training run can see, and like any floating-point Gaussian this is not an exact
//! release (see [`super::noise`]).
//!
//! The noise path draws in bulk ([`StandardNormal32::add_scaled`]): a block's words in one
//! fill from the stream, then a branch-free `f32` pass for the draws decided by their first
//! word, then the few wedge and tail draws in `f64`. The fast pass flags the draws it leaves
//! (rather than counting them as it goes), so nothing links one word to the next and it runs
//! 16 words to a vector on AVX-512, table look-ups as gathers. On the project's 2-core Xeon
//! this takes 1.2–1.3 ns per value on one core, of which the ChaCha20 stream is 0.66 ns
//! (1.6–1.75 ns with 256 layers, whose slow draws were a third of the cost; 2.2–2.4 ns with
//! 128; 4.2 ns with `rand_chacha`'s keystream and a fast pass that ran one word at a time;
//! 10.5 ns one `next_u32` call and one `f64` draw at a time on the earlier Zen 3 machine).
//!
//! # Citations
//! - G. Marsaglia, W. W. Tsang. *The Ziggurat Method for Generating Random Variables.*
//!   Journal of Statistical Software 5(8), 2000.
//! - J. A. Doornik. *An Improved Ziggurat Method to Generate Normal Random Samples.* 2005.

use std::sync::OnceLock;

use dpml_mechanisms::bulk::for_each_flagged;
use multiversion::multiversion;
use rand::{Rng, RngCore};

/// Bits of the word that pick the layer (the low bits); the next bit is the sign, the rest
/// the position in the layer.
const LAYER_BITS: u32 = 10;
/// Layers of the ziggurat. 1,024 rather than 256 or 128: the rectangles then decide 99.57% of
/// the draws instead of 98.5% or 97.2%, and the few wedge and tail draws left, each a scalar
/// `f64` computation with an `exp`, cost a tenth of the noise instead of a third.
const LAYERS: usize = 1 << LAYER_BITS;
/// The sign bit of the word.
const SIGN_BIT: u32 = 1 << LAYER_BITS;
/// The position is the word's top 32 − 11 = 21 bits.
const POSITION_SHIFT: u32 = LAYER_BITS + 1;
/// Right edge of the base layer for 1,024 layers: the r for which Marsaglia and Tsang's
/// recursion (2000) closes at the top (checked by a unit test).
const R: f64 = 4.038_849_846_109_505;
/// Area of each layer (and of the base layer with its tail) under exp(−x²/2).
const V: f64 = 1.226_324_646_353_085e-3;
/// Positions scale by 2⁻²¹.
const POSITION_SCALE: f64 = (1u64 << (32 - POSITION_SHIFT)) as f64;

/// The ziggurat's tables, computed once from R and V.
struct Tables {
    /// Positions below `k[i]` lie inside layer i's rectangle under the curve: accepted at once.
    k: [u32; LAYERS],
    /// Layer i's width / 2²¹: a position times `w[i]` is the sample.
    w: [f64; LAYERS],
    /// exp(−xᵢ²/2) at layer i's right edge xᵢ.
    f: [f64; LAYERS],
    /// For the bulk fast path: `w[i]` in single precision (a 21-bit position is exact in
    /// `f32`, so the product is within one `f32` rounding of the `f64` one) in the low 32 bits
    /// and `k[i]` in the high 32, so that one 64-bit gather a lane fetches both (two 32-bit
    /// gathers made the fast pass 10% slower).
    wk: [u64; LAYERS],
}

impl Tables {
    /// Marsaglia and Tsang's `zigset` for 1,024 layers, at 21-bit positions.
    fn build() -> Self {
        let (mut k, mut w, mut f) = ([0u32; LAYERS], [0f64; LAYERS], [0f64; LAYERS]);
        let mut dn = R;
        let mut tn = dn;
        let q = V / (-0.5 * dn * dn).exp();
        k[0] = (dn / q * POSITION_SCALE) as u32;
        k[1] = 0;
        w[0] = q / POSITION_SCALE;
        w[LAYERS - 1] = dn / POSITION_SCALE;
        f[0] = 1.0;
        f[LAYERS - 1] = (-0.5 * dn * dn).exp();
        for i in (1..LAYERS - 1).rev() {
            dn = (-2.0 * (V / dn + (-0.5 * dn * dn).exp()).ln()).sqrt();
            k[i + 1] = (dn / tn * POSITION_SCALE) as u32;
            tn = dn;
            f[i] = (-0.5 * dn * dn).exp();
            w[i] = dn / POSITION_SCALE;
        }
        let wk =
            std::array::from_fn(|i| u64::from((w[i] as f32).to_bits()) | u64::from(k[i]) << 32);
        Self { k, w, f, wk }
    }
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(Tables::build)
}

/// A uniform in (0, 1] with 53 random bits (never 0, so its logarithm is finite).
fn open_uniform(rng: &mut impl RngCore) -> f64 {
    ((rng.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Standard normal draws from `rng`, one at a time.
pub(crate) struct StandardNormal32 {
    tables: &'static Tables,
}

impl StandardNormal32 {
    pub(crate) fn new() -> Self {
        Self { tables: tables() }
    }

    /// One N(0, 1) draw (the tests' reference for the bulk path, which shares [`Self::finish`]).
    #[cfg(test)]
    pub(crate) fn sample(&self, rng: &mut impl RngCore) -> f64 {
        let word = rng.next_u32();
        self.finish(word, rng)
    }

    /// The N(0, 1) draw that starts with `word`: accepted in the layer's rectangle, else
    /// decided by the wedge or tail test on further draws from `rng`, else redrawn from a
    /// fresh word (so every draw is a complete, independent ziggurat sample).
    fn finish(&self, mut word: u32, rng: &mut impl RngCore) -> f64 {
        let t = self.tables;
        loop {
            let layer = word as usize % LAYERS;
            let negative = word & SIGN_BIT != 0;
            let position = word >> POSITION_SHIFT;
            let x = f64::from(position) * t.w[layer];
            let magnitude = if position < t.k[layer] {
                x
            } else if layer == 0 {
                // The tail beyond R, by Marsaglia's exponential rejection.
                loop {
                    let tx = -open_uniform(rng).ln() / R;
                    let ty = -open_uniform(rng).ln();
                    if ty + ty >= tx * tx {
                        break R + tx;
                    }
                }
            } else if t.f[layer] + open_uniform(rng) * (t.f[layer - 1] - t.f[layer])
                < (-0.5 * x * x).exp()
            {
                // The wedge between the rectangle and the curve.
                x
            } else {
                word = rng.next_u32();
                continue;
            };
            return if negative { -magnitude } else { magnitude };
        }
    }

    /// Adds `scale`·z to every value, with independent z ~ N(0, 1) drawn from `rng`.
    ///
    /// Works in blocks of [`BLOCK`] values: the block's first words come from the stream in
    /// one bulk fill (the stream is made 16 blocks at a time; a call per word costs as much as
    /// the arithmetic), then one branch-free pass accepts the ~99.6% of words that land inside
    /// their layer's rectangle, in `f32`, and notes the others; a second pass finishes those
    /// with [`Self::finish`] in `f64` (wedges and the tail), drawing their extra words from
    /// the stream after the block's. The word → value map is fixed, so the result depends
    /// only on the stream.
    pub(crate) fn add_scaled(&self, values: &mut [f32], scale: f64, rng: &mut impl RngCore) {
        self.draw_scaled(values, scale, rng, false);
    }

    /// Sets every value to `scale`·z, with z as [`Self::add_scaled`] draws them from the same
    /// stream (the old values, which may be anything, are not read).
    pub(crate) fn write_scaled(&self, values: &mut [f32], scale: f64, rng: &mut impl RngCore) {
        self.draw_scaled(values, scale, rng, true);
    }

    /// [`Self::add_scaled`], or [`Self::write_scaled`] when `overwrite`.
    fn draw_scaled(&self, values: &mut [f32], scale: f64, rng: &mut impl RngCore, overwrite: bool) {
        let t = self.tables;
        let scale32 = scale as f32;
        let mut words = [0u32; BLOCK];
        let mut outside = [0u8; BLOCK];
        for block in values.chunks_mut(BLOCK) {
            // Whole `u32`s (the stream's bytes, little-endian): the vectorised fast pass loads
            // them as they are, where words built from single bytes took a dozen shuffles.
            let words = &mut words[..block.len()];
            rng.fill(words);
            add_inside(t, scale32, words, block, &mut outside, overwrite);
            for_each_flagged(&outside[..block.len()], |i| {
                block[i] += (scale * self.finish(words[i], rng)) as f32;
            });
        }
    }
}

/// The fast pass of [`StandardNormal32::add_scaled`] over one block: adds `scale ·` every draw
/// whose word lands inside its layer's rectangle (onto 0 rather than the value when
/// `overwrite`) and marks the others (1 in `outside`, else 0). Compiled for each SIMD level
/// and chosen at run time: with no dependence between the words, the loop runs 16 words to a
/// vector on AVX-512 (the table look-ups are gathers, which the baseline x86-64 build does not
/// have).
#[multiversion(targets = "simd")]
fn add_inside(
    t: &Tables,
    scale: f32,
    words: &[u32],
    block: &mut [f32],
    outside: &mut [u8; BLOCK],
    overwrite: bool,
) {
    for ((v, &word), out) in block.iter_mut().zip(words).zip(outside.iter_mut()) {
        let layer = word as usize % LAYERS;
        let position = word >> POSITION_SHIFT;
        // The word's sign bit moved onto the float's. (A 21-bit position converts as a
        // signed integer: one instruction, unlike u32 → f32.)
        let wk = t.wk[layer];
        let x = f32::from_bits(
            ((position as i32) as f32 * f32::from_bits(wk as u32)).to_bits()
                ^ ((word & SIGN_BIT) << (31 - LAYER_BITS)),
        );
        let inside = position < (wk >> 32) as u32;
        let base = if overwrite { 0.0 } else { *v };
        *v = base + if inside { scale * x } else { 0.0 };
        *out = u8::from(!inside);
    }
}

/// Values per bulk block of [`StandardNormal32::add_scaled`]: its words (4 KiB) and the
/// values stay in the L1 cache between the two passes.
const BLOCK: usize = 1024;

#[cfg(test)]
mod tests {
    use dpml_mechanisms::DpRng;
    use dpml_mechanisms::normal::normal_cdf;

    use super::*;

    /// Chi-square goodness of fit against N(0, 1) over 40 equal-width cells on [−5, 5] plus
    /// the two tails; and the fourth moment (a wrong tail or wedge moves it).
    fn assert_standard_normal(draws: &[f64]) {
        let n = draws.len();
        let cells = 40usize;
        let mut counts = vec![0u64; cells + 2];
        let (mut m2, mut m4) = (0.0, 0.0);
        for &x in draws {
            m2 += x * x;
            m4 += x.powi(4);
            let cell = if x < -5.0 {
                0
            } else if x >= 5.0 {
                cells + 1
            } else {
                1 + ((x + 5.0) / 10.0 * cells as f64) as usize
            };
            counts[cell.min(cells + 1)] += 1;
        }
        let edges: Vec<f64> = (0..=cells)
            .map(|i| -5.0 + 10.0 * i as f64 / cells as f64)
            .collect();
        let mut probs = vec![normal_cdf(-5.0)];
        probs.extend(
            edges
                .windows(2)
                .map(|e| normal_cdf(e[1]) - normal_cdf(e[0])),
        );
        probs.push(normal_cdf(-5.0));
        // Pool the two tails into their neighbours (expected counts below 5 otherwise).
        let (mut obs, mut exp) = (Vec::new(), Vec::new());
        for (i, (&c, &p)) in counts.iter().zip(&probs).enumerate() {
            if i == 1 || i == cells + 1 {
                *obs.last_mut().unwrap() += c as f64;
                *exp.last_mut().unwrap() += p * n as f64;
            } else {
                obs.push(c as f64);
                exp.push(p * n as f64);
            }
        }
        let stat: f64 = obs.iter().zip(&exp).map(|(o, e)| (o - e).powi(2) / e).sum();
        // df = 39; the 1e-6 upper quantile of chi-square(39) is about 95.
        assert!(stat < 95.0, "chi-square {stat} over {} cells", obs.len());
        let (m2, m4) = (m2 / n as f64, m4 / n as f64);
        // Sample variance sd √(2/n) ≈ 0.0022; fourth moment sd √((105 − 9)/n) ≈ 0.0155.
        assert!((m2 - 1.0).abs() < 4.9 * (2.0 / n as f64).sqrt(), "{m2}");
        assert!((m4 - 3.0).abs() < 4.9 * (96.0 / n as f64).sqrt(), "{m4}");
    }

    /// One draw at a time, 400,000 draws.
    #[test]
    fn draws_follow_the_standard_normal() {
        let mut rng = DpRng::seeded(31);
        let normal = StandardNormal32::new();
        let draws: Vec<f64> = (0..400_000).map(|_| normal.sample(rng.as_rng())).collect();
        assert_standard_normal(&draws);
    }

    /// The bulk path (single-precision fast pass, deferred wedges and tails) on 400,000
    /// values in uneven pieces, so that partial blocks are covered too.
    #[test]
    fn bulk_draws_follow_the_standard_normal() {
        let mut rng = DpRng::seeded(33);
        let normal = StandardNormal32::new();
        let mut values = vec![0.0f32; 400_000];
        for piece in values.chunks_mut(3 * BLOCK + 17) {
            normal.add_scaled(piece, 1.0, rng.as_rng());
        }
        let draws: Vec<f64> = values.into_iter().map(f64::from).collect();
        assert_standard_normal(&draws);
    }

    /// A bulk fill adds exactly `scale`·z: the same stream with scale 2 gives twice the values
    /// of scale 1 (the fast pass's sign bit and the deferred pass agree on every value), and
    /// the values already there are kept.
    #[test]
    fn bulk_fill_adds_scaled_draws() {
        let normal = StandardNormal32::new();
        let key = DpRng::seeded(34).stream_key();
        let mut one = vec![0.0f32; 5000];
        normal.add_scaled(&mut one, 1.0, key.stream(0).as_rng());
        let mut two = vec![1.0f32; 5000];
        normal.add_scaled(&mut two, 2.0, key.stream(0).as_rng());
        for (a, b) in one.iter().zip(&two) {
            assert!(
                (2.0 * a + 1.0 - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "{a} {b}"
            );
        }
        assert!(one.iter().any(|&x| x < 0.0) && one.iter().any(|&x| x > 0.0));
    }

    #[test]
    fn one_word_decides_most_draws() {
        // 0.43% of positions fall outside their layer's rectangle (layer 1 has none) and take
        // a 64-bit uniform (two words), a few of them a fresh word after a rejected wedge:
        // about 1.011 words per draw (256 layers: 1.49% outside, 1.04 words). A wrong table
        // sends far more draws to the slow paths.
        struct Counting<'a>(&'a mut DpRng, u64);
        impl RngCore for Counting<'_> {
            fn next_u32(&mut self) -> u32 {
                self.1 += 1;
                self.0.next_u64() as u32
            }
            fn next_u64(&mut self) -> u64 {
                self.1 += 2;
                self.0.next_u64()
            }
            fn fill_bytes(&mut self, dst: &mut [u8]) {
                self.0.as_rng().fill_bytes(dst);
            }
        }
        let mut rng = DpRng::seeded(32);
        let mut counting = Counting(&mut rng, 0);
        let normal = StandardNormal32::new();
        let n = 100_000;
        for _ in 0..n {
            normal.sample(&mut counting);
        }
        let per_draw = counting.1 as f64 / f64::from(n);
        assert!(
            per_draw > 1.006 && per_draw < 1.016,
            "{per_draw} words per draw"
        );
    }

    /// R and V are the 1,024-layer ziggurat's: V is the base layer's area (its rectangle
    /// r·f(r) plus the tail beyond r), and the recursion that builds the layers of area V down
    /// from r ends with a top layer of area V too. Constants for another layer count fail both.
    #[test]
    fn the_layers_close_at_the_top() {
        let f = |x: f64| (-0.5 * x * x).exp();
        let tail = (2.0 * std::f64::consts::PI).sqrt() * normal_cdf(-R);
        assert!(((R * f(R) + tail) / V - 1.0).abs() < 1e-9, "base layer");
        let mut x = R;
        for _ in 0..LAYERS - 2 {
            x = (-2.0 * (V / x + f(x)).ln()).sqrt();
        }
        let top = x * (1.0 - f(x));
        assert!((top / V - 1.0).abs() < 1e-9, "top layer {top} against {V}");
    }

    /// Writing draws ignores what the values held (NaN here) and gives exactly the draws that
    /// adding onto zeros gives from the same stream.
    #[test]
    fn writing_equals_adding_onto_zeros() {
        let normal = StandardNormal32::new();
        let key = DpRng::seeded(35).stream_key();
        let mut added = vec![0.0f32; 3 * BLOCK + 5];
        normal.add_scaled(&mut added, 1.5, key.stream(2).as_rng());
        let mut written = vec![f32::NAN; added.len()];
        normal.write_scaled(&mut written, 1.5, key.stream(2).as_rng());
        assert_eq!(added, written);
    }
}
