//! Drawing the canaries of a one-run audit: which records are canaries, and for each whether it
//! is included in training (independently, with probability 1/2).

use dpml_mechanisms::DpRng;

use crate::error::{AuditError, Result};
use crate::sampling;

/// Canary records (indices into the data set) and their inclusion bits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CanaryPlan {
    /// Indices of the canary records, distinct, in the order they were drawn.
    pub indices: Vec<usize>,
    /// `included[i]`: whether canary `indices[i]` is in the training set.
    pub included: Vec<bool>,
}

impl CanaryPlan {
    /// Chooses `num_canaries` distinct records out of `data_len` uniformly at random and flips a
    /// fair coin for each one's inclusion.
    ///
    /// # Errors
    /// [`AuditError::Invalid`] when `num_canaries` is 0 or exceeds `data_len`.
    pub fn draw(num_canaries: usize, data_len: usize, rng: &mut DpRng) -> Result<Self> {
        if num_canaries == 0 {
            return Err(AuditError::Invalid(
                "canaries must be at least 1, got 0".into(),
            ));
        }
        if num_canaries > data_len {
            return Err(AuditError::Invalid(format!(
                "canaries must be at most the data set size ({data_len}), got {num_canaries}"
            )));
        }
        let mut all: Vec<usize> = (0..data_len).collect();
        sampling::shuffle(&mut all, rng);
        all.truncate(num_canaries);
        let included = (0..num_canaries).map(|_| rng.below(2) == 1).collect();
        Ok(Self {
            indices: all,
            included,
        })
    }

    /// Number of canaries `m`.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// Whether there are no canaries (never true for a drawn plan).
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_distinct_canaries_with_fair_coins() {
        let mut rng = DpRng::seeded(3);
        let plan = CanaryPlan::draw(10_000, 20_000, &mut rng).unwrap();
        let mut seen = plan.indices.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 10_000);
        assert!(seen.iter().all(|&i| i < 20_000));
        // Included ~ Binomial(10000, 1/2): sd 50; 3.29 sd is the two-sided 0.1% critical value.
        let inc = plan.included.iter().filter(|&&b| b).count() as f64;
        assert!((inc - 5_000.0).abs() < 3.29 * 50.0, "{inc}");
    }

    #[test]
    fn more_canaries_than_data_is_named() {
        let mut rng = DpRng::seeded(3);
        let e = CanaryPlan::draw(11, 10, &mut rng).unwrap_err();
        assert_eq!(
            e.to_string(),
            "canaries must be at most the data set size (10), got 11"
        );
        assert!(
            CanaryPlan::draw(0, 10, &mut rng)
                .unwrap_err()
                .to_string()
                .contains("got 0")
        );
    }
}
