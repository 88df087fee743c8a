//! The budget ledger from the command line: pure-ε ledgers, and `dpml predict` refusing a model
//! that does not fit the data before it charges anything.

mod common;

use common::dpml;
use serde_json::Value;
use std::path::Path;

/// `dpml query` of the mean petal length of iris, with `extra` flags.
fn query(extra: &[&str]) -> common::Run {
    common::query_iris_mean(extra)
}

#[test]
fn a_pure_epsilon_ledger_adds_up_epsilon_and_refuses_delta_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("pure.db");
    let l = ledger.to_str().unwrap();
    let pure = ["--ledger", l, "--budget", "1", "--budget-delta", "0"];
    let first = query(&[&["--epsilon", "0.25", "--json"][..], &pure].concat()).json();
    assert!((first["ledger"]["spent"].as_f64().unwrap() - 0.25).abs() < 1e-12);
    assert_eq!(first["ledger"]["spent_delta"], 0.0);
    // Plain sum: the CLI's RDP composition needs δ > 0, and the balance says so.
    let composition = first["ledger"]["composition"].as_str().unwrap();
    assert!(composition.starts_with("basic"), "{composition}");
    let before = std::fs::read(&ledger).unwrap();
    // Gaussian noise spends δ > 0: refused by name, the ledger untouched.
    let gaussian = [
        "--epsilon",
        "0.25",
        "--mechanism",
        "gaussian",
        "--delta",
        "1e-6",
    ];
    query(&[&gaussian[..], &pure].concat()).assert_usage_error("pure-epsilon");
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
    // A negative δ budget is still refused at parse time, naming the value.
    query(&[
        "--epsilon",
        "0.25",
        "--ledger",
        l,
        "--budget",
        "1",
        "--budget-delta",
        "-1",
    ])
    .assert_usage_error("-1");
    let second = query(&[&["--epsilon", "0.75", "--json"][..], &pure].concat()).json();
    assert!(second["ledger"]["remaining"].as_f64().unwrap().abs() < 1e-12);
}

/// Trains a small non-private iris model into `path`.
fn train_iris(path: &Path) {
    dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--non-private",
        "--epochs",
        "2",
        "--batch-size",
        "32",
        "--save-model",
        path.to_str().unwrap(),
        "--seed",
        "1",
        "--json",
    ])
    .json();
}

/// Copies the safetensors model at `from` to `to` with every weight set to NaN (the header and
/// its metadata kept): a model whose outputs are not probabilities.
fn nan_weights(from: &Path, to: &Path) {
    let mut bytes = std::fs::read(from).unwrap();
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let text = std::str::from_utf8(&bytes[8..8 + header]).unwrap();
    assert!(
        !text.contains("\"F64\"") && text.contains("\"F32\""),
        "{text}"
    );
    for w in bytes[8 + header..].chunks_exact_mut(4) {
        w.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(to, bytes).unwrap();
}

#[test]
fn predict_refuses_a_model_that_does_not_fit_before_charging_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("iris.safetensors");
    train_iris(&good);
    let nan = dir.path().join("nan.safetensors");
    nan_weights(&good, &nan);
    // Four features like iris, but two classes where the model has three.
    let two = dir.path().join("two.csv");
    let mut csv = String::from("a,b,c,d,label\n");
    for i in 0..20 {
        csv.push_str(&format!(
            "{},{},{},{},{}\n",
            i % 7,
            i % 5,
            i % 3,
            i % 2,
            i % 2
        ));
    }
    std::fs::write(&two, csv).unwrap();
    let two_spec = format!("csv:{}", two.display());

    let ledger = dir.path().join("l.db");
    let l = ledger.to_str().unwrap();
    let predict = |model: &Path, dataset: &str| {
        dpml(&[
            "predict",
            "--model-file",
            model.to_str().unwrap(),
            "--dataset",
            dataset,
            "--epsilon",
            "0.1",
            "--queries",
            "5",
            "--ledger",
            l,
            "--budget",
            "10",
            "--json",
        ])
    };
    let first = predict(&good, "iris").json();
    let spent = first["ledger"]["spent"].as_f64().unwrap();
    assert!(spent > 0.0);
    let before = std::fs::read(&ledger).unwrap();

    predict(&nan, "iris").assert_usage_error("NaN");
    assert_eq!(std::fs::read(&ledger).unwrap(), before, "NaN model charged");
    predict(&good, &two_spec).assert_usage_error("3 classes");
    assert_eq!(
        std::fs::read(&ledger).unwrap(),
        before,
        "3 vs 2 classes charged"
    );

    let again = predict(&good, "iris").json();
    assert_eq!(again["ledger"]["entries"], 2);
}

