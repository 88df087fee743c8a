//! The exact discrete Gaussian at table speed: rejection from a step envelope whose steps are
//! drawn with an alias table, for the millions of draws of DP-SGD with exact noise.
//!
//! [`crate::exact::DiscreteGaussian`] (Canonne, Kamath, Steinke 2020) needs about a dozen coins,
//! several of them data-dependent loops, per sample: ~100 ns. This sampler draws the same law,
//! P\[y\] ∝ f(y) = exp(−y²/(2σ²)) on ℤ, from one 64-bit word in almost every case.
//!
//! # The construction (all of it exact)
//! |y| is drawn from the half law on ℕ with weights f(x) and given a random sign, a negative
//! zero being redrawn (which leaves weight f(0)/2 at 0 and f(x)/2 at ±x, the law of y).
//!
//! For x ∈ ℕ the envelope is a staircase: ℕ is cut into B blocks of W = 2ʷ integers covering
//! [0, 8σ] and a tail beyond. Block b gets an integer weight w_b ≥ K·W·f(bW) (f decreases, so
//! f(bW) is its largest value) and the tail a weight w_T ≥ K·2^q·f(BW), for a scale K (an exact
//! dyadic `f64`). The weights, padded to sum to exactly n·2³² for n = 2^s slots, fill a Walker
//! alias table built in integer arithmetic, so a uniform slot and a uniform 32-bit coin pick
//! block b with probability exactly w_b/(n·2³²). Inside a block the point x is uniform; in the
//! tail x = BW + m with m geometric, P\[m\] = 2^−q·ρ^m for ρ = 1 − 2^−q ≥ exp(−BW/σ²). Either
//! way the proposal has a known rational probability g(x), and x is accepted with probability
//! p(x) = f(x)/(c·g(x)) ≤ 1 for a common constant, i.e. p(x) = K·W·f(x)/w_b in a block and
//! K·2^q·f(x)/(w_T·ρ^m) in the tail. Accepted draws then have law ∝ f: plain rejection sampling.
//! The tail envelope dominates because f(BW + m)/f(BW) ≤ exp(−BW·m/σ²) ≤ ρ^m.
//!
//! The acceptance coin U is compared with p(x) by [`crate::exp_compare::uniform_below`]:
//! within a block p(x) ≥ p((b+1)W − 1), and a precomputed lower bound of that (10 bits)
//! accepts at once more than 99% of draws; the rest compare U with p(x) in floating point with
//! a margin and, in the rare case U falls inside the margin, in exact rational arithmetic.
//! Every bound the tables hold is computed with a relative margin of 2⁻³⁰ around `libm::exp`,
//! a thousand times its error, and the unit tests check each of them against exact arithmetic.
//!
//! # Bits per draw
//! One 48-bit word of the ChaCha20 stream gives, at fixed places, the slot (12 bits; the table
//! always has 2¹² slots, the unused ones of weight 0), the first 13 bits of the alias coin (the
//! other 19 are drawn only when those tie with the slot's threshold, probability 2⁻¹³), the
//! sign, the first 10 bits of U and the offset in the block (w ≤ 12 bits). Generating the
//! stream is the larger part of a draw's cost, so the word is as short as the fields allow.
//! The bits go where a draw costs least: at σ² = 2³⁰ the immediate test leaves 0.37% of draws
//! to the full test (which draws further bits of U), 0.16% rejected (with 2¹¹ slots, 16 coin
//! bits and 8 of U: 0.83% and 0.3%, the full tests then a fifth of the bulk sampler's time).
//!
//! For the bulk path ([`AliasDiscreteGaussian::fill`]) each slot also holds one packed
//! 64-bit descriptor: its own block's and its alias's index and immediate threshold, and the
//! slot's coin threshold, so that a draw decided by its word costs one load and a few shifts,
//! without a branch on any random bit.
//!
//! # Citations
//! - C. Canonne, G. Kamath, T. Steinke. *The Discrete Gaussian for Differential Privacy.*
//!   NeurIPS 2020 (the law and its privacy).
//! - J. Buchmann et al. *Discrete Ziggurat: A Time-Memory Trade-off for Sampling from a
//!   Gaussian Distribution over the Integers.* SAC 2013 (the staircase envelope).
//! - A. Walker. *An Efficient Method for Generating Discrete Random Variables with General
//!   Distributions.* ACM TOMS 1977; M. Vose, IEEE TSE 1991 (the alias table).

use multiversion::multiversion;
use num_bigint::BigInt;
use num_rational::BigRational;

use crate::bulk::for_each_flagged;
use crate::exp_compare::{ExpProb, uniform_below};
use crate::grid::round_to_integer;
use crate::validate::invalid;
use crate::{DpRng, MechanismError, Rational};

