//! Files users keep: a saved model carries its privacy facts (`dpml inspect`, `dpml eval`),
//! and a budget ledger is created once with its budget (`dpml ledger create|show`), then
//! spent from without retyping it.

mod common;

use std::path::{Path, PathBuf};

use common::dpml;
use serde_json::Value;

/// `dpml train` of a private mlp on digits, seeded, saved to `path`: its JSON output.
fn train_digits(path: &Path) -> Value {
    dpml(&[
        "train",
        "--dataset",
        "digits",
        "--model",
        "mlp",
        "--hidden",
        "16",
        "--epsilon",
        "2",
        "--epochs",
        "3",
        "--seed",
        "7",
        "--out",
        path.to_str().unwrap(),
        "--json",
    ])
    .json()
}

/// `dpml inspect PATH --json`.
fn inspect(path: &Path) -> Value {
    dpml(&["inspect", path.to_str().unwrap(), "--json"]).json()
}

/// `dpml eval` of the model at `path` on digits, with the training run's split key.
fn eval(path: &Path, split_key: &str) -> Value {
    dpml(&[
        "eval",
        "--model",
        path.to_str().unwrap(),
        "--dataset",
        "digits",
        "--split-key",
        split_key,
        "--json",
    ])
    .json()
}

#[test]
fn a_saved_model_carries_the_privacy_facts_its_training_run_reported() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("digits.safetensors");
    let trained = train_digits(&model);
    let facts = &inspect(&model)["privacy"];
    assert_eq!(facts["guarantee"], "dp-sgd");
    for key in [
        "epsilon",
        "delta",
        "accountant",
        "bounds",
        "noise_multiplier",
        "sampling_rate",
        "steps",
        "max_grad_norm",
        "neighbouring",
        "dataset",
        "train_size",
        "seeded",
    ] {
        assert!(!trained[key].is_null(), "train reports no {key}");
        assert_eq!(facts[key], trained[key], "{key} differs");
    }
    assert_eq!(facts["seeded"], true);
    assert_eq!(facts["dpml_version"], env!("CARGO_PKG_VERSION"));
    // RFC 3339 in UTC, to the second: 2026-01-31T12:00:00Z.
    let created = facts["created"].as_str().unwrap();
    assert_eq!(created.len(), 20, "{created}");
    assert!(
        created.ends_with('Z') && created.as_bytes()[10] == b'T',
        "{created}"
    );
    // eval reports the same facts.
    let evaluated = eval(&model, trained["split_key"].as_str().unwrap());
    assert_eq!(&evaluated["model_privacy"], facts);
}

#[test]
fn inspect_lists_pytorch_sequential_tensor_names_and_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("digits.safetensors");
    train_digits(&model);
    let v = inspect(&model);
    let layers = v["architecture"]["layers"].as_array().unwrap();
    let types: Vec<&str> = layers.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["flatten", "linear", "relu", "linear"]);
    // nn.Sequential(Flatten(), Linear(64, 16), ReLU(), Linear(16, 10)): indices count every
    // layer, parameters in PyTorch's [out, in] layout.
    let tensors: Vec<(String, Value)> = v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t["shape"].clone()))
        .collect();
    let want: Vec<(String, Value)> = [
        ("1.weight", serde_json::json!([16, 64])),
        ("1.bias", serde_json::json!([16])),
        ("3.weight", serde_json::json!([10, 16])),
        ("3.bias", serde_json::json!([10])),
    ]
    .into_iter()
    .map(|(n, s)| (n.to_string(), s))
    .collect();
    assert_eq!(tensors, want);
    assert_eq!(v["parameters"], 64 * 16 + 16 + 16 * 10 + 10);
    // For a reader: one line per layer with its tensors, and no empty privacy facts.
    let human = dpml(&["inspect", model.to_str().unwrap()]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    let layer_row = human
        .stdout
        .lines()
        .find(|l| l.contains("linear in_features=64 out_features=16"));
    assert!(
        layer_row.is_some_and(
            |l| l.trim_start().starts_with('1') && l.contains("1.weight [16, 64], 1.bias [16]")
        ),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("privacy.epsilon"), "{}", human.stdout);
    assert!(!human.stdout.contains("null"), "{}", human.stdout);
}

/// Trains a non-private iris logreg into `path`.
fn train_iris_non_private(path: &Path) -> Value {
    dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--non-private",
        "--epochs",
        "2",
        "--out",
        path.to_str().unwrap(),
        "--json",
    ])
    .json()
}

/// Copies the model at `from` to `to` without its privacy facts (the `dpml_privacy` metadata
/// entry): what an older dpml, or another tool, writes.
fn strip_privacy_facts(from: &Path, to: &Path) {
    common::edit_safetensors_header(from, to, |header| {
        let meta = header["__metadata__"].as_object_mut().unwrap();
        assert!(meta.remove("dpml_privacy").is_some(), "no facts to strip");
    });
}

