//! The output contract: the `--json` error object of every command, `dpml_version` and
//! `command` in every JSON result, human summaries, and plain progress lines off a terminal.

mod common;
use common::{Run, dpml};

/// The error object a failed `--json` run prints on stdout, checked against its exit code and
/// its stderr line.
fn error_object(r: &Run) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {:?}; stderr: {}",
            r.stdout, r.stderr
        )
    });
    let e = &v["error"];
    assert_eq!(e["exit_code"], r.code, "{v}");
    let message = e["message"].as_str().expect("a message");
    let line = r.stderr.lines().find(|l| l.starts_with("error: "));
    assert_eq!(
        line,
        Some(format!("error: {message}").as_str()),
        "{}",
        r.stderr
    );
    v
}

/// Runs `args` with `--json` and asserts an error object of `kind` and `code` whose message
/// contains `needle`.
fn assert_error(args: &[&str], kind: &str, code: i32, needle: &str) {
    let r = dpml(&[args, &["--json"]].concat());
    assert_eq!(r.code, code, "{args:?}: {}", r.stderr);
    let v = error_object(&r);
    assert_eq!(v["error"]["kind"], kind, "{args:?}: {v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(needle),
        "{args:?}: {message:?} lacks {needle:?}"
    );
}

#[test]
fn every_command_prints_the_error_object_for_a_bad_value() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let missing_model = dir.path().join("none.safetensors");
    let m = missing_model.to_str().unwrap();
    let cases: &[&[&str]] = &[
        &["train", "--dataset", "digits", "--epsilon", "-1"],
        &[
            "eval",
            "--model",
            m,
            "--dataset",
            "iris",
            "--split-key",
            "00",
        ],
        &[
            "release",
            "--mechanism",
            "laplace",
            "--value",
            "1e308",
            "--sensitivity",
            "1",
            "--epsilon",
            "1",
        ],
        &[
            "query",
            "--dataset",
            "iris",
            "--column",
            "nope",
            "--aggregate",
            "count",
            "--epsilon",
            "1",
        ],
        &[
            "rr",
            "--dataset",
            "iris",
            "--column",
            "nope",
            "--epsilon",
            "1",
        ],
        &[
            "account",
            "--noise-multiplier",
            "0",
            "--sampling-rate",
            "0.01",
            "--steps",
            "10",
        ],
        &[
            "calibrate",
            "--target-epsilon",
            "-1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "10",
        ],
        &[
            "tradeoff",
            "--noise-multiplier",
            "-1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "10",
            "--out",
            d,
        ],
        &[
            "sweep",
            "--experiment",
            "kmeans",
            "--dataset",
            "iris",
            "--epsilons",
            "-1",
            "--out",
            d,
        ],
        &["bench", "dpsgd", "--steps", "0"],
        &["bench", "accounting", "--steps", "0"],
        &["kmeans", "--dataset", "iris", "--k", "0", "--epsilon", "1"],
        &[
            "label-dp",
            "--dataset",
            "iris",
            "--mechanism",
            "nope",
            "--epsilon",
            "1",
        ],
        &[
            "predict",
            "--model",
            m,
            "--dataset",
            "iris",
            "--output-epsilon",
            "1",
        ],
        &[
            "audit",
            "--dataset",
            "digits",
            "--non-private",
            "--attack",
            "lira",
            "--reference-models",
            "0",
        ],
        &["data", "verify", "--data-dir", m],
        &["data", "fetch", "nope", "--to", d],
    ];
    for args in cases {
        assert_error(args, "bad_input", 2, "");
    }
    // The message names the bad value, in short form.
    assert_error(cases[0], "bad_input", 2, "-1");
    assert_error(cases[2], "bad_input", 2, "1e308");
    assert_error(cases[3], "bad_input", 2, "nope");
}

#[test]
fn malformed_command_lines_are_usage_errors_wherever_json_stands() {
    assert_error(&["train", "--no-such-flag"], "usage", 2, "--no-such-flag");
    assert_error(&["presets", "extra"], "usage", 2, "extra");
    assert_error(&["data", "list", "--nope"], "usage", 2, "--nope");
    // `--json` before the command, and clap's full message kept.
    let r = dpml(&[
        "--json",
        "release",
        "--mechanism",
        "laplace",
        "--value",
        "1",
    ]);
    let v = error_object(&r);
    assert_eq!(v["error"]["kind"], "usage");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--sensitivity")
    );
    // After `--`, `--json` is not the flag: no JSON on stdout.
    let r = dpml(&["train", "--nope", "--", "--json"]);
    assert_eq!(r.code, 2);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
}

#[test]
fn environment_failures_are_runtime_errors() {
    let dir = tempfile::tempdir().unwrap();
    // A folder that exists but takes no files (proc): the file system refuses, exit 1. (A
    // path under a regular file or a missing folder is the caller's mistake: exit 2,
    // cli_basics.)
    let ledger = std::path::Path::new("/proc/dpml-ledger-test.db");
    let args = [
        "query",
        "--dataset",
        "iris",
        "--column",
        "sepal_length",
        "--aggregate",
        "count",
        "--epsilon",
        "1",
        "--ledger",
        ledger.to_str().unwrap(),
        "--budget",
        "5",
    ];
    assert_error(&args, "runtime", 1, "ledger");
    // Nothing listens on port 9 of the loopback: a refused download is the network's fault.
    let to = dir.path().join("mnist");
    let fetch = [
        "data",
        "fetch",
        "mnist",
        "--to",
        to.to_str().unwrap(),
        "--base-url",
        "http://127.0.0.1:9/",
    ];
    assert_error(&fetch, "runtime", 1, "127.0.0.1:9");
}

