//! `dpml._native`: the compiled half of the `dpml` Python package (python/dpml holds the
//! Python half: classes, docstrings and stubs). Every function here parses its arguments,
//! calls one dpml library function with the GIL released, and converts the result: no privacy
//! or learning logic lives in the binding. Errors become `ValueError` with the library's
//! message (the one the CLI prints after `error: `); a panic becomes `RuntimeError`.
//!
//! Structured results cross as JSON text (the CLI's JSON shapes), arrays as numpy arrays.

use pyo3::prelude::*;

mod accounting;
mod audit;
mod guard;
mod learn;
mod ledger;
mod mechanisms;
mod sql;
mod tune;

/// The extension module, imported as `dpml._native`.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    accounting::register(m)?;
    audit::register(m)?;
    mechanisms::register(m)?;
    learn::register(m)?;
    sql::register(m)?;
    tune::register(m)?;
    Ok(())
}
