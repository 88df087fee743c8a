//! The values an attribute-inference attacker tries for the sensitive column, and their prior.
//!
//! A column with at most [`MAX_CATEGORIES`] distinct values over the population is
//! categorical: every distinct value is a candidate, and a guess is correct when it equals the
//! true value. Otherwise the column is cut into B quantile bins over the population (fewer when
//! ties make quantiles coincide), each represented by the median of the population values in
//! it, and a guess is correct when it names the true value's bin. The prior of a candidate is
//! the fraction of the population that takes it (falls in its bin).

use serde::Serialize;

use crate::error::{AuditError, Result};
use crate::validate;

/// Columns with at most this many distinct values are treated as categorical.
pub const MAX_CATEGORIES: usize = 10;

/// Quantile bins of a continuous column when the caller does not choose.
pub const DEFAULT_BINS: usize = 5;

/// How the candidates were formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateKind {
    /// Every distinct value of the column.
    Categorical,
    /// Quantile bins, each represented by its median.
    QuantileBins,
}

/// The candidate values of a sensitive column with their prior.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidates {
    kind: CandidateKind,
    values: Vec<f64>,
    prior: Vec<f64>,
    /// For bins: the lower edge of bins 1.., strictly increasing (bin b holds
    /// `edges[b − 1] ≤ v < edges[b]`). Empty for a categorical column.
    edges: Vec<f64>,
}

impl Candidates {
    /// The candidates of a column whose values over the population are `column`; `bins` is
    /// used when the column has more than [`MAX_CATEGORIES`] distinct values.
    ///
    /// # Errors
    /// [`AuditError::Empty`] / [`AuditError::NonFinite`] for an empty or non-finite column,
    /// [`AuditError::Invalid`] for `bins < 2` or a column with a single value (nothing to
    /// infer).
    pub fn from_population(column: &[f64], bins: usize) -> Result<Self> {
        validate::finite_nonempty("sensitive column", column)?;
        if bins < 2 {
            return Err(AuditError::Invalid(format!(
                "attribute bins must be at least 2, got {bins}"
            )));
        }
        let mut sorted = column.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mut distinct = sorted.clone();
        distinct.dedup();
        if distinct.len() < 2 {
            return Err(AuditError::Invalid(format!(
                "sensitive column has a single value ({}) over the population: nothing to infer",
                distinct[0]
            )));
        }
        if distinct.len() <= MAX_CATEGORIES {
            let n = sorted.len() as f64;
            let prior = distinct
                .iter()
                .map(|v| sorted.iter().filter(|x| *x == v).count() as f64 / n)
                .collect();
            return Ok(Self {
                kind: CandidateKind::Categorical,
                values: distinct,
                prior,
                edges: Vec::new(),
            });
        }
        Ok(Self::quantile_bins(&sorted, bins))
    }

    /// Quantile bins of sorted, finite values with at least 2 distinct ones.
    fn quantile_bins(sorted: &[f64], bins: usize) -> Self {
        let n = sorted.len();
        let mut edges: Vec<f64> = Vec::with_capacity(bins - 1);
        for k in 1..bins {
            let e = sorted[k * n / bins];
            if e > sorted[0] && edges.last().is_none_or(|&last| e > last) {
                edges.push(e);
            }
        }
        // Every edge is a population value, so every bin holds at least one value.
        let mut members: Vec<Vec<f64>> = vec![Vec::new(); edges.len() + 1];
        for &v in sorted {
            members[edges.partition_point(|&e| e <= v)].push(v);
        }
        let values = members.iter().map(|m| median(m)).collect();
        let prior = members.iter().map(|m| m.len() as f64 / n as f64).collect();
        Self {
            kind: CandidateKind::QuantileBins,
            values,
            prior,
            edges,
        }
    }

    /// Categorical or binned.
    pub fn kind(&self) -> CandidateKind {
        self.kind
    }

    /// The value substituted for each candidate (the category, or the bin's median).
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The fraction of the population taking each candidate (all > 0, summing to 1).
    pub fn prior(&self) -> &[f64] {
        &self.prior
    }

    /// `ln prior`, the attacker's weight of each candidate.
    pub fn log_prior(&self) -> Vec<f64> {
        self.prior.iter().map(|p| p.ln()).collect()
    }