/// Logistic regression on iris, two epochs of batches of 32 (ε to add).
const IRIS_LOGREG: &[&str] = &[
    "train",
    "--dataset",
    "iris",
    "--model",
    "logreg",
    "--epochs",
    "2",
    "--batch-size",
    "32",
];

/// A count of iris' petal lengths at ε = 0.5.
const COUNT_QUERY: &[&str] = &[
    "query",
    "--dataset",
    "iris",
    "--column",
    "petal_length",
    "--aggregate",
    "count",
    "--epsilon",
    "0.5",
];

/// Runs `dpml ARGS --ledger L --json` and returns the run.
fn charged(ledger: &Path, args: &[&str]) -> common::Run {
    let l = ledger.to_str().unwrap();
    let all: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--ledger", l, "--json"])
        .collect();
    dpml(&all)
}

fn show(ledger: &Path) -> serde_json::Value {
    dpml(&[
        "ledger",
        "show",
        "--ledger",
        ledger.to_str().unwrap(),
        "--json",
    ])
    .json()
}

/// Issue 35: every command that releases something computed from private data charges the
/// ledger it is given, each entry naming its command, data set and neighbouring relation;
/// none charges a seeded run. A ledger adds up one relation: label DP and randomized response
/// go to ledgers of their own, and are refused on the ledger of whole-record releases.
#[test]
fn every_releasing_command_charges_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("all.db");
    let (labels, answers) = (dir.path().join("labels.db"), dir.path().join("answers.db"));
    for l in [&ledger, &labels, &answers] {
        common::create_ledger(l, "100");
    }
    let relation = |command: &str| match command {
        "label-dp" => ("label", &labels),
        "rr" => ("answer", &answers),
        _ => ("record", &ledger),
    };
    let model = dir.path().join("m.safetensors");
    let m = model.to_str().unwrap();
    let runs: Vec<(&str, Vec<&str>)> = vec![
        (
            "train",
            [IRIS_LOGREG, &["--epsilon", "1", "--save-model", m]].concat(),
        ),
        (
            "label-dp",
            vec![
                "label-dp",
                "--dataset",
                "iris",
                "--mechanism",
                "rr",
                "--epsilon",
                "1",
                "--epochs",
                "1",
            ],
        ),
        (
            "kmeans",
            vec!["kmeans", "--dataset", "iris", "--k", "3", "--epsilon", "1"],
        ),
        (
            "rr",
            vec![
                "rr",
                "--dataset",
                "iris",
                "--column",
                "target",
                "--categories",
                "0,1,2",
                "--epsilon",
                "1",
            ],
        ),
        (
            "release",
            vec![
                "release",
                "--mechanism",
                "laplace",
                "--value",
                "3",
                "--sensitivity",
                "1",
                "--epsilon",
                "0.5",
                "--count",
                "2",
            ],
        ),
        (
            "query",
            vec![
                "query",
                "--dataset",
                "iris",
                "--column",
                "petal_length",
                "--aggregate",
                "count",
                "--epsilon",
                "0.5",
            ],
        ),
        (
            "predict",
            vec![
                "predict",
                "--model-file",
                m,
                "--dataset",
                "iris",
                "--epsilon",
                "0.1",
                "--queries",
                "3",
            ],
        ),
    ];
    let mut recorded = std::collections::BTreeMap::new();
    for (command, args) in &runs {
        let (_, l) = relation(command);
        let out = charged(l, args).json();
        let n = recorded.entry(l).or_insert(0);
        *n += 1;
        assert_eq!(out["ledger"]["entries"], *n, "{command}: {out}");
    }
    // Label DP and randomized response on the whole-record ledger: refused, nothing recorded.
    let before = std::fs::read(&ledger).unwrap();
    for (command, args) in runs.iter().filter(|(c, _)| relation(c).0 != "record") {
        charged(&ledger, args).assert_usage_error("ledger of its own");
        assert_eq!(
            std::fs::read(&ledger).unwrap(),
            before,
            "{command} was charged"
        );
    }
    // A seeded run's noise is reproducible, so it is not private: every one of these commands
    // refuses `--seed` with a ledger by name, and charges nothing.
    let files = |paths: [&std::path::PathBuf; 3]| paths.map(|p| std::fs::read(p).unwrap());
    let before = files([&ledger, &labels, &answers]);
    for (command, args) in &runs {
        let seeded: Vec<&str> = args.iter().copied().chain(["--seed", "1"]).collect();
        let r = charged(relation(command).1, &seeded);
        assert_eq!(r.code, 2, "{command} --seed with --ledger: {}", r.stderr);
        r.assert_usage_error("--seed 1 with --ledger");
    }
    assert_eq!(
        files([&ledger, &labels, &answers]),
        before,
        "a seeded run was charged"
    );
    let entries: Vec<Value> = [&ledger, &labels, &answers]
        .iter()
        .flat_map(|l| show(l)["entries"].as_array().unwrap().clone())
        .collect();
    let mut commands: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["command"].as_str().unwrap(),
                e["neighbouring"].as_str().unwrap(),
            )
        })
        .collect();
    let mut expected: Vec<(&str, &str)> = runs.iter().map(|r| (r.0, relation(r.0).0)).collect();
    commands.sort();
    expected.sort();
    assert_eq!(commands, expected);
    for e in &entries {
        assert!(e["epsilon_at_ledger_delta"].as_f64().unwrap() > 0.0, "{e}");
        assert!(e["time"].as_str().unwrap().ends_with('Z'), "{e}");
        assert!(e["event"].is_object(), "{e}");
        if e["command"] != "release" {
            assert_eq!(e["dataset"], "iris", "{e}");
        }
    }
}

