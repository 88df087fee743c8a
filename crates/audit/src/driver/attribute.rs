//! Attribute inference inside an audit: the target model is scored on the audit records AND on
//! the attacker's substituted copies of them (one per candidate of the sensitive column) in
//! one pass, so the attack needs no extra model and works on cached models too.
//!
//! The copies are made on the raw feature scale; the target's saved input transform (its
//! public normalisation) is applied to them when they are evaluated, exactly as to the real
//! records.

use dpml_data::Dataset;

use super::error::{DriverError, Result};
use super::models::Scored;
use crate::attribute::{AttributeAttack, AttributeReport, DEFAULT_BINS};
use crate::bounds::EpsilonBoundParams;

/// What the attribute-inference attack needs besides the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeSettings {
    /// The sensitive feature, by its name in the data set's feature names.
    pub sensitive_column: String,
    /// The label column's name when known (e.g. `target` for the embedded tables), so that
    /// naming it as the sensitive column is refused by name.
    pub label_column: Option<String>,
    /// Quantile bins for a column with more than
    /// [`crate::attribute::MAX_CATEGORIES`] distinct values.
    pub bins: usize,
}

impl AttributeSettings {
    /// Settings for `sensitive_column` with [`DEFAULT_BINS`] bins and no label name.
    pub fn new(sensitive_column: impl Into<String>) -> Self {
        Self {
            sensitive_column: sensitive_column.into(),
            label_column: None,
            bins: DEFAULT_BINS,
        }
    }

    /// The attack on `population`.
    ///
    /// # Errors
    /// As [`AttributeAttack::new`]: an image data set, the label or an unknown column (valid
    /// names listed), a single-valued column, fewer than 2 bins.
    pub fn attack(&self, population: &Dataset) -> Result<AttributeAttack> {
        Ok(AttributeAttack::new(
            population,
            &self.sensitive_column,
            self.label_column.as_deref(),
            self.bins,
        )?)
    }
}

/// The records the target is evaluated on: `scored` (the audit records, with LiRA's
/// augmented copies when it runs), then the attack's queries on the audit records.
///
/// # Errors
/// As [`AttributeAttack::queries`].
pub(crate) fn target_eval_set(
    attack: &AttributeAttack,
    scored: &Dataset,
    audit_set: &Dataset,
) -> Result<Dataset> {
    let queries = attack.queries(audit_set)?;
    let mut out = scored.clone();
    out.x.extend_from_slice(&queries.x);
    out.y.extend_from_slice(&queries.y);
    out.n += queries.n;
    Ok(out)
}

/// Splits the query logits off the target's (leaving its logits on its first `scored_rows`
/// rows, see [`target_eval_set`]) and runs the attack on them; the first `members` audit
/// records are the target's.
///
/// # Errors
/// As [`AttributeAttack::evaluate`]; [`DriverError::Invalid`] when the target's logits are
/// shorter than `scored_rows`.
pub(crate) fn run_on_target(
    attack: &AttributeAttack,
    target: &mut Scored,
    scored_rows: usize,
    audit_set: &Dataset,
    members: usize,
    params: EpsilonBoundParams,
) -> Result<AttributeReport> {
    let own = scored_rows * target.classes;
    if target.logits.len() < own {
        return Err(DriverError::Invalid(format!(
            "target logits hold {} values, fewer than the {own} of the scored records",
            target.logits.len()
        )));
    }
    let queries = target.logits.split_off(own);
    Ok(attack.evaluate(&queries, target.classes, audit_set, members, params)?)
}
