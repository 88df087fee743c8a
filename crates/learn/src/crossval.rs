//! K-fold cross-validation of a DP-SGD recipe and the privacy of releasing all K models.
//!
//! Each record's fold is a keyed hash of the record ([`dpml_data::kfold`]), so it is in the
//! test set of one fold and the training set of the other K − 1, and removing a record moves
//! no other. Releasing the K models composes, for each record, the events of the K − 1 models
//! it trained: [`epsilon_all_folds`] is that guarantee, worst case over the folds.

use dpml_accounting::{Accountant, AccountingError};
use dpml_data::{Dataset, SplitKey};
use dpml_mechanisms::{DpRng, PrivacyEvent};

use crate::dpsgd::{TrainConfig, TrainOutcome};

/// The test accuracy and ε of each fold's model in a K-fold cross-validation.
#[derive(Debug, Clone, PartialEq)]
pub struct FoldResults {
    /// Test accuracy of fold i's model on fold i (NaN if it reported none).
    pub accuracies: Vec<f64>,
    /// ε of fold i's model (`None` when non-private).
    pub epsilons: Vec<Option<f64>>,
    /// Records in fold i (its test set): random, about N/K, as each record's fold is drawn
    /// on its own.
    pub test_sizes: Vec<usize>,
}

impl FoldResults {
    /// The largest ε over the folds: the guarantee of each single model.
    pub fn epsilon(&self) -> Option<f64> {
        self.epsilons
            .iter()
            .flatten()
            .copied()
            .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))))
    }
}

/// How one fold's model is trained: fold index, recipe, train and test sets, generator.
pub type FoldTrainer<'a, E> =
    dyn FnMut(usize, &TrainConfig, &Dataset, &Dataset, &mut DpRng) -> Result<TrainOutcome, E> + 'a;

/// K-fold cross-validation of `cfg` over `all` with the folds of `key` (one key for every
/// run of a sweep gives them all the same folds). `fit` trains one model per fold on the
/// other K − 1 folds and tests it on the held-out one.
///
/// # Errors
/// The data error of [`dpml_data::kfold`] unless 2 ≤ K ≤ N or when a fold comes out empty;
/// whatever `fit` returns.
pub fn k_fold<E: From<dpml_data::DataError>>(
    cfg: &TrainConfig,
    all: &Dataset,
    k: usize,
    key: &SplitKey,
    rng: &mut DpRng,
    fit: &mut FoldTrainer<'_, E>,
) -> Result<FoldResults, E> {
    // DP-SGD's relation is add/remove of whole records: the folds hash whole records.
    let folds = dpml_data::kfold(all, k, key, dpml_data::SplitBasis::Record)?;
    let mut accuracies = Vec::with_capacity(k);
    let mut epsilons = Vec::with_capacity(k);
    for (i, (train_idx, test_idx)) in folds.iter().enumerate() {
        let (train, test) = (all.subset(train_idx), all.subset(test_idx));
        let outcome = fit(i, cfg, &train, &test, rng)?;
        accuracies.push(outcome.report.test_accuracy.unwrap_or(f64::NAN));
        epsilons.push(outcome.report.epsilon);
    }
    Ok(FoldResults {
        accuracies,
        epsilons,
        test_sizes: folds.iter().map(|f| f.1.len()).collect(),
    })
}

