//! Runs library work with the GIL released and turns its failures into Python exceptions whose
//! messages name Python's keywords.

use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// Runs `f` without the GIL (other Python threads go on meanwhile). An error becomes
/// `ValueError` carrying the library's message ([`value_error`]); a panic, which would be a
/// bug in dpml, becomes `RuntimeError` instead of unwinding into the interpreter.
pub fn run<T, E, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    T: Send,
    E: Display + Send,
    F: FnOnce() -> Result<T, E> + Send,
{
    match py.detach(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(value_error(e)),
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

/// A `ValueError` with the library's message, its command-line flags (`--batch-size`) written
/// as the keywords Python takes (`batch_size`) and its long numbers short (`1e308`, not 309
/// digits), as the command line writes them.
pub fn value_error(e: impl Display) -> PyErr {
    PyValueError::new_err(keywords(&dpml_core::numbers::short_numbers(&e.to_string())))
}

/// `msg` with every `--flag-name` written as `flag_name`.
fn keywords(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(at) = rest.find("--") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let len = after
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
            .unwrap_or(after.len());
        let name = &after[..len];
        if name.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.push_str(&name.replace('-', "_"));
        } else {
            out.push_str("--");
            out.push_str(name);
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

/// Serialises a library result for Python (which reads it with `json.loads`).
pub fn json<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| format!("cannot serialise the result: {e}"))
}

/// The generator of a call: seeded (reproducible, for tests) or from the OS (a real release).
pub fn rng(seed: Option<u64>) -> PyResult<dpml_core::mechanisms::DpRng> {
    dpml_core::mechanisms::DpRng::new(seed).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}
