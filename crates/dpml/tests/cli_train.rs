//! `dpml train`, `eval`, `presets` and `bench dpsgd`, run as a user would, on embedded data.

mod common;
use common::dpml;

#[test]
fn train_reports_the_contract_fields_and_respects_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("digits.safetensors");
    let log = dir.path().join("epochs.csv");
    let v = dpml(&[
        "train",
        "--preset",
        "digits-eps1",
        "--seed",
        "1",
        "--save-model",
        model.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
        "--json",
    ])
    .json();
    // Figures computed from the records without noise are diagnostics, not the release.
    let d = &v["diagnostics"];
    for f in [
        "test_accuracy",
        "train_accuracy",
        "test_loss",
        "test_size",
        // The realised Poisson batch sizes over time.
        "samples_per_sec",
    ] {
        assert!(!d[f].is_null(), "missing diagnostics.{f}: {v}");
        assert!(v.get(f).is_none(), "{f} at top level: {v}");
    }
    for f in [
        "train_size",
        "epsilon",
        "delta",
        "accountant",
        "noise_multiplier",
        "sampling_rate",
        "steps",
        "epochs",
        "max_grad_norm",
        "wall_seconds",
        "seeded",
    ] {
        assert!(!v[f].is_null(), "missing {f}: {v}");
    }
    assert!(v["epsilon"].as_f64().unwrap() <= 1.0);
    assert_eq!(v["accountant"], "pld");
    assert_eq!(v["seeded"], true);
    let acc = d["test_accuracy"].as_f64().unwrap();
    assert!(acc > 0.7, "digits at epsilon 1: {acc}");
    // A header naming the diagnostic columns, then one CSV row per epoch (40: the
    // preset's); the last row's ε is the run's ε.
    let csv = std::fs::read_to_string(&log).unwrap();
    let first = csv.lines().next().unwrap();
    assert!(first.starts_with("epoch,steps,diagnostic_"), "{csv}");
    assert_eq!(csv.lines().count(), 41, "{csv}");
    let last_eps: f64 = csv
        .lines()
        .last()
        .unwrap()
        .rsplit(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (last_eps - v["epsilon"].as_f64().unwrap()).abs() < 1e-9,
        "{csv}"
    );

    // Saved, loaded and evaluated: the same accuracy on the same split (the reported key).
    let key = v["split_key"].as_str().unwrap();
    assert!(
        key.len() == 64 && key.chars().all(|c| c.is_ascii_hexdigit()),
        "{v}"
    );
    let e = dpml(&[
        "eval",
        "--model-file",
        model.to_str().unwrap(),
        "--dataset",
        "digits",
        "--split-key",
        key,
        "--json",
    ])
    .json();
    assert_eq!(e["diagnostics"]["test_accuracy"], d["test_accuracy"]);
    assert_eq!(e["diagnostics"]["test_size"], d["test_size"]);
    assert!(
        e["diagnostics_note"]
            .as_str()
            .unwrap()
            .contains("not differentially private")
    );
}

#[test]
fn non_private_and_noise_multiplier_runs() {
    let np = dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--non-private",
        "--epochs",
        "30",
        "--batch-size",
        "32",
        "--lr",
        "0.5",
        "--seed",
        "2",
        "--json",
    ])
    .json();
    assert!(np["epsilon"].is_null());
    assert!(
        np["diagnostics"]["test_accuracy"].as_f64().unwrap() > 0.8,
        "{np}"
    );
    let sigma = dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "mlp",
        "--hidden",
        "16",
        "--noise-multiplier",
        "1.0",
        "--epochs",
        "2",
        "--batch-size",
        "30",
        "--accountant",
        "rdp",
        "--seed",
        "2",
        "--json",
    ])
    .json();
    assert_eq!(sigma["noise_multiplier"], 1.0);
    assert_eq!(sigma["accountant"], "rdp");
    assert!(sigma["epsilon"].as_f64().unwrap() > 0.0);
    // Private noise is exact by default: the report says so, with the sensitivity the grid
    // adds to C; `--float-noise` draws floating-point noise at sensitivity C.
    assert_eq!(sigma["exact_noise"], true, "{sigma}");
    assert!(sigma["sensitivity"].as_f64().unwrap() > 1.0, "{sigma}");
    assert_eq!(np["exact_noise"], false, "{np}");
    let float = iris_run(&["--float-noise", "--seed", "2"]).json();
    assert_eq!(float["exact_noise"], false, "{float}");
    assert_eq!(float["sensitivity"], 1.0, "{float}");
}

