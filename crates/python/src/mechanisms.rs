//! The exact noise samplers vectorised over arrays and the DP statistics of `dpml query`.
//! Each release returns its values with its privacy event (JSON); with a ledger it is charged
//! through `dpml-core`'s budget module as the command line charges one: checked before any
//! noise is drawn, recorded before the values are returned.

use dpml_core::budget::{self, Charge, Neighbouring};
use dpml_core::mechanisms::stats::{self, Noise, StatRelease};
use dpml_core::mechanisms::{
    DiscreteGaussianMechanism, DiscreteLaplaceMechanism, GaussianMechanism, LaplaceMechanism,
    MechanismError, PrivacyEvent, RandomizedResponse, gaussian::Calibration, vector,
};
use dpml_core::train::MEMORY_DATASET;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::guard::{self, value_error};
use crate::ledger::{PyLedger, inner};

type Released<'py, T> = (Bound<'py, PyArray1<T>>, String);

fn event_json(e: &PrivacyEvent) -> Result<String, MechanismError> {
    guard::json(e).map_err(MechanismError::InvalidParameter)
}

/// What a mechanism's release costs: its name (the ledger's command) and its (ε, δ) by itself.
struct Cost {
    command: &'static str,
    /// What the values are: records' values of a declared sensitivity, or answers each
    /// randomised on its own.
    neighbouring: Neighbouring,
    epsilon: f64,
    delta: f64,
}

/// Releases each value with `release`, all under one mechanism whose event covers the whole
/// array (the sensitivity is that of the array-valued query); with a `ledger`, charged as
/// `cost` says (as `cost.command` on records in memory) before the values are returned.
#[allow(clippy::too_many_arguments)]
fn release_all<'py, T, M>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, T>,
    seed: Option<u64>,
    ledger: Option<PyRef<'py, PyLedger>>,
    cost: Cost,
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
    let ledger = inner(&ledger, seed)?;
    let (out, json) = guard::run(py, || {
        let m = mech()?;
        let event = event(&m);
        let charge = Charge::of(
            cost.command,
            MEMORY_DATASET,
            event.clone(),
            cost.epsilon,
            cost.delta,
        )
        .under(cost.neighbouring);
        let (out, _) = budget::charged(ledger, &charge, || {
            Ok(values
                .iter()
                .map(|&v| release(&m, &mut rng, v))
                .collect::<Result<Vec<T>, _>>()?)
        })?;
        Ok::<_, dpml_core::Error>((out, event_json(&event)?))
    })?;
    Ok((out.into_pyarray(py), json))
}

/// Laplace noise calibrated to ε for an array-valued query of L1 sensitivity `sensitivity`
/// (the whole array's, its rounding to the noise grid included: [`vector::laplace`]).
#[pyfunction]
#[pyo3(signature = (values, sensitivity, epsilon, seed=None, ledger=None))]
fn laplace<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, f64>,
    sensitivity: f64,
    epsilon: f64,
    seed: Option<u64>,
    ledger: Option<PyRef<'py, PyLedger>>,
) -> PyResult<Released<'py, f64>> {
    let dim = values.as_array().len().max(1);
    release_all(
        py,
        values,
        seed,
        ledger,
        Cost {
            command: "laplace",
            neighbouring: Neighbouring::Record,
            epsilon,
            delta: 0.0,
        },
        || vector::laplace(sensitivity, dim, epsilon),
        |m, rng, v| m.release(rng, v),
        LaplaceMechanism::event,
    )
}

/// Analytic Gaussian noise calibrated to (ε, δ) for an array-valued query of L2 sensitivity
/// `sensitivity` (the whole array's, its rounding to the noise grid included:
/// [`vector::gaussian`]).
#[pyfunction]
#[pyo3(signature = (values, sensitivity, epsilon, delta, seed=None, ledger=None))]
fn gaussian<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, f64>,
    sensitivity: f64,
    epsilon: f64,
    delta: f64,
    seed: Option<u64>,
    ledger: Option<PyRef<'py, PyLedger>>,
) -> PyResult<Released<'py, f64>> {
    let dim = values.as_array().len().max(1);
    release_all(
        py,
        values,
        seed,
        ledger,
        Cost {
            command: "gaussian",
            neighbouring: Neighbouring::Record,
            epsilon,
            delta,
        },
        || vector::gaussian(sensitivity, dim, epsilon, delta, Calibration::Analytic),
        |m, rng, v| m.release(rng, v),
        GaussianMechanism::event,
    )
}

