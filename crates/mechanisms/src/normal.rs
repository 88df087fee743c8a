//! The standard normal distribution, accurate in the far tails: the one implementation of Φ,
//! ln Φ, ln erfc and Φ⁻¹ in dpml, used by the Gaussian mechanisms' calibration, the
//! accountants (GDP, f-DP, PLD, sampled-Gaussian RDP) and LiRA's likelihood ratios.
//!
//! They all need probabilities like 1e-300 (large μ or ε, low false-positive rates), where the
//! naive `1 − Φ(x)` or `ln(erfc(x))` underflows or cancels. These functions keep relative
//! accuracy there:
//!
//! - [`normal_cdf`], [`normal_sf`]: Φ(x) = erfc(−x/√2)/2 from `libm::erfc` (a port of the
//!   musl/FreeBSD implementation, about one ulp), each tail from the side where it is small.
//! - [`log_erfc`]: `ln(erfc(x))` from libm's `erfc` where it does not underflow, and from the
//!   asymptotic series `erfc(x) = e^{−x²}/(x√π) · Σ_n (−1)ⁿ (2n−1)!!/(2x²)ⁿ` for x ≥ 25 (the
//!   first omitted term is below 1e-19 of the sum there).
//! - [`normal_log_cdf`]: ln Φ, from [`log_erfc`] in the lower tail and `ln_1p` in the upper.
//! - [`normal_quantile`], [`normal_quantile_upper`]: Wichura's AS 241 (PPND16), relative error
//!   about 1e-16, down to p = 1e-300 without forming 1 − p.
//!
//! General-purpose crates (statrs) compute erfc to about 5e-11 relative and underflow past
//! x ≈ 27, which is not enough for an accountant's upper bound, hence this module.

use std::f64::consts::{FRAC_1_SQRT_2, LN_2, PI, SQRT_2};

use as241::{AS241_A, AS241_B, AS241_C, AS241_D, AS241_E, AS241_F};

/// Where [`log_erfc`] switches from `ln(erfc(x))` to the asymptotic series.
const ASYMPTOTIC_FROM: f64 = 25.0;

/// Φ(x) = P\[Z ≤ x\] for a standard normal Z, with relative accuracy in the lower tail.
pub fn normal_cdf(x: f64) -> f64 {
    // Dividing by √2 (rather than multiplying by 1/√2) is the rounding the PLD accountant's
    // cell masses were validated with; below its δ floor its optimistic bound moves with
    // single ulps of the tail masses.
    0.5 * libm::erfc(-x / SQRT_2)
}

/// Φ(−x) = 1 − Φ(x) = P\[Z > x\], the upper tail, with relative accuracy for large x.
pub fn normal_sf(x: f64) -> f64 {
    normal_cdf(-x)
}

/// `ln(erfc(x))`, accurate for all x, including x where `erfc(x)` underflows.
///
/// Returns `ln 2` at x = −∞, `−∞` at x = +∞ and NaN for NaN.
pub fn log_erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < ASYMPTOTIC_FROM {
        return libm::erfc(x).ln();
    }
    if x == f64::INFINITY {
        return f64::NEG_INFINITY;
    }
    // erfc(x) = e^{−x²}/(x√π) · (1 − 1/(2x²) + 3/(2x²)² − 15/(2x²)³ + …); at x ≥ 25 the terms
    // shrink by a factor ≥ 1250/(2n+1), so eight terms are far below one ulp.
    -x * x - (x * PI.sqrt()).ln() + erfc_series(x).ln_1p()
}

/// The asymptotic series of `erfc(x)·x√π·e^{x²} − 1`, eight terms.
fn erfc_series(x: f64) -> f64 {
    let inv = 1.0 / (2.0 * x * x);
    let mut term = 1.0;
    let mut series = 0.0;
    for n in 1..=8 {
        term *= -f64::from(2 * n - 1) * inv;
        series += term;
    }
    series
}

/// ln Φ(x), accurate in both tails (ln Φ(−40) ≈ −804.6 does not underflow; ln Φ(10) ≈ −7.6e-24
/// keeps its digits). Finite for every finite x.
pub fn normal_log_cdf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x > 0.0 {
        (-normal_sf(x)).ln_1p()
    } else {
        log_erfc(-x * FRAC_1_SQRT_2) - LN_2
    }
}

