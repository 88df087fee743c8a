//! A durable privacy-budget ledger (design invariant 7): the one account of everything
//! released from a data set.
//!
//! A [`Ledger`] is a file holding a fixed (ε, δ) budget and every spend made against it. A
//! private release first calls [`Ledger::spend`]; only when that returns `Ok` (the spend is
//! committed and synced to disk) may the result be released. Check and record happen in one
//! exclusive SQLite transaction, so processes sharing a ledger never overspend together, and a
//! process killed at any moment never loses a spend that was acknowledged. A damaged file is
//! refused, never reset; every row is sealed with a key kept outside the file ([`LedgerKey`]),
//! so a stored ε changed by hand is refused rather than believed. Checkpointed training runs
//! are charged once per run ([`Ledger::record_segment`]), and again only for a fork.
//!
//! ```
//! use dpml_accounting::ledger::{Budget, Ledger, Spend};
//! use dpml_accounting::PrivacyEvent;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let path = dir.path().join("budget.ledger");
//! let ledger = Ledger::open(&path, Budget::new(1.0, 1e-6)?)?; // key file: budget.ledger.key
//! let count = Spend::new("count of rows", PrivacyEvent::Laplace { noise_multiplier: 2.0 }, 0.5, 0.0)
//!     .by("query", "iris");
//! let balance = ledger.spend(&count)?; // recorded durably: now the count may be released
//! assert_eq!(balance.remaining_epsilon, 0.5);
//! assert!(ledger.spend(&Spend { epsilon: 0.6, ..count }).is_err()); // over budget
//! # Ok(())
//! # }
//! ```

mod compose;
mod error;
mod seal;
mod store;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, TransactionBehavior};
use serde::{Serialize, Serializer};

use crate::{Accountant, PrivacyEvent};
use compose::{Cost, Spent, compose};
pub use error::{LedgerError, is_path_mistake};
pub use seal::{LedgerKey, is_key_file};
pub use store::same_file;

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
    /// not in [0, 1), or positive but below [`crate::pld::MIN_DELTA`]: no spend with a δ
    /// could ever be composed under it.
    pub fn new(epsilon: f64, delta: f64) -> Result<Self, LedgerError> {
        // -0 is 0 (stored as it is, it would not read back as sealed).
        let budget = Budget {
            epsilon,
            delta: delta + 0.0,
        };
        budget.validate()?;
        if delta > 0.0 && delta < crate::pld::MIN_DELTA {
            return Err(LedgerError::InvalidParameter(format!(
                "budget delta {delta:e} is below {:e}, the smallest delta the accountants \
                 compose: give 0 for a pure epsilon budget, or at least {:e}",
                crate::pld::MIN_DELTA,
                crate::pld::MIN_DELTA
            )));
        }
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

/// The neighbouring relation a spend's ε is stated under: which two data sets its release
/// must not tell apart.
///
/// A ledger adds up ε under one relation only. A release that protects only labels (label DP),
/// only features (local DP on the features) or only each answer (randomized response) has no
/// finite ε for adding or removing a whole record, so a ledger holds entries of one relation,
/// fixed by its first entry, and refuses a spend under another ([`LedgerError::MixedNeighbouring`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Neighbouring {
    /// Add or remove one record (one privacy unit's rows in SQL): central DP over whole
    /// records (DP-SGD, queries, DPLloyd, SQL, output perturbation, mechanisms on a value of
    /// declared sensitivity).
    #[default]
    Record,
    /// Change one record's label (label DP: the features are not protected).
    Label,
    /// Change one record's features (local DP on the features: the labels are not protected).
    Features,
    /// Change one respondent's answer (local DP: randomized response).
    Answer,
}

