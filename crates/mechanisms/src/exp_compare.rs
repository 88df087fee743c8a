//! Exact Bernoulli(c·exp(−γ)) for rational c and γ, decided by comparing a uniform U ∈ [0, 1)
//! with p = c·exp(−γ) a few bits of U at a time.
//!
//! The table sampler ([`crate::alias_gaussian`]) accepts or rejects a proposal with probability
//! p = c·exp(−γ). Drawing U bit by bit and stopping as soon as the bits known so far put U
//! entirely below or entirely above p gives exactly P\[U < p\] = p, whatever the order in which
//! the bits are looked at, provided each comparison is made against *true* bounds of p. Three
//! stages give those bounds, each used only when the one before cannot decide:
//!
//! 1. the caller's own precomputed lower bound (most draws stop there, no arithmetic at all);
//! 2. ln p computed in `f64` by the caller (a sum of a few logarithms and the exponent −γ, each
//!    from a correctly rounded operation or `libm`, a port of musl's, accurate to about one
//!    ulp), widened by a margin of 2⁻³⁰ + M·2⁻³⁶ for terms of total size M: the rounding of
//!    such a sum is below M·2⁻⁴⁹, so the margin leaves a factor of eight thousand to spare.
//!    Working with ln p keeps the bound relative even where p underflows `f64`;
//! 3. with probability below about 2⁻³⁰ per call U lands inside that margin, and p is then
//!    bracketed with exact big-rational arithmetic: partial sums of the alternating Taylor
//!    series of exp(−γ), whose error is at most the next term once the terms decrease,
//!    refined together with further bits of U until the two separate (with probability one).
//!
//! No rounded value ever decides the outcome on its own: floating point only narrows where the
//! exact comparison has to look.

use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, Zero};

use crate::DpRng;

/// Margin around the `f64` estimate of ln p (stage 2): this plus [`MAGNITUDE_MARGIN`] times
/// the size of its terms.
const LOG_MARGIN: f64 = 1.0 / (1u64 << 30) as f64;
const MAGNITUDE_MARGIN: f64 = 1.0 / (1u64 << 36) as f64;

/// Bits of U held at once by the `f64` stage: U's prefix is exact in an `f64` up to 53 bits.
const F64_BITS: u32 = 53;

/// p = c·exp(−γ) with rational c > 0 and γ ≥ 0, for the exact stage.
#[derive(Debug, Clone)]
pub(crate) struct ExpProb {
    pub gamma: BigRational,
    pub factor: BigRational,
}

/// Whether U < p, for the uniform U ∈ [0, 1) whose first `bits` (≤ 32) bits are `prefix`,
/// drawing further bits of U from `rng` as needed. `log_p` is ln p in `f64` computed from terms
/// of total absolute size `magnitude` (NaN when the caller has none), `exact` gives p as
/// rationals (called only in the rare exact stage).
pub(crate) fn uniform_below(
    rng: &mut DpRng,
    prefix: u64,
    bits: u32,
    log_p: f64,
    magnitude: f64,
    exact: impl FnOnce() -> ExpProb,
) -> bool {
    debug_assert!(bits <= 32 && prefix >> bits == 0);
    if log_p.is_finite() && magnitude.is_finite() {
        let margin = LOG_MARGIN + magnitude * MAGNITUDE_MARGIN;
        // exp of a rounded argument is within an ulp, or within the smallest subnormal where
        // it underflows: widen by both.
        let tiny = f64::from_bits(1);
        let lo = (libm::exp(log_p - margin) * (1.0 - LOG_MARGIN) - tiny).max(0.0);
        let hi = libm::exp(log_p + margin) * (1.0 + LOG_MARGIN) + tiny;
        // 2^−bits, exactly (a power of two), without the libm call `exp2` makes.
        let scale = 1.0 / (1u64 << bits) as f64;
        if let Some(decided) = settle(prefix as f64 * scale, (prefix + 1) as f64 * scale, lo, hi) {
            return decided;
        }
        // Extend U to 53 bits (still exact in f64) and try again.
        let more = F64_BITS - bits;
        let prefix = (prefix << more) | (rng.next_u64() >> (64 - more));
        let scale = 1.0 / (1u64 << F64_BITS) as f64;
        if let Some(decided) = settle(prefix as f64 * scale, (prefix + 1) as f64 * scale, lo, hi) {
            return decided;
        }
        return exact_below(rng, BigInt::from(prefix), F64_BITS, exact());
    }
    exact_below(rng, BigInt::from(prefix), bits, exact())
}

