//! Attribute inference (Yeom et al. 2018): given a record's label and every feature but a
//! sensitive one, guess the sensitive value from the target model's loss, and compare how often
//! the guess is right on the model's training records (members) and on held-out records
//! (non-members).
//!
//! The adversary tries each candidate value v of the sensitive column ([`Candidates`]: the
//! distinct values of a categorical column, or the medians of B quantile bins), writes it into
//! the record, computes the target model's cross-entropy `ℓ(v) = −log p(y | x, v)` on the true
//! label y, and guesses
//!
//! `v̂ = argmin_v ( ℓ(v) − log prior(v) )`,
//!
//! where `prior(v)` is the fraction of the population taking v (falling in v's bin). This is
//! Yeom et al.'s adversary weighting by the prior: the MAP guess if the model's probabilities
//! were the true likelihoods. Ties go to the first candidate. A guess is correct when it names
//! the true value (or the true value's bin). Without the model the best guess is the most
//! frequent candidate; its accuracy is the baseline.
//!
//! # Privacy
//! The attack releases nothing; it measures. If training is (ε, δ)-DP, the event "the guess is
//! correct" (a post-processing of the model) satisfies `P[correct | member] ≤
//! e^ε P[correct | non-member] + δ` for members and non-members drawn from the same
//! distribution, so `ε ≥ ln((p_in − δ)/p_out)`; [`crate::bounds::event`] turns the counts into
//! a bound holding with the stated confidence (Clopper–Pearson, the confidence split between
//! the two rates). The candidates and prior come from the whole population the audit records
//! are drawn from, never from which records are members, so the guess rule is the same in both
//! worlds.
//!
//! # Citations
//! S. Yeom, I. Giacomelli, M. Fredrikson, S. Jha, "Privacy Risk in Machine Learning: Analyzing
//! the Connection to Overfitting", IEEE CSF 2018, Section 4 (attribute inference; the
//! adversary using the model's loss and the prior of the sensitive value).
//!
//! # Errors
//! Image data sets, a sensitive column that is the label or not a feature (the valid names are
//! listed), a column with a single value, fewer than 2 bins, and logits of the wrong shape are
//! rejected with [`crate::AuditError`]s naming the value.

mod candidates;
mod infer;
mod query;

pub use candidates::{CandidateKind, Candidates, DEFAULT_BINS, MAX_CATEGORIES};
pub use infer::{AttributeMetrics, correct_guesses, guess};
pub use query::{column_values, sensitive_feature, substituted};

use dpml_data::Dataset;
use serde::Serialize;

use crate::bounds::EpsilonBoundParams;
use crate::error::{AuditError, Result};
use crate::logits;

/// The attack on one sensitive column of one population.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributeAttack {
    name: String,
    column: usize,
    candidates: Candidates,
}

/// What the attack found, in the JSON shape of `dpml audit`'s `"attribute"` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttributeReport {
    /// The sensitive feature's name.
    pub sensitive_column: String,
    /// Categorical values or quantile bins.
    pub candidate_kind: CandidateKind,
    /// The value tried for each candidate (the category or the bin's median).
    pub candidates: Vec<f64>,
    /// Each candidate's share of the population.
    pub prior: Vec<f64>,
    /// Accuracies, advantage and the ε lower bound.
    #[serde(flatten)]
    pub metrics: AttributeMetrics,
}

impl AttributeAttack {
    /// The attack on feature `sensitive_column` of `population` (the records the audited ones
    /// are drawn from, which fix the candidates and prior). `label_column` is the label's
    /// name, if known, to refuse it by name; `bins` applies to a non-categorical column.
    ///
    /// # Errors
    /// As [`sensitive_feature`] and [`Candidates::from_population`].
    pub fn new(
        population: &Dataset,
        sensitive_column: &str,
        label_column: Option<&str>,
        bins: usize,
    ) -> Result<Self> {
        let column = sensitive_feature(population, sensitive_column, label_column)?;
        let candidates = Candidates::from_population(&column_values(population, column), bins)?;
        Ok(Self {
            name: sensitive_column.to_string(),
            column,
            candidates,
        })
    }