#[test]
fn train_rejects_bad_input_by_name() {
    let base = |extra: &[&str]| {
        let mut a = vec![
            "train",
            "--dataset",
            "iris",
            "--epochs",
            "1",
            "--batch-size",
            "16",
        ];
        a.extend_from_slice(extra);
        dpml(&a)
    };
    base(&["--model", "resnet", "--non-private"]).assert_usage_error("resnet");
    base(&["--model", "batchnorm", "--non-private"]).assert_usage_error("BatchNorm");
    base(&["--model", "cnn", "--non-private"]).assert_usage_error("28");
    base(&[
        "--model",
        "logreg",
        "--epsilon",
        "1",
        "--max-grad-norm",
        "0",
    ])
    .assert_usage_error("0");
    base(&["--model", "logreg", "--epsilon", "NaN"]).assert_usage_error("NaN");
    base(&["--model", "logreg"]).assert_usage_error("--epsilon");
    for flag in ["--exact-noise", "--float-noise"] {
        base(&["--model", "logreg", "--non-private", flag]).assert_usage_error(flag);
    }
    base(&[
        "--model",
        "logreg",
        "--epsilon",
        "1",
        "--exact-noise",
        "--float-noise",
    ])
    .assert_usage_error("--float-noise");
    dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--batch-size",
        "0",
        "--non-private",
    ])
    .assert_usage_error("0");
    dpml(&[
        "train",
        "--dataset",
        "nosuch",
        "--model",
        "logreg",
        "--non-private",
    ])
    .assert_usage_error("nosuch");
    dpml(&["train", "--preset", "nosuch"]).assert_usage_error("nosuch");
}

#[test]
fn presets_and_bench() {
    let p = dpml(&["presets", "--json"]).json();
    let names: Vec<&str> = p["presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    for want in [
        "mnist-nonprivate",
        "mnist-eps1",
        "mnist-eps3",
        "mnist-eps8",
        "fashion-mnist-eps3",
        "digits-eps1",
    ] {
        assert!(names.contains(&want), "missing preset {want}");
    }
    let b = dpml(&[
        "bench",
        "dpsgd",
        "--model",
        "logreg",
        "--batch-size",
        "32",
        "--steps",
        "2",
        "--json",
    ])
    .json();
    for f in [
        "private_samples_per_sec",
        "nonprivate_samples_per_sec",
        "ratio",
        "exact_noise_samples_per_sec",
    ] {
        assert!(b[f].as_f64().unwrap() > 0.0, "{f}: {b}");
    }
}

