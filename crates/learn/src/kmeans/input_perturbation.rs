//! Input perturbation (local DP) for k-means: every feature of every record gets its own
//! Laplace noise, through the one input-perturbation code path
//! ([`crate::perturbation::perturb_records`]), before an ordinary, non-private Lloyd runs on
//! the noisy records.
//!
//! # Privacy
//! The neighbouring relation is local: one record's values replaced by any others inside the
//! bounds. Feature j is clamped to `[lo_j, hi_j]` and gets (exact, grid-based) Laplace noise of
//! scale `(hi_j − lo_j)/ε_f`, which is ε_f-DP for that feature; the d features of a record
//! compose to `ε_record = d·ε_f` (basic composition over the record's L1 range in units of
//! each feature's width), the ε the caller asks for; `ε_f = ε_record/d` is reported beside
//! it. Everything after the noise (clustering, assignments) is post-processing of the noisy
//! records.
//!
//! # Citations
//! - S. Kasiviswanathan, H. Lee, K. Nissim, S. Raskhodnikova, A. Smith, "What can we learn
//!   privately?", FOCS 2008 (local differential privacy).
//! - C. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential privacy",
//!   NeurIPS 2020 (exact discrete Laplace sampling).
//!
//! # Errors
//! [`LearnError::Mechanism`] when the noise scale is beyond the exact sampler's range.

use dpml_mechanisms::{DpRng, PrivacyEvent};

use super::bounds::Bounds;
use super::budget::BudgetSplit;
use crate::LearnError;
use crate::perturbation::{InputBudget, InputMechanism, PerturbationError, perturb_records};

/// The noisy records, the stated split and the per-record event.
pub(crate) struct Perturbed {
    /// Noisy records, row-major (not clamped: the noise is zero-mean, clamping would bias).
    pub points: Vec<f64>,
    /// The split as stated in the output.
    pub split: BudgetSplit,
    /// The cost for one record (local DP).
    pub event: PrivacyEvent,
}

/// Perturbs `points` (row-major, clamped into `bounds`) with per-record budget `epsilon`.
///
/// # Errors
/// As the module.
pub(crate) fn perturb(
    points: &[f64],
    bounds: &Bounds,
    epsilon: f64,
    rng: &mut DpRng,
) -> Result<Perturbed, LearnError> {
    let d = bounds.dims();
    let ranges: Vec<(f64, f64)> = bounds
        .lo()
        .iter()
        .copied()
        .zip(bounds.hi().iter().copied())
        .collect();
    let mut noisy = points.to_vec();
    let report = perturb_records(
        &mut noisy,
        d,
        &ranges,
        InputMechanism::Laplace,
        InputBudget::PerRecord(epsilon),
        rng,
    )
    .map_err(|e| match e {
        PerturbationError::Mechanism(m) => LearnError::Mechanism(m),
        // Bounds and records were checked by the caller; report anything else verbatim.
        other => LearnError::invalid("input perturbation", "refused its input", other),
    })?;
    let split = BudgetSplit::InputPerturbation {
        epsilon_per_record: report.epsilon_per_record,
        epsilon_per_feature: report.epsilon_per_feature,
        features: d,
        scales: (0..d)
            .map(|j| report.noise_scale.get(j).copied().unwrap_or(f64::NAN))
            .collect(),
    };
    Ok(Perturbed {
        points: noisy,
        split,
        event: report.event_per_record,
    })
}
