//! Exact integer noise for the private k-means variants: the discrete Laplace and discrete
//! Gaussian samplers of `dpml-mechanisms` (Canonne, Kamath, Steinke 2020), with their parameters
//! rounded outward (the noise used is never smaller than the noise asked for) and their cost as
//! [`PrivacyEvent`]s.

use dpml_mechanisms::exact::{DiscreteGaussian, DiscreteLaplace};
use dpml_mechanisms::{DpRng, PrivacyEvent, Rational};

use crate::LearnError;

/// Largest `2·num·den·(σ+1)²` we let the discrete Gaussian's denominator reach (its sampler
/// needs it below 2^64).
const GAUSSIAN_BUDGET_LOG2: f64 = 61.0;

/// One exact integer noise distribution.
#[derive(Debug, Clone)]
pub(crate) enum IntNoise {
    /// P(z) ∝ exp(−|z|/t).
    Laplace(DiscreteLaplace),
    /// P(z) ∝ exp(−z²/2σ²).
    Gaussian(DiscreteGaussian),
}

/// A noise scale the exact sampler cannot hold, said in the user's terms: the budget is too
/// small for the data's range.
fn too_wide(scale: f64, _: dpml_mechanisms::MechanismError) -> LearnError {
    LearnError::invalid(
        "--epsilon",
        "must leave a noise scale the exact sampler holds (give a larger epsilon, or narrower \
         bounds)",
        format!("one that needs a scale of {scale:e} grid units"),
    )
}

impl IntNoise {
    /// Discrete Laplace with scale at least `scale` (grid units).
    ///
    /// # Errors
    /// [`LearnError::Mechanism`] when the scale is not finite, not positive or beyond the
    /// sampler's range.
    pub(crate) fn laplace(scale: f64) -> Result<Self, LearnError> {
        let t = Rational::ceil_from_f64_precise(scale).map_err(|e| too_wide(scale, e))?;
        Ok(IntNoise::Laplace(DiscreteLaplace::new(t)?))
    }

    /// Discrete Gaussian with σ² at least `sigma * sigma` (grid units).
    ///
    /// # Errors
    /// As [`IntNoise::laplace`].
    pub(crate) fn gaussian(sigma: f64) -> Result<Self, LearnError> {
        let sigma2 = sigma * sigma;
        // The largest power-of-two denominator 2^k with 2·σ²·2^{2k}·(σ+1)² ≤ 2^61.
        let used = (sigma2 * (sigma + 1.0) * (sigma + 1.0)).log2();
        let k = ((GAUSSIAN_BUDGET_LOG2 - 1.0 - used) / 2.0)
            .floor()
            .clamp(0.0, 30.0) as u32;
        let s2 = Rational::ceil_from_f64(sigma2, k).map_err(|e| too_wide(sigma, e))?;
        Ok(IntNoise::Gaussian(DiscreteGaussian::new(s2)?))
    }

    /// One draw.
    pub(crate) fn sample(&self, rng: &mut DpRng) -> i64 {
        match self {
            IntNoise::Laplace(l) => l.sample(rng),
            IntNoise::Gaussian(g) => g.sample(rng),
        }
    }

    /// The scale t (Laplace) or σ (Gaussian) actually used, rounded down so that a cost
    /// computed from it is on the safe side.
    pub(crate) fn parameter(&self) -> f64 {
        match self {
            IntNoise::Laplace(l) => l.scale().to_f64_down(),
            IntNoise::Gaussian(g) => below(g.sigma2().to_f64_down().sqrt()),
        }
    }

    /// The event of adding this noise to an integer query of sensitivity `sensitivity`.
    pub(crate) fn event(&self, sensitivity: u64) -> PrivacyEvent {
        match self {
            IntNoise::Laplace(_) => PrivacyEvent::DiscreteLaplace {
                scale: self.parameter(),
                sensitivity,
            },
            IntNoise::Gaussian(_) => PrivacyEvent::DiscreteGaussian {
                sigma: self.parameter(),
                sensitivity,
            },
        }
    }
}

/// The largest `f64` below a positive finite `x` (`f64::next_down` needs Rust 1.86).
fn below(x: f64) -> f64 {
    if x > 0.0 && x.is_finite() {
        f64::from_bits(x.to_bits() - 1)
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_round_outward_and_events_match() {
        let l = IntNoise::laplace(12.5).unwrap();
        assert!(l.parameter() <= 12.5 && l.parameter() > 12.5 * (1.0 - 1e-12));
        assert_eq!(
            l.event(3),
            PrivacyEvent::DiscreteLaplace {
                scale: l.parameter(),
                sensitivity: 3
            }
        );
        for sigma in [0.05, 1.0, 3.7, 9000.0, 16000.0] {
            let g = IntNoise::gaussian(sigma).unwrap();
            let IntNoise::Gaussian(inner) = &g else {
                unreachable!()
            };
            let s2 = inner.sigma2();
            assert!(
                s2.num() as f64 / s2.den() as f64 >= sigma * sigma,
                "{sigma}"
            );
            assert!(
                g.parameter() <= sigma * (1.0 + 1e-6) && g.parameter() > sigma * (1.0 - 1e-6),
                "{sigma}"
            );
        }
        assert!(IntNoise::laplace(f64::NAN).is_err());
        assert!(IntNoise::laplace(1e300).is_err());
    }

    #[test]
    fn samples_have_the_stated_spread() {
        // Var of the discrete Laplace with t = 4 is 2p/(1−p)² with p = e^{-1/t} (≈ 31.8); of the
        // discrete Gaussian with σ = 4 it is σ² = 16 up to a relative 1e-10. With 20 000 draws
        // the sample variance has relative sd √((κ−1)/n) ≤ √(5/20000) ≈ 1.6% (kurtosis κ ≤ 6 for
        // the Laplace); allow 8% (5 sd). The mean has sd √(var/n); allow 5 sd.
        let p = (-0.25f64).exp();
        let laplace_var = 2.0 * p / ((1.0 - p) * (1.0 - p));
        let mut rng = DpRng::seeded(5);
        for (noise, var) in [
            (IntNoise::laplace(4.0).unwrap(), laplace_var),
            (IntNoise::gaussian(4.0).unwrap(), 16.0),
        ] {
            let n = 20_000;
            let xs: Vec<f64> = (0..n).map(|_| noise.sample(&mut rng) as f64).collect();
            let mean = xs.iter().sum::<f64>() / n as f64;
            let v = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
            assert!((v / var - 1.0).abs() < 0.08, "variance {v} vs {var}");
            assert!(mean.abs() < 5.0 * (var / n as f64).sqrt(), "mean {mean}");
        }
    }
}
