//! The adversary's guess (the candidate with the smallest loss minus log prior) and what its
//! guesses achieve on members and non-members: accuracies, the no-model baseline, the
//! attribute advantage and the ε lower bound of [`crate::bounds::event`].

use serde::Serialize;

use super::candidates::Candidates;
use crate::bounds::{EpsilonBoundParams, EventCount, event_epsilon_lower_bound};
use crate::error::{AuditError, Result};
use crate::validate;

/// The candidate minimising `loss[c] − log_prior[c]` (the first of equals).
///
/// With the model's cross-entropy `−log p(y | x, v)` as the loss this is the maximum a
/// posteriori guess `argmax_v p(y | x, v) · prior(v)` when the model's probabilities are
/// taken at face value (Yeom et al. 2018, the attribute adversary weighting by the prior).
///
/// # Errors
/// [`AuditError::Invalid`] for slices of different lengths, empty or non-finite losses.
pub fn guess(losses: &[f64], log_prior: &[f64]) -> Result<usize> {
    validate::finite_nonempty("candidate losses", losses)?;
    if losses.len() != log_prior.len() {
        return Err(AuditError::Invalid(format!(
            "candidate losses ({}) and log prior ({}) must have the same length",
            losses.len(),
            log_prior.len()
        )));
    }
    let mut best = (0, f64::INFINITY);
    for (c, (l, lp)) in losses.iter().zip(log_prior).enumerate() {
        let v = l - lp;
        if v < best.1 {
            best = (c, v);
        }
    }
    Ok(best.0)
}

/// Whether each record's guess is right: `losses` is row-major `[records, candidates]`,
/// `truth[i]` the candidate record `i` really takes.
///
/// # Errors
/// [`AuditError::Invalid`] when `losses` is not `truth.len() × candidates.len()` long, or as
/// [`guess`].
pub fn correct_guesses(
    losses: &[f64],
    truth: &[usize],
    candidates: &Candidates,
) -> Result<Vec<bool>> {
    let c = candidates.len();
    if losses.len() != truth.len() * c {
        return Err(AuditError::Invalid(format!(
            "expected {} × {c} candidate losses, got {}",
            truth.len(),
            losses.len()
        )));
    }
    let log_prior = candidates.log_prior();
    losses
        .chunks(c)
        .zip(truth)
        .map(|(row, &t)| Ok(guess(row, &log_prior)? == t))
        .collect()
}

/// What the attribute adversary achieved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttributeMetrics {
    /// Fraction of members whose sensitive value was guessed right.
    pub member_accuracy: f64,
    /// The same on non-members.
    pub nonmember_accuracy: f64,
    /// Accuracy of always guessing the most frequent candidate, on members and non-members
    /// together (an attacker without the model).
    pub baseline_accuracy: f64,
    /// Attribute advantage: member accuracy − non-member accuracy.
    pub advantage: f64,
    /// ε lower bound `ln((p_in − δ)/p_out)` with Clopper–Pearson rates, holding with the
    /// stated confidence.
    pub epsilon_lower_bound: f64,
    /// The plug-in value of the raw accuracies: an estimate, NOT a bound.
    pub epsilon_estimate: f64,
    /// Right guesses on members.
    pub member_correct: EventCount,
    /// Right guesses on non-members.
    pub nonmember_correct: EventCount,
}

impl AttributeMetrics {
    /// Metrics of the guesses' correctness on members and non-members; `baseline_accuracy` is
    /// the no-model attacker's accuracy (see [`Candidates::most_frequent`]).
    ///
    /// # Errors
    /// [`AuditError::Empty`] when either side has no records; bad bound parameters.
    pub fn from_correct(
        member_correct: &[bool],
        nonmember_correct: &[bool],
        baseline_accuracy: f64,
        params: EpsilonBoundParams,
    ) -> Result<Self> {
        let count = |what: &'static str, v: &[bool]| {
            if v.is_empty() {
                return Err(AuditError::Empty { what });
            }
            Ok(EventCount {
                hits: v.iter().filter(|&&c| c).count() as u64,
                trials: v.len() as u64,
            })
        };
        let m = count("member guesses", member_correct)?;
        let n = count("non-member guesses", nonmember_correct)?;
        let bound = event_epsilon_lower_bound(m, n, params)?;
        Ok(Self {
            member_accuracy: m.rate(),
            nonmember_accuracy: n.rate(),
            baseline_accuracy,
            advantage: m.rate() - n.rate(),
            epsilon_lower_bound: bound.epsilon,
            epsilon_estimate: bound.epsilon_point,
            member_correct: m,
            nonmember_correct: n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guess_minimises_loss_minus_log_prior() {
        // Equal priors: the smallest loss; ties go to the first.
        let flat = [0.5f64.ln(), 0.5f64.ln()];
        assert_eq!(guess(&[2.0, 1.0], &flat).unwrap(), 1);
        assert_eq!(guess(&[1.0, 1.0], &flat).unwrap(), 0);
        // A prior of 0.9 against 0.1 outweighs a loss gap below ln 9 ≈ 2.197.
        let skew = [0.9f64.ln(), 0.1f64.ln()];
        assert_eq!(guess(&[3.0, 1.0], &skew).unwrap(), 0);
        assert_eq!(guess(&[3.3, 1.0], &skew).unwrap(), 1);
        assert!(guess(&[1.0], &flat).is_err());
        assert!(guess(&[f64::NAN, 1.0], &flat).is_err());
    }

    #[test]
    fn correctness_and_metrics() {
        let c = Candidates::from_population(&[0.0, 1.0, 1.0, 0.0], 5).unwrap();
        // Three records: guesses 1, 0, 1; truths 1, 1, 1.
        let losses = [3.0, 0.1, 0.2, 4.0, 2.0, 1.0];
        let ok = correct_guesses(&losses, &[1, 1, 1], &c).unwrap();
        assert_eq!(ok, vec![true, false, true]);
        assert!(correct_guesses(&losses[..5], &[1, 1, 1], &c).is_err());

        let p = EpsilonBoundParams::new(0.0, 0.95).unwrap();
        let m = AttributeMetrics::from_correct(&[true, true, false, true], &[true, false], 0.5, p)
            .unwrap();
        assert_eq!((m.member_accuracy, m.nonmember_accuracy), (0.75, 0.5));
        assert_eq!(m.advantage, 0.25);
        assert!((m.epsilon_estimate - 1.5f64.ln()).abs() < 1e-15);
        // Four and two trials cannot show anything at 95%.
        assert_eq!(m.epsilon_lower_bound, 0.0);
        assert_eq!(m.member_correct, EventCount { hits: 3, trials: 4 });
        assert!(AttributeMetrics::from_correct(&[], &[true], 0.5, p).is_err());
    }
}
