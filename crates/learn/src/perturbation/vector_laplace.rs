//! The Laplace mechanism on a vector of bounded L1 sensitivity (one-hot labels, probability
//! vectors), with independent exact Laplace noise on every coordinate.

use dpml_mechanisms::{DpRng, LaplaceMechanism, PrivacyEvent};

use super::error::{PerturbationError, check_epsilon, invalid};

/// Laplace noise of scale b ≥ Δ₁/ε on each of `dim` coordinates of a vector whose L1
/// sensitivity is Δ₁ (e.g. Δ₁ = 2 for a one-hot label or a probability vector).
///
/// # Privacy
/// Each coordinate is released by the exact grid Laplace sampler of
/// [`LaplaceMechanism`]: the value is rounded to the grid, k = round(x/g), and gets discrete
/// Laplace noise of scale t grid units. Rounding moves each coordinate by at most g/2, so two
/// neighbouring vectors (‖x − x'‖₁ ≤ Δ₁) have Σᵢ|kᵢ − k'ᵢ| ≤ Δ₁/g + dim. The mechanism is
/// therefore built for the inflated sensitivity Δ = Δ₁ + dim·g (so Δ/g ≥ Δ₁/g + dim, and its
/// grid sensitivity ⌊Δ/g⌋ + 1 covers the whole vector); the privacy loss of the joint release
/// is at most (Σᵢ|kᵢ − k'ᵢ|)/t ≤ ε. The inflation is negligible (g ≤ b/2^20).
///
/// # Citations
/// C. Dwork, F. McSherry, K. Nissim, A. Smith, *Calibrating Noise to Sensitivity in Private
/// Data Analysis*, TCC 2006 (the vector Laplace mechanism); C. Canonne, G. Kamath, T. Steinke,
/// NeurIPS 2020 (exact discrete Laplace sampling).
///
/// # Errors
/// [`PerturbationError::Invalid`] for Δ₁ or ε not finite and > 0, or `dim` = 0;
/// [`PerturbationError::Mechanism`] for a scale outside the representable range.
#[derive(Debug, Clone)]
pub struct VectorLaplace {
    mech: LaplaceMechanism,
    l1_sensitivity: f64,
    dim: usize,
}

impl VectorLaplace {
    /// The ε-DP Laplace mechanism for `dim`-dimensional vectors of L1 sensitivity
    /// `l1_sensitivity`.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn new(l1_sensitivity: f64, dim: usize, epsilon: f64) -> Result<Self, PerturbationError> {
        check_epsilon("epsilon", epsilon)?;
        if !(l1_sensitivity.is_finite() && l1_sensitivity > 0.0) {
            return Err(invalid(format!(
                "L1 sensitivity must be finite and > 0, got {l1_sensitivity}"
            )));
        }
        if dim == 0 {
            return Err(invalid("vector dimension must be >= 1, got 0"));
        }
        let mech = dpml_mechanisms::vector::laplace(l1_sensitivity, dim, epsilon)?;
        Ok(Self {
            mech,
            l1_sensitivity,
            dim,
        })
    }

    /// The Laplace scale actually used on each coordinate (≥ Δ₁/ε).
    pub fn scale(&self) -> f64 {
        self.mech.scale()
    }

    /// The requested ε of one vector release (the realised ε is at most this).
    pub fn epsilon(&self) -> f64 {
        self.mech.epsilon()
    }

    /// The declared L1 sensitivity Δ₁ of the vector.
    pub fn l1_sensitivity(&self) -> f64 {
        self.l1_sensitivity
    }

    /// The vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The privacy cost of one vector release (a Laplace event, ε = 1/multiplier ≤ ε).
    pub fn event(&self) -> PrivacyEvent {
        self.mech.event()
    }

    /// Writes `values` plus independent Laplace noise into `out` (both of length `dim`).
    ///
    /// # Errors
    /// [`PerturbationError::Invalid`] for a length other than `dim`;
    /// [`PerturbationError::Mechanism`] for a NaN or infinite value.
    pub fn release_into(
        &self,
        rng: &mut DpRng,
        values: &[f64],
        out: &mut Vec<f64>,
    ) -> Result<(), PerturbationError> {
        if values.len() != self.dim {
            return Err(invalid(format!(
                "vector has {} values, the mechanism expects {}",
                values.len(),
                self.dim
            )));
        }
        out.clear();
        for &v in values {
            out.push(self.mech.release(rng, v)?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_covers_the_sensitivity_and_the_grid_slack() {
        for (l1, dim, eps) in [
            (2.0, 10, 1.0),
            (2.0, 10, 0.1),
            (9.0, 1, 0.5),
            (2.0, 1000, 3.0),
        ] {
            let m = VectorLaplace::new(l1, dim, eps).unwrap();
            let b = l1 / eps;
            assert!(
                m.scale() >= b && m.scale() < b * (1.0 + 1e-3),
                "{l1} {dim} {eps}: {}",
                m.scale()
            );
            let PrivacyEvent::Laplace { noise_multiplier } = m.event() else {
                panic!("not Laplace")
            };
            assert!(1.0 / noise_multiplier <= eps);
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let msg = |r: Result<VectorLaplace, PerturbationError>| r.unwrap_err().to_string();
        assert!(
            msg(VectorLaplace::new(2.0, 10, f64::NAN))
                .contains("epsilon must be finite and > 0, got NaN")
        );
        assert!(msg(VectorLaplace::new(2.0, 10, 0.0)).contains("got 0"));
        assert!(msg(VectorLaplace::new(-1.0, 10, 1.0)).contains("got -1"));
        assert!(msg(VectorLaplace::new(2.0, 0, 1.0)).contains("dimension"));
        let m = VectorLaplace::new(2.0, 3, 1.0).unwrap();
        let mut out = Vec::new();
        assert!(
            m.release_into(&mut DpRng::seeded(1), &[0.0; 2], &mut out)
                .unwrap_err()
                .to_string()
                .contains("2 values")
        );
        assert!(
            m.release_into(&mut DpRng::seeded(1), &[0.0, f64::NAN, 1.0], &mut out)
                .is_err()
        );
    }
}