/// Slots of the alias table (2¹²): at most 2¹² − 1 blocks plus the tail. Twice the blocks of
/// 2¹¹ halve each block's width and with it the envelope's excess over f, so about half as
/// many draws are rejected or take the full test (`exact_bench 8000000 bulk` 2.20 → 2.05 ns a
/// draw on the 2-core Xeon; the table is 32 KiB).
const SLOT_BITS: u32 = 12;
const SLOTS: usize = 1 << SLOT_BITS;
/// Where the fields of a word start (module docs, "Bits per draw"): the slot, the coin, the
/// sign and the offset's first 6 bits in the low 32 bits, U and the offset's other 6 bits in
/// the high 16, so that no field straddles the two halves.
const COIN_SHIFT: u32 = SLOT_BITS;
const SIGN_SHIFT: u32 = COIN_SHIFT + COIN_BITS;
const OFFSET_LOW_SHIFT: u32 = SIGN_SHIFT + 1;
const OFFSET_LOW_BITS: u32 = 32 - OFFSET_LOW_SHIFT;
/// In the high half.
const OFFSET_HIGH_SHIFT: u32 = ACCEPT_BITS;
/// Widest block, 2¹²: the offset takes the word's 12 bits that are not otherwise used.
const MAX_WIDTH_BITS: u32 = OFFSET_LOW_BITS + 16 - OFFSET_HIGH_SHIFT;
/// A slot's descriptor packs, from the low bits, its own block's index (12 bits) and immediate
/// threshold (10 bits), the same two of its alias, and the slot's coin threshold (14 bits:
/// 0..=2¹³): 58 bits.
const BLOCK_MASK: u32 = (1 << SLOT_BITS) - 1;
const IMMEDIATE_MASK: u32 = (1 << ACCEPT_BITS) - 1;
/// Bits of one block's half of a descriptor (index and immediate threshold).
const HALF_BITS: u32 = SLOT_BITS + ACCEPT_BITS;
const THRESHOLD_SHIFT: u32 = 2 * HALF_BITS;
/// Bits of U taken from the sample's word for the immediate acceptance test.
const ACCEPT_BITS: u32 = 10;
/// Samples per block of [`AliasDiscreteGaussian::fill`]: their words (3 KiB) and the samples
/// stay in the L1 cache between its two passes.
const BULK: usize = 512;
/// Bits of the alias coin taken from the sample's word (of 32).
const COIN_BITS: u32 = 13;
/// The alias coin's other bits, drawn only on a tie.
const COIN_REST: u32 = 32 - COIN_BITS;
/// Each slot of the alias table holds 2³² units of weight.
const SLOT_UNITS: u64 = 1 << 32;
/// The alias table packs the probability (0..=2³², 33 bits) and the alias block above it.
const PROB_BITS: u32 = 33;
const PROB_MASK: u64 = (1 << PROB_BITS) - 1;
/// Relative margin of every table bound around `libm::exp` (whose error is about 2⁻⁵²).
const MARGIN: f64 = 1.0 / (1u64 << 30) as f64;
/// Relative widening of a rounded exponent, covering its few roundings (2⁻⁵¹ at most).
const EXPONENT_SLACK: f64 = 1.0 / (1u64 << 40) as f64;
/// Largest σ² accepted (σ = 2¹⁹): 8σ in 2¹² − 1 blocks of 2^w points needs w ≤ 11, within
/// the word's 12 offset bits.
const MAX_SIGMA2_LOG2: u32 = 38;
/// The blocks cover [0, COVER_SIGMAS·σ]; beyond, f < e⁻³² and the tail takes over.
const COVER_SIGMAS: f64 = 8.0;

/// The discrete Gaussian with rational σ², by alias-table rejection (module docs).
#[derive(Debug, Clone)]
pub struct AliasDiscreteGaussian {
    sigma2: Rational,
    /// d/(2n) for σ² = n/d, in `f64` (for the floating-point stage only).
    half_precision: f64,
    width_bits: u32,
    /// Number of blocks B; slot entries and `weights` index B is the tail.
    blocks: usize,
    /// Per slot: probability of the slot's own block (units of 2⁻³²) | alias block << 33.
    slots: Vec<u64>,
    /// Per slot: the packed descriptor of its own block and its alias (module docs).
    descriptors: Box<[u64; SLOTS]>,
    /// Per block: U below immediate\[b\]/2¹⁰ accepts any point of the block; 0 for the tail
    /// (index B), whose draws always take the full test.
    immediate: Vec<u32>,
    /// Per block and the tail: the integer weight.
    weights: Vec<u64>,
    /// Per block and the tail: ln of the weight, for the floating-point stage (computed once:
    /// a logarithm per full test made `exact_bench 8000000 bulk` 3.3 ns a draw, now 3.1).
    log_weights: Vec<f64>,
    /// K, an exact dyadic rational.
    scale: f64,
    /// ln K, for the floating-point stage.
    log_scale: f64,
    /// q of the tail's geometric proposal, ρ = 1 − 2^−q.
    tail_bits: u32,
}