/// A run that would overspend is refused before it trains (no model written, nothing
/// charged); non-private work cannot be charged at all.
#[test]
fn an_overspending_run_is_refused_before_it_trains() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("small.db");
    common::create_ledger(&ledger, "0.5");
    let model = dir.path().join("m.safetensors");
    let train = |epsilon: &str| {
        charged(
            &ledger,
            &[
                IRIS_LOGREG,
                &[
                    "--epsilon",
                    epsilon,
                    "--save-model",
                    model.to_str().unwrap(),
                ],
            ]
            .concat(),
        )
    };
    let before = std::fs::read(&ledger).unwrap();
    let refused = train("1");
    refused.assert_usage_error("over budget");
    assert!(
        !refused.stderr.contains("epoch"),
        "it trained: {}",
        refused.stderr
    );
    assert!(!model.exists());
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
    charged(
        &ledger,
        &[
            "kmeans",
            "--dataset",
            "iris",
            "--k",
            "3",
            "--algorithm",
            "lloyd",
        ],
    )
    .assert_usage_error("not differentially private");
    charged(
        &ledger,
        &[
            "train",
            "--dataset",
            "iris",
            "--model",
            "logreg",
            "--non-private",
        ],
    )
    .assert_usage_error("non-private");
    assert_eq!(show(&ledger)["entries"].as_array().unwrap().len(), 0);
    // A failing run charges nothing: a column that does not exist.
    charged(
        &ledger,
        &[
            "rr",
            "--dataset",
            "iris",
            "--column",
            "nope",
            "--epsilon",
            "0.1",
        ],
    )
    .assert_usage_error("nope");
    assert_eq!(show(&ledger)["entries"].as_array().unwrap().len(), 0);
}

