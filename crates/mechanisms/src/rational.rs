//! Exact non-negative rationals for the samplers, and `f64` conversions that round in a stated
//! direction.
//!
//! Privacy arithmetic rounds *outward*: a noise scale or σ² is rounded **up** to a rational
//! ([`Rational::ceil_from_f64`]), a privacy rate such as ε is rounded **down**
//! ([`Rational::floor_from_f64`]). The rational that the exact sampler then uses is therefore at
//! least as private as the parameter that was asked for: the noise actually added is never
//! smaller than requested, and the realised ε is never larger. Values computed in floating
//! point (a quotient, a logarithm) are first widened by a few units in the last place
//! ([`ulps_up`], [`ulps_down`]) so that the rounding error of the computation itself cannot push
//! the result to the unsafe side.

use crate::MechanismError;
use crate::validate::invalid;

/// A non-negative rational `num / den` with `den ≥ 1`, used as an exact sampler parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rational {
    num: u64,
    den: u64,
}

impl Rational {
    /// One half.
    pub const HALF: Rational = Rational { num: 1, den: 2 };

    /// `num / den`.
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] when `den` is 0.
    pub fn new(num: u64, den: u64) -> Result<Self, MechanismError> {
        if den == 0 {
            return Err(invalid(format!(
                "rational denominator must be >= 1, got {num}/0"
            )));
        }
        Ok(Self { num, den })
    }

    /// The integer `n` as `n / 1`.
    pub fn integer(n: u64) -> Self {
        Self { num: n, den: 1 }
    }

    /// The numerator.
    pub fn num(self) -> u64 {
        self.num
    }

    /// The denominator (≥ 1).
    pub fn den(self) -> u64 {
        self.den
    }

    /// The smallest `k / 2^den_log2 ≥ x` (rounds up: use for noise scales and variances).
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] when `x` is negative or not finite, `den_log2 > 63`,
    /// or the numerator does not fit in a `u64`.
    pub fn ceil_from_f64(x: f64, den_log2: u32) -> Result<Self, MechanismError> {
        Self::from_f64(x, den_log2, true)
    }

    /// The largest `k / 2^den_log2 ≤ x` (rounds down: use for ε-like rates).
    ///
    /// # Errors
    /// As [`Rational::ceil_from_f64`].
    pub fn floor_from_f64(x: f64, den_log2: u32) -> Result<Self, MechanismError> {
        Self::from_f64(x, den_log2, false)
    }

    /// [`Rational::ceil_from_f64`] with a power-of-two denominator chosen so that the numerator
    /// has about 50 significant bits (relative rounding error ≤ 2^-49 for `x ≥ 2^-13`).
    ///
    /// # Errors
    /// As [`Rational::ceil_from_f64`].
    pub fn ceil_from_f64_precise(x: f64) -> Result<Self, MechanismError> {
        Self::ceil_from_f64(x, precise_den_log2(x))
    }

    /// [`Rational::floor_from_f64`] with the denominator of [`Rational::ceil_from_f64_precise`].
    ///
    /// # Errors
    /// As [`Rational::ceil_from_f64`].
    pub fn floor_from_f64_precise(x: f64) -> Result<Self, MechanismError> {
        Self::floor_from_f64(x, precise_den_log2(x))
    }

    fn from_f64(x: f64, den_log2: u32, up: bool) -> Result<Self, MechanismError> {
        if !(x.is_finite() && x >= 0.0) {
            return Err(invalid(format!(
                "cannot convert {x} to a non-negative rational"
            )));
        }
        if den_log2 > 63 {
            return Err(invalid(format!(
                "rational denominator 2^{den_log2} exceeds 2^63"
            )));
        }
        let (mantissa, exp) = decompose(x);
        // x · 2^den_log2 = mantissa · 2^shift exactly.
        let shift = exp + den_log2 as i32;
        let num: u128 = if shift >= 0 {
            if shift >= 64 || (mantissa as u128) << shift > u64::MAX as u128 {
                return Err(invalid(format!(
                    "{x} is too large for a rational with 2^{den_log2} denominator"
                )));
            }
            (mantissa as u128) << shift
        } else {
            let s = (-shift) as u32;
            if s >= 64 {
                u128::from(up && mantissa != 0)
            } else {
                let q = (mantissa >> s) as u128;
                let exact = mantissa & ((1u64 << s) - 1) == 0;
                q + u128::from(up && !exact)
            }
        };
        let num =
            u64::try_from(num).map_err(|_| invalid(format!("{x} is too large for a rational")))?;
        Ok(Self {
            num,
            den: 1u64 << den_log2,
        })
    }

    /// A value ≤ `num / den` as `f64` (the nearest value, moved down three units in the last
    /// place to cover the roundings of the conversion and the division).
    pub fn to_f64_down(self) -> f64 {
        ulps_down(self.num as f64 / self.den as f64, 3).max(0.0)
    }

    /// A value ≥ `num / den` as `f64` (see [`Rational::to_f64_down`]).
    pub fn to_f64_up(self) -> f64 {
        ulps_up(self.num as f64 / self.den as f64, 3)
    }
}

