//! Output perturbation of a classifier's predictions: Laplace noise on each predicted
//! probability vector, then argmax ("report noisy max").

use dpml_mechanisms::{DpRng, PrivacyEvent};
use dpml_nn::Tensor;

use super::error::{PerturbationError, invalid};
use super::vector_laplace::VectorLaplace;

/// The L1 sensitivity of a probability vector: any two points of the probability simplex are
/// at L1 distance at most 2.
pub const PROBABILITY_L1_SENSITIVITY: f64 = 2.0;

/// Row-wise softmax of `logits` `[n, k]` in f64 (stable: the row maximum is subtracted).
pub fn softmax_rows(logits: &Tensor) -> Vec<f64> {
    let k = logits.record_len();
    let mut out = Vec::with_capacity(logits.batch() * k);
    for i in 0..logits.batch() {
        let z = logits.record(i);
        let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let start = out.len();
        out.extend(z.iter().map(|&v| f64::from(v - m).exp()));
        let s: f64 = out[start..].iter().sum();
        out[start..].iter_mut().for_each(|p| *p /= s);
    }
    out
}

/// Answers classification queries with ε-DP labels: Laplace noise of scale 2/ε on every
/// coordinate of the model's predicted probability vector, and the argmax of the noisy vector
/// is released.
///
/// # Privacy
/// The released label for one query is ε-DP with respect to ANY change of the model's
/// probability vector for that query: the vector lies in the simplex, whose L1 diameter is 2,
/// so Laplace(2/ε) per coordinate ([`VectorLaplace`]) makes the noisy vector ε-DP and its argmax
/// is post-processing. In particular it is ε-DP with respect to the training data, whatever
/// the learner was (even a non-private one), because any change of the training set changes
/// the probability vector by at most 2 in L1. What is protected is the training data as seen
/// through this answer; the query's own features are not protected (they are the querier's),
/// the model file itself must stay secret (releasing it releases everything), and every answer
/// costs ε: q answers compose to q·ε (basic composition; [`OutputPerturbation::event_for`]
/// gives the event for an accountant). With 2/ε noise on probabilities in [0, 1], utility is
/// only good for ε of order 1 or larger per query.
///
/// # Citations
/// C. Dwork, A. Roth, *The Algorithmic Foundations of Differential Privacy*, 2014, §3.3
/// (Laplace mechanism) and Claim 3.9 (report noisy max); K. Chaudhuri, C. Monteleoni,
/// A. Sarwate, *Differentially Private Empirical Risk Minimization*, JMLR 2011 (output
/// perturbation).
///
/// # Errors
/// [`PerturbationError::Invalid`] for ε not finite and > 0, fewer than 2 classes, or a row
/// that is not a probability vector (negative, NaN, or not summing to 1 within 1e-6).
#[derive(Debug, Clone)]
pub struct OutputPerturbation {
    mech: VectorLaplace,
    classes: usize,
}

