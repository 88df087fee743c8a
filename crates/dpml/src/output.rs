//! Printing results: with `--json`, exactly one JSON object on stdout; otherwise readable
//! `key: value` lines. Progress and logs always go to stderr.

use serde_json::Value;

/// How results are printed.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// Print one JSON object on stdout.
    pub json: bool,
}

impl Output {
    /// Print a command's result object.
    pub fn emit(&self, result: &Value) {
        if self.json {
            println!("{result}");
        } else {
            print_human(result, 0);
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

fn print_human(v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                match val {
                    Value::Object(_) => {
                        println!("{pad}{k}:");
                        print_human(val, indent + 2);
                    }
                    Value::Array(items) if items.iter().any(|i| i.is_object()) => {
                        println!("{pad}{k}:");
                        for item in items {
                            println!("{pad}  -");
                            print_human(item, indent + 4);
                        }
                    }
                    _ => println!("{pad}{k}: {}", scalar(val)),
                }
            }
        }
        other => println!("{pad}{}", scalar(other)),
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