impl Neighbouring {
    /// The name stored in the ledger and written in its JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Neighbouring::Record => "record",
            Neighbouring::Label => "label",
            Neighbouring::Features => "features",
            Neighbouring::Answer => "answer",
        }
    }

    /// The relation in words.
    pub const fn describe(self) -> &'static str {
        match self {
            Neighbouring::Record => "add or remove one record (one privacy unit's rows)",
            Neighbouring::Label => "change one record's label (label DP)",
            Neighbouring::Features => "change one record's features (local DP on the features)",
            Neighbouring::Answer => "change one respondent's answer (randomized response)",
        }
    }

    /// The relation of a stored name.
    fn from_name(name: &str) -> Option<Self> {
        [
            Neighbouring::Record,
            Neighbouring::Label,
            Neighbouring::Features,
            Neighbouring::Answer,
        ]
        .into_iter()
        .find(|n| n.name() == name)
    }

    /// The relation of an entry written before ledgers stored it, read off what dpml itself
    /// wrote in its command and label (a user's own spends were recorded as `python`).
    fn of_earlier_entry(command: &str, label: &str) -> Self {
        match command {
            "label-dp" | "rr-with-prior" => Neighbouring::Label,
            "rr" | "randomized-response" => Neighbouring::Answer,
            "train" if label.starts_with("input perturbation") => Neighbouring::Features,
            "kmeans" if label.starts_with("input-perturbation ") => Neighbouring::Features,
            "sweep" if label.starts_with("sweep label-dp") => Neighbouring::Label,
            "sweep" if label.starts_with("sweep input-perturbation ") => Neighbouring::Features,
            _ => Neighbouring::Record,
        }
    }
}

/// A request to spend privacy: what released it, from which data set, the computation's
/// privacy event and its (ε, δ) on its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Spend {
    /// The command (or function) that releases something: `"train"`, `"query"`, …
    pub command: String,
    /// The data set the release is computed from.
    pub dataset: String,
    /// What the spend is for, shown in the ledger's history.
    pub label: String,
    /// The computation's privacy event (used by accountant composition).
    pub event: PrivacyEvent,
    /// Its ε by itself (used by basic composition): finite, ≥ 0.
    pub epsilon: f64,
    /// Its δ by itself: in [0, 1).
    pub delta: f64,
    /// The training run it pays for, when checkpointed ([`Ledger::record_segment`]).
    pub run: Option<String>,
    /// The relation its ε is stated under.
    pub neighbouring: Neighbouring,
}

impl Spend {
    /// A spend described by `label` alone (no command, data set or run).
    pub fn new(label: impl Into<String>, event: PrivacyEvent, epsilon: f64, delta: f64) -> Self {
        Spend {
            command: String::new(),
            dataset: String::new(),
            label: label.into(),
            event,
            epsilon,
            delta,
            run: None,
            neighbouring: Neighbouring::Record,
        }
    }

    /// A spend of (`epsilon`, `delta`) for `event`, made by `command` on `dataset` (described
    /// as "`command` on `dataset`" until [`Spend::labelled`]).
    pub fn of(
        command: impl Into<String>,
        dataset: impl Into<String>,
        event: PrivacyEvent,
        epsilon: f64,
        delta: f64,
    ) -> Self {
        let (command, dataset) = (command.into(), dataset.into());
        Spend::new(format!("{command} on {dataset}"), event, epsilon, delta).by(command, dataset)
    }

    /// This spend, made by `command` on `dataset`.
    pub fn by(mut self, command: impl Into<String>, dataset: impl Into<String>) -> Self {
        self.command = command.into();
        self.dataset = dataset.into();
        self
    }

