//! `dpml sweep` and `dpml kmeans`, run as a user would, on embedded data.

mod common;
use common::dpml;

#[test]
fn kmeans_sweep_writes_results_summary_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let v = dpml(&[
        "sweep",
        "--experiment",
        "kmeans",
        "--dataset",
        "iris",
        "--epsilons",
        "0.05,30",
        "--repeats",
        "4",
        "--out",
        out.to_str().unwrap(),
        "--seed",
        "3",
        "--json",
    ])
    .json();
    // (baseline + 2 ε) × 4 repeats: the runs the progress counts (each scored on two
    // metrics, one row of results.csv each).
    assert_eq!(v["runs"], 12);
    let results = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(results.lines().count(), 25);
    assert!(
        results
            .lines()
            .any(|l| l.starts_with("kmeans,non-private,"))
    );
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let mean = |eps: &str| -> f64 {
        let line = summary
            .lines()
            .find(|l| l.starts_with(&format!("{eps},accuracy,")))
            .unwrap();
        line.split(',').nth(2).unwrap().parse().unwrap()
    };
    // Large ε approaches the non-private baseline; tiny ε stays well below it.
    assert!(mean("30") > 0.8, "{summary}");
    assert!(mean("0.05") < mean("30"), "{summary}");
    assert_eq!(
        &std::fs::read(out.join("plot.png")).unwrap()[..4],
        b"\x89PNG"
    );
    let svg = std::fs::read_to_string(out.join("plot.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("</svg>"));
    for label in [
        "privacy budget ε (log scale)",
        "mean ± 1 std over 4 runs",
        "Clustering accuracy against ε (DPLloyd k-means, k = 3 on iris)",
    ] {
        assert!(svg.contains(label), "plot.svg lacks {label:?}");
    }

    // The same seed gives the same results whatever the number of worker threads.
    let again = dir.path().join("again");
    let refs = [
        "sweep",
        "--experiment",
        "kmeans",
        "--dataset",
        "iris",
        "--epsilons",
        "0.05,30",
        "--repeats",
        "4",
        "--seed",
        "3",
        "--out",
        again.to_str().unwrap(),
    ];
    let status = common::command(&refs)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    assert_eq!(
        std::fs::read_to_string(again.join("results.csv")).unwrap(),
        results
    );
}

#[test]
fn sweep_and_kmeans_reject_bad_input() {
    dpml(&[
        "sweep",
        "--experiment",
        "kmeans",
        "--dataset",
        "iris",
        "--epsilons",
        "1,abc",
        "--out",
        "x",
    ])
    .assert_usage_error("abc");
    dpml(&[
        "sweep",
        "--experiment",
        "kmeans",
        "--dataset",
        "iris",
        "--epsilons",
        "1,-3",
        "--out",
        "x",
    ])
    .assert_usage_error("-3");
    dpml(&["kmeans", "--dataset", "iris", "--k", "0", "--epsilon", "1"]).assert_usage_error("0");
    dpml(&[
        "kmeans",
        "--dataset",
        "iris",
        "--k",
        "3",
        "--epsilon",
        "1",
        "--bounds",
        "0:1,0:1",
    ])
    .assert_usage_error("4 features");
    // A csv: file publishes no ranges: bounds must be declared.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "a,b,label\n1,2,0\n3,4,1\n5,6,0\n").unwrap();
    let source = format!("csv:{}", csv.display());
    dpml(&["kmeans", "--dataset", &source, "--k", "2", "--epsilon", "1"])
        .assert_usage_error("--bounds");
    // Nor does it publish its classes: without --k, the sweep's k is not read from its labels.
    let out = dir.path().join("sweep");
    dpml(&[
        "sweep",
        "--experiment",
        "kmeans",
        "--dataset",
        &source,
        "--bounds",
        "0:10,0:10",
        "--epsilons",
        "1",
        "--out",
        out.to_str().unwrap(),
    ])
    .assert_usage_error("--k not given");
    assert!(!out.exists());
    dpml(&["kmeans", "--dataset", "iris", "--k", "3"]).assert_usage_error("--epsilon");
}

#[test]
fn kmeans_reports_accuracy_and_a_budget_that_composes_to_epsilon() {
    let v = dpml(&[
        "kmeans",
        "--dataset",
        "iris",
        "--k",
        "3",
        "--epsilon",
        "3",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    for f in ["centroids", "epsilon", "iterations", "budget_split"] {
        assert!(!v[f].is_null(), "missing {f}: {v}");
    }
    // Measured on the records without noise: diagnostics.
    for f in ["accuracy", "nicv", "inertia"] {
        assert!(
            !v["diagnostics"][f].is_null(),
            "missing diagnostics.{f}: {v}"
        );
    }
    assert_eq!(v["epsilon"], 3.0);
    assert_eq!(v["centroids"].as_array().unwrap().len(), 3);
    assert!(v["diagnostics"]["accuracy"].as_f64().unwrap() > 0.6);
}

#[test]
fn label_dp_sweep_draws_the_two_panel_figure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("labeldp");
    let v = dpml(&[
        "sweep",
        "--experiment",
        "label-dp",
        "--dataset",
        "digits",
        "--epsilons",
        "0.1,10",
        "--repeats",
        "1",
        "--epochs",
        "5",
        "--out",
        out.to_str().unwrap(),
        "--seed",
        "2",
        "--json",
    ])
    .json();
    // Baseline + 2 ε, one repeat (two metrics each).
    assert_eq!(v["runs"], 3);
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(
        summary.contains(",test_mse,") && summary.contains(",test_accuracy,"),
        "{summary}"
    );
    // Two panels side by side: MSE (log-log) on the left, accuracy on the right.
    let png = std::fs::read(out.join("plot.png")).unwrap();
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    assert_eq!(width, 1600);
}

#[test]
fn perturbation_sweeps_approach_the_baseline_at_large_epsilon() {
    for experiment in ["output-perturbation", "input-perturbation"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join(experiment);
        dpml(&[
            "sweep",
            "--experiment",
            experiment,
            "--dataset",
            "digits",
            "--epsilons",
            "0.01,1000",
            "--repeats",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--seed",
            "5",
            "--json",
        ])
        .json();
        let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
        let mean = |eps: &str| -> f64 {
            let line = summary
                .lines()
                .find(|l| l.starts_with(&format!("{eps},")))
                .unwrap();
            line.split(',').nth(2).unwrap().parse().unwrap()
        };
        // Ten classes: chance is 0.1. A tiny ε is near chance; a huge one near the baseline.
        assert!(mean("0.01") < 0.3, "{experiment}: {summary}");
        assert!(
            mean("1000") > mean("non-private") - 0.1,
            "{experiment}: {summary}"
        );
    }
}

#[test]
fn kmeans_takes_published_ranges_as_bounds() {
    // Wine publishes a range per feature (proline 278–1680): they are the default bounds.
    let v = dpml(&[
        "kmeans",
        "--dataset",
        "wine",
        "--k",
        "3",
        "--epsilon",
        "3",
        "--seed",
        "1",
        "--json",
    ])
    .json();
    assert_eq!(v["bounds"]["lo"][12], 278.0, "{v}");
    assert_eq!(v["bounds"]["hi"][12], 1680.0, "{v}");
    let acc = v["diagnostics"]["accuracy"].as_f64().unwrap();
    assert!(acc > 1.0 / 3.0, "{v}");
}

#[test]
fn dp_sgd_sweep_cross_validates_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cv");
    let v = dpml(&[
        "sweep",
        "--experiment",
        "dp-sgd",
        "--dataset",
        "iris",
        "--folds",
        "3",
        "--epsilons",
        "0.05,50",
        "--repeats",
        "2",
        // RDP calibrates σ in milliseconds (PLD takes about a second per run).
        "--accountant",
        "rdp",
        "--out",
        out.to_str().unwrap(),
        "--seed",
        "5",
        "--json",
    ])
    .json();
    // (baseline + 2 ε) × 2 repeats, each cross-validated over 3 folds.
    assert_eq!(v["runs"], 6);
    assert_eq!(v["folds"], 3);
    // The grid's ε is each model's; releasing a run's 3 models costs more.
    let all = v["epsilon_all_folds"].as_array().unwrap();
    assert_eq!(all.len(), 2, "{v}");
    for p in all {
        assert!(
            p["epsilon_all_folds"].as_f64().unwrap() > p["epsilon_per_model"].as_f64().unwrap(),
            "{v}"
        );
    }
    assert!(
        v["diagnostics_note"]
            .as_str()
            .unwrap()
            .contains("not differentially private")
    );
    assert!(v["diagnostics"]["summary"].is_array(), "{v}");
    // One key, reported, gives every run the same folds.
    assert_eq!(v["split_key"].as_str().map(str::len), Some(64), "{v}");
    let results = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(results.starts_with("experiment,epsilon,repeat,fold,metric,value\n"));
    for fold in 0..3 {
        assert!(
            results
                .lines()
                .any(|l| l.starts_with(&format!("dp-sgd,50,1,{fold},test_accuracy,"))),
            "{results}"
        );
    }
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let row = |eps: &str| -> (f64, usize) {
        let line = summary
            .lines()
            .find(|l| l.starts_with(&format!("{eps},test_accuracy,")))
            .unwrap();
        let f: Vec<&str> = line.split(',').collect();
        (f[2].parse().unwrap(), f[4].parse().unwrap())
    };
    // Mean and std over repeats × folds: 6 values per ε.
    assert_eq!(row("50").1, 6);
    // Iris has 3 balanced classes (chance 1/3). At ε = 50 the scaled MLP is far above chance
    // (means of 0.86–0.91 over seeds 5–8); at ε = 0.05 the noise swamps the gradient and the
    // 6 runs stay near chance (0.34–0.42 over the same seeds). The mean of 6 fold accuracies
    // on 50 records each has sd ≤ 0.1 (per-run sd measured 0.05–0.2, /√6), so 0.75 and 0.6
    // leave more than 1.5 sd of room on either side.
    assert!(row("50").0 > 0.75, "{summary}");
    assert!(row("0.05").0 < 0.6, "{summary}");
    assert!(row("0.05").0 < row("50").0, "{summary}");
    // --folds is for dp-sgd only.
    dpml(&[
        "sweep",
        "--experiment",
        "kmeans",
        "--dataset",
        "iris",
        "--folds",
        "3",
        "--out",
        out.to_str().unwrap(),
    ])
    .assert_usage_error("--folds");
}
