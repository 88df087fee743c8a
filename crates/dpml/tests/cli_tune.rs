//! `dpml tune` and `dpml account --tuning` as a user runs them: the JSON contract, the kept
//! model's facts, the plot and the ledger; bad search spaces and unreachable targets refused
//! with one line and exit 2, before any training.

mod common;

use common::dpml;

/// A tiny search on the embedded digits (logistic regression, 2 epochs a trial), seeded.
fn tune(extra: &[&str]) -> common::Run {
    search(&[&["--seed", "3"][..], extra].concat())
}

/// The search of [`tune`] without a seed (as one charged to a ledger must be), then `extra`.
fn search(extra: &[&str]) -> common::Run {
    let mut args = vec![
        "tune",
        "--dataset",
        "digits",
        "--epochs",
        "2",
        "--trials-mean",
        "3",
        "--epsilon",
        "2",
    ];
    args.extend_from_slice(extra);
    if !extra.contains(&"--search") {
        args.extend_from_slice(&["--search", "learning-rate=0.5..4 log, batch-size=64|128"]);
    }
    dpml(&args)
}

#[test]
fn bad_search_spaces_are_refused_with_one_line() {
    for (space, needle) in [
        (
            "learning-rate=2..0.5",
            "empty range 2..0.5 for learning-rate",
        ),
        (
            "learning-rate=-0.1..2",
            "learning-rate in the search space must be > 0, got -0.1",
        ),
        ("temperature=1..2", "unknown hyperparameter \"temperature\""),
        ("batch-size=128", "one point only"),
        ("batch-size=100000", "one point only"),
        ("batch-size=64..4000", "more than the"),
    ] {
        tune(&["--search", space]).assert_usage_error(needle);
        // With --json, the error object on stdout.
        let r = tune(&["--search", space, "--json"]);
        r.assert_usage_error(needle);
        assert!(r.stdout.contains("\"exit_code\":2"), "{}", r.stdout);
    }
    let missing = std::env::temp_dir().join("dpml-no-such-space.toml");
    tune(&["--search", missing.to_str().unwrap()]).assert_usage_error("cannot read search space");
}

#[test]
fn a_target_that_cannot_be_met_is_refused_before_training() {
    // A one-dimensional search on digits; each case adds its own flags.
    let search = || {
        vec![
            "tune",
            "--dataset",
            "digits",
            "--search",
            "learning-rate=0.5..4 log",
        ]
    };
    let refused = |mean: &str, epsilon: &str, extra: &[&str]| {
        let mut args: Vec<&str> = search();
        args.extend_from_slice(&["--trials-mean", mean, "--epsilon", epsilon]);
        args.extend_from_slice(extra);
        dpml(&args)
    };
    let r = refused("100", "0.05", &[]);
    r.assert_usage_error("cannot meet epsilon = 0.05");
    // One line and nothing else: no training progress.
    assert!(!r.stderr.contains("train:"), "{}", r.stderr);
    // A search releasing every trial is refused the same way, saying so (that such a target
    // can be within a best-only search's reach is tested on the plan, in dpml-core).
    let r = refused("30", "1.5", &["--release-trials"]);
    r.assert_usage_error("releasing every trial, cannot meet epsilon = 1.5");
    assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    for (flags, needle) in [
        (&["--non-private"][..], "not --non-private"),
        (
            &["--trials", "truncated-negative-binomial"][..],
            "needs --eta",
        ),
        (&["--eta", "0.5"][..], "--eta 0.5 applies to"),
        (&["--accountant", "gdp"][..], "--accountant gdp"),
        (
            &["--trials-mean", "0.5"][..],
            "mean number of trials must be in [1, 1000]",
        ),
    ] {
        let mut args: Vec<&str> = search();
        if !flags.contains(&"--trials-mean") {
            args.extend_from_slice(&["--trials-mean", "3"]);
        }
        if !flags.contains(&"--non-private") {
            args.extend_from_slice(&["--epsilon", "2"]);
        }
        args.extend_from_slice(flags);
        dpml(&args).assert_usage_error(needle);
    }
}

