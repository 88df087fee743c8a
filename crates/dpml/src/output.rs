//! Printing results: with `--json`, exactly one JSON object on stdout, carrying
//! `"dpml_version"` and `"command"`; otherwise a short human summary ([`crate::summary`]),
//! the diagnostics last under a heading that says what they are. Progress and logs always go
//! to stderr ([`crate::progress`]).

use std::io::Write as _;

use serde_json::Value;

use crate::error::CliError;
use crate::privacy_model::DIAGNOSTICS_KEY;
use crate::progress::Progress;

/// `text` with every control character other than a line break or a tab written as its
/// escape (`\u{1b}`): names and metadata read from files (an architecture's name, a model's
/// facts) must not drive the terminal they are printed on.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return text.into();
    }
    text.chars()
        .map(|c| {
            if unsafe_char(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// A diagnostic line on stderr. Unlike `eprintln!`, it never panics: with stderr closed or
/// full there is nowhere left to report to, and the exit code still tells what happened.
macro_rules! diag {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        // Control characters escaped: a line may quote a name read from a file.
        let line = $crate::output::printable(&format!($($arg)*)).into_owned();
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }};
}
pub(crate) use diag;

/// How results are printed.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// Print one JSON object on stdout.
    pub json: bool,
    /// Print the `"diagnostics"` object (figures computed from private data without noise;
    /// see [`crate::privacy_model`]); `--no-diagnostics` turns this off.
    pub diagnostics: bool,
    /// The command as typed (`"train"`, `"bench dpsgd"`), reported as `"command"`.
    pub command: &'static str,
}

impl Output {
    /// Print a command's result object; without [`Output::diagnostics`], its top-level
    /// `"diagnostics"` object is left out (the one place that flag is applied). The JSON gains
    /// `"dpml_version"` and `"command"` here, so every command carries them.
    pub fn emit(&self, result: &Value) {
        // In a job of several processes only the root speaks.
        if !crate::cluster::is_root() {
            return;
        }
        let mut result = result.clone();
        let diagnostics = match &mut result {
            Value::Object(map) => map.remove(DIAGNOSTICS_KEY),
            _ => None,
        }
        .filter(|_| self.diagnostics);
        // Warnings drawn from the data (a feature clamped for most records) reach the
        // operator on stderr too, as diagnostics: never with --no-diagnostics.
        let warnings = diagnostics
            .as_ref()
            .and_then(|d| d.get("warnings"))
            .and_then(Value::as_array);
        for w in warnings.into_iter().flatten().filter_map(Value::as_str) {
            diag!("dpml: warning: {w}");
        }
        let text = if self.json {
            if let Value::Object(map) = &mut result {
                if let Some(d) = diagnostics {
                    map.insert(DIAGNOSTICS_KEY.into(), d);
                }
                map.insert("dpml_version".into(), env!("CARGO_PKG_VERSION").into());
                map.insert("command".into(), self.command.into());
            }
            format!("{result}\n")
        } else {
            printable(&crate::summary::render(
                self.command,
                &result,
                diagnostics.as_ref(),
            ))
            .into_owned()
        };
        let mut stdout = std::io::stdout().lock();
        match stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            Ok(()) => {}
            // A closed pipe (`dpml … | head`) is the reader's choice, not a failure to report.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            // Anything else (a full disk) lost the result: saying success would be a lie.
            Err(e) => {
                drop(stdout);
                CliError::runtime(format!("cannot write the result to stdout: {e}")).exit(self.json)
            }
        }
    }

    /// Progress of `len` units of `unit` (`"run"`, `"model"`) on stderr, with a plain line
    /// per finished unit when stderr is not a terminal ([`Progress`]).
    pub fn progress(&self, len: u64, what: &str, unit: &'static str) -> Progress {
        Progress::new(len, what, unit, true)
    }
}
