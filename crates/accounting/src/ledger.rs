//! A durable privacy-budget ledger (design invariant 7).
//!
//! A [`Ledger`] is a file holding a fixed (ε, δ) budget and every spend made against it. A
//! private release first calls [`Ledger::spend`]; only when that returns `Ok` (the spend is
//! committed and synced to disk) may the result be released. Check and record happen in one
//! exclusive SQLite transaction, so processes sharing a ledger never overspend together, and a
//! process killed at any moment never loses a spend that was acknowledged. A damaged file is
//! refused, never reset.
//!
//! ```
//! use dpml_accounting::ledger::{Budget, Ledger, Spend};
//! use dpml_accounting::PrivacyEvent;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let path = dir.path().join("budget.ledger");
//! let ledger = Ledger::open(&path, Budget::new(1.0, 1e-6)?)?;
//! let count = Spend {
//!     label: "count of rows".into(),
//!     event: PrivacyEvent::Laplace { noise_multiplier: 2.0 },
//!     epsilon: 0.5,
//!     delta: 0.0,
//! };
//! let balance = ledger.spend(&count)?; // recorded durably: now the count may be released
//! assert_eq!(balance.remaining_epsilon, 0.5);
//! assert!(ledger.spend(&Spend { epsilon: 0.6, ..count }).is_err()); // over budget
//! # Ok(())
//! # }
//! ```

mod compose;
mod error;
mod store;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, TransactionBehavior};
use serde::Serialize;

use crate::{Accountant, PrivacyEvent};
use compose::{Cost, Spent, compose};
pub use error::{LedgerError, is_path_mistake};

/// How many characters of an unstorable event to quote in an error.
const QUOTED_EVENT_CHARS: usize = 200;

/// δ budget of a ledger created without one: small against 1/N for any data set dpml trains on.
pub const DEFAULT_BUDGET_DELTA: f64 = 1e-5;

/// A ledger's total privacy budget: ε > 0 finite, δ in [0, 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Budget {
    /// Total ε.
    pub epsilon: f64,
    /// Total δ (0 for a pure-DP budget).
    pub delta: f64,
}

impl Budget {
    /// A validated budget.
    ///
    /// # Errors
    /// [`LedgerError::InvalidParameter`] naming ε if it is not finite and > 0, or δ if it is
    /// not in [0, 1).
    pub fn new(epsilon: f64, delta: f64) -> Result<Self, LedgerError> {
        let budget = Budget { epsilon, delta };
        budget.validate()?;
        Ok(budget)
    }

    /// Checks the ranges (the fields are public, so [`Ledger::open`] checks again).
    ///
    /// # Errors
    /// As [`Budget::new`].
    pub fn validate(&self) -> Result<(), LedgerError> {
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return Err(LedgerError::InvalidParameter(format!(
                "budget epsilon must be finite and > 0, got {}",
                self.epsilon
            )));
        }
        if !(0.0..1.0).contains(&self.delta) {
            return Err(LedgerError::InvalidParameter(format!(
                "budget delta must be in [0, 1), got {}",
                self.delta
            )));
        }
        Ok(())
    }
}

/// A request to spend privacy: what the computation did and its (ε, δ) on its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Spend {
    /// What the spend is for, shown in the ledger's history.
    pub label: String,
    /// The computation's privacy event (used by accountant composition).
    pub event: PrivacyEvent,
    /// Its ε by itself (used by basic composition): finite, ≥ 0.
    pub epsilon: f64,
    /// Its δ by itself: in [0, 1).
    pub delta: f64,
}

/// Where a ledger stands: composed spending so far and what is left of the budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Balance {
    /// Composed ε of all entries (an upper bound).
    pub spent_epsilon: f64,
    /// The δ at which `spent_epsilon` holds: Σδ_i under basic composition, the budget's δ when
    /// an accountant's ε is used.
    pub spent_delta: f64,
    /// Budget ε − spent ε, floored at 0.
    pub remaining_epsilon: f64,
    /// Budget δ − spent δ, floored at 0.
    pub remaining_delta: f64,
    /// Number of entries.
    pub entries: usize,
    /// The composition that produced the totals: `"basic"`, the accountant's name (`"rdp"`),
    /// or `"basic (…)"` saying why basic was used in accountant mode (tighter, unsupported
    /// event, or a δ budget of 0).
    pub composition: String,
}

/// One recorded spend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// Increasing id, never reused.
    pub id: i64,
    /// When it was recorded, in seconds since the Unix epoch.
    pub time_unix: i64,
    /// The spend's label.
    pub label: String,
    /// The spend's privacy event.
    pub event: PrivacyEvent,
    /// The spend's ε by itself.
    pub epsilon: f64,
    /// The spend's δ by itself.
    pub delta: f64,
}

