//! `dpml ledger create` and `dpml ledger show`: a budget ledger's budget is given once, when
//! it is created; the commands that spend (`query`, `predict`) then read it from the file, and
//! `show` lists what was spent against it and what remains.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use dpml_accounting::ledger::{Budget, Ledger};
use serde_json::{Value, json};

use crate::args;
use crate::error::CliResult;
use crate::ledger_args::{DEFAULT_BUDGET_DELTA, balance_json};
use crate::output::Output;

/// `dpml ledger …`.
#[derive(Subcommand, Debug)]
pub enum LedgerCommand {
    /// Create a budget ledger holding its fixed (ε, δ) budget; an existing file is refused.
    Create(CreateArgs),
    /// List a ledger's entries, with the budget spent and what remains.
    Show(ShowArgs),
}

/// Flags of `dpml ledger create`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// The ledger file to create (it must not exist yet).
    #[arg(long, value_parser = args::input_path)]
    pub ledger: PathBuf,
    /// Total ε budget, fixed for the ledger's life.
    #[arg(long, value_parser = args::positive, alias = "budget")]
    pub budget_epsilon: f64,
    /// Total δ budget, fixed for the ledger's life; 0 makes a pure-ε ledger, composed by plain
    /// sum, that refuses any spend with δ > 0.
    #[arg(long, value_parser = args::unit_from_zero, default_value_t = DEFAULT_BUDGET_DELTA)]
    pub budget_delta: f64,
}

/// Flags of `dpml ledger show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The ledger file (it must exist; `show` never creates one).
    #[arg(long, value_parser = args::input_path)]
    pub ledger: PathBuf,
}

/// Run `dpml ledger …`.
pub fn run(cmd: &LedgerCommand, out: Output) -> CliResult<()> {
    match cmd {
        LedgerCommand::Create(a) => {
            let budget = Budget::new(a.budget_epsilon, a.budget_delta)?;
            let ledger = Ledger::create(&a.ledger, budget)?.with_rdp();
            out.emit(&report(&ledger, false)?);
        }
        LedgerCommand::Show(a) => {
            let ledger = Ledger::open_stored(&a.ledger)?.with_rdp();
            out.emit(&report(&ledger, true)?);
        }
    }
    Ok(())
}

/// The ledger's file, budget and balance (as `query` and `predict` report it); with
/// `list_entries`, every entry too, under `"entries"` instead of their count.
fn report(ledger: &Ledger, list_entries: bool) -> CliResult<Value> {
    let budget = ledger.budget();
    let balance = ledger.balance()?;
    let mut v = balance_json(&balance);
    if list_entries {
        let entries: Vec<Value> = ledger
            .entries()?
            .iter()
            .map(dpml_core::ledger_json::entry)
            .collect();
        v["entries"] = json!(entries);
    }
    v["ledger"] = json!(ledger.path());
    v["budget"] = json!({"epsilon": budget.epsilon, "delta": budget.delta});
    Ok(v)
}
