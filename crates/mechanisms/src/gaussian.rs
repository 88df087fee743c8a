//! The Gaussian mechanism on real values (classic or analytic calibration), sampled exactly as a
//! discrete Gaussian on an integer grid so that it is safe against floating-point attacks.

use crate::calibration::{
    analytic_gaussian_sigma, classic_gaussian_sigma, discrete_gaussian_sigma2,
};
use crate::exact::DiscreteGaussian;
use crate::grid::Grid;
use crate::rational::{ulps_down, ulps_up};
use crate::validate::{self, invalid};
use crate::{DpRng, MechanismError, PrivacyEvent};

/// The noise spans about 2^14 grid steps per σ: g ∈ (σ/2^15, σ/2^14]. Fine enough that the
/// grid is invisible next to the noise and that rounding inputs to it inflates the sensitivity
/// by at most a factor 1 + g/Δ₂ ≤ 1 + (σ/Δ₂)·2^−14 (0.02% at σ = 4Δ₂, 0.6% at σ = 100Δ₂);
/// coarse enough that σ in grid units stays below about 2^15, where the exact sampler's integer
/// arithmetic fits and the δ certificate sums a few million terms.
pub const GAUSSIAN_GRID_BITS: i32 = 14;

/// How σ is chosen from (ε, δ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Calibration {
    /// σ = Δ₂√(2 ln(1.25/δ))/ε (Dwork & Roth 2014); valid only for ε < 1.
    Classic,
    /// The smallest σ whose exact privacy profile meets (ε, δ) (Balle & Wang 2018); any ε > 0.
    Analytic,
}

/// The Gaussian mechanism: releases x + N(0, σ²) for a query of L2 sensitivity Δ₂, as an exact
/// discrete Gaussian on a grid of granularity g (a power of two between σ/2^15 and σ/2^14).
///
/// # Privacy
/// σ₁ (σ per unit sensitivity) comes from the chosen [`Calibration`]. The input is rounded to
/// the grid, k = round(x/g), so neighbours satisfy |k − k'| ≤ Δ_g = ⌊Δ₂/g⌋ + 1 (bound proved in
/// the grid module). The noise is a discrete Gaussian Y with P\[y\] ∝ exp(−y²/2σ_g²), where σ_g²
/// is a rational ≥ (σ₁·Δ_g)², and is increased further if needed until CKS 2020 Theorem 7,
/// δ = P\[Y > εσ_g²/Δ_g − Δ_g/2\] − e^ε P\[Y > εσ_g²/Δ_g + Δ_g/2\], evaluated with a
/// conservative normaliser and a relative margin of 1e−8, is ≤ the requested δ. So the integer
/// release k + Y is (ε, δ)-DP, and (k + Y)·g as `f64` is post-processing. The reported
/// σ = g·σ_g is never smaller than the calibrated σ₁·Δ₂. The discrete Gaussian also satisfies
/// the concentrated-DP bound ρ = Δ_g²/(2σ_g²) of a continuous Gaussian with the same σ_g and
/// sensitivity (CKS 2020, Section 2), so the event reports a Gaussian with noise multiplier
/// σ_g/Δ_g (≥ σ₁).
///
/// # Citations
/// - C. Dwork, A. Roth. *The Algorithmic Foundations of Differential Privacy*, 2014, Thm A.1.
/// - B. Balle, Y.-X. Wang. *Improving the Gaussian Mechanism for Differential Privacy:
///   Analytical Calibration and Optimal Denoising*. ICML 2018, Algorithm 1.
/// - C. Canonne, G. Kamath, T. Steinke. *The Discrete Gaussian for Differential Privacy*.
///   NeurIPS 2020, Algorithm 3 and Theorem 7.
/// - I. Mironov. *On Significance of the Least Significant Bits for Differential Privacy*.
///   CCS 2012.
///
/// # Errors
/// [`GaussianMechanism::new`] returns [`MechanismError::InvalidParameter`] for a sensitivity or
/// ε that is not finite and > 0, δ outside (0, 1), ε ≥ 1 with [`Calibration::Classic`] (the
/// message names ε), or a σ outside the representable range.
///
/// ```
/// use dpml_mechanisms::{Calibration, DpRng, GaussianMechanism};
/// let mech = GaussianMechanism::new(1.0, 1.0, 1e-5, Calibration::Analytic)?;
/// assert!(mech.sigma() > 3.73 && mech.sigma() < 3.75);
/// let noisy = mech.release(&mut DpRng::seeded(1), 42.0)?;
/// assert!(noisy.is_finite());
/// # Ok::<(), dpml_mechanisms::MechanismError>(())
/// ```
#[derive(Debug, Clone)]
pub struct GaussianMechanism {
    sensitivity: f64,
    epsilon: f64,
    delta: f64,
    calibration: Calibration,
    grid: Grid,
    grid_sensitivity: u64,
    noise: DiscreteGaussian,
    sigma: f64,
    noise_multiplier: f64,
}

