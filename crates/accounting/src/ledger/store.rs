//! The ledger's file format and every SQLite call: creating a ledger file atomically,
//! validating an existing one (structure, then every seal), reading its rows and appending one.
//!
//! A ledger is a SQLite database in rollback-journal mode with `synchronous = EXTRA` (FULL plus
//! a sync of the directory after the journal is deleted, so a commit survives power loss as
//! well as `kill -9`). It is marked with `application_id` 'DPML' and `user_version` =
//! [`SCHEMA_VERSION`], holds its budget in `ledger_meta` (one row, fixed at creation), its
//! spends in `ledger_entries` and the checkpoints of charged training runs in
//! `ledger_segments`; triggers make every table append-only, and every row carries a seal
//! ([`super::seal`]) chained to the row before it, the first to the budget row's.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior, params};

use super::seal::{Key, LedgerKey, hex, random_bytes, same};
use super::{Budget, Entry, LedgerError, Neighbouring, Segment, Spend};
use crate::PrivacyEvent;

/// `PRAGMA application_id` of a dpml ledger: the ASCII bytes "DPML".
pub(super) const APPLICATION_ID: i32 = 0x4450_4D4C;
/// `PRAGMA user_version` of the schema this code writes (1: before seals; 2: before entries
/// stored their neighbouring relation, still read, and upgraded in place by the first spend).
pub(super) const SCHEMA_VERSION: i32 = 3;
/// The schema before entries stored their neighbouring relation.
const SCHEMA_VERSION_WITHOUT_NEIGHBOURING: i64 = 2;
/// The column that version 3 added, as a new ledger has it and as the upgrade adds it: an
/// entry written before it holds '' (its relation is read off its command and label, and its
/// seal is as it was).
macro_rules! neighbouring_column {
    () => {
        "neighbouring TEXT NOT NULL DEFAULT '' \
         CHECK (neighbouring IN ('', 'record', 'label', 'features', 'answer'))"
    };
}
/// How long to wait for another process holding the ledger's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// How many `integrity_check` messages to quote in a [`LedgerError::Corrupt`].
const QUOTED_PROBLEMS: usize = 3;
/// The message whose seal tells a wrong key from a changed row.
const KEY_CHECK: &[u8] = b"dpml ledger key check";

const SCHEMA: &str = concat!(
    "
CREATE TABLE ledger_meta (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    budget_epsilon REAL NOT NULL CHECK (budget_epsilon > 0),
    budget_delta REAL NOT NULL CHECK (budget_delta >= 0 AND budget_delta < 1),
    created_unix INTEGER NOT NULL,
    ledger_id TEXT NOT NULL,
    key_kind TEXT NOT NULL CHECK (key_kind IN ('file', 'passphrase')),
    key_salt TEXT NOT NULL,
    key_check TEXT NOT NULL,
    seal TEXT NOT NULL
) STRICT;
CREATE TABLE ledger_entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time_unix INTEGER NOT NULL,
    command TEXT NOT NULL,
    dataset TEXT NOT NULL,
    label TEXT NOT NULL,
    event TEXT NOT NULL,
    epsilon REAL NOT NULL CHECK (epsilon >= 0),
    delta REAL NOT NULL CHECK (delta >= 0 AND delta < 1),
    run TEXT,
    seal TEXT NOT NULL,
    ",
    neighbouring_column!(),
    "
) STRICT;
CREATE TABLE ledger_segments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time_unix INTEGER NOT NULL,
    run TEXT NOT NULL,
    parent TEXT,
    child TEXT NOT NULL,
    seal TEXT NOT NULL
) STRICT;
CREATE TRIGGER ledger_meta_fixed_update BEFORE UPDATE ON ledger_meta
    BEGIN SELECT RAISE(ABORT, 'a ledger budget is fixed'); END;
CREATE TRIGGER ledger_meta_fixed_delete BEFORE DELETE ON ledger_meta
    BEGIN SELECT RAISE(ABORT, 'a ledger budget is fixed'); END;
CREATE TRIGGER ledger_entries_append_only_update BEFORE UPDATE ON ledger_entries
    BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
CREATE TRIGGER ledger_entries_append_only_delete BEFORE DELETE ON ledger_entries
    BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
CREATE TRIGGER ledger_segments_append_only_update BEFORE UPDATE ON ledger_segments
    BEGIN SELECT RAISE(ABORT, 'ledger segments are append-only'); END;
CREATE TRIGGER ledger_segments_append_only_delete BEFORE DELETE ON ledger_segments
    BEGIN SELECT RAISE(ABORT, 'ledger segments are append-only'); END;
"
);

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