/// A sweep is charged the sum of its private runs, before its results are written; one that
/// would not fit is refused before its first run.
#[test]
fn a_sweep_is_charged_the_sum_of_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("sweep.db");
    common::create_ledger(&ledger, "3");
    let out = dir.path().join("out");
    let sweep = |eps: &str| {
        charged(
            &ledger,
            &[
                "sweep",
                "--experiment",
                "kmeans",
                "--dataset",
                "iris",
                "--epsilons",
                eps,
                "--repeats",
                "2",
                "--out",
                out.to_str().unwrap(),
            ],
        )
    };
    sweep("5").assert_usage_error("over budget");
    assert!(!out.join("results.csv").exists());
    let done = sweep("0.5,1").json();
    // 2 repeats of ε 0.5 and of ε 1: 3 by adding up.
    let spent = done["ledger"]["spent"].as_f64().unwrap();
    assert!(spent > 2.0 && spent <= 3.0 + 1e-9, "{spent}");
    assert_eq!(show(&ledger)["entries"][0]["command"], "sweep");
    // A sweep of DP-SGD beside label DP has no one relation to add its runs up under.
    let before = std::fs::read(&ledger).unwrap();
    charged(
        &ledger,
        &[
            "sweep",
            "--experiment",
            "dp-sgd-regression",
            "--dataset",
            "digits",
            "--epsilons",
            "1",
            "--out",
            dir.path().join("mixed").to_str().unwrap(),
        ],
    )
    .assert_usage_error("no one ledger can add up");
    assert_eq!(std::fs::read(&ledger).unwrap(), before);
}

/// Issue 40: after pure-ε spends `ledger show` reported all of δ spent.
#[test]
fn pure_epsilon_spends_leave_delta_unspent() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("pure.db");
    common::create_ledger(&ledger, "3");
    for _ in 0..4 {
        charged(&ledger, COUNT_QUERY).json();
    }
    let v = show(&ledger);
    assert_eq!(v["spent"], 2.0, "{v}");
    assert_eq!(v["spent_delta"], 0.0, "{v}");
    assert_eq!(v["remaining_delta"], 1e-5, "{v}");
}

/// The ledger composes heterogeneous events with the tightest accountant and says which, and
/// plots the spend over time (PNG or SVG).
#[test]
fn show_names_the_accountant_and_plots_the_spend() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("mix.db");
    common::create_ledger(&ledger, "20");
    charged(&ledger, &[IRIS_LOGREG, &["--epsilon", "1"]].concat()).json();
    charged(
        &ledger,
        &[
            "release",
            "--mechanism",
            "gaussian",
            "--value",
            "1",
            "--sensitivity",
            "1",
            "--epsilon",
            "0.5",
            "--delta",
            "1e-6",
        ],
    )
    .json();
    let v = show(&ledger);
    assert_eq!(v["composition"], "pld", "{v}");
    for ext in ["png", "svg"] {
        let plot = dir.path().join(format!("spend.{ext}"));
        let p = dpml(&[
            "ledger",
            "show",
            "--ledger",
            ledger.to_str().unwrap(),
            "--plot",
            plot.to_str().unwrap(),
            "--json",
        ])
        .json();
        assert_eq!(p["plot"], plot.to_str().unwrap());
        assert!(std::fs::metadata(&plot).unwrap().len() > 1000);
    }
    dpml(&[
        "ledger",
        "show",
        "--ledger",
        ledger.to_str().unwrap(),
        "--plot",
        "x.gif",
    ])
    .assert_usage_error(".png or .svg");
}

/// Issue 35: overwriting one entry's stored ε in the SQLite file (which stays valid) returned
/// budget; now the entry's seal does not match and the ledger is refused. A key file others
/// can read is refused too, and an error never names a temporary `.creating` file.
#[test]
fn a_ledger_edited_outside_dpml_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("sealed.db");
    common::create_ledger(&ledger, "1");
    charged(&ledger, COUNT_QUERY).json();
    let conn = rusqlite::Connection::open(&ledger).unwrap();
    conn.execute_batch(
        "DROP TRIGGER ledger_entries_append_only_update;
         UPDATE ledger_entries SET epsilon = 0.0;",
    )
    .unwrap();
    drop(conn);
    dpml(&["ledger", "show", "--ledger", ledger.to_str().unwrap()])
        .assert_usage_error("changed outside dpml");
    charged(&ledger, COUNT_QUERY).assert_usage_error("entry 1 does not match its seal");

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let other = dir.path().join("other.db");
        common::create_ledger(&other, "1");
        let key = dir.path().join("other.db.key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        dpml(&["ledger", "show", "--ledger", other.to_str().unwrap()])
            .assert_usage_error("chmod 600");
    }
    let missing_dir = dir.path().join("no-such-dir").join("l.db");
    let r = dpml(&[
        "ledger",
        "create",
        "--ledger",
        missing_dir.to_str().unwrap(),
        "--budget-epsilon",
        "1",
        "--ledger-key",
        dir.path().join("k").to_str().unwrap(),
    ]);
    assert_ne!(r.code, 0);
    assert!(!r.stderr.contains(".creating"), "{}", r.stderr);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".creating"))
        .collect();
    assert!(leftovers.is_empty());
}

