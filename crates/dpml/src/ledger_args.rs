//! The budget-ledger flags shared by every command that releases something (`query`,
//! `predict`): which ledger, its fixed budget, and how a balance is reported.

use std::path::{Path, PathBuf};

use clap::Args;
use dpml_accounting::ledger::{Balance, Budget, Composition, Ledger};
use dpml_accounting::rdp::{Conversion, RdpAccountant};
use serde_json::{Value, json};

use crate::args;
use crate::error::CliResult;

/// `--ledger FILE --budget E [--budget-delta D]`.
#[derive(Args, Debug, Clone)]
pub struct LedgerArgs {
    /// Budget ledger file: the spend is recorded there durably before anything is released.
    #[arg(long, requires = "budget", value_parser = args::input_path)]
    pub ledger: Option<PathBuf>,
    /// Total ε budget of the ledger (fixed when the ledger is created).
    #[arg(long, value_parser = args::positive, requires = "ledger")]
    pub budget: Option<f64>,
    /// Total δ budget of the ledger (fixed when the ledger is created); 0 makes a pure-ε
    /// ledger, composed by plain sum, that refuses any spend with δ > 0.
    #[arg(long, value_parser = args::unit_from_zero, default_value = "1e-5", requires = "ledger")]
    pub budget_delta: f64,
}

impl LedgerArgs {
    /// The ledger, when one was named. Open it before any noise is drawn, so that a bad or
    /// corrupt ledger stops the command first.
    pub fn open(&self) -> CliResult<Option<Ledger>> {
        match (&self.ledger, self.budget) {
            (Some(path), Some(eps)) => Ok(Some(open_ledger(path, eps, self.budget_delta)?)),
            _ => Ok(None),
        }
    }
}

/// A ledger composed with RDP where that is tighter than adding up (both are upper bounds).
pub fn open_ledger(path: &Path, epsilon: f64, delta: f64) -> CliResult<Ledger> {
    let ledger = Ledger::open(path, Budget { epsilon, delta })?;
    Ok(
        ledger.with_composition(Composition::Accountant(Box::new(RdpAccountant::new(
            Conversion::Current,
        )))),
    )
}

/// The `"ledger"` object of a command's JSON output.
pub fn balance_json(b: &Balance) -> Value {
    json!({"spent": b.spent_epsilon, "remaining": b.remaining_epsilon,
           "spent_delta": b.spent_delta, "remaining_delta": b.remaining_delta,
           "entries": b.entries, "composition": b.composition})
}