fn tampered(path: &Path, reason: impl Into<String>) -> LedgerError {
    LedgerError::Tampered {
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

/// What every row's seal is checked with: the key, and the seal of the budget row that starts
/// each chain.
pub(super) struct Sealing {
    key: Key,
    anchor: String,
    /// The ledger's random identity (also sealed in the budget row).
    pub ledger_id: String,
}

/// Creates a ledger with `budget` at `path`, sealed with the key `source` gives, unless a file
/// is already there.
///
/// The database is built in memory and written to a file that has no name until it is
/// complete and synced (Linux: `O_TMPFILE`, then linked to `path`; elsewhere a temporary name
/// beside it, removed after); the link fails if `path` exists, so a file appearing meanwhile is
/// never overwritten, and a process killed while creating leaves nothing behind on Linux.
/// Whoever links first wins; a loser's caller goes on to open and validate the winner's file.
///
/// Returns whether this call published the file (`false`: another was there first).
///
/// # Errors
/// [`LedgerError::Io`], [`LedgerError::Sqlite`] or [`LedgerError::Key`] naming `path` (never
/// a temporary name) if the file cannot be created; [`LedgerError::Key`] for a key file that is
/// the ledger's own path.
pub(super) fn create(
    path: &Path,
    budget: &Budget,
    source: &LedgerKey,
) -> Result<bool, LedgerError> {
    if path.file_name().is_none() {
        return Err(LedgerError::InvalidParameter(format!(
            "ledger path {} does not name a file",
            path.display()
        )));
    }
    // The key would be written first, at the ledger's path, and the ledger then refused as
    // existing (or as not a ledger).
    if let Some(key_file) = source.file_for(path)
        && same_file(path, &key_file)
    {
        return Err(LedgerError::Key {
            path: path.into(),
            reason: format!(
                "the key file {} is the ledger itself: the ledger and its key must be two files",
                key_file.display()
            ),
        });
    }
    let mut salt = [0u8; 16];
    let mut id = [0u8; 16];
    random_bytes(&mut salt)
        .and_then(|()| random_bytes(&mut id))
        .map_err(|e| io_error(path, std::io::Error::other(e)))?;
    let salt = hex(&salt);
    let key = Key::resolve(source, path, source.kind(), salt.as_bytes(), true)?;
    let bytes = build(path, budget, &key, source.kind(), &salt, &hex(&id))?;
    publish(&bytes, path, 0o644).map_err(|e| io_error(path, e))
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The bytes of a new ledger file.
fn build(
    path: &Path,
    budget: &Budget,
    key: &Key,
    kind: &str,
    salt: &str,
    ledger_id: &str,
) -> Result<Vec<u8>, LedgerError> {
    let mut conn = Connection::open_in_memory().map_err(|e| classify(path, e))?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| classify(path, e))?;
    let created = super::now_unix();
    let seal = meta_seal(key, ledger_id, budget, created, kind, salt);
    let key_check = key.seal(&[KEY_CHECK, ledger_id.as_bytes()]);
    let write = |tx: &Transaction<'_>| -> rusqlite::Result<()> {
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        tx.execute_batch(SCHEMA)?;
        tx.execute(
            "INSERT INTO ledger_meta (id, budget_epsilon, budget_delta, created_unix, ledger_id, \
             key_kind, key_salt, key_check, seal) VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                budget.epsilon,
                budget.delta,
                created,
                ledger_id,
                kind,
                salt,
                key_check,
                seal
            ],
        )?;
        Ok(())
    };
    write(&tx).map_err(|e| classify(path, e))?;
    tx.commit().map_err(|e| classify(path, e))?;
    let data = conn
        .serialize(rusqlite::MAIN_DB)
        .map_err(|e| classify(path, e))?;
    Ok(data.to_vec())
}

fn meta_seal(
    key: &Key,
    ledger_id: &str,
    budget: &Budget,
    created: i64,
    kind: &str,
    salt: &str,
) -> String {
    key.seal(&[
        b"meta",
        ledger_id.as_bytes(),
        &budget.epsilon.to_bits().to_le_bytes(),
        &budget.delta.to_bits().to_le_bytes(),
        &created.to_le_bytes(),
        kind.as_bytes(),
        salt.as_bytes(),
    ])
}

