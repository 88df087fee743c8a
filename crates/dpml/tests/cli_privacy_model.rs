//! Releases apart from diagnostics: every private command states its unit of privacy and what
//! it assumes public, keeps figures computed without noise under "diagnostics" (left out by
//! `--no-diagnostics`), and `train --folds` reports the ε of releasing all K models.

mod common;
use common::dpml;
use serde_json::Value;

/// Runs `args` with `--json` and checks the privacy-model fields and that none of `unnoised`
/// sits at top level; returns the JSON.
fn release_json(args: &[&str], unnoised: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let v = dpml(&a).json();
    assert!(
        !v["neighbouring"].as_str().unwrap_or_default().is_empty(),
        "{args:?}: no neighbouring: {v}"
    );
    assert!(
        !v["public"].as_array().is_none_or(Vec::is_empty),
        "{args:?}: no public assumptions: {v}"
    );
    for f in unnoised {
        assert!(
            v.get(*f).is_none(),
            "{args:?}: un-noised {f} at top level: {v}"
        );
        assert!(
            v["diagnostics"].get(*f).is_some(),
            "{args:?}: {f} missing from diagnostics: {v}"
        );
    }
    v
}

#[test]
fn every_private_command_separates_release_from_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("iris.safetensors");
    let m = model.to_str().unwrap();
    let train = &[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--epsilon",
        "3",
        "--epochs",
        "2",
        "--accountant",
        "rdp",
        "--seed",
        "1",
        "--save-model",
        m,
    ];
    let v = release_json(
        train,
        &["test_accuracy", "train_accuracy", "test_loss", "test_size"],
    );
    assert_eq!(
        v["neighbouring"],
        "add/remove one record of the input data set"
    );
    assert!(v["train_size"].as_u64().unwrap() > 0, "{v}");
    assert!(
        v["public"][0]
            .as_str()
            .unwrap()
            .starts_with("training-set size"),
        "{v}"
    );
    release_json(
        &[
            "train",
            "--dataset",
            "iris",
            "--model",
            "logreg",
            "--noise-multiplier",
            "1",
            "--epochs",
            "2",
            "--accountant",
            "rdp",
            "--folds",
            "3",
            "--seed",
            "1",
        ],
        &["fold_accuracies", "test_accuracy_mean", "test_accuracy_std"],
    );
    let v = release_json(
        &[
            "label-dp",
            "--dataset",
            "iris",
            "--mechanism",
            "rr",
            "--epsilon",
            "2",
            "--epochs",
            "1",
            "--seed",
            "1",
        ],
        &[
            "noisy_label_accuracy",
            "stage_noisy_label_accuracy",
            "test_accuracy",
            "test_size",
        ],
    );
    assert!(
        v["neighbouring"]
            .as_str()
            .unwrap()
            .contains("only the labels are private"),
        "{v}"
    );
    release_json(
        &[
            "kmeans",
            "--dataset",
            "iris",
            "--k",
            "3",
            "--epsilon",
            "1",
            "--seed",
            "1",
        ],
        &["accuracy", "nicv", "inertia"],
    );
    release_json(
        &[
            "predict",
            "--model-file",
            m,
            "--dataset",
            "iris",
            "--epsilon",
            "1",
            "--queries",
            "10",
            "--seed",
            "1",
        ],
        &["test_accuracy"],
    );
    // Every figure of these is noisy (or public): nothing to diagnose.
    for args in [
        &[
            "query",
            "--dataset",
            "iris",
            "--column",
            "petal_length",
            "--aggregate",
            "count",
            "--epsilon",
            "1",
        ][..],
        &[
            "rr",
            "--dataset",
            "breast-cancer",
            "--column",
            "target",
            "--epsilon",
            "1",
        ],
        &[
            "release",
            "--mechanism",
            "laplace",
            "--value",
            "3",
            "--sensitivity",
            "1",
            "--epsilon",
            "1",
        ],
    ] {
        let v = release_json(args, &[]);
        assert!(v.get("diagnostics").is_none(), "{args:?}: {v}");
    }
}