/// U ∈ [a, b) against p ∈ [lo, hi]: `Some(true)` when b ≤ lo, `Some(false)` when a ≥ hi.
fn settle(a: f64, b: f64, lo: f64, hi: f64) -> Option<bool> {
    if b <= lo {
        Some(true)
    } else if a >= hi {
        Some(false)
    } else {
        None
    }
}

/// Stage 3: U ∈ [prefix/2^bits, (prefix + 1)/2^bits) against exact brackets of p, refining
/// whichever of the two is wider until they separate.
fn exact_below(rng: &mut DpRng, mut prefix: BigInt, mut bits: u32, p: ExpProb) -> bool {
    let mut bounds = ExpBounds::new(&p.gamma);
    loop {
        let (lo, hi) = bounds.current();
        let (lo, hi) = (&lo * &p.factor, &hi * &p.factor);
        let scale = BigRational::new(BigInt::one(), BigInt::one() << bits);
        let a = BigRational::from_integer(prefix.clone()) * &scale;
        let b = &a + &scale;
        if b <= lo {
            return true;
        }
        if a >= hi {
            return false;
        }
        if hi - lo > scale {
            bounds.refine();
        } else {
            prefix = (prefix << 32) + BigInt::from(rng.next_u64() >> 32);
            bits += 32;
        }
    }
}

/// Exact bounds lo ≤ exp(−γ) ≤ hi with hi − lo ≤ 2⁻¹⁰⁰·lo (for checking tables in tests).
#[cfg(test)]
pub(crate) fn exp_bounds(gamma: &BigRational) -> (BigRational, BigRational) {
    let mut bounds = ExpBounds::new(gamma);
    let tolerance = BigRational::new(BigInt::one(), BigInt::one() << 100);
    loop {
        let (lo, hi) = bounds.current();
        if lo.is_positive() && &hi - &lo <= &lo * &tolerance {
            return (lo, hi);
        }
        bounds.refine();
    }
}

/// Brackets of exp(−γ) from partial sums S_N = Σ_{k ≤ N} (−γ)^k / k!: once N + 2 > γ the terms
/// decrease in size, so exp(−γ) lies within the next term |T_{N+1}| of S_N.
struct ExpBounds {
    gamma: BigRational,
    /// Partial sum S_N.
    sum: BigRational,
    /// The next term T_{N+1} = (−γ)^{N+1}/(N+1)!.
    next: BigRational,
    /// N + 1.
    index: u64,
}

impl ExpBounds {
    fn new(gamma: &BigRational) -> Self {
        let mut bounds = Self {
            gamma: gamma.clone(),
            sum: BigRational::one(),
            next: -gamma.clone(),
            index: 1,
        };
        // Start past the largest term (N + 2 > γ) so that the bracket is valid, plus a few
        // terms for a useful first width.
        while BigRational::from_integer(BigInt::from(bounds.index + 1)) <= bounds.gamma
            || bounds.index < 8
        {
            bounds.step();
        }
        bounds
    }

    fn step(&mut self) {
        self.sum += &self.next;
        self.index += 1;
        self.next = -(&self.next * &self.gamma) / BigRational::from_integer(self.index.into());
    }

    /// Sixteen more terms.
    fn refine(&mut self) {
        for _ in 0..16 {
            self.step();
        }
    }

