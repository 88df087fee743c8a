//! The command-line contract: help, JSON output, exit codes and one-line errors.

mod common;
use common::dpml;

#[test]
fn help_lists_the_commands() {
    let r = dpml(&["--help"]);
    assert_eq!(r.code, 0);
    for cmd in [
        "release",
        "query",
        "rr",
        "account",
        "calibrate",
        "tradeoff",
        "data",
    ] {
        assert!(r.stdout.contains(cmd), "--help does not list {cmd}");
    }
}

#[test]
fn default_job_runs_without_flags_or_downloads() {
    let r = dpml(&["--json"]);
    let v = r.json();
    assert!(
        v["diagnostics"]["test_accuracy"].as_f64().unwrap() > 0.5,
        "{v}"
    );
    assert!(v["epsilon"].as_f64().unwrap() <= 1.0);
    assert_eq!(v["dataset"], "digits");
    assert!(r.stderr.contains("default job"));
}

#[test]
fn unknown_command_and_flag_are_usage_errors() {
    dpml(&["frobnicate"]).assert_usage_error("frobnicate");
    dpml(&["release", "--bogus"]).assert_usage_error("--bogus");
}

#[test]
fn release_laplace_reports_scale_and_seed() {
    let r = dpml(&[
        "release",
        "--mechanism",
        "laplace",
        "--value",
        "10",
        "--sensitivity",
        "1",
        "--epsilon",
        "0.5",
        "--count",
        "1000",
        "--seed",
        "3",
        "--json",
    ]);
    let v = r.json();
    let values = v["values"].as_array().unwrap();
    assert_eq!(values.len(), 1000);
    assert_eq!(v["seeded"], true);
    assert_eq!(v["mechanism"], "laplace");
    // The realised scale is never below Δ/ε (privacy arithmetic rounds outward) and close to it.
    let scale = v["scale"].as_f64().unwrap();
    assert!((2.0..2.01).contains(&scale), "scale {scale}");
    assert!((v["epsilon_total"].as_f64().unwrap() - 500.0).abs() < 1e-9);
    // Mean of 1000 draws: sd of the mean = √2·b/√1000 ≈ 0.089; 5 sd.
    let mean: f64 = values.iter().map(|x| x.as_f64().unwrap()).sum::<f64>() / 1000.0;
    assert!((mean - 10.0).abs() < 0.45, "mean {mean}");
    // Same seed, same values; no seed, not seeded.
    let again = dpml(&[
        "release",
        "--mechanism",
        "laplace",
        "--value",
        "10",
        "--sensitivity",
        "1",
        "--epsilon",
        "0.5",
        "--count",
        "1000",
        "--seed",
        "3",
        "--json",
    ]);
    assert_eq!(again.json()["values"], v["values"]);
    let unseeded = dpml(&[
        "release",
        "--mechanism",
        "laplace",
        "--value",
        "10",
        "--sensitivity",
        "1",
        "--epsilon",
        "1",
        "--json",
    ]);
    assert_eq!(unseeded.json()["seeded"], false);
}

#[test]
fn release_gaussian_and_discrete_mechanisms() {
    let g = dpml(&[
        "release",
        "--mechanism",
        "gaussian",
        "--value",
        "0",
        "--sensitivity",
        "1",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    let sigma = g["sigma"].as_f64().unwrap();
    assert!(sigma > 3.0 && sigma < 4.0, "analytic sigma {sigma}");
    let dl = dpml(&[
        "release",
        "--mechanism",
        "discrete-laplace",
        "--value",
        "7",
        "--sensitivity",
        "1",
        "--epsilon",
        "1",
        "--count",
        "5",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert!(
        dl["values"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x.as_f64().unwrap().fract() == 0.0)
    );
    let dg = dpml(&[
        "release",
        "--mechanism",
        "discrete-gaussian",
        "--value",
        "7",
        "--sensitivity",
        "2",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert!(dg["sigma"].as_f64().unwrap() > 0.0);
}

#[test]
fn release_rejects_bad_parameters() {
    let base = [
        "release",
        "--mechanism",
        "laplace",
        "--value",
        "1",
        "--sensitivity",
        "1",
    ];
    let with = |extra: &[&str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend_from_slice(extra);
        dpml(&a)
    };
    with(&["--epsilon", "0"]).assert_usage_error("0");
    with(&["--epsilon", "-1"]).assert_usage_error("-1");
    with(&["--epsilon", "NaN"]).assert_usage_error("NaN");
    with(&["--epsilon", "inf"]).assert_usage_error("inf");
    with(&["--epsilon", "abc"]).assert_usage_error("abc");
    with(&["--epsilon", "1", "--delta", "0.1"]).assert_usage_error("--delta");
    dpml(&[
        "release",
        "--mechanism",
        "gaussian",
        "--value",
        "1",
        "--sensitivity",
        "1",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("--delta");
    dpml(&[
        "release",
        "--mechanism",
        "gaussian",
        "--value",
        "1",
        "--sensitivity",
        "1",
        "--epsilon",
        "1",
        "--delta",
        "1",
    ])
    .assert_usage_error("1");
    dpml(&[
        "release",
        "--mechanism",
        "gaussian",
        "--value",
        "1",
        "--sensitivity",
        "1",
        "--epsilon",
        "2",
        "--delta",
        "1e-5",
        "--calibration",
        "classic",
    ])
    .assert_usage_error("2");
    dpml(&[
        "release",
        "--mechanism",
        "discrete-laplace",
        "--value",
        "1.5",
        "--sensitivity",
        "1",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("1.5");
    dpml(&[
        "release",
        "--mechanism",
        "laplace",
        "--value",
        "1",
        "--sensitivity",
        "0",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("0");
}

/// Every command that reads a data set lists every form `--dataset` takes in its help.
#[test]
fn dataset_help_names_every_input_form() {
    for command in [
        "train", "eval", "label-dp", "kmeans", "query", "audit", "predict", "sweep", "rr", "tune",
    ] {
        let help = dpml(&[command, "--help"]);
        assert_eq!(help.code, 0, "{command}: {}", help.stderr);
        for form in ["csv:", "parquet:", "npy:", "npz:", "idx:", "images:"] {
            assert!(help.stdout.contains(form), "{command} --help omits {form}");
        }
    }
}

/// A path that cannot be what it is used for (a file where a folder belongs, a folder that
/// does not exist) is the caller's mistake: exit 2, never 1.
#[test]
fn path_mistakes_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("x.db");
    let missing = dir.path().join("no-such-folder").join("x.db");
    for ledger in [&under_file, &missing] {
        let run = dpml(&[
            "ledger",
            "create",
            "--ledger",
            ledger.to_str().unwrap(),
            "--budget-epsilon",
            "1",
        ]);
        assert_eq!(run.code, 2, "{}", run.stderr);
    }
    let file = file.to_str().unwrap();
    let fit = [
        "train",
        "--dataset",
        "iris",
        "--epsilon",
        "1",
        "--epochs",
        "2",
    ];
    for extra in [
        &["--checkpoint", file, "--checkpoint-every", "1"][..],
        &["--resume", file],
    ] {
        let run = dpml(&[&fit[..], extra].concat());
        assert_eq!(run.code, 2, "{extra:?}: {}", run.stderr);
        assert!(run.stderr.contains(file), "{}", run.stderr);
    }
}
