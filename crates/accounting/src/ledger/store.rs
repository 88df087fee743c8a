//! The ledger's file format and every SQLite call: creating a ledger file atomically,
//! validating an existing one, reading its entries and appending one.
//!
//! A ledger is a SQLite database in rollback-journal mode with `synchronous = EXTRA` (FULL plus
//! a sync of the directory after the journal is deleted, so a commit survives power loss as
//! well as `kill -9`). It is marked with `application_id` 'DPML' and `user_version` =
//! [`SCHEMA_VERSION`], holds its budget in `ledger_meta` (one row, fixed at creation) and its
//! spends in `ledger_entries`; triggers make both tables append-only.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior, params};

use super::{Budget, Entry, LedgerError, Spend};
use crate::PrivacyEvent;

/// `PRAGMA application_id` of a dpml ledger: the ASCII bytes "DPML".
pub(super) const APPLICATION_ID: i32 = 0x4450_4D4C;
/// `PRAGMA user_version` of the schema this code reads and writes.
pub(super) const SCHEMA_VERSION: i32 = 1;
/// How long to wait for another process holding the ledger's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// How many `integrity_check` messages to quote in a [`LedgerError::Corrupt`].
const QUOTED_PROBLEMS: usize = 3;

const SCHEMA: &str = "
CREATE TABLE ledger_meta (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    budget_epsilon REAL NOT NULL CHECK (budget_epsilon > 0),
    budget_delta REAL NOT NULL CHECK (budget_delta >= 0 AND budget_delta < 1),
    created_unix INTEGER NOT NULL
) STRICT;
CREATE TABLE ledger_entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time_unix INTEGER NOT NULL,
    label TEXT NOT NULL,
    event TEXT NOT NULL,
    epsilon REAL NOT NULL CHECK (epsilon >= 0),
    delta REAL NOT NULL CHECK (delta >= 0 AND delta < 1)
) STRICT;
CREATE TRIGGER ledger_meta_fixed_update BEFORE UPDATE ON ledger_meta
    BEGIN SELECT RAISE(ABORT, 'a ledger budget is fixed'); END;
CREATE TRIGGER ledger_meta_fixed_delete BEFORE DELETE ON ledger_meta
    BEGIN SELECT RAISE(ABORT, 'a ledger budget is fixed'); END;
CREATE TRIGGER ledger_entries_append_only_update BEFORE UPDATE ON ledger_entries
    BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
CREATE TRIGGER ledger_entries_append_only_delete BEFORE DELETE ON ledger_entries
    BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
";

/// Maps a SQLite error on `path`: a damaged file is [`LedgerError::Corrupt`], anything else
/// (busy, I/O, permissions) [`LedgerError::Sqlite`].
pub(super) fn classify(path: &Path, err: rusqlite::Error) -> LedgerError {
    match err.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
            corrupt(path, err.to_string())
        }
        _ => LedgerError::Sqlite {
            path: path.to_path_buf(),
            source: err,
        },
    }
}

/// Like [`classify`], for reads of the ledger's own tables: with our fixed SQL, a generic SQL
/// error ("no such table", "no such column") or a value of the wrong type means the file does
/// not have the ledger's schema.
fn classify_read(path: &Path, err: rusqlite::Error) -> LedgerError {
    let schema_mismatch = matches!(err.sqlite_error_code(), Some(ErrorCode::Unknown))
        || matches!(
            err,
            rusqlite::Error::InvalidColumnType(..)
                | rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::IntegralValueOutOfRange(..)
        );
    if schema_mismatch {
        corrupt(path, err.to_string())
    } else {
        classify(path, err)
    }
}