/// γ = x²/(2σ²) in `f64` from `half_precision` = 1/(2σ²): relative error below 2⁻⁵¹.
fn gamma_f64(x: u64, half_precision: f64) -> f64 {
    (x as f64) * (x as f64) * half_precision
}

/// Upper and lower bounds of exp(−γ) from a rounded γ (see [`EXPONENT_SLACK`] and [`MARGIN`]).
fn exp_upper(gamma: f64) -> f64 {
    (libm::exp(-gamma * (1.0 - EXPONENT_SLACK)) * (1.0 + MARGIN)).min(1.0)
}

fn exp_lower(gamma: f64) -> f64 {
    libm::exp(-gamma * (1.0 + EXPONENT_SLACK)) * (1.0 - MARGIN)
}

impl AliasDiscreteGaussian {
    /// The sampler for `σ² = num/den`.
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] when σ² is 0 or above 2³⁸.
    pub fn new(sigma2: Rational) -> Result<Self, MechanismError> {
        let sigma = (sigma2.num() as f64 / sigma2.den() as f64).sqrt();
        Self::with_cover(sigma2, (COVER_SIGMAS * sigma).ceil() as u64 + 1)
    }

    /// The sampler with blocks covering at least [0, cover) (tests shorten it to reach the
    /// tail often).
    fn with_cover(sigma2: Rational, cover: u64) -> Result<Self, MechanismError> {
        let (n, d) = (sigma2.num(), sigma2.den());
        if n == 0 {
            return Err(invalid(format!(
                "discrete Gaussian sigma^2 must be > 0, got {sigma2}"
            )));
        }
        if u128::from(n) > u128::from(d) << MAX_SIGMA2_LOG2 {
            return Err(invalid(format!(
                "discrete Gaussian sigma^2 = {sigma2} is too large for the table sampler \
                 (at most 2^{MAX_SIGMA2_LOG2})"
            )));
        }
        let half_precision = d as f64 / (2.0 * n as f64);
        let max_blocks = SLOTS as u64 - 1;
        let width_bits = (0..64)
            .find(|&w| cover.div_ceil(1 << w) <= max_blocks)
            .expect("a 64-bit cover fits in 2^12 blocks of 2^53");
        let blocks = cover.div_ceil(1 << width_bits).max(1) as usize;
        debug_assert!(
            width_bits <= MAX_WIDTH_BITS,
            "σ² ≤ 2^38 covers 8σ with 2^12 blocks of 2^11"
        );
        let width = (1u64 << width_bits) as f64;
        let gamma = |x: u64| gamma_f64(x, half_precision);
        let end = (blocks as u64) << width_bits;

        // The tail's geometric ratio ρ = 1 − 2^−q must be at least exp(−BW/σ²).
        let decay = exp_upper(2.0 * end as f64 * half_precision);
        let tail_bits = (1..63)
            .find(|&q| (-f64::from(q)).exp2() <= (1.0 - decay) * (1.0 - 1e-6))
            .ok_or_else(|| invalid(format!("sigma^2 = {sigma2} is too large for the table")))?;

        // Upper masses of the envelope, then the scale K that makes the integer weights sum
        // to at most n·2³² (each rounds up by < 1 and is at least 1).
        let mut masses: Vec<f64> = (0..blocks as u64)
            .map(|b| width * exp_upper(gamma(b << width_bits)))
            .collect();
        masses.push(f64::from(tail_bits).exp2() * exp_upper(gamma(end)));
        let total_units = SLOTS as u64 * SLOT_UNITS;
        let total_mass: f64 = masses.iter().sum();
        let scale = (total_units - 4 * (blocks as u64 + 2)) as f64 / total_mass * (1.0 - MARGIN);
        let mut weights: Vec<u64> = masses
            .iter()
            .map(|m| ((m * scale).ceil() as u64).max(1))
            .collect();
        let spare = total_units - weights.iter().sum::<u64>();
        // The padding raises the largest block's envelope a little (its acceptance falls by
        // about 2⁻³⁰); every envelope only has to stay above f.
        weights[0] += spare;

        let immediate: Vec<u32> = (0..blocks)
            .map(|b| {
                let last = (((b as u64) + 1) << width_bits) - 1;
                let p = exp_lower(gamma(last)) * width * scale / weights[b] as f64;
                let t = (p * (1.0 - MARGIN) * f64::from(1u32 << ACCEPT_BITS)).floor();
                t.clamp(0.0, f64::from(1u32 << ACCEPT_BITS)) as u32
            })
            .chain([0])
            .collect();
        let mut padded = weights.clone();
        padded.resize(SLOTS, 0);
        let slots = alias_table(&padded);
        Ok(Self {
            sigma2,
            half_precision,
            width_bits,
            blocks,
            descriptors: descriptors(&slots, &immediate),
            slots,
            immediate,
            log_weights: weights.iter().map(|&w| libm::log(w as f64)).collect(),
            weights,
            scale,
            log_scale: libm::log(scale),
            tail_bits,
        })
    }

    /// σ² as given.
    pub fn sigma2(&self) -> Rational {
        self.sigma2
    }

    /// One exact sample, from as many 64-bit words of `rng` as the draw needs (one in about
    /// 99% of draws).
    pub fn sample(&self, rng: &mut DpRng) -> i64 {
        loop {
            let word = rng.next_u64();
            if let Some(y) = self.attempt(word, rng) {
                return y;
            }
        }
    }

    /// Fills `out` with independent exact samples, the same law as [`Self::sample`] but drawn
    /// in bulk: per block of 512 samples, one 48-bit word each comes from the stream in one fill
    /// (the stream is made 16 blocks at a time; a call per word costs about as much as the rest
    /// of the draw): the words' low 32 bits side by side, then their high 16 bits, so that a
    /// vector of words loads from two places in order instead of being gathered from every
    /// sixth byte. Then a branch-free pass keeps every draw that the immediate test accepts
    /// (more than 99%) and notes the others, which a second pass finishes as [`Self::sample`]
    /// would from the same word, taking their further words from the stream after the block's.
    /// Every word is used by one draw only, so the draws stay independent; the result depends
    /// only on the stream.
    ///
    /// The samples are written as `f64`, which holds them exactly: a draw of magnitude 2⁵³
    /// would need its geometric tail to run through more than 2⁴⁷ words of the stream.
    /// (Callers add them to other `f64` integers, where `i64` would need scalar conversions.)
    pub fn fill(&self, out: &mut [f64], rng: &mut DpRng) {
        let mut words = Words::default();
        let mut undecided = [0u8; BULK];
        let mut ints = [0i32; BULK];
        for block in out.chunks_mut(BULK) {
            words.fill(block.len(), rng, &self.descriptors);
            let ints = &mut ints[..block.len()];
            let undecided = &mut undecided[..block.len()];
            decide(self.width_bits, &words, ints, undecided);
            // Widened here rather than in `decide`, whose lanes then all stay 32 bits wide.
            block
                .iter_mut()
                .zip(ints.iter())
                .for_each(|(b, &i)| *b = f64::from(i));
            for_each_flagged(undecided, |i| {
                block[i] = self.finish(words.word(i), rng) as f64;
            });
        }
    }

    /// Rounds every value v to the grid g·ℤ and adds g times an independent exact draw y of
    /// this law, in place: v becomes the `f32` nearest to (round(v/g) + y)·g, a function of the
    /// noisy integer round(v/g) + y alone (so the rounding to `f32` is post-processing of it),
    /// round being to the nearest integer, ties to even, after clamping |v/g| at 2⁵⁰
    /// (1-Lipschitz, so sensitivity bounds hold) and taking NaN as 0. The draws are those
    /// [`Self::fill`] makes from the same stream, in the same order; here each block's decided
    /// draws go onto the values as they are decided, in `f32` (the values `f64` gives, on every
    /// grid from 10⁻³⁰ to 10²⁰; in `f64` outside it), while in the cache (drawing into an `f64`
    /// buffer and adding it in a second pass took 5–7% longer for the MLP's 407k coordinates on
    /// the 2-core Xeon).
    ///
    /// # Panics
    /// When `granularity` is not a power of two of the normal `f64` range (dividing by it must
    /// be exact).
    pub fn add_on_grid(&self, values: &mut [f32], granularity: f64, rng: &mut DpRng) {
        let inv_g = 1.0 / granularity;
        assert!(
            granularity.is_normal()
                && inv_g.is_normal()
                && granularity > 0.0
                && granularity.to_bits() & ((1 << 52) - 1) == 0,
            "grid granularity {granularity} is not a power of two"
        );
        // The grid in `f32` where that gives the same values (nearly always).
        let narrow = F32_GRIDS
            .contains(&granularity)
            .then_some((granularity as f32, inv_g as f32));
        let mut words = Words::default();
        let mut undecided = [0u8; BULK];
        let mut ints = [0i32; BULK];
        for block in values.chunks_mut(BULK) {
            words.fill(block.len(), rng, &self.descriptors);
            let (ints, undecided) = (&mut ints[..block.len()], &mut undecided[..block.len()]);
            if let Some(grid) = narrow {
                decide_onto_grid(self.width_bits, &words, block, undecided, grid);
            } else {
                decide(self.width_bits, &words, ints, undecided);
                add_decided_on_grid(block, ints, undecided, granularity, inv_g);
            }
            for_each_flagged(undecided, |i| {
                let y = self.finish(words.word(i), rng);
                block[i] = on_grid(block[i], y as f64, granularity, inv_g);
            });
        }
    }

    /// The draw that starts with `word`, as [`Self::sample`] would finish it.
    fn finish(&self, word: u64, rng: &mut DpRng) -> i64 {
        self.attempt(word, rng).unwrap_or_else(|| self.sample(rng))
    }

    /// One attempt from its first word (and further words of `rng` where the word alone does
    /// not decide): the sample, or `None` when the proposal is rejected.
    #[inline(always)]
    fn attempt(&self, word: u64, rng: &mut DpRng) -> Option<i64> {
        let f = Fields::of(word, self.width_bits);
        let u_prefix = u64::from(f.u_prefix);
        let block = self.block(rng, f.slot as usize, u64::from(f.coin));
        let x = if block < self.blocks {
            let x = ((block as u64) << self.width_bits) | u64::from(f.offset);
            if u_prefix >= u64::from(self.immediate[block])
                && !self.accept_in_block(rng, block, x, u_prefix)
            {
                return None;
            }
            x
        } else {
            self.tail(rng, u_prefix)?
        };
        if f.negative && x == 0 {
            return None;
        }
        Some(signed(i64::try_from(x).ok()?, f.negative))
    }

    /// The block of alias slot `slot` for a coin whose first 13 bits are `coin`: the slot's
    /// own block when the 32-bit coin is below its probability, its alias otherwise.
    fn block(&self, rng: &mut DpRng, slot: usize, coin: u64) -> usize {
        let entry = self.slots[slot];
        let prob = entry & PROB_MASK;
        let own = if coin == prob >> COIN_REST && prob & ((1 << COIN_REST) - 1) != 0 {
            tie_break(rng, coin, prob)
        } else {
            coin < prob >> COIN_REST
        };
        let alias = (entry >> PROB_BITS) as usize;
        if own { slot } else { alias }
    }

    fn gamma(&self, x: u64) -> f64 {
        gamma_f64(x, self.half_precision)
    }

    /// γ = x²/(2σ²) exactly.
    fn gamma_exact(&self, x: u64) -> BigRational {
        let x = BigInt::from(x);
        BigRational::new(
            &x * &x * BigInt::from(self.sigma2.den()),
            BigInt::from(2u8) * BigInt::from(self.sigma2.num()),
        )
    }

    /// The exact rational value of K.
    fn scale_exact(&self) -> BigRational {
        BigRational::from_float(self.scale).expect("the scale is finite")
    }

    /// Whether U < K·W·f(x)/w_b, past the immediate test. Kept out of line (about 1% of draws
    /// come here): inlined, its loop-invariant logarithms were hoisted into every sample.
    #[cold]
    #[inline(never)]
    fn accept_in_block(&self, rng: &mut DpRng, block: usize, x: u64, u_prefix: u64) -> bool {
        let log_width = f64::from(self.width_bits) * std::f64::consts::LN_2;
        self.accept(rng, u_prefix, x, block, log_width, || {
            BigInt::from(1u64 << self.width_bits).into()
        })
    }

    /// Whether U < K·E·f(x)/w for an envelope factor E ≥ 1 (W in a block, 2^q·ρ^−m in the
    /// tail) and the weight w of block `block` (B: the tail): `log_envelope` is ln E in `f64`,
    /// `envelope` gives E exactly.
    fn accept(
        &self,
        rng: &mut DpRng,
        u_prefix: u64,
        x: u64,
        block: usize,
        log_envelope: f64,
        envelope: impl FnOnce() -> BigRational,
    ) -> bool {
        let gamma = self.gamma(x);
        let weight = self.weights[block];
        let (log_scale, log_weight) = (self.log_scale, self.log_weights[block]);
        let log_p = log_scale + log_envelope - log_weight - gamma;
        let magnitude = log_scale.abs() + log_envelope + log_weight.abs() + gamma;
        uniform_below(rng, u_prefix, ACCEPT_BITS, log_p, magnitude, || ExpProb {
            gamma: self.gamma_exact(x),
            factor: self.scale_exact() * envelope() / BigInt::from(weight),
        })
    }

    /// A tail proposal x = BW + m and its acceptance, `None` when rejected (out of line as
    /// [`Self::accept_in_block`]).
    #[cold]
    #[inline(never)]
    fn tail(&self, rng: &mut DpRng, u_prefix: u64) -> Option<u64> {
        let q = self.tail_bits;
        // m = failures before the first success of Bernoulli(2^−q): q-bit groups until one is 0.
        let mut m = 0u64;
        'draw: loop {
            let mut word = rng.next_u64();
            for _ in 0..64 / q {
                if word & ((1u64 << q) - 1) == 0 {
                    break 'draw;
                }
                word >>= q;
                m += 1;
            }
        }
        let x = ((self.blocks as u64) << self.width_bits).checked_add(m)?;
        // E = 2^q·ρ^−m, ln E = q·ln 2 − m·ln ρ.
        let log_envelope = f64::from(q) * std::f64::consts::LN_2
            - (m as f64) * libm::log1p(-(-f64::from(q)).exp2());
        let accepted = self.accept(rng, u_prefix, x, self.blocks, log_envelope, || {
            let two_q = BigInt::from(1u64) << q;
            let inv_rho = BigRational::new(two_q.clone(), two_q.clone() - 1);
            num_traits::pow::pow(inv_rho, m as usize) * two_q
        });
        accepted.then_some(x)
    }
}

