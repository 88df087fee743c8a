//! RMIA, the robust membership-inference attack of Zarifzadeh, Liu, Mahloujifar, Shokri
//! (2024): compare the target model's confidence on x with x's average confidence under
//! reference models, Pr(x|θ)/Pr(x), and score x by the fraction of population records z that
//! x dominates, i.e. with (Pr(x|θ)/Pr(x)) / (Pr(z|θ)/Pr(z)) ≥ γ.
//!
//! Pr(x) comes from the reference models NOT trained on x (the paper's offline form, its
//! recommendation with few reference models): Pr(x) = ½((1 + a)·Pr_OUT(x) + (1 − a)), where
//! the linear correction with `a` stands in for the missing IN models. It needs no
//! per-example Gaussian fit, which is why RMIA works with 2 reference models where LiRA's
//! variance estimates fail.
//!
//! # Privacy
//! An attack: its scores feed the same ROC metrics and Clopper–Pearson bounds as every other.
//!
//! # Citations
//! S. Zarifzadeh, P. Liu, S. Mahloujifar, R. Shokri, "Low-Cost High-Power Membership
//! Inference Attacks", ICML 2024 (arXiv:2312.03262).
//!
//! # Errors
//! Empty or non-finite confidences, reference rows of another length, no reference model,
//! γ not finite and positive.

use crate::error::{AuditError, Result};
use crate::validate;

/// The paper's default γ (a likelihood ratio of 1: x at least as likely as z under θ).
pub const DEFAULT_GAMMA: f64 = 1.0;
/// The offline correction `a` (the paper tunes it on reference models; 0.3 is in the range it
/// reports for small models).
pub const DEFAULT_OFFLINE_A: f64 = 0.3;

/// Confidences are floored here before dividing, so a reference confidence of 0 (an
/// underflowed softmax) gives a large finite ratio instead of ∞.
const CONFIDENCE_FLOOR: f64 = 1e-300;

/// RMIA scores of each record (higher = more likely a member) from the target model's
/// confidence on its true label, `target[i]`, each reference model's, `references[k][i]`,
/// and whether reference k trained on record i, `trained_on[k][i]` (only the others are
/// used). The population z is the same records (each x is compared with all others).
///
/// # Errors
/// See the module docs; also a record that every reference model trained on, `a ∉ [0, 1]`.
pub fn rmia_scores(
    target: &[f64],
    references: &[Vec<f64>],
    trained_on: &[Vec<bool>],
    a: f64,
    gamma: f64,
) -> Result<Vec<f64>> {
    validate::finite_nonempty("target confidences", target)?;
    if references.is_empty() {
        return Err(AuditError::Invalid(
            "RMIA needs at least 1 reference model, got 0".into(),
        ));
    }
    if !(gamma > 0.0 && gamma.is_finite()) {
        return Err(AuditError::OutOfRange {
            name: "gamma",
            range: "(0, ∞)",
            value: gamma,
        });
    }
    let n = target.len();
    for r in references {
        validate::finite("reference confidences", r)?;
        if r.len() != n {
            return Err(AuditError::Invalid(format!(
                "reference confidences must have one per record ({n}), got {}",
                r.len()
            )));
        }
    }
    if trained_on.len() != references.len() || trained_on.iter().any(|t| t.len() != n) {
        return Err(AuditError::Invalid(format!(
            "membership must be one row of {n} per reference model ({}), got {} rows",
            references.len(),
            trained_on.len()
        )));
    }
    if !(0.0..=1.0).contains(&a) {
        return Err(AuditError::OutOfRange {
            name: "a",
            range: "[0, 1]",
            value: a,
        });
    }
    let ratio = (0..n)
        .map(|i| {
            let outs: Vec<f64> = references
                .iter()
                .zip(trained_on)
                .filter(|(_, t)| !t[i])
                .map(|(r, _)| r[i])
                .collect();
            if outs.is_empty() {
                return Err(AuditError::Invalid(format!(
                    "RMIA needs a reference model not trained on record {i}, got none"
                )));
            }
            let out = outs.iter().sum::<f64>() / outs.len() as f64;
            let prior = 0.5 * ((1.0 + a) * out + (1.0 - a));
            Ok(target[i].max(CONFIDENCE_FLOOR) / prior.max(CONFIDENCE_FLOOR))
        })
        .collect::<Result<Vec<f64>>>()?;
    let mut sorted = ratio.clone();
    sorted.sort_by(f64::total_cmp);
    let others = (n.max(2) - 1) as f64;
    Ok(ratio
        .iter()
        .map(|&r| {
            // z with ratio_z ≤ ratio_x / γ, not counting x itself.
            let below = sorted.partition_point(|&z| z <= r / gamma);
            let self_counted = usize::from(gamma <= 1.0);
            (below.saturating_sub(self_counted)) as f64 / others
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_rank_by_the_calibrated_ratio() {
        // Record 0 is confidently predicted by everyone (easy), record 1 only by the target.
        let target = [0.9, 0.6, 0.3];
        let refs = vec![vec![0.9, 0.1, 0.3], vec![0.9, 0.2, 0.3]];
        let out = vec![vec![false; 3]; 2];
        // a = 1: Pr(x) is the OUT mean, ratios 1.0, 4.0, 1.0: record 1 dominates both
        // others, 0 and 2 dominate each other.
        let s = rmia_scores(&target, &refs, &out, 1.0, 1.0).unwrap();
        assert_eq!(s, vec![0.5, 1.0, 0.5]);
        // A loss attack would rank record 0 first; RMIA does not.
        assert!(s[1] > s[0]);
        // Only OUT models count: record 1's IN model (confidence 0.9) is ignored.
        let trained = vec![vec![false, false, false], vec![false, true, false]];
        let s2 = rmia_scores(
            &target,
            &[refs[0].clone(), vec![0.9, 0.9, 0.3]],
            &trained,
            1.0,
            1.0,
        );
        assert_eq!(s2.unwrap()[1], 1.0);
    }

    #[test]
    fn bad_input_is_named() {
        assert!(
            rmia_scores(&[0.5], &[], &[], 0.3, 1.0)
                .unwrap_err()
                .to_string()
                .contains("got 0")
        );
        assert!(
            rmia_scores(&[0.5, 0.4], &[vec![0.5]], &[vec![false]], 0.3, 1.0)
                .unwrap_err()
                .to_string()
                .contains("got 1")
        );
        assert!(
            rmia_scores(&[0.5], &[vec![0.5]], &[vec![false]], 0.3, 0.0)
                .unwrap_err()
                .to_string()
                .contains("gamma")
        );
        assert!(
            rmia_scores(&[0.5], &[vec![0.5]], &[vec![true]], 0.3, 1.0)
                .unwrap_err()
                .to_string()
                .contains("record 0")
        );
    }
}
