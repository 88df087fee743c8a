//! `dpml train --checkpoint DIR`, `--resume DIR`, `--stop-after-steps N`: a run interrupted
//! after its first epoch and resumed ends where the uninterrupted run ends.

mod common;

use std::path::Path;

use common::{dpml, new_ledger};

/// Three epochs of digits at ε = 1, seeded.
const RECIPE: &[&str] = &[
    "train",
    "--dataset",
    "digits",
    "--epsilon",
    "1",
    "--epochs",
    "3",
    "--seed",
    "7",
    "--json",
];

fn with(extra: &[&str]) -> Vec<String> {
    RECIPE.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn run(extra: &[&str]) -> common::Run {
    let args = with(extra);
    dpml(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// [`RECIPE`] without its seed (a seeded run is refused a ledger), followed by `extra`.
fn unseeded(extra: &[&str]) -> common::Run {
    let args = with(extra);
    let seed = args.iter().position(|a| a == "--seed").unwrap();
    let args: Vec<&str> = args[..seed]
        .iter()
        .chain(&args[seed + 2..])
        .map(String::as_str)
        .collect();
    dpml(&args)
}

/// The data rows of a `--log` CSV (after its header line).
fn log_rows(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect()
}

/// Stopped after epoch 1 (the step count the uninterrupted run's log gives for it) and
/// resumed: same steps, same ε, and, the run being seeded, the same model (bit for bit: the
/// same test accuracy and test loss; the per-epoch log up to the last bit of the epochs that
/// went through the checkpoint's JSON). A resumed seeded run continues the
/// generator and the sampling key where they stood, so this is exact, not approximate.
#[test]
fn resumed_run_ends_as_the_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let (full_log, resumed_log) = (dir.path().join("full.csv"), dir.path().join("resumed.csv"));
    let full = run(&["--log", full_log.to_str().unwrap()]).json();
    let first_epoch_steps: u64 = log_rows(&full_log)[0]
        .split(',')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(first_epoch_steps < full["steps"].as_u64().unwrap());

    let ck = dir.path().join("ck");
    let ck_s = ck.to_str().unwrap();
    let stop = first_epoch_steps.to_string();
    let stopped = run(&["--checkpoint", ck_s, "--stop-after-steps", &stop]).json();
    assert_eq!(stopped["status"], "stopped");
    assert_eq!(stopped["steps_done"].as_u64(), Some(first_epoch_steps));
    assert!(stopped.get("epsilon").is_none(), "{stopped}");
    assert!(ck.join("checkpoint.json").is_file());

    let resumed = run(&["--resume", ck_s, "--log", resumed_log.to_str().unwrap()]).json();
    for field in [
        "steps",
        "epsilon",
        "noise_multiplier",
        "sampling_rate",
        "split_key",
    ] {
        assert_eq!(resumed[field], full[field], "{field}");
    }
    let acc = |v: &serde_json::Value| v["diagnostics"]["test_accuracy"].as_f64().unwrap();
    assert!((acc(&resumed) - acc(&full)).abs() <= 0.01);
    assert_eq!(acc(&resumed), acc(&full));
    assert_eq!(
        resumed["diagnostics"]["test_loss"],
        full["diagnostics"]["test_loss"]
    );
    // The epochs logged before the interruption come back from the checkpoint's JSON, whose
    // decimal floats may differ in the last bit; the model itself is exact (above).
    let numbers = |rows: Vec<String>| -> Vec<f64> {
        rows.iter()
            .flat_map(|r| {
                r.split(',')
                    .map(|v| v.parse::<f64>().unwrap())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let (a, b) = (
        numbers(log_rows(&resumed_log)),
        numbers(log_rows(&full_log)),
    );
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-12 * y.abs().max(1.0), "{x} vs {y}");
    }
}

/// A checkpoint of another recipe (another learning rate) or another data set is refused with
/// a named error; a missing checkpoint too; --stop-after-steps needs a place to save.
#[test]
fn checkpoint_of_another_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck_s = ck.to_str().unwrap();
    run(&["--checkpoint", ck_s, "--stop-after-steps", "2"]).json();
    let other = with(&["--resume", ck_s, "--learning-rate", "1.5"]);
    dpml(&other.iter().map(String::as_str).collect::<Vec<_>>())
        .assert_usage_error("checkpoint_mismatch");
    dpml(&[
        "train",
        "--dataset",
        "breast-cancer",
        "--epsilon",
        "1",
        "--seed",
        "7",
        "--resume",
        ck_s,
    ])
    .assert_usage_error("checkpoint_mismatch");
    let missing = dir.path().join("nothing");
    run(&["--resume", missing.to_str().unwrap()]).assert_usage_error("no checkpoint in");
    run(&["--stop-after-steps", "2"]).assert_usage_error("--stop-after-steps needs --checkpoint");
}

/// A run seeded from the operating system saves neither its generator nor its sampling key
/// (whoever held them could subtract the noise); a seeded run saves both (to continue
/// exactly). Checkpoints are written every N steps, atomically (no temporary file left).
#[test]
fn only_seeded_runs_keep_their_generator_in_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p.join("checkpoint.json")).unwrap()).unwrap()
    };
    let seeded = dir.path().join("seeded");
    run(&[
        "--checkpoint",
        seeded.to_str().unwrap(),
        "--checkpoint-every",
        "3",
        "--stop-after-steps",
        "7",
    ])
    .json();
    let ck = read(&seeded);
    assert_eq!(ck["step"], 7);
    assert!(
        ck["rng"].is_object() && ck["sampling_key"].is_array(),
        "{}",
        ck["rng"]
    );
    assert!(!seeded.join("checkpoint.json.tmp").exists());

    let os = dir.path().join("os");
    let r = dpml(&[
        "train",
        "--dataset",
        "digits",
        "--epsilon",
        "1",
        "--checkpoint",
        os.to_str().unwrap(),
        "--stop-after-steps",
        "2",
        "--json",
    ]);
    r.json();
    let ck = read(&os);
    assert!(ck["rng"].is_null() && ck["sampling_key"].is_null(), "{ck}");
    // The unseeded run continues from it with fresh keys, and accounts for every step.
    let resumed = dpml(&[
        "train",
        "--dataset",
        "digits",
        "--epsilon",
        "1",
        "--resume",
        os.to_str().unwrap(),
        "--json",
    ])
    .json();
    assert!(resumed["epsilon"].as_f64().unwrap() <= 1.0);
    assert!(
        resumed["epsilon"].as_f64().unwrap() > 0.9,
        "{}",
        resumed["epsilon"]
    );
}