/// The fields of one attempt's word, all 32-bit (none straddles the word's halves), so that
/// the bulk pass computes in 32-bit lanes: with them and its 32-bit output, `exact_bench
/// 8000000 bulk` went from 2.26 to 2.11 ns a draw on the 2-core Xeon.
struct Fields {
    slot: u32,
    coin: u32,
    offset: u32,
    negative: bool,
    u_prefix: u32,
}

impl Fields {
    /// The fields of one attempt's word (module docs, "Bits per draw"), for blocks of
    /// 2^`width_bits` points.
    #[inline(always)]
    fn of(word: u64, width_bits: u32) -> Self {
        Self::of_halves(word as u32, (word >> 32) as u16, width_bits)
    }

    /// [`Self::of`] from the word's low 32 and high 16 bits.
    #[inline(always)]
    fn of_halves(low: u32, high: u16, width_bits: u32) -> Self {
        let high = u32::from(high);
        let offset = low >> OFFSET_LOW_SHIFT | (high >> OFFSET_HIGH_SHIFT) << OFFSET_LOW_BITS;
        Self {
            slot: slot_of(low),
            coin: (low >> COIN_SHIFT) & ((1 << COIN_BITS) - 1),
            negative: (low >> SIGN_SHIFT) & 1 == 1,
            u_prefix: high & IMMEDIATE_MASK,
            offset: offset & ((1 << width_bits) - 1),
        }
    }
}

