//! `dpml query`, `dpml rr`, `dpml data` and the budget ledger, run as a user would.

mod common;
use common::{IRIS_MEAN, command, dpml, from_output, mnist_data_dir};

fn query(extra: &[&str]) -> common::Run {
    common::query_iris_mean(extra)
}

#[test]
fn query_aggregates_report_their_fields() {
    for (agg, extra) in [
        ("count", vec![]),
        ("sum", vec!["--bounds", "0,10"]),
        ("mean", vec!["--bounds", "0,10"]),
    ] {
        let mut a = vec![
            "query",
            "--dataset",
            "iris",
            "--column",
            "petal_length",
            "--aggregate",
            agg,
            "--epsilon",
            "5",
            "--seed",
            "1",
            "--json",
        ];
        a.extend(extra);
        let v = dpml(&a).json();
        for f in [
            "value",
            "mechanism",
            "epsilon",
            "delta",
            "sensitivity",
            "scale",
            "seeded",
        ] {
            assert!(!v[f].is_null(), "{agg}: missing {f} in {v}");
        }
    }
    let h = dpml(&[
        "query",
        "--dataset",
        "iris",
        "--column",
        "target",
        "--aggregate",
        "histogram",
        "--bounds",
        "-0.5,2.5",
        "--bins",
        "3",
        "--epsilon",
        "10",
        "--mechanism",
        "gaussian",
        "--delta",
        "1e-6",
        "--seed",
        "2",
        "--json",
    ])
    .json();
    let bins = h["value"].as_array().unwrap();
    assert_eq!(bins.len(), 3);
    // 50 of each class; Gaussian noise at ε = 10 has σ < 1, so every bin is within 5 of 50.
    for b in bins {
        assert!((b.as_f64().unwrap() - 50.0).abs() < 5.0, "{h}");
    }
    assert!(h["sigma"].as_f64().unwrap() > 0.0);
    // Sum sensitivity comes from the bounds: max(|lo|, |hi|).
    let s = dpml(&[
        "query",
        "--dataset",
        "iris",
        "--column",
        "petal_length",
        "--aggregate",
        "sum",
        "--bounds",
        "-3,10",
        "--epsilon",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(s["sensitivity"], 10.0);
}

#[test]
fn query_rejects_bad_input() {
    query(&["--epsilon", "0"]).assert_usage_error("0");
    query(&["--epsilon", "NaN"]).assert_usage_error("NaN");
    dpml(&[
        "query",
        "--dataset",
        "iris",
        "--column",
        "petal_length",
        "--aggregate",
        "mean",
        "--bounds",
        "5,1",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("5,1");
    dpml(&[
        "query",
        "--dataset",
        "iris",
        "--column",
        "petal_length",
        "--aggregate",
        "sum",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("--bounds");
    dpml(&[
        "query",
        "--dataset",
        "iris",
        "--column",
        "no_such",
        "--aggregate",
        "count",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("no_such");
    dpml(&[
        "query",
        "--dataset",
        "nosuchset",
        "--column",
        "x",
        "--aggregate",
        "count",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("nosuchset");
    query(&[
        "--epsilon",
        "1",
        "--mechanism",
        "gaussian",
        "--delta",
        "1.5",
    ])
    .assert_usage_error("1.5");
}

#[test]
fn csv_files_empty_or_malformed_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "a,b,label\n1,2,x\n3,oops,y\n").unwrap();
    let good = dir.path().join("good.csv");
    std::fs::write(&good, "a,b,label\n1,2,x\n3,4,y\n5,6,x\n").unwrap();
    let spec = |p: &std::path::Path| format!("csv:{}", p.display());
    let run = |p: &std::path::Path| {
        dpml(&[
            "query",
            "--dataset",
            &spec(p),
            "--column",
            "a",
            "--aggregate",
            "count",
            "--epsilon",
            "1",
        ])
    };
    run(&empty).assert_usage_error("empty.csv");
    let r = run(&bad);
    r.assert_usage_error("oops");
    assert!(
        r.stderr.contains("row") || r.stderr.contains("line"),
        "{}",
        r.stderr
    );
    run(&dir.path().join("missing.csv")).assert_usage_error("missing.csv");
    let v = dpml(&[
        "query",
        "--dataset",
        &spec(&good),
        "--column",
        "b",
        "--aggregate",
        "mean",
        "--bounds",
        "0,10",
        "--epsilon",
        "1",
        "--json",
    ])
    .json();
    assert!(v["value"].is_number());
}

#[test]
fn ledger_refuses_overspending_and_leaves_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("budget.db");
    let l = ledger.to_str().unwrap();
    let first = query(&["--epsilon", "0.6", "--ledger", l, "--budget", "1", "--json"]).json();
    assert!((first["ledger"]["spent"].as_f64().unwrap() - 0.6).abs() < 1e-9);
    assert!((first["ledger"]["remaining"].as_f64().unwrap() - 0.4).abs() < 1e-9);
    let before = std::fs::read(&ledger).unwrap();
    let over = query(&["--epsilon", "0.6", "--ledger", l, "--budget", "1", "--json"]);
    over.assert_usage_error("budget");
    assert_eq!(
        std::fs::read(&ledger).unwrap(),
        before,
        "a refused spend changed the ledger"
    );
    // A bigger budget cannot be slipped in later.
    query(&["--epsilon", "0.6", "--ledger", l, "--budget", "5"]).assert_usage_error("budget");
    // Bad input never touches the ledger.
    query(&["--epsilon", "NaN", "--ledger", l, "--budget", "1"]).assert_usage_error("NaN");
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
    let second = query(&["--epsilon", "0.4", "--ledger", l, "--budget", "1", "--json"]).json();
    assert!(second["ledger"]["remaining"].as_f64().unwrap().abs() < 1e-9);
}

#[test]
fn corrupt_ledger_is_refused_not_reset() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("budget.db");
    std::fs::write(&ledger, b"this is not a ledger at all, just some bytes").unwrap();
    let before = std::fs::read(&ledger).unwrap();
    query(&[
        "--epsilon",
        "0.1",
        "--ledger",
        ledger.to_str().unwrap(),
        "--budget",
        "1",
    ])
    .assert_usage_error("budget.db");
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
}

#[test]
fn concurrent_queries_never_overspend() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("budget.db");
    let l = ledger.to_str().unwrap();
    let children: Vec<_> = (0..6)
        .map(|_| {
            let mut a = IRIS_MEAN.to_vec();
            a.extend_from_slice(&["--epsilon", "0.3", "--ledger", l, "--budget", "1", "--json"]);
            command(&a)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let runs: Vec<_> = children
        .into_iter()
        .map(|c| from_output(c.wait_with_output().unwrap()))
        .collect();
    let ok = runs.iter().filter(|r| r.code == 0).count();
    assert_eq!(
        ok,
        3,
        "exactly three spends of 0.3 fit in 1.0: {:?}",
        runs.iter().map(|r| &r.stderr).collect::<Vec<_>>()
    );
    for r in runs.iter().filter(|r| r.code != 0) {
        r.assert_usage_error("budget");
    }
}

#[test]
fn killed_queries_keep_their_recorded_spends() {
    // kill -9 at random moments: whatever a finished run reported stays spent, and the ledger
    // still opens; the total is never below the reported spends.
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("budget.db");
    let l = ledger.to_str().unwrap();
    let mut reported = 0;
    for i in 0..12u64 {
        let mut a = IRIS_MEAN.to_vec();
        a.extend_from_slice(&[
            "--epsilon",
            "0.01",
            "--ledger",
            l,
            "--budget",
            "100",
            "--json",
        ]);
        let mut child = command(&a)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2 + 3 * i));
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            reported += 1;
        }
    }
    let v = query(&[
        "--epsilon",
        "0.01",
        "--ledger",
        l,
        "--budget",
        "100",
        "--json",
    ])
    .json();
    let entries = v["ledger"]["entries"].as_u64().unwrap();
    assert!(
        entries > reported,
        "entries {entries} must include the {reported} reported spends and this one"
    );
}

#[test]
fn coin_flip_survey_recovers_the_proportion() {
    // breast-cancer target: 357 of 569 are 1 (benign).
    let truth = 357.0 / 569.0;
    let v = dpml(&[
        "rr",
        "--dataset",
        "breast-cancer",
        "--column",
        "target",
        "--coin",
        "fair",
        "--seed",
        "5",
        "--json",
    ])
    .json();
    assert!((v["epsilon"].as_f64().unwrap() - 3f64.ln()).abs() < 1e-12);
    assert_eq!(v["true_value_withheld"], true);
    let (est, se) = (
        v["estimate"].as_f64().unwrap(),
        v["std_error"].as_f64().unwrap(),
    );
    let ci = v["ci95"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() <= est && est <= ci[1].as_f64().unwrap());
    assert!(
        (est - truth).abs() < 3.5 * se,
        "estimate {est} ± {se} vs {truth}"
    );
    let k = dpml(&[
        "rr",
        "--dataset",
        "iris",
        "--column",
        "target",
        "--categories",
        "0,1,2",
        "--epsilon",
        "2",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(k["estimate"].as_array().unwrap().len(), 3);
    dpml(&[
        "rr",
        "--dataset",
        "iris",
        "--column",
        "target",
        "--coin",
        "fair",
    ])
    .assert_usage_error("categor");
    dpml(&[
        "rr",
        "--dataset",
        "iris",
        "--column",
        "target",
        "--epsilon",
        "-2",
    ])
    .assert_usage_error("-2");
}

#[test]
#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
fn data_list_and_verify() {
    let data = mnist_data_dir();
    let d = data.to_str().unwrap();
    let v = dpml(&["data", "list", "--data-dir", d, "--json"]).json();
    let sets = v["datasets"].as_array().unwrap();
    let iris = sets.iter().find(|s| s["name"] == "iris").unwrap();
    assert_eq!(iris["rows"], 150);
    let mnist = sets.iter().find(|s| s["name"] == "mnist").unwrap();
    assert_eq!(mnist["available"], true);
    let ver = dpml(&["data", "verify", "--data-dir", d, "--json"]).json();
    assert_eq!(ver["mismatched"], 0);
    assert!(ver["ok"].as_u64().unwrap() >= 8);
}

#[test]
#[cfg_attr(not(dpml_mnist), ignore = "needs MNIST: set DPML_DATA_DIR")]
fn truncated_idx_is_a_named_error() {
    let data = mnist_data_dir();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("mnist")).unwrap();
    for f in [
        "train-images-idx3-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ] {
        std::fs::copy(data.join("mnist").join(f), dir.path().join("mnist").join(f)).unwrap();
    }
    let labels = std::fs::read(data.join("mnist/train-labels-idx1-ubyte.gz")).unwrap();
    std::fs::write(
        dir.path().join("mnist/train-labels-idx1-ubyte.gz"),
        &labels[..labels.len() / 2],
    )
    .unwrap();
    dpml(&[
        "query",
        "--dataset",
        "mnist",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--column",
        "label",
        "--aggregate",
        "count",
        "--epsilon",
        "1",
    ])
    .assert_usage_error("train-labels");
}
