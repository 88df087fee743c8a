//! The budget-ledger flags shared by every command that releases something computed from
//! private data (`train`, `label-dp`, `kmeans`, `rr`, `release`, `query`, `predict`, `sweep`,
//! `audit`): which ledger, its fixed budget, and its key. The budget is stored in the ledger when
//! it is created (`dpml ledger create`), not retyped on every use.

use std::path::PathBuf;

use clap::Args;
use dpml_core::budget::{self, Ledger, LedgerOptions, PASSPHRASE_ENV};

use crate::args;
use crate::error::{CliError, CliResult};

pub use dpml_core::budget::DEFAULT_BUDGET_DELTA;

/// `--ledger FILE [--budget E] [--budget-delta D] [--ledger-key FILE]`.
#[derive(Args, Debug, Clone)]
pub struct LedgerArgs {
    /// Budget ledger file (made by `dpml ledger create`): the spend is recorded there durably
    /// before anything is released, against the budget stored in it; a run that would
    /// overspend is refused before it starts.
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
    /// The key file that seals the ledger (default: the ledger's path with `.key` appended,
    /// made with 0600 permissions when the ledger is created). A ledger sealed with a
    /// passphrase reads it from the DPML_LEDGER_PASSPHRASE environment variable instead.
    #[arg(long, value_name = "FILE", requires = "ledger")]
    pub ledger_key: Option<PathBuf>,
}

impl LedgerArgs {
    /// The ledger, when one was named. Open it before any noise is drawn, so that a bad or
    /// corrupt ledger stops the command first.
    ///
    /// An existing ledger keeps the budget it was created with: a `--budget` or
    /// `--budget-delta` given too must equal it. A missing file is created only when
    /// `--budget` says with what budget; otherwise it is refused by name, so a typo in the
    /// path never starts a fresh budget.
    ///
    /// A seeded run is refused a ledger: its noise is reproducible, so two seeded queries that
    /// differ in one person's rows give that person's exact contribution away, while the
    /// ledger would record them as independent releases.
    pub fn open(&self, seed: &args::SeedArg) -> CliResult<Option<Ledger>> {
        let Some(path) = &self.ledger else {
            return Ok(None);
        };
        if let Some(seed) = seed.seed {
            return Err(CliError::usage(format!(
                "--seed {seed} with --ledger: a seeded run's noise is reproducible, so it is \
                 not private and cannot be charged to a ledger (leave out --seed for a \
                 release, or --ledger for a test run)"
            )));
        }
        let mut options =
            LedgerOptions::new(path.clone()).with_key(self.ledger_key.clone(), passphrase());
        options.budget = self.budget;
        options.budget_delta = self.budget_delta;
        Ok(Some(budget::open(&options)?))
    }
}

/// The passphrase in [`PASSPHRASE_ENV`], if set and not empty.
pub fn passphrase() -> Option<String> {
    std::env::var(PASSPHRASE_ENV).ok().filter(|p| !p.is_empty())
}

/// A ledger composed as the fronts compose it, created with this budget if missing (the unit
/// tests' shortcut).
#[cfg(test)]
pub fn open_ledger(path: &std::path::Path, epsilon: f64, delta: f64) -> CliResult<Ledger> {
    let options = LedgerOptions::new(path.to_path_buf()).with_budget(epsilon, Some(delta));
    Ok(budget::open(&options)?)
}

/// The `"ledger"` object of a command's JSON output (the library's, shared with Python).
pub use dpml_core::ledger_json::balance as balance_json;
