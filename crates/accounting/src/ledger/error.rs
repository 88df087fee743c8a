//! The ledger's error type: every refusal names the file, the numbers and the reason.

use std::path::PathBuf;

/// Errors from the budget ledger. Messages name the bad value or the file.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The spend would take the ledger over its budget; nothing was recorded.
    #[error(
        "over budget: requested ε = {requested_epsilon}, δ = {requested_delta}; already spent \
         ε = {spent_epsilon}, δ = {spent_delta}; remaining ε = {remaining_epsilon}, \
         δ = {remaining_delta} of the budget ε = {budget_epsilon}, δ = {budget_delta} \
         (with this spend the total would be ε = {total_epsilon}, δ = {total_delta} by \
         {composition} composition); nothing was recorded"
    )]
    OverBudget {
        /// ε of the refused spend.
        requested_epsilon: f64,
        /// δ of the refused spend.
        requested_delta: f64,
        /// ε already spent before the request.
        spent_epsilon: f64,
        /// δ already spent before the request.
        spent_delta: f64,
        /// ε left before the request.
        remaining_epsilon: f64,
        /// δ left before the request.
        remaining_delta: f64,
        /// The ledger's ε budget.
        budget_epsilon: f64,
        /// The ledger's δ budget.
        budget_delta: f64,
        /// The composed ε the ledger would have reached with the request.
        total_epsilon: f64,
        /// The composed δ the ledger would have reached with the request.
        total_delta: f64,
        /// The composition that produced the totals (see [`super::Balance::composition`]).
        composition: String,
    },
    /// A spend with δ > 0 against a pure-ε ledger (budget δ = 0): it can never fit, whatever
    /// is left of ε, so it is refused by name rather than as an overspend.
    #[error(
        "ledger {} holds a pure-epsilon budget (delta = 0) and cannot record a spend with \
         delta = {requested_delta}; use a mechanism with delta = 0 (e.g. Laplace) or a ledger \
         with a delta budget; nothing was recorded",
        path.display()
    )]
    DeltaOnPureBudget {
        /// The ledger file.
        path: PathBuf,
        /// δ of the refused spend.
        requested_delta: f64,
    },
    /// A spend under another neighbouring relation than the ledger's entries: their ε
    /// cannot be added up (see [`super::Neighbouring`]).
    #[error(
        "ledger {} adds up releases private for \"{}\" (entry {entry}), but this release is \
         private for \"{}\" only, and epsilons of the two cannot be added up: charge it to a \
         ledger of its own; nothing was recorded",
        path.display(),
        stored.describe(),
        requested.describe()
    )]
    MixedNeighbouring {
        /// The ledger file.
        path: PathBuf,
        /// The first entry under another relation.
        entry: i64,
        /// That entry's relation.
        stored: super::Neighbouring,
        /// The refused spend's relation.
        requested: super::Neighbouring,
    },
    /// The ledger file was created with another budget; a budget can never be changed.
    #[error(
        "ledger {} was created with the budget ε = {stored_epsilon}, δ = {stored_delta} but was \
         opened with ε = {requested_epsilon}, δ = {requested_delta}; a ledger's budget cannot be \
         changed (open it with its own budget, or start a new ledger file)",
        path.display()
    )]
    BudgetMismatch {
        /// The ledger file.
        path: PathBuf,
        /// ε stored in the file.
        stored_epsilon: f64,
        /// δ stored in the file.
        stored_delta: f64,
        /// ε passed to [`super::Ledger::open`].
        requested_epsilon: f64,
        /// δ passed to [`super::Ledger::open`].
        requested_delta: f64,
    },
    /// `create` was asked for a ledger where a file already is: a budget is set once, and an
    /// existing ledger is never replaced.
    #[error(
        "ledger {} already exists; a ledger's budget is set once, when it is created (use it as \
         it is, or create a new ledger file)",
        path.display()
    )]
    AlreadyExists {
        /// The existing file.
        path: PathBuf,
    },
    /// A ledger was opened with the budget stored in it, but no file is there.
    #[error(
        "ledger {} does not exist; a ledger is created once, with its budget: give the budget \
         to create it",
        path.display()
    )]
    Missing {
        /// The path that holds no file.
        path: PathBuf,
    },
    /// The file is not a dpml ledger, or is damaged. It is refused and left untouched.
    #[error(
        "ledger {} is corrupt or not a dpml ledger: {reason}; the file was left untouched",
        path.display()
    )]
    Corrupt {
        /// The ledger file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A row does not match its seal: the file was changed outside dpml (a stored ε, event or
    /// budget edited, an entry removed from before the newest or reordered; removing the newest
    /// entries leaves a valid chain, as rolling the whole file back does). It is refused and left
    /// untouched.
    #[error(
        "ledger {} was changed outside dpml: {reason}; it is refused, and was left untouched",
        path.display()
    )]
    Tampered {
        /// The ledger file.
        path: PathBuf,
        /// Which row.
        reason: String,
    },
    /// The ledger's key cannot be had, is not private, or does not open this ledger.
    #[error("ledger {}: {reason}", path.display())]
    Key {
        /// The ledger file.
        path: PathBuf,
        /// What is wrong with the key.
        reason: String,
    },
    /// SQLite failed for a reason other than a damaged file (locked too long, disk full,
    /// permissions, …).
    #[error("ledger {}: SQLite error: {source}", path.display())]
    Sqlite {
        /// The ledger file.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// A file-system operation on the ledger failed.
    #[error("ledger {}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A budget or spend parameter is outside its valid range (the message names it).
    #[error("{0}")]
    InvalidParameter(String),
    /// The accountant used for composition failed or may not limit a budget.
    #[error("accountant {accountant} cannot compose the ledger: {message}")]
    Accountant {
        /// The accountant's name.
        accountant: String,
        /// What went wrong.
        message: String,
    },
}