#[test]
fn json_results_carry_version_and_command() {
    let runs: &[(&[&str], &str)] = &[
        (&["presets"], "presets"),
        (&["data", "list"], "data list"),
        (
            &[
                "account",
                "--noise-multiplier",
                "1",
                "--sampling-rate",
                "0.01",
                "--steps",
                "100",
                "--delta",
                "1e-5",
            ],
            "account",
        ),
        (
            &["bench", "accounting", "--steps", "10", "--repeats", "1"],
            "bench accounting",
        ),
        (
            &[
                "release",
                "--mechanism",
                "laplace",
                "--value",
                "1",
                "--sensitivity",
                "1",
                "--epsilon",
                "1",
            ],
            "release",
        ),
    ];
    for (args, command) in runs {
        let v = dpml(&[args, &["--json"][..]].concat()).json();
        assert_eq!(v["command"], *command, "{v}");
        assert_eq!(v["dpml_version"], env!("CARGO_PKG_VERSION"), "{v}");
    }
}

#[test]
fn f32_settings_print_as_typed() {
    let v = dpml(&["presets", "--json"]).json();
    let text = v.to_string();
    assert!(text.contains("\"learning_rate\":0.03"), "{text}");
    assert!(!text.contains("0.029999"), "{text}");
}

#[test]
fn human_output_is_a_summary_not_json() {
    let r = dpml(&["train", "--preset", "digits-eps1", "--seed", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let first = r.stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("trained logreg on digits: test accuracy "),
        "{first}"
    );
    assert!(first.contains("ε = "), "{first}");
    assert!(!r.stdout.contains('{'), "{}", r.stdout);
    assert!(r.stdout.contains("diagnostics ("), "{}", r.stdout);
    // The headline leaves out what --no-diagnostics leaves out.
    let quiet = dpml(&[
        "train",
        "--preset",
        "digits-eps1",
        "--seed",
        "1",
        "--no-diagnostics",
    ]);
    assert!(!quiet.stdout.contains("accuracy"), "{}", quiet.stdout);
    for args in [
        &[
            "account",
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "100",
            "--delta",
            "1e-5",
        ][..],
        &["data", "list"][..],
        &["kmeans", "--dataset", "iris", "--k", "3", "--epsilon", "1"][..],
    ] {
        let r = dpml(args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(!r.stdout.contains('{'), "{args:?}: {}", r.stdout);
        assert!(
            !r.stdout.starts_with(' '),
            "{args:?}: no headline: {}",
            r.stdout
        );
    }
}

/// The progress lines of a successful run that start with `prefix`.
fn progress_lines<'a>(r: &'a Run, prefix: &str) -> Vec<&'a str> {
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stderr.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[test]
fn progress_off_a_terminal_is_plain_lines_per_epoch() {
    // The test harness captures stderr through a pipe: not a terminal.
    let r = dpml(&["train", "--preset", "digits-eps1", "--seed", "1"]);
    assert!(!r.stderr.contains('\r'), "carriage returns: {:?}", r.stderr);
    assert!(!r.stderr.contains('\x1b'), "escape codes: {:?}", r.stderr);
    let epochs = progress_lines(&r, "train: epoch ");
    assert!(epochs.len() > 10, "{}", r.stderr);
    for (i, line) in epochs.iter().enumerate() {
        assert!(
            line.starts_with(&format!("train: epoch {}/{}, ", i + 1, epochs.len())),
            "{line}"
        );
        assert!(line.contains(" s elapsed, "), "{line}");
        assert!(line.contains(" samples/s"), "{line}");
    }
}

#[test]
fn progress_off_a_terminal_is_one_line_per_sweep_run() {
    let dir = tempfile::tempdir().unwrap();
    let r = dpml(&[
        "sweep",
        "--experiment",
        "kmeans",
        "--dataset",
        "iris",
        "--epsilons",
        "1",
        "--repeats",
        "2",
        "--out",
        dir.path().to_str().unwrap(),
        "--seed",
        "1",
    ]);
    let runs = progress_lines(&r, "sweep: run ");
    // Baseline and one ε, two repeats each.
    assert_eq!(runs.len(), 4, "{}", r.stderr);
    assert!(runs[3].starts_with("sweep: run 4/4, "), "{}", runs[3]);
    assert!(
        runs.iter()
            .all(|l| l.contains(" elapsed, ") && l.ends_with(" runs/s"))
    );
}

#[test]
fn progress_off_a_terminal_is_one_line_per_bench_round() {
    let r = dpml(&[
        "bench",
        "dpsgd",
        "--model",
        "logreg",
        "--batch-size",
        "16",
        "--steps",
        "2",
        "--json",
    ]);
    let rounds = progress_lines(&r, "bench dpsgd: round ");
    // Three modes, three rounds each, interleaved; each line names its mode and rate.
    assert_eq!(rounds.len(), 9, "{}", r.stderr);
    for (i, line) in rounds.iter().enumerate() {
        let mode = ["non-private", "private", "exact noise"][i % 3];
        assert!(
            line.starts_with(&format!("bench dpsgd: round {}/9 ({mode}: ", i + 1)),
            "{line}"
        );
        assert!(
            line.contains(" samples/s), ") && line.ends_with(" rounds/s"),
            "{line}"
        );
    }
    // The JSON result stays alone on stdout.
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(v["ratio"].as_f64().unwrap() > 0.0, "{v}");
}