/// Whether `a` and `b` are one file: the same file on disk (links included), or one path once
/// their folders are resolved.
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        use std::os::unix::fs::MetadataExt;
        return (x.dev(), x.ino()) == (y.dev(), y.ino());
    }
    let resolved = |p: &Path| {
        std::fs::canonicalize(p).ok().or_else(|| {
            let folder = match p.parent() {
                Some(f) if !f.as_os_str().is_empty() => f,
                _ => Path::new("."),
            };
            Some(std::fs::canonicalize(folder).ok()?.join(p.file_name()?))
        })
    };
    match (resolved(a), resolved(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Writes `bytes` as the new file `path` with permissions `mode` (Unix), complete and synced
/// before it appears under its name; `Ok(false)` if a file is already there (it is never
/// replaced). The ledger and its key file are both made this way, so a process racing another
/// to create them never reads a half-written one.
///
/// # Errors
/// The I/O error, without any temporary name in it.
pub(super) fn publish(bytes: &[u8], path: &Path, mode: u32) -> std::io::Result<bool> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the path does not name a file"))?;
    let dir = parent_dir(path);
    #[cfg(target_os = "linux")]
    if let Some(done) = publish_unnamed(bytes, path, &dir, mode)? {
        return Ok(done);
    }
    publish_named(bytes, path, &dir, &name.to_string_lossy(), mode)
}

/// Linux: the bytes in an `O_TMPFILE` file of `dir`, linked to `path` once synced. `None` when
/// the file system has no `O_TMPFILE` (or `/proc` is missing): the caller falls back.
#[cfg(target_os = "linux")]
fn publish_unnamed(
    bytes: &[u8],
    path: &Path,
    dir: &Path,
    mode: u32,
) -> std::io::Result<Option<bool>> {
    use rustix::fs::{AtFlags, CWD, Mode, OFlags};
    use std::os::fd::AsRawFd;
    let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(dir, flags, Mode::from_bits_truncate(mode)) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut file = File::from(fd);
    file.write_all(bytes)?;
    file.sync_all()?;
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    match rustix::fs::linkat(CWD, proc_path.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW) {
        Ok(()) => sync_dir(dir).map(|()| Some(true)),
        Err(rustix::io::Errno::EXIST) => Ok(Some(false)),
        Err(rustix::io::Errno::NOENT) if !Path::new("/proc/self/fd").exists() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Elsewhere: the bytes under a temporary name in `dir`, hard-linked to `path`, the temporary
/// name removed. Errors name `path`, never the temporary name.
fn publish_named(
    bytes: &[u8],
    path: &Path,
    dir: &Path,
    name: &str,
    mode: u32,
) -> std::io::Result<bool> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{name}.{}-{}.creating",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let result = options
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| match fs::hard_link(&tmp, path) {
            Ok(()) => sync_dir(dir).map(|()| true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        });
    // The temporary name is only scaffolding; the published file keeps its own link.
    let _ = fs::remove_file(&tmp);
    result
}

/// Makes a new directory entry durable (a no-op where directories cannot be synced).
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    File::open(dir).and_then(|d| d.sync_all())?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Opens the existing ledger at `path`, validates all of it (structure first, then with the
/// key `source` gives every seal), and returns the connection, the budget stored in the file
/// and what its seals are checked with. Validation only reads: a refused file is left
/// byte-identical.
///
/// # Errors
/// [`LedgerError::Corrupt`] for a file that is not a dpml ledger of this schema version or
/// that is damaged in any way (see [`validate`]); [`LedgerError::Key`] when the key cannot be
/// had or does not open this ledger; [`LedgerError::Tampered`] when a row does not match its
/// seal; [`LedgerError::Io`] / [`LedgerError::Sqlite`] if it cannot be read.
pub(super) fn open_existing(
    path: &Path,
    source: &LedgerKey,
) -> Result<(Connection, Budget, Sealing), LedgerError> {
    check_header(path)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|e| classify(path, e))?;
    configure(&conn, path)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred);
    let tx = tx.map_err(|e| classify(path, e))?;
    let meta = validate(&tx, path)?;
    let key = Key::resolve(
        source,
        path,
        &meta.key_kind,
        meta.key_salt.as_bytes(),
        false,
    )?;
    if !same(
        &key.seal(&[KEY_CHECK, meta.ledger_id.as_bytes()]),
        &meta.key_check,
    ) {
        return Err(LedgerError::Key {
            path: path.to_path_buf(),
            reason: "the key does not open this ledger (another ledger's key file, or another \
                     passphrase)"
                .into(),
        });
    }
    let anchor = meta_seal(
        &key,
        &meta.ledger_id,
        &meta.budget,
        meta.created,
        &meta.key_kind,
        &meta.key_salt,
    );
    if !same(&anchor, &meta.seal) {
        return Err(tampered(path, "the budget row does not match its seal"));
    }
    let sealing = Sealing {
        key,
        anchor,
        ledger_id: meta.ledger_id,
    };
    read_entries(&tx, path, &sealing)?;
    read_segments(&tx, path, &sealing)?;
    tx.commit().map_err(|e| classify(path, e))?;
    Ok((conn, meta.budget, sealing))
}

/// Checks the first 100 bytes before SQLite sees the file: long enough, SQLite's magic string,
/// and rollback-journal format (a WAL-mode file would make SQLite create side files).
fn check_header(path: &Path) -> Result<(), LedgerError> {
    let mut header = Vec::with_capacity(100);
    let meta = fs::metadata(path).map_err(|e| io_error(path, e))?;
    if !meta.is_file() {
        return Err(corrupt(path, "not a regular file"));
    }
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

/// The budget row as stored.
struct Meta {
    budget: Budget,
    created: i64,
    ledger_id: String,
    key_kind: String,
    key_salt: String,
    key_check: String,
    seal: String,
}

/// Structural validation inside a read transaction: length against the page count, SQLite's
/// `integrity_check`, application id, schema version and the budget row.
fn validate(conn: &Connection, path: &Path) -> Result<Meta, LedgerError> {
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
    if version == 1 {
        return Err(corrupt(
            path,
            "schema version 1: made by an earlier dpml, whose entries carry no seals, so this \
             dpml cannot vouch for them (start a new ledger; the old one still reads with that \
             dpml)",
        ));
    }
    if version != i64::from(SCHEMA_VERSION) && version != SCHEMA_VERSION_WITHOUT_NEIGHBOURING {
        return Err(corrupt(
            path,
            format!(
                "schema version {version}, this dpml reads versions \
                 {SCHEMA_VERSION_WITHOUT_NEIGHBOURING} and {SCHEMA_VERSION}"
            ),
        ));
    }
    read_meta(conn, path)
}

fn read_meta(conn: &Connection, path: &Path) -> Result<Meta, LedgerError> {
    let mut stmt = conn
        .prepare(
            "SELECT budget_epsilon, budget_delta, created_unix, ledger_id, key_kind, key_salt, \
             key_check, seal FROM ledger_meta",
        )
        .map_err(|e| classify_read(path, e))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(Meta {
                budget: Budget {
                    epsilon: r.get(0)?,
                    delta: r.get(1)?,
                },
                created: r.get(2)?,
                ledger_id: r.get(3)?,
                key_kind: r.get(4)?,
                key_salt: r.get(5)?,
                key_check: r.get(6)?,
                seal: r.get(7)?,
            })
        })
        .map_err(|e| classify_read(path, e))?;
    let mut metas = rows
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| classify_read(path, e))?;
    if metas.len() != 1 {
        return Err(corrupt(
            path,
            format!("{} budget rows, expected exactly 1", metas.len()),
        ));
    }
    let meta = metas.remove(0);
    meta.budget
        .validate()
        .map_err(|e| corrupt(path, format!("stored budget: {e}")))?;
    Ok(meta)
}