#[test]
fn a_search_reports_its_total_and_keeps_the_trials_in_the_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("kept.safetensors");
    let plots = dir.path().join("plots");
    let r = tune(&[
        "--save-model",
        model.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
        "--json",
    ]);
    let v = r.json();
    let eps = v["epsilon"].as_f64().unwrap();
    assert!(eps <= 2.0 && eps > 1.99, "{eps}");
    assert_eq!(v["accountant"], "rdp");
    assert!(v["epsilon_per_trial"].as_f64().unwrap() < eps);
    let trials = v["diagnostics"]["trials"].as_array().unwrap();
    assert_eq!(v["diagnostics"]["trials_run"], trials.len());
    // Not released by default, and the note says why and how to release them.
    assert!(v.get("trials").is_none());
    assert_eq!(
        v["tuning"]["released"],
        "best trial only (Papernot & Steinke)"
    );
    let note = v["note"].as_str().unwrap();
    assert!(
        note.contains("reveal") && note.contains("--release-trials"),
        "{note}"
    );
    // Progress: a line per trial on stderr.
    assert_eq!(
        r.stderr.matches("tune: trial ").count(),
        2 * trials.len(),
        "{}",
        r.stderr
    );
    if trials.is_empty() {
        return;
    }
    assert!(v["epsilon_kept_run"].as_f64().unwrap() < eps);
    assert!(v["best"]["noisy_score"].is_number());
    assert!(plots.join("tune.png").exists() && plots.join("tune.svg").exists());
    // The kept model's facts carry the search's guarantee.
    let inspect = dpml(&["inspect", model.to_str().unwrap(), "--json"]).json();
    let text = inspect.to_string();
    assert!(text.contains("\"tuning\""), "{text}");
    assert!(text.contains("\"law\":\"poisson\""), "{text}");
    // ... and the split that held the test records out: `eval` holds out the same ones.
    assert_eq!(
        inspect["privacy"]["split"]["key"], v["split_key"],
        "{inspect}"
    );
    let m = model.to_str().unwrap();
    let eval = dpml(&["eval", "--model-file", m, "--dataset", "digits", "--json"]).json();
    assert_eq!(eval["split_key"], v["split_key"]);
    assert_eq!(
        eval["diagnostics"]["test_size"],
        v["diagnostics"]["test_size"]
    );
    // Without the diagnostics: no trials, no scores of trials in the progress.
    let quiet = tune(&["--json", "--no-diagnostics"]);
    let q = quiet.json();
    assert!(q.get("diagnostics").is_none(), "{q}");
    assert!(!quiet.stderr.contains("noisy score"), "{}", quiet.stderr);
    assert!(!quiet.stderr.contains("trials drawn"), "{}", quiet.stderr);
}