/// No output may overwrite a ledger's key, whatever its name or a link to it: the key is known
/// by what it holds, and the command is refused before the charge.
#[test]
fn a_key_named_anything_is_never_an_output() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("kk.db");
    let key = dir.path().join("key.svg");
    let (l, k) = (ledger.to_str().unwrap(), key.to_str().unwrap());
    common::ledger_create(&ledger, "5", &["--ledger-key", k]).json();
    // A key in a folder that does not exist is the caller's mistake (exit 2), as a ledger's is.
    let elsewhere = dir.path().join("other.db");
    let missing = dir.path().join("no-such-dir").join("k");
    common::ledger_create(
        &elsewhere,
        "5",
        &["--ledger-key", missing.to_str().unwrap()],
    )
    .assert_usage_error("does not exist");
    dpml(&[
        "ledger",
        "show",
        "--ledger",
        l,
        "--ledger-key",
        k,
        "--plot",
        k,
    ])
    .assert_usage_error("budget ledger or a key");
    #[cfg(unix)]
    {
        let link = dir.path().join("log.csv");
        std::os::unix::fs::symlink(&key, &link).unwrap();
        let link = link.to_str().unwrap();
        let train = [
            "train",
            "--dataset",
            "iris",
            "--epochs",
            "1",
            "--epsilon",
            "1",
        ];
        let args = [
            &train[..],
            &["--ledger", l, "--ledger-key", k, "--log", link],
        ]
        .concat();
        dpml(&args).assert_usage_error("budget ledger or a key");
    }
    let show = dpml(&["ledger", "show", "--ledger", l, "--ledger-key", k, "--json"]).json();
    assert_eq!(show["entries"].as_array().unwrap().len(), 0, "{show}");
}

/// A key file named as the ledger itself was written at the ledger's path, and the ledger
/// then refused as existing: the two are refused as one file, nothing written.
#[test]
fn a_ledger_and_its_key_are_never_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("same.l");
    let dotted = dir.path().join(".").join("same.l");
    for key in [&ledger, &dotted] {
        common::ledger_create(&ledger, "1", &["--ledger-key", key.to_str().unwrap()])
            .assert_usage_error("the ledger and its key must be two files");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
    // Through the spending commands' --budget too.
    let l = ledger.to_str().unwrap();
    query(&[
        "--epsilon",
        "1",
        "--ledger",
        l,
        "--budget",
        "3",
        "--ledger-key",
        l,
    ])
    .assert_usage_error("the ledger and its key must be two files");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A ledger sealed with a passphrase (DPML_LEDGER_PASSPHRASE) makes no key file and opens only
/// with the same passphrase.
#[test]
fn a_passphrase_ledger_needs_its_passphrase() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("pass.db");
    let l = ledger.to_str().unwrap();
    let with = |pass: Option<&str>, args: &[&str]| {
        let mut c = common::command(args);
        match pass {
            Some(p) => c.env("DPML_LEDGER_PASSPHRASE", p),
            None => c.env_remove("DPML_LEDGER_PASSPHRASE"),
        };
        common::from_output(c.output().unwrap())
    };
    with(
        Some("s3cret words"),
        &[
            "ledger",
            "create",
            "--ledger",
            l,
            "--budget-epsilon",
            "1",
            "--json",
        ],
    )
    .json();
    assert!(!dir.path().join("pass.db.key").exists());
    with(
        Some("s3cret words"),
        &["ledger", "show", "--ledger", l, "--json"],
    )
    .json();
    with(Some("other words"), &["ledger", "show", "--ledger", l])
        .assert_usage_error("does not open this ledger");
    with(None, &["ledger", "show", "--ledger", l]).assert_usage_error("DPML_LEDGER_PASSPHRASE");
}
