//! The Laplace mechanism on real values, sampled exactly on an integer grid so that it is safe
//! against floating-point attacks.

use crate::exact::DiscreteLaplace;
use crate::grid::Grid;
use crate::rational::{ulps_down, ulps_up};
use crate::validate::{self, invalid};
use crate::{DpRng, MechanismError, PrivacyEvent, Rational};

/// The noise spans about 2^20 grid steps per unit of scale: g ∈ (b/2^21, b/2^20].
pub const LAPLACE_GRID_BITS: i32 = 20;

/// The Laplace mechanism: releases x + Laplace(b) with b ≥ Δ₁/ε, as an exact discrete Laplace
/// on a grid of granularity g (a power of two between b/2^21 and b/2^20).
///
/// # Privacy
/// The input is rounded to the grid, k = round(x/g); by the bound proved in the grid module,
/// neighbouring inputs give |k − k'| ≤ Δ_g = ⌊Δ₁/g⌋ + 1. The output is (k + Y)·g with Y exactly
/// discrete-Laplace distributed, P\[Y = y\] ∝ exp(−|y|/t), with t = Δ_g/ε rounded *up* to a
/// rational. Shifting k by at most Δ_g changes every output probability by at most a factor
/// exp(Δ_g/t) ≤ e^ε, so the release is ε-DP; converting (k + Y) to `f64` and scaling by g is
/// post-processing. The scale actually used, [`LaplaceMechanism::scale`] = g·t, is never smaller
/// than Δ₁/ε.
///
/// # Citations
/// - C. Dwork, F. McSherry, K. Nissim, A. Smith. *Calibrating Noise to Sensitivity in Private
///   Data Analysis*. TCC 2006.
/// - C. Canonne, G. Kamath, T. Steinke. *The Discrete Gaussian for Differential Privacy*.
///   NeurIPS 2020 (exact discrete Laplace sampling, Algorithm 2).
/// - I. Mironov. *On Significance of the Least Significant Bits for Differential Privacy*.
///   CCS 2012 (why continuous floating-point noise is unsafe).
///
/// # Errors
/// [`LaplaceMechanism::new`] returns [`MechanismError::InvalidParameter`] for a sensitivity or ε
/// that is not finite and > 0, or a scale Δ₁/ε outside the representable range.
///
/// ```
/// use dpml_mechanisms::{DpRng, LaplaceMechanism};
/// let mech = LaplaceMechanism::new(1.0, 0.5)?;
/// assert!(mech.scale() >= 2.0);
/// let noisy = mech.release(&mut DpRng::seeded(1), 42.0)?;
/// assert!(noisy.is_finite());
/// # Ok::<(), dpml_mechanisms::MechanismError>(())
/// ```
#[derive(Debug, Clone)]
pub struct LaplaceMechanism {
    sensitivity: f64,
    epsilon: f64,
    grid: Grid,
    grid_sensitivity: u64,
    noise: DiscreteLaplace,
    scale: f64,
    noise_multiplier: f64,
}