impl std::fmt::Display for Rational {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}

/// `x = mantissa · 2^exp` exactly, for finite non-negative `x`.
fn decompose(x: f64) -> (u64, i32) {
    let bits = x.to_bits();
    let exp_bits = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    if exp_bits == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp_bits - 1075)
    }
}

/// ⌊log2 x⌋ for positive normal `x` (from the exponent bits, exact); −1023 for subnormals.
pub(crate) fn floor_log2(x: f64) -> i32 {
    ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

fn precise_den_log2(x: f64) -> u32 {
    if x > 0.0 {
        (50 - floor_log2(x)).clamp(0, 63) as u32
    } else {
        0
    }
}

/// The next `f64` above `x` (`x` finite); `+∞` stays `+∞`.
pub fn next_up(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f64::from_bits(1);
    }
    let bits = x.to_bits();
    f64::from_bits(if x > 0.0 { bits + 1 } else { bits - 1 })
}

/// The next `f64` below `x`.
pub fn next_down(x: f64) -> f64 {
    -next_up(-x)
}

/// `x` moved up by `n` units in the last place: an upper bound on a value whose computation
/// erred by at most `n` ulps.
pub fn ulps_up(x: f64, n: u32) -> f64 {
    (0..n).fold(x, |v, _| next_up(v))
}

/// `x` moved down by `n` units in the last place.
pub fn ulps_down(x: f64, n: u32) -> f64 {
    (0..n).fold(x, |v, _| next_down(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directed_rounding_brackets_the_value() {
        for &x in &[0.1, 1.0 / 3.0, 2.5, 1e-9, 12345.678, 7.0] {
            for j in [0u32, 4, 20, 30] {
                let up = Rational::ceil_from_f64(x, j).unwrap();
                let down = Rational::floor_from_f64(x, j).unwrap();
                // Numerators stay below 2^53 here, so these conversions and the division by a
                // power of two are exact: the comparisons are exact.
                let value = |r: Rational| r.num() as f64 / r.den() as f64;
                assert!(value(down) <= x && x <= value(up), "{x} {j}: {down} {up}");
                assert!(up.num() - down.num() <= 1, "{x} {j}: {up} {down}");
                assert!(up.to_f64_up() >= x && down.to_f64_down() <= x, "{x} {j}");
            }
        }
        assert_eq!(
            Rational::ceil_from_f64(2.5, 1).unwrap(),
            Rational::new(5, 2).unwrap()
        );
        assert_eq!(
            Rational::ceil_from_f64(2.4, 0).unwrap(),
            Rational::integer(3)
        );
        assert_eq!(
            Rational::floor_from_f64(2.6, 0).unwrap(),
            Rational::integer(2)
        );
        assert_eq!(Rational::ceil_from_f64(1e-300, 10).unwrap().num(), 1);
        assert_eq!(Rational::floor_from_f64(1e-300, 10).unwrap().num(), 0);
    }

    #[test]
    fn precise_conversion_is_tight_and_exact_when_possible() {
        let r = Rational::ceil_from_f64_precise(0.1).unwrap();
        let rel = (r.num() as f64 / r.den() as f64 - 0.1) / 0.1;
        assert!((0.0..1e-14).contains(&rel), "{rel}");
        let r = Rational::floor_from_f64_precise(0.75).unwrap();
        assert_eq!(
            r.num() as f64 / r.den() as f64,
            0.75,
            "exact values convert exactly"
        );
    }

    #[test]
    fn conversion_errors_name_the_value() {
        assert!(
            Rational::ceil_from_f64(f64::NAN, 0)
                .unwrap_err()
                .to_string()
                .contains("NaN")
        );
        assert!(
            Rational::ceil_from_f64(-1.0, 0)
                .unwrap_err()
                .to_string()
                .contains("-1")
        );
        assert!(
            Rational::ceil_from_f64(1e30, 0)
                .unwrap_err()
                .to_string()
                .contains("too large")
        );
        assert!(Rational::new(1, 0).unwrap_err().to_string().contains("1/0"));
    }

    #[test]
    fn next_up_and_down_step_one_ulp() {
        assert!(next_up(1.0) > 1.0 && next_up(1.0) - 1.0 == f64::EPSILON);
        assert!(next_down(1.0) < 1.0);
        assert!(next_up(-1.0) > -1.0);
        assert_eq!(next_up(0.0), f64::from_bits(1));
        assert_eq!(ulps_up(1.0, 2), 1.0 + 2.0 * f64::EPSILON);
    }
}