impl GaussianMechanism {
    /// The (ε, δ)-DP Gaussian mechanism for a query of L2 sensitivity `l2_sensitivity`.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn new(
        l2_sensitivity: f64,
        epsilon: f64,
        delta: f64,
        calibration: Calibration,
    ) -> Result<Self, MechanismError> {
        let sensitivity = validate::sensitivity(l2_sensitivity)?;
        let epsilon = validate::epsilon(epsilon)?;
        let delta = validate::delta(delta)?;
        let unit_sigma = match calibration {
            Calibration::Classic => classic_gaussian_sigma(1.0, epsilon, delta)?,
            Calibration::Analytic => analytic_gaussian_sigma(1.0, epsilon, delta)?,
        };
        let requested = unit_sigma * sensitivity;
        if !requested.is_finite() {
            return Err(invalid(format!(
                "Gaussian sigma for sensitivity {sensitivity} overflows"
            )));
        }
        // The grid's and the exact sampler's limits, said in the caller's terms (the grid's
        // sensitivity is in its own units, not the caller's).
        let how = match requested >= 1.0 {
            true => "a larger epsilon or delta",
            false => "a smaller epsilon",
        };
        let beyond = |_| {
            invalid(format!(
                "Gaussian noise for sensitivity {sensitivity}, epsilon {epsilon}, delta {delta} \
                 (sigma {requested:.3e}) cannot be calibrated and sampled exactly: give {how}"
            ))
        };
        let grid = Grid::below(requested, GAUSSIAN_GRID_BITS).map_err(beyond)?;
        let grid_sensitivity = grid.sensitivity(sensitivity).map_err(beyond)?;
        let start = ulps_up(unit_sigma * grid_sensitivity as f64, 1);
        let sigma2 =
            discrete_gaussian_sigma2(grid_sensitivity, epsilon, delta, start, 0).map_err(beyond)?;
        let noise = DiscreteGaussian::new(sigma2).map_err(beyond)?;
        let sigma_grid = ulps_down(sigma2.to_f64_down().sqrt(), 1);
        Ok(Self {
            sensitivity,
            epsilon,
            delta,
            calibration,
            grid,
            grid_sensitivity,
            noise,
            sigma: sigma_grid * grid.granularity(),
            noise_multiplier: ulps_down(sigma_grid / grid_sensitivity as f64, 1),
        })
    }

    /// The standard deviation σ = g·σ_g actually used (≥ the calibrated σ; rounded down for
    /// display).
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// The grid granularity g: every output is an integer multiple of g.
    pub fn granularity(&self) -> f64 {
        self.grid.granularity()
    }

    /// The requested ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The requested δ (the certified δ at ε is at most this).
    pub fn delta(&self) -> f64 {
        self.delta
    }

    /// The declared L2 sensitivity Δ₂.
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }

    /// The calibration used.
    pub fn calibration(&self) -> Calibration {
        self.calibration
    }

    /// The sensitivity in grid units, Δ_g = ⌊Δ₂/g⌋ + 1.
    pub fn grid_sensitivity(&self) -> u64 {
        self.grid_sensitivity
    }

    /// The privacy cost of one release: a Gaussian with noise multiplier σ_g/Δ_g.
    pub fn event(&self) -> PrivacyEvent {
        PrivacyEvent::Gaussian {
            noise_multiplier: self.noise_multiplier,
        }
    }

    /// `value` plus Gaussian noise, on the grid.
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] when `value` is NaN, infinite, or too large for the
    /// grid (it would otherwise be clamped silently).
    pub fn release(&self, rng: &mut DpRng, value: f64) -> Result<f64, MechanismError> {
        let k = self.grid.snap_exact(value)?;
        Ok(self.release_on_grid(rng, k))
    }

    /// Releases an input already expressed in grid units (its sensitivity in grid units must be
    /// at most [`GaussianMechanism::grid_sensitivity`]).
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
    use crate::normal::normal_cdf;
    use crate::testing::{bucketize, ks_critical_1pct, ks_statistic, violates};

    #[test]
    fn sigma_matches_the_calibration() {
        // Analytic σ for (1, 1e−5, Δ=1) is 3.7306316… (see calibration tests). The grid adds at
        // most a factor Δ_g·g/Δ ≤ 1 + 2^-12 here.
        let m = GaussianMechanism::new(1.0, 1.0, 1e-5, Calibration::Analytic).unwrap();
        assert!(
            m.sigma() >= 3.730_631 && m.sigma() < 3.730_631 * 1.0003,
            "{}",
            m.sigma()
        );
        let g = m.granularity();
        assert!(g > m.sigma() / 2f64.powi(16) && g <= m.sigma() / 2f64.powi(14));
        // Classic: σ/Δ ≈ 9.7, so the grid inflates σ by at most (σ/Δ)·2^-14.
        let classic = GaussianMechanism::new(2.0, 0.5, 1e-5, Calibration::Classic).unwrap();
        let want = 2.0 * (2.0 * 125_000f64.ln()).sqrt() / 0.5;
        assert!(
            classic.sigma() >= want && classic.sigma() < want * (1.0 + 9.7 / 2f64.powi(14)),
            "{}",
            classic.sigma()
        );
        let PrivacyEvent::Gaussian { noise_multiplier } = m.event() else {
            panic!()
        };
        assert!((3.730_631..3.74).contains(&noise_multiplier));
    }

    #[test]
    fn noise_it_cannot_calibrate_is_refused_in_the_callers_terms() {
        let err = GaussianMechanism::new(1.0, 1.0, 1e-300, Calibration::Analytic)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sensitivity 1, epsilon 1, delta") && err.contains("larger epsilon"),
            "{err}"
        );
    }

    #[test]
    fn classic_needs_epsilon_below_one() {
        let err = GaussianMechanism::new(1.0, 1.0, 1e-5, Calibration::Classic)
            .unwrap_err()
            .to_string();
        assert!(err.contains("epsilon < 1, got 1"), "{err}");
        let err = GaussianMechanism::new(1.0, 1.0, 0.0, Calibration::Analytic)
            .unwrap_err()
            .to_string();
        assert!(err.contains("delta must be in (0, 1), got 0"), "{err}");
        let err = GaussianMechanism::new(f64::NAN, 1.0, 1e-5, Calibration::Analytic)
            .unwrap_err()
            .to_string();
        assert!(err.contains("got NaN"), "{err}");
    }

    #[test]
    fn release_follows_the_normal_law() {
        // KS at 1%: 1.63/√n ≈ 0.0073. The discrete Gaussian with σ_g ≥ 2^14 differs from the
        // continuous CDF by O(1/σ_g) ≈ 6e-5 on the grid, far below the critical value.
        let m = GaussianMechanism::new(1.0, 2.0, 1e-6, Calibration::Analytic).unwrap();
        let mut rng = DpRng::seeded(9);
        let n = 50_000;
        let mut xs: Vec<f64> = (0..n)
            .map(|_| m.release(&mut rng, -1.5).unwrap() + 1.5)
            .collect();
        let s = m.sigma();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| x * x).sum::<f64>() / n as f64;
        let d = ks_statistic(&mut xs, |x| normal_cdf(x / s));
        assert!(d < ks_critical_1pct(n), "D = {d}");
        // Mean sd σ/√n; second moment sd σ²√2/√n; 4.9 sd (two-sided 1e-6).
        assert!(mean.abs() < 4.9 * s / (n as f64).sqrt(), "{mean}");
        assert!(
            (var - s * s).abs() < 4.9 * 2f64.sqrt() * s * s / (n as f64).sqrt(),
            "{var}"
        );
    }

    #[test]
    fn privacy_check_passes_and_catches_half_the_noise() {
        // (ε, δ) check: per bucket, P_a(S) − e^ε P_b(S) − δ ≤ 0 within a Bonferroni z bound.
        let (eps, delta, n) = (1.0, 1e-5, 100_000);
        let honest = GaussianMechanism::new(1.0, eps, delta, Calibration::Analytic).unwrap();
        let s = honest.sigma();
        let edges: Vec<f64> = (0..=40)
            .map(|i| -5.0 * s + 0.25 * s * i as f64 + 0.5)
            .collect();
        let run = |mech: &GaussianMechanism, seed: u64| {
            let mut rng = DpRng::seeded(seed);
            let a = bucketize((0..n).map(|_| mech.release(&mut rng, 0.0).unwrap()), &edges);
            let b = bucketize((0..n).map(|_| mech.release(&mut rng, 1.0).unwrap()), &edges);
            (a, b)
        };
        let (a, b) = run(&honest, 41);
        let (bad, z, crit) = violates(&a, &b, n as u64, eps, delta);
        assert!(!bad, "honest mechanism flagged: z = {z} > {crit}");
        // Half the noise: calibrated for sensitivity 1/2, run on neighbours 1 apart.
        let under = GaussianMechanism::new(0.5, eps, delta, Calibration::Analytic).unwrap();
        let (a, b) = run(&under, 42);
        let (bad, z, crit) = violates(&a, &b, n as u64, eps, delta);
        assert!(bad, "under-noised mechanism not caught: z = {z} ≤ {crit}");
    }
}