/// Φ⁻¹(p), the standard normal quantile, by Wichura's algorithm AS 241 (PPND16).
///
/// Returns −∞ at p = 0, +∞ at p = 1 and NaN outside [0, 1] or for NaN.
///
/// # Citations
/// M. J. Wichura, "Algorithm AS 241: The percentage points of the normal distribution",
/// Applied Statistics 37(3), 477–484, 1988.
pub fn normal_quantile(p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q * horner(&AS241_A, r) / horner(&AS241_B, r);
    }
    let tail = if q < 0.0 { p } else { 1.0 - p };
    let r = (-tail.ln()).sqrt();
    let value = if r <= 5.0 {
        let r = r - 1.6;
        horner(&AS241_C, r) / horner(&AS241_D, r)
    } else {
        let r = r - 5.0;
        horner(&AS241_E, r) / horner(&AS241_F, r)
    };
    if q < 0.0 { -value } else { value }
}

/// Φ⁻¹(1 − p) for small p without forming 1 − p (so p = 1e-300 works).
pub fn normal_quantile_upper(p: f64) -> f64 {
    -normal_quantile(p)
}

/// Evaluates Σ cᵢ xⁱ (coefficients from the constant term up).
fn horner(coefficients: &[f64; 8], x: f64) -> f64 {
    coefficients.iter().rev().fold(0.0, |acc, &c| acc * x + c)
}

