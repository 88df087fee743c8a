//! Charging the budget ledger: the one place where every workflow turns what it releases into
//! a ledger spend, so that the command line, the Python bindings and every later front charge
//! a ledger the same way.
//!
//! A workflow that releases something computed from private data takes `ledger:
//! Option<&Ledger>` and, with a ledger:
//! 1. before its private work, asks [`check`] whether the release would fit (a run that would
//!    overspend is refused before it trains or draws noise);
//! 2. after computing the release and before returning or writing it, calls [`charge`]
//!    (recorded durably: a run killed after this keeps its charge; a run that fails before it
//!    charges nothing).
//!
//! Non-private work cannot be charged (its ε is unbounded): [`refuse_non_private`] says so by
//! name. Checkpointed training runs are charged once per run, through
//! [`Ledger::record_segment`] (see [`crate::train`]).
//!
//! ```
//! use dpml_core::budget::{self, Charge, LedgerOptions};
//! use dpml_core::accounting::PrivacyEvent;
//!
//! # fn main() -> dpml_core::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let options = LedgerOptions::new(dir.path().join("iris.ledger")).with_budget(1.0, None);
//! let ledger = budget::open(&options)?; // created with ε = 1 (δ 1e-5), key file beside it
//! let count = Charge::of("query", "iris", PrivacyEvent::Laplace { noise_multiplier: 4.0 }, 0.25, 0.0);
//! budget::check(Some(&ledger), &count)?; // before the private work
//! let balance = budget::charge(Some(&ledger), &count)?; // before the release is returned
//! assert_eq!(balance.unwrap().spent_epsilon, 0.25);
//! # Ok(())
//! # }
//! ```

use std::path::PathBuf;

use dpml_accounting::PrivacyEvent;
use dpml_accounting::pld::PldAccountant;
use dpml_mechanisms::DpRng;

pub use dpml_accounting::ledger::{
    Balance, DEFAULT_BUDGET_DELTA, Ledger, LedgerKey, Neighbouring, Segment, SegmentCost,
    SegmentReceipt, Spend,
};

use crate::error::{Error, Result};

/// The environment variable both fronts read a ledger's passphrase from (never a flag: a
/// command line is visible to other users and kept in shell histories).
pub const PASSPHRASE_ENV: &str = "DPML_LEDGER_PASSPHRASE";

/// How a front opens the ledger a user names.
#[derive(Debug, Clone)]
pub struct LedgerOptions {
    /// The ledger file.
    pub path: PathBuf,
    /// ε budget: creates a missing ledger with it; an existing one must hold it.
    pub budget: Option<f64>,
    /// δ budget (default [`DEFAULT_BUDGET_DELTA`] when creating).
    pub budget_delta: Option<f64>,
    /// Where the key that seals the ledger is.
    pub key: LedgerKey,
}

impl LedgerOptions {
    /// The ledger at `path`, its key file beside it, no budget stated.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            budget: None,
            budget_delta: None,
            key: LedgerKey::Beside,
        }
    }

    /// These options with a budget stated (ε, and δ if given).
    pub fn with_budget(mut self, epsilon: f64, delta: Option<f64>) -> Self {
        self.budget = Some(epsilon);
        self.budget_delta = delta;
        self
    }

    /// These options with the key the fronts resolve the same way: a passphrase given (the
    /// Python keyword, or [`PASSPHRASE_ENV`] read by the caller), else a key file given, else
    /// the key file beside the ledger.
    pub fn with_key(mut self, key_file: Option<PathBuf>, passphrase: Option<String>) -> Self {
        self.key = match (passphrase, key_file) {
            (Some(p), _) => LedgerKey::Passphrase(p),
            (None, Some(f)) => LedgerKey::File(f),
            (None, None) => LedgerKey::Beside,
        };
        self
    }
}

/// Opens the ledger `o` names, as both fronts do: an existing file keeps its stored budget
/// (a budget stated too must equal it); a missing file is created only with a stated budget.
/// The ledger composes with the tightest accountant that covers its entries.
///
/// # Errors
/// The ledger's refusals (missing without a budget, another budget, damaged, a key that does
/// not open it, rows changed outside dpml) and failures.
pub fn open(o: &LedgerOptions) -> Result<Ledger> {
    Ok(Ledger::open_or_create(
        &o.path,
        o.budget,
        o.budget_delta,
        &o.key,
    )?)
}

/// What one release costs, and where it comes from: a ledger [`Spend`] (the command, the data
/// set, a label, the privacy event, its ε and δ by itself), made with [`Spend::of`] or
/// [`accounted`].
pub type Charge = Spend;

