//! The audit population: 2N records drawn without replacement from the data set, the first N
//! the target's training set (members), the other N held out (non-members). Reference models
//! train on random halves of the same 2N records.

use dpml_data::Dataset;
use dpml_mechanisms::DpRng;

use super::error::{DriverError, Result};
use crate::sampling;

/// The 2N audit records and who the target trains on.
#[derive(Debug, Clone, PartialEq)]
pub struct Population {
    /// Indices into the data set: `indices[..n]` are members, `indices[n..]` non-members.
    pub indices: Vec<usize>,
    /// N, the target's training set size.
    pub target_size: usize,
}

impl Population {
    /// Draws 2N distinct records of `data` uniformly at random.
    ///
    /// # Errors
    /// [`DriverError::Invalid`] when N is 0 or 2N exceeds the data set.
    pub fn draw(data: &Dataset, target_size: usize, rng: &mut DpRng) -> Result<Self> {
        if target_size == 0 || target_size.saturating_mul(2) > data.n {
            return Err(DriverError::Invalid(format!(
                "target-size must be between 1 and half the data set ({} records), got {target_size}",
                data.n
            )));
        }
        let mut all: Vec<usize> = (0..data.n).collect();
        sampling::shuffle(&mut all, rng);
        all.truncate(2 * target_size);
        Ok(Self {
            indices: all,
            target_size,
        })
    }

    /// The members' indices (the target's training set).
    pub fn members(&self) -> &[usize] {
        &self.indices[..self.target_size]
    }

    /// Whether audit record `i` (position in [`Population::indices`]) is a member.
    pub fn is_member(&self, i: usize) -> bool {
        i < self.target_size
    }

    /// Number of audit records, 2N.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// Whether there are no audit records (never true for a drawn population).
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }
}

/// Splits per-record scores over the audit records into (members, non-members).
pub(crate) fn split_scores(pop: &Population, scores: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (m, n) = scores.split_at(pop.target_size.min(scores.len()));
    (m.to_vec(), n.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> Dataset {
        Dataset {
            name: "toy".into(),
            x: (0..n).map(|i| i as f32).collect(),
            n,
            record_shape: vec![1],
            y: vec![0; n],
            n_classes: 2,
            feature_names: vec!["x".into()],
            class_names: vec!["a".into(), "b".into()],
            feature_range: None,
        }
    }

    #[test]
    fn draws_distinct_records_and_names_bad_sizes() {
        let pop = Population::draw(&data(10), 5, &mut DpRng::seeded(1)).unwrap();
        let mut seen = pop.indices.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(pop.members().len(), 5);
        assert!(pop.is_member(4) && !pop.is_member(5));
        let e = Population::draw(&data(10), 6, &mut DpRng::seeded(1)).unwrap_err();
        assert!(e.to_string().contains("(10 records), got 6"), "{e}");
        let (m, n) = split_scores(&pop, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!((m.len(), n[0]), (5, 6.0));
    }
}