impl LaplaceMechanism {
    /// The ε-DP Laplace mechanism for a query of L1 sensitivity `sensitivity`.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn new(sensitivity: f64, epsilon: f64) -> Result<Self, MechanismError> {
        let sensitivity = validate::sensitivity(sensitivity)?;
        let epsilon = validate::epsilon(epsilon)?;
        let requested = sensitivity / epsilon;
        if !requested.is_finite() {
            return Err(invalid(format!(
                "Laplace scale {sensitivity}/{epsilon} overflows"
            )));
        }
        // The grid's and the exact sampler's limits, said in the caller's terms: past them
        // the noise is too wide (a tiny ε) or too narrow (a huge ε, a tiny sensitivity).
        let (what, how) = match requested >= 1.0 {
            true => ("wide", "a larger epsilon"),
            false => ("narrow", "a smaller epsilon"),
        };
        let too_wide = |_| {
            invalid(format!(
                "Laplace noise of scale {requested:.3e} (sensitivity {sensitivity} / epsilon \
                 {epsilon}) is too {what} to sample exactly: give {how}"
            ))
        };
        let grid = Grid::below(requested, LAPLACE_GRID_BITS).map_err(too_wide)?;
        let grid_sensitivity = grid.sensitivity(sensitivity).map_err(too_wide)?;
        // t = Δ_g/ε in grid units; the division is correctly rounded, one ulp up bounds it.
        let t = Rational::ceil_from_f64_precise(ulps_up(grid_sensitivity as f64 / epsilon, 1))
            .map_err(too_wide)?;
        let noise = DiscreteLaplace::new(t).map_err(too_wide)?;
        let t_down = t.to_f64_down();
        Ok(Self {
            sensitivity,
            epsilon,
            grid,
            grid_sensitivity,
            noise,
            scale: t_down * grid.granularity(),
            noise_multiplier: ulps_down(t_down / grid_sensitivity as f64, 1),
        })
    }

    /// The Laplace scale b = g·t actually used (≥ Δ₁/ε; rounded down to `f64` for display).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The grid granularity g: every output is an integer multiple of g.
    pub fn granularity(&self) -> f64 {
        self.grid.granularity()
    }

    /// The requested ε (the realised ε = Δ_g/t is at most this).
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The declared L1 sensitivity Δ₁.
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }

    /// The sensitivity in grid units, Δ_g = ⌊Δ₁/g⌋ + 1.
    pub fn grid_sensitivity(&self) -> u64 {
        self.grid_sensitivity
    }

    /// The privacy cost of one release: Laplace with noise multiplier t/Δ_g (≥ 1/ε), so an
    /// accountant's ε = 1/multiplier is at most the requested ε.
    pub fn event(&self) -> PrivacyEvent {
        PrivacyEvent::Laplace {
            noise_multiplier: self.noise_multiplier,
        }
    }

    /// `value` plus Laplace noise, on the grid.
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] when `value` is NaN, infinite, or too large for the
    /// grid (it would otherwise be clamped silently).
    pub fn release(&self, rng: &mut DpRng, value: f64) -> Result<f64, MechanismError> {
        let k = self.grid.snap_exact(value)?;
        Ok(self.release_on_grid(rng, k))
    }

    /// Releases an input already expressed in grid units (its sensitivity in grid units must be
    /// at most [`LaplaceMechanism::grid_sensitivity`]).
    pub(crate) fn release_on_grid(&self, rng: &mut DpRng, k: i128) -> f64 {
        self.grid.add_noise(k, self.noise.sample(rng))
    }

    pub(crate) fn grid(&self) -> Grid {
        self.grid
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{bucketize, ks_critical_1pct, ks_statistic, violates};

    fn laplace_cdf(x: f64, b: f64) -> f64 {
        if x < 0.0 {
            0.5 * (x / b).exp()
        } else {
            1.0 - 0.5 * (-x / b).exp()
        }
    }

    #[test]
    fn scale_and_grid_are_as_documented() {
        let m = LaplaceMechanism::new(2.0, 0.5).unwrap();
        let b = 4.0;
        assert!(
            m.scale() >= b && m.scale() < b * (1.0 + 1e-5),
            "{}",
            m.scale()
        );
        let g = m.granularity();
        assert!(g > b / 2f64.powi(21) && g <= b / 2f64.powi(20));
        assert_eq!(g.log2().fract(), 0.0);
        assert_eq!(
            m.event(),
            PrivacyEvent::Laplace {
                noise_multiplier: m.noise_multiplier
            }
        );
        assert!(1.0 / m.noise_multiplier <= 0.5);
        let out = m.release(&mut DpRng::seeded(1), 10.3).unwrap();
        assert_eq!((out / g).fract(), 0.0, "outputs lie on the grid");
    }

    #[test]
    fn noise_too_wide_to_sample_is_refused_naming_epsilon() {
        for epsilon in [1e-15, 1e-300] {
            let err = LaplaceMechanism::new(1.0, epsilon).unwrap_err().to_string();
            assert!(
                err.contains(&format!("epsilon {epsilon}")) && err.contains("larger epsilon"),
                "{err}"
            );
        }
    }

    #[test]
    fn release_follows_the_laplace_law() {
        // KS at the 1% level: critical value 1.63/√n. The grid (g ≤ b/2^20) and the
        // discreteness change the CDF by O(2^-20), far below 1.63/√n ≈ 0.0073.
        let m = LaplaceMechanism::new(1.0, 0.8).unwrap();
        let mut rng = DpRng::seeded(7);
        let n = 50_000;
        let mut xs: Vec<f64> = (0..n)
            .map(|_| m.release(&mut rng, 3.0).unwrap() - 3.0)
            .collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| x * x).sum::<f64>() / n as f64;
        let d = ks_statistic(&mut xs, |x| laplace_cdf(x, m.scale()));
        assert!(d < ks_critical_1pct(n), "D = {d}");
        // Mean: sd = b√2/√n; second moment 2b², sd of x² is sqrt(24b⁴ − 4b⁴)/√n. 4.9 sd.
        let b = m.scale();
        assert!(
            mean.abs() < 4.9 * b * 2f64.sqrt() / (n as f64).sqrt(),
            "{mean}"
        );
        assert!(
            (var - 2.0 * b * b).abs() < 4.9 * 20f64.sqrt() * b * b / (n as f64).sqrt(),
            "{var}"
        );
    }

    /// Outputs of `mech` on x = 0 and on x = Δ, bucketed in half-scale cells on [−6b, Δ + 6b].
    fn neighbour_buckets(
        mech: &LaplaceMechanism,
        delta_x: f64,
        b: f64,
        n: usize,
        seed: u64,
    ) -> (Vec<u64>, Vec<u64>) {
        let edges: Vec<f64> = (0..=((delta_x + 12.0 * b) / (0.5 * b)) as usize)
            .map(|i| -6.0 * b + 0.5 * b * i as f64)
            .collect();
        let mut rng = DpRng::seeded(seed);
        let a = bucketize((0..n).map(|_| mech.release(&mut rng, 0.0).unwrap()), &edges);
        let c = bucketize(
            (0..n).map(|_| mech.release(&mut rng, delta_x).unwrap()),
            &edges,
        );
        (a, c)
    }

    #[test]
    fn privacy_check_passes_and_catches_half_the_noise() {
        // Empirical (ε, 0) check on neighbours 0 and Δ = 1 (see testing::max_violation_z):
        // one-sided z-tests per bucket and direction, Bonferroni at total level 0.001.
        let (eps, n) = (1.0, 100_000);
        let honest = LaplaceMechanism::new(1.0, eps).unwrap();
        let (a, b) = neighbour_buckets(&honest, 1.0, honest.scale(), n, 31);
        let (bad, z, crit) = violates(&a, &b, n as u64, eps, 0.0);
        assert!(!bad, "honest mechanism flagged: z = {z} > {crit}");
        // Half the noise: calibrated for sensitivity 1/2 but run on neighbours 1 apart (2ε-DP).
        let under = LaplaceMechanism::new(0.5, eps).unwrap();
        let (a, b) = neighbour_buckets(&under, 1.0, honest.scale(), n, 32);
        let (bad, z, crit) = violates(&a, &b, n as u64, eps, 0.0);
        assert!(bad, "under-noised mechanism not caught: z = {z} ≤ {crit}");
    }

    #[test]
    fn invalid_parameters_are_named() {
        let err = |s: f64, e: f64| LaplaceMechanism::new(s, e).unwrap_err().to_string();
        assert!(err(1.0, 0.0).contains("epsilon must be finite and > 0, got 0"));
        assert!(err(1.0, f64::NAN).contains("got NaN"));
        assert!(err(-1.0, 1.0).contains("sensitivity must be finite and > 0, got -1"));
        assert!(err(f64::MAX, 1e-10).contains("overflows"));
        let m = LaplaceMechanism::new(1.0, 1.0).unwrap();
        assert!(
            m.release(&mut DpRng::seeded(0), f64::INFINITY)
                .unwrap_err()
                .to_string()
                .contains("inf")
        );
    }
}
