//! Single-model membership scores: loss threshold (Yeom et al. 2018), confidence, prediction
//! entropy, and the modified entropy of Song & Mittal (2021). Each returns a score where
//! higher means "more likely a member", ready for [`crate::roc`].
//!
//! # Citations
//! S. Yeom, I. Giacomelli, M. Fredrikson, S. Jha, "Privacy Risk in Machine Learning: Analyzing
//! the Connection to Overfitting", CSF 2018 (loss threshold). L. Song, P. Mittal, "Systematic
//! Evaluation of Privacy Risks of Machine Learning Models", USENIX Security 2021 (confidence,
//! entropy and modified-entropy metrics).
//!
//! # Errors
//! Non-finite losses, probability vectors with an entry outside [0, 1] or not summing to 1
//! (tolerance [`SUM_TOLERANCE`]), and labels out of range are rejected with the value named.

use crate::error::{AuditError, Result};
use crate::validate;

/// How far a probability vector's sum may be from 1 (float rounding of a softmax).
pub const SUM_TOLERANCE: f64 = 1e-6;

/// Probabilities are clamped below at this value before a logarithm, as in Song & Mittal's
/// code, so a zero probability gives a large finite entropy rather than infinity.
pub const LOG_FLOOR: f64 = 1e-30;

/// Loss-threshold scores `−loss` (members tend to have lower loss).
///
/// # Errors
/// [`AuditError::Empty`] / [`AuditError::NonFinite`] for empty or non-finite losses.
pub fn loss_scores(losses: &[f64]) -> Result<Vec<f64>> {
    validate::finite_nonempty("losses", losses)?;
    Ok(losses.iter().map(|l| -l).collect())
}

/// Confidence score: the probability of the true label, `p_y`.
///
/// # Errors
/// See the module docs.
pub fn confidence_score(probs: &[f64], label: usize) -> Result<f64> {
    check_distribution(probs, Some(label))?;
    Ok(probs[label])
}

/// Entropy score `−H(p) = Σ p_j log p_j` (members tend to get confident, low-entropy
/// predictions).
///
/// # Errors
/// See the module docs.
pub fn entropy_score(probs: &[f64]) -> Result<f64> {
    check_distribution(probs, None)?;
    Ok(probs.iter().map(|&p| p * ln_floor(p)).sum())
}

/// Modified-entropy score `−Mentr`, where
/// `Mentr(p, y) = −(1 − p_y) log p_y − Σ_{j≠y} p_j log(1 − p_j)`: low when the model is
/// confidently right, high when confidently wrong (unlike plain entropy, it uses the label).
///
/// # Errors
/// See the module docs.
pub fn modified_entropy_score(probs: &[f64], label: usize) -> Result<f64> {
    check_distribution(probs, Some(label))?;
    let wrong: f64 = probs
        .iter()
        .enumerate()
        .filter(|&(j, _)| j != label)
        .map(|(_, &p)| p * ln_floor(1.0 - p))
        .sum();
    let py = probs[label];
    Ok((1.0 - py) * ln_floor(py) + wrong)
}

fn ln_floor(p: f64) -> f64 {
    p.max(LOG_FLOOR).ln()
}

fn check_distribution(probs: &[f64], label: Option<usize>) -> Result<()> {
    validate::finite_nonempty("probabilities", probs)?;
    if let Some(index) = probs.iter().position(|p| !(0.0..=1.0).contains(p)) {
        return Err(AuditError::Invalid(format!(
            "probabilities[{index}] must be in [0, 1], got {}",
            probs[index]
        )));
    }
    let sum: f64 = probs.iter().sum();
    if (sum - 1.0).abs() > SUM_TOLERANCE {
        return Err(AuditError::Invalid(format!(
            "probabilities must sum to 1, got sum {sum}"
        )));
    }
    if let Some(y) = label.filter(|&y| y >= probs.len()) {
        return Err(AuditError::Invalid(format!(
            "label must be below the number of classes ({}), got {y}",
            probs.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_scores() {
        assert_eq!(loss_scores(&[0.1, 2.0]).unwrap(), vec![-0.1, -2.0]);
        let p = [0.5, 0.25, 0.25];
        assert_eq!(confidence_score(&p, 1).unwrap(), 0.25);
        // H = 0.5 ln 2 + 2 · 0.25 ln 4 = 1.5 ln 2.
        assert!((entropy_score(&p).unwrap() + 1.5 * 2f64.ln()).abs() < 1e-15);
        // Mentr(p, 0) = −0.5 ln 0.5 − 2 · 0.25 ln 0.75.
        let mentr = -0.5 * 0.5f64.ln() - 0.5 * 0.75f64.ln();
        assert!((modified_entropy_score(&p, 0).unwrap() + mentr).abs() < 1e-15);
    }

    #[test]
    fn modified_entropy_separates_right_from_wrong_confidence() {
        // Plain entropy cannot tell a confident right answer from a confident wrong one;
        // modified entropy scores the right one far higher.
        let right = [0.98, 0.01, 0.01];
        let wrong = [0.01, 0.98, 0.01];
        assert!((entropy_score(&right).unwrap() - entropy_score(&wrong).unwrap()).abs() < 1e-15);
        let (r, w) = (
            modified_entropy_score(&right, 0).unwrap(),
            modified_entropy_score(&wrong, 0).unwrap(),
        );
        assert!(r > -0.2 && w < -3.0, "{r} {w}");
        // A zero probability on the true label stays finite thanks to the floor.
        assert!(modified_entropy_score(&[0.0, 1.0], 0).unwrap().is_finite());
    }

    #[test]
    fn bad_input_is_named() {
        let e = loss_scores(&[1.0, f64::NAN]).unwrap_err();
        assert_eq!(e.to_string(), "losses[1] must be finite, got NaN");
        let e = confidence_score(&[1.2, -0.2], 0).unwrap_err();
        assert!(
            e.to_string()
                .contains("probabilities[0] must be in [0, 1], got 1.2"),
            "{e}"
        );
        let e = entropy_score(&[0.5, 0.4]).unwrap_err();
        assert!(e.to_string().contains("sum 0.9"), "{e}");
        let e = modified_entropy_score(&[0.5, 0.5], 3).unwrap_err();
        assert!(e.to_string().contains("got 3"), "{e}");
        assert!(loss_scores(&[]).is_err());
    }
}
