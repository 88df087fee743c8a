//! Exact (Clopper–Pearson) confidence bounds for a binomial proportion.
//!
//! The bounds are quantiles of Beta distributions, found by bisection on the regularized
//! incomplete beta function `I_x(a, b)` (statrs). Bisection keeps a bracket whose ends stay on
//! known sides of the quantile, so an upper bound is returned from the high end and a lower bound
//! from the low end: rounding never makes a bound less conservative.

use statrs::function::beta::checked_beta_reg;

use crate::error::{AuditError, Result};
use crate::validate;

/// A two-sided confidence interval for a proportion.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Interval {
    /// Lower end.
    pub lower: f64,
    /// Upper end.
    pub upper: f64,
}

/// Two-sided Clopper–Pearson interval for `successes` out of `trials` at `confidence`
/// (e.g. 0.95): each side is a one-sided bound at level `(1 + confidence) / 2`.
///
/// `lower = Beta⁻¹(α/2; x, n − x + 1)` (0 when x = 0) and
/// `upper = Beta⁻¹(1 − α/2; x + 1, n − x)` (1 when x = n), with `α = 1 − confidence`.
///
/// # Citations
/// C. J. Clopper and E. S. Pearson, "The use of confidence or fiducial limits illustrated in
/// the case of the binomial", Biometrika 26 (1934).
///
/// # Errors
/// [`AuditError::Invalid`] when `trials` is 0 or `successes > trials`;
/// [`AuditError::OutOfRange`] when `confidence` is not in (0, 1).
pub fn clopper_pearson(successes: u64, trials: u64, confidence: f64) -> Result<Interval> {
    validate::confidence(confidence)?;
    let one_sided = 1.0 - (1.0 - confidence) / 2.0;
    Ok(Interval {
        lower: clopper_pearson_lower(successes, trials, one_sided)?,
        upper: clopper_pearson_upper(successes, trials, one_sided)?,
    })
}

/// One-sided upper Clopper–Pearson bound: `P[p ≤ upper] ≥ confidence`.
/// `upper = Beta⁻¹(confidence; x + 1, n − x)`, and 1 when `x = n`.
///
/// # Errors
/// As [`clopper_pearson`].
pub fn clopper_pearson_upper(successes: u64, trials: u64, confidence: f64) -> Result<f64> {
    check_counts(successes, trials)?;
    validate::confidence(confidence)?;
    if successes == trials {
        return Ok(1.0);
    }
    let (a, b) = ((successes + 1) as f64, (trials - successes) as f64);
    Ok(beta_quantile_bracket(confidence, a, b)?.1)
}

/// One-sided lower Clopper–Pearson bound: `P[p ≥ lower] ≥ confidence`.
/// `lower = Beta⁻¹(1 − confidence; x, n − x + 1)`, and 0 when `x = 0`.
///
/// # Errors
/// As [`clopper_pearson`].
pub fn clopper_pearson_lower(successes: u64, trials: u64, confidence: f64) -> Result<f64> {
    check_counts(successes, trials)?;
    validate::confidence(confidence)?;
    if successes == 0 {
        return Ok(0.0);
    }
    let (a, b) = (successes as f64, (trials - successes + 1) as f64);
    Ok(beta_quantile_bracket(1.0 - confidence, a, b)?.0)
}

fn check_counts(successes: u64, trials: u64) -> Result<()> {
    if trials == 0 {
        return Err(AuditError::Invalid(
            "trials must be at least 1, got 0".into(),
        ));
    }
    if successes > trials {
        return Err(AuditError::Invalid(format!(
            "successes must be at most trials ({trials}), got {successes}"
        )));
    }
    Ok(())
}

/// A bracket `(lo, hi)` around the `p`-quantile of Beta(a, b): `I_lo(a,b) ≤ p ≤ I_hi(a,b)`,
/// narrowed by bisection until the two ends are adjacent floats (or 200 halvings).
fn beta_quantile_bracket(p: f64, a: f64, b: f64) -> Result<(f64, f64)> {
    let cdf = |x: f64| {
        checked_beta_reg(a, b, x)
            .map_err(|e| AuditError::Numeric(format!("regularized beta I_{x}({a}, {b}): {e}")))
    };
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if cdf(mid)? < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // x = 0, n = 10 at 95% two-sided: upper = 1 − 0.025^(1/10) = 0.30850 (closed form).
        let i = clopper_pearson(0, 10, 0.95).unwrap();
        assert_eq!(i.lower, 0.0);
        assert!(
            (i.upper - (1.0 - 0.025f64.powf(0.1))).abs() < 1e-12,
            "{i:?}"
        );
        assert!((i.upper - 0.3085).abs() < 5e-5);
        // x = 5, n = 10: (0.1871, 0.8129), symmetric.
        let i = clopper_pearson(5, 10, 0.95).unwrap();
        assert!(
            (i.lower - 0.1871).abs() < 5e-5 && (i.upper - 0.8129).abs() < 5e-5,
            "{i:?}"
        );
        assert!((i.lower + i.upper - 1.0).abs() < 1e-12);
        // x = n = 10: lower = 0.025^(1/10) = 0.69150, upper = 1.
        let i = clopper_pearson(10, 10, 0.95).unwrap();
        assert!((i.lower - 0.025f64.powf(0.1)).abs() < 1e-12 && i.upper == 1.0);
    }

    #[test]
    fn bounds_are_the_binomial_tail_quantiles() {
        // Definition check: at the upper bound u, P[Bin(n, u) ≤ x] = α; by the beta–binomial
        // identity that tail is 1 − I_u(x+1, n−x). Likewise I_l(x, n−x+1) = α at the lower l.
        for &(x, n) in &[(1u64, 7u64), (37, 100), (999, 1000), (3, 100_000)] {
            let u = clopper_pearson_upper(x, n, 0.99).unwrap();
            let tail = 1.0 - checked_beta_reg((x + 1) as f64, (n - x) as f64, u).unwrap();
            assert!((tail - 0.01).abs() < 1e-9, "x={x} n={n} tail={tail}");
            let l = clopper_pearson_lower(x, n, 0.99).unwrap();
            let tail = checked_beta_reg(x as f64, (n - x + 1) as f64, l).unwrap();
            assert!((tail - 0.01).abs() < 1e-9, "x={x} n={n} tail={tail}");
            assert!(l < x as f64 / n as f64 && (x as f64 / n as f64) < u);
        }
    }

    #[test]
    fn bad_input_is_named() {
        assert!(
            clopper_pearson(0, 0, 0.95)
                .unwrap_err()
                .to_string()
                .contains("got 0")
        );
        let e = clopper_pearson(11, 10, 0.95).unwrap_err();
        assert!(e.to_string().contains("got 11"), "{e}");
        let e = clopper_pearson(1, 10, 1.0).unwrap_err();
        assert!(e.to_string().contains("confidence"), "{e}");
    }
}
