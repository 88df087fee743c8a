//! `dpml sweep --experiment mia` (local against central DP under attack), run as a user would
//! on the embedded digits with tiny models and few reference models.

mod common;
use common::dpml;

/// A fast sweep of digits into `out` at `epsilons`.
fn mia_sweep(out: &std::path::Path, epsilons: &str) -> common::Run {
    mia_sweep_with(out, epsilons, &[])
}

/// [`mia_sweep`] with `extra` flags appended (`--optimizer` there replaces the default Adam and
/// its learning rate).
fn mia_sweep_with(out: &std::path::Path, epsilons: &str, extra: &[&str]) -> common::Run {
    let base = [
        "sweep",
        "--experiment",
        "mia",
        "--dataset",
        "digits",
        "--epsilons",
        epsilons,
        "--train-size",
        "150",
        "--reference-models",
        "4",
        "--model",
        "mlp",
        "--hidden",
        "16",
        "--epochs",
        "30",
        "--batch-size",
        "25",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--seed",
        "5",
        "--json",
    ];
    // Adam: local DP's inputs carry Laplace noise far wider than the features, which makes
    // plain SGD's steps diverge (unless `extra` chooses the optimizer itself).
    let adam: &[&str] = if extra.contains(&"--optimizer") {
        &[]
    } else {
        &["--optimizer", "adam", "--lr", "0.01"]
    };
    dpml(&[&base[..], adam, extra].concat())
}

#[test]
fn mia_sweep_writes_the_figure_and_puts_lower_bounds_under_the_guaranteed_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mia");
    let v = mia_sweep(&out, "1,8").json();
    assert_eq!(v["experiment"], "mia");
    assert_eq!(v["consistent"], true, "{v}");
    let points = v["points"].as_array().unwrap();
    // The baseline, then DP-SGD and local DP at each ε.
    assert_eq!(points.len(), 5, "{v}");
    assert_eq!(points[0]["mechanism"], "non-private");
    assert!(points[0]["epsilon_accountant"].is_null());
    for eps in [1.0, 8.0] {
        for mechanism in ["dp-sgd", "local-dp"] {
            let p = points
                .iter()
                .find(|p| p["mechanism"] == mechanism && p["epsilon"].as_f64() == Some(eps))
                .unwrap_or_else(|| panic!("no {mechanism} point at ε = {eps}: {v}"));
            let claimed = p["epsilon_accountant"].as_f64().unwrap();
            // DP-SGD is calibrated to the target ε; local DP states its per-record ε.
            assert!(claimed > 0.0 && claimed <= eps * 1.0001, "{p}");
            for attack in ["loss", "lira"] {
                let a = &p["attacks"][attack];
                let lb = a["epsilon_lower_bound"].as_f64().unwrap();
                // The privacy invariant: no attack proves more than the mechanism allows.
                assert!(
                    lb >= 0.0 && lb <= claimed,
                    "{mechanism} {attack} at ε {eps}: {p}"
                );
                let auc = a["auc"].as_f64().unwrap();
                assert!((0.0..=1.0).contains(&auc), "{p}");
                assert!(a["advantage"].as_f64().unwrap() >= 0.0, "{p}");
            }
            let acc = p["test_accuracy"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&acc), "{p}");
        }
    }
    // The non-private baseline learns digits well beyond chance (10 classes).
    assert!(points[0]["test_accuracy"].as_f64().unwrap() > 0.3, "{v}");
    assert!(
        v["diagnostics_note"]
            .as_str()
            .unwrap()
            .contains("not a release")
    );

    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    // One row per point and attack, after the header.
    assert_eq!(csv.lines().count(), 1 + 5 * 2, "{csv}");
    assert!(csv.starts_with("mechanism,epsilon,epsilon_accountant,"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["points"], v["points"]);
    assert_eq!(
        &std::fs::read(out.join("plot.png")).unwrap()[..4],
        b"\x89PNG"
    );
    let svg = std::fs::read_to_string(out.join("plot.svg")).unwrap();
    for label in [
        "Test accuracy against ε",
        "Membership inference, best of loss and LiRA",
        "DP-SGD: AUC",
        "local DP: ε lower bound",
        "non-private baseline",
        "(log scale)",
    ] {
        assert!(svg.contains(label), "plot.svg lacks {label:?}");
    }
}

#[test]
fn mia_sweep_refuses_a_missing_or_negative_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mia");
    mia_sweep(&out, "").assert_usage_error("--epsilons");
    mia_sweep(&out, "1,-2").assert_usage_error("-2");
    assert!(!out.exists(), "a refused sweep wrote {}", out.display());
}

#[test]
fn mia_sweep_refuses_repeats_other_than_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mia");
    // Refused before any model is trained, so this stays fast.
    mia_sweep_with(&out, "1", &["--repeats", "3"]).assert_usage_error("--repeats 3");
    assert!(!out.exists(), "a refused sweep wrote {}", out.display());
}

#[test]
fn mia_sweep_names_the_point_whose_training_diverged() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mia");
    // Plain SGD at a large learning rate on local DP's noisy inputs gives NaN logits.
    let run = mia_sweep_with(&out, "1", &["--optimizer", "sgd", "--lr", "1"]);
    assert_eq!(
        run.code, 1,
        "expected a runtime failure; stderr: {}",
        run.stderr
    );
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: local-dp at epsilon = 1: training diverged"),
        "{}",
        run.stderr
    );
}
