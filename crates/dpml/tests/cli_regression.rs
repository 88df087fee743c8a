//! `dpml train --task regression` and `dpml sweep --experiment dp-sgd-regression`, run as a
//! user would, on the embedded digits and small csv tables.

mod common;

use common::dpml;
use dpml_data::{LoadOptions, Source, load};

/// Mean squared error of always predicting the middle of digits' declared label range, over
/// all digits records (the test split is a random fifth of them).
fn mid_range_mse() -> f64 {
    let d = load(
        &"digits".parse::<Source>().unwrap(),
        &LoadOptions::default(),
    )
    .unwrap()
    .train;
    let (lo, hi) = (0.0, 9.0);
    let mid = (lo + hi) / 2.0;
    d.y.iter()
        .map(|&y| (f64::from(y) - mid).powi(2))
        .sum::<f64>()
        / d.n as f64
}

#[test]
fn digits_regression_with_dp_sgd_beats_the_mid_range_constant() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("r.safetensors").display().to_string();
    let v = dpml(&[
        "train",
        "--dataset",
        "digits",
        "--task",
        "regression",
        "--epsilon",
        "3",
        "--seed",
        "1",
        "--save-model",
        &model,
        "--json",
    ])
    .json();
    assert_eq!(v["task"], "regression", "{v}");
    let eps = v["epsilon"].as_f64().unwrap();
    assert!(eps > 2.5 && eps <= 3.0, "{v}");
    let d = &v["diagnostics"];
    let (mse, mae) = (
        d["test_mse"].as_f64().unwrap(),
        d["test_mae"].as_f64().unwrap(),
    );
    let baseline = mid_range_mse();
    assert!(
        mse < 0.6 * baseline,
        "test MSE {mse} vs {baseline} of the mid-range constant: {v}"
    );
    assert!(mae > 0.0 && mae * mae <= mse + 1e-9, "{v}");
    assert_saved_regression_model_reevaluates(&model, &v);
}

