//! The accountant's side of the audit: the target's theoretical ε (an upper bound from the
//! trainer's accountant, PLD by default) and the f-DP bound on any attack's ROC curve.
//!
//! # Privacy
//! If the training run is f-DP, every membership test at false-positive rate α has
//! `TPR ≤ 1 − f(α)` (Dong, Roth, Su 2019). The curve f comes from the pessimistic PLD's
//! (ε, δ(ε)) family: f(α) = max over ε of max(0, 1 − δ(ε) − e^ε α, e^{−ε}(1 − δ(ε) − α))
//! ([`dpml_accounting::fdp::tradeoff_from_delta_curve`]), a valid bound at any ε grid.
//!
//! # Citations
//! J. Dong, A. Roth, W. Su, "Gaussian differential privacy", JRSS-B 84(1), 2022.
//!
//! # Errors
//! Accounting failures (an unreachable target ε, a bad event) are returned as
//! [`DriverError::Train`](super::error::DriverError::Train) or
//! [`DriverError::Accounting`](super::error::DriverError::Accounting).

use dpml_accounting::fdp;
use dpml_accounting::pld::PldAccountant;
use dpml_learn::dpsgd::{Privacy, PrivacyPlan, TrainConfig};
use dpml_mechanisms::PrivacyEvent;
use serde::Serialize;

use super::error::Result;

/// Points of the ε grid used to draw the f-DP bound.
const EPS_GRID: usize = 200;
/// Points on the FPR axis of the f-DP bound.
const ALPHA_GRID: usize = 200;

/// The accountant's statement about a training run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Theory {
    /// ε at `delta` (`None` for a non-private run: no guarantee).
    pub epsilon: Option<f64>,
    /// δ.
    pub delta: f64,
    /// The accountant's name ("pld", "rdp", "gdp").
    pub accountant: String,
    /// σ (`None` when non-private).
    pub noise_multiplier: Option<f64>,
    /// q = B/N.
    pub sampling_rate: f64,
    /// T.
    pub steps: u64,
    /// The privacy event `dp_sgd(σ, q, T)`.
    #[serde(skip)]
    pub event: Option<PrivacyEvent>,
}

/// The recipe with a target ε replaced by the noise multiplier calibrated for `n` records, so
/// every model of the audit uses the same σ and calibration runs once.
///
/// # Errors
/// As [`PrivacyPlan::new`].
pub fn resolve_recipe(recipe: &TrainConfig, n: usize) -> Result<TrainConfig> {
    let mut out = recipe.clone();
    if let Privacy::TargetEpsilon(_) = recipe.privacy {
        recipe.validate()?;
        if let Some(s) = PrivacyPlan::new(recipe, n)?.noise_multiplier {
            out.privacy = Privacy::NoiseMultiplier(s);
        }
    }
    Ok(out)
}

impl Theory {
    /// What the accountant says about `recipe` trained on `n` records.
    ///
    /// # Errors
    /// As [`PrivacyPlan::new`] and [`PrivacyPlan::epsilon`].
    pub fn of(recipe: &TrainConfig, n: usize) -> Result<Self> {
        let plan = PrivacyPlan::new(recipe, n)?;
        Ok(Self {
            epsilon: plan.epsilon(recipe.accountant, plan.steps, recipe.delta)?,
            delta: recipe.delta,
            accountant: recipe.accountant.name().into(),
            noise_multiplier: plan.noise_multiplier,
            sampling_rate: plan.sampling_rate,
            steps: plan.steps,
            event: plan.event(plan.steps),
        })
    }

    /// The largest TPR any attack may reach at each FPR on a log grid, `(fpr, 1 − f(fpr))`
    /// from the pessimistic PLD; `None` when non-private.
    ///
    /// # Errors
    /// Accounting failures.
    pub fn roc_bound(&self) -> Result<Option<Vec<(f64, f64)>>> {
        let (Some(event), Some(eps)) = (&self.event, self.epsilon) else {
            return Ok(None);
        };
        let pld = PldAccountant::pessimistic();
        // ε beyond a few times the (ε at δ) adds little; include 0 and go well past it.
        let eps_max = 3.0 * eps + 1.0;
        let grid: Vec<f64> = (0..EPS_GRID)
            .map(|i| eps_max * i as f64 / (EPS_GRID - 1) as f64)
            .collect();
        let curve: Vec<(f64, f64)> = grid
            .iter()
            .copied()
            .zip(pld.delta_curve(event, &grid)?)
            .collect();
        let points = fdp::alpha_grid(ALPHA_GRID)
            .into_iter()
            .map(|a| Ok((a, 1.0 - fdp::tradeoff_from_delta_curve(&curve, a)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(points))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_lies_between_the_diagonal_and_the_eps_delta_line() {
        let recipe = TrainConfig {
            model: "logreg".into(),
            privacy: Privacy::TargetEpsilon(2.0),
            epochs: 2.0,
            batch_size: 50,
            ..TrainConfig::default()
        };
        let resolved = resolve_recipe(&recipe, 1000).unwrap();
        assert!(matches!(resolved.privacy, Privacy::NoiseMultiplier(_)));
        let t = Theory::of(&resolved, 1000).unwrap();
        let eps = t.epsilon.unwrap();
        assert!(eps <= 2.0 && eps > 1.9, "{eps}");
        for (a, tpr) in t.roc_bound().unwrap().unwrap() {
            // TPR ≥ FPR (no attack is worse than guessing) and ≤ the (ε, δ) line. The grid
            // holds ε in steps of (3ε + 1)/199 ≈ 0.035, so the nearest grid point above ε is
            // within 0.05 of it.
            assert!(tpr >= a - 1e-12, "{a} {tpr}");
            assert!(
                tpr <= ((eps + 0.05).exp() * a + t.delta).min(1.0) + 1e-9,
                "{a} {tpr}"
            );
        }
        let np = Theory::of(
            &TrainConfig {
                privacy: Privacy::NonPrivate,
                ..recipe
            },
            1000,
        )
        .unwrap();
        assert!(np.epsilon.is_none() && np.roc_bound().unwrap().is_none());
    }
}