/// What [`Ledger::spend_receipt`] returns: the recorded entry and the balance after it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipt {
    /// The entry as recorded (with its id).
    pub entry: Entry,
    /// The balance including this entry.
    pub balance: Balance,
}

/// How a ledger composes its entries.
#[derive(Default)]
pub enum Composition {
    /// Basic sequential composition: (Σε_i, Σδ_i).
    #[default]
    Basic,
    /// The tighter of basic composition and this accountant's ε for all events composed, at
    /// the budget's δ. The accountant must report an upper bound ([`crate::BoundKind::UpperBound`]);
    /// spending with any other kind is refused.
    Accountant(Box<dyn Accountant + Send + Sync>),
}

impl std::fmt::Debug for Composition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Composition::Basic => f.write_str("Basic"),
            Composition::Accountant(a) => write!(f, "Accountant({})", a.name()),
        }
    }
}

/// A durable privacy-budget ledger backed by one SQLite file.
///
/// # Privacy
/// Every spend is checked against the budget and recorded in one exclusive transaction,
/// committed and synced before [`Ledger::spend`] returns. Basic composition: k mechanisms that
/// are (ε_i, δ_i)-DP compose to (Σε_i, Σδ_i)-DP; sums are rounded toward +∞. With
/// [`Composition::Accountant`], spent ε = min(Σε_i, ε_acc(δ_budget)), both valid upper bounds.
///
/// # Citations
/// - Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*, 2014, Thm 3.16
///   (basic composition).
/// - SQLite, "Atomic Commit in SQLite" and `PRAGMA synchronous` (durability of a commit).
///
/// # Errors
/// See [`LedgerError`]; every method fails closed (no spend is recorded on error).
pub struct Ledger {
    path: PathBuf,
    budget: Budget,
    composition: Composition,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("path", &self.path)
            .field("budget", &self.budget)
            .field("composition", &self.composition)
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// Opens the ledger at `path`, creating it with `budget` if no file is there.
    ///
    /// An existing file is validated completely (SQLite header and integrity check, dpml
    /// application id and schema version, budget row, every entry) and must hold the same
    /// budget. A file that fails is refused and left untouched.
    ///
    /// # Errors
    /// - [`LedgerError::InvalidParameter`] for an invalid `budget` (naming the value).
    /// - [`LedgerError::BudgetMismatch`] if the file holds another budget (naming both).
    /// - [`LedgerError::Corrupt`] if the file is not a dpml ledger or is damaged.
    /// - [`LedgerError::Io`] / [`LedgerError::Sqlite`] if it cannot be created or read.
    pub fn open(path: &Path, budget: Budget) -> Result<Ledger, LedgerError> {
        budget.validate()?;
        let exists = path.try_exists().map_err(|e| LedgerError::Io {
            path: path.into(),
            source: e,
        })?;
        if !exists {
            store::create(path, &budget)?;
        }
        let ledger = Self::open_stored(path)?;
        ledger.require_budget(Some(budget.epsilon), Some(budget.delta))?;
        Ok(ledger)
    }

    /// Creates a new ledger with `budget` at `path`, refusing a path where a file already is
    /// (a budget is set once; an existing ledger is never replaced or reset).
    ///
    /// # Errors
    /// - [`LedgerError::InvalidParameter`] for an invalid `budget` (naming the value).
    /// - [`LedgerError::AlreadyExists`] if a file is at `path`, or appears there meanwhile.
    /// - [`LedgerError::Io`] / [`LedgerError::Sqlite`] if it cannot be created.
    pub fn create(path: &Path, budget: Budget) -> Result<Ledger, LedgerError> {
        budget.validate()?;
        let exists = path.try_exists().map_err(|e| LedgerError::Io {
            path: path.into(),
            source: e,
        })?;
        if exists || !store::create(path, &budget)? {
            return Err(LedgerError::AlreadyExists { path: path.into() });
        }
        Self::open_stored(path)
    }

    /// Opens the existing ledger at `path` with the budget stored in it (validated completely,
    /// as [`Ledger::open`]); never creates one.
    ///
    /// # Errors
    /// - [`LedgerError::Missing`] if no file is at `path`.
    /// - [`LedgerError::Corrupt`] if the file is not a dpml ledger or is damaged.
    /// - [`LedgerError::Io`] / [`LedgerError::Sqlite`] if it cannot be read.
    pub fn open_stored(path: &Path) -> Result<Ledger, LedgerError> {
        let exists = path.try_exists().map_err(|e| LedgerError::Io {
            path: path.into(),
            source: e,
        })?;
        if !exists {
            return Err(LedgerError::Missing { path: path.into() });
        }
        let (conn, budget) = store::open_existing(path)?;
        Ok(Ledger {
            path: path.to_path_buf(),
            budget,
            composition: Composition::Basic,
            conn: Mutex::new(conn),
        })
    }

