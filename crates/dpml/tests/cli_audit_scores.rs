//! `dpml audit --scores FILE`: an audit of any model from its attack scores writes the same
//! audit.json, roc.png and report.html as an audit of a dpml-trained model.

mod common;
use common::dpml;

/// Scores of a mechanism whose members score higher by `shift`, deterministic (a quantile
/// grid of the normal distribution would do; evenly spaced points are enough here).
fn scores_csv(dir: &std::path::Path, n: usize, shift: f64) -> String {
    let mut text = String::from("score,member\n");
    for i in 0..n {
        let s = i as f64 / n as f64;
        text.push_str(&format!("{},1\n{s},0\n", s + shift));
    }
    let path = dir.join("scores.csv");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn scores_audit_writes_the_audit_files_and_bounds_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let csv = scores_csv(dir.path(), 1000, 0.5);
    let out = dir.path().join("out");
    let out_s = out.display().to_string();
    let v = dpml(&[
        "--json", "audit", "--scores", &csv, "--seed", "1", "--out", &out_s,
    ])
    .json();
    let m = &v["attacks"]["scores"];
    // Members are uniform on [0.5, 1.5), non-members on [0, 1): AUC = 1 − 0.5²/2 = 0.875.
    assert!((m["auc"].as_f64().unwrap() - 0.875).abs() < 0.01, "{m}");
    assert!((m["advantage"].as_f64().unwrap() - 0.5).abs() < 0.01, "{m}");
    let eps = v["epsilon_lower_bound"].as_f64().unwrap();
    assert!(
        eps > 0.0 && eps == m["epsilon_lower_bound"].as_f64().unwrap(),
        "{v}"
    );
    assert_eq!(v["best_attack"], "scores");
    assert_eq!(v["train_size"], 1000);
    // Without --epsilon the scores claim no ε: nothing to be consistent with.
    assert!(v["epsilon_theoretical"].is_null() && v["consistent"].is_null());
    assert_eq!(v["verdict"], "no claim to check");
    assert!(v.get("target_train_accuracy").is_none());
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("audit.json")).unwrap()).unwrap();
    assert_eq!(written["attacks"], v["attacks"]);
    for f in ["roc.png", "roc.svg", "report.html"] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("scores.csv"),
        "the report names the scores file"
    );
    // Reproducible with a seed: the same split, the same bound.
    let again = dpml(&["--json", "audit", "--scores", &csv, "--seed", "1"]).json();
    assert_eq!(again["epsilon_lower_bound"], v["epsilon_lower_bound"]);
}

#[test]
fn scores_that_break_their_claimed_epsilon_fail_the_model_not_dpml() {
    // Members score higher by 5 on [0, 1): every member is told apart, far above ε = 1. The
    // model is the user's, so its failed claim is no bug of dpml's.
    let dir = tempfile::tempdir().unwrap();
    let csv = scores_csv(dir.path(), 1000, 5.0);
    let run = dpml(&["audit", "--scores", &csv, "--epsilon", "1", "--seed", "1"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("does not keep"), "{}", run.stderr);
    assert!(run.stderr.contains("claimed epsilon 1 "), "{}", run.stderr);
    assert!(!run.stderr.contains("bug in dpml"), "{}", run.stderr);
    assert!(!run.stderr.contains("internal"), "{}", run.stderr);
}

#[test]
fn bad_scores_files_are_usage_errors_naming_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let cases = [
        (write("noheader.csv", "0.5,1\n0.2,0\n"), "header"),
        (
            write("member.csv", "score,member\n0.5,1\n0.2,yes\n"),
            "member must be 1 or 0, got \"yes\"",
        ),
        (
            write("score.csv", "score,member\n0.5,1\nabc,0\n"),
            "line 3: score must be a finite number, got \"abc\"",
        ),
        (
            write("inf.csv", "score,member\ninf,1\n0.2,0\n"),
            "got \"inf\"",
        ),
        (
            write("few.csv", "score,member\n0.5,1\n0.2,0\n0.1,0\n"),
            "at least 2 member scores",
        ),
        (write("empty.csv", ""), "empty"),
    ];
    for (path, needle) in &cases {
        dpml(&["audit", "--scores", path]).assert_usage_error(needle);
    }
    dpml(&["audit", "--scores", "/nonexistent/scores.csv"])
        .assert_usage_error("/nonexistent/scores.csv");
    let ok = write("ok.csv", "score,member\n0.5,1\n0.6,1\n0.2,0\n0.1,0\n");
    dpml(&["audit", "--scores", &ok, "--confidence", "1.5"]).assert_usage_error("1.5");
    // --scores audits a given model: --epsilon is the ε it claims (checked), but no other
    // privacy setting of a dpml-trained one applies.
    let r = dpml(&["audit", "--scores", &ok, "--epsilon", "1", "--json"]);
    assert_eq!(r.json()["verdict"], "consistent");
    let r = dpml(&["audit", "--scores", &ok, "--noise-multiplier", "1"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    // Without --scores the data set, attack and privacy are still required.
    let r = dpml(&["audit", "--attack", "loss", "--epsilon", "1"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--dataset"), "{}", r.stderr);
}
