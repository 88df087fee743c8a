//! Calibrating Gaussian noise: the classic and the analytic (Balle & Wang 2018) σ for the
//! continuous Gaussian mechanism, and the exact (ε, δ) of the discrete Gaussian (Canonne, Kamath,
//! Steinke 2020, Theorem 7) used to certify every discrete Gaussian that dpml samples.
//!
//! # Citations
//! - C. Dwork, A. Roth. *The Algorithmic Foundations of Differential Privacy*, 2014, Theorem A.1
//!   (classic σ = Δ₂√(2 ln(1.25/δ))/ε, for ε < 1).
//! - B. Balle, Y.-X. Wang. *Improving the Gaussian Mechanism for Differential Privacy:
//!   Analytical Calibration and Optimal Denoising*. ICML 2018, Theorem 8 and Algorithm 1.
//! - C. Canonne, G. Kamath, T. Steinke. *The Discrete Gaussian for Differential Privacy*.
//!   NeurIPS 2020, Theorem 7.

use std::f64::consts::PI;

use crate::normal::{normal_cdf, normal_log_cdf};
use crate::rational::ulps_up;
use crate::validate::{self, invalid};
use crate::{MechanismError, Rational};

/// Relative safety margin on a numerically computed δ: the computed value must satisfy
/// δ̂·(1 + 1e−8) ≤ δ. The floating-point error of the sums below is far smaller (about
/// 1e−10 relative for a million terms), so the certified δ is an upper bound.
const DELTA_MARGIN: f64 = 1e-8;

/// The classic Gaussian σ = Δ₂·√(2 ln(1.25/δ))/ε (rounded up by a few ulps).
///
/// # Privacy
/// N(0, σ²) noise on a query of L2 sensitivity Δ₂ is (ε, δ)-DP for ε < 1 (Dwork & Roth 2014,
/// Theorem A.1). The bound is not valid for ε ≥ 1.
///
/// # Citations
/// Dwork & Roth 2014, Theorem A.1.
///
/// # Errors
/// [`MechanismError::InvalidParameter`] for ε not in (0, 1), δ not in (0, 1), or a sensitivity
/// that is not finite and > 0.
pub fn classic_gaussian_sigma(
    l2_sensitivity: f64,
    epsilon: f64,
    delta: f64,
) -> Result<f64, MechanismError> {
    let sens = validate::sensitivity(l2_sensitivity)?;
    let eps = validate::epsilon(epsilon)?;
    let delta = validate::delta(delta)?;
    if eps >= 1.0 {
        return Err(invalid(format!(
            "the classic Gaussian calibration needs epsilon < 1, got {eps}; use the analytic calibration"
        )));
    }
    // Five correctly rounded or 1-ulp operations: 8 ulps up covers their error.
    finite(
        ulps_up(sens * (2.0 * (1.25 / delta).ln()).sqrt() / eps, 8),
        "Gaussian sigma",
    )
}

/// δ(ε) of the continuous Gaussian mechanism with standard deviation `sigma` on a query of L2
/// sensitivity `l2_sensitivity`: Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) (Balle & Wang 2018,
/// Theorem 8). The second term is evaluated as exp(ε + ln Φ(·)) so large ε does not overflow.
pub fn analytic_gaussian_delta(sigma: f64, l2_sensitivity: f64, epsilon: f64) -> f64 {
    let s = sigma / l2_sensitivity;
    let a = 0.5 / s - epsilon * s;
    let b = -0.5 / s - epsilon * s;
    (normal_cdf(a) - (epsilon + normal_log_cdf(b)).exp()).max(0.0)
}

