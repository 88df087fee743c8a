//! The budget ledger as Python sees it (`dpml.Ledger` wraps it), and how the other bindings
//! reach the ledger a Python call hands them: every charge goes through `dpml-core`'s budget
//! module, as the command line's `--ledger` does.

use std::path::PathBuf;

use dpml_core::accounting::ledger::{Ledger, Spend};
use dpml_core::budget::{self, LedgerOptions};
use dpml_core::mechanisms::PrivacyEvent;
use pyo3::prelude::*;

use crate::guard::{self, value_error};

/// A budget ledger (SQLite file, its rows sealed with a key file or a passphrase) composing
/// with the tightest accountant that covers its entries, as the CLI's `--ledger` opens one.
#[pyclass(name = "Ledger", frozen)]
pub struct PyLedger {
    inner: Ledger,
}

/// The ledger inside an optional `ledger=` argument.
///
/// A seeded call is refused a ledger: its noise is reproducible, so two seeded releases that
/// differ in one person's rows give that person's exact contribution away, while the ledger
/// would record them as independent.
pub fn inner<'a>(
    ledger: &'a Option<PyRef<'_, PyLedger>>,
    seed: Option<u64>,
) -> PyResult<Option<&'a Ledger>> {
    match (ledger.as_deref(), seed) {
        (Some(_), Some(seed)) => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "seed={seed} with ledger=: a seeded call's noise is reproducible, so it is not \
             private and cannot be charged to a ledger (leave out seed= for a release, or \
             ledger= for a test)"
        ))),
        (ledger, _) => Ok(ledger.map(|l| &l.inner)),
    }
}

#[pymethods]
impl PyLedger {
    /// Opens the ledger at `path`, creating it with the budget (ε, δ) when missing; an existing
    /// one must have the same budget when one is given. Its key: `passphrase` if given, else
    /// `key_file`, else the key file beside it (`path` + `.key`).
    #[new]
    #[pyo3(signature = (path, budget=None, budget_delta=None, key_file=None, passphrase=None))]
    fn new(
        path: PathBuf,
        budget: Option<f64>,
        budget_delta: Option<f64>,
        key_file: Option<PathBuf>,
        passphrase: Option<String>,
    ) -> PyResult<Self> {
        if budget.is_none() && !path.exists() {
            // The library's message speaks to both fronts; say how Python creates one.
            return Err(value_error(format!(
                "ledger {} does not exist; create it with dpml.Ledger(path, budget=EPSILON) \
                 (and budget_delta=DELTA)",
                path.display()
            )));
        }
        let mut options = LedgerOptions::new(path).with_key(key_file, passphrase);
        options.budget = budget;
        options.budget_delta = budget_delta;
        let inner = budget::open(&options).map_err(value_error)?;
        Ok(PyLedger { inner })
    }

    /// The balance as JSON (the command line's `"ledger"` object).
    fn balance_json(&self) -> PyResult<String> {
        let b = self.inner.balance().map_err(value_error)?;
        Ok(dpml_core::ledger_json::balance(&b).to_string())
    }

    /// Every entry with its ε at the ledger's δ, as JSON (as `dpml ledger show --json` lists
    /// them); with `over_time`, the composed ε after each too (as `--plot` adds it).
    #[pyo3(signature = (over_time=false))]
    fn entries_json(&self, over_time: bool) -> PyResult<String> {
        let h = self.inner.history(over_time).map_err(value_error)?;
        let list: Vec<serde_json::Value> = h.iter().map(dpml_core::ledger_json::entry).collect();
        Ok(serde_json::Value::from(list).to_string())
    }

    /// Records a spend (refused over budget); returns the balance after it as JSON.
    fn spend(&self, label: String, event_json: &str, epsilon: f64, delta: f64) -> PyResult<String> {
        let event: PrivacyEvent = serde_json::from_str(event_json)
            .map_err(|e| value_error(format!("invalid privacy event: {e}")))?;
        let b = self
            .inner
            .spend(&Spend::new(label, event, epsilon, delta).by("python", ""))
            .map_err(value_error)?;
        guard::json(&dpml_core::ledger_json::balance(&b)).map_err(value_error)
    }
}