impl OutputPerturbation {
    /// Output perturbation with `epsilon_per_query` for `classes`-class probability vectors.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn new(epsilon_per_query: f64, classes: usize) -> Result<Self, PerturbationError> {
        if classes < 2 {
            return Err(invalid(format!(
                "output perturbation needs at least 2 classes, got {classes}"
            )));
        }
        super::error::check_epsilon("output epsilon", epsilon_per_query)?;
        Ok(Self {
            mech: VectorLaplace::new(PROBABILITY_L1_SENSITIVITY, classes, epsilon_per_query)?,
            classes,
        })
    }

    /// ε of one answered query.
    pub fn epsilon_per_query(&self) -> f64 {
        self.mech.epsilon()
    }

    /// The Laplace scale on each probability (≥ 2/ε).
    pub fn scale(&self) -> f64 {
        self.mech.scale()
    }

    /// The privacy cost of `queries` answers (one Laplace event repeated).
    pub fn event_for(&self, queries: u64) -> PrivacyEvent {
        self.mech.event().repeated(queries)
    }

    /// ε of `queries` answers by basic composition, rounded up.
    pub fn epsilon_for(&self, queries: u64) -> f64 {
        let e = self.epsilon_per_query() * queries as f64;
        e + e * 4.0 * f64::EPSILON
    }

    /// The noisy-argmax label of every row of `probs` (`[n × classes]`, row-major).
    ///
    /// # Errors
    /// See the type-level `# Errors`; nothing is drawn when any row is invalid.
    pub fn release_labels(
        &self,
        rng: &mut DpRng,
        probs: &[f64],
    ) -> Result<Vec<usize>, PerturbationError> {
        self.check_rows(probs)?;
        let k = self.classes;
        let mut noisy = Vec::with_capacity(k);
        probs
            .chunks_exact(k)
            .map(|row| {
                self.mech.release_into(rng, row, &mut noisy)?;
                Ok((0..k).fold(0, |b, j| if noisy[j] > noisy[b] { j } else { b }))
            })
            .collect()
    }

    /// Checks that `probs` is rows of `classes` probabilities (finite, ≥ 0, summing to 1
    /// within 1e-6), without drawing anything: callers that charge a budget check first, so a
    /// broken model (NaN outputs) is refused before any privacy is spent.
    ///
    /// # Errors
    /// [`PerturbationError::Invalid`] naming the first bad row and its values.
    pub fn check_rows(&self, probs: &[f64]) -> Result<(), PerturbationError> {
        let k = self.classes;
        if !probs.len().is_multiple_of(k) {
            return Err(invalid(format!(
                "{} probabilities are not rows of {k} classes",
                probs.len()
            )));
        }
        for (i, row) in probs.chunks_exact(k).enumerate() {
            let sum: f64 = row.iter().sum();
            if row.iter().any(|p| !(p.is_finite() && *p >= 0.0)) || (sum - 1.0).abs() > 1e-6 {
                return Err(invalid(format!(
                    "row {i} is not a probability vector: {row:?}"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_rows_sum_to_one() {
        let t = Tensor::from_vec(&[2, 3], vec![1.0, 2.0, 3.0, 100.0, 0.0, -100.0]).unwrap();
        let p = softmax_rows(&t);
        assert!((p[..3].iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(p[2] > p[1] && p[1] > p[0]);
        assert!((p[3] - 1.0).abs() < 1e-12);
    }

    #[test]
    fn noisy_argmax_matches_its_distribution() {
        // Probability vector (0.9, 0.1) with ε = 2 (b = 1): the released label is 0 iff
        // L₀ − L₁ > −0.8, where L₀ − L₁ is the difference of two Laplace(1) variables, whose CDF
        // is F(x) = 1 − (1/2)e^{−x}(1 + x/2) for x ≥ 0; P[label 0] = F(0.8).
        // n = 20 000 draws: sd = sqrt(p(1−p)/n) ≤ 0.0036; tolerance 4.5 sd ≈ 0.016.
        let m = OutputPerturbation::new(2.0, 2).unwrap();
        let n = 20_000;
        let probs: Vec<f64> = (0..n).flat_map(|_| [0.9, 0.1]).collect();
        let labels = m.release_labels(&mut DpRng::seeded(3), &probs).unwrap();
        let share = labels.iter().filter(|&&l| l == 0).count() as f64 / n as f64;
        let b = m.scale();
        let x = 0.8 / b;
        let expected = 1.0 - 0.5 * (-x).exp() * (1.0 + x / 2.0);
        let sd = (expected * (1.0 - expected) / n as f64).sqrt();
        assert!((share - expected).abs() < 4.5 * sd, "{share} vs {expected}");
        assert_eq!(m.event_for(5), m.mech.event().repeated(5));
        assert!(m.epsilon_for(5) >= 10.0 && m.epsilon_for(5) < 10.0 + 1e-9);
    }

    #[test]
    fn bad_inputs_are_refused() {
        assert!(
            OutputPerturbation::new(f64::NAN, 10)
                .unwrap_err()
                .to_string()
                .contains("output epsilon must be finite and > 0, got NaN")
        );
        assert!(
            OutputPerturbation::new(1.0, 1)
                .unwrap_err()
                .to_string()
                .contains("got 1")
        );
        let m = OutputPerturbation::new(1.0, 2).unwrap();
        assert!(
            m.release_labels(&mut DpRng::seeded(1), &[0.5, 0.6])
                .unwrap_err()
                .to_string()
                .contains("row 0")
        );
        assert!(
            m.release_labels(&mut DpRng::seeded(1), &[0.5, 0.5, 1.0])
                .is_err()
        );
    }
}