/// Exact discrete Laplace noise on integers (L1 sensitivity `sensitivity`).
#[pyfunction]
#[pyo3(signature = (values, sensitivity, epsilon, seed=None, ledger=None))]
fn discrete_laplace<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, i64>,
    sensitivity: u64,
    epsilon: f64,
    seed: Option<u64>,
    ledger: Option<PyRef<'py, PyLedger>>,
) -> PyResult<Released<'py, i64>> {
    release_all(
        py,
        values,
        seed,
        ledger,
        Cost {
            command: "discrete-laplace",
            neighbouring: Neighbouring::Record,
            epsilon,
            delta: 0.0,
        },
        || DiscreteLaplaceMechanism::new(sensitivity, epsilon),
        |m, rng, v| Ok(m.release(rng, v)),
        DiscreteLaplaceMechanism::event,
    )
}

/// Exact discrete Gaussian noise on integers (L2 sensitivity `sensitivity`).
#[pyfunction]
#[pyo3(signature = (values, sensitivity, epsilon, delta, seed=None, ledger=None))]
fn discrete_gaussian<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, i64>,
    sensitivity: u64,
    epsilon: f64,
    delta: f64,
    seed: Option<u64>,
    ledger: Option<PyRef<'py, PyLedger>>,
) -> PyResult<Released<'py, i64>> {
    release_all(
        py,
        values,
        seed,
        ledger,
        Cost {
            command: "discrete-gaussian",
            neighbouring: Neighbouring::Record,
            epsilon,
            delta,
        },
        || DiscreteGaussianMechanism::new(sensitivity, epsilon, delta),
        |m, rng, v| Ok(m.release(rng, v)),
        DiscreteGaussianMechanism::event,
    )
}

/// k-ary randomized response on category indices in 0..categories (each record's own
/// response: local DP, one event per record).
#[pyfunction]
#[pyo3(signature = (values, epsilon, categories, seed=None, ledger=None))]
fn randomized_response<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, i64>,
    epsilon: f64,
    categories: u32,
    seed: Option<u64>,
    ledger: Option<PyRef<'py, PyLedger>>,
) -> PyResult<Released<'py, i64>> {
    release_all(
        py,
        values,
        seed,
        ledger,
        Cost {
            command: "randomized-response",
            neighbouring: Neighbouring::Answer,
            epsilon,
            delta: 0.0,
        },
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
    let ledger = inner(&ledger, seed)?;
    let label = label.unwrap_or_else(|| format!("{kind} of {MEMORY_DATASET}"));
    let charge = |event: PrivacyEvent, epsilon: f64, delta: f64| {
        Charge::of("query", MEMORY_DATASET, event, epsilon, delta).labelled(label.clone())
    };
    let (release, balance) = guard::run(py, || {
        // A request that can never fit is refused before any noise is drawn, as `dpml query`
        // refuses it; the release's own event is recorded before it is returned.
        let delta = delta.unwrap_or(0.0);
        let planned = PrivacyEvent::EpsilonDelta { epsilon, delta };
        budget::check(ledger, &charge(planned, epsilon, delta))?;
        let bounds = || {
            bounds.ok_or_else(|| {
                MechanismError::InvalidParameter(format!(
                    "bounds (lo, hi) are required for {kind}: sensitivity comes from declared bounds, never from the data"
                ))
            })
        };
        let release: StatRelease = match kind {
            "count" => stats::count(&mut rng, values, epsilon, noise),
            "sum" => stats::sum(&mut rng, values, bounds()?, epsilon, noise),
            "mean" => stats::mean(&mut rng, values, bounds()?, epsilon, noise),
            "histogram" => stats::histogram(&mut rng, values, bounds()?, bins, epsilon, noise),
            other => Err(MechanismError::InvalidParameter(format!(
                "statistic must be count, sum, mean or histogram, got {other:?}"
            ))),
        }?;
        let balance = budget::charge(
            ledger,
            &charge(release.event.clone(), release.epsilon, release.delta),
        )?;
        Ok::<_, dpml_core::Error>((release, balance))
    })?;
    let mut out = serde_json::to_value(&release).map_err(value_error)?;
    if let Some(b) = balance {
        out["ledger"] = dpml_core::ledger_json::balance(&b);
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