/// The FLOP figures: counted from the architecture (mlp 784-32-10: 2·(784·32 + 32·10)
/// forward FLOPs, three times per training step), the achieved rate of each mode consistent
/// with its throughput, and a given peak used as is; a bad peak is a usage error.
#[test]
fn bench_reports_flops_and_the_fraction_of_peak() {
    let b = dpml(&[
        "bench",
        "dpsgd",
        "--model",
        "mlp",
        "--hidden",
        "32",
        "--batch-size",
        "16",
        "--steps",
        "2",
        "--peak-gflops",
        "100",
        "--json",
    ])
    .json();
    // Forward and weight gradients of both layers, the input gradient of the second only.
    let flops = 2 * 2 * (784 * 32 + 32 * 10) + 2 * 32 * 10;
    assert_eq!(b["flops_per_sample"].as_u64(), Some(flops), "{b}");
    assert_eq!(b["peak_gflops"].as_f64(), Some(100.0), "{b}");
    assert_eq!(b["peak_source"].as_str(), Some("--peak-gflops"), "{b}");
    for (mode, rate) in [
        ("private", "private_samples_per_sec"),
        ("nonprivate", "nonprivate_samples_per_sec"),
        ("exact_noise", "exact_noise_samples_per_sec"),
    ] {
        let want = b[rate].as_f64().unwrap() * flops as f64 / 1e9;
        let got = b["achieved_gflops"][mode].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-9 * want, "{mode}: {got} vs {want}");
        let frac = b["peak_fraction"][mode].as_f64().unwrap();
        assert!((frac - got / 100.0).abs() <= 1e-12, "{mode}: {frac}");
    }
    // Detected (no flag): a positive peak with the formula spelled out, or a stated absence.
    let d = dpml(&[
        "bench",
        "dpsgd",
        "--model",
        "logreg",
        "--batch-size",
        "8",
        "--steps",
        "1",
        "--json",
    ])
    .json();
    let source = d["peak_source"].as_str().unwrap();
    assert!(
        d["peak_gflops"].as_f64().is_some_and(|p| p > 0.0) && source.starts_with("detected")
            || d["peak_gflops"].is_null() && source.starts_with("not detected"),
        "{d}"
    );
    dpml(&["bench", "dpsgd", "--peak-gflops=-3"]).assert_usage_error("-3");
    // Repetitions a user could not wait for are refused by name.
    let huge = u64::MAX.to_string();
    dpml(&["bench", "accounting", "--repeats", &huge]).assert_usage_error(&huge);
    dpml(&["bench", "sql", "--data", "x", "--runs", "10001"]).assert_usage_error("10001");
}

#[test]
fn cross_validation_reports_mean_and_std_over_folds() {
    let v = dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--epsilon",
        "5",
        "--epochs",
        "10",
        "--batch-size",
        "24",
        "--lr",
        "0.5",
        "--folds",
        "3",
        "--seed",
        "4",
        "--json",
    ])
    .json();
    assert_eq!(v["folds"], 3);
    let d = &v["diagnostics"];
    assert_eq!(d["fold_accuracies"].as_array().unwrap().len(), 3);
    let mean = d["test_accuracy_mean"].as_f64().unwrap();
    assert!(
        mean > 0.34 && d["test_accuracy_std"].as_f64().unwrap() >= 0.0,
        "{v}"
    );
    assert!(v["epsilon_per_model"].as_f64().unwrap() <= 5.0);
    // The release is all three models: it costs more than one.
    assert_eq!(v["epsilon"], v["epsilon_all_folds"]);
    assert!(v["epsilon"].as_f64().unwrap() > 5.0, "{v}");
    // Folds are drawn per record: random sizes that cover every record once.
    let sizes: Vec<u64> = v["fold_sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    assert_eq!((sizes.len(), sizes.iter().sum::<u64>()), (3, 150), "{v}");
    assert_eq!(v["split_key"].as_str().unwrap().len(), 64, "{v}");
}

/// A quick private iris run with `extra` flags.
fn iris_run(extra: &[&str]) -> common::Run {
    let mut a = vec![
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--epsilon",
        "5",
        "--epochs",
        "2",
        "--batch-size",
        "32",
    ];
    a.extend_from_slice(extra);
    a.push("--json");
    dpml(&a)
}

