//! The data boundary on the command line: on the user's own table a private command relies
//! only on what is declared (`--schema`, `--bounds`, `--classes`, `--label-range`), refuses to
//! run without it, and one added record cannot change the model's shape, the noise or the
//! privacy event.

mod common;

use std::path::Path;

use common::dpml;
use serde_json::Value;

/// A table of 60 distinct records: two features in [0, 10], label `yes`/`no`.
fn table(dir: &Path, extra: &str) -> String {
    let mut text = String::from("a,b,y\n");
    for i in 0..60 {
        let label = if i % 3 == 0 { "yes" } else { "no" };
        text.push_str(&format!("{},{},{label}\n", i % 10, i / 10));
    }
    text.push_str(extra);
    let p = dir.join(format!("t{}.csv", extra.len()));
    std::fs::write(&p, text).unwrap();
    format!("csv:{}", p.display())
}

fn train(source: &str, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "train",
        "--dataset",
        source,
        "--model",
        "mlp",
        "--hidden",
        "4",
        "--epsilon",
        "1",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--seed",
        "1",
        "--json",
    ];
    args.extend_from_slice(extra);
    dpml(&args)
}

#[test]
fn private_runs_on_a_csv_refuse_undeclared_bounds_and_classes() {
    let dir = tempfile::tempdir().unwrap();
    let source = table(dir.path(), "");
    train(&source, &[]).assert_usage_error("--classes");
    train(&source, &["--classes", "no,yes"]).assert_usage_error("--bounds");
    train(&source, &["--bounds", "0,10"]).assert_usage_error("--classes");
    dpml(&["kmeans", "--dataset", &source, "--k", "2", "--epsilon", "1"])
        .assert_usage_error("--bounds");
    dpml(&[
        "label-dp",
        "--dataset",
        &source,
        "--mechanism",
        "rr",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("--classes");
    dpml(&[
        "label-dp",
        "--dataset",
        &source,
        "--task",
        "regression",
        "--mechanism",
        "laplace",
        "--epsilon",
        "1",
        "--classes",
        "no,yes",
    ])
    .assert_usage_error("--label-range");
    // Declared, the run goes through and says where each declaration comes from.
    let v = train(&source, &["--bounds", "0,10", "--classes", "no,yes"]).json();
    assert_eq!(v["schema"]["bounds"], "declared", "{v}");
    assert_eq!(v["schema"]["classes"], "declared", "{v}");
    // A non-private run may read its classes off the records, and says so.
    let v = dpml(&[
        "train",
        "--dataset",
        &source,
        "--model",
        "logreg",
        "--non-private",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--json",
    ])
    .json();
    assert_eq!(
        v["schema"]["classes"], "inferred from the records (not private)",
        "{v}"
    );
}

#[test]
fn an_extra_record_with_an_unseen_label_is_refused_and_cannot_change_the_release() {
    let dir = tempfile::tempdir().unwrap();
    let base = table(dir.path(), "");
    let unseen = table(dir.path(), "3,3,maybe\n");
    let declared = ["--bounds", "0,10", "--classes", "no,yes,maybe"];
    let fields = |v: &Value| {
        (
            v["noise_scale"].clone(),
            v["rr_keep_probability"].clone(),
            v["event"].clone(),
        )
    };
    let label_dp = |source: &str| {
        let mut args = vec![
            "label-dp",
            "--dataset",
            source,
            "--mechanism",
            "rr",
            "--epsilon",
            "1",
            "--epochs",
            "1",
            "--seed",
            "1",
            "--json",
        ];
        args.extend_from_slice(&declared);
        dpml(&args).json()
    };
    // The declared domain (three classes) fixes the RR domain, whether or not "maybe" occurs.
    let (a, b) = (label_dp(&base), label_dp(&unseen));
    assert_eq!(fields(&a), fields(&b));
    let keep = a["rr_keep_probability"].as_f64().unwrap();
    let e = std::f64::consts::E;
    assert!((keep - e / (e + 2.0)).abs() < 1e-12, "{a}");

    // With two declared classes the extra record is refused, naming its label and line.
    let run = train(&unseen, &["--bounds", "0,10", "--classes", "no,yes"]);
    run.assert_usage_error("\"maybe\"");
    assert!(run.stderr.contains("line 62"), "{}", run.stderr);

    // The model's shape follows the declaration, not the records.
    let shapes = |source: &str| {
        let out = dir.path().join("m.safetensors");
        let mut args = vec!["--out", out.to_str().unwrap()];
        args.extend_from_slice(&declared);
        train(source, &args).json();
        std::fs::read(&out).unwrap().len()
    };
    assert_eq!(shapes(&base), shapes(&unseen));
}

#[test]
fn a_record_of_extreme_values_is_clamped_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let poisoned = table(dir.path(), "3e38,-3e38,yes\n");
    let out = dir.path().join("m.safetensors");
    let v = train(
        &poisoned,
        &[
            "--bounds",
            "0,10",
            "--classes",
            "no,yes",
            "--out",
            out.to_str().unwrap(),
        ],
    )
    .json();
    let loss = v["diagnostics"]["test_loss"].as_f64();
    assert!(loss.is_some_and(f64::is_finite), "{v}");
}

#[test]
fn a_schema_file_declares_everything_once() {
    let dir = tempfile::tempdir().unwrap();
    let source = table(dir.path(), "");
    let schema = dir.path().join("schema.toml");
    std::fs::write(
        &schema,
        "label_column = \"y\"\nclasses = [\"no\", \"yes\"]\n\
         [[features]]\nname = \"a\"\nbounds = [0, 10]\n\
         [[features]]\nname = \"b\"\nbounds = [0, 10]\n",
    )
    .unwrap();
    let v = train(&source, &["--schema", schema.to_str().unwrap()]).json();
    assert_eq!(v["schema"]["bounds"], "declared", "{v}");
    assert_eq!(v["normalize"]["kind"], "feature_ranges", "{v}");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"classes": ["no"], "colour": 1}"#).unwrap();
    train(&source, &["--schema", bad.to_str().unwrap()]).assert_usage_error("colour");
    // Built-in sets carry theirs, marked public or data-derived.
    let v = dpml(&[
        "kmeans",
        "--dataset",
        "iris",
        "--k",
        "3",
        "--epsilon",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(v["schema"]["bounds"], "data-derived (demo only)", "{v}");
    let v = dpml(&[
        "kmeans",
        "--dataset",
        "digits",
        "--k",
        "10",
        "--epsilon",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(v["schema"]["bounds"], "public", "{v}");
}