    /// The way every dpml front (command line, Python) opens a ledger the user names: an
    /// existing file keeps its stored budget (a budget stated too must equal it); a missing
    /// file is created only when `epsilon` says with what budget (δ defaults to
    /// [`DEFAULT_BUDGET_DELTA`]), so a typo in a path never starts a fresh budget. The ledger
    /// composes with RDP where that is tighter than adding up ([`Ledger::with_rdp`]).
    ///
    /// # Errors
    /// As [`Ledger::open`] and [`Ledger::open_stored`]; [`LedgerError::Missing`] for a missing
    /// file without a budget.
    pub fn open_or_create(
        path: &Path,
        epsilon: Option<f64>,
        delta: Option<f64>,
    ) -> Result<Ledger, LedgerError> {
        let exists = path.try_exists().map_err(|e| LedgerError::Io {
            path: path.into(),
            source: e,
        })?;
        let ledger = match (epsilon, exists) {
            (Some(epsilon), false) => Ledger::open(
                path,
                Budget {
                    epsilon,
                    delta: delta.unwrap_or(DEFAULT_BUDGET_DELTA),
                },
            )?,
            _ => {
                let ledger = Ledger::open_stored(path)?;
                ledger.require_budget(epsilon, delta)?;
                ledger
            }
        };
        Ok(ledger.with_rdp())
    }

    /// This ledger composing with RDP where that is tighter than adding up (both are upper
    /// bounds), so that every front reports a balance the same way.
    pub fn with_rdp(self) -> Self {
        self.with_composition(Composition::Accountant(Box::new(
            crate::rdp::RdpAccountant::new(crate::rdp::Conversion::Current),
        )))
    }

    /// Checks a budget the caller states (ε, δ, or both) against the stored one: a ledger's
    /// budget is fixed, so a different one is refused rather than silently ignored.
    ///
    /// # Errors
    /// [`LedgerError::BudgetMismatch`] naming both budgets (a part not stated counts as the
    /// stored one).
    pub fn require_budget(
        &self,
        epsilon: Option<f64>,
        delta: Option<f64>,
    ) -> Result<(), LedgerError> {
        let requested = Budget {
            epsilon: epsilon.unwrap_or(self.budget.epsilon),
            delta: delta.unwrap_or(self.budget.delta),
        };
        if requested == self.budget {
            return Ok(());
        }
        Err(LedgerError::BudgetMismatch {
            path: self.path.clone(),
            stored_epsilon: self.budget.epsilon,
            stored_delta: self.budget.delta,
            requested_epsilon: requested.epsilon,
            requested_delta: requested.delta,
        })
    }

    /// Uses `composition` for the balance and for budget checks from now on.
    pub fn with_composition(mut self, composition: Composition) -> Self {
        self.composition = composition;
        self
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The budget stored in the file.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Spends privacy if the budget allows it, atomically: see [`Ledger::spend_receipt`].
    ///
    /// # Privacy
    /// As [`Ledger::spend_receipt`].
    ///
    /// # Errors
    /// As [`Ledger::spend_receipt`].
    pub fn spend(&self, spend: &Spend) -> Result<Balance, LedgerError> {
        self.spend_receipt(spend).map(|r| r.balance)
    }

    /// Checks `spend` against the budget and records it, in one exclusive transaction that is
    /// committed and synced before this returns `Ok`; returns the entry and the new balance.
    ///
    /// # Privacy
    /// Allowed iff the composed totals including `spend` stay within the budget: basic
    /// Σε_i ≤ ε_B and Σδ_i ≤ δ_B (sums rounded toward +∞, compared with a relative slack of
    /// 10⁻¹² for decimal inputs); with an accountant, min(Σε_i, ε_acc(Composed(events), δ_B))
    /// ≤ ε_B. Two processes can never both spend the last of a budget: the check sees every
    /// committed spend and holds the write lock until its own is committed.
    ///
    /// # Errors
    /// - [`LedgerError::OverBudget`] (requested, spent, remaining, budget): nothing recorded.
    /// - [`LedgerError::DeltaOnPureBudget`] for a spend with δ > 0 on a ledger whose δ budget
    ///   is 0 (pure ε, composed by plain sum): nothing recorded.
    /// - [`LedgerError::InvalidParameter`] for ε not finite ≥ 0, δ not in [0, 1), or an event
    ///   that cannot be stored and read back identically (a non-finite number in it).
    /// - [`LedgerError::Accountant`] if the accountant is not an upper bound or fails.
    /// - [`LedgerError::Corrupt`], [`LedgerError::Sqlite`] if the file cannot be used.
    pub fn spend_receipt(&self, spend: &Spend) -> Result<Receipt, LedgerError> {
        let event_json = check_spend(spend)?;
        if self.budget.delta == 0.0 && spend.delta > 0.0 {
            return Err(LedgerError::DeltaOnPureBudget {
                path: self.path.clone(),
                requested_delta: spend.delta,
            });
        }
        let time_unix = now_unix();
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| store::classify(&self.path, e))?;
        let entries = store::read_entries(&tx, &self.path)?;
        let mut costs: Vec<Cost<'_>> = entries.iter().map(Cost::from).collect();
        costs.push(Cost {
            event: &spend.event,
            epsilon: spend.epsilon,
            delta: spend.delta,
        });
        let after = compose(&self.budget, &self.composition, &costs)?;
        if !after.within(&self.budget) {
            drop(tx); // rolls back; nothing was written
            let before = compose(&self.budget, &self.composition, &costs[..entries.len()])?;
            let before = self.balance_of(before, entries.len());
            return Err(LedgerError::OverBudget {
                requested_epsilon: spend.epsilon,
                requested_delta: spend.delta,
                spent_epsilon: before.spent_epsilon,
                spent_delta: before.spent_delta,
                remaining_epsilon: before.remaining_epsilon,
                remaining_delta: before.remaining_delta,
                budget_epsilon: self.budget.epsilon,
                budget_delta: self.budget.delta,
                total_epsilon: after.epsilon,
                total_delta: after.delta,
                composition: after.composition,
            });
        }
        let id = store::insert(&tx, &self.path, time_unix, spend, &event_json)?;
        tx.commit().map_err(|e| store::classify(&self.path, e))?;
        let entry = Entry {
            id,
            time_unix,
            label: spend.label.clone(),
            event: spend.event.clone(),
            epsilon: spend.epsilon,
            delta: spend.delta,
        };
        Ok(Receipt {
            entry,
            balance: self.balance_of(after, entries.len() + 1),
        })
    }

