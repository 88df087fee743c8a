//! The one error type of DP SQL, classified the way a front reports it: the user's input
//! (a query construct refused, a table or schema that cannot be used: the command line exits
//! 2, Python raises `ValueError`), the budget ledger's refusals, and internal failures.
//!
//! Messages never quote a private value: DataFusion's own errors while reading private rows
//! can name a row or a value, so they are reported by [`SqlError::data`] without their text.
//!
//! A failure while the private rows are read can depend on them (a memory limit that one
//! unit's rows push a query past, a task that fails on one value), so it is charged: the
//! engine records the spend before the first private row is read, and such an error says so
//! (see [`SqlError::after_charge`]).

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
    /// Reading the private rows failed (a damaged file; a CSV value that does not parse is read
    /// as NULL instead): only the kind of failure is told, DataFusion's message can quote a
    /// private value.
    Data {
        /// The tables read.
        tables: String,
        /// What kind of failure it was.
        kind: &'static str,
        /// Whether the query's spend had been recorded in a ledger.
        charged: bool,
    },
    /// The query needs more memory than its limit, even spilling to disk: an operator that
    /// cannot spill outgrew what was left of the pool.
    OutOfMemory {
        /// The limit, in bytes.
        limit: u64,
        /// Whether the query's spend had been recorded in a ledger.
        charged: bool,
    },
    /// The Ballista cluster failed the query (its scheduler out of reach, its executors
    /// lost): nothing was released.
    Cluster {
        /// The scheduler's address.
        address: String,
        /// What failed.
        what: String,
        /// Whether the query's spend had been recorded in a ledger.
        charged: bool,
    },
    /// Something failed that the caller could not have prevented.
    Internal(String),
}