/// The saved model records its task, `dpml eval` reads it as a regression model and gives the
/// training run's own test MSE and MAE on the same split, and `dpml predict` (classification
/// queries) refuses it by name.
fn assert_saved_regression_model_reevaluates(model: &str, trained: &serde_json::Value) {
    let split_key = trained["split_key"].as_str().unwrap();
    let e = dpml(&[
        "eval",
        "--model-file",
        model,
        "--dataset",
        "digits",
        "--split-key",
        split_key,
        "--json",
    ])
    .json();
    assert_eq!(e["model_privacy"]["task"], "regression", "{e}");
    for k in ["test_mse", "test_mae"] {
        let (a, b) = (
            e["diagnostics"][k].as_f64().unwrap(),
            trained["diagnostics"][k].as_f64().unwrap(),
        );
        assert!(
            (a - b).abs() <= 1e-9 * b.max(1.0),
            "{k}: eval {a}, training {b}"
        );
    }
    dpml(&[
        "predict",
        "--model-file",
        model,
        "--dataset",
        "digits",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("regression model");
}

#[test]
fn a_saved_label_dp_regression_model_reevaluates_to_its_reported_errors() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("l.safetensors").display().to_string();
    let v = dpml(&[
        "label-dp",
        "--dataset",
        "digits",
        "--task",
        "regression",
        "--mechanism",
        "laplace",
        "--epsilon",
        "4",
        "--seed",
        "2",
        "--save-model",
        &model,
        "--json",
    ])
    .json();
    assert_saved_regression_model_reevaluates(&model, &v);
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// A table whose label is 2·a rounded, a ∈ [0, 4.5]: a linear regression fits it.
fn linear_table(extra: &str) -> String {
    let mut t = String::from("a,b,y\n");
    for i in 0..200 {
        let a = (i % 10) as f64 / 2.0;
        let b = ((i * 7) % 13) as f64 / 13.0;
        t.push_str(&format!("{a},{b},{}\n", (2.0 * a).round()));
    }
    t.push_str(extra);
    t
}

#[test]
fn csv_regression_needs_a_declared_label_range() {
    let dir = tempfile::tempdir().unwrap();
    let csv = write(dir.path(), "t.csv", &linear_table(""));
    let source = format!("csv:{csv}");
    dpml(&[
        "train",
        "--dataset",
        &source,
        "--task",
        "regression",
        "--epsilon",
        "1",
        "--bounds",
        "0,5",
    ])
    .assert_usage_error("--label-range");
}

#[test]
fn labels_outside_the_declared_range_are_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let source =
        |name: &str, extra: &str| format!("csv:{}", write(dir.path(), name, &linear_table(extra)));
    let run = |source: &str| {
        dpml(&[
            "train",
            "--dataset",
            source,
            "--task",
            "regression",
            "--non-private",
            "--bounds",
            "0,5",
            "--label-range",
            "0,9",
            "--epochs",
            "20",
            "--seed",
            "3",
            "--json",
        ])
        .json()
    };
    // One record with a huge label: clamped to 9, it moves the fit no more than a 9 does.
    let huge = run(&source("huge.csv", "4.5,0.5,1e30\n"));
    let nine = run(&source("nine.csv", "4.5,0.5,9\n"));
    let (a, b) = (
        huge["diagnostics"]["test_mse"].as_f64().unwrap(),
        nine["diagnostics"]["test_mse"].as_f64().unwrap(),
    );
    assert!(a.is_finite() && a < 9.0, "{huge}");
    assert_eq!(a, b, "{huge} vs {nine}");
}

#[test]
fn dp_sgd_regression_sweep_compares_both_mechanisms() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("reg");
    let v = dpml(&[
        "sweep",
        "--experiment",
        "dp-sgd-regression",
        "--dataset",
        "digits",
        "--epsilons",
        "1,8",
        "--repeats",
        "1",
        "--epochs",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--seed",
        "4",
        "--json",
    ])
    .json();
    // Baseline + 2 ε: the runs the progress counts (each ε's run trains both mechanisms).
    assert_eq!(v["runs"], 3, "{v}");
    let results = std::fs::read_to_string(out.join("results.csv")).unwrap();
    for metric in ["dp_sgd_test_mse", "label_dp_test_mse"] {
        assert_eq!(
            results.lines().filter(|l| l.contains(metric)).count(),
            if metric == "dp_sgd_test_mse" { 3 } else { 2 },
            "{results}"
        );
    }
    for f in ["summary.csv", "plot.png", "plot.svg"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let svg = std::fs::read_to_string(out.join("plot.svg")).unwrap();
    assert!(
        svg.contains("non-private DP-SGD regression"),
        "no baseline line"
    );
}

#[test]
fn regression_takes_input_perturbation_and_folds() {
    let base = [
        "train",
        "--dataset",
        "digits",
        "--task",
        "regression",
        "--epsilon",
        "3",
        "--epochs",
        "5",
        "--seed",
        "5",
        "--json",
    ];
    let mut args = base.to_vec();
    args.extend(["--input-perturbation", "laplace", "--input-epsilon", "0.5"]);
    let v = dpml(&args).json();
    // 64 features at ε 0.5 each compose to 32 per record; DP-SGD's ε is reported beside it.
    assert!(
        (v["epsilon_per_record"].as_f64().unwrap() - 32.0).abs() < 1e-9,
        "{v}"
    );
    assert!(v["epsilon"].as_f64().unwrap() <= 3.0, "{v}");
    assert!(v["diagnostics"]["test_mse"].as_f64().unwrap() > 0.0, "{v}");
    let mut args = base.to_vec();
    args.extend(["--folds", "2"]);
    let v = dpml(&args).json();
    let folds = v["diagnostics"]["fold_mses"].as_array().unwrap();
    assert_eq!(folds.len(), 2, "{v}");
    let mean = v["diagnostics"]["test_mse_mean"].as_f64().unwrap();
    let want = folds.iter().map(|f| f.as_f64().unwrap()).sum::<f64>() / 2.0;
    assert!((mean - want).abs() < 1e-12, "{v}");
}