/// The seal of an entry, chained to `prev`. `neighbouring` is the stored relation: '' for an
/// entry written before ledgers stored it, whose seal does not cover it (any other value is
/// sealed, so neither can be changed into the other).
fn entry_seal(key: &Key, prev: &str, e: &Entry, event_json: &str, neighbouring: &str) -> String {
    let (id, time) = (e.id.to_le_bytes(), e.time_unix.to_le_bytes());
    let (epsilon, delta) = (
        e.epsilon.to_bits().to_le_bytes(),
        e.delta.to_bits().to_le_bytes(),
    );
    let has_run = [u8::from(e.run.is_some())];
    let mut parts: Vec<&[u8]> = vec![
        b"entry",
        prev.as_bytes(),
        &id,
        &time,
        e.command.as_bytes(),
        e.dataset.as_bytes(),
        e.label.as_bytes(),
        event_json.as_bytes(),
        &epsilon,
        &delta,
        e.run.as_deref().map_or(b"-".as_slice(), |r| r.as_bytes()),
        &has_run,
    ];
    if !neighbouring.is_empty() {
        parts.extend([b"neighbouring".as_slice(), neighbouring.as_bytes()]);
    }
    key.seal(&parts)
}

/// The seal of a segment, chained to `prev`.
fn segment_seal(key: &Key, prev: &str, id: i64, time_unix: i64, s: &Segment) -> String {
    key.seal(&[
        b"segment",
        prev.as_bytes(),
        &id.to_le_bytes(),
        &time_unix.to_le_bytes(),
        s.run.as_bytes(),
        s.parent
            .as_deref()
            .map_or(b"-".as_slice(), |p| p.as_bytes()),
        &[u8::from(s.parent.is_some())],
        s.child.as_bytes(),
    ])
}

