//! What a newcomer tripped on (issue 40): the split a model file records, audits with nothing
//! to check, counts that disagree, ranges written two ways, clamping that erases a feature,
//! defaults `--help` did not show, and the seed of a resumed run.

mod common;

use std::path::Path;

use common::dpml;
use serde_json::Value;

/// A csv table of `n` records: `a` in [0, 1], `pressure` in 980–1040, a label from `a`.
fn table(dir: &Path, n: usize) -> String {
    let mut text = String::from("a,pressure,label\n");
    for i in 0..n {
        let a = (i * 37 % 100) as f64 / 100.0;
        let pressure = 980.0 + (i * 13 % 60) as f64;
        text.push_str(&format!("{a},{pressure},{}\n", u8::from(a > 0.5)));
    }
    let path = dir.join("table.csv");
    std::fs::write(&path, text).unwrap();
    format!("csv:{}", path.display())
}

#[test]
fn eval_holds_out_the_records_the_model_file_records() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path(), 300);
    let model = dir.path().join("m.safetensors");
    let m = model.to_str().unwrap();
    let trained = dpml(&[
        "train",
        "--dataset",
        &data,
        "--bounds",
        "0:1,950:1050",
        "--classes",
        "0,1",
        "--epsilon",
        "2",
        "--epochs",
        "2",
        "--seed",
        "1",
        "--save-model",
        m,
        "--json",
    ])
    .json();
    let inspected = dpml(&["inspect", m, "--json"]).json();
    assert_eq!(
        inspected["privacy"]["split"]["key"], trained["split_key"],
        "{inspected}"
    );
    // No --split-key: the file's split is used, so the same records are the test set.
    let eval = dpml(&["eval", "--model-file", m, "--dataset", &data, "--json"]).json();
    assert_eq!(eval["split_key"], trained["split_key"]);
    assert_eq!(
        eval["diagnostics"]["test_size"],
        trained["diagnostics"]["test_size"]
    );
    // The human summary prints the key too.
    let human = dpml(&[
        "train",
        "--dataset",
        &data,
        "--bounds",
        "0:1,950:1050",
        "--classes",
        "0,1",
        "--epsilon",
        "2",
        "--epochs",
        "1",
        "--seed",
        "1",
    ]);
    assert!(human.stdout.contains("split_key"), "{}", human.stdout);
}

