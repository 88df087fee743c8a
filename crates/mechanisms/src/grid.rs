//! The integer grid on which real-valued releases are computed, so that no floating-point noise
//! ever reaches an output (Mironov 2012).
//!
//! A real input x is mapped to the integer k = round(x/g) on a grid of granularity g = 2^e,
//! exact integer noise is added, and (k + noise)·g is returned. The last step is rounding an
//! exact integer to the nearest `f64` and scaling by a power of two: a deterministic function
//! of the exact noisy integer (post-processing), so it cannot weaken privacy.
//!
//! # Sensitivity on the grid
//! For real a, b: |round(a/g) − round(b/g)| ≤ ⌊|a − b|/g⌋ + 1.
//!
//! *Proof.* Any rounding to an integer moves a value by at most 1/2, so
//! |round(a/g) − round(b/g)| ≤ |a − b|/g + 1. The left side is an integer, and an integer that
//! is ≤ y + 1 is ≤ ⌊y + 1⌋ = ⌊y⌋ + 1. ∎
//!
//! So a query of sensitivity Δ has, on the grid, integer sensitivity Δ_g = ⌊Δ/g⌋ + 1, and the
//! noise is calibrated to Δ_g (slightly more than Δ/g: the realised privacy is a little better
//! than requested, never worse). Because g is a power of two, x/g is computed exactly in `f64`
//! (scaling by a power of two only changes the exponent), except when it overflows — it then
//! saturates, and clamping is 1-Lipschitz so the bound survives — or underflows below 2^−1022,
//! where it rounds to 0 either way.

use crate::MechanismError;
use crate::rational::floor_log2;
use crate::validate::invalid;

/// Grid exponents are kept in [−990, 990] so that g, 1/g and grids 2^30 times finer are all
/// normal `f64` powers of two.
const MAX_EXP: i32 = 990;

/// A grid of granularity g = 2^exp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grid {
    exp: i32,
}

/// 2^e as an exact `f64` for e in the normal range.
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

impl Grid {
    /// The grid g = 2^(⌊log2 scale⌋ − bits): between scale/2^(bits+1) and scale/2^bits, so the
    /// noise spans about 2^bits grid steps per unit of scale.
    pub(crate) fn below(scale: f64, bits: i32) -> Result<Self, MechanismError> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(invalid(format!(
                "noise scale must be finite and > 0, got {scale}"
            )));
        }
        let exp = floor_log2(scale) - bits;
        if !(-MAX_EXP..=MAX_EXP).contains(&exp) {
            return Err(invalid(format!(
                "noise scale {scale} is outside the supported range"
            )));
        }
        Ok(Self { exp })
    }

    /// A grid 2^`bits` times finer.
    pub(crate) fn finer(self, bits: i32) -> Self {
        Self {
            exp: self.exp - bits,
        }
    }

    /// The granularity g.
    pub(crate) fn granularity(self) -> f64 {
        pow2(self.exp)
    }

    /// x/g, exact unless it overflows (see the module docs).
    fn scaled(self, x: f64) -> f64 {
        x * pow2(-self.exp)
    }

    /// Δ_g = ⌊Δ/g⌋ + 1, the integer sensitivity after rounding inputs to the grid.
    pub(crate) fn sensitivity(self, sensitivity: f64) -> Result<u64, MechanismError> {
        let units = self.scaled(sensitivity).floor();
        if units.is_nan() || units >= (1u64 << 53) as f64 {
            return Err(invalid(format!(
                "sensitivity {sensitivity} is too large for grid {}: epsilon is too large",
                self.granularity()
            )));
        }
        Ok(units as u64 + 1)
    }

    /// round(x/g) as an integer (saturating at the `i128` range, a 1-Lipschitz clamp).
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] when `x` is NaN or infinite.
    pub(crate) fn snap(self, x: f64) -> Result<i128, MechanismError> {
        if !x.is_finite() {
            return Err(invalid(format!("value to release must be finite, got {x}")));
        }
        Ok(self.scaled(x).round() as i128)
    }

    /// As [`Grid::snap`] for a value released as is: refuses values whose grid index does not
    /// fit [`MAX_RELEASE_INDEX`], where the index (and the index plus noise) would saturate and
    /// the release would silently be a different, clamped value.
    pub(crate) fn snap_exact(self, x: f64) -> Result<i128, MechanismError> {
        let k = self.snap(x)?;
        if k.unsigned_abs() > MAX_RELEASE_INDEX as u128 {
            return Err(invalid(format!(
                "value to release {x:e} is outside the range the exact sampler represents at \
                 granularity {:e}: |value| must be at most {:e}",
                self.granularity(),
                self.unsnap(MAX_RELEASE_INDEX)
            )));
        }
        Ok(k)
    }

    /// trunc(x/g) (toward zero) for finite x: |trunc(x/g)| ≤ ⌊|x|/g⌋.
    pub(crate) fn truncate(self, x: f64) -> i128 {
        self.scaled(x).trunc() as i128
    }

    /// k·g as the nearest `f64` (post-processing of the exact integer k).
    pub(crate) fn unsnap(self, k: i128) -> f64 {
        k as f64 * self.granularity()
    }

    /// The released value (k + noise)·g for an input already on the grid.
    pub(crate) fn add_noise(self, k: i128, noise: i64) -> f64 {
        self.unsnap(k.saturating_add(i128::from(noise)))
    }
}

