//! Noise calibration: the DP-SGD noise multiplier σ that meets a target ε, with any accountant.
//!
//! [`noise_multiplier`] brackets σ (doubling or halving from σ = 1), then bisects on ln σ until
//! the achieved ε is within [`RELATIVE_TOLERANCE`] below the target. It only ever returns a σ
//! whose ε it has evaluated and found ≤ the target, so the answer never overspends.
//! [`steps_for_epochs`] turns (epochs, batch size, data set size) into (q, T).

use serde::Serialize;

use crate::rdp::check;
use crate::{Accountant, AccountingError, PrivacyEvent};

/// The calibrated σ stops once its ε is within this fraction below the target.
pub const RELATIVE_TOLERANCE: f64 = 1e-3;
/// The largest σ tried; a target still missed there is reported as unreachable.
pub const MAX_NOISE_MULTIPLIER: f64 = 1e3;
/// The smallest σ tried; if even it meets the target, it is returned.
pub const MIN_NOISE_MULTIPLIER: f64 = 1e-2;
/// Bisection steps on ln σ (each halves the bracket; 60 reach 1e-18 relative).
const MAX_BISECTION_STEPS: usize = 60;

/// A calibrated noise multiplier and the ε the accountant gives for it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Calibration {
    /// The noise multiplier σ (noise standard deviation over the clipping norm).
    pub noise_multiplier: f64,
    /// The ε of `PrivacyEvent::dp_sgd(σ, q, T)` at the requested δ; ≤ the target, within
    /// [`RELATIVE_TOLERANCE`] of it unless σ hit [`MIN_NOISE_MULTIPLIER`].
    pub epsilon: f64,
}