/// ε of releasing all K models of a K-fold cross-validation, by `accountant` at `delta`
/// (`None` when a model is non-private, which has no guarantee).
///
/// Every record is in exactly one test fold f, so it is in the training sets of the other
/// K − 1 models: its privacy loss is the composition of their events. The guarantee is the
/// largest over f. That composition depends only on fold f's own event (the multiset of all
/// events minus f's), so it is computed once per distinct event, not once per fold.
///
/// # Errors
/// [`AccountingError::InvalidParameter`] for an empty list; the accountant's errors.
pub fn epsilon_all_folds(
    events: &[Option<PrivacyEvent>],
    accountant: &dyn Accountant,
    delta: f64,
) -> Result<Option<f64>, AccountingError> {
    let Some(events) = events.iter().cloned().collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    // Distinct events with their multiplicities.
    let mut distinct: Vec<(PrivacyEvent, u64)> = Vec::new();
    for e in events {
        match distinct.iter_mut().find(|(d, _)| *d == e) {
            Some((_, n)) => *n += 1,
            None => distinct.push((e, 1)),
        }
    }
    if distinct.is_empty() {
        return Err(AccountingError::InvalidParameter(
            "no folds to account".into(),
        ));
    }
    let mut worst: Option<f64> = None;
    for held_out in 0..distinct.len() {
        let others: Vec<_> = distinct
            .iter()
            .enumerate()
            .map(|(i, (e, n))| (e, if i == held_out { n - 1 } else { *n }))
            .filter(|&(_, n)| n > 0)
            .map(|(e, n)| e.clone().repeated(n))
            .collect();
        let composed = match <[_; 1]>::try_from(others) {
            Ok([one]) => one,
            Err(others) if others.is_empty() => continue,
            Err(others) => PrivacyEvent::Composed { events: others },
        };
        let eps = accountant.epsilon(&composed, delta)?;
        worst = Some(worst.map_or(eps, |w| w.max(eps)));
    }
    Ok(worst)
}

/// Mean and sample standard deviation (0 for fewer than two values) of repeated measurements.
pub fn mean_std(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = if values.len() > 1 {
        values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests {
    use dpml_accounting::RdpAccountant;

    use super::*;

    /// With K equal folds every record trains K − 1 models: the composition of K − 1 copies
    /// of one model's event, not K and not one.
    #[test]
    fn all_folds_compose_the_k_minus_one_models_a_record_trains() {
        let rdp = RdpAccountant::default();
        let one = PrivacyEvent::dp_sgd(1.1, 0.01, 100);
        let events = vec![Some(one.clone()); 5];
        let all = epsilon_all_folds(&events, &rdp, 1e-5).unwrap().unwrap();
        let four = rdp.epsilon(&one.clone().repeated(4), 1e-5).unwrap();
        assert!((all - four).abs() < 1e-12, "{all} vs {four}");
        let five = rdp.epsilon(&one.repeated(5), 1e-5).unwrap();
        assert!(all < five);
    }

    /// Unequal folds: the guarantee is the worst record's, the one held out of the cheapest
    /// model (it trains the two dearest).
    #[test]
    fn unequal_folds_take_the_worst_record() {
        let rdp = RdpAccountant::default();
        let (cheap, dear) = (
            PrivacyEvent::dp_sgd(2.0, 0.01, 50),
            PrivacyEvent::dp_sgd(0.8, 0.01, 50),
        );
        let events = [Some(cheap), Some(dear.clone()), Some(dear.clone())];
        let all = epsilon_all_folds(&events, &rdp, 1e-5).unwrap().unwrap();
        let worst = rdp.epsilon(&dear.repeated(2), 1e-5).unwrap();
        assert!((all - worst).abs() < 1e-12, "{all} vs {worst}");
    }

    #[test]
    fn a_non_private_fold_has_no_guarantee_and_no_folds_is_refused() {
        let rdp = RdpAccountant::default();
        let events = [Some(PrivacyEvent::dp_sgd(1.0, 0.01, 10)), None];
        assert_eq!(epsilon_all_folds(&events, &rdp, 1e-5).unwrap(), None);
        assert!(epsilon_all_folds(&[], &rdp, 1e-5).is_err());
    }

    #[test]
    fn mean_and_sample_standard_deviation() {
        assert_eq!(mean_std(&[2.0, 4.0]), (3.0, 2f64.sqrt()));
        assert_eq!(mean_std(&[5.0]), (5.0, 0.0));
    }
}
