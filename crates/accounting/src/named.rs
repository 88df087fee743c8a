//! Accountants chosen by name, as the Python bindings and scripts name them: ε and δ of an
//! event, and its f-DP trade-off curve, under `"pld"` (pessimistic, the upper bound with the
//! RDP fallback of [`PldAccountant::upper_epsilon`]), `"pld_lower"` (optimistic: a lower
//! bound), `"rdp"` or `"gdp"` (the CLT approximation).

use crate::fdp;
use crate::gdp::GdpAccountant;
use crate::pld::PldAccountant;
use crate::rdp::RdpAccountant;
use crate::{Accountant, AccountingError, PrivacyEvent};

/// The names [`Named::parse`] accepts.
pub const NAMES: &str = "pld, pld_lower, rdp, gdp";

/// Type II errors β(α) are computed from δ(ε) sampled at this many ε.
const EPS_POINTS: usize = 200;

/// δ at which the ε range of a trade-off curve ends: beyond it δ(ε) changes no β visibly.
const CURVE_DELTA: f64 = 1e-10;

/// An accountant picked by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// Pessimistic PLD (upper bound).
    Pld,
    /// Optimistic PLD (lower bound).
    PldLower,
    /// RDP with the default conversion (upper bound).
    Rdp,
    /// GDP via the central limit theorem (approximation).
    Gdp,
}

impl Named {
    /// The accountant named `name` (one of [`NAMES`]).
    ///
    /// # Errors
    /// [`AccountingError::InvalidParameter`] naming an unknown name.
    pub fn parse(name: &str) -> Result<Self, AccountingError> {
        match name {
            "pld" => Ok(Named::Pld),
            "pld_lower" => Ok(Named::PldLower),
            "rdp" => Ok(Named::Rdp),
            "gdp" => Ok(Named::Gdp),
            other => Err(AccountingError::InvalidParameter(format!(
                "accountant must be one of {NAMES}, got {other:?}"
            ))),
        }
    }

    fn accountant(self) -> Box<dyn Accountant> {
        match self {
            Named::Pld => Box::new(PldAccountant::pessimistic()),
            Named::PldLower => Box::new(PldAccountant::optimistic()),
            Named::Rdp => Box::new(RdpAccountant::default()),
            Named::Gdp => Box::new(GdpAccountant),
        }
    }

    /// ε of `event` at `delta`, as `dpml account` reports it for this accountant.
    ///
    /// # Errors
    /// As the accountant.
    pub fn epsilon(self, event: &PrivacyEvent, delta: f64) -> Result<f64, AccountingError> {
        match self {
            Named::Pld => Ok(PldAccountant::pessimistic().upper_epsilon(event, delta)?.0),
            other => other.accountant().epsilon(event, delta),
        }
    }

    /// δ of `event` at `epsilon`.
    ///
    /// # Errors
    /// As the accountant.
    pub fn delta(self, event: &PrivacyEvent, epsilon: f64) -> Result<f64, AccountingError> {
        self.accountant().delta(event, epsilon)
    }

    /// The smallest noise multiplier for T Poisson-subsampled Gaussian steps at rate q to be
    /// (target ε, δ)-DP under this accountant (see [`crate::calibrate::noise_multiplier`]).
    ///
    /// # Errors
    /// As [`crate::calibrate::noise_multiplier`].
    pub fn calibrate(
        self,
        target_epsilon: f64,
        delta: f64,
        sampling_rate: f64,
        steps: u64,
    ) -> Result<crate::calibrate::Calibration, AccountingError> {
        crate::calibrate::noise_multiplier(
            self.accountant().as_ref(),
            target_epsilon,
            delta,
            sampling_rate,
            steps,
        )
    }

    /// The trade-off curve β(α) of `event` at each α of `alphas`: G_μ for GDP, else the
    /// pointwise supremum of the (ε, δ(ε)) lines over ε from 0 to past ε(1e-10).
    ///
    /// # Errors
    /// As the accountant; α outside [0, 1].
    pub fn tradeoff(
        self,
        event: &PrivacyEvent,
        alphas: &[f64],
    ) -> Result<Vec<f64>, AccountingError> {
        if self == Named::Gdp {
            let mu = GdpAccountant.mu(event)?;
            return alphas
                .iter()
                .map(|&a| fdp::gaussian_tradeoff(mu, a))
                .collect();
        }
        let eps_max = 1.5 * self.epsilon(event, CURVE_DELTA)? + 0.1;
        let grid: Vec<f64> = (0..EPS_POINTS)
            .map(|i| eps_max * i as f64 / (EPS_POINTS - 1) as f64)
            .collect();
        let deltas = match self {
            // The PLD composes once for the whole curve.
            Named::Pld => PldAccountant::pessimistic().delta_curve(event, &grid)?,
            Named::PldLower => PldAccountant::optimistic().delta_curve(event, &grid)?,
            _ => fdp::delta_curve(self.accountant().as_ref(), event, &grid)?
                .into_iter()
                .map(|p| p.1)
                .collect(),
        };
        let curve: Vec<(f64, f64)> = grid.into_iter().zip(deltas).collect();
        alphas
            .iter()
            .map(|&a| fdp::tradeoff_from_delta_curve(&curve, a))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_agree_with_their_accountants_and_curves_lie_between_the_lines() {
        let event = PrivacyEvent::dp_sgd(1.1, 0.01, 100);
        let rdp = Named::parse("rdp").unwrap().epsilon(&event, 1e-5).unwrap();
        assert_eq!(rdp, RdpAccountant::default().epsilon(&event, 1e-5).unwrap());
        let (lo, hi) = PldAccountant::pessimistic()
            .epsilon_bounds(&event, 1e-5)
            .unwrap();
        assert_eq!(Named::Pld.epsilon(&event, 1e-5).unwrap(), hi);
        assert!(Named::PldLower.epsilon(&event, 1e-5).unwrap() <= lo + 1e-12);
        assert!(
            Named::parse("moments")
                .unwrap_err()
                .to_string()
                .contains("\"moments\"")
        );
        let alphas = fdp::alpha_grid(20);
        for name in ["pld", "rdp", "gdp"] {
            let beta = Named::parse(name)
                .unwrap()
                .tradeoff(&event, &alphas)
                .unwrap();
            for (&a, &b) in alphas.iter().zip(&beta) {
                // No test beats the (ε, δ) line of the PLD's own upper bound, and none is
                // worse than guessing.
                assert!(b <= 1.0 - a + 1e-12, "{name} {a} {b}");
                assert!(b >= 1.0 - 1e-5 - hi.exp() * a - 1e-3, "{name} {a} {b}");
            }
        }
    }
}