#[test]
fn no_diagnostics_leaves_the_diagnostics_out() {
    let kmeans = [
        "kmeans",
        "--dataset",
        "iris",
        "--k",
        "3",
        "--epsilon",
        "1",
        "--seed",
        "1",
    ];
    let with = |extra: &[&'static str]| {
        let mut a = kmeans.to_vec();
        a.extend_from_slice(extra);
        dpml(&a)
    };
    let full = with(&["--json"]).json();
    let lean = with(&["--json", "--no-diagnostics"]).json();
    assert!(full["diagnostics"].is_object(), "{full}");
    assert!(lean.get("diagnostics").is_none(), "{lean}");
    // The release itself is unchanged (same seed).
    assert_eq!(full["centroids"], lean["centroids"]);
    assert_eq!(full["neighbouring"], lean["neighbouring"]);
    // The flag is global: it goes before the command too.
    let mut before = vec!["--no-diagnostics"];
    before.extend_from_slice(&kmeans);
    before.push("--json");
    assert!(dpml(&before).json().get("diagnostics").is_none());
    // Read as text, the diagnostics are a labelled section of their own.
    let heading =
        "diagnostics (computed from private data without noise: not differentially private):";
    let text = with(&[]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains(heading), "{}", text.stdout);
    let after = text.stdout.split(heading).nth(1).unwrap();
    // One aligned `name  value` row per diagnostic.
    let row = |name: &str| {
        after
            .lines()
            .any(|l| l.trim_start().starts_with(&format!("{name} ")))
    };
    assert!(row("accuracy") && row("inertia"), "{after}");
    let text = with(&["--no-diagnostics"]);
    assert!(
        !text.stdout.contains("diagnostics") && !text.stdout.contains("inertia"),
        "{}",
        text.stdout
    );
    let help = dpml(&["--help"]).stdout;
    assert!(help.contains("--no-diagnostics"), "{help}");
    assert!(
        help.contains("computed from private data without noise: not differentially private"),
        "{help}"
    );
}

#[test]
fn train_log_starts_with_the_diagnostics_header() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("epochs.csv");
    dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--noise-multiplier",
        "1",
        "--epochs",
        "2",
        "--seed",
        "1",
        "--log",
        log.to_str().unwrap(),
        "--json",
    ])
    .json();
    let csv = std::fs::read_to_string(&log).unwrap();
    let mut lines = csv.lines();
    // The columns computed from private data without noise say so in their names.
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("epoch,steps,diagnostic_train_loss,diagnostic_train_accuracy,"),
        "{csv}"
    );
    assert_eq!(lines.count(), 2, "one row per epoch: {csv}");
}

#[test]
fn folds_report_the_epsilon_of_all_models_as_the_accountant_composes_it() {
    let k = 5;
    let v = dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--noise-multiplier",
        "1",
        "--epochs",
        "3",
        "--batch-size",
        "24",
        "--folds",
        "5",
        "--seed",
        "3",
        "--json",
    ])
    .json();
    let all = v["epsilon_all_folds"].as_f64().unwrap();
    let per_model = v["epsilon_per_model"].as_f64().unwrap();
    assert_eq!(v["epsilon"], v["epsilon_all_folds"], "{v}");
    assert!(all > per_model, "{v}");
    assert_eq!(v["epsilon_per_fold"].as_array().unwrap().len(), k);
    assert_eq!(v["accountant"], "pld");
    // Independently: a record of test fold f trains the other K − 1 models, so its loss is
    // their composition; `dpml account` composes a list of events, with the same accountant.
    let events = v["event_per_fold"].as_array().unwrap();
    assert_eq!(events.len(), k);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("others.json");
    let delta = v["delta"].to_string();
    let pld_epsilon = |events: &str| {
        std::fs::write(&file, events).unwrap();
        let a = dpml(&[
            "account",
            "--events",
            file.to_str().unwrap(),
            "--delta",
            &delta,
            "--accountant",
            "pld",
            "--json",
        ])
        .json();
        a["epsilon"]["pld"].as_f64().unwrap()
    };
    let mut worst = 0f64;
    for f in 0..k {
        let others: Vec<&Value> = (0..k).filter(|&i| i != f).map(|i| &events[i]).collect();
        worst = worst.max(pld_epsilon(&serde_json::to_string(&others).unwrap()));
    }
    assert!(
        (all - worst).abs() <= 1e-6 * worst,
        "epsilon_all_folds {all}, accountant {worst}"
    );
    // Where the folds' events are equal, that is K − 1 self-compositions of one of them.
    if events.iter().all(|e| *e == events[0]) {
        let composed =
            serde_json::json!({"type": "self_composed", "count": k - 1, "event": events[0]});
        let e = pld_epsilon(&composed.to_string());
        assert!((all - e).abs() <= 1e-6 * e, "{all} vs {e}");
    }
}