/// The largest grid index [`Grid::snap_exact`] accepts: far from `i128::MAX`, so adding any
/// `i64` noise sample cannot saturate.
pub(crate) const MAX_RELEASE_INDEX: i128 = 1 << 120;

/// Bound on |x/g| before the bulk path rounds it ([`round_to_integer`]): far above any value a
/// caller puts on a grid (DP-SGD's clipped sums are at most 2¹⁷ grid units a record). Clamping
/// is 1-Lipschitz per coordinate, so it keeps any sensitivity bound, and it keeps x where the
/// rounding is exact.
pub(crate) const ROUND_LIMIT: f64 = (1u64 << 50) as f64;

/// x rounded to the nearest integer (ties to even) as an `f64`, clamped to ±[`ROUND_LIMIT`];
/// NaN (a diverged model's sum) to 0. Adding and subtracting 1.5·2⁵² leaves no fraction bits
/// (for |x| ≤ 2⁵¹ the sum lies where the `f64` spacing is 1): branch-free and vectorisable,
/// where `round` is a libm call on processors without SSE4.1 in the baseline.
#[inline(always)]
pub(crate) fn round_to_integer(x: f64) -> f64 {
    const SHIFT: f64 = (3u64 << 51) as f64;
    let x = if x.is_nan() {
        0.0
    } else {
        x.clamp(-ROUND_LIMIT, ROUND_LIMIT)
    };
    (x + SHIFT) - SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_is_a_power_of_two_below_the_scale() {
        let g = Grid::below(3.0, 10).unwrap();
        assert_eq!(g.granularity(), 2.0 / 1024.0);
        assert_eq!(g.sensitivity(1.0).unwrap(), 513);
        assert_eq!(g.sensitivity(2.0 / 1024.0 * 7.0).unwrap(), 8);
        assert_eq!(g.snap(0.01).unwrap(), 5);
        assert_eq!(g.truncate(-0.01), -5);
        assert_eq!(g.add_noise(5, -2), 3.0 * 2.0 / 1024.0);
        assert!(g.snap(f64::NAN).unwrap_err().to_string().contains("NaN"));
        assert_eq!(g.snap(f64::MAX).unwrap(), i128::MAX);
        assert!(
            g.snap_exact(f64::MAX)
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
        assert_eq!(g.snap_exact(-3.0).unwrap(), -1536);
        assert!(Grid::below(0.0, 10).is_err() && Grid::below(1e-300, 10).is_err());
        assert!(Grid::below(1e-6, 10).unwrap().sensitivity(1e30).is_err());
    }

    #[test]
    fn rounding_sensitivity_bound_holds() {
        // |round(a/g) − round(b/g)| ≤ ⌊|a−b|/g⌋ + 1 on random pairs with |a − b| ≤ Δ.
        let mut rng = crate::DpRng::seeded(3);
        let g = Grid::below(1.0, 4).unwrap();
        let delta = 0.37;
        let bound = g.sensitivity(delta).unwrap() as i128;
        let mut reached = false;
        for _ in 0..100_000 {
            let a = rng.uniform_f64() * 10.0 - 5.0;
            let b = a + (rng.uniform_f64() * 2.0 - 1.0) * delta;
            let diff = (g.snap(a).unwrap() - g.snap(b).unwrap()).abs();
            assert!(diff <= bound, "{a} {b}");
            reached |= diff == bound;
        }
        assert!(reached, "the bound is attained, so it is tight");
    }

    /// The branch-free rounding agrees with `round_ties_even` wherever it is not clamped, and
    /// maps NaN to 0 and huge values to the clamp.
    #[test]
    fn rounding_to_the_grid_is_to_the_nearest_integer() {
        let mut rng = crate::DpRng::seeded(10);
        for _ in 0..100_000 {
            let x = (rng.next_u64() as i64 as f64) / (1u64 << (rng.next_u64() % 40)) as f64;
            let expect = x.clamp(-ROUND_LIMIT, ROUND_LIMIT).round_ties_even();
            assert_eq!(round_to_integer(x), expect, "{x}");
        }
        for (x, k) in [
            (0.5, 0.0),
            (1.5, 2.0),
            (-2.5, -2.0),
            (-0.49, 0.0),
            (3.0, 3.0),
            (f64::NAN, 0.0),
        ] {
            assert_eq!(round_to_integer(x), k, "{x}");
        }
        assert_eq!(round_to_integer(f64::INFINITY), ROUND_LIMIT);
        assert_eq!(round_to_integer(-1e300), -ROUND_LIMIT);
    }
}