/// A charge for `event` whose ε at `delta` is the PLD accountant's upper bound (RDP's below its
/// floor in δ): for events that state no ε of their own (DP-SGD's).
///
/// # Errors
/// The accountant's refusal of the event or of δ.
pub fn accounted(
    command: impl Into<String>,
    dataset: impl Into<String>,
    event: PrivacyEvent,
    delta: f64,
) -> Result<Charge> {
    let (epsilon, _) = PldAccountant::pessimistic().upper_epsilon(&event, delta)?;
    Ok(Spend::of(command, dataset, event, epsilon, delta))
}

/// Whether `charge` would fit `ledger` (nothing is recorded). Call it before the private work.
///
/// # Errors
/// The ledger's refusal ([`dpml_accounting::ledger::LedgerError::OverBudget`], δ on a pure-ε
/// ledger, …) and failures; `Ok` without a ledger.
pub fn check(ledger: Option<&Ledger>, charge: &Charge) -> Result<()> {
    if let Some(l) = ledger {
        l.check(charge)?;
    }
    Ok(())
}

/// Records `charge` in `ledger` (committed and synced before this returns) and returns the
/// balance after it; `None` without a ledger. Call it after the release is computed and before
/// it is returned or written.
///
/// # Errors
/// As [`check`]; nothing is recorded on error.
pub fn charge(ledger: Option<&Ledger>, charge: &Charge) -> Result<Option<Balance>> {
    ledger
        .map(|l| l.spend(charge))
        .transpose()
        .map_err(Error::from)
}

/// Runs the private work `release` charged to `ledger` as `charge` says: checked before it
/// starts, recorded after it succeeds and before its result is returned (a release that fails
/// charges nothing). For releases whose cost is known before they run (a mechanism's).
///
/// # Errors
/// As [`check`] and [`charge`], and `release`'s own errors.
pub fn charged<T>(
    ledger: Option<&Ledger>,
    charge: &Charge,
    release: impl FnOnce() -> Result<T>,
) -> Result<(T, Option<Balance>)> {
    check(ledger, charge)?;
    let released = release()?;
    let balance = self::charge(ledger, charge)?;
    Ok((released, balance))
}

/// Refuses to run non-private work against a ledger: what it releases has no finite ε, so no
/// budget can account for it.
///
/// # Errors
/// A usage error naming `what` when a ledger is given.
pub fn refuse_non_private(ledger: Option<&Ledger>, what: &str) -> Result<()> {
    match ledger {
        Some(l) => Err(Error::usage(format!(
            "{what} is not differentially private, so ledger {} cannot account for it (its ε \
             is unbounded); drop the ledger, or make it private",
            l.path().display()
        ))),
        None => Ok(()),
    }
}

/// A fresh random identity (128 bits from the operating system, hex): a training run's, a
/// checkpoint's. Drawn apart from the run's own generator, so a seeded run draws the same
/// noise with or without a ledger.
///
/// # Errors
/// An internal error if the operating system's generator fails.
pub fn random_id() -> Result<String> {
    let mut rng = DpRng::from_os().map_err(Error::internal)?;
    Ok(format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64()))
}

/// A fresh ledger of budget ε = `epsilon` (δ 1e-5) in a folder of its own, for tests: the
/// folder goes when the guard is dropped.
#[cfg(test)]
pub(crate) fn test_ledger(epsilon: f64) -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let o = LedgerOptions::new(dir.path().join("test.ledger")).with_budget(epsilon, None);
    let ledger = open(&o).expect("a fresh ledger");
    (dir, ledger)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_private_work_is_refused_only_with_a_ledger() {
        let (_dir, ledger) = test_ledger(1.0);
        assert!(refuse_non_private(None, "lloyd").is_ok());
        let err = refuse_non_private(Some(&ledger), "lloyd").unwrap_err();
        assert!(
            err.to_string()
                .contains("lloyd is not differentially private"),
            "{err}"
        );
        // A charge accounted from its event states the PLD's ε.
        let c = accounted("train", "iris", PrivacyEvent::dp_sgd(1.0, 0.1, 50), 1e-5).unwrap();
        assert!(c.epsilon > 0.0 && c.epsilon.is_finite());
        assert_eq!(
            (c.command.as_str(), c.label.as_str()),
            ("train", "train on iris")
        );
        assert_ne!(random_id().unwrap(), random_id().unwrap());
    }
}
