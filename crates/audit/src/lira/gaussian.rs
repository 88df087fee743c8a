//! Gaussian log-density and tail functions for LiRA's likelihood ratios, accurate far into the
//! tails (where the attack's low-FPR decisions are made). The tails come from
//! `dpml_mechanisms::normal`, dpml's one tail-accurate normal distribution.

use std::f64::consts::PI;

use dpml_mechanisms::normal::{normal_cdf, normal_log_cdf};

/// Fitted mean and variance of one example's reference scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Gaussian {
    pub(crate) mean: f64,
    pub(crate) variance: f64,
}

impl Gaussian {
    /// `log N(x; mean, variance)`.
    pub(crate) fn log_pdf(&self, x: f64) -> f64 {
        let d = x - self.mean;
        -0.5 * ((2.0 * PI * self.variance).ln() + d * d / self.variance)
    }

    /// Standardised value `(x − mean)/sd`.
    pub(crate) fn z(&self, x: f64) -> f64 {
        (x - self.mean) / self.variance.sqrt()
    }
}

/// `ln P[Z > z]` for a standard normal Z, accurate far into the upper tail (where the offline
/// attack's low-FPR decisions are made): ln Φ(−z) from the one tail-accurate normal of
/// `dpml_mechanisms`.
pub(crate) fn log_sf(z: f64) -> f64 {
    normal_log_cdf(-z)
}

/// `P[Z ≤ z]` for a standard normal Z.
pub(crate) fn cdf(z: f64) -> f64 {
    normal_cdf(z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_values() {
        // P[Z > 0] = 1/2; P[Z > 1.959964] = 0.025; ln P[Z > 10] = ln(7.6198530241605e-24);
        // ln P[Z > 40] = −804.608442013754 (mpmath), past f64 underflow of the tail itself.
        assert!((log_sf(0.0) - 0.5f64.ln()).abs() < 1e-15);
        assert!((log_sf(1.959_963_984_540_054).exp() - 0.025).abs() < 1e-15);
        assert!((log_sf(10.0) - 7.619_853_024_160_527e-24f64.ln()).abs() < 1e-12);
        assert!((log_sf(40.0) + 804.608_442_013_753_8).abs() < 1e-10);
        assert!(log_sf(50.0) < log_sf(40.0) && log_sf(1e3).is_finite());
        assert!(
            (cdf(0.0) - 0.5).abs() < 1e-16 && (cdf(-1.959_963_984_540_054) - 0.025).abs() < 1e-15
        );
    }

    #[test]
    fn log_pdf_of_a_standard_normal() {
        let g = Gaussian {
            mean: 1.0,
            variance: 4.0,
        };
        // N(3; 1, 4) = exp(−1/2)/sqrt(8π).
        assert!((g.log_pdf(3.0) - (-0.5 - 0.5 * (8.0 * PI).ln())).abs() < 1e-14);
        assert_eq!(g.z(5.0), 2.0);
    }
}