/// A bulk block's 48-bit words: the stream's next 6 · `len` bytes, read as the low
/// 32 bits of each word (little-endian), then the high 16 bits of each. Held as `u32` and
/// `u16` rather than bytes: the vectorised first pass then loads them whole (built from
/// single bytes, a word took a dozen shuffles). Beside each word, the descriptor of its slot.
struct Words {
    low: [u32; BULK],
    high: [u16; BULK],
    descriptor: [u64; BULK],
    len: usize,
}

impl Default for Words {
    fn default() -> Self {
        Self {
            low: [0; BULK],
            high: [0; BULK],
            descriptor: [0; BULK],
            len: 0,
        }
    }
}

impl Words {
    /// The next `n` words of `rng` (two fills of whole 32-bit stream words, the bytes that a
    /// single fill of 6 · `n` would give), and the descriptor of each word's slot.
    ///
    /// The descriptors are looked up here, one scalar load each, not in the vectorised first
    /// pass: there the compiler makes them gathers (eight slots to an instruction), and on
    /// the 2-core AMD EPYC (Zen 4) such a gather cost about as much as the rest of the draw
    /// (`exact_bench 16000000 bulk`, alternated five times: 4.1–4.6 ns a draw with the gathers,
    /// 2.7–3.5 with these loads; the same with a table of half the size, so not the cache).
    /// This function has no `multiversion` build, so no gather: the baseline x86-64 build has
    /// none.
    fn fill(&mut self, n: usize, rng: &mut DpRng, descriptors: &[u64; SLOTS]) {
        use rand::Rng;
        let rng = rng.as_rng();
        rng.fill(&mut self.low[..n]);
        rng.fill(&mut self.high[..n]);
        self.len = n;
        for (d, &low) in self.descriptor.iter_mut().zip(&self.low[..n]) {
            *d = descriptors[slot_of(low) as usize];
        }
    }