    /// This spend described by `label`.
    pub fn labelled(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// This spend, its ε stated under `neighbouring`.
    pub fn under(mut self, neighbouring: Neighbouring) -> Self {
        self.neighbouring = neighbouring;
        self
    }
}

/// Where a ledger stands: composed spending so far and what is left of the budget.
///
/// As JSON (both fronts): `spent`, `spent_delta`, `remaining`, `remaining_delta`, `entries`,
/// `composition`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Balance {
    /// Composed ε of all entries (an upper bound).
    #[serde(rename = "spent")]
    pub spent_epsilon: f64,
    /// The δ at which `spent_epsilon` holds: Σδ_i when the entries' own (ε, δ) add up to the
    /// tightest total (0 after pure-ε spends), the budget's δ when an accountant's ε is used.
    pub spent_delta: f64,
    /// Budget ε − spent ε, floored at 0.
    #[serde(rename = "remaining")]
    pub remaining_epsilon: f64,
    /// Budget δ − spent δ, floored at 0.
    pub remaining_delta: f64,
    /// Number of entries.
    pub entries: usize,
    /// The composition that produced the totals: `"pld"`, `"rdp"`, `"basic"`, or
    /// `"basic (…)"` saying why adding up was used (tighter, an accountant unsupported, or a
    /// δ budget of 0).
    pub composition: String,
}

/// One recorded spend.
///
/// As JSON: `id`, `time` (RFC 3339, UTC), `command`, `dataset`, `label`, `event`, `epsilon`,
/// `delta`, `run`, `neighbouring`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// Increasing id, never reused.
    pub id: i64,
    /// When it was recorded, in seconds since the Unix epoch.
    #[serde(rename = "time", serialize_with = "rfc3339")]
    pub time_unix: i64,
    /// The command that made it.
    pub command: String,
    /// The data set it was computed from.
    pub dataset: String,
    /// The spend's label.
    pub label: String,
    /// The spend's privacy event.
    pub event: PrivacyEvent,
    /// The spend's ε by itself.
    pub epsilon: f64,
    /// The spend's δ by itself.
    pub delta: f64,
    /// The checkpointed training run it paid for.
    pub run: Option<String>,
    /// The relation its ε is stated under (for an entry written before ledgers stored it: read
    /// off its command and label).
    pub neighbouring: Neighbouring,
}

/// Seconds since the Unix epoch as RFC 3339 in UTC, to the second.
fn rfc3339<S: Serializer>(time_unix: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_time(*time_unix))
}

/// `time_unix` as RFC 3339 in UTC (the epoch for a time before it).
pub fn format_time(time_unix: i64) -> String {
    let secs = u64::try_from(time_unix).unwrap_or(0);
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

/// What [`Ledger::spend_receipt`] returns: the recorded entry and the balance after it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipt {
    /// The entry as recorded (with its id).
    pub entry: Entry,
    /// The balance including this entry.
    pub balance: Balance,
}

/// A step of a checkpointed training run: the run's identity, the checkpoint it continues
/// (`None` for the run's start) and what it produced (a new checkpoint's id, or the release).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Segment {
    /// The run's random identity, the same in all its checkpoints.
    pub run: String,
    /// The checkpoint this process continued from, `None` when it started the run.
    pub parent: Option<String>,
    /// What this segment produced: a new checkpoint's id, or a release's.
    pub child: String,
}

/// What a segment costs: nothing more, the run's first charge, or a fork's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentCost {
    /// The run was never charged to this ledger: its whole cost is charged now.
    FirstCharge,
    /// The run is charged and this continues its latest checkpoint: nothing more.
    Continues,
    /// The checkpoint was already continued (a later checkpoint or a release came from it):
    /// this is a second branch of the run, charged again.
    Fork,
}

/// What [`Ledger::record_segment`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SegmentReceipt {
    /// Which case it was.
    pub cost: SegmentCost,
    /// The entry charged (the first charge or the fork's), `None` for a continuation.
    pub entry: Option<Entry>,
    /// The balance after it.
    pub balance: Balance,
}

/// One entry as `dpml ledger show` reports it: the entry, its ε at the ledger's δ, and the
/// ledger's composed ε once it was recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntryReport {
    /// The entry.
    #[serde(flatten)]
    pub entry: Entry,
    /// The entry's ε by itself at the ledger's δ (the tightest bound the ledger's composition
    /// finds for it alone).
    pub epsilon_at_ledger_delta: f64,
    /// The composed ε of this entry and all before it (when the spend over time was asked
    /// for: each is a composition of its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spent_after: Option<f64>,
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
    /// The tightest of basic composition, the PLD accountant's upper bound and RDP's, for all
    /// events composed at the budget's δ (every dpml front uses this): PLD wherever it applies
    /// (Laplace, Gaussian, subsampled Gaussian, randomized response, (ε, δ) events and their
    /// compositions), RDP where PLD does not, adding up where neither is tighter.
    Tightest,
}

