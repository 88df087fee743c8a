//! The exact noise samplers vectorised over arrays, the DP statistics of `dpml query`, and the
//! budget ledger. Each release returns its values with its privacy event (JSON).

use std::path::PathBuf;

use dpml_core::accounting::ledger::{Ledger, LedgerError, Spend};
use dpml_core::mechanisms::stats::{self, Noise, StatRelease};
use dpml_core::mechanisms::{
    DiscreteGaussianMechanism, DiscreteLaplaceMechanism, GaussianMechanism, LaplaceMechanism,
    MechanismError, PrivacyEvent, RandomizedResponse, gaussian::Calibration, vector,
};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::guard::{self, value_error};

type Released<'py, T> = (Bound<'py, PyArray1<T>>, String);

fn event_json(e: &PrivacyEvent) -> Result<String, MechanismError> {
    guard::json(e).map_err(MechanismError::InvalidParameter)
}

/// Releases each value with `release`, all under one mechanism whose event covers the whole
/// array (the sensitivity is that of the array-valued query).
fn release_all<'py, T, M>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, T>,
    seed: Option<u64>,
    mech: impl FnOnce() -> Result<M, MechanismError> + Send,
    release: impl Fn(&M, &mut dpml_core::mechanisms::DpRng, T) -> Result<T, MechanismError>
    + Send
    + Sync,
    event: impl FnOnce(&M) -> PrivacyEvent + Send,
) -> PyResult<Released<'py, T>>
where
    T: numpy::Element + Copy + Send + Sync,
    M: Send,
{
    let mut rng = guard::rng(seed)?;
    let values = values.as_array();
    let (out, json) = guard::run(py, || {
        let m = mech()?;
        let out = values
            .iter()
            .map(|&v| release(&m, &mut rng, v))
            .collect::<Result<Vec<T>, _>>()?;
        Ok::<_, MechanismError>((out, event_json(&event(&m))?))
    })?;
    Ok((out.into_pyarray(py), json))
}

/// Laplace noise calibrated to ε for an array-valued query of L1 sensitivity `sensitivity`
/// (the whole array's, its rounding to the noise grid included: [`vector::laplace`]).
#[pyfunction]
#[pyo3(signature = (values, sensitivity, epsilon, seed=None))]
fn laplace<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, f64>,
    sensitivity: f64,
    epsilon: f64,
    seed: Option<u64>,
) -> PyResult<Released<'py, f64>> {
    let dim = values.as_array().len().max(1);
    release_all(
        py,
        values,
        seed,
        || vector::laplace(sensitivity, dim, epsilon),
        |m, rng, v| m.release(rng, v),
        LaplaceMechanism::event,
    )
}

/// Analytic Gaussian noise calibrated to (ε, δ) for an array-valued query of L2 sensitivity
/// `sensitivity` (the whole array's, its rounding to the noise grid included:
/// [`vector::gaussian`]).
#[pyfunction]
#[pyo3(signature = (values, sensitivity, epsilon, delta, seed=None))]
fn gaussian<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, f64>,
    sensitivity: f64,
    epsilon: f64,
    delta: f64,
    seed: Option<u64>,
) -> PyResult<Released<'py, f64>> {
    let dim = values.as_array().len().max(1);
    release_all(
        py,
        values,
        seed,
        || vector::gaussian(sensitivity, dim, epsilon, delta, Calibration::Analytic),
        |m, rng, v| m.release(rng, v),
        GaussianMechanism::event,
    )
}

/// Exact discrete Laplace noise on integers (L1 sensitivity `sensitivity`).
#[pyfunction]
#[pyo3(signature = (values, sensitivity, epsilon, seed=None))]
fn discrete_laplace<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, i64>,
    sensitivity: u64,
    epsilon: f64,
    seed: Option<u64>,
) -> PyResult<Released<'py, i64>> {
    release_all(
        py,
        values,
        seed,
        || DiscreteLaplaceMechanism::new(sensitivity, epsilon),
        |m, rng, v| Ok(m.release(rng, v)),
        DiscreteLaplaceMechanism::event,
    )
}

/// Exact discrete Gaussian noise on integers (L2 sensitivity `sensitivity`).
#[pyfunction]
#[pyo3(signature = (values, sensitivity, epsilon, delta, seed=None))]
fn discrete_gaussian<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, i64>,
    sensitivity: u64,
    epsilon: f64,
    delta: f64,
    seed: Option<u64>,
) -> PyResult<Released<'py, i64>> {
    release_all(
        py,
        values,
        seed,
        || DiscreteGaussianMechanism::new(sensitivity, epsilon, delta),
        |m, rng, v| Ok(m.release(rng, v)),
        DiscreteGaussianMechanism::event,
    )
}

/// k-ary randomized response on category indices in 0..categories (each record's own
/// response: local DP, one event per record).
#[pyfunction]
#[pyo3(signature = (values, epsilon, categories, seed=None))]
fn randomized_response<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, i64>,
    epsilon: f64,
    categories: u32,
    seed: Option<u64>,
) -> PyResult<Released<'py, i64>> {
    release_all(
        py,
        values,
        seed,
        || RandomizedResponse::k_ary(epsilon, categories),
        |m, rng, v| {
            let i = usize::try_from(v).map_err(|_| {
                MechanismError::InvalidParameter(format!("category indices must be >= 0, got {v}"))
            })?;
            Ok(m.respond(rng, i)? as i64)
        },
        RandomizedResponse::event,
    )
}