    fn low(&self) -> &[u32] {
        &self.low[..self.len]
    }

    fn high(&self) -> &[u16] {
        &self.high[..self.len]
    }

    /// The descriptor of each word's slot.
    fn descriptors(&self) -> &[u64] {
        &self.descriptor[..self.len]
    }

    /// Each word's halves and descriptor, as zipped slices (the form the compiler vectorises,
    /// with loads of both halves widened; not a mapped iterator).
    fn parts(&self) -> impl Iterator<Item = Part<'_>> {
        self.low().iter().zip(self.high()).zip(self.descriptors())
    }

    /// Word i.
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        join(self.low()[i], self.high()[i])
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// One word of a [`Words`] block: its low 32 bits and high 16, and its slot's descriptor.
type Part<'a> = ((&'a u32, &'a u16), &'a u64);

/// The alias slot a word names: its lowest [`SLOT_BITS`] bits.
#[inline(always)]
fn slot_of(low: u32) -> u32 {
    low & (SLOTS as u32 - 1)
}

/// A word from its low 32 and high 16 bits.
#[inline(always)]
fn join(low: u32, high: u16) -> u64 {
    u64::from(low) | u64::from(high) << 32
}

/// The first pass of [`AliasDiscreteGaussian::fill`] over one block: every draw that its word
/// decides ([`decide_one`]) is written to `out` (|x| < 2²³); the others are flagged (1 in
/// `undecided`, else 0) for the second pass.
/// No branch on a random bit; compiled for each SIMD level and chosen at run time (the
/// descriptors come looked up already, [`Words::fill`]).
#[multiversion(targets = "simd")]
fn decide(width_bits: u32, words: &Words, out: &mut [i32], undecided: &mut [u8]) {
    assert!(words.len() == out.len() && out.len() == undecided.len());
    for ((y, flag), word) in out.iter_mut().zip(undecided.iter_mut()).zip(words.parts()) {
        let (draw, decided) = decide_one(word, width_bits);
        *y = draw;
        *flag = u8::from(!decided);
    }
}

