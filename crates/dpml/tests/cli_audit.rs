//! `dpml audit` as a user runs it: bad input exits 2 with a named error; a small audit on the
//! embedded digits writes audit.json, roc.png, roc.svg and report.html that are well-formed and
//! agree with the JSON; a second seeded run trains no model; a private run stays consistent.

mod common;

use common::dpml;

/// A small, fast audit on digits (a logistic regression trains in well under a second).
fn audit_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "audit",
        "--dataset",
        "digits",
        "--model",
        "logreg",
        "--epochs",
        "5",
        "--batch-size",
        "32",
        "--train-size",
        "200",
        "--seed",
        "5",
        "--threads",
        "2",
        "--json",
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
fn bad_input_exits_2_with_a_named_error() {
    let r = dpml(&audit_args(&[
        "--non-private",
        "--attack",
        "lira",
        "--reference-models",
        "0",
        "--no-cache",
    ]));
    r.assert_usage_error("reference-models must be at least 1, got 0");
    let r = dpml(&audit_args(&[
        "--non-private",
        "--attack",
        "one-run",
        "--canaries",
        "5000",
        "--no-cache",
    ]));
    r.assert_usage_error("canaries must be at most the target size (200), got 5000");
    let r = dpml(&audit_args(&["--non-private", "--attack", "shadow"]));
    r.assert_usage_error("unknown attack \"shadow\"");
    let r = dpml(&[
        "audit",
        "--dataset",
        "digits",
        "--model",
        "logreg",
        "--non-private",
        "--attack",
        "loss",
        "--train-size",
        "5000",
    ]);
    r.assert_usage_error("(1797 records: N members and N non-members), got 5000");
    let r = dpml(&audit_args(&["--attack", "loss"]));
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn report_files_are_well_formed_and_the_cache_skips_retraining() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let out_s = out.to_str().unwrap();
    let args = audit_args(&[
        "--non-private",
        "--attack",
        "loss,lira,one-run",
        "--reference-models",
        "4",
        "--canaries",
        "50",
        "--out",
        out_s,
    ]);
    let first = dpml(&args).json();
    assert_eq!(first["models_trained"], 6, "{first}");
    assert_eq!(first["models_from_cache"], 0);
    for key in ["loss", "confidence", "entropy", "lira", "one_run"] {
        let b = first["attacks"][key]["epsilon_lower_bound"]
            .as_f64()
            .unwrap();
        assert!(b >= 0.0 && b.is_finite(), "{key}: {b}");
    }
    let loss = &first["attacks"]["loss"];
    for key in ["auc", "advantage"] {
        assert!(loss[key].as_f64().is_some(), "{key} missing: {loss}");
    }
    assert!(
        loss["tpr_at_fpr"]["0.01"].as_f64().is_some()
            && loss["tpr_at_fpr"]["0.001"].as_f64().is_some()
    );
    assert!(first["epsilon_theoretical"].is_null() && first["consistent"] == true);

    // audit.json is the same object as stdout.
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("audit.json")).unwrap()).unwrap();
    assert_eq!(saved["attacks"], first["attacks"]);
    let png = std::fs::read(out.join("roc.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let svg = std::fs::read_to_string(out.join("roc.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("roc.svg is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    assert!(html.contains("<svg") && !html.contains("<script"));
    for key in ["loss", "lira"] {
        let auc = first["attacks"][key]["auc"].as_f64().unwrap();
        let eps = first["attacks"][key]["epsilon_lower_bound"]
            .as_f64()
            .unwrap();
        assert!(
            html.contains(&format!("{auc:.4}")),
            "report lacks {key} AUC {auc:.4}"
        );
        assert!(
            html.contains(&format!("{eps:.4}")),
            "report lacks {key} bound {eps:.4}"
        );
    }

    let second = dpml(&args).json();
    assert_eq!(second["models_trained"], 0, "{second}");
    assert_eq!(second["models_from_cache"], 6);
    assert_eq!(second["attacks"], first["attacks"]);
}

#[test]
fn private_audit_is_consistent() {
    let r = dpml(&audit_args(&[
        "--epsilon",
        "1",
        "--attack",
        "loss,one-run",
        "--canaries",
        "100",
        "--no-cache",
    ]))
    .json();
    let eps = r["epsilon_theoretical"].as_f64().unwrap();
    assert!(eps <= 1.0 && eps > 0.95, "{r}");
    assert_eq!(r["consistent"], true, "{r}");
    assert!(r["epsilon_lower_bound"].as_f64().unwrap() <= eps);
}
