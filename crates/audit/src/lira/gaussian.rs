//! Gaussian log-density and tail functions for LiRA's likelihood ratios, accurate far into the
//! tails (where the attack's low-FPR decisions are made).

use std::f64::consts::{LN_2, PI, SQRT_2};

use statrs::function::erf::erfc;

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

/// `ln P[Z > z]` for a standard normal Z. Uses `erfc` up to z = 30 (erfc stays a normal float
/// there) and beyond it the asymptotic series
/// `P[Z > z] = φ(z)/z · (1 − 1/z² + 3/z⁴ − 15/z⁶ + 105/z⁸ − …)`, whose first omitted term is
/// below 1e-13 relative at z = 30.
pub(crate) fn log_sf(z: f64) -> f64 {
    if z <= 30.0 {
        (0.5 * erfc(z / SQRT_2)).ln()
    } else {
        let t = 1.0 / (z * z);
        let series = 1.0 - t * (1.0 - t * (3.0 - t * (15.0 - t * 105.0)));
        -0.5 * z * z - z.ln() - 0.5 * (LN_2 + PI.ln()) + series.ln()
    }
}

/// `P[Z ≤ z]` for a standard normal Z.
pub(crate) fn cdf(z: f64) -> f64 {
    0.5 * erfc(-z / SQRT_2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_values() {
        // P[Z > 0] = 1/2; P[Z > 1.959964] = 0.025; ln P[Z > 10] = ln(7.6198530241605e-24).
        // statrs' erfc is good to ~5e-11 relative (measured), hence the tolerances.
        assert!((log_sf(0.0) - 0.5f64.ln()).abs() < 1e-15);
        assert!((log_sf(1.959_963_984_540_054).exp() - 0.025).abs() < 1e-11);
        assert!((log_sf(10.0) - 7.619_853_024_160_5e-24f64.ln()).abs() < 1e-10);
        // Both branches agree at the switch and the tail keeps decreasing past f64 underflow.
        let below = (0.5 * erfc(30.0 / SQRT_2)).ln();
        let t: f64 = 1.0 / 900.0;
        let series = -450.0 - 30f64.ln() - 0.5 * (2.0 * PI).ln()
            + (1.0 - t * (1.0 - t * (3.0 - t * (15.0 - t * 105.0)))).ln();
        assert!(
            (below - series).abs() < 1e-9 * below.abs(),
            "{below} vs {series}"
        );
        assert!(log_sf(50.0) < log_sf(40.0) && log_sf(1e3).is_finite());
        assert!(
            (cdf(0.0) - 0.5).abs() < 1e-16 && (cdf(-1.959_963_984_540_054) - 0.025).abs() < 1e-11
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
