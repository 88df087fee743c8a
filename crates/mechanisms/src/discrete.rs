//! Discrete Laplace and discrete Gaussian mechanisms on integer-valued queries (counts, integer
//! sums): exact integer noise, integer outputs.

use crate::calibration::{analytic_gaussian_sigma, discrete_gaussian_sigma2};
use crate::exact::{DiscreteGaussian, DiscreteLaplace};
use crate::rational::{ulps_down, ulps_up};
use crate::validate::{self, invalid};
use crate::{DpRng, MechanismError, PrivacyEvent, Rational};

/// Largest σ accepted by [`DiscreteGaussianMechanism`]: 2^14, where the exact sampler's
/// integer arithmetic still fits and the δ certificate sums about a million terms.
pub const MAX_DISCRETE_GAUSSIAN_SIGMA: f64 = 16384.0;

/// The discrete Laplace mechanism: x + Y with P\[Y = y\] ∝ exp(−|y|/t), t ≥ Δ/ε.
///
/// # Privacy
/// For integer queries with |x − x'| ≤ Δ, every output probability changes by at most
/// exp(Δ/t) ≤ e^ε: ε-DP. t is Δ/ε rounded *up* to a rational (2^-49 relative at most), so the
/// realised ε = Δ/t never exceeds the requested one.
///
/// # Citations
/// - A. Ghosh, T. Roughgarden, M. Sundararajan. *Universally Utility-Maximizing Privacy
///   Mechanisms*. STOC 2009 (the geometric mechanism).
/// - C. Canonne, G. Kamath, T. Steinke. *The Discrete Gaussian for Differential Privacy*.
///   NeurIPS 2020, Algorithm 2 (exact sampling).
///
/// # Errors
/// [`DiscreteLaplaceMechanism::new`] returns [`MechanismError::InvalidParameter`] for a
/// sensitivity of 0 (or above 2^53), an ε that is not finite and > 0, or a scale above 2^48.
///
/// ```
/// use dpml_mechanisms::{DiscreteLaplaceMechanism, DpRng};
/// let mech = DiscreteLaplaceMechanism::new(1, 0.5)?;
/// let noisy: i64 = mech.release(&mut DpRng::seeded(1), 120);
/// # let _ = noisy;
/// # Ok::<(), dpml_mechanisms::MechanismError>(())
/// ```
#[derive(Debug, Clone)]
pub struct DiscreteLaplaceMechanism {
    sensitivity: u64,
    epsilon: f64,
    noise: DiscreteLaplace,
}

impl DiscreteLaplaceMechanism {
    /// The ε-DP discrete Laplace mechanism for an integer query of sensitivity `sensitivity`.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn new(sensitivity: u64, epsilon: f64) -> Result<Self, MechanismError> {
        let sensitivity = validate::integer_sensitivity(sensitivity)?;
        let epsilon = validate::epsilon(epsilon)?;
        let scale = sensitivity as f64 / epsilon;
        // The sampler's own limit, checked first: a scale past 2^64 would fail as a rational,
        // in a rational's terms.
        if scale > 2f64.powi(48) {
            return Err(invalid(format!(
                "discrete Laplace scale Δ/ε = {scale:e} must be at most 2^48"
            )));
        }
        let t = Rational::ceil_from_f64_precise(ulps_up(scale, 1))?;
        Ok(Self {
            sensitivity,
            epsilon,
            noise: DiscreteLaplace::new(t)?,
        })
    }

    /// The scale t (≥ Δ/ε), rounded down for display.
    pub fn scale(&self) -> f64 {
        self.noise.scale().to_f64_down()
    }

    /// The exact rational scale used by the sampler.
    pub fn scale_rational(&self) -> Rational {
        self.noise.scale()
    }

    /// The requested ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The integer sensitivity Δ.
    pub fn sensitivity(&self) -> u64 {
        self.sensitivity
    }

    /// The privacy cost of one release.
    pub fn event(&self) -> PrivacyEvent {
        PrivacyEvent::DiscreteLaplace {
            scale: self.scale(),
            sensitivity: self.sensitivity,
        }
    }

    /// `value` plus discrete Laplace noise (saturating at the `i64` range, which is
    /// post-processing of the exact sum).
    pub fn release(&self, rng: &mut DpRng, value: i64) -> i64 {
        value.saturating_add(self.noise.sample(rng))
    }
}

