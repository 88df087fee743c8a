//! The workflows' one error type, classified the way a front reports it: the user's input
//! (a value, file or data: the command line exits 2, Python raises `ValueError`), the
//! environment (network, a locked ledger, a checkpoint that cannot be written: exit 1), or a
//! failure nobody outside could have prevented (exit 1).

use std::fmt;

/// A failure of a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The caller's input was refused; the message names the bad value.
    Usage(String),
    /// The environment failed.
    Runtime(String),
    /// Something failed that the caller could not have prevented.
    Internal(String),
}

impl Error {
    /// A usage error from anything printable.
    pub fn usage(msg: impl fmt::Display) -> Self {
        Error::Usage(msg.to_string())
    }

    /// An internal error from anything printable.
    pub fn internal(msg: impl fmt::Display) -> Self {
        Error::Internal(msg.to_string())
    }

    /// A failure of the environment from anything printable.
    pub fn runtime(msg: impl fmt::Display) -> Self {
        Error::Runtime(msg.to_string())
    }

    /// The message without the `internal error: ` prefix [`fmt::Display`] adds.
    pub fn message(&self) -> &str {
        match self {
            Error::Usage(m) | Error::Runtime(m) | Error::Internal(m) => m,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) | Error::Runtime(m) => write!(f, "{m}"),
            Error::Internal(m) => write!(f, "internal error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

/// The result type of every workflow.
pub type Result<T> = std::result::Result<T, Error>;

/// Library errors come from the caller's parameters, files or data.
macro_rules! usage_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self { Error::usage(e) }
        }
    )*};
}
usage_from!(
    dpml_mechanisms::MechanismError,
    dpml_accounting::AccountingError,
    dpml_learn::LearnError,
    dpml_learn::perturbation::PerturbationError
);

/// Training errors are the caller's except the environment's: a checkpoint that cannot be
/// written, processes of a data-parallel run that disagree.
impl From<dpml_learn::dpsgd::DpSgdError> for Error {
    fn from(e: dpml_learn::dpsgd::DpSgdError) -> Self {
        if e.is_runtime() {
            Error::runtime(e)
        } else {
            Error::usage(e)
        }
    }
}

/// A ledger's refusals (over budget, a different budget, a damaged or missing file, bad
/// parameters) are the caller's to fix; a ledger the environment keeps us from using (locked
/// past the busy timeout, read-only, a failing disk) is a runtime failure, so that a script
/// can tell "not allowed" from "try again".
impl From<dpml_accounting::ledger::LedgerError> for Error {
    fn from(e: dpml_accounting::ledger::LedgerError) -> Self {
        if e.is_environmental() {
            Error::runtime(e)
        } else {
            Error::usage(e)
        }
    }
}

/// Data errors are bad input (a missing or malformed file, a bad value), except a failed
/// download: the network, not the caller, failed.
impl From<dpml_data::DataError> for Error {
    fn from(e: dpml_data::DataError) -> Self {
        match e {
            dpml_data::DataError::Download { .. } => Error::runtime(e),
            other => Error::usage(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_keep_their_messages() {
        assert_eq!(Error::usage("bad -1").to_string(), "bad -1");
        assert_eq!(Error::internal("disk").to_string(), "internal error: disk");
        assert_eq!(Error::internal("disk").message(), "disk");
        assert!(matches!(Error::runtime("net"), Error::Runtime(_)));
    }
}