impl SqlError {
    /// A refused construct.
    pub fn refused(construct: impl fmt::Display, reason: impl fmt::Display) -> Self {
        SqlError::Refused {
            construct: shorten(construct.to_string()),
            reason: shorten_middle(reason.to_string()),
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

    /// A failure of the query over the private rows of `what` (in them, or in a public part
    /// joined to them): DataFusion's message may quote a value or a row number, so only the
    /// kind of failure is kept.
    pub fn data(what: &str, e: &datafusion::error::DataFusionError) -> Self {
        use datafusion::arrow::error::ArrowError;
        use datafusion::error::DataFusionError as E;
        let kind = match e.find_root() {
            E::IoError(_) | E::ObjectStore(_) => "the file could not be read",
            E::ParquetError(_) => "a Parquet file is damaged or not Parquet",
            E::ArrowError(e, _) => match e.as_ref() {
                ArrowError::CastError(_)
                | ArrowError::ComputeError(_)
                | ArrowError::DivideByZero
                | ArrowError::ArithmeticOverflow(_) => {
                    "a value could not be computed (a cast, an overflow or a division by zero)"
                }
                _ => "a file is damaged",
            },
            E::ResourcesExhausted(_) => "out of memory",
            _ => "the engine failed",
        };
        SqlError::Data {
            tables: what.to_string(),
            kind,
            charged: false,
        }
    }

    /// The same failure, after the query's spend was recorded in a ledger: whether a query
    /// fails while its private rows are read can depend on them, so a failure from then on is
    /// paid for like a release (otherwise it would answer questions about them for free).
    #[must_use]
    pub fn after_charge(self) -> Self {
        match self {
            SqlError::Data { tables, kind, .. } => SqlError::Data {
                tables,
                kind,
                charged: true,
            },
            SqlError::OutOfMemory { limit, .. } => SqlError::OutOfMemory {
                limit,
                charged: true,
            },
            SqlError::Cluster { address, what, .. } => SqlError::Cluster {
                address,
                what,
                charged: true,
            },
            SqlError::Input(m) => SqlError::Input(format!("{m}; {}", outcome(true))),
            SqlError::Internal(m) => SqlError::Internal(format!("{m}; {}", outcome(true))),
            // A check that needs released cells (a public side computed from them) refuses
            // only once the spend is recorded: the refusal must not read as a free one.
            SqlError::Refused { construct, reason } => SqlError::Refused {
                construct,
                reason: format!("{reason}; {}", outcome(true)),
            },
            ledger @ SqlError::Ledger { .. } => ledger,
        }
    }

    /// Whether the caller's input caused it (exit 2 / `ValueError`): a refused construct, bad
    /// input, a memory limit too small for the query, or a ledger's refusal (over budget,
    /// another budget, a damaged file).
    pub fn is_input(&self) -> bool {
        match self {
            SqlError::Refused { .. }
            | SqlError::Input(_)
            | SqlError::Data { .. }
            | SqlError::OutOfMemory { .. } => true,
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
            SqlError::Data {
                tables,
                kind,
                charged,
            } => write!(
                f,
                "the query over the private rows of {tables} failed ({kind}); {} (the \
                 engine's message is withheld: it can quote a private value)",
                outcome(*charged)
            ),
            SqlError::OutOfMemory { limit, charged } => write!(
                f,
                "the query needs more than the memory limit {}: an operator that cannot spill \
                 to disk (a hash join, a sort's final merge, one unit's rows being bounded) \
                 outgrew it; raise the limit; {}",
                crate::memory::format_bytes(*limit),
                outcome(*charged)
            ),
            SqlError::Cluster {
                address,
                what,
                charged,
            } => write!(
                f,
                "the cluster at {address} failed the query: {what}; {}",
                outcome(*charged)
            ),
            SqlError::Internal(m) => write!(f, "internal error: {m}"),
        }
    }
}

impl std::error::Error for SqlError {}

/// What a failed query cost, as its message ends.
fn outcome(charged: bool) -> &'static str {
    if charged {
        "nothing was released; the query's spend was recorded in the ledger before its \
         private rows were read"
    } else {
        "nothing was released or charged"
    }
}

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
    if let Some(call) = msg.find(NO_MATCH).and_then(|at| {
        // The call ends at the line's last quote: a type name can hold quotes of its own
        // (`List(Int64, field: 'item', …)`).
        let rest = msg[at + NO_MATCH.len()..]
            .lines()
            .next()
            .unwrap_or_default();
        rest.rfind('\'').map(|end| &rest[..end])
    }) {
        return format!(
            "no function {call} exists: is a column of another type than the function takes? \
             (cast it explicitly, or declare a CSV column's type in the schema)"
        );
    }
    // The analyser's type coercion cannot resolve a column an outer query holds two or more
    // subqueries down; it names only the fields it could see.
    if msg.starts_with("type_coercion") && msg.contains("Valid fields are") {
        return format!(
            "a column is not known where it is used: a subquery may refer to the columns of \
             the query directly around it, not to those of a query further out ({})",
            shorten(msg.lines().next().unwrap_or_default().to_string())
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

/// The memory-limit error for `e` when the pool of limit `limit` ran out (before any charge:
/// see [`SqlError::after_charge`]); None for any other failure or without a limit.
pub(crate) fn out_of_memory(
    e: &datafusion::error::DataFusionError,
    limit: Option<u64>,
) -> Option<SqlError> {
    use datafusion::error::DataFusionError as E;
    match (e.find_root(), limit) {
        (E::ResourcesExhausted(_), Some(limit)) => Some(SqlError::OutOfMemory {
            limit,
            charged: false,
        }),
        _ => None,
    }
}

/// A construct quoted in a message, cut to at most [`MAX_QUOTED`] characters: a query can hold
/// constants of many kilobytes, and the message is one line.
fn shorten(text: String) -> String {
    match text.char_indices().nth(MAX_QUOTED) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// A refusal's reason, which can quote expressions, cut in its middle to at most
/// [`MAX_REASON`] characters: the end of a reason (why, and what to do) is kept, where a
/// message cut at its end would lose it.
fn shorten_middle(text: String) -> String {
    let n = text.chars().count();
    if n <= MAX_REASON {
        return text;
    }
    let head: String = text.chars().take(MAX_QUOTED).collect();
    let tail: String = text.chars().skip(n - (MAX_REASON - MAX_QUOTED)).collect();
    format!("{head}…{tail}")
}

/// The most characters of a refusal's reason.
const MAX_REASON: usize = 1000;

/// The most characters of a construct a message quotes.
const MAX_QUOTED: usize = 300;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_refusal_keeps_its_reason_and_a_quoted_type_its_name() {
        let product = vec!["t.v"; 2000].join(" * ");
        let e = SqlError::refused(
            format!("sum({product})"),
            format!("the range of {product} is not finite: declare narrower bounds"),
        );
        let msg = e.to_string();
        assert!(msg.chars().count() < 1400, "{msg}");
        assert!(
            msg.ends_with("is not finite: declare narrower bounds"),
            "{msg}"
        );
        let msg = "Error during planning: No function matches the given name and argument \
                   types 'median(List(Int64, field: 'item', nullable))'. You might need to add \
                   explicit type casts.\n\tCandidate functions:\n\tmedian(Any)";
        let line = one_line(msg);
        assert!(
            line.starts_with("no function median(List(Int64, field: 'item', nullable)) exists"),
            "{line}"
        );
    }
}