/// All entries in id order, each validated and its seal checked, with the seal of the last
/// (the chain's head, to which the next entry is chained).
///
/// # Errors
/// [`LedgerError::Corrupt`] naming the first entry whose event does not parse or whose ε or δ
/// is out of range; [`LedgerError::Tampered`] naming the first whose seal does not match.
pub(super) fn read_entries(
    conn: &Connection,
    path: &Path,
    sealing: &Sealing,
) -> Result<(Vec<Entry>, String), LedgerError> {
    let neighbouring = match schema_version(conn, path)? {
        SCHEMA_VERSION_WITHOUT_NEIGHBOURING => "''",
        _ => "neighbouring",
    };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT id, time_unix, command, dataset, label, event, epsilon, delta, run, seal, \
             {neighbouring} FROM ledger_entries ORDER BY id"
        ))
        .map_err(|e| classify_read(path, e))?;
    let mut rows = stmt.query([]).map_err(|e| classify_read(path, e))?;
    let mut entries = Vec::new();
    let mut head = sealing.anchor.clone();
    while let Some(row) = rows.next().map_err(|e| classify_read(path, e))? {
        type Read = (Entry, String, String, String);
        let read = |row: &rusqlite::Row<'_>| -> rusqlite::Result<Read> {
            let event_json: String = row.get(5)?;
            let entry = Entry {
                id: row.get(0)?,
                time_unix: row.get(1)?,
                command: row.get(2)?,
                dataset: row.get(3)?,
                label: row.get(4)?,
                event: PrivacyEvent::Composed { events: vec![] },
                epsilon: row.get(6)?,
                delta: row.get(7)?,
                run: row.get(8)?,
                neighbouring: Neighbouring::Record,
            };
            Ok((entry, event_json, row.get(9)?, row.get(10)?))
        };
        let (mut entry, event_json, seal, stored) =
            read(row).map_err(|e| classify_read(path, e))?;
        let id = entry.id;
        if !same(
            &entry_seal(&sealing.key, &head, &entry, &event_json, &stored),
            &seal,
        ) {
            return Err(tampered(
                path,
                format!(
                    "entry {id} does not match its seal (it was changed, or an entry before it \
                     was removed, outside dpml)"
                ),
            ));
        }
        entry.event = serde_json::from_str(&event_json)
            .map_err(|e| corrupt(path, format!("entry {id}: its event does not parse: {e}")))?;
        entry.neighbouring = match stored.as_str() {
            "" => Neighbouring::of_earlier_entry(&entry.command, &entry.label),
            name => Neighbouring::from_name(name).ok_or_else(|| {
                corrupt(
                    path,
                    format!("entry {id}: unknown neighbouring relation {name:?}"),
                )
            })?,
        };
        if !(entry.epsilon.is_finite() && entry.epsilon >= 0.0) {
            return Err(corrupt(
                path,
                format!("entry {id}: ε = {} is not finite and ≥ 0", entry.epsilon),
            ));
        }
        if !(0.0..1.0).contains(&entry.delta) {
            return Err(corrupt(
                path,
                format!("entry {id}: δ = {} is not in [0, 1)", entry.delta),
            ));
        }
        head = seal;
        entries.push(entry);
    }
    Ok((entries, head))
}

/// All segments in id order, their seals checked, with the chain's head.
///
/// # Errors
/// [`LedgerError::Tampered`] naming the first segment whose seal does not match.
pub(super) fn read_segments(
    conn: &Connection,
    path: &Path,
    sealing: &Sealing,
) -> Result<(Vec<Segment>, String), LedgerError> {
    let mut stmt = conn
        .prepare("SELECT id, time_unix, run, parent, child, seal FROM ledger_segments ORDER BY id")
        .map_err(|e| classify_read(path, e))?;
    let mut rows = stmt.query([]).map_err(|e| classify_read(path, e))?;
    let mut segments = Vec::new();
    let mut head = sealing.anchor.clone();
    while let Some(row) = rows.next().map_err(|e| classify_read(path, e))? {
        let read = |row: &rusqlite::Row<'_>| -> rusqlite::Result<(i64, i64, Segment, String)> {
            Ok((
                row.get(0)?,
                row.get(1)?,
                Segment {
                    run: row.get(2)?,
                    parent: row.get(3)?,
                    child: row.get(4)?,
                },
                row.get(5)?,
            ))
        };
        let (id, time, segment, seal) = read(row).map_err(|e| classify_read(path, e))?;
        if !same(
            &segment_seal(&sealing.key, &head, id, time, &segment),
            &seal,
        ) {
            return Err(tampered(
                path,
                format!("checkpoint record {id} does not match its seal"),
            ));
        }
        head = seal;
        segments.push(segment);
    }
    Ok((segments, head))
}

