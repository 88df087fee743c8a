//! The one-run audit's training run: m canaries drawn from the target's N training records,
//! each mislabelled (its label shifted by a random non-zero amount, so the model can only fit
//! it by memorising it) and kept in training with probability 1/2. One model is trained on the
//! N records minus the excluded canaries; each canary is scored by the model's `−loss` on its
//! wrong label, and the scores become a lower bound with [`crate::one_run::audit_sweep`].

use dpml_data::Dataset;
use dpml_mechanisms::DpRng;

use super::error::{DriverError, Result};
use crate::one_run::CanaryPlan;

/// The canary training set and what is needed to score it.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryRun {
    /// Which canaries are in and where they sit in the target's training set.
    pub plan: CanaryPlan,
    /// The training set: the target's records minus excluded canaries, canaries mislabelled.
    pub train: Dataset,
    /// The canaries as records (all m, mislabelled), for scoring.
    pub canaries: Dataset,
}

impl CanaryRun {
    /// Draws `m` canaries among `members` (the target's training set).
    ///
    /// # Errors
    /// [`DriverError::Invalid`] when `m` is 0 or exceeds the training set, or the data set
    /// has fewer than 2 classes.
    pub fn draw(members: &Dataset, m: usize, rng: &mut DpRng) -> Result<Self> {
        if members.n_classes < 2 {
            return Err(DriverError::Invalid(format!(
                "canaries need at least 2 classes to mislabel, got {}",
                members.n_classes
            )));
        }
        let plan = CanaryPlan::draw(m, members.n, rng).map_err(|e| {
            DriverError::Invalid(e.to_string().replace("data set size", "target size"))
        })?;
        let mut labels = members.y.clone();
        for &i in &plan.indices {
            let shift = 1 + rng.below(members.n_classes as u64 - 1) as u32;
            labels[i] = (labels[i] + shift) % members.n_classes as u32;
        }
        let mut excluded = vec![false; members.n];
        for (&i, &inc) in plan.indices.iter().zip(&plan.included) {
            excluded[i] = !inc;
        }
        let keep: Vec<usize> = (0..members.n).filter(|&i| !excluded[i]).collect();
        let relabelled = Dataset {
            y: labels,
            ..members.clone()
        };
        Ok(Self {
            train: relabelled.subset(&keep),
            canaries: relabelled.subset(&plan.indices),
            plan,
        })
    }

    /// The `(k₊, k₋)` guesses tried (a union bound pays for them): guess in and out on the top
    /// and bottom 5%, 10%, 25% and 50% of the canaries.
    pub fn guess_choices(&self) -> Vec<(usize, usize)> {
        let m = self.plan.len();
        let mut out: Vec<(usize, usize)> = [20, 10, 4, 2]
            .iter()
            .map(|d| ((m / d).max(1), (m / d).max(1)))
            .filter(|&(a, b)| a + b <= m)
            .collect();
        out.dedup();
        if out.is_empty() {
            out.push((1, 0));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canaries_are_mislabelled_and_half_excluded() {
        let n = 400;
        let members = Dataset {
            name: "toy".into(),
            x: (0..n).map(|i| i as f32).collect(),
            n,
            record_shape: vec![1],
            y: (0..n).map(|i| (i % 3) as u32).collect(),
            n_classes: 3,
            feature_names: vec!["x".into()],
            class_names: vec!["a".into(), "b".into(), "c".into()],
            feature_range: None,
        };
        let run = CanaryRun::draw(&members, 200, &mut DpRng::seeded(2)).unwrap();
        let included = run.plan.included.iter().filter(|&&b| b).count();
        assert_eq!(run.train.n, n - (200 - included));
        for (k, &i) in run.plan.indices.iter().enumerate() {
            assert_ne!(
                run.canaries.y[k], members.y[i],
                "canary {k} keeps its label"
            );
            assert_eq!(run.canaries.x[k], members.x[i]);
        }
        // Included ~ Bin(200, 1/2): sd 7.07; 3.29 sd is the two-sided 0.1% critical value.
        assert!((included as f64 - 100.0).abs() < 3.29 * 7.08, "{included}");
        assert_eq!(run.guess_choices()[0], (10, 10));
        let e = CanaryRun::draw(&members, 401, &mut DpRng::seeded(2)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "canaries must be at most the target size (400), got 401"
        );
    }
}