/// `--release-trials`: every trial's hyperparameters and noisy score at top level, the
/// number of trials released with them, the all-release bound in the report, the model's facts
/// and the ledger's entry (of the same search unseeded: a seeded run is refused a ledger); at
/// the same total ε each trial gets less than in the default search, and at the same noise the
/// search costs more.
#[test]
fn release_trials_puts_every_trial_at_top_level_under_the_composition_bound() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("kept.safetensors");
    let ledger = common::new_ledger(dir.path());
    let (m, l) = (model.to_str().unwrap(), ledger.to_str().unwrap());
    let every = tune(&["--release-trials", "--save-model", m, "--json"]);
    let v = every.json();
    let eps = v["epsilon"].as_f64().unwrap();
    assert!(eps <= 2.0 && eps > 1.99, "{eps}");
    assert_eq!(
        v["tuning"]["released"],
        "every trial (composition over the random number of trials)"
    );
    assert_eq!(v["event"]["type"], "repeat_and_release_all");
    let trials = v["trials"].as_array().unwrap();
    assert_eq!(trials.len(), v["diagnostics"]["trials_run"]);
    assert!(!trials.is_empty(), "this seed draws trials");
    for (t, d) in trials
        .iter()
        .zip(v["diagnostics"]["trials"].as_array().unwrap())
    {
        assert!(t["noisy_score"].is_number() && t["hyperparameters"]["learning_rate"].is_number());
        assert_eq!(t["noisy_score"], d["noisy_score"]);
        // The exact accuracy is a diagnostic only.
        assert!(t.get("validation_accuracy").is_none() && d["validation_accuracy"].is_number());
    }
    let top = trials
        .iter()
        .map(|t| t["noisy_score"].as_f64().unwrap())
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(v["best"]["noisy_score"].as_f64().unwrap(), top);
    // The number of trials is released: the progress says so even without diagnostics.
    let quiet = tune(&["--release-trials", "--no-diagnostics", "--json"]);
    assert!(
        quiet.stderr.contains("trials drawn (released"),
        "{}",
        quiet.stderr
    );
    assert_eq!(quiet.json()["trials"], v["trials"]);
    // At the same total, each trial gets less than in the default (best-only) search.
    let best = tune(&["--json"]).json();
    let per_trial = |v: &serde_json::Value| v["epsilon_per_trial"].as_f64().unwrap();
    assert!(
        per_trial(&v) < per_trial(&best),
        "{} vs {}",
        per_trial(&v),
        per_trial(&best)
    );
    // At the same noise, releasing every trial costs more.
    let at_noise = |extra: &[&str]| {
        let mut a = vec![
            "--noise-multiplier",
            "1.5",
            "--score-epsilon",
            "0.2",
            "--json",
        ];
        a.extend_from_slice(extra);
        let r = dpml(
            &[
                &[
                    "tune",
                    "--dataset",
                    "digits",
                    "--epochs",
                    "1",
                    "--trials-mean",
                    "3",
                    "--seed",
                    "3",
                    "--search",
                    "learning-rate=0.5..4 log, batch-size=64|128",
                ][..],
                &a[..],
            ]
            .concat(),
        );
        r.json()["epsilon"].as_f64().unwrap()
    };
    assert!(at_noise(&["--release-trials"]) > at_noise(&[]));
    // The model's facts carry the bound used.
    let facts = dpml(&["inspect", m, "--json"]).json()["privacy"].clone();
    assert_eq!(facts["tuning"]["released"], "every", "{facts}");
    assert!((facts["epsilon"].as_f64().unwrap() - eps).abs() < 1e-12);
    // So does the ledger's entry of the same search, unseeded: its bound, the one it reports.
    let charged = search(&["--release-trials", "--ledger", l, "--json"]).json();
    let charged_eps = charged["epsilon"].as_f64().unwrap();
    assert!(charged_eps <= 2.0 && charged_eps > 1.99, "{charged}");
    assert_eq!(charged["event"]["type"], "repeat_and_release_all");
    assert_eq!(charged["ledger"]["entries"], 1, "{charged}");
    let show = dpml(&["ledger", "show", "--ledger", l, "--json"]).json();
    let entry = &show["entries"][0];
    assert_eq!(entry["event"]["type"], "repeat_and_release_all", "{show}");
    assert!(
        (entry["epsilon"].as_f64().unwrap() - charged_eps).abs() < 1e-12,
        "{show}"
    );
}