fn corrupt(path: &Path, reason: impl Into<String>) -> LedgerError {
    LedgerError::Corrupt {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn io_error(path: &Path, source: std::io::Error) -> LedgerError {
    LedgerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Per-connection settings: wait for locks, sync commits durably, distrust SQL in the file.
fn configure(conn: &Connection, path: &Path) -> Result<(), LedgerError> {
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| classify(path, e))?;
    conn.execute_batch(
        "PRAGMA synchronous = EXTRA; PRAGMA trusted_schema = OFF; PRAGMA cell_size_check = ON;",
    )
    .map_err(|e| classify(path, e))
}

/// Creates a ledger with `budget` at `path` unless a file is already there.
///
/// The database is built and synced under a temporary name in the same directory, then
/// hard-linked to `path` (which fails if `path` exists, so a file appearing meanwhile is never
/// overwritten), and the directory is synced. Whoever links first wins; a loser's caller goes on
/// to open and validate the winner's file.
///
/// Returns whether this call published the file (`false`: another was there first).
///
/// # Errors
/// [`LedgerError::Io`] or [`LedgerError::Sqlite`] if the file cannot be created.
pub(super) fn create(path: &Path, budget: &Budget) -> Result<bool, LedgerError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        LedgerError::InvalidParameter(format!(
            "ledger path {} does not name a file",
            path.display()
        ))
    })?;
    let dir = parent_dir(path);
    let tmp = dir.join(format!(
        ".{}.{}-{}.creating",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = write_new(&tmp, budget).and_then(|()| publish(&tmp, path, &dir));
    // The temporary name is only scaffolding; the published file keeps its own link.
    let _ = fs::remove_file(&tmp);
    result
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn write_new(tmp: &Path, budget: &Budget) -> Result<(), LedgerError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(tmp, flags).map_err(|e| classify(tmp, e))?;
    conn.pragma_update(None, "journal_mode", "DELETE")
        .map_err(|e| classify(tmp, e))?;
    configure(&conn, tmp)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate);
    let tx = tx.map_err(|e| classify(tmp, e))?;
    let write = |tx: &Transaction<'_>| -> rusqlite::Result<()> {
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        tx.execute_batch(SCHEMA)?;
        tx.execute(
            "INSERT INTO ledger_meta (id, budget_epsilon, budget_delta, created_unix) \
             VALUES (1, ?1, ?2, ?3)",
            params![budget.epsilon, budget.delta, super::now_unix()],
        )?;
        Ok(())
    };
    write(&tx).map_err(|e| classify(tmp, e))?;
    tx.commit().map_err(|e| classify(tmp, e))?;
    conn.close().map_err(|(_, e)| classify(tmp, e))?;
    File::open(tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_error(tmp, e))
}

fn publish(tmp: &Path, path: &Path, dir: &Path) -> Result<bool, LedgerError> {
    match fs::hard_link(tmp, path) {
        Ok(()) => sync_dir(dir).map(|()| true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_error(path, e)),
    }
}

/// Makes a new directory entry durable (a no-op where directories cannot be synced).
fn sync_dir(dir: &Path) -> Result<(), LedgerError> {
    #[cfg(unix)]
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Opens the existing ledger at `path`, validates all of it, and returns the connection and
/// the budget stored in the file. Validation only reads: a refused file is left byte-identical.
///
/// # Errors
/// [`LedgerError::Corrupt`] for a file that is not a dpml ledger of this schema version or
/// that is damaged in any way (see [`validate`]); [`LedgerError::Io`] / [`LedgerError::Sqlite`]
/// if it cannot be read.
pub(super) fn open_existing(path: &Path) -> Result<(Connection, Budget), LedgerError> {
    check_header(path)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|e| classify(path, e))?;
    configure(&conn, path)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred);
    let tx = tx.map_err(|e| classify(path, e))?;
    let budget = validate(&tx, path)?;
    tx.commit().map_err(|e| classify(path, e))?;
    Ok((conn, budget))
}

/// Checks the first 100 bytes before SQLite sees the file: long enough, SQLite's magic string,
/// and rollback-journal format (a WAL-mode file would make SQLite create side files).
fn check_header(path: &Path) -> Result<(), LedgerError> {
    let mut header = Vec::with_capacity(100);
    File::open(path)
        .and_then(|f| f.take(100).read_to_end(&mut header))
        .map_err(|e| io_error(path, e))?;
    if header.len() < 100 {
        return Err(corrupt(
            path,
            format!(
                "the file has only {} bytes, too few for a SQLite database",
                header.len()
            ),
        ));
    }
    if &header[..16] != b"SQLite format 3\0" {
        return Err(corrupt(
            path,
            "the file is not a SQLite database (wrong header)",
        ));
    }
    if header[18] != 1 || header[19] != 1 {
        return Err(corrupt(
            path,
            format!(
                "file format versions {}/{}: dpml ledgers use SQLite's rollback journal (1/1)",
                header[18], header[19]
            ),
        ));
    }
    Ok(())
}