/// The discrete Gaussian mechanism: x + Y with P\[Y = y\] ∝ exp(−y²/2σ²).
///
/// # Privacy
/// σ starts at the analytic continuous σ for (ε, δ, Δ) (Balle & Wang 2018), σ² is rounded *up*
/// to a rational, and σ is raised further only if needed until CKS 2020 Theorem 7,
/// δ = P\[Y > εσ²/Δ − Δ/2\] − e^ε P\[Y > εσ²/Δ + Δ/2\] (exact and optimal for integer Δ), is at
/// most the requested δ. That δ is evaluated by summing the pmf directly with a normaliser that
/// can only be too small and a relative margin of 1e−8 (see
/// [`crate::calibration::discrete_gaussian_delta`]), so it is an upper bound: the mechanism is
/// (ε, δ)-DP. We use Theorem 7 rather than the continuous σ plus a margin because it is exact
/// for the distribution actually sampled.
///
/// # Citations
/// C. Canonne, G. Kamath, T. Steinke. *The Discrete Gaussian for Differential Privacy*.
/// NeurIPS 2020, Algorithm 3 and Theorem 7.
///
/// # Errors
/// [`DiscreteGaussianMechanism::new`] returns [`MechanismError::InvalidParameter`] for a
/// sensitivity of 0 (or above 2^53), ε not finite and > 0, δ outside (0, 1), or a σ above
/// [`MAX_DISCRETE_GAUSSIAN_SIGMA`] (use [`crate::GaussianMechanism`] there).
#[derive(Debug, Clone)]
pub struct DiscreteGaussianMechanism {
    sensitivity: u64,
    epsilon: f64,
    delta: f64,
    noise: DiscreteGaussian,
}