#[test]
fn a_search_is_checked_before_it_trains_and_charged_once() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("budget.ledger");
    let l = ledger.to_str().unwrap();
    dpml(&[
        "ledger",
        "create",
        "--ledger",
        l,
        "--budget-epsilon",
        "2.5",
        "--json",
    ])
    .json();
    let v = search(&["--ledger", l, "--json"]).json();
    assert_eq!(v["ledger"]["entries"], 1);
    let spent = v["ledger"]["spent"].as_f64().unwrap();
    assert!((spent - v["epsilon"].as_f64().unwrap()).abs() < 1e-9, "{v}");
    // A second search does not fit the rest of the budget (two searches of ε 2 compose to
    // about 3, the exact figure depending on the noise each calibrates): refused before
    // anything trains, with the one error line and nothing else printed, and nothing recorded.
    let r = search(&["--ledger", l]);
    r.assert_usage_error("over budget");
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert_eq!(r.stderr.trim().lines().count(), 1, "{}", r.stderr);
    let show = dpml(&["ledger", "show", "--ledger", l, "--json"]).json();
    assert_eq!(show["entries"].as_array().unwrap().len(), 1, "{show}");
    let entry = &show["entries"][0];
    assert_eq!(entry["event"]["type"], "repeat_and_select");
    assert_eq!(
        (&entry["command"], &entry["dataset"]),
        (&"tune".into(), &"digits".into())
    );
}

