//! The one error type of DP SQL, classified the way a front reports it: the user's input
//! (a query construct refused, a table or schema that cannot be used: the command line exits
//! 2, Python raises `ValueError`), the budget ledger's refusals, and internal failures.
//!
//! Messages never quote a private value: DataFusion's own errors while reading private rows
//! can name a row or a value, so they are reported by [`SqlError::data`] without their text.

use std::fmt;

/// A failure of a DP SQL query.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlError {
    /// A construct of the query that the DP rewrite does not accept, refused before any data
    /// is read: what it is and why.
    Refused {
        /// The construct, as the query writes it (or as the plan shows it).
        construct: String,
        /// Why it is refused.
        reason: String,
    },
    /// Bad input: a table, path, schema, flag or parameter (the message names it).
    Input(String),
    /// The budget ledger refused the spend or cannot be used: nothing was released.
    Ledger {
        /// The ledger's message.
        message: String,
        /// The environment keeps the ledger from being used (locked, read-only, a failing
        /// disk) rather than the ledger refusing (over budget, damaged): try again later.
        environmental: bool,
    },
    /// The query needs more memory than its limit, even spilling to disk: an operator that
    /// cannot spill outgrew what was left of the pool.
    OutOfMemory {
        /// The limit, in bytes.
        limit: u64,
        /// Whether the failure came after the noise was drawn (the spend was then recorded).
        charged: bool,
    },
    /// The Ballista cluster failed the query (its scheduler out of reach, its executors
    /// lost): nothing was released or charged.
    Cluster {
        /// The scheduler's address.
        address: String,
        /// What failed.
        what: String,
    },
    /// Something failed that the caller could not have prevented.
    Internal(String),
}

impl SqlError {
    /// A refused construct.
    pub fn refused(construct: impl fmt::Display, reason: impl fmt::Display) -> Self {
        SqlError::Refused {
            construct: construct.to_string(),
            reason: reason.to_string(),
        }
    }

    /// Bad input.
    pub fn input(msg: impl fmt::Display) -> Self {
        SqlError::Input(msg.to_string())
    }

    /// An internal failure.
    pub fn internal(msg: impl fmt::Display) -> Self {
        SqlError::Internal(msg.to_string())
    }

    /// A failure while reading the private rows of `what`: DataFusion's message may quote a
    /// value or a row number, so only the kind of failure is kept.
    pub fn data(what: &str, e: &datafusion::error::DataFusionError) -> Self {
        use datafusion::error::DataFusionError as E;
        let kind = match e.find_root() {
            E::IoError(_) | E::ObjectStore(_) => "the file could not be read",
            E::ParquetError(_) => "a Parquet file is damaged or not Parquet",
            E::ArrowError(..) => {
                "a value does not parse as its column's type, or a file is damaged"
            }
            E::ResourcesExhausted(_) => "out of memory",
            _ => "the engine failed",
        };
        SqlError::Input(format!(
            "reading the private rows of {what} failed ({kind}); nothing was released or \
             charged (the engine's message is withheld: it can quote a private value)"
        ))
    }

    /// Whether the caller's input caused it (exit 2 / `ValueError`): a refused construct, bad
    /// input, a memory limit too small for the query, or a ledger's refusal (over budget,
    /// another budget, a damaged file).
    pub fn is_input(&self) -> bool {
        match self {
            SqlError::Refused { .. } | SqlError::Input(_) | SqlError::OutOfMemory { .. } => true,
            SqlError::Ledger { environmental, .. } => !environmental,
            SqlError::Cluster { .. } | SqlError::Internal(_) => false,
        }
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlError::Refused { construct, reason } => write!(f, "refused: {construct}: {reason}"),
            SqlError::Input(m) | SqlError::Ledger { message: m, .. } => f.write_str(m),
            SqlError::OutOfMemory { limit, charged } => write!(
                f,
                "the query needs more than the memory limit {}: an operator that cannot spill \
                 to disk (a hash join, a sort's final merge, one unit's rows being bounded) \
                 outgrew it; raise the limit; {}",
                crate::memory::format_bytes(*limit),
                if *charged {
                    "the budget was charged (the noise had been drawn), nothing was released"
                } else {
                    "nothing was released or charged"
                }
            ),
            SqlError::Cluster { address, what } => write!(
                f,
                "the cluster at {address} failed the query: {what}; nothing was released or \
                 charged"
            ),
            SqlError::Internal(m) => write!(f, "internal error: {m}"),
        }
    }
}

impl std::error::Error for SqlError {}

impl From<dpml_data::DataError> for SqlError {
    fn from(e: dpml_data::DataError) -> Self {
        SqlError::input(e)
    }
}

impl From<dpml_mechanisms::MechanismError> for SqlError {
    fn from(e: dpml_mechanisms::MechanismError) -> Self {
        SqlError::input(e)
    }
}

impl From<dpml_accounting::ledger::LedgerError> for SqlError {
    fn from(e: dpml_accounting::ledger::LedgerError) -> Self {
        SqlError::Ledger {
            environmental: e.is_environmental(),
            message: e.to_string(),
        }
    }
}

/// The result type of DP SQL.
pub type Result<T> = std::result::Result<T, SqlError>;

/// An error from planning (no private row read yet): DataFusion's planning messages name
/// tables, columns and types, never values, so they are kept.
pub(crate) fn plan_err(e: datafusion::error::DataFusionError) -> SqlError {
    SqlError::input(one_line(&e.strip_backtrace()))
}

/// A planning message on one line: a failed signature match (DataFusion lists every candidate
/// and asks for a bug report) becomes the call that matched nothing; otherwise the first line.
fn one_line(msg: &str) -> String {
    const NO_MATCH: &str = "No function matches the given name and argument types '";
    if let Some(call) = msg
        .find(NO_MATCH)
        .and_then(|at| msg[at + NO_MATCH.len()..].split('\'').next())
    {
        return format!(
            "no function {call} exists: is a column of another type than the function takes? \
             (cast it explicitly)"
        );
    }
    // A context's first line names the planning step, the last one the cause ("Optimizer rule
    // 'simplify_expressions' failed", "caused by", "Cast error: Cannot cast string 'a' …").
    let lines: Vec<&str> = msg
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match (lines.first(), lines.last()) {
        (Some(first), Some(last)) if lines.len() > 1 => format!("{first}: {last}"),
        _ => msg.trim().to_string(),
    }
}

/// The memory-limit error for `e` when the pool of limit `limit` ran out (`charged`: after
/// the noise was drawn); None for any other failure or without a limit.
pub(crate) fn out_of_memory(
    e: &datafusion::error::DataFusionError,
    limit: Option<u64>,
    charged: bool,
) -> Option<SqlError> {
    use datafusion::error::DataFusionError as E;
    match (e.find_root(), limit) {
        (E::ResourcesExhausted(_), Some(limit)) => Some(SqlError::OutOfMemory { limit, charged }),
        _ => None,
    }
}