impl LedgerError {
    /// Whether the failure lies with the environment rather than with the caller's budget,
    /// parameters or file: an I/O error or a SQLite failure other than a damaged file or a
    /// mistaken path (a ledger locked past the busy timeout, a read-only file or folder, a
    /// full disk). Such a failure is a runtime failure; everything else, a path into a folder
    /// that does not exist included, is a refusal of what was asked.
    pub fn is_environmental(&self) -> bool {
        match self {
            // "Not found" when a file is made is the caller's mistake only when its folder is
            // missing: a folder that exists but takes no files (/proc) is the environment.
            LedgerError::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                !folder_missing(path)
            }
            LedgerError::Io { source, .. } => !is_path_mistake(source),
            LedgerError::Sqlite { path, source } => {
                let cannot_open =
                    source.sqlite_error_code() == Some(rusqlite::ErrorCode::CannotOpen);
                !(cannot_open && folder_missing(path))
            }
            _ => false,
        }
    }
}

/// Whether the folder `path` would be in does not exist (or is not a folder).
fn folder_missing(path: &std::path::Path) -> bool {
    path.parent()
        .is_some_and(|p| !p.as_os_str().is_empty() && !p.is_dir())
}

/// Whether an I/O failure on a path the caller named is the caller's mistake: a folder that
/// does not exist, a file where a folder belongs or the reverse, a file that is already
/// there, a name the file system refuses. Permissions, a read-only or full disk and a lock
/// are the environment's.
pub fn is_path_mistake(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{
        AlreadyExists, InvalidFilename, InvalidInput, IsADirectory, NotADirectory, NotFound,
    };
    matches!(
        e.kind(),
        NotFound | NotADirectory | IsADirectory | AlreadyExists | InvalidFilename | InvalidInput
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_io_and_sqlite_failures_are_environmental() {
        let path = PathBuf::from("l.db");
        let read_only = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
            None,
        );
        let busy = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        );
        for e in [read_only, busy] {
            let e = LedgerError::Sqlite {
                path: path.clone(),
                source: e,
            };
            assert!(e.is_environmental(), "{e}");
        }
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(
            LedgerError::Io {
                path: path.clone(),
                source: denied
            }
            .is_environmental()
        );
        // "Not found" while making a file: the environment's in a folder that exists but takes
        // no files, the caller's under a folder that does not exist.
        let not_found = |p: &str| LedgerError::Io {
            path: PathBuf::from(p),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let dir = tempfile::tempdir().unwrap();
        let in_dir = dir.path().join("l.db");
        assert!(not_found(in_dir.to_str().unwrap()).is_environmental());
        let under_missing = dir.path().join("missing").join("l.db");
        assert!(!not_found(under_missing.to_str().unwrap()).is_environmental());
        for e in [
            LedgerError::AlreadyExists { path: path.clone() },
            LedgerError::Missing { path: path.clone() },
            LedgerError::InvalidParameter("budget epsilon".into()),
            LedgerError::Corrupt {
                path,
                reason: "bad header".into(),
            },
        ] {
            assert!(!e.is_environmental(), "{e}");
        }
    }
}