/// `dpml ledger show --json` of `ledger`.
fn ledger_entries(ledger: &Path) -> Vec<serde_json::Value> {
    dpml(&[
        "ledger",
        "show",
        "--ledger",
        ledger.to_str().unwrap(),
        "--json",
    ])
    .json()["entries"]
        .as_array()
        .unwrap()
        .clone()
}

/// Issue 35: a checkpointed run is one spend. It is charged when its first checkpoint is
/// written; `--resume` of the same run charges nothing more; resuming the same checkpoint a
/// second time (a fork whose result would be released beside the first) is charged again, for
/// the steps the fork adds; a run charged to a ledger is not resumed without it.
#[test]
fn a_checkpointed_run_is_one_spend_and_a_fork_is_charged_again() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = new_ledger(dir.path());
    let l = ledger.to_str().unwrap();
    let ck = dir.path().join("ck");
    let ck_s = ck.to_str().unwrap();
    let stopped = unseeded(&[
        "--checkpoint",
        ck_s,
        "--stop-after-steps",
        "5",
        "--ledger",
        l,
    ])
    .json();
    assert_eq!(stopped["status"], "stopped");
    let entries = ledger_entries(&ledger);
    assert_eq!(entries.len(), 1, "charged when the checkpoint was written");
    let whole = entries[0]["epsilon"].as_f64().unwrap();
    assert!(
        whole > 0.9 && whole <= 1.0 + 1e-9,
        "the whole run's ε: {whole}"
    );
    // Keep a copy of this checkpoint, to fork from later.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(ck.join("checkpoint.json"), copy.join("checkpoint.json")).unwrap();

    unseeded(&["--resume", ck_s]).assert_usage_error("resume it with the same --ledger");
    let resumed = unseeded(&["--resume", ck_s, "--ledger", l]).json();
    assert_eq!(
        resumed["ledger"]["entries"], 1,
        "a resume charges nothing more"
    );
    let fork = unseeded(&["--resume", copy.to_str().unwrap(), "--ledger", l]).json();
    assert_eq!(fork["ledger"]["entries"], 2, "a fork is charged again");
    let entries = ledger_entries(&ledger);
    let added = entries[1]["epsilon"].as_f64().unwrap();
    assert!(
        added > 0.0 && added < whole,
        "the fork's steps: {added} of {whole}"
    );
    assert_eq!(entries[1]["run"], entries[0]["run"]);
}

