//! Printing results: with `--json`, exactly one JSON object on stdout; otherwise readable
//! `key: value` lines, the diagnostics last under a heading that says what they are. Progress
//! and logs always go to stderr.

use std::fmt::Write as _;
use std::io::Write as _;

use serde_json::Value;

use crate::privacy_model::{DIAGNOSTICS_KEY, DIAGNOSTICS_MEANING};

/// A diagnostic line on stderr. Unlike `eprintln!`, it never panics: with stderr closed or
/// full there is nowhere left to report to, and the exit code still tells what happened.
macro_rules! diag {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
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
}

impl Output {
    /// Print a command's result object; without [`Output::diagnostics`], its top-level
    /// `"diagnostics"` object is left out (the one place that flag is applied).
    pub fn emit(&self, result: &Value) {
        let mut result = result.clone();
        let diagnostics = match &mut result {
            Value::Object(map) => map.remove(DIAGNOSTICS_KEY),
            _ => None,
        }
        .filter(|_| self.diagnostics);
        let mut text = String::new();
        if self.json {
            if let (Value::Object(map), Some(d)) = (&mut result, diagnostics) {
                map.insert(DIAGNOSTICS_KEY.into(), d);
            }
            text = format!("{result}\n");
        } else {
            render_human(&mut text, &result, 0);
            if let Some(d) = diagnostics {
                let _ = writeln!(text, "\n{DIAGNOSTICS_KEY} ({DIAGNOSTICS_MEANING}):");
                render_human(&mut text, &d, 2);
            }
        }
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
                diag!("error: internal error: cannot write the result to stdout: {e}");
                std::process::exit(1);
            }
        }
    }

    /// A progress bar on stderr (hidden with `--json` is not needed: stderr is separate,
    /// but hidden when stderr is not a terminal so logs stay clean).
    pub fn progress(&self, len: u64, what: &str) -> indicatif::ProgressBar {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(len),
            indicatif::ProgressDrawTarget::stderr(),
        );
        let style = indicatif::ProgressStyle::with_template(
            "{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_message(what.to_string());
        bar
    }
}

fn render_human(out: &mut String, v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                match val {
                    Value::Object(_) => {
                        let _ = writeln!(out, "{pad}{k}:");
                        render_human(out, val, indent + 2);
                    }
                    // Lists of phrases ("public", "notes") one per line: they contain commas.
                    Value::Array(items)
                        if !items.is_empty() && items.iter().all(|i| i.is_string()) =>
                    {
                        let _ = writeln!(out, "{pad}{k}:");
                        for item in items {
                            let _ = writeln!(out, "{pad}  - {}", scalar(item));
                        }
                    }
                    Value::Array(items) if items.iter().any(|i| i.is_object()) => {
                        let _ = writeln!(out, "{pad}{k}:");
                        for item in items {
                            let _ = writeln!(out, "{pad}  -");
                            render_human(out, item, indent + 4);
                        }
                    }
                    _ => {
                        let _ = writeln!(out, "{pad}{k}: {}", scalar(val));
                    }
                }
            }
        }
        other => {
            let _ = writeln!(out, "{pad}{}", scalar(other));
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(scalar).collect();
            format!("[{}]", parts.join(", "))
        }
        other => other.to_string(),
    }
}