    /// The composed spending so far and what is left.
    ///
    /// # Errors
    /// [`LedgerError::Accountant`] as in [`Ledger::spend_receipt`]; [`LedgerError::Corrupt`],
    /// [`LedgerError::Sqlite`] if the file cannot be read.
    pub fn balance(&self) -> Result<Balance, LedgerError> {
        let entries = self.entries()?;
        let costs: Vec<Cost<'_>> = entries.iter().map(Cost::from).collect();
        let spent = compose(&self.budget, &self.composition, &costs)?;
        Ok(self.balance_of(spent, entries.len()))
    }

    /// All entries, oldest first.
    ///
    /// # Errors
    /// [`LedgerError::Corrupt`], [`LedgerError::Sqlite`] if the file cannot be read.
    pub fn entries(&self) -> Result<Vec<Entry>, LedgerError> {
        let conn = self.lock();
        store::read_entries(&conn, &self.path)
    }

    fn balance_of(&self, spent: Spent, entries: usize) -> Balance {
        Balance {
            spent_epsilon: spent.epsilon,
            spent_delta: spent.delta,
            remaining_epsilon: (self.budget.epsilon - spent.epsilon).max(0.0),
            remaining_delta: (self.budget.delta - spent.delta).max(0.0),
            entries,
            composition: spent.composition,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a transaction open (dropping it rolls
        // back), so the connection is still usable.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<'a> From<&'a Entry> for Cost<'a> {
    fn from(e: &'a Entry) -> Self {
        Cost {
            event: &e.event,
            epsilon: e.epsilon,
            delta: e.delta,
        }
    }
}

/// Validates a spend and returns its event as the JSON to store.
fn check_spend(spend: &Spend) -> Result<String, LedgerError> {
    if !(spend.epsilon.is_finite() && spend.epsilon >= 0.0) {
        return Err(LedgerError::InvalidParameter(format!(
            "spend epsilon must be finite and >= 0, got {}",
            spend.epsilon
        )));
    }
    if !(0.0..1.0).contains(&spend.delta) {
        return Err(LedgerError::InvalidParameter(format!(
            "spend delta must be in [0, 1), got {}",
            spend.delta
        )));
    }
    // A stored event must read back identically, or the ledger would become unreadable:
    // serde_json writes NaN and ±∞ as null and refuses to parse very deep nesting.
    let json = serde_json::to_string(&spend.event)
        .map_err(|e| LedgerError::InvalidParameter(format!("spend event cannot be stored: {e}")))?;
    match serde_json::from_str::<PrivacyEvent>(&json) {
        Ok(back) if back == spend.event => Ok(json),
        _ => Err(LedgerError::InvalidParameter(format!(
            "spend event cannot be stored and read back identically (a non-finite number, or \
             nested too deeply): {}",
            json.chars().take(QUOTED_EVENT_CHARS).collect::<String>()
        ))),
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
