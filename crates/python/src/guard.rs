//! Runs library work with the GIL released and turns its failures into Python exceptions.

use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// Runs `f` without the GIL (other Python threads go on meanwhile). An error becomes
/// `ValueError` carrying the library's message; a panic, which would be a bug in dpml, becomes
/// `RuntimeError` instead of unwinding into the interpreter.
pub fn run<T, E, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    T: Send,
    E: Display + Send,
    F: FnOnce() -> Result<T, E> + Send,
{
    match py.detach(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(PyValueError::new_err(e.to_string())),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(PyRuntimeError::new_err(format!(
                "internal error in dpml (a bug: please report it): {what}"
            )))
        }
    }
}

/// Serialises a library result for Python (which reads it with `json.loads`).
pub fn json<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| format!("cannot serialise the result: {e}"))
}

/// The generator of a call: seeded (reproducible, for tests) or from the OS (a real release).
pub fn rng(seed: Option<u64>) -> PyResult<dpml_mechanisms::DpRng> {
    dpml_mechanisms::DpRng::new(seed).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}