    /// The sensitive feature's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sensitive feature's index.
    pub fn column(&self) -> usize {
        self.column
    }

    /// The candidates and their prior.
    pub fn candidates(&self) -> &Candidates {
        &self.candidates
    }

    /// The records to run through the target model: each record of `records` once per
    /// candidate (see [`substituted`]), on the raw feature scale.
    ///
    /// # Errors
    /// As [`substituted`].
    pub fn queries(&self, records: &Dataset) -> Result<Dataset> {
        substituted(records, self.column, self.candidates.values())
    }

    /// The candidate each record really takes.
    pub fn truth(&self, records: &Dataset) -> Vec<usize> {
        column_values(records, self.column)
            .into_iter()
            .map(|v| self.candidates.index_of(v))
            .collect()
    }

    /// Whether the guess for each record of `records` is right, from the target's logits on
    /// [`AttributeAttack::queries`] (row-major `[records · candidates, classes]`).
    ///
    /// # Errors
    /// [`AuditError::Invalid`] for logits of the wrong length or labels out of range;
    /// non-finite logits.
    pub fn correct_from_logits(
        &self,
        query_logits: &[f32],
        classes: usize,
        records: &Dataset,
    ) -> Result<Vec<bool>> {
        let c = self.candidates.len();
        let expected = records.n * c * classes;
        if classes < 2 || query_logits.len() != expected {
            return Err(AuditError::Invalid(format!(
                "expected {} query rows of {classes} logits ({expected} values, at least 2 \
                 classes), got {} values",
                records.n * c,
                query_logits.len()
            )));
        }
        let losses = query_logits
            .chunks(classes)
            .enumerate()
            .map(|(row, z)| {
                let z: Vec<f64> = z.iter().map(|&v| f64::from(v)).collect();
                logits::cross_entropy(&z, records.y[row / c] as usize)
            })
            .collect::<Result<Vec<f64>>>()?;
        correct_guesses(&losses, &self.truth(records), &self.candidates)
    }

