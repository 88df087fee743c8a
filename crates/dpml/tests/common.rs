//! Helpers shared by the command-line tests: run the built binary as a user would.
#![allow(dead_code)]

use std::process::{Command, Output};

// The MNIST folder of the tests marked `cfg_attr(not(dpml_mnist), ignore = …)`, as dpml-data's
// tests find it (both crates share the build script that sets `dpml_mnist`).
#[path = "../../data/tests/common/mod.rs"]
mod data_dir;
#[allow(unused_imports)] // not every test file reads MNIST
pub use data_dir::mnist_data_dir;

/// `dpml ledger create --ledger LEDGER --budget-epsilon EPSILON [extra…] --json`.
pub fn ledger_create(ledger: &std::path::Path, epsilon: &str, extra: &[&str]) -> Run {
    let ledger = ledger.to_str().unwrap();
    let mut args = vec![
        "ledger",
        "create",
        "--ledger",
        ledger,
        "--budget-epsilon",
        epsilon,
    ];
    args.extend_from_slice(extra);
    args.push("--json");
    dpml(&args)
}

/// [`ledger_create`], which must succeed.
pub fn create_ledger(ledger: &std::path::Path, epsilon: &str) {
    ledger_create(ledger, epsilon, &[]).json();
}

/// A new ledger of ε = 10 in `dir` (its path).
pub fn new_ledger(dir: &std::path::Path) -> std::path::PathBuf {
    let ledger = dir.join("l.db");
    create_ledger(&ledger, "10");
    ledger
}

/// The number of entries `dpml ledger show` lists in `ledger`.
pub fn ledger_entries(ledger: &str) -> usize {
    let shown = dpml(&["ledger", "show", "--ledger", ledger, "--json"]).json();
    shown["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no entries in {shown}"))
        .len()
}

/// A finished run of `dpml`.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The single JSON object on stdout.
    pub fn json(&self) -> serde_json::Value {
        assert_eq!(self.code, 0, "dpml failed: {}", self.stderr);
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {}", self.stdout))
    }

    /// Assert a usage error: exit 2 and one `error: …` line on stderr that contains `needle`.
    pub fn assert_usage_error(&self, needle: &str) {
        assert_eq!(
            self.code, 2,
            "expected exit 2, got {}; stderr: {}",
            self.code, self.stderr
        );
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "expected one error line, got: {}",
            self.stderr
        );
        assert!(lines[0].starts_with("error: "), "{}", lines[0]);
        assert!(
            lines[0].contains(needle),
            "error line {:?} does not name {needle:?}",
            lines[0]
        );
        self.assert_no_result(lines[0]);
    }

    /// On error stdout holds no result: nothing, or with `--json` only the error object that
    /// repeats the stderr line `line` and the exit code.
    fn assert_no_result(&self, line: &str) {
        if self.stdout.is_empty() {
            return;
        }
        let v: serde_json::Value = serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "nothing but the error object may be printed on error ({e}): {}",
                self.stdout
            )
        });
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(format!("error: {message}"), line, "{}", self.stdout);
        assert_eq!(v["error"]["exit_code"], self.code, "{}", self.stdout);
    }
}

/// `dpml query` of iris' mean petal length (bounds 0–10): the query that the query, ledger and
/// file tests all spend with.
pub const IRIS_MEAN: &[&str] = &[
    "query",
    "--dataset",
    "iris",
    "--column",
    "petal_length",
    "--aggregate",
    "mean",
    "--bounds",
    "0,10",
];

/// [`IRIS_MEAN`] followed by `extra` flags.
pub fn query_iris_mean(extra: &[&str]) -> Run {
    let mut a = IRIS_MEAN.to_vec();
    a.extend_from_slice(extra);
    dpml(&a)
}

/// Run dpml with the given arguments.
pub fn dpml(args: &[&str]) -> Run {
    from_output(command(args).output().expect("run dpml"))
}

/// A `Command` for dpml with the given arguments (for spawning).
pub fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dpml"));
    c.args(args);
    c
}

pub fn from_output(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The exact numbers an HTML report keeps in `<data value="…">` elements.
pub fn report_numbers(html: &str) -> Vec<f64> {
    html.split("<data value=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next()?.parse().ok())
        .collect()
}

/// Whether `html` states `v` (up to serde_json's float parsing, which may differ from Rust's
/// in the last bit).
pub fn report_states(html: &str, v: f64) -> bool {
    report_numbers(html)
        .iter()
        .any(|s| (s - v).abs() <= 1e-12 * v.abs().max(1e-300))
}

/// Copies the safetensors model at `from` to `to` with its header's JSON changed by `edit`
/// (its `__metadata__` entries are strings of JSON or text), the header's length fixed up so
/// the tensor offsets stay valid: what a careless tool or a forger writes.
pub fn edit_safetensors_header(
    from: &std::path::Path,
    to: &std::path::Path,
    edit: impl FnOnce(&mut serde_json::Value),
) {
    let bytes = std::fs::read(from).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    edit(&mut header);
    let text = header.to_string();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&bytes[8 + n..]);
    std::fs::write(to, out).unwrap();
}

/// A FIFO at `dir/name`: a special file that blocks whoever opens it, which the inputs must
/// refuse rather than read.
pub fn make_fifo(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let fifo = dir.join(name);
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    fifo
}

/// A small training CSV: 100 records of two features in [0, 1] and a label of 0 or 1.
pub fn binary_csv() -> String {
    let mut text = String::from("a,b,label\n");
    for i in 0..100 {
        text.push_str(&format!(
            "{},{},{}\n",
            (i % 7) as f64 / 7.0,
            (i % 3) as f64 / 3.0,
            i % 2
        ));
    }
    text
}