/// A budget ledger (SQLite file), as the CLI's `--ledger` opens one.
#[pyclass(name = "Ledger", unsendable)]
pub struct PyLedger {
    inner: Ledger,
}

#[pymethods]
impl PyLedger {
    /// Opens the ledger at `path`, creating it with the budget (ε, δ) when missing; an existing
    /// one must have the same budget when one is given.
    #[new]
    #[pyo3(signature = (path, budget=None, budget_delta=None))]
    fn new(path: PathBuf, budget: Option<f64>, budget_delta: Option<f64>) -> PyResult<Self> {
        let inner = Ledger::open_or_create(&path, budget, budget_delta).map_err(|e| match e {
            // The library's message tells a shell user which command creates one.
            LedgerError::Missing { path } => value_error(format!(
                "ledger {} does not exist; create it with dpml.Ledger(path, budget=EPSILON) \
                 (and budget_delta=DELTA)",
                path.display()
            )),
            other => value_error(other),
        })?;
        Ok(PyLedger { inner })
    }

    /// The balance as JSON (the command line's `"ledger"` object).
    fn balance_json(&self) -> PyResult<String> {
        let b = self.inner.balance().map_err(value_error)?;
        Ok(dpml_core::ledger_json::balance(&b).to_string())
    }

    /// Every entry as JSON (as `dpml ledger show` lists them).
    fn entries_json(&self) -> PyResult<String> {
        let e = self.inner.entries().map_err(value_error)?;
        let list: Vec<serde_json::Value> = e.iter().map(dpml_core::ledger_json::entry).collect();
        Ok(serde_json::Value::from(list).to_string())
    }

    /// Records a spend (refused over budget); returns the balance after it as JSON.
    fn spend(&self, label: String, event_json: &str, epsilon: f64, delta: f64) -> PyResult<String> {
        let event: PrivacyEvent = serde_json::from_str(event_json)
            .map_err(|e| value_error(format!("invalid privacy event: {e}")))?;
        let b = self
            .inner
            .spend(&Spend {
                label,
                event,
                epsilon,
                delta,
            })
            .map_err(value_error)?;
        Ok(dpml_core::ledger_json::balance(&b).to_string())
    }
}

/// A DP statistic of `values` (count, sum, mean, histogram) with Laplace noise, or analytic
/// Gaussian noise when `delta` is given; bounds are declared, never taken from the data. With
/// a ledger the spend is recorded before the value is returned (refused over budget).
#[pyfunction]
#[pyo3(signature = (kind, values, epsilon, bounds=None, bins=10, delta=None, seed=None, ledger=None, label=None))]
#[allow(clippy::too_many_arguments)]
fn statistic(
    py: Python<'_>,
    kind: &str,
    values: PyReadonlyArray1<'_, f64>,
    epsilon: f64,
    bounds: Option<(f64, f64)>,
    bins: usize,
    delta: Option<f64>,
    seed: Option<u64>,
    ledger: Option<PyRef<'_, PyLedger>>,
    label: Option<String>,
) -> PyResult<String> {
    let mut rng = guard::rng(seed)?;
    let values = values.as_slice()?;
    let noise = delta.map_or(Noise::Laplace, |delta| Noise::Gaussian { delta });
    let release: StatRelease = guard::run(py, || {
        let bounds = || {
            bounds.ok_or_else(|| {
                MechanismError::InvalidParameter(format!(
                    "bounds (lo, hi) are required for {kind}: sensitivity comes from declared bounds, never from the data"
                ))
            })
        };
        match kind {
            "count" => stats::count(&mut rng, values, epsilon, noise),
            "sum" => stats::sum(&mut rng, values, bounds()?, epsilon, noise),
            "mean" => stats::mean(&mut rng, values, bounds()?, epsilon, noise),
            "histogram" => stats::histogram(&mut rng, values, bounds()?, bins, epsilon, noise),
            other => Err(MechanismError::InvalidParameter(format!(
                "statistic must be count, sum, mean or histogram, got {other:?}"
            ))),
        }
    })?;
    let mut out = serde_json::to_value(&release).map_err(value_error)?;
    if let Some(ledger) = ledger {
        let balance = ledger.spend(
            label.unwrap_or_else(|| format!("python {kind}")),
            &event_json(&release.event).map_err(value_error)?,
            release.epsilon,
            release.delta,
        )?;
        out["ledger"] = serde_json::from_str(&balance).map_err(value_error)?;
    }
    out["seeded"] = rng.is_seeded().into();
    Ok(out.to_string())
}

/// Registers the mechanism functions and the ledger class.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(laplace, m)?)?;
    m.add_function(wrap_pyfunction!(gaussian, m)?)?;
    m.add_function(wrap_pyfunction!(discrete_laplace, m)?)?;
    m.add_function(wrap_pyfunction!(discrete_gaussian, m)?)?;
    m.add_function(wrap_pyfunction!(randomized_response, m)?)?;
    m.add_function(wrap_pyfunction!(statistic, m)?)?;
    m.add_class::<PyLedger>()?;
    Ok(())
}