/// [`decide`] and the grid in one pass, for [`AliasDiscreteGaussian::add_on_grid`] on the grids
/// of [`F32_GRIDS`]: each value whose draw its word decides goes onto the grid with it
/// ([`on_grid_f32`]); the others are left as they are and flagged for the draws that finish
/// them. In `f32`, sixteen to a vector where `f64` works eight, and without the draws' round
/// trip through memory: on the 2-core Xeon, `noise_fill_speed` exact (12 interleaved runs, best
/// and median) 2.34 and 2.50 ns a coordinate with `decide` and an `f64` second pass, 2.26 and
/// 2.33 with an `f32` second pass, 2.10 and 2.29 in one pass; MLP exact / float noise 0.890 →
/// 0.917 (medians of 10 interleaved rounds of `dpml bench dpsgd --model mlp`).
#[multiversion(targets = "simd")]
fn decide_onto_grid(
    width_bits: u32,
    words: &Words,
    values: &mut [f32],
    undecided: &mut [u8],
    (g, inv_g): (f32, f32),
) {
    assert!(words.len() == values.len() && values.len() == undecided.len());
    for ((v, flag), word) in values
        .iter_mut()
        .zip(undecided.iter_mut())
        .zip(words.parts())
    {
        let (draw, decided) = decide_one(word, width_bits);
        let out = on_grid_f32(*v, draw, g, inv_g);
        *v = if decided { out } else { *v };
        *flag = u8::from(!decided);
    }
}

/// The draw that a word (its low 32 bits, high 16 and its slot's descriptor) decides alone,
/// and whether it does: the alias coin not tied with the slot's threshold, the immediate test
/// passed, not a negative zero.
#[inline(always)]
fn decide_one(((&low, &high), &d): Part<'_>, width_bits: u32) -> (i32, bool) {
    let f = Fields::of_halves(low, high, width_bits);
    // One descriptor holds both blocks: a draw takes one look-up, not one per block (or a
    // second that waits for the coin). `select_unpredictable` keeps the choice a conditional
    // move in the scalar builds (a plain select became a branch on the random coin there).
    let threshold = (d >> THRESHOLD_SHIFT) as u32;
    let own = f.coin < threshold;
    // A tie may go either way (the next 19 coin bits decide): finished later.
    let tie = f.coin == threshold;
    let half = std::hint::select_unpredictable(own, d as u32, (d >> HALF_BITS) as u32);
    // x < 2²³.
    let x = (half & BLOCK_MASK) << width_bits | f.offset;
    // The tail's threshold is 0: its draws are always finished in the second pass.
    let decided =
        !tie & (f.u_prefix < (half >> SLOT_BITS) & IMMEDIATE_MASK) & !(f.negative & (x == 0));
    (signed(x as i64, f.negative) as i32, decided)
}

/// The second pass of [`AliasDiscreteGaussian::add_on_grid`] on grids outside [`F32_GRIDS`]:
/// each value whose draw `decide` settled (`undecided` 0) goes onto the grid with it, in
/// `f64`; the others are left for the draws that finish them. Compiled for each SIMD level and
/// chosen at run time (the baseline x86-64 build works two `f64` at a time).
#[multiversion(targets = "simd")]
fn add_decided_on_grid(values: &mut [f32], ints: &[i32], undecided: &[u8], g: f64, inv_g: f64) {
    for ((v, &y), &u) in values.iter_mut().zip(ints).zip(undecided) {
        let out = on_grid(*v, f64::from(y), g, inv_g);
        *v = if u == 0 { out } else { *v };
    }
}