#[test]
fn the_split_key_is_reported_and_reproduces_the_run() {
    let a = iris_run(&["--seed", "3"]).json();
    let key = a["split_key"].as_str().unwrap().to_string();
    assert_eq!(key.len(), 64, "{a}");
    let n = |v: &serde_json::Value| {
        (
            v["train_size"].as_u64(),
            v["diagnostics"]["test_size"].as_u64(),
        )
    };
    assert_eq!(n(&a).0.unwrap() + n(&a).1.unwrap(), 150);
    // The same seed: the same key, split and result.
    let b = iris_run(&["--seed", "3"]).json();
    assert_eq!(b["split_key"], a["split_key"]);
    assert_eq!(n(&b), n(&a));
    assert_eq!(
        b["diagnostics"]["test_accuracy"],
        a["diagnostics"]["test_accuracy"]
    );
    // Another seed draws another key; given back, the key repeats the split, and with the
    // first seed the whole run.
    let c = iris_run(&["--seed", "4"]).json();
    assert_ne!(c["split_key"], a["split_key"]);
    let d = iris_run(&["--seed", "4", "--split-key", &key]).json();
    assert_eq!(
        (d["split_key"].as_str(), n(&d)),
        (Some(key.as_str()), n(&a))
    );
    let e = iris_run(&["--seed", "3", "--split-key", &key]).json();
    assert_eq!(
        e["diagnostics"]["test_accuracy"],
        a["diagnostics"]["test_accuracy"]
    );
    // The deprecated --split-seed still fixes the split, whatever the run's seed.
    let f = iris_run(&["--seed", "5", "--split-seed", "0"]).json();
    let g = iris_run(&["--seed", "6", "--split-seed", "0"]).json();
    assert_eq!(f["split_key"], g["split_key"]);
    assert_eq!(n(&f), n(&g));

    iris_run(&["--split-key", "abc"]).assert_usage_error("abc");
    iris_run(&["--split-key", &key, "--split-seed", "1"]).assert_usage_error("--split-key");
    iris_run(&["--seed", "1", "--test-fraction", "0.000000001"])
        .assert_usage_error("the test set came out empty");
    // eval reads the model file first: the split it records is the default (cli_fronts.rs).
    dpml(&[
        "eval",
        "--model-file",
        "unused.safetensors",
        "--dataset",
        "iris",
        "--json",
    ])
    .assert_usage_error("unused.safetensors");
}

#[test]
fn tabular_sets_are_scaled_from_their_published_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("iris.safetensors");
    // No preset: the small-table recipe (an MLP) on iris scaled from its published ranges.
    let v = dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "mlp",
        "--epsilon",
        "10",
        "--seed",
        "2",
        "--save-model",
        model.to_str().unwrap(),
        "--json",
    ])
    .json();
    assert_eq!(v["normalize"]["kind"], "feature_ranges", "{v}");
    let ranges = v["normalize"]["ranges"].as_array().unwrap();
    assert_eq!(ranges.len(), 4);
    // Petal length, published as 1.0–6.9 cm (UCI iris.names).
    assert!((ranges[2][1].as_f64().unwrap() - 6.9).abs() < 1e-6, "{v}");
    // The scaling travels with the model: eval on the same split gives the same accuracy.
    let e = dpml(&[
        "eval",
        "--model-file",
        model.to_str().unwrap(),
        "--dataset",
        "iris",
        "--split-key",
        v["split_key"].as_str().unwrap(),
        "--json",
    ])
    .json();
    assert_eq!(
        e["diagnostics"]["test_accuracy"],
        v["diagnostics"]["test_accuracy"]
    );

    // A csv: file publishes nothing: unscaled unless --bounds declares ranges.
    let csv = dir.path().join("t.csv");
    let mut text = String::from("a,b,label\n");
    // Every record distinct even once b is clamped (the split hashes records, so copies
    // share a side, and ten distinct records would leave the test set empty one run in ten).
    for i in 0..80 {
        text.push_str(&format!("{},{},{}\n", f64::from(i) / 8.0, 100 + i, i % 2));
    }
    std::fs::write(&csv, text).unwrap();
    let source = format!("csv:{}", csv.display());
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "train",
            "--dataset",
            source.as_str(),
            "--non-private",
            "--epochs",
            "1",
            "--batch-size",
            "16",
            "--json",
        ];
        a.extend_from_slice(extra);
        a
    };
    assert_eq!(dpml(&args(&[])).json()["normalize"]["kind"], "none");
    let v = dpml(&args(&["--bounds", "0:10,100:180"])).json();
    assert_eq!(v["normalize"]["kind"], "feature_ranges", "{v}");
    // One range, `0:10` or `0,10`, is every feature's: b (100–179) is clamped for every
    // record, which the diagnostics count and warn about.
    let one = dpml(&args(&["--bounds", "0:10"])).json();
    assert_eq!(one["diagnostics"]["clamped"]["b"], 80, "{one}");
    assert!(
        one["diagnostics"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("feature b")
    );
    dpml(&args(&["--bounds", "0:10,100:180,0:1"])).assert_usage_error("2 features");
    dpml(&args(&[
        "--input-perturbation",
        "laplace",
        "--input-epsilon",
        "1",
    ]))
    .assert_usage_error("--bounds");
}