/// The smallest σ (up to a relative 1e−15, rounded up) for which the continuous Gaussian
/// mechanism is (ε, δ)-DP: the analytic Gaussian mechanism of Balle & Wang 2018.
///
/// # Privacy
/// σ solves Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) = δ, the exact privacy profile of the Gaussian
/// mechanism (valid for every ε > 0). Solved by bisection on σ/Δ, which the profile decreases in,
/// returning the upper end of the final bracket, where δ(σ) ≤ δ was checked.
///
/// # Citations
/// Balle & Wang 2018, Theorem 8 and Algorithm 1 (we bisect on σ directly rather than on their
/// reparametrisation; the fixed point is the same).
///
/// # Errors
/// [`MechanismError::InvalidParameter`] for invalid ε, δ or sensitivity, or when the solution is
/// outside [1e−15, 1e15]·Δ.
pub fn analytic_gaussian_sigma(
    l2_sensitivity: f64,
    epsilon: f64,
    delta: f64,
) -> Result<f64, MechanismError> {
    let sens = validate::sensitivity(l2_sensitivity)?;
    let eps = validate::epsilon(epsilon)?;
    let delta = validate::delta(delta)?;
    let profile = |s: f64| analytic_gaussian_delta(s, 1.0, eps);
    let out_of_range = || {
        invalid(format!(
            "no Gaussian sigma in [1e-15, 1e15] x sensitivity for epsilon {eps}, delta {delta}"
        ))
    };
    let mut hi = 1.0;
    while profile(hi) > delta {
        hi *= 2.0;
        if hi > 1e15 {
            return Err(out_of_range());
        }
    }
    let mut lo = hi;
    while profile(lo) <= delta {
        lo *= 0.5;
        if lo < 1e-15 {
            return Err(out_of_range());
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if profile(mid) > delta {
            lo = mid
        } else {
            hi = mid
        }
        if hi - lo <= hi * 1e-15 {
            break;
        }
    }
    finite(ulps_up(hi * sens, 2), "Gaussian sigma")
}

/// An upper bound on δ(ε) of the discrete Gaussian mechanism: integer noise with
/// P\[y\] ∝ exp(−y²/2σ²) on an integer query of sensitivity `sensitivity`.
///
/// # Privacy
/// CKS 2020, Theorem 7: the mechanism is (ε, δ)-DP with
/// δ = P\[Y > εσ²/Δ − Δ/2\] − e^ε P\[Y > εσ²/Δ + Δ/2\] = Σ_y (p(y) − e^ε p(y+Δ))₊,
/// and this δ is optimal for integer Δ. We sum the positive parts term by term over every y
/// with |y| ≤ 39σ + 2 (terms beyond are below e^−760 and underflow), stopping early once a
/// geometric bound on the remaining terms is below 1e−12 of the sum (that bound is then added,
/// not dropped), and divide by the lower
/// bound max(1, √(2π)σ) of the normalising constant Σ_y exp(−y²/2σ²) (by Poisson summation it
/// equals √(2π)σ·(1 + 2Σ_k e^{−2π²σ²k²}) ≥ √(2π)σ): a smaller normaliser only enlarges δ.
/// Summing positive parts (instead of the two tail probabilities) makes an off-by-one in the
/// threshold harmless and avoids cancellation. Pass a σ² that is a lower bound of the true one.
///
/// # Citations
/// CKS 2020, Theorem 7.
///
/// The cost is at most about 80σ evaluations of `exp`, usually ~10σ. For parameters outside its domain
/// (σ² not in (0, 2^48], ε negative or not finite, sensitivity 0) it returns the trivial
/// bound 1.
pub fn discrete_gaussian_delta(sigma2: f64, sensitivity: u64, epsilon: f64) -> f64 {
    let valid =
        sigma2 > 0.0 && sigma2 <= (1u64 << 48) as f64 && epsilon.is_finite() && epsilon >= 0.0;
    if !valid || sensitivity == 0 {
        return 1.0;
    }
    let sigma = sigma2.sqrt();
    let d = sensitivity as f64;
    let threshold = epsilon * sigma2 / d - d / 2.0;
    let reach = (39.0 * sigma).ceil() + 2.0;
    let mut y = (threshold.floor() - 2.0).max(-reach);
    let mut sum = 0.0;
    while y <= reach {
        let privacy_loss = (2.0 * y * d + d * d) / (2.0 * sigma2);
        let excess = -(epsilon - privacy_loss).exp_m1();
        if excess > 0.0 {
            let weight = (-y * y / (2.0 * sigma2)).exp();
            sum += weight * excess;
            if y > 0.0 {
                // For z > y > 0: exp(−z²/2σ²) ≤ exp(−y²/2σ²)·exp(−y(z−y)/σ²), so the rest of the
                // sum is at most weight/(e^{y/σ²} − 1). Once that is negligible, add it and stop.
                let rest = weight / (y / sigma2).exp_m1();
                if rest <= sum * 1e-12 {
                    sum += rest;
                    break;
                }
            }
        }
        y += 1.0;
    }
    let normaliser = ((2.0 * PI).sqrt() * sigma).max(1.0);
    sum / normaliser + 1e-300
}

/// The rational σ² (with denominator 2^`den_log2`) of a discrete Gaussian that is certified
/// (ε, δ)-DP by [`discrete_gaussian_delta`] for integer `sensitivity`, starting from
/// `start_sigma` (normally the continuous analytic σ) and increasing it only if the discrete
/// Gaussian needs more noise: a doubling search on the relative increase (from 2^−20) for a
/// passing σ, then up to 6 bisection steps (while the bracket is wider than 1e−6 relative).
pub(crate) fn discrete_gaussian_sigma2(
    sensitivity: u64,
    epsilon: f64,
    delta: f64,
    start_sigma: f64,
    den_log2: u32,
) -> Result<Rational, MechanismError> {
    let certify = |sigma: f64| -> Result<Option<Rational>, MechanismError> {
        let sigma2 = Rational::ceil_from_f64(ulps_up(sigma * sigma, 1), den_log2)?;
        let delta_hat = discrete_gaussian_delta(sigma2.to_f64_down(), sensitivity, epsilon);
        Ok((delta_hat * (1.0 + DELTA_MARGIN) <= delta).then_some(sigma2))
    };
    if let Some(s2) = certify(start_sigma)? {
        return Ok(s2);
    }
    let (mut lo, mut step) = (start_sigma, 1.0 / 1_048_576.0);
    let (mut hi, mut best) = loop {
        let sigma = start_sigma * (1.0 + step);
        if let Some(s2) = certify(sigma)? {
            break (sigma, s2);
        }
        lo = sigma;
        step *= 2.0;
        if step > 64.0 {
            return Err(invalid(format!(
                "cannot certify a discrete Gaussian for epsilon {epsilon}, delta {delta}, sensitivity {sensitivity}"
            )));
        }
    };
    for _ in 0..6 {
        if hi - lo <= hi * 1e-6 {
            break;
        }
        let mid = 0.5 * (lo + hi);
        match certify(mid)? {
            Some(s2) => (hi, best) = (mid, s2),
            None => lo = mid,
        }
    }
    Ok(best)
}

fn finite(x: f64, what: &str) -> Result<f64, MechanismError> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(invalid(format!("{what} overflows: {x}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analytic_sigma_matches_reference_values() {
        // References: bisection on the same profile in 50-digit arithmetic (mpmath). The value
        // for (ε, δ) = (1, 1e−5) is the ≈3.73 quoted for Balle & Wang's calibration.
        let cases = [
            (1.0, 1e-5, 3.730_631_634_815_94),
            (0.5, 1e-6, 8.057_618_480_725_04),
            (2.0, 1e-5, 1.993_812_445_643_54),
            (10.0, 1e-10, 0.683_043_967_227_481),
            (0.1, 1e-5, 30.749_566_131_977_4),
        ];
        for (eps, delta, want) in cases {
            let got = analytic_gaussian_sigma(1.0, eps, delta).unwrap();
            assert!(
                got >= want * (1.0 - 1e-12) && got <= want * (1.0 + 1e-9),
                "ε={eps}: {got} vs {want}"
            );
            let scaled = analytic_gaussian_sigma(2.5, eps, delta).unwrap();
            assert!((scaled / got - 2.5).abs() < 1e-9);
        }
        // Never above the classic σ where the classic one is valid.
        let classic = classic_gaussian_sigma(1.0, 0.5, 1e-5).unwrap();
        assert!((classic - 2.0 * (2.0 * 125_000f64.ln()).sqrt()).abs() < 1e-12);
        assert!(analytic_gaussian_sigma(1.0, 0.5, 1e-5).unwrap() < classic);
    }

    #[test]
    fn classic_refuses_large_epsilon() {
        let err = classic_gaussian_sigma(1.0, 1.5, 1e-5)
            .unwrap_err()
            .to_string();
        assert!(err.contains("epsilon < 1, got 1.5"), "{err}");
        assert!(
            analytic_gaussian_sigma(1.0, f64::NAN, 1e-5)
                .unwrap_err()
                .to_string()
                .contains("NaN")
        );
        assert!(
            analytic_gaussian_sigma(1.0, 1.0, 2.0)
                .unwrap_err()
                .to_string()
                .contains("delta")
        );
    }

    #[test]
    fn discrete_gaussian_delta_matches_exact_sums() {
        // References: Theorem 7 summed exactly in 50-digit arithmetic (mpmath), with the exact
        // normaliser. Ours uses a smaller normaliser (≥ relative 1e−30 here), so it may only be
        // larger, by a negligible amount.
        let cases = [
            (4.0, 1u64, 0.5, 0.054_007_223_694_154_42),
            (14.0, 1, 1.0, 9.956_110_041_959_672e-6),
            (2.0, 3, 2.0, 0.378_883_057_249_396_5),
        ];
        for (s2, d, eps, want) in cases {
            let got = discrete_gaussian_delta(s2, d, eps);
            assert!(
                ((got - want) / want).abs() < 1e-9,
                "σ²={s2}: {got} vs {want}"
            );
        }
        assert_eq!(discrete_gaussian_delta(f64::NAN, 1, 1.0), 1.0);
        assert_eq!(discrete_gaussian_delta(1e30, 1, 1.0), 1.0);
        assert_eq!(discrete_gaussian_delta(4.0, 0, 1.0), 1.0);
    }

    #[test]
    fn discrete_gaussian_sigma_is_certified() {
        let s2 = discrete_gaussian_sigma2(
            1,
            1.0,
            1e-5,
            analytic_gaussian_sigma(1.0, 1.0, 1e-5).unwrap(),
            16,
        )
        .unwrap();
        let sigma2 = s2.to_f64_down();
        assert!(discrete_gaussian_delta(sigma2, 1, 1.0) <= 1e-5);
        assert!(sigma2.sqrt() < 3.8 && sigma2.sqrt() > 3.6, "{sigma2}");
    }
}