    /// Number of candidates (at least 2).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Always false: a candidate set holds at least 2 candidates.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The candidate a true value counts as: the equal (else nearest) category, or the value's
    /// bin. Values outside the population's range fall in the first or last bin.
    pub fn index_of(&self, value: f64) -> usize {
        match self.kind {
            CandidateKind::QuantileBins => self.edges.partition_point(|&e| e <= value),
            CandidateKind::Categorical => self
                .values
                .iter()
                .enumerate()
                .min_by(|a, b| (a.1 - value).abs().total_cmp(&(b.1 - value).abs()))
                .map_or(0, |(i, _)| i),
        }
    }

    /// The most frequent candidate (the first of equals): the guess of an attacker without
    /// the model.
    pub fn most_frequent(&self) -> usize {
        self.prior
            .iter()
            .enumerate()
            .fold((0, f64::NEG_INFINITY), |best, (i, &p)| {
                if p > best.1 { (i, p) } else { best }
            })
            .0
    }
}

/// The median of sorted values (the mean of the middle two for an even count).
fn median(sorted: &[f64]) -> f64 {
    let m = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[m]
    } else {
        0.5 * (sorted[m - 1] + sorted[m])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_distinct_values_are_categories_with_their_frequencies() {
        let c = Candidates::from_population(&[2.0, 1.0, 2.0, 3.0, 2.0, 1.0], 5).unwrap();
        assert_eq!(c.kind(), CandidateKind::Categorical);
        assert_eq!(c.values(), &[1.0, 2.0, 3.0]);
        assert_eq!(c.prior(), &[2.0 / 6.0, 3.0 / 6.0, 1.0 / 6.0]);
        assert_eq!(c.most_frequent(), 1);
        assert_eq!(
            (c.index_of(3.0), c.index_of(1.0), c.index_of(2.4)),
            (2, 0, 1)
        );
    }

    #[test]
    fn many_distinct_values_are_quantile_bins_with_medians() {
        // 0..100 in 5 bins: edges at 20, 40, 60, 80; bin medians 9.5, 29.5, …; 20% each.
        let col: Vec<f64> = (0..100).rev().map(f64::from).collect();
        let c = Candidates::from_population(&col, 5).unwrap();
        assert_eq!(c.kind(), CandidateKind::QuantileBins);
        assert_eq!(c.values(), &[9.5, 29.5, 49.5, 69.5, 89.5]);
        assert!(c.prior().iter().all(|&p| (p - 0.2).abs() < 1e-15));
        assert_eq!(c.index_of(19.0), 0);
        assert_eq!(c.index_of(20.0), 1);
        assert_eq!(c.index_of(99.0), 4);
        assert_eq!((c.index_of(-5.0), c.index_of(1e9)), (0, 4));
        // Each median falls in its own bin.
        for (i, &v) in c.values().iter().enumerate() {
            assert_eq!(c.index_of(v), i);
        }
    }

    #[test]
    fn ties_merge_bins() {
        // Half of the 20 values are 0: the quantile edges at positions 4 and 8 are 0 and
        // dropped, leaving [0, 3), [3, 7), [7, ∞) holding 12, 4 and 4 values.
        let mut col = vec![0.0; 10];
        col.extend((1..=10).map(f64::from));
        let c = Candidates::from_population(&col, 5).unwrap();
        assert_eq!(c.kind(), CandidateKind::QuantileBins);
        assert_eq!(c.len(), 3, "{c:?}");
        assert_eq!(c.prior(), &[0.6, 0.2, 0.2]);
        assert_eq!(c.values()[0], 0.0);
        assert_eq!(c.most_frequent(), 0);
    }

    #[test]
    fn bad_input_is_named() {
        let e = Candidates::from_population(&[1.0, 2.0], 1).unwrap_err();
        assert!(
            e.to_string().contains("bins must be at least 2, got 1"),
            "{e}"
        );
        let e = Candidates::from_population(&[4.0, 4.0], 5).unwrap_err();
        assert!(e.to_string().contains("single value (4)"), "{e}");
        let e = Candidates::from_population(&[1.0, f64::NAN], 5).unwrap_err();
        assert!(e.to_string().contains("sensitive column[1]"), "{e}");
        assert!(Candidates::from_population(&[], 5).is_err());
    }
}