    /// The attack's report on `records`, of which the first `members` are the target's
    /// training records and the rest non-members, from the target's logits on
    /// [`AttributeAttack::queries`]`(records)`.
    ///
    /// # Errors
    /// As [`AttributeAttack::correct_from_logits`] and [`AttributeMetrics::from_correct`]
    /// (both sides must hold records).
    pub fn evaluate(
        &self,
        query_logits: &[f32],
        classes: usize,
        records: &Dataset,
        members: usize,
        params: EpsilonBoundParams,
    ) -> Result<AttributeReport> {
        let correct = self.correct_from_logits(query_logits, classes, records)?;
        let (m, n) = correct.split_at(members.min(correct.len()));
        let top = self.candidates.most_frequent();
        let truth = self.truth(records);
        let baseline = truth.iter().filter(|&&t| t == top).count() as f64 / truth.len() as f64;
        Ok(AttributeReport {
            sensitive_column: self.name.clone(),
            candidate_kind: self.candidates.kind(),
            candidates: self.candidates.values().to_vec(),
            prior: self.candidates.prior().to_vec(),
            metrics: AttributeMetrics::from_correct(m, n, baseline, params)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpml_mechanisms::DpRng;

    const LN3: f64 = 1.098_612_288_668_109_8;

    /// `n` records of one noise feature and a binary sensitive feature `s` (uniform), label 0.
    fn table(n: usize, rng: &mut DpRng) -> Dataset {
        Dataset {
            name: "rr".into(),
            x: (0..n)
                .flat_map(|_| [rng.uniform_f64() as f32, rng.below(2) as f32])
                .collect(),
            n,
            record_shape: vec![2],
            y: vec![0; n],
            n_classes: 2,
            feature_names: vec!["noise".into(), "s".into()],
            class_names: vec!["a".into(), "b".into()],
            feature_range: None,
        }
    }

    /// A synthetic "model" that is (ln 3, 0)-DP with respect to each record: it holds
    /// r = RR(s) for a member (s kept with probability 3/4, flipped otherwise) and r = RR(0)
    /// for a non-member, and answers a query with candidate v with logits (0, 0) when v = r
    /// (loss ln 2) and (−5, 5) otherwise (loss ≈ 10). Any event's probability changes by at
    /// most a factor 3 when the record is added, so no valid bound may exceed ln 3.
    fn rr_logits(records: &Dataset, members: usize, rng: &mut DpRng) -> Vec<f32> {
        let mut out = Vec::new();
        for i in 0..records.n {
            let s = records.row(i)[1] as u32;
            let base = if i < members { s } else { 0 };
            let r = if rng.uniform_f64() < 0.75 {
                base
            } else {
                1 - base
            };
            for v in 0..2u32 {
                out.extend_from_slice(if v == r { &[0.0, 0.0] } else { &[-5.0, 5.0] });
            }
        }
        out
    }

    #[test]
    fn bound_on_a_randomized_response_model_never_exceeds_ln3() {
        // Members guess right with probability 3/4, non-members with 1/2 (RR(0) is right for
        // s = 0 with 3/4 and for s = 1 with 1/4): the bound approaches ln 1.5 < ln 3.
        let params = EpsilonBoundParams::new(0.0, 0.95).unwrap();
        let mut means = Vec::new();
        for n in [200usize, 2_000, 20_000] {
            let mut sum = 0.0;
            for seed in 0..5 {
                let mut rng = DpRng::seeded(n as u64 * 10 + seed);
                let data = table(2 * n, &mut rng);
                let attack = AttributeAttack::new(&data, "s", None, 5).unwrap();
                assert_eq!(attack.candidates().values(), &[0.0, 1.0]);
                let logits = rr_logits(&data, n, &mut rng);
                let r = attack.evaluate(&logits, 2, &data, n, params).unwrap();
                assert!(r.metrics.epsilon_lower_bound <= LN3, "n={n}: {r:?}");
                sum += r.metrics.epsilon_lower_bound;
            }
            means.push(sum / 5.0);
        }
        assert!(means.windows(2).all(|w| w[0] < w[1]), "{means:?}");
        // At n = 20,000 per side the one-sided 97.5% bounds lie within
        // 1.96·sqrt(0.25/20000) ≈ 0.0069 of the rates, plus 3 sd (0.0106) of sampling error:
        // p_in ≥ 0.732 and p_out ≤ 0.518 give ε ≥ ln(0.732/0.518) ≈ 0.346.
        assert!(
            means[2] > 0.346 && means[2] < 1.5f64.ln() + 0.05,
            "{means:?}"
        );
    }

    #[test]
    fn report_fields_and_baseline() {
        let mut rng = DpRng::seeded(3);
        let data = table(100, &mut rng);
        let attack = AttributeAttack::new(&data, "s", Some("label"), 5).unwrap();
        let logits = rr_logits(&data, 50, &mut rng);
        let p = EpsilonBoundParams::new(1e-5, 0.95).unwrap();
        let r = attack.evaluate(&logits, 2, &data, 50, p).unwrap();
        let top = attack.candidates().most_frequent();
        let truth = attack.truth(&data);
        let expect = truth.iter().filter(|&&t| t == top).count() as f64 / 100.0;
        assert_eq!(r.metrics.baseline_accuracy, expect);
        assert_eq!(r.metrics.member_correct.trials, 50);
        assert_eq!(r.sensitive_column, "s");
        let v = serde_json::to_value(&r).unwrap();
        for key in [
            "sensitive_column",
            "candidates",
            "member_accuracy",
            "nonmember_accuracy",
            "baseline_accuracy",
            "advantage",
            "epsilon_lower_bound",
        ] {
            assert!(v.get(key).is_some(), "{key} missing: {v}");
        }
        let e = attack.evaluate(&logits[1..], 2, &data, 50, p).unwrap_err();
        assert!(e.to_string().contains("got 399 values"), "{e}");
    }
}
