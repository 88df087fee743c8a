//! Auditing any model from its scores: the threshold-attack metrics and Clopper–Pearson ε
//! lower bound of `dpml audit`, LiRA from logits, and the one-run canary bound.

use dpml_core::audit::driver::metrics::AttackMetrics;
use dpml_core::audit::driver::scores::RecordScores;
use dpml_core::audit::lira::{self as lira_core, OfflineStatistic, ReferenceScores, Variance};
use dpml_core::audit::{AuditError, bounds::EpsilonBoundParams, one_run};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3};
use pyo3::prelude::*;

use crate::guard;

type Roc<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// The metrics (JSON, the CLI's names) and the ROC's upper envelope (FPR, TPR arrays).
#[pyfunction]
#[pyo3(signature = (member_scores, nonmember_scores, delta, confidence, seed=None))]
fn audit_scores<'py>(
    py: Python<'py>,
    member_scores: PyReadonlyArray1<'py, f64>,
    nonmember_scores: PyReadonlyArray1<'py, f64>,
    delta: f64,
    confidence: f64,
    seed: Option<u64>,
) -> PyResult<(String, Roc<'py>)> {
    let mut rng = guard::rng(seed)?;
    let members = member_scores.as_slice()?;
    let non_members = nonmember_scores.as_slice()?;
    let (json, roc) = guard::run(py, || {
        let params = EpsilonBoundParams::new(delta, confidence)?;
        let mut m = AttackMetrics::from_scores(members, non_members, params, &mut rng)?;
        // The curve goes to numpy as two arrays: through JSON, a million points would cost
        // more than the audit itself.
        let roc = std::mem::take(&mut m.roc);
        let json = guard::json(&m).map_err(AuditError::Invalid)?;
        Ok::<_, AuditError>((json, roc))
    })?;
    let (fpr, tpr): (Vec<f64>, Vec<f64>) = roc.into_iter().unzip();
    Ok((json, (fpr.into_pyarray(py), tpr.into_pyarray(py))))
}

/// φ = log(p_y / (1 − p_y)) of each record from logits `[n, classes]`.
fn phi(logits: ndarray_view::View2<'_>, labels: &[u32]) -> Result<Vec<f64>, AuditError> {
    let rows: Vec<f32> = logits.iter().map(|&v| v as f32).collect();
    Ok(RecordScores::from_logits(&rows, logits.ncols(), labels)?.phi)
}

mod ndarray_view {
    /// A read-only 2-D view of a numpy array.
    pub type View2<'a> = numpy::ndarray::ArrayView2<'a, f64>;
}

/// LiRA scores (higher = member) of the target's records from its logits `[n, classes]`, the
/// reference models' logits `[K, n, classes]` and which records each trained on `[K, n]`.
#[pyfunction]
#[pyo3(signature = (target_logits, reference_logits, reference_in_mask, labels, online=true, per_example_variance=false))]
fn lira<'py>(
    py: Python<'py>,
    target_logits: PyReadonlyArray2<'py, f64>,
    reference_logits: PyReadonlyArray3<'py, f64>,
    reference_in_mask: PyReadonlyArray2<'py, bool>,
    labels: PyReadonlyArray1<'py, i64>,
    online: bool,
    per_example_variance: bool,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let target = target_logits.as_array();
    let refs = reference_logits.as_array();
    let mask = reference_in_mask.as_array();
    let labels = labels.as_array();
    let scores = guard::run(py, || {
        let labels = labels
            .iter()
            .map(|&y| {
                u32::try_from(y)
                    .map_err(|_| AuditError::Invalid(format!("labels must be >= 0, got {y}")))
            })
            .collect::<Result<Vec<u32>, _>>()?;
        if refs.shape()[0] != mask.nrows() {
            return Err(AuditError::Invalid(format!(
                "reference_in_mask must have one row per reference model ({}), got {}",
                refs.shape()[0],
                mask.nrows()
            )));
        }
        let target_phi = phi(target, &labels)?;
        let ref_phi = refs
            .outer_iter()
            .map(|model| phi(model, &labels))
            .collect::<Result<Vec<_>, _>>()?;
        let trained_on: Vec<Vec<bool>> = mask.outer_iter().map(|r| r.to_vec()).collect();
        let refs = ReferenceScores::from_models(&ref_phi, &trained_on)?;
        let variance = if per_example_variance {
            Variance::PerExample
        } else {
            Variance::Global
        };
        if online {
            lira_core::lira_online(&target_phi, &refs, variance)
        } else {
            lira_core::lira_offline(
                &target_phi,
                &refs,
                variance,
                OfflineStatistic::NegLogSurvival,
            )
        }
    })?;
    Ok(scores.into_pyarray(py))
}

/// The one-run audit (Steinke, Nasr, Jagielski 2023) from canary scores and inclusion bits:
/// JSON of the outcome.
#[pyfunction]
#[pyo3(signature = (scores, included, k_plus, k_minus, delta, confidence))]
fn one_run_audit(
    py: Python<'_>,
    scores: PyReadonlyArray1<'_, f64>,
    included: PyReadonlyArray1<'_, bool>,
    k_plus: usize,
    k_minus: usize,
    delta: f64,
    confidence: f64,
) -> PyResult<String> {
    let scores = scores.as_slice()?;
    let included = included.as_slice()?;
    guard::run(py, || {
        let r = one_run::audit(scores, included, k_plus, k_minus, delta, confidence)?;
        guard::json(&r).map_err(AuditError::Invalid)
    })
}

/// The one-run ε lower bound from counts: m canaries, r guesses, v correct.
#[pyfunction]
fn one_run_bound(
    py: Python<'_>,
    canaries: u64,
    guesses: u64,
    correct: u64,
    delta: f64,
    confidence: f64,
) -> PyResult<f64> {
    guard::run(py, || {
        one_run::epsilon_lower_bound(canaries, guesses, correct, delta, confidence)
    })
}

/// Registers the audit functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(audit_scores, m)?)?;
    m.add_function(wrap_pyfunction!(lira, m)?)?;
    m.add_function(wrap_pyfunction!(one_run_audit, m)?)?;
    m.add_function(wrap_pyfunction!(one_run_bound, m)?)?;
    Ok(())
}
