//! Input perturbation (local DP): every feature of every record gets its own Laplace noise
//! before an ordinary, non-private Lloyd runs on the noisy records.
//!
//! # Privacy
//! The neighbouring relation is local: one record's values replaced by any others inside the
//! bounds. Feature j is clamped to `[lo_j, hi_j]` and rounded to a grid of step `g_j` about
//! `lo_j` ([`super::grid`]), giving an integer in `[0, s_j]` with `s_j·g_j ≥ hi_j − lo_j`; it
//! then gets discrete Laplace noise of scale `s_j/ε_f` (grid units, [`super::release`]), which
//! is ε_f-DP for that feature. The d features of a record compose to `ε_record = d·ε_f` (basic composition), the
//! ε the caller asks for; `ε_f = ε_record/d` is reported beside it. Everything after the
//! noise (clustering, assignments) is post-processing of the noisy records.
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
use super::release::{Allot, GridNoise};
use crate::LearnError;

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
    let eps_feature = epsilon / d as f64;
    let widths: Vec<f64> = (0..d).map(|j| bounds.width(j)).collect();
    let release = GridNoise::new(
        bounds.lo().to_vec(),
        &widths,
        Allot::EachLaplace(eps_feature),
    )?;
    let grid = release.grid();
    let q = grid.quantise(points);
    let noisy = q
        .chunks_exact(d)
        .flat_map(|row| {
            row.iter()
                .enumerate()
                .map(|(j, &v)| bounds.lo()[j] + release.release(j, i128::from(v), rng))
                .collect::<Vec<_>>()
        })
        .collect();
    let split = BudgetSplit::InputPerturbation {
        epsilon_per_record: epsilon,
        epsilon_per_feature: eps_feature,
        features: d,
        scales: (0..d).map(|j| release.real_noise(j)).collect(),
    };
    let event = PrivacyEvent::Composed {
        events: release.events(),
    };
    Ok(Perturbed {
        points: noisy,
        split,
        event,
    })
}