/// Full validation inside a read transaction: length against the page count, SQLite's
/// `integrity_check`, application id, schema version, the budget row and every entry.
fn validate(conn: &Connection, path: &Path) -> Result<Budget, LedgerError> {
    let pragma_i64 = |name: &str| -> Result<i64, LedgerError> {
        conn.pragma_query_value(None, name, |r| r.get(0))
            .map_err(|e| classify_read(path, e))
    };
    let (pages, page_size) = (pragma_i64("page_count")?, pragma_i64("page_size")?);
    let len = fs::metadata(path).map_err(|e| io_error(path, e))?.len();
    let declared = u64::try_from(pages.saturating_mul(page_size)).unwrap_or(u64::MAX);
    if len < declared {
        return Err(corrupt(
            path,
            format!("truncated: {len} bytes, but it declares {pages} pages of {page_size} bytes"),
        ));
    }
    let mut problems: Vec<String> = Vec::new();
    conn.pragma_query(None, "integrity_check", |r| {
        problems.push(r.get(0)?);
        Ok(())
    })
    .map_err(|e| classify_read(path, e))?;
    if problems != ["ok"] {
        let quoted: Vec<&str> = problems
            .iter()
            .take(QUOTED_PROBLEMS)
            .map(String::as_str)
            .collect();
        return Err(corrupt(
            path,
            format!("integrity check failed: {}", quoted.join("; ")),
        ));
    }
    let app_id = pragma_i64("application_id")?;
    if app_id != i64::from(APPLICATION_ID) {
        return Err(corrupt(
            path,
            format!("application id {app_id:#x}, expected {APPLICATION_ID:#x} ('DPML')"),
        ));
    }
    let version = pragma_i64("user_version")?;
    if version != i64::from(SCHEMA_VERSION) {
        return Err(corrupt(
            path,
            format!("schema version {version}, this dpml reads version {SCHEMA_VERSION}"),
        ));
    }
    let budget = read_budget(conn, path)?;
    read_entries(conn, path)?;
    Ok(budget)
}

fn read_budget(conn: &Connection, path: &Path) -> Result<Budget, LedgerError> {
    let mut stmt = conn
        .prepare("SELECT budget_epsilon, budget_delta FROM ledger_meta")
        .map_err(|e| classify_read(path, e))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(Budget {
                epsilon: r.get(0)?,
                delta: r.get(1)?,
            })
        })
        .map_err(|e| classify_read(path, e))?;
    let budgets = rows
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| classify_read(path, e))?;
    let [budget] = budgets[..] else {
        return Err(corrupt(
            path,
            format!("{} budget rows, expected exactly 1", budgets.len()),
        ));
    };
    budget
        .validate()
        .map_err(|e| corrupt(path, format!("stored budget: {e}")))?;
    Ok(budget)
}

/// All entries in id order, each validated.
///
/// # Errors
/// [`LedgerError::Corrupt`] naming the first entry whose event does not parse or whose ε or δ
/// is out of range.
pub(super) fn read_entries(conn: &Connection, path: &Path) -> Result<Vec<Entry>, LedgerError> {
    let mut stmt = conn
        .prepare(
            "SELECT id, time_unix, label, event, epsilon, delta FROM ledger_entries ORDER BY id",
        )
        .map_err(|e| classify_read(path, e))?;
    let mut rows = stmt.query([]).map_err(|e| classify_read(path, e))?;
    let mut entries = Vec::new();
    while let Some(row) = rows.next().map_err(|e| classify_read(path, e))? {
        let (id, time_unix, label, event, epsilon, delta) =
            row_values(row).map_err(|e| classify_read(path, e))?;
        let event: PrivacyEvent = serde_json::from_str(&event)
            .map_err(|e| corrupt(path, format!("entry {id}: its event does not parse: {e}")))?;
        if !(epsilon.is_finite() && epsilon >= 0.0) {
            return Err(corrupt(
                path,
                format!("entry {id}: ε = {epsilon} is not finite and ≥ 0"),
            ));
        }
        if !(0.0..1.0).contains(&delta) {
            return Err(corrupt(
                path,
                format!("entry {id}: δ = {delta} is not in [0, 1)"),
            ));
        }
        entries.push(Entry {
            id,
            time_unix,
            label,
            event,
            epsilon,
            delta,
        });
    }
    Ok(entries)
}

/// The columns of one `ledger_entries` row, typed.
type RowValues = (i64, i64, String, String, f64, f64);

fn row_values(row: &rusqlite::Row<'_>) -> rusqlite::Result<RowValues> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
    ))
}