fn scores_csv(dir: &Path) -> String {
    let mut text = String::from("score,member\n");
    for i in 0..400 {
        let s = ((i * 7919) % 1000) as f64 / 1000.0;
        text.push_str(&format!(
            "{},{}\n",
            s + if i % 2 == 0 { 0.2 } else { 0.0 },
            i % 2
        ));
    }
    let path = dir.join("scores.csv");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn an_audit_without_a_claimed_epsilon_says_there_is_nothing_to_check() {
    let dir = tempfile::tempdir().unwrap();
    let scores = scores_csv(dir.path());
    let v = dpml(&["audit", "--scores", &scores, "--seed", "1", "--json"]).json();
    assert_eq!(v["verdict"], "no claim to check");
    assert!(v["consistent"].is_null(), "{v}");
    let human = dpml(&["audit", "--scores", &scores, "--seed", "1"]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    let headline = human.stdout.lines().next().unwrap();
    assert!(headline.contains("no claim to check"), "{headline}");
    assert!(
        headline.contains("AUC") && headline.contains("at 0.1% FPR"),
        "{headline}"
    );
    // The ε the scored model claims is checked when given.
    let claimed = dpml(&[
        "audit",
        "--scores",
        &scores,
        "--epsilon",
        "8",
        "--delta",
        "1e-5",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(claimed["epsilon_theoretical"], 8.0);
    assert_eq!(claimed["verdict"], "consistent");
    assert_eq!(claimed["consistent"], true);
}

#[test]
fn the_progress_counts_the_epochs_the_run_was_asked_for() {
    // digits-eps1: 40 epochs of B = 256 over about 1,150 records, N/B not whole; the bar
    // counted passes of ⌈N/B⌉ steps and ended at "epoch 36/36".
    let run = dpml(&[
        "train",
        "--preset",
        "digits-eps1",
        "--seed",
        "1",
        "--epochs",
        "40",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("epoch 40/40"), "{}", run.stderr);
    assert!(!run.stderr.contains("epoch 41"), "{}", run.stderr);
}

#[test]
fn one_range_is_written_either_way_and_covers_every_feature() {
    // 64 features: `0:16` is one range for all of them, as `0,16` is.
    for bounds in ["0,16", "0:16"] {
        let v = dpml(&[
            "kmeans",
            "--dataset",
            "digits",
            "--k",
            "10",
            "--bounds",
            bounds,
            "--epsilon",
            "1",
            "--seed",
            "1",
            "--json",
        ])
        .json();
        assert_eq!(v["bounds"]["hi"].as_array().unwrap().len(), 64, "{bounds}");
    }
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path(), 120);
    let v = dpml(&[
        "train",
        "--dataset",
        &data,
        "--label-range",
        "0:1",
        "--task",
        "regression",
        "--bounds",
        "0:1,950:1050",
        "--epsilon",
        "2",
        "--epochs",
        "1",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(v["schema"]["label_range"], serde_json::json!([0.0, 1.0]));
}

#[test]
fn a_feature_clamped_for_most_records_is_counted_and_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path(), 200);
    // One range for both features: pressure (980–1040) becomes the constant 100.
    let run = kmeans(&data, "0,100", "1", &["--seed", "1", "--json"]);
    let v = run.json();
    assert_eq!(v["diagnostics"]["clamped"]["pressure"], 200, "{v}");
    assert!(v["diagnostics"]["clamped"].get("a").is_none(), "{v}");
    let warning = v["diagnostics"]["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("pressure") && warning.contains("200 of 200"),
        "{warning}"
    );
    assert!(
        run.stderr.contains("warning: feature pressure"),
        "{}",
        run.stderr
    );
    // A diagnostic: --no-diagnostics leaves it out, the warning line too.
    let quiet = kmeans(
        &data,
        "0,100",
        "1",
        &["--seed", "1", "--json", "--no-diagnostics"],
    );
    assert!(quiet.json().get("diagnostics").is_none());
    assert!(!quiet.stderr.contains("warning"), "{}", quiet.stderr);
}

#[test]
fn a_default_batch_larger_than_the_training_set_is_fitted_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path(), 60);
    let v = dpml(&[
        "train",
        "--dataset",
        &data,
        "--bounds",
        "0:1,950:1050",
        "--classes",
        "0,1",
        "--epsilon",
        "2",
        "--epochs",
        "1",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    let n = v["train_size"].as_u64().unwrap();
    assert!(n < 64, "{v}");
    assert_eq!(v["batch_size"], n / 4);
    assert!(
        v["notes"][0].as_str().unwrap().contains("batch_size"),
        "{v}"
    );
    // A batch the user gave is theirs, refused by name when it does not fit.
    dpml(&[
        "train",
        "--dataset",
        &data,
        "--bounds",
        "0:1,950:1050",
        "--classes",
        "0,1",
        "--epsilon",
        "2",
        "--batch-size",
        "64",
        "--seed",
        "1",
    ])
    .assert_usage_error("batch_size");
}

#[test]
fn the_log_reads_as_a_plain_table_with_its_diagnostics_named() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.csv");
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
    let header = csv.lines().next().unwrap();
    assert!(!header.starts_with('#'), "{csv}");
    assert!(
        header.starts_with("epoch,steps,diagnostic_train_loss"),
        "{csv}"
    );
    assert!(header.ends_with(",epsilon"), "{csv}");
    assert_eq!(csv.lines().count(), 3, "{csv}");
}

#[test]
fn help_shows_every_data_form_and_the_recipes_defaults() {
    let help = dpml(&["train", "--help"]).stdout;
    for form in ["csv:", "npy:", "npz:", "idx:", "images:", "parquet:"] {
        assert!(help.contains(form), "{form} missing from train --help");
    }
    assert!(
        help.contains("[default: tables (iris, wine, breast-cancer, csv:) 30, digits 40"),
        "{help}"
    );
    let presets = dpml(&["presets"]).stdout;
    for column in ["model", "epsilon", "expected_accuracy", "time"] {
        assert!(presets.contains(column), "{presets}");
    }
    assert!(
        presets.contains("scatter-linear") && presets.contains("98.71%"),
        "{presets}"
    );
}

#[test]
fn a_resumed_run_must_give_the_seed_it_was_started_with() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    let start = [
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--noise-multiplier",
        "1",
        "--epochs",
        "2",
        "--checkpoint",
        ck,
        "--stop-after-steps",
        "2",
    ];
    let run = dpml(&[&start[..], &["--seed", "1"]].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let resume = [
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--noise-multiplier",
        "1",
        "--epochs",
        "2",
        "--resume",
        ck,
    ];
    dpml(&[&resume[..], &["--seed", "2"]].concat())
        .assert_usage_error("--seed 2 differs from the seed of the checkpoint's run (1)");
    dpml(&resume).assert_usage_error("--seed none differs");
    let done = dpml(&[&resume[..], &["--seed", "1", "--json"]].concat()).json();
    assert!(done["epsilon"].as_f64().unwrap() > 0.0);
}

#[test]
fn query_reads_the_columns_bounds_from_a_schema() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path(), 100);
    let schema = dir.path().join("schema.toml");
    std::fs::write(
        &schema,
        "label_column = \"label\"\n[[features]]\nname = \"a\"\nbounds = [0, 1]\n\
         [[features]]\nname = \"pressure\"\nbounds = [900, 1100]\n",
    )
    .unwrap();
    let v = dpml(&[
        "query",
        "--dataset",
        &data,
        "--schema",
        schema.to_str().unwrap(),
        "--column",
        "pressure",
        "--aggregate",
        "sum",
        "--epsilon",
        "1",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(v["sensitivity"], 1100.0, "{v}");
    dpml(&[
        "query",
        "--dataset",
        &data,
        "--column",
        "pressure",
        "--aggregate",
        "sum",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("--schema");
}

#[test]
fn an_architecture_without_a_name_is_named_after_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny-net.json");
    std::fs::write(
        &path,
        r#"{"input_shape": [4], "layers": [{"type": "linear", "in_features": 4, "out_features": 3}]}"#,
    )
    .unwrap();
    let v = dpml(&["arch", "show", path.to_str().unwrap(), "--json"]).json();
    assert_eq!(v["name"], "tiny-net");
}

#[test]
fn integer_mechanisms_release_integers() {
    let v = dpml(&[
        "release",
        "--mechanism",
        "discrete-laplace",
        "--value",
        "10",
        "--sensitivity",
        "1",
        "--epsilon",
        "1",
        "--count",
        "3",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    let values = v["values"].as_array().unwrap();
    assert!(values.iter().all(Value::is_i64), "{v}");
}

#[test]
fn an_epsilon_too_small_for_the_sampler_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(dir.path(), 20);
    kmeans(&data, "0,2000", "1e-300", &[])
        .assert_usage_error("--epsilon must leave a noise scale the exact sampler holds");
}

/// `dpml kmeans` with k = 2 on `data` within `bounds` at `epsilon`, then `extra`.
fn kmeans(data: &str, bounds: &str, epsilon: &str, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "kmeans",
        "--dataset",
        data,
        "--k",
        "2",
        "--bounds",
        bounds,
        "--epsilon",
        epsilon,
    ];
    args.extend_from_slice(extra);
    dpml(&args)
}