#[test]
fn non_private_models_say_so_and_files_without_facts_say_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("iris.safetensors");
    let trained = train_iris_non_private(&model);
    let facts = inspect(&model)["privacy"].clone();
    assert_eq!(facts["guarantee"], "non-private");
    assert!(facts["epsilon"].is_null(), "{facts}");
    assert_eq!(facts["seeded"], false);
    assert_eq!(facts["train_size"], trained["train_size"]);

    let old = dir.path().join("old.safetensors");
    strip_privacy_facts(&model, &old);
    let unknown = &inspect(&old)["privacy"];
    assert_eq!(unknown["guarantee"], "unknown");
    assert!(unknown["note"].as_str().unwrap().contains("dpml_privacy"));
    // Still a usable model.
    let v = dpml(&[
        "eval",
        "--model",
        old.to_str().unwrap(),
        "--dataset",
        "iris",
        "--split-key",
        trained["split_key"].as_str().unwrap(),
        "--json",
    ])
    .json();
    assert_eq!(v["model_privacy"]["guarantee"], "unknown");
    assert!(v["diagnostics"]["test_accuracy"].is_number());
}

#[test]
fn inspect_refuses_what_is_not_a_model_file_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a model").unwrap();
    dpml(&["inspect", text.to_str().unwrap()]).assert_usage_error("notes.txt");
    dpml(&["inspect", dir.path().to_str().unwrap()]).assert_usage_error("not a regular file");
    let missing = dir.path().join("missing.safetensors");
    dpml(&["inspect", missing.to_str().unwrap()]).assert_usage_error("missing.safetensors");
}

/// `dpml query` of iris' mean petal length at ε = `epsilon`, charged to `ledger`, with `extra`
/// flags.
fn query(ledger: &Path, epsilon: &str, extra: &[&str]) -> common::Run {
    let ledger = ledger.to_str().unwrap();
    let mut a = vec!["--epsilon", epsilon, "--ledger", ledger, "--json"];
    a.extend_from_slice(extra);
    common::query_iris_mean(&a)
}

fn show(ledger: &Path) -> Value {
    dpml(&[
        "ledger",
        "show",
        "--ledger",
        ledger.to_str().unwrap(),
        "--json",
    ])
    .json()
}

#[test]
fn a_ledger_is_created_once_then_spent_from_and_shown_without_retyping_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("budget.ledger");
    let created = common::ledger_create(&ledger, "2", &["--budget-delta", "1e-6"]).json();
    assert_eq!(created["budget"]["epsilon"], 2.0);
    assert_eq!(created["budget"]["delta"], 1e-6);
    assert_eq!(created["spent"], 0.0);
    let before = std::fs::read(&ledger).unwrap();
    common::ledger_create(&ledger, "5", &["--budget-delta", "1e-6"])
        .assert_usage_error("already exists");
    assert_eq!(std::fs::read(&ledger).unwrap(), before, "create touched it");

    // No --budget: the stored one is used.
    let spent = query(&ledger, "0.5", &[]).json()["ledger"].clone();
    // The old spelling still works when it agrees with the stored budget...
    query(
        &ledger,
        "0.25",
        &["--budget", "2", "--budget-delta", "1e-6"],
    )
    .json();
    // ...and is refused by name when it does not.
    query(&ledger, "0.25", &["--budget", "3"]).assert_usage_error("ε = 3");
    query(&ledger, "0.25", &["--budget-delta", "1e-5"]).assert_usage_error("0.00001");

    let shown = show(&ledger);
    let entries = shown["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["epsilon"], 0.5);
    assert_eq!(entries[1]["epsilon"], 0.25);
    assert!(
        entries[0]["label"]
            .as_str()
            .unwrap()
            .contains("petal_length")
    );
    assert!(entries[0]["time"].as_str().unwrap().ends_with('Z'));
    let (total, left) = (
        shown["spent"].as_f64().unwrap(),
        shown["remaining"].as_f64().unwrap(),
    );
    assert!(total >= spent["spent"].as_f64().unwrap() && total <= 0.75 + 1e-12);
    assert!((left - (2.0 - total)).abs() < 1e-12, "{shown}");
    assert_eq!(shown["budget"]["epsilon"], 2.0);
}

#[test]
fn a_missing_ledger_is_refused_not_created_without_a_budget() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("typo.ledger");
    query(&ledger, "0.5", &[]).assert_usage_error("does not exist");
    dpml(&["ledger", "show", "--ledger", ledger.to_str().unwrap()])
        .assert_usage_error("does not exist");
    assert!(!ledger.exists());
    // Scripts that create a ledger on first use with --budget keep working.
    let first = query(&ledger, "0.5", &["--budget", "1"]).json();
    assert_eq!(first["ledger"]["entries"], 1);
    assert_eq!(show(&ledger)["budget"]["delta"], 1e-5);
}

/// Makes `path` unwritable for as long as it lives: read-only permissions, and where those do
/// not bind (root), the immutable attribute. `None` when neither can be had here.
struct ReadOnly(PathBuf, bool);

