//! Numerically stable functions of a model's logits for attack scores: log-softmax, softmax,
//! cross-entropy, and the logit-scaled confidence of LiRA.
//!
//! The logit-scaled confidence of the true label `y` is `φ = log(p_y / (1 − p_y))`. Computed
//! from probabilities it becomes infinite once `p_y` rounds to 1; computed from logits as
//! `φ = z_y − logsumexp_{j≠y} z_j` (Carlini et al. 2022) it stays finite and exact.

use crate::error::{AuditError, Result};
use crate::validate;

/// `log Σ exp(z_j)` over the given values, shifted by the maximum (−∞ for none).
fn logsumexp(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let max = values.clone().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    max + values.map(|z| (z - max).exp()).sum::<f64>().ln()
}

fn check(logits: &[f64], label: usize) -> Result<()> {
    validate::finite_nonempty("logits", logits)?;
    if logits.len() < 2 {
        return Err(AuditError::Invalid(format!(
            "logits must have at least 2 classes, got {}",
            logits.len()
        )));
    }
    if label >= logits.len() {
        return Err(AuditError::Invalid(format!(
            "label must be below the number of classes ({}), got {label}",
            logits.len()
        )));
    }
    Ok(())
}

/// Log-probabilities `z_j − logsumexp(z)`.
///
/// # Errors
/// [`AuditError::Empty`] or [`AuditError::NonFinite`] for empty or non-finite logits.
pub fn log_softmax(logits: &[f64]) -> Result<Vec<f64>> {
    validate::finite_nonempty("logits", logits)?;
    let lse = logsumexp(logits.iter().copied());
    Ok(logits.iter().map(|z| z - lse).collect())
}

/// Probabilities `exp(log_softmax(z))`.
///
/// # Errors
/// As [`log_softmax`].
pub fn softmax(logits: &[f64]) -> Result<Vec<f64>> {
    Ok(log_softmax(logits)?.into_iter().map(f64::exp).collect())
}

/// Cross-entropy loss `−log p_y = logsumexp(z) − z_y`.
///
/// # Errors
/// Non-finite or empty logits, fewer than 2 classes, or a label out of range.
pub fn cross_entropy(logits: &[f64], label: usize) -> Result<f64> {
    check(logits, label)?;
    Ok(logsumexp(logits.iter().copied()) - logits[label])
}

/// LiRA's logit-scaled confidence `φ = z_y − logsumexp_{j≠y} z_j = log(p_y/(1 − p_y))`.
///
/// # Citations
/// N. Carlini, S. Chien, M. Nasr, S. Song, A. Terzis, F. Tramèr, "Membership Inference Attacks
/// From First Principles", IEEE S&P 2022, Section IV (logit scaling).
///
/// # Errors
/// As [`cross_entropy`].
pub fn logit_scaled_confidence(logits: &[f64], label: usize) -> Result<f64> {
    check(logits, label)?;
    let others = logits
        .iter()
        .enumerate()
        .filter(|&(j, _)| j != label)
        .map(|(_, &z)| z);
    Ok(logits[label] - logsumexp(others))
}

/// `φ = log(p/(1 − p))` from a probability strictly between 0 and 1 (prefer
/// [`logit_scaled_confidence`] when logits are available).
///
/// # Errors
/// [`AuditError::OutOfRange`] when `p ∉ (0, 1)` (including NaN).
pub fn logit_scale_probability(p: f64) -> Result<f64> {
    validate::open_unit("confidence", p)?;
    Ok(p.ln() - (-p).ln_1p())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phi_from_logits_matches_probabilities_and_stays_finite() {
        let z = [2.0, -1.0, 0.5];
        let p = softmax(&z).unwrap();
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        let phi = logit_scaled_confidence(&z, 0).unwrap();
        assert!((phi - logit_scale_probability(p[0]).unwrap()).abs() < 1e-12);
        assert!((cross_entropy(&z, 0).unwrap() + p[0].ln()).abs() < 1e-12);
        // p_y = 1 − e^−800 is 1.0 in f64, φ from logits is still exact: 800 − logsumexp(0, 0).
        let big = [800.0, 0.0, 0.0];
        assert_eq!(softmax(&big).unwrap()[0], 1.0);
        let phi = logit_scaled_confidence(&big, 0).unwrap();
        assert!((phi - (800.0 - 2f64.ln())).abs() < 1e-12, "{phi}");
        assert!((logit_scaled_confidence(&big, 1).unwrap() + 800.0).abs() < 1e-9);
    }

    #[test]
    fn bad_input_is_named() {
        let e = logit_scaled_confidence(&[1.0, 2.0], 2).unwrap_err();
        assert!(e.to_string().contains("got 2"), "{e}");
        let e = logit_scaled_confidence(&[1.0], 0).unwrap_err();
        assert!(e.to_string().contains("at least 2 classes"), "{e}");
        let e = cross_entropy(&[1.0, f64::INFINITY], 0).unwrap_err();
        assert!(e.to_string().contains("logits[1]"), "{e}");
        for bad in [0.0, 1.0, 1.5, f64::NAN] {
            let e = logit_scale_probability(bad).unwrap_err();
            assert!(
                e.to_string().contains("confidence must be in (0, 1)"),
                "{e}"
            );
        }
    }
}