    /// (lower, upper) bounds of exp(−γ); the lower bound is clamped at 0.
    fn current(&self) -> (BigRational, BigRational) {
        let width = self.next.abs();
        let lo = &self.sum - &width;
        let lo = if lo.is_negative() {
            BigRational::zero()
        } else {
            lo
        };
        (lo, &self.sum + width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rat(n: i64, d: i64) -> BigRational {
        BigRational::new(n.into(), d.into())
    }

    fn to_f64(r: &BigRational) -> f64 {
        use num_traits::ToPrimitive;
        r.to_f64().unwrap()
    }

    #[test]
    fn bounds_bracket_exp_and_shrink() {
        for (n, d) in [(0, 1), (1, 3), (7, 2), (33, 1), (85, 1)] {
            let gamma = rat(n, d);
            let truth = (-(n as f64) / d as f64).exp();
            let mut b = ExpBounds::new(&gamma);
            let mut last_width = f64::INFINITY;
            for _ in 0..4 {
                let (lo, hi) = b.current();
                let (lo, hi) = (to_f64(&lo), to_f64(&hi));
                assert!(lo <= truth * (1.0 + 1e-12) && truth <= hi * (1.0 + 1e-12));
                assert!(hi - lo <= last_width);
                last_width = hi - lo;
                b.refine();
            }
            let (lo, hi) = exp_bounds(&gamma);
            let (lo, hi) = (to_f64(&lo), to_f64(&hi));
            assert!((lo / truth - 1.0).abs() < 1e-14 && (hi / truth - 1.0).abs() < 1e-14);
        }
    }

    /// Each stage alone decides with the right frequency: the f64 stage (estimate given) and
    /// the exact stage (NaN estimate forces it).
    #[test]
    fn every_stage_decides_with_probability_p() {
        let mut rng = DpRng::seeded(41);
        let n = 20_000u32;
        for (gn, gd, cn, cd) in [
            (7i64, 10i64, 1i64, 1i64),
            (3, 1, 5, 2),
            (1, 1000, 999, 1000),
        ] {
            let p_true = (-(gn as f64) / gd as f64).exp() * cn as f64 / cd as f64;
            let exact = || ExpProb {
                gamma: rat(gn, gd),
                factor: rat(cn, cd),
            };
            for estimate in [p_true.ln(), f64::NAN] {
                let hits = (0..n)
                    .filter(|_| {
                        let w = rng.next_u64();
                        uniform_below(&mut rng, w >> 40, 24, estimate, 4.0, exact)
                    })
                    .count() as f64;
                let sd = (p_true * (1.0 - p_true) / f64::from(n)).sqrt();
                assert!(
                    (hits / f64::from(n) - p_true).abs() < 5.0 * sd,
                    "p {p_true}, estimate {estimate}: {}",
                    hits / f64::from(n)
                );
            }
        }
    }

    /// A prefix straddling p goes to the later stages and still decides correctly: with U's
    /// first 24 bits fixed to the cell that contains p, P[U < p] = (p − a)·2^24.
    #[test]
    fn a_prefix_on_the_boundary_is_resolved_exactly() {
        let mut rng = DpRng::seeded(42);
        let p = (-0.5f64).exp();
        let prefix = (p * f64::from(1u32 << 24)).floor() as u64;
        let want = p * f64::from(1u32 << 24) - prefix as f64;
        let exact = || ExpProb {
            gamma: rat(1, 2),
            factor: BigRational::one(),
        };
        let n = 20_000u32;
        for estimate in [-0.5, f64::NAN] {
            let hits = (0..n)
                .filter(|_| uniform_below(&mut rng, prefix, 24, estimate, 0.5, exact))
                .count() as f64;
            let sd = (want * (1.0 - want) / f64::from(n)).sqrt();
            assert!((hits / f64::from(n) - want).abs() < 5.0 * sd, "{hits}");
        }
    }
}