/// The smallest noise multiplier σ (to [`RELATIVE_TOLERANCE`] in ε) for which `accountant` says
/// T Poisson-subsampled Gaussian steps with rate q are (target ε, δ)-DP.
///
/// # Privacy
/// Searches σ for the event `PrivacyEvent::dp_sgd(σ, q, T)`. The returned σ always has
/// ε(σ) ≤ target as computed by `accountant`, so the guarantee is as strong as the
/// accountant's: an upper-bound accountant (RDP, PLD pessimistic) gives a σ that is safe; the
/// GDP/CLT accountant gives only an approximate one.
///
/// # Citations
/// The calibration loop of Opacus' `get_noise_multiplier` and TF Privacy's
/// `compute_noise`, with the final check that the returned σ is on the safe side.
///
/// # Errors
/// [`AccountingError::InvalidParameter`] if the target ε is not finite and > 0, δ ∉ (0, 1),
/// q ∉ (0, 1], T = 0, if the target is unreachable (ε still above it at σ = 1000), or if the
/// accountant returns NaN; any error the accountant returns.
///
/// # Example
/// ```
/// use dpml_accounting::calibrate::noise_multiplier;
/// use dpml_accounting::rdp::RdpAccountant;
///
/// let c = noise_multiplier(&RdpAccountant::default(), 3.0, 1e-5, 256.0 / 60000.0, 14063)?;
/// assert!(c.epsilon <= 3.0 && c.epsilon > 3.0 * (1.0 - 1e-3));
/// # Ok::<(), dpml_accounting::AccountingError>(())
/// ```
pub fn noise_multiplier(
    accountant: &dyn Accountant,
    target_epsilon: f64,
    delta: f64,
    sampling_rate: f64,
    steps: u64,
) -> Result<Calibration, AccountingError> {
    let target = check::positive("target_epsilon", target_epsilon)?;
    let delta = check::delta(delta)?;
    let q = check::sampling_rate(sampling_rate)?;
    let steps = check::count("steps", steps)?;
    let epsilon_at = |sigma: f64| -> Result<f64, AccountingError> {
        let eps = accountant.epsilon(&PrivacyEvent::dp_sgd(sigma, q, steps), delta)?;
        if eps.is_nan() {
            return Err(AccountingError::InvalidParameter(format!(
                "the {} accountant returned epsilon = NaN at noise_multiplier = {sigma}",
                accountant.name()
            )));
        }
        Ok(eps)
    };

    // Bracket: `lo` misses the target (ε > target), `hi` meets it (ε ≤ target).
    let mut hi = Calibration {
        noise_multiplier: 1.0,
        epsilon: epsilon_at(1.0)?,
    };
    let mut lo;
    if hi.epsilon > target {
        loop {
            lo = hi.noise_multiplier;
            if lo >= MAX_NOISE_MULTIPLIER {
                return Err(AccountingError::InvalidParameter(format!(
                    "target_epsilon = {target} is unreachable: even noise_multiplier = \
                     {MAX_NOISE_MULTIPLIER} gives epsilon = {} with the {} accountant \
                     (sampling_rate = {q}, steps = {steps}, delta = {delta})",
                    hi.epsilon,
                    accountant.name()
                )));
            }
            let sigma = (2.0 * lo).min(MAX_NOISE_MULTIPLIER);
            hi = Calibration {
                noise_multiplier: sigma,
                epsilon: epsilon_at(sigma)?,
            };
            if hi.epsilon <= target {
                break;
            }
        }
    } else {
        loop {
            if hi.noise_multiplier <= MIN_NOISE_MULTIPLIER {
                return Ok(hi);
            }
            let sigma = (0.5 * hi.noise_multiplier).max(MIN_NOISE_MULTIPLIER);
            let eps = epsilon_at(sigma)?;
            if eps > target {
                lo = sigma;
                break;
            }
            hi = Calibration {
                noise_multiplier: sigma,
                epsilon: eps,
            };
        }
    }

    // Bisect on ln σ; `hi` always holds an evaluated σ with ε ≤ target.
    for _ in 0..MAX_BISECTION_STEPS {
        if hi.epsilon >= target * (1.0 - RELATIVE_TOLERANCE) {
            break;
        }
        let mid = (lo * hi.noise_multiplier).sqrt();
        if mid <= lo || mid >= hi.noise_multiplier {
            break;
        }
        let eps = epsilon_at(mid)?;
        if eps <= target {
            hi = Calibration {
                noise_multiplier: mid,
                epsilon: eps,
            };
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// The sampling rate q = B/N and number of steps T = ⌈E·N/B⌉ for E epochs of expected batch
/// size B over N records.
///
/// Whole epochs are computed in integers, so 60 epochs of 256 over 60000 give exactly
/// T = ⌈14062.5⌉ = 14063; fractional epochs use floating point.
///
/// # Errors
/// [`AccountingError::InvalidParameter`] if epochs is not finite and > 0, B = 0, N = 0 or
/// B > N.
pub fn steps_for_epochs(
    epochs: f64,
    batch_size: u64,
    dataset_size: u64,
) -> Result<(f64, u64), AccountingError> {
    let epochs = check::positive("epochs", epochs)?;
    let batch = check::count("batch_size", batch_size)?;
    let n = check::count("dataset_size", dataset_size)?;
    if batch > n {
        return Err(AccountingError::InvalidParameter(format!(
            "batch_size must be <= dataset_size = {n}, got {batch}"
        )));
    }
    let q = batch as f64 / n as f64;
    let steps = if epochs.fract() == 0.0 && epochs < 2f64.powi(53) {
        let total = epochs as u128 * u128::from(n);
        total.div_ceil(u128::from(batch))
    } else {
        (epochs * n as f64 / batch as f64).ceil() as u128
    };
    let steps = u64::try_from(steps).map_err(|_| {
        AccountingError::InvalidParameter(format!(
            "epochs = {epochs} gives more than {} steps",
            u64::MAX
        ))
    })?;
    Ok((q, steps.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gdp::GdpAccountant;
    use crate::rdp::{Conversion, RdpAccountant};

    fn invalid(r: Result<impl std::fmt::Debug, AccountingError>) -> String {
        match r {
            Err(AccountingError::InvalidParameter(m)) => m,
            other => panic!("expected InvalidParameter, got {other:?}"),
        }
    }

    #[test]
    fn recovers_the_reference_noise_multiplier() {
        // Issue 3: σ = 1.1, q = 256/60000, T = 14063 gives ε = 2.597 (RDP, current) at 1e-5.
        let c = noise_multiplier(
            &RdpAccountant::default(),
            2.597,
            1e-5,
            256.0 / 60000.0,
            14063,
        )
        .unwrap();
        assert!((c.noise_multiplier - 1.1).abs() < 2e-3, "{c:?}");
        assert!(c.epsilon <= 2.597);
    }

    #[test]
    fn never_exceeds_the_target_and_lands_within_tolerance() {
        let rdp_current = RdpAccountant::default();
        let rdp_classic = RdpAccountant::new(Conversion::Classic);
        let accountants: [&dyn Accountant; 3] = [&rdp_current, &rdp_classic, &GdpAccountant];
        for acc in accountants {
            for &(target, q, steps) in &[
                (0.5, 0.004, 3750),
                (1.0, 0.01, 1000),
                (3.0, 0.05, 200),
                (8.0, 1.0, 10),
            ] {
                let c = noise_multiplier(acc, target, 1e-5, q, steps).unwrap();
                let recomputed = acc
                    .epsilon(&PrivacyEvent::dp_sgd(c.noise_multiplier, q, steps), 1e-5)
                    .unwrap();
                assert_eq!(recomputed, c.epsilon);
                assert!(c.epsilon <= target, "{}: {c:?} > {target}", acc.name());
                assert!(
                    c.epsilon >= target * (1.0 - RELATIVE_TOLERANCE),
                    "{}: {c:?}",
                    acc.name()
                );
            }
        }
    }

    #[test]
    fn pld_calibrates_down_to_tiny_deltas() {
        // Below the PLD's δ floor its ε is the RDP bound: finite, so a σ is found (the raw PLD
        // ε is +∞ at δ = 1e-15, which made every σ "unreachable").
        let pld = crate::pld::PldAccountant::pessimistic();
        let (q, steps) = (256.0 / 60000.0, 1000);
        let c = noise_multiplier(&pld, 2.0, 1e-15, q, steps).unwrap();
        assert!(
            c.epsilon <= 2.0 && c.epsilon >= 2.0 * (1.0 - RELATIVE_TOLERANCE),
            "{c:?}"
        );
        assert!(
            c.noise_multiplier > 1.1 && c.noise_multiplier < 3.0,
            "{c:?}"
        );
    }

    #[test]
    fn pld_calibration_of_the_train_default_is_unchanged_by_the_memory_cut() {
        // `dpml train --epsilon 3` on MNIST, batch 256, 1 epoch. Before the memory cut of
        // issue 15 (one FFT plan kept instead of four pairs, real self-convolution at half
        // length) this gave σ = 0.5871045949861445 and ε = 2.9986707846817695; the same σ must
        // come out, with ε equal up to FFT round-off (about 1e-9) and ≤ the target.
        let (q, steps) = steps_for_epochs(1.0, 256, 60000).unwrap();
        let pld = crate::pld::PldAccountant::pessimistic();
        let c = noise_multiplier(&pld, 3.0, 1e-5, q, steps).unwrap();
        assert!(
            (c.noise_multiplier - 0.5871045949861445).abs() < 1e-9,
            "{c:?}"
        );
        assert!((c.epsilon - 2.9986707846817695).abs() < 1e-7, "{c:?}");
        assert!(c.epsilon <= 3.0, "{c:?}");
        let recomputed = pld
            .epsilon(&PrivacyEvent::dp_sgd(c.noise_multiplier, q, steps), 1e-5)
            .unwrap();
        assert_eq!(recomputed, c.epsilon);
    }

    #[test]
    fn unreachable_and_trivial_targets() {
        let acc = RdpAccountant::default();
        let m = invalid(noise_multiplier(&acc, 1e-4, 1e-5, 1.0, 1_000_000));
        assert!(m.contains("unreachable") && m.contains("1000"), "{m}");
        // A huge target is met by the smallest σ tried.
        let c = noise_multiplier(&acc, 1e9, 1e-5, 0.01, 10).unwrap();
        assert_eq!(c.noise_multiplier, MIN_NOISE_MULTIPLIER);
        assert!(c.epsilon <= 1e9);
    }

    #[test]
    fn bad_input_is_rejected_with_the_value_named() {
        let acc = RdpAccountant::default();
        assert!(invalid(noise_multiplier(&acc, 0.0, 1e-5, 0.01, 10)).contains("target_epsilon"));
        assert!(invalid(noise_multiplier(&acc, f64::NAN, 1e-5, 0.01, 10)).contains("NaN"));
        assert!(invalid(noise_multiplier(&acc, 1.0, 1.0, 0.01, 10)).contains("delta"));
        assert!(invalid(noise_multiplier(&acc, 1.0, 1e-5, 0.0, 10)).contains("sampling_rate"));
        assert!(
            invalid(noise_multiplier(&acc, 1.0, 1e-5, 0.01, 0))
                .contains("steps must be >= 1, got 0")
        );
    }

    #[test]
    fn steps_for_epochs_matches_the_reference_runs() {
        for &(epochs, steps) in &[
            (60.0, 14063),
            (15.0, 3516),
            (45.0, 10547),
            (20.0, 4688),
            (70.0, 16407),
        ] {
            let (q, t) = steps_for_epochs(epochs, 256, 60000).unwrap();
            assert_eq!(q, 256.0 / 60000.0);
            assert_eq!(t, steps, "{epochs} epochs");
        }
        // Whole epochs that divide evenly are not rounded up by float error.
        assert_eq!(steps_for_epochs(3.0, 100, 1000).unwrap().1, 30);
        assert_eq!(steps_for_epochs(0.5, 256, 60000).unwrap().1, 118);
        assert!(invalid(steps_for_epochs(0.0, 256, 60000)).contains("epochs"));
        assert!(invalid(steps_for_epochs(1.0, 0, 60000)).contains("batch_size"));
        assert!(invalid(steps_for_epochs(1.0, 10, 0)).contains("dataset_size"));
        assert!(invalid(steps_for_epochs(1.0, 100, 10)).contains("got 100"));
    }
}