/// The grid spacings g (powers of two) on which [`on_grid_f32`] equals [`on_grid`]: every
/// nonzero result (at least g, at most 2⁵¹·g in magnitude) is a normal `f32`, and so are g and
/// 1/g.
const F32_GRIDS: std::ops::RangeInclusive<f64> = 1e-30..=1e20;

/// [`on_grid`] computed in `f32`, for a draw |y| < 2²⁴ and g in [`F32_GRIDS`]; the same value
/// to the bit. v·(1/g) is exact in `f32` (a power of two) unless it overflows, and then the
/// clamp at ±2⁵⁰ gives what it gives in `f64`, or falls below the normal range, and then it
/// rounds to 0 either way; rounding to an integer is exact; the `f32` sum
/// r + y is the exact integer sum rounded once to `f32` (IEEE addition), and multiplying by g
/// is exact in the normal range: so the result is (r + y)·g rounded once to `f32`, which is
/// what [`on_grid`] returns.
#[inline(always)]
fn on_grid_f32(v: f32, y: i32, g: f32, inv_g: f32) -> f32 {
    const LIMIT: f32 = crate::grid::ROUND_LIMIT as f32;
    let x = v * inv_g;
    let x = if x.is_nan() {
        0.0
    } else {
        x.clamp(-LIMIT, LIMIT)
    };
    (x.round_ties_even() + y as f32) * g
}

/// (round(v/g) + y)·g to the nearest `f32`, for an integer y. round(v/g) and y are integers
/// below 2⁵³ in `f64`, so their sum is exact: the `f32` is a function of the noisy integer
/// alone (post-processing of the release).
#[inline(always)]
fn on_grid(v: f32, y: f64, g: f64, inv_g: f64) -> f32 {
    ((round_to_integer(f64::from(v) * inv_g) + y) * g) as f32
}

/// Per slot, the packed descriptor (module docs) of its own block and of its alias: each
/// block's index and immediate threshold (0 for the tail, index B), and the slot's coin
/// threshold, the first 14 of the 33 bits of its probability.
fn descriptors(slots: &[u64], immediate: &[u32]) -> Box<[u64; SLOTS]> {
    let half = |block: usize| block as u64 | u64::from(immediate[block]) << SLOT_BITS;
    let mut out = Box::new([0u64; SLOTS]);
    for (j, (&entry, descriptor)) in slots.iter().zip(out.iter_mut()).enumerate() {
        let threshold = (entry & PROB_MASK) >> COIN_REST;
        // A slot of weight 0 is never its own block (threshold 0): any block index will do.
        let own = j.min(immediate.len() - 1);
        *descriptor = half(own)
            | half((entry >> PROB_BITS) as usize) << HALF_BITS
            | threshold << THRESHOLD_SHIFT;
    }
    out
}

/// ±y without a branch on the random sign.
#[inline(always)]
fn signed(y: i64, negative: bool) -> i64 {
    let minus = -i64::from(negative);
    (y ^ minus) - minus
}

/// The alias coin's first 13 bits tie with the slot threshold's (probability 2⁻¹³): the next
/// 19 decide.
#[cold]
#[inline(never)]
fn tie_break(rng: &mut DpRng, coin: u64, prob: u64) -> bool {
    (coin << COIN_REST | rng.next_u64() >> (64 - COIN_REST)) < prob
}

/// Walker's alias table for integer weights summing to exactly n·2³² (n = the length), built
/// with Vose's method in exact integer arithmetic: slot j keeps its own index with probability
/// prob_j/2³² and its alias otherwise, and every index i receives exactly weight_i/(n·2³²).
fn alias_table(weights: &[u64]) -> Vec<u64> {
    debug_assert_eq!(
        weights.iter().map(|&w| u128::from(w)).sum::<u128>(),
        weights.len() as u128 * u128::from(SLOT_UNITS)
    );
    let mut rest = weights.to_vec();
    let mut entries: Vec<u64> = (0..weights.len() as u64)
        .map(|i| SLOT_UNITS | i << PROB_BITS)
        .collect();
    let (mut small, mut large): (Vec<usize>, Vec<usize>) =
        (0..weights.len()).partition(|&i| rest[i] < SLOT_UNITS);
    while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
        small.pop();
        entries[s] = rest[s] | (l as u64) << PROB_BITS;
        rest[l] -= SLOT_UNITS - rest[s];
        if rest[l] < SLOT_UNITS {
            large.pop();
            small.push(l);
        }
    }
    // With an exact total, whatever is left holds exactly 2³² and keeps its own index.
    entries
}

#[cfg(test)]
#[path = "alias_gaussian_tests.rs"]
mod tests;