impl std::fmt::Debug for Composition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Composition::Basic => f.write_str("Basic"),
            Composition::Accountant(a) => write!(f, "Accountant({})", a.name()),
            Composition::Tightest => f.write_str("Tightest"),
        }
    }
}

/// A durable privacy-budget ledger backed by one SQLite file, its rows sealed with a key kept
/// outside it ([`LedgerKey`]).
///
/// # Privacy
/// Every spend is checked against the budget and recorded in one exclusive transaction,
/// committed and synced before [`Ledger::spend`] returns. Basic composition: k mechanisms that
/// are (ε_i, δ_i)-DP compose to (Σε_i, Σδ_i)-DP; sums are rounded toward +∞. With an
/// accountant, spent ε = min(Σε_i, ε_acc(δ_budget)), both valid upper bounds. Every row's seal
/// is checked on open and before every spend: a stored ε, event or budget changed outside
/// dpml is refused ([`LedgerError::Tampered`]), never trusted.
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
    sealing: store::Sealing,
    conn: Mutex<Connection>,
    /// The last spend (its event's JSON, ε and δ) whose stated ε passed
    /// [`check_stated_epsilon`]: a workflow checks its spend before its private work and
    /// records the same spend after, and the optimistic PLD need not be built twice.
    stated_checked: Mutex<Option<String>>,
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
    /// Opens the ledger at `path` with the key file beside it, creating both with `budget` if
    /// no ledger is there: [`Ledger::open_with`] with [`LedgerKey::Beside`].
    ///
    /// # Errors
    /// As [`Ledger::open_with`].
    pub fn open(path: &Path, budget: Budget) -> Result<Ledger, LedgerError> {
        Self::open_with(path, budget, &LedgerKey::Beside)
    }

    /// Opens the ledger at `path` sealed with `key`, creating it with `budget` if no file is
    /// there.
    ///
    /// An existing file is validated completely (SQLite header and integrity check, dpml
    /// application id and schema version, budget row, every entry and every seal) and must
    /// hold the same budget. A file that fails is refused and left untouched.
    ///
    /// # Errors
    /// - [`LedgerError::InvalidParameter`] for an invalid `budget` (naming the value).
    /// - [`LedgerError::BudgetMismatch`] if the file holds another budget (naming both).
    /// - [`LedgerError::Corrupt`] if the file is not a dpml ledger or is damaged.
    /// - [`LedgerError::Key`] / [`LedgerError::Tampered`] for a key that cannot be had or does
    ///   not open it, and rows that do not match their seals.
    /// - [`LedgerError::Io`] / [`LedgerError::Sqlite`] if it cannot be created or read.
    pub fn open_with(path: &Path, budget: Budget, key: &LedgerKey) -> Result<Ledger, LedgerError> {
        budget.validate()?;
        if !exists(path)? {
            store::create(path, &budget, key)?;
        }
        let ledger = Self::open_stored_with(path, key)?;
        ledger.require_budget(Some(budget.epsilon), Some(budget.delta))?;
        Ok(ledger)
    }

    /// Creates a new ledger with `budget` at `path` and its key file beside it:
    /// [`Ledger::create_with`] with [`LedgerKey::Beside`].
    ///
    /// # Errors
    /// As [`Ledger::create_with`].
    pub fn create(path: &Path, budget: Budget) -> Result<Ledger, LedgerError> {
        Self::create_with(path, budget, &LedgerKey::Beside)
    }

    /// Creates a new ledger with `budget` at `path`, sealed with `key` (a key file is made
    /// with 0600 permissions when missing), refusing a path where a file already is (a budget
    /// is set once; an existing ledger is never replaced or reset).
    ///
    /// # Errors
    /// - [`LedgerError::InvalidParameter`] for an invalid `budget` (naming the value).
    /// - [`LedgerError::AlreadyExists`] if a file is at `path`, or appears there meanwhile.
    /// - [`LedgerError::Key`], [`LedgerError::Io`], [`LedgerError::Sqlite`] if it cannot be
    ///   created (naming `path` or the key file, never a temporary name).
    pub fn create_with(
        path: &Path,
        budget: Budget,
        key: &LedgerKey,
    ) -> Result<Ledger, LedgerError> {
        budget.validate()?;
        if exists(path)? || !store::create(path, &budget, key)? {
            return Err(LedgerError::AlreadyExists { path: path.into() });
        }
        Self::open_stored_with(path, key)
    }

    /// Opens the existing ledger at `path` with the key file beside it.
    ///
    /// # Errors
    /// As [`Ledger::open_stored_with`].
    pub fn open_stored(path: &Path) -> Result<Ledger, LedgerError> {
        Self::open_stored_with(path, &LedgerKey::Beside)
    }

    /// Opens the existing ledger at `path` with the budget stored in it, its seals checked
    /// with `key` (validated completely, as [`Ledger::open_with`]); never creates one.
    ///
    /// # Errors
    /// - [`LedgerError::Missing`] if no file is at `path`.
    /// - [`LedgerError::Corrupt`], [`LedgerError::Key`], [`LedgerError::Tampered`] as in
    ///   [`Ledger::open_with`].
    /// - [`LedgerError::Io`] / [`LedgerError::Sqlite`] if it cannot be read.
    pub fn open_stored_with(path: &Path, key: &LedgerKey) -> Result<Ledger, LedgerError> {
        if !exists(path)? {
            return Err(LedgerError::Missing { path: path.into() });
        }
        let (conn, budget, sealing) = store::open_existing(path, key)?;
        Ok(Ledger {
            path: path.to_path_buf(),
            budget,
            composition: Composition::Basic,
            sealing,
            conn: Mutex::new(conn),
            stated_checked: Mutex::new(None),
        })
    }

    /// The way every dpml front (command line, Python) opens a ledger the user names: an
    /// existing file keeps its stored budget (a budget stated too must equal it); a missing
    /// file is created only when `epsilon` says with what budget (δ defaults to
    /// [`DEFAULT_BUDGET_DELTA`]), so a typo in a path never starts a fresh budget. The ledger
    /// composes with the tightest accountant that covers its entries ([`Composition::Tightest`]).
    ///
    /// # Errors
    /// As [`Ledger::open_with`] and [`Ledger::open_stored_with`]; [`LedgerError::Missing`] for
    /// a missing file without a budget.
    pub fn open_or_create(
        path: &Path,
        epsilon: Option<f64>,
        delta: Option<f64>,
        key: &LedgerKey,
    ) -> Result<Ledger, LedgerError> {
        let ledger = match (epsilon, exists(path)?) {
            (Some(epsilon), false) => Ledger::open_with(
                path,
                Budget::new(epsilon, delta.unwrap_or(DEFAULT_BUDGET_DELTA))?,
                key,
            )?,
            _ => {
                let ledger = Ledger::open_stored_with(path, key)?;
                ledger.require_budget(epsilon, delta)?;
                ledger
            }
        };
        Ok(ledger.with_tightest())
    }

    /// This ledger composing with the tightest accountant that covers its entries
    /// ([`Composition::Tightest`]), as every front reports a balance.
    pub fn with_tightest(self) -> Self {
        self.with_composition(Composition::Tightest)
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

    /// The ledger's random identity, fixed at creation (checkpoints of charged runs keep it,
    /// so that a run is continued against the ledger it was charged to).
    pub fn id(&self) -> &str {
        &self.sealing.ledger_id
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

    /// The balance `spend` would leave, without recording anything: a workflow asks this
    /// before its private work, so that a run that would overspend is refused before it
    /// trains. (The spend itself is checked again when it is recorded.)
    ///
    /// # Errors
    /// As [`Ledger::spend_receipt`] ([`LedgerError::OverBudget`] if it would not fit).
    pub fn check(&self, spend: &Spend) -> Result<Balance, LedgerError> {
        self.admit(spend)?;
        let conn = self.lock();
        let (entries, _) = store::read_entries(&conn, &self.path, &self.sealing)?;
        self.fit(&entries, spend)
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
    /// - [`LedgerError::Corrupt`], [`LedgerError::Tampered`], [`LedgerError::Sqlite`] if the
    ///   file cannot be used.
    pub fn spend_receipt(&self, spend: &Spend) -> Result<Receipt, LedgerError> {
        let event_json = self.admit(spend)?;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| store::classify(&self.path, e))?;
        let (entries, head) = store::read_entries(&tx, &self.path, &self.sealing)?;
        let balance = self.fit(&entries, spend)?;
        let entry = self.append(&tx, &entries, &head, spend, &event_json)?;
        tx.commit().map_err(|e| store::classify(&self.path, e))?;
        Ok(Receipt { entry, balance })
    }

    /// Records that a checkpointed training run produced `segment.child` from
    /// `segment.parent`, charging it as the ledger's record of the run says, in one exclusive
    /// transaction committed before this returns (call it before the checkpoint or the release
    /// is written):
    /// - a run with no entry in this ledger is charged `first` (its whole cost);
    /// - a segment continuing a checkpoint that nothing continued yet costs nothing more;
    /// - a segment continuing a checkpoint that was already continued (a later checkpoint or a
    ///   release came from it: this is a fork, whose result would be released beside the
    ///   first branch's) is charged `fork` (the steps it adds).
    ///
    /// Both spends are checked against the budget; `first.run` and `fork.run` are set to the
    /// segment's run.
    ///
    /// # Errors
    /// As [`Ledger::spend_receipt`]; nothing is recorded on error.
    pub fn record_segment(
        &self,
        segment: &Segment,
        first: &Spend,
        fork: &Spend,
    ) -> Result<SegmentReceipt, LedgerError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| store::classify(&self.path, e))?;
        let (entries, head) = store::read_entries(&tx, &self.path, &self.sealing)?;
        let (segments, segments_head) = store::read_segments(&tx, &self.path, &self.sealing)?;
        let cost = segment_cost(&entries, &segments, &segment.run, segment.parent.as_deref());
        let charge = match cost {
            SegmentCost::FirstCharge => Some(first),
            SegmentCost::Fork => Some(fork),
            SegmentCost::Continues => None,
        };
        let (entry, balance) = match charge {
            Some(spend) => {
                let spend = Spend {
                    run: Some(segment.run.clone()),
                    ..spend.clone()
                };
                let event_json = self.admit(&spend)?;
                let balance = self.fit(&entries, &spend)?;
                let entry = self.append(&tx, &entries, &head, &spend, &event_json)?;
                (Some(entry), balance)
            }
            None => (None, self.balance_of(&entries)?),
        };
        store::insert_segment(
            &tx,
            &self.path,
            &self.sealing,
            &segments_head,
            now_unix(),
            segment,
        )?;
        tx.commit().map_err(|e| store::classify(&self.path, e))?;
        Ok(SegmentReceipt {
            cost,
            entry,
            balance,
        })
    }

    /// What a segment of `run` continuing `parent` would cost now ([`Ledger::record_segment`]
    /// decides again when it records it), for a check before a resumed run trains.
    ///
    /// # Errors
    /// [`LedgerError::Corrupt`], [`LedgerError::Tampered`], [`LedgerError::Sqlite`] if the
    /// file cannot be read.
    pub fn segment_cost(
        &self,
        run: &str,
        parent: Option<&str>,
    ) -> Result<SegmentCost, LedgerError> {
        let conn = self.lock();
        let (entries, _) = store::read_entries(&conn, &self.path, &self.sealing)?;
        let (segments, _) = store::read_segments(&conn, &self.path, &self.sealing)?;
        Ok(segment_cost(&entries, &segments, run, parent))
    }

    /// The composed spending so far and what is left.
    ///
    /// # Errors
    /// [`LedgerError::Accountant`] as in [`Ledger::spend_receipt`]; [`LedgerError::Corrupt`],
    /// [`LedgerError::Tampered`], [`LedgerError::Sqlite`] if the file cannot be read.
    pub fn balance(&self) -> Result<Balance, LedgerError> {
        let entries = self.entries()?;
        self.balance_of(&entries)
    }

    /// All entries, oldest first.
    ///
    /// # Errors
    /// [`LedgerError::Corrupt`], [`LedgerError::Tampered`], [`LedgerError::Sqlite`] if the
    /// file cannot be read.
    pub fn entries(&self) -> Result<Vec<Entry>, LedgerError> {
        let conn = self.lock();
        store::read_entries(&conn, &self.path, &self.sealing).map(|(e, _)| e)
    }

    /// Every entry with its ε at the ledger's δ and, with `over_time`, the composed ε once it
    /// was recorded (the spend over time: one composition per entry, so it costs as many
    /// balances as there are entries), oldest first.
    ///
    /// # Errors
    /// As [`Ledger::balance`].
    pub fn history(&self, over_time: bool) -> Result<Vec<EntryReport>, LedgerError> {
        let entries = self.entries()?;
        let costs: Vec<Cost<'_>> = entries.iter().map(Cost::from).collect();
        (0..entries.len())
            .map(|i| {
                let alone = compose(&self.budget, &self.composition, &costs[i..=i])?;
                let after = over_time
                    .then(|| compose(&self.budget, &self.composition, &costs[..=i]))
                    .transpose()?;
                Ok(EntryReport {
                    entry: entries[i].clone(),
                    epsilon_at_ledger_delta: alone.epsilon,
                    spent_after: after.map(|a| a.epsilon),
                })
            })
            .collect()
    }

    /// The checks a spend passes before it meets the budget: its fields and event (returning
    /// the event's stored JSON), no δ on a pure-ε ledger, and a stated ε no smaller than its
    /// event's own.
    fn admit(&self, spend: &Spend) -> Result<String, LedgerError> {
        let event_json = check_spend(spend)?;
        self.refuse_delta_on_pure(spend)?;
        let stated = format!("{event_json} {:e} {:e}", spend.epsilon, spend.delta);
        let mut checked = self
            .stated_checked
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if checked.as_deref() != Some(stated.as_str()) {
            check_stated_epsilon(spend)?;
            *checked = Some(stated);
        }
        Ok(event_json)
    }

    /// A spend with δ > 0 can never fit a pure-ε ledger: refused by name.
    fn refuse_delta_on_pure(&self, spend: &Spend) -> Result<(), LedgerError> {
        if self.budget.delta == 0.0 && spend.delta > 0.0 {
            return Err(LedgerError::DeltaOnPureBudget {
                path: self.path.clone(),
                requested_delta: spend.delta,
            });
        }
        Ok(())
    }

    /// The balance after `spend` on top of `entries`, or [`LedgerError::OverBudget`] (or
    /// [`LedgerError::MixedNeighbouring`] for a spend under another relation than the
    /// entries').
    fn fit(&self, entries: &[Entry], spend: &Spend) -> Result<Balance, LedgerError> {
        if let Some(other) = entries
            .iter()
            .find(|e| e.neighbouring != spend.neighbouring)
        {
            return Err(LedgerError::MixedNeighbouring {
                path: self.path.clone(),
                entry: other.id,
                stored: other.neighbouring,
                requested: spend.neighbouring,
            });
        }
        let mut costs: Vec<Cost<'_>> = entries.iter().map(Cost::from).collect();
        costs.push(Cost {
            event: &spend.event,
            epsilon: spend.epsilon,
            delta: spend.delta,
        });
        let after = compose(&self.budget, &self.composition, &costs)?;
        if after.within(&self.budget) {
            return Ok(self.balance_from(after, entries.len() + 1));
        }
        let before = self.balance_of(entries)?;
        Err(LedgerError::OverBudget {
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
        })
    }

    /// Appends `spend` after `entries` (whose last seal is `head`) inside `conn`'s transaction.
    fn append(
        &self,
        conn: &Connection,
        entries: &[Entry],
        head: &str,
        spend: &Spend,
        event_json: &str,
    ) -> Result<Entry, LedgerError> {
        let id = entries.last().map_or(1, |e| e.id + 1);
        let entry = store::entry_for(id, now_unix(), spend);
        store::insert(conn, &self.path, &self.sealing, head, &entry, event_json)?;
        Ok(entry)
    }

    fn balance_of(&self, entries: &[Entry]) -> Result<Balance, LedgerError> {
        let costs: Vec<Cost<'_>> = entries.iter().map(Cost::from).collect();
        let spent = compose(&self.budget, &self.composition, &costs)?;
        Ok(self.balance_from(spent, entries.len()))
    }

    fn balance_from(&self, spent: Spent, entries: usize) -> Balance {
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

/// What a segment of `run` continuing `parent` costs, given the ledger's rows.
fn segment_cost(
    entries: &[Entry],
    segments: &[Segment],
    run: &str,
    parent: Option<&str>,
) -> SegmentCost {
    if !entries.iter().any(|e| e.run.as_deref() == Some(run)) {
        return SegmentCost::FirstCharge;
    }
    let continued = segments
        .iter()
        .any(|s| s.run == run && s.parent.as_deref() == parent);
    if continued {
        SegmentCost::Fork
    } else {
        SegmentCost::Continues
    }
}

fn exists(path: &Path) -> Result<bool, LedgerError> {
    path.try_exists().map_err(|e| LedgerError::Io {
        path: path.into(),
        source: e,
    })
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

/// Refuses a spend whose stated ε is below what its event provably costs at its δ.
///
/// # Privacy
/// Basic composition adds the stated ε of each entry (a caller, such as Python's
/// `Ledger.spend`, states it next to the event), so a stated ε below the event's own would
/// undercharge. The optimistic PLD's ε is a lower bound on the event's true ε at δ (taken at
/// the PLD's floor [`crate::pld::MIN_DELTA`] when δ is smaller: a larger δ never has a larger
/// ε), so an honest ε is never refused. An event whose parameters are out of range is refused;
/// one that the PLD cannot handle is taken at its word.
fn check_stated_epsilon(spend: &Spend) -> Result<(), LedgerError> {
    /// Room for the caller's own rounding (ε = 1 / noise multiplier, say).
    const RELATIVE_ROUNDING: f64 = 1e-9;
    let delta = spend.delta.max(crate::pld::MIN_DELTA);
    let lower = match crate::PldAccountant::optimistic().epsilon(&spend.event, delta) {
        Ok(lower) => lower,
        // Noise of scale 0 or below, a rate outside (0, 1]: no ε stated for it can be right.
        // (The PLD also refuses valid events too large for its grid: RDP's checks, which
        // are of the parameters alone, tell the two apart.)
        Err(_) => {
            return match crate::RdpAccountant::default().rdp(&spend.event) {
                Err(crate::AccountingError::InvalidParameter(m)) => {
                    Err(LedgerError::InvalidParameter(format!(
                        "spend event is not a valid mechanism: {m}"
                    )))
                }
                _ => Ok(()),
            };
        }
    };
    if spend.epsilon >= lower * (1.0 - RELATIVE_ROUNDING) {
        return Ok(());
    }
    Err(LedgerError::InvalidParameter(format!(
        "spend epsilon {} is below what its event costs: at least {lower} at delta {} (by the \
         optimistic PLD, a lower bound); state the event's own epsilon",
        spend.epsilon, spend.delta
    )))
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