/// Appends `spend` (its event already serialised as `event_json`) as entry `id`, chained to
/// `prev`, and returns the entry.
///
/// # Errors
/// As [`classify`].
pub(super) fn insert(
    conn: &Connection,
    path: &Path,
    sealing: &Sealing,
    prev: &str,
    entry: &Entry,
    event_json: &str,
) -> Result<(), LedgerError> {
    if schema_version(conn, path)? == SCHEMA_VERSION_WITHOUT_NEIGHBOURING {
        // The first spend on a ledger an earlier dpml made: the column is added, and the
        // version raised, in the spend's own transaction (its entries keep their seals).
        conn.execute_batch(&format!(
            "ALTER TABLE ledger_entries ADD COLUMN {}; PRAGMA user_version = {SCHEMA_VERSION};",
            neighbouring_column!()
        ))
        .map_err(|e| classify(path, e))?;
    }
    let neighbouring = entry.neighbouring.name();
    let seal = entry_seal(&sealing.key, prev, entry, event_json, neighbouring);
    conn.execute(
        "INSERT INTO ledger_entries (id, time_unix, command, dataset, label, event, epsilon, \
         delta, run, seal, neighbouring) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            entry.id,
            entry.time_unix,
            entry.command,
            entry.dataset,
            entry.label,
            event_json,
            entry.epsilon,
            entry.delta,
            entry.run,
            seal,
            neighbouring
        ],
    )
    .map_err(|e| classify(path, e))?;
    Ok(())
}

/// The file's `PRAGMA user_version`.
fn schema_version(conn: &Connection, path: &Path) -> Result<i64, LedgerError> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| classify_read(path, e))
}

/// Appends `segment` chained to `prev` (the segments' head).
///
/// # Errors
/// As [`classify`].
pub(super) fn insert_segment(
    conn: &Connection,
    path: &Path,
    sealing: &Sealing,
    prev: &str,
    time_unix: i64,
    segment: &Segment,
) -> Result<(), LedgerError> {
    let id: i64 = conn
        .query_row(
            "SELECT COALESCE(MAX(id), 0) + 1 FROM ledger_segments",
            [],
            |r| r.get(0),
        )
        .map_err(|e| classify(path, e))?;
    let seal = segment_seal(&sealing.key, prev, id, time_unix, segment);
    conn.execute(
        "INSERT INTO ledger_segments (id, time_unix, run, parent, child, seal) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            id,
            time_unix,
            segment.run,
            segment.parent,
            segment.child,
            seal
        ],
    )
    .map_err(|e| classify(path, e))?;
    Ok(())
}

