//! Accountants by name over privacy events given as JSON (the `PrivacyEvent` serde shape that
//! `dpml account --events` reads).

use dpml_core::account::{self, CalibrationAccountant};
use dpml_core::accounting::named::Named;
use dpml_core::accounting::pld::PldAccountant;
use dpml_core::accounting::{AccountingError, PrivacyEvent};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::guard;

fn event(json: &str) -> Result<PrivacyEvent, AccountingError> {
    serde_json::from_str(json)
        .map_err(|e| AccountingError::InvalidParameter(format!("invalid privacy event: {e}")))
}

/// ε of the event (JSON) at δ under the named accountant.
#[pyfunction]
fn epsilon(py: Python<'_>, event_json: &str, delta: f64, accountant: &str) -> PyResult<f64> {
    guard::run(py, || {
        Named::parse(accountant)?.epsilon(&event(event_json)?, delta)
    })
}

/// δ of the event (JSON) at ε under the named accountant.
#[pyfunction]
fn delta(py: Python<'_>, event_json: &str, epsilon: f64, accountant: &str) -> PyResult<f64> {
    guard::run(py, || {
        Named::parse(accountant)?.delta(&event(event_json)?, epsilon)
    })
}

/// (lower, upper) PLD bounds on ε at δ.
#[pyfunction]
fn pld_epsilon_bounds(py: Python<'_>, event_json: &str, delta: f64) -> PyResult<(f64, f64)> {
    guard::run(py, || {
        PldAccountant::pessimistic().epsilon_bounds(&event(event_json)?, delta)
    })
}

/// `dpml calibrate`'s result (JSON) for T Poisson-subsampled Gaussian steps, under the named
/// accountant or the library's default.
#[pyfunction]
#[pyo3(signature = (target_epsilon, delta, sampling_rate, steps, accountant=None))]
fn calibrate(
    py: Python<'_>,
    target_epsilon: f64,
    delta: f64,
    sampling_rate: f64,
    steps: u64,
    accountant: Option<&str>,
) -> PyResult<String> {
    let accountant: CalibrationAccountant = match accountant {
        Some(a) => a.parse().map_err(guard::value_error)?,
        None => CalibrationAccountant::default(),
    };
    let inputs = serde_json::json!({"sampling_rate": sampling_rate, "steps": steps});
    let v = guard::run(py, || {
        account::calibrate(
            target_epsilon,
            delta,
            sampling_rate,
            steps,
            accountant,
            inputs,
        )
    })?;
    Ok(v.to_string())
}

/// (ε, best order) of the event at δ under RDP (Opacus's `get_privacy_spent`).
#[pyfunction]
fn rdp_epsilon_and_order(py: Python<'_>, event_json: &str, delta: f64) -> PyResult<(f64, f64)> {
    let event = event(event_json).map_err(guard::value_error)?;
    guard::run(py, || account::rdp_epsilon_and_order(&event, delta))
}

/// (q, T) of `epochs` epochs of batches of `batch_size` over `dataset_size` records.
#[pyfunction]
fn steps_for_epochs(
    py: Python<'_>,
    epochs: f64,
    batch_size: u64,
    dataset_size: u64,
) -> PyResult<(f64, u64)> {
    guard::run(py, || {
        dpml_core::accounting::calibrate::steps_for_epochs(epochs, batch_size, dataset_size)
    })
}

/// β(α) of the event at each α under the named accountant.
#[pyfunction]
fn tradeoff<'py>(
    py: Python<'py>,
    event_json: &str,
    alphas: PyReadonlyArray1<'py, f64>,
    accountant: &str,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let alphas = alphas.as_array();
    let alphas: Vec<f64> = alphas.iter().copied().collect();
    let beta = guard::run(py, || {
        Named::parse(accountant)?.tradeoff(&event(event_json)?, &alphas)
    })?;
    Ok(beta.into_pyarray(py))
}

/// `n` type I errors log-spaced from 1e-6 to 1.
#[pyfunction]
fn alpha_grid(py: Python<'_>, n: usize) -> Bound<'_, PyArray1<f64>> {
    dpml_core::accounting::fdp::alpha_grid(n).into_pyarray(py)
}

/// Registers the accounting functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(epsilon, m)?)?;
    m.add_function(wrap_pyfunction!(delta, m)?)?;
    m.add_function(wrap_pyfunction!(pld_epsilon_bounds, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(rdp_epsilon_and_order, m)?)?;
    m.add_function(wrap_pyfunction!(steps_for_epochs, m)?)?;
    m.add_function(wrap_pyfunction!(tradeoff, m)?)?;
    m.add_function(wrap_pyfunction!(alpha_grid, m)?)?;
    Ok(())
}