impl DiscreteGaussianMechanism {
    /// The (ε, δ)-DP discrete Gaussian mechanism for an integer query of L2 sensitivity
    /// `sensitivity`.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn new(sensitivity: u64, epsilon: f64, delta: f64) -> Result<Self, MechanismError> {
        let sensitivity = validate::integer_sensitivity(sensitivity)?;
        let epsilon = validate::epsilon(epsilon)?;
        let delta = validate::delta(delta)?;
        let sigma = analytic_gaussian_sigma(sensitivity as f64, epsilon, delta)?;
        if sigma > MAX_DISCRETE_GAUSSIAN_SIGMA {
            return Err(invalid(format!(
                "discrete Gaussian sigma {sigma} for sensitivity {sensitivity}, epsilon {epsilon}, delta {delta} \
                 exceeds 2^14; use the Gaussian mechanism on real values"
            )));
        }
        // The largest denominator 2^j (j ≤ 16) keeping 2·n·d·t² ≈ 2σ²(σ+1)²·4^j below 2^62.
        let spread = (sigma * sigma * (sigma + 1.0) * (sigma + 1.0)).log2();
        let den_log2 = ((61.0 - spread) / 2.0).floor().clamp(0.0, 16.0) as u32;
        let sigma2 = discrete_gaussian_sigma2(sensitivity, epsilon, delta, sigma, den_log2)?;
        Ok(Self {
            sensitivity,
            epsilon,
            delta,
            noise: DiscreteGaussian::new(sigma2)?,
        })
    }

    /// σ (≥ the continuous analytic σ), rounded down for display.
    pub fn sigma(&self) -> f64 {
        ulps_down(self.noise.sigma2().to_f64_down().sqrt(), 1)
    }

    /// The exact rational σ² used by the sampler.
    pub fn sigma2(&self) -> Rational {
        self.noise.sigma2()
    }

    /// The requested ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The requested δ (the certified δ at ε is at most this).
    pub fn delta(&self) -> f64 {
        self.delta
    }

    /// The integer sensitivity Δ.
    pub fn sensitivity(&self) -> u64 {
        self.sensitivity
    }

    /// The privacy cost of one release.
    pub fn event(&self) -> PrivacyEvent {
        PrivacyEvent::DiscreteGaussian {
            sigma: self.sigma(),
            sensitivity: self.sensitivity,
        }
    }

    /// `value` plus discrete Gaussian noise (saturating at the `i64` range).
    pub fn release(&self, rng: &mut DpRng, value: i64) -> i64 {
        value.saturating_add(self.noise.sample(rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::discrete_gaussian_delta;
    use crate::testing::{chi_square, chi_square_critical, violates};

    /// Counts of outputs on x = 0 and x = Δ, one bucket per integer in [lo, hi] plus two tails.
    fn buckets(
        mut draw: impl FnMut(i64) -> i64,
        delta_x: i64,
        lo: i64,
        hi: i64,
        n: usize,
    ) -> (Vec<u64>, Vec<u64>) {
        let width = (hi - lo + 3) as usize;
        let (mut a, mut b) = (vec![0u64; width], vec![0u64; width]);
        for _ in 0..n {
            a[(draw(0).clamp(lo - 1, hi + 1) - lo + 1) as usize] += 1;
            b[(draw(delta_x).clamp(lo - 1, hi + 1) - lo + 1) as usize] += 1;
        }
        (a, b)
    }

    #[test]
    fn a_scale_past_the_samplers_limit_is_refused_in_its_terms() {
        for eps in [1e-15, 1e-300] {
            let e = DiscreteLaplaceMechanism::new(2, eps)
                .unwrap_err()
                .to_string();
            assert!(e.contains("must be at most 2^48"), "{eps}: {e}");
        }
        assert!(DiscreteLaplaceMechanism::new(1, 2f64.powi(-47)).is_ok());
    }

    #[test]
    fn discrete_laplace_law_and_scale() {
        let m = DiscreteLaplaceMechanism::new(2, 0.5).unwrap();
        assert!(m.scale() >= 4.0 && m.scale() < 4.0 * (1.0 + 1e-12));
        assert_eq!(
            m.event(),
            PrivacyEvent::DiscreteLaplace {
                scale: m.scale(),
                sensitivity: 2
            }
        );
        // Chi-square (pooled cells, 0.1% level, Wilson–Hilferty critical value) on x = 10.
        let mut rng = DpRng::seeded(51);
        let n = 50_000u64;
        let t = 4.0f64;
        let range = -60i64..=60;
        let mut counts = vec![0u64; 121];
        for _ in 0..n {
            let y = m.release(&mut rng, 10) - 10;
            counts[(y.clamp(-60, 60) + 60) as usize] += 1;
        }
        let z: f64 = (1.0 + (-1.0 / t).exp()) / (1.0 - (-1.0 / t).exp());
        let probs: Vec<f64> = range.map(|k| (-(k as f64).abs() / t).exp() / z).collect();
        let (stat, df) = chi_square(&counts, &probs, n);
        assert!(stat < chi_square_critical(df, 0.001), "{stat} df {df}");
    }

    #[test]
    fn discrete_gaussian_is_certified_and_fits() {
        let m = DiscreteGaussianMechanism::new(1, 1.0, 1e-5).unwrap();
        let s = m.sigma();
        // The discrete Gaussian needs slightly more noise than the continuous one here (3.7306).
        assert!((3.730_631..3.75).contains(&s), "{s}");
        assert!(discrete_gaussian_delta(m.sigma2().to_f64_down(), 1, 1.0) <= 1e-5);
        let mut rng = DpRng::seeded(52);
        let n = 50_000u64;
        let mut counts = vec![0u64; 81];
        for _ in 0..n {
            counts[((m.release(&mut rng, -7) + 7).clamp(-40, 40) + 40) as usize] += 1;
        }
        let s2 = m.sigma2().num() as f64 / m.sigma2().den() as f64;
        let w: Vec<f64> = (-40..=40)
            .map(|k: i64| (-((k * k) as f64) / (2.0 * s2)).exp())
            .collect();
        let total: f64 = w.iter().sum();
        let probs: Vec<f64> = w.iter().map(|x| x / total).collect();
        let (stat, df) = chi_square(&counts, &probs, n);
        assert!(stat < chi_square_critical(df, 0.001), "{stat} df {df}");
    }

    #[test]
    fn privacy_checks_pass_and_catch_under_noise() {
        let n = 100_000;
        let mut rng = DpRng::seeded(53);
        // Discrete Laplace, ε = 1, Δ = 1.
        let honest = DiscreteLaplaceMechanism::new(1, 1.0).unwrap();
        let (a, b) = buckets(|x| honest.release(&mut rng, x), 1, -10, 11, n);
        let (bad, z, crit) = violates(&a, &b, n as u64, 1.0, 0.0);
        assert!(!bad, "discrete Laplace flagged: {z} > {crit}");
        let under = DiscreteLaplaceMechanism::new(1, 2.0).unwrap();
        let (a, b) = buckets(|x| under.release(&mut rng, x), 1, -10, 11, n);
        assert!(
            violates(&a, &b, n as u64, 1.0, 0.0).0,
            "2ε discrete Laplace not caught"
        );
        // Discrete Gaussian, (1, 1e−5), Δ = 1.
        let honest = DiscreteGaussianMechanism::new(1, 1.0, 1e-5).unwrap();
        let (a, b) = buckets(|x| honest.release(&mut rng, x), 1, -16, 17, n);
        let (bad, z, crit) = violates(&a, &b, n as u64, 1.0, 1e-5);
        assert!(!bad, "discrete Gaussian flagged: {z} > {crit}");
        // Calibrated for Δ = 1 but used with neighbours 2 apart: σ effectively halved. The
        // excess is spread over many integers, so this check uses twice the draws.
        let (a, b) = buckets(|x| honest.release(&mut rng, x), 2, -16, 18, 2 * n);
        let (bad, z, crit) = violates(&a, &b, 2 * n as u64, 1.0, 1e-5);
        assert!(
            bad,
            "half-noise discrete Gaussian not caught: {z} <= {crit}"
        );
    }

    #[test]
    fn invalid_parameters_are_named() {
        assert!(
            DiscreteLaplaceMechanism::new(0, 1.0)
                .unwrap_err()
                .to_string()
                .contains("got 0")
        );
        assert!(
            DiscreteLaplaceMechanism::new(1, -2.0)
                .unwrap_err()
                .to_string()
                .contains("got -2")
        );
        assert!(
            DiscreteGaussianMechanism::new(1, 1.0, 1.5)
                .unwrap_err()
                .to_string()
                .contains("got 1.5")
        );
        let err = DiscreteGaussianMechanism::new(100_000, 0.1, 1e-6)
            .unwrap_err()
            .to_string();
        assert!(err.contains("exceeds 2^14"), "{err}");
    }
}
