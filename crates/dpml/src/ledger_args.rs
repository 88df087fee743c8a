//! The budget-ledger flags shared by every command that releases something (`query`,
//! `predict`): which ledger, its fixed budget, and how a balance is reported. The budget is
//! stored in the ledger when it is created (`dpml ledger create`), not retyped on every use.

use std::path::PathBuf;

use clap::Args;
#[cfg(test)]
use dpml_accounting::ledger::Budget;
use dpml_accounting::ledger::Ledger;

use crate::args;
use crate::error::CliResult;

pub use dpml_accounting::ledger::DEFAULT_BUDGET_DELTA;

/// `--ledger FILE [--budget E] [--budget-delta D]`.
#[derive(Args, Debug, Clone)]
pub struct LedgerArgs {
    /// Budget ledger file (made by `dpml ledger create`): the spend is recorded there durably
    /// before anything is released, against the budget stored in it.
    #[arg(long, value_parser = args::input_path)]
    pub ledger: Option<PathBuf>,
    /// Total ε budget: not needed with an existing ledger (its stored budget is used; a
    /// different one is refused). For a file that does not exist yet, creates the ledger with
    /// this budget.
    #[arg(long, value_parser = args::positive, requires = "ledger")]
    pub budget: Option<f64>,
    /// Total δ budget (as --budget; default 1e-5 when creating); 0 makes a pure-ε ledger,
    /// composed by plain sum, that refuses any spend with δ > 0.
    #[arg(long, value_parser = args::unit_from_zero, requires = "ledger")]
    pub budget_delta: Option<f64>,
}

impl LedgerArgs {
    /// The ledger, when one was named. Open it before any noise is drawn, so that a bad or
    /// corrupt ledger stops the command first.
    ///
    /// An existing ledger keeps the budget it was created with: a `--budget` or
    /// `--budget-delta` given too must equal it. A missing file is created only when
    /// `--budget` says with what budget (as before `dpml ledger create` existed); otherwise
    /// it is refused by name, so a typo in the path never starts a fresh budget.
    pub fn open(&self) -> CliResult<Option<Ledger>> {
        let Some(path) = &self.ledger else {
            return Ok(None);
        };
        Ok(Some(Ledger::open_or_create(
            path,
            self.budget,
            self.budget_delta,
        )?))
    }
}

/// A ledger composed with RDP where that is tighter than adding up (both are upper bounds),
/// created with this budget if missing (the unit tests' shortcut).
#[cfg(test)]
pub fn open_ledger(path: &std::path::Path, epsilon: f64, delta: f64) -> CliResult<Ledger> {
    Ok(Ledger::open(path, Budget { epsilon, delta })?.with_rdp())
}

/// The `"ledger"` object of a command's JSON output (the library's, shared with Python).
pub use dpml_core::ledger_json::balance as balance_json;
