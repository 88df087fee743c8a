//! Which reference models train on which examples: a balanced random design where every
//! example is IN for half of the K models (as in Carlini et al. 2022), so that every example
//! has both IN and OUT reference scores.

use dpml_mechanisms::DpRng;

use crate::error::{AuditError, Result};
use crate::sampling;

/// `trained_on[k][i]`: whether reference model k trains on example i. Each example is IN for
/// exactly `K/2` models (K even) or for `⌊K/2⌋` or `⌈K/2⌉` at random (K odd), and which models
/// is uniformly random and independent across examples.
///
/// # Errors
/// [`AuditError::Invalid`] when `num_models` is 0.
pub fn balanced_membership(
    num_models: usize,
    num_examples: usize,
    rng: &mut DpRng,
) -> Result<Vec<Vec<bool>>> {
    if num_models == 0 {
        return Err(AuditError::Invalid(
            "reference models K must be at least 1, got 0".into(),
        ));
    }
    let mut trained_on = vec![Vec::with_capacity(num_examples); num_models];
    let mut models: Vec<usize> = (0..num_models).collect();
    for _ in 0..num_examples {
        sampling::shuffle(&mut models, rng);
        let extra = num_models % 2 == 1 && rng.below(2) == 1;
        let ins = num_models / 2 + usize::from(extra);
        for (rank, &k) in models.iter().enumerate() {
            trained_on[k].push(rank < ins);
        }
    }
    Ok(trained_on)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_is_in_for_half_the_models() {
        let mut rng = DpRng::seeded(8);
        let t = balanced_membership(16, 2_000, &mut rng).unwrap();
        for i in 0..2_000 {
            assert_eq!(t.iter().filter(|row| row[i]).count(), 8);
        }
        // Each model trains on ~half the examples: Binomial(2000, 1/2) has sd 22.4; 3.29 sd is
        // the two-sided 0.1% critical value.
        for row in &t {
            let n = row.iter().filter(|&&b| b).count() as f64;
            assert!((n - 1_000.0).abs() < 3.29 * 22.37, "{n}");
        }
        let odd = balanced_membership(3, 500, &mut rng).unwrap();
        assert!((0..500).all(|i| matches!(odd.iter().filter(|r| r[i]).count(), 1 | 2)));
        let e = balanced_membership(0, 5, &mut rng).unwrap_err();
        assert_eq!(
            e.to_string(),
            "reference models K must be at least 1, got 0"
        );
    }
}
