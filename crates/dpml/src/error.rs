//! How failures leave the program: exit code 2 with one `error: …` line for bad input or
//! usage, exit code 1 for internal failures (design doc, command-line contract).

use std::fmt;

/// A failure of a command, classified for its exit code.
#[derive(Debug)]
pub enum CliError {
    /// The command line does not parse: an unknown flag, a missing argument (exit 2).
    Parse(String),
    /// The user's input was refused: a value, file or data (exit 2). The message names the bad
    /// value.
    Usage(String),
    /// The environment failed: the network, a locked or read-only ledger (exit 1).
    Runtime(String),
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

    /// A failure of the environment (network, file system) from anything printable.
    pub fn runtime(msg: impl fmt::Display) -> Self {
        CliError::Runtime(one_line(&msg.to_string()))
    }

    /// A command line that does not parse (clap's message, folded to one line).
    pub fn parse(msg: impl fmt::Display) -> Self {
        CliError::Parse(one_line(&msg.to_string()))
    }

    /// The process exit code for this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Parse(_) | CliError::Usage(_) => 2,
            CliError::Runtime(_) | CliError::Internal(_) => 1,
        }
    }

    /// The `"kind"` of the `--json` error object.
    pub fn kind(&self) -> &'static str {
        match self {
            CliError::Parse(_) => "usage",
            CliError::Usage(_) => "bad_input",
            CliError::Runtime(_) | CliError::Internal(_) => "runtime",
        }
    }

    /// The `--json` error object: `{"error": {"kind", "message", "exit_code"}}`, the message
    /// being the text of the `error: …` line.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"error": {
            "kind": self.kind(),
            "message": self.to_string(),
            "exit_code": self.exit_code(),
        }})
    }

    /// Reports the failure and ends the process: one `error: …` line on stderr and, with
    /// `json`, the error object on stdout (a script reading stdout learns why there is no
    /// result). Neither write may panic; the exit code says what happened even if both fail.
    pub fn exit(&self, json: bool) -> ! {
        crate::output::diag!("error: {self}");
        if json {
            use std::io::Write as _;
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", self.to_json()).and_then(|()| stdout.flush());
        }
        std::process::exit(self.exit_code())
    }
}

/// Whether `--json` is on the command line, read from the raw arguments: a usage error is
/// found before clap has parsed the flag, and must still print its JSON object. Arguments
/// after `--` are values, not flags.
pub fn json_requested(args: impl IntoIterator<Item = std::ffi::OsString>) -> bool {
    args.into_iter()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Parse(m) | CliError::Usage(m) | CliError::Runtime(m) => write!(f, "{m}"),
            CliError::Internal(m) => write!(f, "internal error: {m}"),
        }
    }
}

/// The most characters of an error message: the messages quote the user's values and cut
/// them, and this cuts whatever a library did not.
const MAX_MESSAGE_CHARS: usize = 2000;

/// Errors are reported on one line, so a multi-line library message is folded, numbers too
/// long to read are shortened ([`dpml_core::numbers::short_numbers`]), control characters escaped
/// ([`crate::output::printable`]) and the line cut to [`MAX_MESSAGE_CHARS`].
fn one_line(s: &str) -> String {
    let folded = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut = match folded.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((at, _)) => format!("{}… (cut)", &folded[..at]),
        None => folded,
    };
    dpml_core::numbers::short_numbers(&crate::output::printable(&cut))
}

/// The library's classification decides the exit code: its usage errors are the user's
/// (exit 2), the rest the environment's or internal (exit 1). Messages are folded to one line
/// here, the command line's rule.
impl From<dpml_core::Error> for CliError {
    fn from(e: dpml_core::Error) -> Self {
        match e {
            dpml_core::Error::Usage(m) => CliError::usage(m),
            dpml_core::Error::Runtime(m) => CliError::runtime(m),
            dpml_core::Error::Internal(m) => CliError::internal(m),
        }
    }
}

/// Library errors are classified once, in [`dpml_core::Error`]'s conversions.
macro_rules! via_core {
    ($($t:ty),*) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> Self { dpml_core::Error::from(e).into() }
        }
    )*};
}
via_core!(
    dpml_mechanisms::MechanismError,
    dpml_accounting::AccountingError,
    dpml_learn::LearnError,
    dpml_learn::perturbation::PerturbationError,
    dpml_learn::dpsgd::DpSgdError,
    dpml_accounting::ledger::LedgerError,
    dpml_data::DataError
);

/// The result type of every command.
pub type CliResult<T> = Result<T, CliError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_found_before_a_double_dash_only() {
        let args = |a: &[&str]| {
            a.iter()
                .map(Into::into)
                .collect::<Vec<std::ffi::OsString>>()
        };
        assert!(json_requested(args(&["dpml", "train", "--json"])));
        assert!(!json_requested(args(&["dpml", "train", "--", "--json"])));
        assert!(!json_requested(args(&["--json", "train"])));
    }

    #[test]
    fn error_objects_carry_kind_message_and_exit_code() {
        let e = CliError::usage("--epsilon must be > 0, got -1");
        let v = e.to_json();
        assert_eq!(v["error"]["kind"], "bad_input");
        assert_eq!(v["error"]["exit_code"], 2);
        assert_eq!(v["error"]["message"], "--epsilon must be > 0, got -1");
        assert_eq!(
            CliError::internal("disk").to_json()["error"]["kind"],
            "runtime"
        );
        assert_eq!(CliError::parse("x").to_json()["error"]["kind"], "usage");
    }
}
