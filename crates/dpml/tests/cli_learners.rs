//! `dpml label-dp`, `dpml predict` and input perturbation in `dpml train`, run as a user would.

mod common;
use common::dpml;

#[test]
fn label_dp_reports_its_guarantee_and_utility() {
    let c = dpml(&[
        "label-dp",
        "--dataset",
        "digits",
        "--task",
        "classification",
        "--mechanism",
        "rr",
        "--epsilon",
        "4",
        "--epochs",
        "5",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(c["guarantee"], "label-dp");
    assert_eq!(c["epsilon"], 4.0);
    // The default recipe: small steps, and the moving average of the iterates as the model.
    assert!(
        (c["learning_rate"].as_f64().unwrap() - 3e-4).abs() < 1e-9,
        "{c}"
    );
    assert!((c["ema"].as_f64().unwrap() - 0.999).abs() < 1e-6, "{c}");
    let d = &c["diagnostics"];
    assert!(d["test_accuracy"].as_f64().unwrap() > 0.5, "{c}");
    assert!((0.0..=1.0).contains(&d["noisy_label_accuracy"].as_f64().unwrap()));
    let r = dpml(&[
        "label-dp",
        "--dataset",
        "digits",
        "--task",
        "regression",
        "--mechanism",
        "laplace",
        "--epsilon",
        "4",
        "--epochs",
        "5",
        "--no-ema",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert!(r["ema"].is_null(), "{r}");
    assert!(
        r["diagnostics"]["test_mse"].as_f64().unwrap() > 0.0
            && r["diagnostics"]["test_mae"].as_f64().unwrap() > 0.0,
        "{r}"
    );
    dpml(&[
        "label-dp",
        "--dataset",
        "digits",
        "--task",
        "regression",
        "--mechanism",
        "rr",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("rr");
    dpml(&[
        "label-dp",
        "--dataset",
        "digits",
        "--task",
        "classification",
        "--mechanism",
        "laplace",
        "--epsilon",
        "NaN",
    ])
    .assert_usage_error("NaN");
    dpml(&[
        "label-dp",
        "--dataset",
        "digits",
        "--mechanism",
        "rr",
        "--epsilon",
        "1",
        "--ema",
        "0.9",
        "--no-ema",
    ])
    .assert_usage_error("--no-ema");
}

#[test]
fn predict_charges_the_ledger_before_answering() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.safetensors");
    let ledger = dir.path().join("l.db");
    let (m, l) = (model.to_str().unwrap(), ledger.to_str().unwrap());
    dpml(&[
        "train",
        "--dataset",
        "digits",
        "--model",
        "logreg",
        "--non-private",
        "--epochs",
        "3",
        "--batch-size",
        "64",
        "--save-model",
        m,
        "--seed",
        "1",
        "--json",
    ])
    .json();
    let v = dpml(&[
        "predict",
        "--model-file",
        m,
        "--dataset",
        "digits",
        "--epsilon",
        "1",
        "--queries",
        "10",
        "--ledger",
        l,
        "--budget",
        "12",
        "--json",
    ])
    .json();
    assert_eq!(v["queries"], 10);
    assert_eq!(v["epsilon"], 1.0);
    assert!((v["epsilon_total"].as_f64().unwrap() - 10.0).abs() < 1e-9);
    let before = std::fs::read(&ledger).unwrap();
    dpml(&[
        "predict",
        "--model-file",
        m,
        "--dataset",
        "digits",
        "--epsilon",
        "1",
        "--queries",
        "100",
        "--ledger",
        l,
        "--budget",
        "12",
    ])
    .assert_usage_error("budget");
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
}

#[test]
fn input_perturbation_reports_per_record_and_per_feature_epsilon() {
    let v = dpml(&[
        "train",
        "--dataset",
        "digits",
        "--model",
        "logreg",
        "--non-private",
        "--epochs",
        "3",
        "--batch-size",
        "64",
        "--input-perturbation",
        "laplace",
        "--input-epsilon",
        "0.5",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(v["epsilon_per_feature"], 0.5);
    // 64 pixels per digit: the record's ε composes to 64 × 0.5.
    assert!(
        (v["epsilon_per_record"].as_f64().unwrap() - 32.0).abs() < 1e-9,
        "{v}"
    );
    // Iris: one published range per feature, one Laplace scale per feature (width / ε_f).
    let v = dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--non-private",
        "--epochs",
        "2",
        "--input-perturbation",
        "laplace",
        "--input-epsilon",
        "0.5",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert!(
        (v["epsilon_per_record"].as_f64().unwrap() - 2.0).abs() < 1e-9,
        "{v}"
    );
    let p = &v["input_perturbation"];
    let (ranges, scales) = (
        p["feature_range"].as_array().unwrap(),
        p["noise_scale"].as_array().unwrap(),
    );
    assert_eq!((ranges.len(), scales.len()), (4, 4), "{p}");
    for (r, b) in ranges.iter().zip(scales) {
        let width = r[1].as_f64().unwrap() - r[0].as_f64().unwrap();
        let b = b.as_f64().unwrap();
        // b_j = width_j / 0.5, up to the exact sampler's grid (relative 2^-19).
        assert!((b / (width / 0.5) - 1.0).abs() < 1e-5, "{p}");
    }
    // The top-k rule belongs to rr-prior: refused by name before any label is touched.
    dpml(&[
        "label-dp",
        "--dataset",
        "digits",
        "--mechanism",
        "laplace",
        "--epsilon",
        "1",
        "--top-k-rule",
        "information",
    ])
    .assert_usage_error("top_k_rule");
    dpml(&[
        "train",
        "--dataset",
        "digits",
        "--model",
        "logreg",
        "--non-private",
        "--input-perturbation",
        "cauchy",
        "--input-epsilon",
        "1",
    ])
    .assert_usage_error("cauchy");
}

/// A csv table of 300 records (two features, a label in 0..3); `relabel` and `shift` change
/// every record's label and features, the attributes that label DP and local DP on the
/// features protect.
fn split_table(dir: &std::path::Path, name: &str, relabel: u32, shift: f32) -> String {
    let mut text = String::from("a,b,label\n");
    for i in 0..300u32 {
        let (a, b) = ((i % 100) as f32 / 10.0 + shift, (i * 7 % 11) as f32 - shift);
        text.push_str(&format!("{a},{b},{}\n", (i + relabel) % 3));
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    format!("csv:{}", path.display())
}

#[test]
fn splits_do_not_depend_on_the_protected_attribute() {
    let dir = tempfile::tempdir().unwrap();
    let key = "5".repeat(64);
    let common = ["--split-key", key.as_str(), "--epochs", "1", "--seed", "2"];
    let train_size = |args: &[&str]| -> u64 {
        let mut a = args.to_vec();
        a.extend_from_slice(&common);
        a.push("--json");
        let v = dpml(&a).json();
        v["train_size"]
            .as_u64()
            .or(v["train_records"].as_u64())
            .unwrap_or_else(|| panic!("no training-set size: {v}"))
    };
    // Label DP: the three tables differ in every label; the split hashes the features only.
    let label_dp: Vec<u64> = (0..3)
        .map(|r| {
            let source = split_table(dir.path(), &format!("labels{r}.csv"), r, 0.0);
            train_size(&[
                "label-dp",
                "--dataset",
                &source,
                "--mechanism",
                "rr",
                "--classes",
                "0,1,2",
                "--epsilon",
                "1",
            ])
        })
        .collect();
    // Local DP on the features: the tables differ in every record's features; the split
    // hashes positions.
    let local: Vec<u64> = [0.0, 0.25, 0.5]
        .iter()
        .enumerate()
        .map(|(r, &shift)| {
            let source = split_table(dir.path(), &format!("features{r}.csv"), 0, shift);
            train_size(&[
                "train",
                "--dataset",
                &source,
                "--model",
                "logreg",
                "--non-private",
                "--bounds",
                "-1,11",
                "--input-perturbation",
                "laplace",
                "--input-epsilon",
                "1",
            ])
        })
        .collect();
    let same = |sizes: &[u64]| sizes.windows(2).all(|w| w[0] == w[1]);
    assert!(
        same(&label_dp) && same(&local),
        "label DP {label_dp:?}, local DP {local:?}"
    );
}