/// The number of trials is secret: under --no-diagnostics no line says how many ran, neither
/// a trial's nor its training's, and a plot (one marker per trial) is refused before anything
/// trains.
#[test]
fn under_no_diagnostics_nothing_counts_the_trials() {
    let r = tune(&["--no-diagnostics", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for word in ["tune: trial", "trials drawn", "epoch"] {
        assert!(
            !r.stderr.lines().any(|l| l.contains(word)),
            "{word}: {}",
            r.stderr
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("plot");
    let r = tune(&["--no-diagnostics", "--plot", plot.to_str().unwrap()]);
    r.assert_usage_error("--plot draws every trial");
    assert!(!plot.exists());
    // With every trial released, the lines and the plot are part of the release.
    let r = tune(&[
        "--no-diagnostics",
        "--release-trials",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("tune: trial 1/"), "{}", r.stderr);
    assert!(plot.join("tune.svg").exists());
}

/// `--plot DIR` is checked before the charge: a file in its way, and a saved model it would
/// overwrite, are refused with nothing recorded.
#[test]
fn a_plot_that_cannot_be_written_is_refused_before_the_charge() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("budget.ledger");
    let l = ledger.to_str().unwrap();
    common::create_ledger(&ledger, "10");
    let file = dir.path().join("afile");
    std::fs::write(&file, b"x").unwrap();
    search(&["--ledger", l, "--plot", file.to_str().unwrap()]).assert_usage_error("not a folder");
    let model = dir.path().join("plots").join("tune.svg");
    std::fs::create_dir_all(model.parent().unwrap()).unwrap();
    search(&[
        "--ledger",
        l,
        "--save-model",
        model.to_str().unwrap(),
        "--plot",
        dir.path().join("plots").to_str().unwrap(),
    ])
    .assert_usage_error("name one file");
    let show = dpml(&["ledger", "show", "--ledger", l, "--json"]).json();
    assert_eq!(show["entries"].as_array().unwrap().len(), 0, "{show}");
}

#[test]
fn account_prints_the_guarantee_of_a_search_over_any_event() {
    let events = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/events.json");
    let base = ["account", "--events", events, "--delta", "1e-5", "--json"];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        dpml(&a)
    };
    let one = with(&[]).json()["epsilon"]["rdp"].as_f64().unwrap();
    let v = with(&["--tuning", "poisson", "--trials-mean", "10"]).json();
    let search = v["epsilon"]["rdp"].as_f64().unwrap();
    assert_eq!(v["epsilon_per_trial"].as_f64().unwrap(), one);
    assert!(search > one && search < 3.0 * one, "{search} vs {one}");
    assert_eq!(v["tuning"]["law"], "poisson");
    let log = with(&[
        "--tuning",
        "truncated-negative-binomial",
        "--eta",
        "0",
        "--trials-mean",
        "10",
    ])
    .json();
    assert!(
        log["tuning"]["description"]
            .as_str()
            .unwrap()
            .contains("logarithmic")
    );
    with(&["--trials-mean", "10"]).assert_usage_error("give --tuning LAW");
    with(&[
        "--tuning",
        "poisson",
        "--trials-mean",
        "10",
        "--accountant",
        "pld",
    ])
    .assert_usage_error("RDP bound only");
    with(&["--tuning", "poisson"]).assert_usage_error("needs --trials-mean");
    with(&["--release-trials"]).assert_usage_error("--tuning");
}

/// `account --tuning LAW --release-trials` against the closed form written out here: one
/// trial's RDP curve (from `account --accountant rdp` of the event alone is not printed, so a
/// Gaussian event whose curve is λ/(2σ²)), composed over Poisson(μ):
/// ε′(λ) = μ(e^{(λ−1)λ/(2σ²)} − 1)/(λ − 1), converted to (ε, δ) with the classic conversion
/// ε = min over λ of ε′(λ) + ln(1/δ)/(λ − 1).
#[test]
fn account_release_trials_follows_the_closed_form() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("gaussian.json");
    let sigma = 4.0;
    std::fs::write(
        &events,
        format!(r#"{{"type": "gaussian", "noise_multiplier": {sigma}}}"#),
    )
    .unwrap();
    let (mu, delta) = (5.0f64, 1e-5f64);
    let run = |extra: &[&str]| {
        let mut a = vec![
            "account",
            "--events",
            events.to_str().unwrap(),
            "--delta",
            "1e-5",
            "--tuning",
            "poisson",
            "--trials-mean",
            "5",
            "--accountant",
            "rdp",
            "--conversion",
            "classic",
            "--json",
        ];
        a.extend_from_slice(extra);
        dpml(&a).json()
    };
    let every = run(&["--release-trials"]);
    let best = run(&[]);
    // The accountant's orders (crates/accounting/src/rdp/mod.rs: default_orders).
    let orders: Vec<f64> = (11..=109)
        .map(|k| f64::from(k) / 10.0)
        .chain((11..=63).map(f64::from))
        .chain([128.0, 256.0, 512.0, 1024.0])
        .collect();
    let want = orders
        .iter()
        .map(|&l| {
            let x = (l - 1.0) * l / (2.0 * sigma * sigma);
            mu * x.exp_m1() / (l - 1.0) + (1.0 / delta).ln() / (l - 1.0)
        })
        .fold(f64::INFINITY, f64::min);
    let got = every["epsilon"]["rdp"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
    assert_eq!(
        every["tuning"]["released"],
        "every trial (composition over the random number of trials)"
    );
    assert_eq!(every["inputs"]["events"]["type"], "gaussian");
    assert!(got > best["epsilon"]["rdp"].as_f64().unwrap());
    assert_eq!(
        best["tuning"]["released"],
        "best trial only (Papernot & Steinke)"
    );
}

/// `--public-validation` scores exactly, at no ε: on the training file itself it released
/// exact accuracies of private records when the file was named another way (`./r.csv`, an
/// absolute path, a link). Files are compared by identity.
#[test]
fn public_validation_on_the_training_file_is_refused_however_it_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let text = common::binary_csv();
    std::fs::write(dir.path().join("r.csv"), text).unwrap();
    let absolute = format!("csv:{}", dir.path().join("r.csv").display());
    let mut names = vec!["csv:r.csv", "csv:./r.csv", absolute.as_str()];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("r.csv", dir.path().join("link.csv")).unwrap();
        names.push("csv:link.csv");
    }
    for public in names {
        let mut run = common::command(&[
            "tune",
            "--dataset",
            "csv:r.csv",
            "--classes",
            "0,1",
            "--bounds",
            "0,1",
            "--public-validation",
            public,
            "--epsilon",
            "1",
            "--epochs",
            "1",
            "--trials-mean",
            "2",
            "--search",
            "learning-rate=0.5..4 log",
            "--seed",
            "1",
        ]);
        common::from_output(run.current_dir(dir.path()).output().unwrap())
            .assert_usage_error("names the training data itself");
    }
}