impl ReadOnly {
    fn new(path: &Path) -> Option<Self> {
        use std::os::unix::fs::PermissionsExt;
        let writable = || std::fs::OpenOptions::new().write(true).open(path).is_ok();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).unwrap();
        if !writable() {
            return Some(Self(path.into(), false));
        }
        let immutable = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        let guard = Self(path.into(), immutable);
        (immutable && !writable()).then_some(guard)
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.0)
                .status();
        }
    }
}

#[test]
fn a_read_only_ledger_is_a_runtime_failure_not_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ro.ledger");
    common::ledger_create(&ledger, "2", &["--budget-delta", "1e-6"]).json();
    let Some(_guard) = ReadOnly::new(&ledger) else {
        eprintln!("skipped: cannot make a file read-only here (root without chattr)");
        return;
    };
    let r = query(&ledger, "0.5", &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("ro.ledger"), "{}", r.stderr);
    // Nothing released: stdout holds at most the --json error object.
    let released = serde_json::from_str::<Value>(r.stdout.trim())
        .map_or(!r.stdout.trim().is_empty(), |v| v.get("error").is_none());
    assert!(!released, "released despite the failed spend: {}", r.stdout);
    // Reading it still works.
    assert_eq!(show(&ledger)["entries"].as_array().unwrap().len(), 0);
}

/// `model` with its recorded facts edited by `edit`, as a hand-edited file would be.
fn edit_facts(model: &Path, to: &Path, edit: impl FnOnce(&mut Value)) {
    common::edit_safetensors_header(model, to, |header| {
        let meta = header["__metadata__"].as_object_mut().unwrap();
        let mut facts: Value =
            serde_json::from_str(meta["dpml_privacy"].as_str().unwrap()).unwrap();
        edit(&mut facts);
        meta.insert("dpml_privacy".into(), Value::String(facts.to_string()));
    });
}

#[test]
fn facts_that_contradict_the_weights_or_the_data_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("iris.safetensors");
    let trained = train_iris_non_private(&model);
    let key = trained["split_key"].as_str().unwrap().to_string();
    let eval = |file: &Path| {
        dpml(&[
            "eval",
            "--model",
            file.to_str().unwrap(),
            "--dataset",
            "iris",
            "--split-key",
            &key,
        ])
    };
    // Two classes for three outputs: the file contradicts itself.
    let two = dir.path().join("two.safetensors");
    edit_facts(&model, &two, |f| {
        f["classes"] = serde_json::json!(["a", "b"])
    });
    eval(&two).assert_usage_error("2 classes, but the model has 3 outputs");
    // The classes reordered: each output would mean another class than the data's.
    let swapped = dir.path().join("swapped.safetensors");
    edit_facts(&model, &swapped, |f| {
        f["classes"].as_array_mut().unwrap().reverse();
    });
    eval(&swapped).assert_usage_error("declare them in the model's order");
    assert_eq!(eval(&model).code, 0);
}

/// An output that names one of the run's inputs replaced it: `--save-model r2.csv` over the
/// training CSV, `--log` over it, `--save-model` over the schema, `label-dp --save-model` over
/// its data. Each is refused before the run, however the path is spelled, and the input is
/// left as it was.
#[test]
fn no_output_overwrites_an_input_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let text = common::binary_csv();
    let csv = dir.path().join("r2.csv");
    std::fs::write(&csv, &text).unwrap();
    let schema = dir.path().join("s.json");
    let schema_text = r#"{"bounds": [0, 1], "classes": ["0", "1"]}"#;
    std::fs::write(&schema, schema_text).unwrap();
    let data = format!("csv:{}", csv.display());
    let dotted = dir.path().join(".").join("r2.csv");
    let (c, d, s) = (
        csv.to_str().unwrap(),
        dotted.to_str().unwrap(),
        schema.to_str().unwrap(),
    );
    let declared = ["--classes", "0,1", "--bounds", "0,1"];
    let fit = [
        "--dataset",
        data.as_str(),
        "--epsilon",
        "1",
        "--epochs",
        "1",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            [&["train"], &fit[..], &declared[..], &["--save-model", c]].concat(),
            "--save-model",
        ),
        (
            [&["train"], &fit[..], &declared[..], &["--save-model", d]].concat(),
            "--save-model",
        ),
        (
            [&["train"], &fit[..], &declared[..], &["--log", c]].concat(),
            "--log",
        ),
        (
            [&["train"], &fit[..], &["--schema", s, "--save-model", s]].concat(),
            "--save-model",
        ),
        (
            [&["label-dp"], &fit[..], &declared[..], &["--save-model", c]].concat(),
            "--save-model",
        ),
    ];
    for (args, flag) in cases {
        let run = dpml(&args);
        run.assert_usage_error(flag);
        assert!(
            run.stderr.contains("an input of this run"),
            "{}",
            run.stderr
        );
    }
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), text);
    assert_eq!(std::fs::read_to_string(&schema).unwrap(), schema_text);
}