/// Appends `spend` (its event already serialised as `event_json`) and returns the new id.
///
/// # Errors
/// As [`classify`].
pub(super) fn insert(
    conn: &Connection,
    path: &Path,
    time_unix: i64,
    spend: &Spend,
    event_json: &str,
) -> Result<i64, LedgerError> {
    conn.execute(
        "INSERT INTO ledger_entries (time_unix, label, event, epsilon, delta) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            time_unix,
            spend.label,
            event_json,
            spend.epsilon,
            spend.delta
        ],
    )
    .map_err(|e| classify(path, e))?;
    Ok(conn.last_insert_rowid())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Budget = Budget {
        epsilon: 1.0,
        delta: 1e-5,
    };

    /// A fresh ledger file with one entry, and a raw connection to tamper with it.
    fn ledger_with_one_entry(dir: &Path) -> (PathBuf, Connection) {
        let path = dir.join("l.db");
        create(&path, &BUDGET).unwrap();
        let (conn, budget) = open_existing(&path).unwrap();
        assert_eq!(budget, BUDGET);
        let spend = Spend {
            label: "x".into(),
            event: PrivacyEvent::Laplace {
                noise_multiplier: 1.0,
            },
            epsilon: 1.0,
            delta: 0.0,
        };
        insert(
            &conn,
            &path,
            0,
            &spend,
            r#"{"type":"laplace","noise_multiplier":1.0}"#,
        )
        .unwrap();
        (path, conn)
    }

    fn corrupt_reason(path: &Path) -> String {
        match open_existing(path) {
            Err(LedgerError::Corrupt { reason, .. }) => reason,
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn a_created_ledger_validates_and_is_append_only() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_one_entry(dir.path());
        assert_eq!(read_entries(&conn, &path).unwrap().len(), 1);
        assert!(
            conn.execute("UPDATE ledger_entries SET epsilon = 0", [])
                .is_err()
        );
        assert!(conn.execute("DELETE FROM ledger_entries", []).is_err());
        assert!(
            conn.execute("UPDATE ledger_meta SET budget_epsilon = 9", [])
                .is_err()
        );
        assert!(
            conn.execute("INSERT INTO ledger_meta VALUES (2, 9.0, 0.0, 0)", [])
                .is_err()
        );
        // Nothing was left behind under the temporary name.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["l.db"]);
    }

    #[test]
    fn an_event_that_does_not_parse_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_one_entry(dir.path());
        conn.execute(
            "INSERT INTO ledger_entries (time_unix, label, event, epsilon, delta) \
             VALUES (0, 'y', '{\"type\":\"cauchy\"}', 0.1, 0.0)",
            [],
        )
        .unwrap();
        let reason = corrupt_reason(&path);
        assert!(
            reason.contains("entry 2") && reason.contains("does not parse"),
            "{reason}"
        );
    }

    #[test]
    fn a_negative_epsilon_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_one_entry(dir.path());
        conn.execute_batch("PRAGMA ignore_check_constraints = ON")
            .unwrap();
        conn.execute(
            "INSERT INTO ledger_entries (time_unix, label, event, epsilon, delta) \
             VALUES (0, 'y', '{\"type\":\"laplace\",\"noise_multiplier\":1.0}', -0.5, 0.0)",
            [],
        )
        .unwrap();
        // SQLite's integrity check sees the violated CHECK constraint …
        let reason = corrupt_reason(&path);
        assert!(
            reason.contains("CHECK constraint failed in ledger_entries"),
            "{reason}"
        );
        // … and the row check (run on every spend, without the integrity check) sees it too.
        match read_entries(&conn, &path) {
            Err(LedgerError::Corrupt { reason, .. }) => {
                assert!(
                    reason.contains("entry 2") && reason.contains("-0.5"),
                    "{reason}"
                );
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn wrong_schema_version_or_missing_budget_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_one_entry(dir.path());
        conn.pragma_update(None, "user_version", 2).unwrap();
        assert!(corrupt_reason(&path).contains("schema version 2"));
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
            .unwrap();
        conn.execute_batch("DROP TRIGGER ledger_meta_fixed_delete; DELETE FROM ledger_meta;")
            .unwrap();
        assert!(corrupt_reason(&path).contains("0 budget rows"));
    }

    #[test]
    fn a_wal_mode_database_is_refused_before_sqlite_opens_it() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_one_entry(dir.path());
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        drop(conn);
        let before = fs::read(&path).unwrap();
        assert!(corrupt_reason(&path).contains("file format versions 2/2"));
        assert_eq!(fs::read(&path).unwrap(), before);
    }
}
