//! The budget ledger from the command line: pure-ε ledgers, and `dpml predict` refusing a model
//! that does not fit the data before it charges anything.

mod common;

use common::dpml;
use std::path::Path;

/// `dpml query` of the mean petal length of iris, with `extra` flags.
fn query(extra: &[&str]) -> common::Run {
    common::query_iris_mean(extra)
}

#[test]
fn a_pure_epsilon_ledger_adds_up_epsilon_and_refuses_delta_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("pure.db");
    let l = ledger.to_str().unwrap();
    let pure = ["--ledger", l, "--budget", "1", "--budget-delta", "0"];
    let first = query(&[&["--epsilon", "0.25", "--json"][..], &pure].concat()).json();
    assert!((first["ledger"]["spent"].as_f64().unwrap() - 0.25).abs() < 1e-12);
    assert_eq!(first["ledger"]["spent_delta"], 0.0);
    // Plain sum: the CLI's RDP composition needs δ > 0, and the balance says so.
    let composition = first["ledger"]["composition"].as_str().unwrap();
    assert!(composition.starts_with("basic"), "{composition}");
    let before = std::fs::read(&ledger).unwrap();
    // Gaussian noise spends δ > 0: refused by name, the ledger untouched.
    let gaussian = [
        "--epsilon",
        "0.25",
        "--mechanism",
        "gaussian",
        "--delta",
        "1e-6",
    ];
    query(&[&gaussian[..], &pure].concat()).assert_usage_error("pure-epsilon");
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
    // A negative δ budget is still refused at parse time, naming the value.
    query(&[
        "--epsilon",
        "0.25",
        "--ledger",
        l,
        "--budget",
        "1",
        "--budget-delta",
        "-1",
    ])
    .assert_usage_error("-1");
    let second = query(&[&["--epsilon", "0.75", "--json"][..], &pure].concat()).json();
    assert!(second["ledger"]["remaining"].as_f64().unwrap().abs() < 1e-12);
}

/// Trains a small non-private iris model into `path`.
fn train_iris(path: &Path) {
    dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--non-private",
        "--epochs",
        "2",
        "--batch-size",
        "32",
        "--save-model",
        path.to_str().unwrap(),
        "--seed",
        "1",
        "--json",
    ])
    .json();
}

/// Copies the safetensors model at `from` to `to` with every weight set to NaN (the header and
/// its metadata kept): a model whose outputs are not probabilities.
fn nan_weights(from: &Path, to: &Path) {
    let mut bytes = std::fs::read(from).unwrap();
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let text = std::str::from_utf8(&bytes[8..8 + header]).unwrap();
    assert!(
        !text.contains("\"F64\"") && text.contains("\"F32\""),
        "{text}"
    );
    for w in bytes[8 + header..].chunks_exact_mut(4) {
        w.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(to, bytes).unwrap();
}

#[test]
fn predict_refuses_a_model_that_does_not_fit_before_charging_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("iris.safetensors");
    train_iris(&good);
    let nan = dir.path().join("nan.safetensors");
    nan_weights(&good, &nan);
    // Four features like iris, but two classes where the model has three.
    let two = dir.path().join("two.csv");
    let mut csv = String::from("a,b,c,d,label\n");
    for i in 0..20 {
        csv.push_str(&format!(
            "{},{},{},{},{}\n",
            i % 7,
            i % 5,
            i % 3,
            i % 2,
            i % 2
        ));
    }
    std::fs::write(&two, csv).unwrap();
    let two_spec = format!("csv:{}", two.display());

    let ledger = dir.path().join("l.db");
    let l = ledger.to_str().unwrap();
    let predict = |model: &Path, dataset: &str| {
        dpml(&[
            "predict",
            "--model-file",
            model.to_str().unwrap(),
            "--dataset",
            dataset,
            "--epsilon",
            "0.1",
            "--queries",
            "5",
            "--ledger",
            l,
            "--budget",
            "10",
            "--seed",
            "1",
            "--json",
        ])
    };
    let first = predict(&good, "iris").json();
    let spent = first["ledger"]["spent"].as_f64().unwrap();
    assert!(spent > 0.0);
    let before = std::fs::read(&ledger).unwrap();

    predict(&nan, "iris").assert_usage_error("NaN");
    assert_eq!(std::fs::read(&ledger).unwrap(), before, "NaN model charged");
    predict(&good, &two_spec).assert_usage_error("3 classes");
    assert_eq!(
        std::fs::read(&ledger).unwrap(),
        before,
        "3 vs 2 classes charged"
    );

    let again = predict(&good, "iris").json();
    assert_eq!(again["ledger"]["entries"], 2);
}
