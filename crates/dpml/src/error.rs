//! How failures leave the program: exit code 2 with one `error: …` line for bad input or
//! usage, exit code 1 for internal failures (design doc, command-line contract).

use std::fmt;

/// A failure of a command, classified for its exit code.
#[derive(Debug)]
pub enum CliError {
    /// The user's input or usage was wrong (exit 2). The message names the bad value.
    Usage(String),
    /// Something failed that the user could not have prevented (exit 1).
    Internal(String),
}

impl CliError {
    /// A usage error from anything printable.
    pub fn usage(msg: impl fmt::Display) -> Self {
        CliError::Usage(one_line(&msg.to_string()))
    }

    /// An internal error from anything printable.
    pub fn internal(msg: impl fmt::Display) -> Self {
        CliError::Internal(one_line(&msg.to_string()))
    }

    /// The process exit code for this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Internal(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) => write!(f, "{m}"),
            CliError::Internal(m) => write!(f, "internal error: {m}"),
        }
    }
}

/// Errors are reported on one line, so a multi-line library message is folded.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Library errors come from the user's parameters, files or data: exit 2.
macro_rules! usage_from {
    ($($t:ty),*) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> Self { CliError::usage(e) }
        }
    )*};
}
usage_from!(
    dpml_mechanisms::MechanismError,
    dpml_accounting::AccountingError,
    dpml_data::DataError,
    dpml_learn::LearnError,
    dpml_learn::dpsgd::DpSgdError,
    dpml_learn::perturbation::PerturbationError
);

/// A ledger's refusals (over budget, a different budget, a damaged or missing file, bad
/// parameters) are the user's to fix: exit 2. A ledger the environment keeps us from using
/// (locked past the busy timeout, read-only, a failing disk) is a runtime failure: exit 1,
/// so a script can tell "not allowed" from "try again".
impl From<dpml_accounting::ledger::LedgerError> for CliError {
    fn from(e: dpml_accounting::ledger::LedgerError) -> Self {
        if e.is_environmental() {
            CliError::internal(e)
        } else {
            CliError::usage(e)
        }
    }
}

/// The result type of every command.
pub type CliResult<T> = Result<T, CliError>;