/// The entry recording `spend` as entry `id` at `time_unix`.
pub(super) fn entry_for(id: i64, time_unix: i64, spend: &Spend) -> Entry {
    Entry {
        id,
        time_unix,
        command: spend.command.clone(),
        dataset: spend.dataset.clone(),
        label: spend.label.clone(),
        event: spend.event.clone(),
        // −0 is 0: SQLite reads a stored −0.0 back as 0.0, and the row would no longer match
        // its seal (the ledger could not be opened again).
        epsilon: spend.epsilon + 0.0,
        delta: spend.delta + 0.0,
        run: spend.run.clone(),
        neighbouring: spend.neighbouring,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Budget = Budget {
        epsilon: 1.0,
        delta: 1e-5,
    };

    fn spend(epsilon: f64) -> Spend {
        Spend::new(
            "x",
            PrivacyEvent::Laplace {
                noise_multiplier: 1.0 / epsilon,
            },
            epsilon,
            0.0,
        )
    }

    /// A fresh ledger file with entries of ε 0.5, 0.25, 0.125, and a raw connection to tamper
    /// with it.
    fn ledger_with_entries(dir: &Path) -> (PathBuf, Connection) {
        let path = dir.join("l.db");
        assert!(create(&path, &BUDGET, &LedgerKey::Beside).unwrap());
        let (conn, budget, sealing) = open_existing(&path, &LedgerKey::Beside).unwrap();
        assert_eq!(budget, BUDGET);
        let mut prev = sealing.anchor.clone();
        for (i, eps) in [0.5, 0.25, 0.125].into_iter().enumerate() {
            let s = spend(eps);
            let entry = entry_for(i as i64 + 1, 0, &s);
            let json = serde_json::to_string(&s.event).unwrap();
            insert(&conn, &path, &sealing, &prev, &entry, &json).unwrap();
            prev = read_entries(&conn, &path, &sealing).unwrap().1;
        }
        (path, conn)
    }

    fn refusal(path: &Path) -> LedgerError {
        match open_existing(path, &LedgerKey::Beside) {
            Err(e) => e,
            Ok(_) => panic!("{} was opened", path.display()),
        }
    }

    fn corrupt_reason(path: &Path) -> String {
        match refusal(path) {
            LedgerError::Corrupt { reason, .. } => reason,
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    fn tampered_reason(path: &Path) -> String {
        match refusal(path) {
            LedgerError::Tampered { reason, .. } => reason,
            other => panic!("expected Tampered, got {other:?}"),
        }
    }

    #[test]
    fn a_created_ledger_validates_and_is_append_only() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_entries(dir.path());
        let (_, _, sealing) = open_existing(&path, &LedgerKey::Beside).unwrap();
        assert_eq!(read_entries(&conn, &path, &sealing).unwrap().0.len(), 3);
        assert!(
            conn.execute("UPDATE ledger_entries SET epsilon = 0", [])
                .is_err()
        );
        assert!(conn.execute("DELETE FROM ledger_entries", []).is_err());
        assert!(
            conn.execute("UPDATE ledger_meta SET budget_epsilon = 9", [])
                .is_err()
        );
        // Nothing was left behind under a temporary name: the ledger and its key alone.
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["l.db", "l.db.key"]);
        // Creating again where a ledger is does not replace it.
        assert!(!create(&path, &BUDGET, &LedgerKey::Beside).unwrap());
    }

    #[test]
    fn a_stored_epsilon_overwritten_outside_dpml_is_refused_by_its_seal() {
        // The review's case: a valid SQLite file, integrity_check passes, one entry's stored
        // 0.5 overwritten with 0.0 would have given budget back.
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_entries(dir.path());
        conn.execute_batch(
            "DROP TRIGGER ledger_entries_append_only_update;
             UPDATE ledger_entries SET epsilon = 0.0 WHERE id = 1;",
        )
        .unwrap();
        let reason = tampered_reason(&path);
        assert!(
            reason.contains("entry 1 does not match its seal"),
            "{reason}"
        );
    }

    #[test]
    fn a_removed_entry_a_changed_event_or_budget_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_entries(dir.path());
        conn.execute_batch(
            "DROP TRIGGER ledger_entries_append_only_delete;
             DELETE FROM ledger_entries WHERE id = 2;",
        )
        .unwrap();
        assert!(tampered_reason(&path).contains("entry 3"));

        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_entries(dir.path());
        conn.execute_batch(
            "DROP TRIGGER ledger_entries_append_only_update;
             UPDATE ledger_entries SET event = '{\"type\":\"laplace\",\"noise_multiplier\":1e9}'
                 WHERE id = 2;",
        )
        .unwrap();
        assert!(tampered_reason(&path).contains("entry 2"));

        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_entries(dir.path());
        conn.execute_batch(
            "DROP TRIGGER ledger_meta_fixed_update;
             UPDATE ledger_meta SET budget_epsilon = 100.0;",
        )
        .unwrap();
        assert!(tampered_reason(&path).contains("budget row"));
    }

    #[test]
    fn another_key_is_told_apart_from_a_changed_row() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _conn) = ledger_with_entries(dir.path());
        let other = dir.path().join("other.key");
        create(
            &dir.path().join("other.db"),
            &BUDGET,
            &LedgerKey::File(other.clone()),
        )
        .unwrap();
        match open_existing(&path, &LedgerKey::File(other)) {
            Err(LedgerError::Key { reason, .. }) => {
                assert!(reason.contains("does not open this ledger"), "{reason}")
            }
            Err(other) => panic!("expected Key, got {other:?}"),
            Ok(_) => panic!("opened with another ledger's key"),
        }
        fs::remove_file(LedgerKey::Beside.file_for(&path).unwrap()).unwrap();
        match refusal(&path) {
            LedgerError::Key { reason, .. } => {
                assert!(reason.contains("does not exist"), "{reason}")
            }
            other => panic!("expected Key, got {other:?}"),
        }
    }

    #[test]
    fn a_passphrase_ledger_opens_with_its_passphrase_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let pass = LedgerKey::Passphrase("correct horse".into());
        create(&path, &BUDGET, &pass).unwrap();
        assert!(open_existing(&path, &pass).is_ok());
        let wrong = LedgerKey::Passphrase("battery staple".into());
        assert!(matches!(
            open_existing(&path, &wrong),
            Err(LedgerError::Key { .. })
        ));
        assert!(matches!(refusal(&path), LedgerError::Key { .. }));
        // No key file was made for it.
        assert!(!LedgerKey::Beside.file_for(&path).unwrap().exists());
    }

    #[test]
    fn a_negative_epsilon_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_entries(dir.path());
        conn.execute_batch("PRAGMA ignore_check_constraints = ON")
            .unwrap();
        conn.execute(
            "INSERT INTO ledger_entries (time_unix, command, dataset, label, event, epsilon, \
             delta, seal) VALUES (0, '', '', 'y', '{}', -0.5, 0.0, '')",
            [],
        )
        .unwrap();
        // SQLite's integrity check sees the violated CHECK constraint.
        let reason = corrupt_reason(&path);
        assert!(
            reason.contains("CHECK constraint failed in ledger_entries"),
            "{reason}"
        );
    }

    /// An entry's relation is sealed: changed by hand, or blanked to pass for an entry written
    /// before relations were stored, it is refused.
    #[test]
    fn a_changed_neighbouring_relation_is_refused_by_its_seal() {
        for changed in ["label", ""] {
            let dir = tempfile::tempdir().unwrap();
            let (path, conn) = ledger_with_entries(dir.path());
            conn.execute_batch(&format!(
                "DROP TRIGGER ledger_entries_append_only_update;
                 UPDATE ledger_entries SET neighbouring = '{changed}' WHERE id = 2;"
            ))
            .unwrap();
            let reason = tampered_reason(&path);
            assert!(reason.contains("entry 2 does not match"), "{reason}");
        }
    }

    /// A ledger of schema version 2 (before entries stored their relation) reads with each
    /// entry's relation taken from its command and label, and its seals as they were; its first
    /// spend adds the column and raises the version, in the spend's transaction.
    #[test]
    fn a_version_2_ledger_reads_and_is_upgraded_by_its_first_spend() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        assert!(create(&path, &BUDGET, &LedgerKey::Beside).unwrap());
        let (conn, _, sealing) = open_existing(&path, &LedgerKey::Beside).unwrap();
        // The table as version 2 made it, with two entries sealed as version 2 sealed them.
        conn.execute_batch(
            "DROP TABLE ledger_entries;
             CREATE TABLE ledger_entries (id INTEGER PRIMARY KEY AUTOINCREMENT, time_unix \
             INTEGER NOT NULL, command TEXT NOT NULL, dataset TEXT NOT NULL, label TEXT NOT \
             NULL, event TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL, run TEXT, \
             seal TEXT NOT NULL) STRICT;
             PRAGMA user_version = 2;",
        )
        .unwrap();
        let mut prev = sealing.anchor.clone();
        for (id, command) in [(1, "label-dp"), (2, "label-dp")] {
            let entry = entry_for(id, 0, &spend(0.25).by(command, "iris"));
            let json = serde_json::to_string(&entry.event).unwrap();
            let seal = entry_seal(&sealing.key, &prev, &entry, &json, "");
            conn.execute(
                "INSERT INTO ledger_entries (id, time_unix, command, dataset, label, event, \
                 epsilon, delta, run, seal) VALUES (?1, 0, ?2, 'iris', 'x', ?3, 0.25, 0.0, \
                 NULL, ?4)",
                params![id, command, json, seal],
            )
            .unwrap();
            prev = seal;
        }
        let (conn, _, sealing) = open_existing(&path, &LedgerKey::Beside).unwrap();
        let (entries, head) = read_entries(&conn, &path, &sealing).unwrap();
        assert!(
            entries
                .iter()
                .all(|e| e.neighbouring == Neighbouring::Label)
        );
        assert_eq!(schema_version(&conn, &path).unwrap(), 2);
        let next = entry_for(3, 0, &spend(0.25).under(Neighbouring::Label));
        let json = serde_json::to_string(&next.event).unwrap();
        insert(&conn, &path, &sealing, &head, &next, &json).unwrap();
        assert_eq!(
            schema_version(&conn, &path).unwrap(),
            i64::from(SCHEMA_VERSION)
        );
        let (conn, _, sealing) = open_existing(&path, &LedgerKey::Beside).unwrap();
        let (entries, _) = read_entries(&conn, &path, &sealing).unwrap();
        assert_eq!(entries.len(), 3);
        assert!(
            entries
                .iter()
                .all(|e| e.neighbouring == Neighbouring::Label)
        );
    }

    #[test]
    fn wrong_schema_version_or_missing_budget_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_entries(dir.path());
        conn.pragma_update(None, "user_version", 4).unwrap();
        assert!(corrupt_reason(&path).contains("schema version 4"));
        conn.pragma_update(None, "user_version", 1).unwrap();
        assert!(corrupt_reason(&path).contains("no seals"));
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
            .unwrap();
        conn.execute_batch("DROP TRIGGER ledger_meta_fixed_delete; DELETE FROM ledger_meta;")
            .unwrap();
        assert!(corrupt_reason(&path).contains("0 budget rows"));
    }

    #[test]
    fn a_wal_mode_database_is_refused_before_sqlite_opens_it() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = ledger_with_entries(dir.path());
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        drop(conn);
        let before = fs::read(&path).unwrap();
        assert!(corrupt_reason(&path).contains("file format versions 2/2"));
        assert_eq!(fs::read(&path).unwrap(), before);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_device_as_the_ledger_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.db");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status();
        if status.is_ok_and(|s| s.success()) {
            assert!(corrupt_reason(&fifo).contains("not a regular file"));
        }
        assert!(corrupt_reason(Path::new("/dev/zero")).contains("not a regular file"));
    }

    #[test]
    fn an_error_while_creating_names_the_ledger_not_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir").join("l.db");
        let err = create(&missing, &BUDGET, &LedgerKey::File(dir.path().join("k")))
            .unwrap_err()
            .to_string();
        assert!(!err.contains(".creating"), "{err}");
        assert!(err.contains("l.db"), "{err}");
    }
}