/// A run killed after its charge keeps it: the checkpoint was written after the charge.
#[test]
fn a_run_killed_after_its_charge_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = new_ledger(dir.path());
    let l = ledger.to_str().unwrap();
    let ck = dir.path().join("ck");
    let mut child = common::command(&[
        "train",
        "--dataset",
        "digits",
        "--epsilon",
        "1",
        "--epochs",
        "200",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--checkpoint-every",
        "1",
        "--ledger",
        l,
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let start = std::time::Instant::now();
    while !ck.join("checkpoint.json").exists() && start.elapsed().as_secs() < 60 {
        // A run that ends on its own (refused, say) would never be killed after its charge.
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended before it was killed: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(ck.join("checkpoint.json").exists());
    assert_eq!(ledger_entries(&ledger).len(), 1);
}

/// Issue 35's fuzzing pass: checkpoints are inputs. An edited `step`, a FIFO in place of the
/// file, and (issue 40) another --seed are refused by name; a mismatch names the part that
/// differs and prints no digest.
/// An output naming the checkpoint's own file is refused before the run: it would overwrite
/// the state a resume needs (or the checkpoint the model).
#[test]
fn no_output_names_the_checkpoint_file() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck_s = ck.to_str().unwrap();
    let file = ck.join("checkpoint.json");
    std::fs::create_dir(&ck).unwrap();
    for flag in ["--log", "--save-model"] {
        run(&["--checkpoint", ck_s, flag, file.to_str().unwrap()])
            .assert_usage_error("name one file");
    }
    run(&["--checkpoint", ck_s, "--stop-after-steps", "2"]).json();
    run(&["--resume", ck_s, "--log", file.to_str().unwrap()]).assert_usage_error("name one file");
}

#[test]
fn checkpoints_are_validated_as_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck_s = ck.to_str().unwrap();
    run(&["--checkpoint", ck_s, "--stop-after-steps", "2"]).json();
    let file = ck.join("checkpoint.json");
    let original = std::fs::read_to_string(&file).unwrap();
    // Another learning rate: the recipe differs, said without a digest.
    let other = with(&["--resume", ck_s, "--learning-rate", "1.5"]);
    let r = dpml(&other.iter().map(String::as_str).collect::<Vec<_>>());
    r.assert_usage_error("another recipe");
    assert!(
        !r.stderr
            .chars()
            .collect::<Vec<_>>()
            .windows(32)
            .any(|w| w.iter().all(char::is_ascii_hexdigit)),
        "{}",
        r.stderr
    );
    // Another noise multiplier, said with numbers (not Rust's Some(…)).
    let mut noisier = with(&["--resume", ck_s]);
    let at = noisier.iter().position(|a| a == "--epsilon").unwrap();
    noisier[at + 1] = "0.5".into();
    let r = dpml(&noisier.iter().map(String::as_str).collect::<Vec<_>>());
    r.assert_usage_error("noise multiplier σ is");
    assert!(!r.stderr.contains("Some("), "{}", r.stderr);
    // Another seed is refused rather than silently ignored.
    let reseeded: Vec<String> = RECIPE
        .iter()
        .map(|s| if *s == "7" { "8" } else { s })
        .chain(["--resume", ck_s])
        .map(str::to_string)
        .collect();
    dpml(&reseeded.iter().map(String::as_str).collect::<Vec<_>>())
        .assert_usage_error("differs from the seed of the checkpoint's run");
    // An edited step.
    let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
    v["step"] = 1.into();
    std::fs::write(&file, serde_json::to_string(&v).unwrap()).unwrap();
    run(&["--resume", ck_s]).assert_usage_error("edited outside dpml");
    // A FIFO does not hang the resume.
    std::fs::remove_file(&file).unwrap();
    if std::process::Command::new("mkfifo")
        .arg(&file)
        .status()
        .is_ok_and(|s| s.success())
    {
        run(&["--resume", ck_s]).assert_usage_error("not a regular file");
    }
}
