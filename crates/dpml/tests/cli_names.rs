//! One name per concept: the flags every command shares, their hidden old spellings, and the
//! model list of `--help`, taken from the table training uses.

mod common;
use common::dpml;

/// The help text of `dpml <cmd> --help`.
fn help(cmd: &str) -> String {
    let r = dpml(&[cmd, "--help"]);
    assert_eq!(r.code, 0, "{cmd} --help failed: {}", r.stderr);
    r.stdout
}

#[test]
fn help_lists_every_model_training_accepts() {
    for cmd in ["train", "label-dp", "audit", "sweep", "tune"] {
        let text = help(cmd);
        for name in dpml_learn::dpsgd::MODEL_NAMES {
            assert!(text.contains(name), "`{cmd} --help` does not list {name}");
        }
    }
    // A model outside the table is refused with the list.
    let r = dpml(&[
        "train",
        "--dataset",
        "iris",
        "--model",
        "resnet",
        "--epsilon",
        "1",
    ]);
    r.assert_usage_error("resnet");
    assert!(r.stderr.contains("scatter-linear"), "{}", r.stderr);
}

#[test]
fn help_shows_only_the_current_spellings() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "train",
            &["--save-model", "--learning-rate", "--physical-batch-size"],
            &["--out ", "--lr ", "--physical-batch "],
        ),
        ("eval", &["--model-file"], &["--model "]),
        (
            "predict",
            &["--model-file", "--epsilon"],
            &["--output-epsilon"],
        ),
        (
            "calibrate",
            &["--epsilon", "--train-size"],
            &["--target-epsilon", "--dataset-size"],
        ),
        ("audit", &["--train-size", "--out"], &["--target-size"]),
    ];
    for (cmd, shown, hidden) in cases {
        let text = help(cmd);
        for flag in *shown {
            assert!(text.contains(flag), "`{cmd} --help` lacks {flag}");
        }
        for flag in *hidden {
            assert!(!text.contains(flag), "`{cmd} --help` shows old {flag:?}");
        }
    }
}

#[test]
fn old_spellings_still_work_and_mean_the_same() {
    let schedule = ["--epochs", "2", "--batch-size", "64", "--delta", "1e-5"];
    let calibrate = |eps: &str, size: &str| {
        let mut args = vec!["calibrate", eps, "2", size, "6000", "--json"];
        args.extend(schedule);
        dpml(&args).json()
    };
    let new = calibrate("--epsilon", "--train-size");
    let old = calibrate("--target-epsilon", "--dataset-size");
    assert_eq!(new, old);
    assert_eq!(new["target_epsilon"], 2.0);
    assert_eq!(new["inputs"]["train_size"], 6000);
    assert!(new["epsilon"].as_f64().unwrap() <= 2.0, "{new}");

    // A model written with the old `train --out` and read with the old `--model` spelling.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.safetensors");
    let file = file.to_str().unwrap();
    let train = |flag: &str, lr: &str| {
        dpml(&[
            "train",
            "--dataset",
            "iris",
            "--model",
            "logreg",
            "--epochs",
            "1",
            "--epsilon",
            "1",
            "--seed",
            "3",
            lr,
            "0.05",
            flag,
            file,
            "--json",
        ])
        .json()
    };
    let trained_new = train("--save-model", "--learning-rate");
    assert_eq!(trained_new["model_file"], file);
    assert!((trained_new["learning_rate"].as_f64().unwrap() - 0.05).abs() < 1e-6);
    let eval_new = dpml(&[
        "eval",
        "--model-file",
        file,
        "--dataset",
        "iris",
        "--split-seed",
        "3",
        "--json",
    ])
    .json();
    let trained_old = train("--out", "--lr");
    assert_eq!(trained_old["epsilon"], trained_new["epsilon"]);
    let eval_old = dpml(&[
        "eval",
        "--model",
        file,
        "--dataset",
        "iris",
        "--split-seed",
        "3",
        "--json",
    ])
    .json();
    assert_eq!(eval_old["model_file"], file);
    // Same seed, same recipe: the same model, whichever spelling saved and read it.
    assert_eq!(eval_old["diagnostics"], eval_new["diagnostics"]);
}

#[test]
fn hidden_sizes_have_one_rule_in_every_command() {
    let commands: [&[&str]; 3] = [
        &[
            "train",
            "--dataset",
            "iris",
            "--model",
            "mlp",
            "--epsilon",
            "1",
        ],
        &[
            "label-dp",
            "--dataset",
            "iris",
            "--mechanism",
            "laplace",
            "--epsilon",
            "1",
        ],
        &["bench", "dpsgd", "--model", "mlp"],
    ];
    for cmd in commands {
        for bad in ["0", "4000000000"] {
            let r = dpml(&[cmd, &["--hidden", bad]].concat());
            r.assert_usage_error("--hidden <HIDDEN>': must be ");
            assert!(r.stderr.contains(bad), "{:?}: {}", cmd, r.stderr);
        }
    }
}