/// Coefficients of AS 241 (PPND16), kept digit for digit as published so they can be checked
/// against the paper (hence more digits than an f64 holds).
#[allow(clippy::excessive_precision)]
mod as241 {
    pub(super) const AS241_A: [f64; 8] = [
        3.387_132_872_796_366_608,
        1.331_416_678_917_843_774_5e2,
        1.971_590_950_306_551_442_7e3,
        1.373_169_376_550_946_112_5e4,
        4.592_195_393_154_987_145_7e4,
        6.726_577_092_700_870_085_3e4,
        3.343_057_558_358_812_810_5e4,
        2.509_080_928_730_122_672_7e3,
    ];
    pub(super) const AS241_B: [f64; 8] = [
        1.0,
        4.231_333_070_160_091_125_2e1,
        6.871_870_074_920_579_083e2,
        5.394_196_021_424_751_107_7e3,
        2.121_379_430_158_659_586_7e4,
        3.930_789_580_009_271_061e4,
        2.872_908_573_572_194_267_4e4,
        5.226_495_278_852_854_561e3,
    ];
    pub(super) const AS241_C: [f64; 8] = [
        1.423_437_110_749_683_577_34,
        4.630_337_846_156_545_295_9,
        5.769_497_221_460_691_405_5,
        3.647_848_324_763_204_605_04,
        1.270_458_252_452_368_382_58,
        2.417_807_251_774_506_117_7e-1,
        2.272_384_498_926_918_458_33e-2,
        7.745_450_142_783_414_076_4e-4,
    ];
    pub(super) const AS241_D: [f64; 8] = [
        1.0,
        2.053_191_626_637_758_821_87,
        1.676_384_830_183_803_849_4,
        6.897_673_349_851_000_045_5e-1,
        1.481_039_764_274_800_745_9e-1,
        1.519_866_656_361_645_719_66e-2,
        5.475_938_084_995_344_946e-4,
        1.050_750_071_644_416_843_24e-9,
    ];
    pub(super) const AS241_E: [f64; 8] = [
        6.657_904_643_501_103_777_2,
        5.463_784_911_164_114_369_9,
        1.784_826_539_917_291_335_8,
        2.965_605_718_285_048_912_3e-1,
        2.653_218_952_657_612_309_3e-2,
        1.242_660_947_388_078_438_6e-3,
        2.711_555_568_743_487_578_15e-5,
        2.010_334_399_292_288_132_65e-7,
    ];
    pub(super) const AS241_F: [f64; 8] = [
        1.0,
        5.998_322_065_558_879_376_9e-1,
        1.369_298_809_227_358_053_1e-1,
        1.487_536_129_085_061_485_25e-2,
        7.868_691_311_456_132_591e-4,
        1.846_318_317_510_054_681_8e-5,
        1.421_511_758_316_445_888_7e-7,
        2.044_263_103_389_939_785_64e-15,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    #[test]
    fn matches_reference_values() {
        // Reference values from mpmath (50 digits): ncdf(x), log(ncdf(x)).
        let cases = [
            (0.0, 0.5),
            (1.0, 0.841_344_746_068_542_9),
            (-1.0, 0.158_655_253_931_457_05),
            (-1.96, 0.024_997_895_148_220_435),
            (-5.0, 2.866_515_718_791_939e-7),
            (-10.0, 7.619_853_024_160_527e-24),
            (-20.0, 2.753_624_118_606_233_7e-89),
        ];
        for (x, want) in cases {
            let got = normal_cdf(x);
            assert!(rel(got, want) < 1e-13, "Φ({x}) = {got}, want {want}");
            assert_eq!(normal_sf(-x), got);
        }
        assert!((normal_log_cdf(3.0) - (-0.001_350_809_964_748_193_8)).abs() < 1e-15);
    }

    #[test]
    fn log_cdf_keeps_digits_in_both_tails() {
        // ln Φ(−40): Φ(−40) = 3.655893540915e-350 underflows; its log does not.
        let expected = -804.608_442_013_753_8;
        let got = normal_log_cdf(-40.0);
        assert!(rel(got, expected) < 1e-13, "{got}");
        // Upper tail: ln Φ(10) = ln(1 − 7.62e-24) ≈ −7.62e-24.
        assert!(rel(normal_log_cdf(10.0), -7.619_853_024_160_527e-24) < 1e-12);
        // Continuity across the switch to the asymptotic series at erfc argument 25.
        let below = log_erfc(ASYMPTOTIC_FROM - 1e-9);
        let above = log_erfc(ASYMPTOTIC_FROM);
        assert!((below - above).abs() < 1e-6, "{below} vs {above}");
        assert_eq!(log_erfc(f64::INFINITY), f64::NEG_INFINITY);
        assert!(rel(log_erfc(f64::NEG_INFINITY), LN_2) < 1e-15);
        assert!(normal_log_cdf(-1e3).is_finite() && normal_log_cdf(-50.0) < normal_log_cdf(-40.0));
    }

    #[test]
    fn log_erfc_series_agrees_with_direct_value_where_both_work() {
        // For x in [20, 25), libm's erfc does not underflow; the series must agree.
        for &x in &[20.0, 22.5, 24.9] {
            let direct = libm::erfc(x).ln();
            let asym = -x * x - (x * PI.sqrt()).ln() + erfc_series(x).ln_1p();
            assert!(rel(asym, direct) < 1e-14, "x = {x}: {asym} vs {direct}");
        }
    }

    #[test]
    fn quantile_round_trips_through_the_tails() {
        // Φ(Φ⁻¹(p)) = p over 1e-300 ≤ p ≤ 0.5. In the lower tail d ln Φ/dx ≈ |x|, so an error
        // of a few ulps in x (|x|·k·ε_mach, from AS 241 and from the rounding of x/√2 inside Φ)
        // moves Φ by a relative k·x²·ε_mach: at x ≈ −37 (p = 1e-300) about 1e-13 for k = 1.
        // We allow k = 8, plus 8 ulps near the centre.
        let mut p = 0.5_f64;
        while p > 1e-300 {
            let x = normal_quantile(p);
            let tolerance = 8.0 * (1.0 + x * x) * f64::EPSILON;
            let back = normal_cdf(x);
            assert!(rel(back, p) < tolerance, "p = {p}: Φ(Φ⁻¹(p)) = {back}");
            assert_eq!(normal_quantile_upper(p), -x);
            p *= 0.37;
        }
        assert!(rel(normal_quantile(0.975), 1.959_963_984_540_054) < 1e-15);
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert_eq!(normal_quantile(1.0), f64::INFINITY);
        assert!(normal_quantile(1.5).is_nan());
        assert!(normal_quantile(f64::NAN).is_nan());
    }
}
