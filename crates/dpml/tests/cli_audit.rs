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
    let cache = dir.path().join("cache");
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
        "--cache",
        cache.to_str().unwrap(),
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
    // A non-private model claims no ε: nothing to be consistent with.
    assert!(first["epsilon_theoretical"].is_null() && first["consistent"].is_null());
    assert_eq!(first["verdict"], "no claim to check");

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
        for metric in ["auc", "epsilon_lower_bound"] {
            let v = first["attacks"][key][metric].as_f64().unwrap();
            assert!(
                common::report_states(&html, v),
                "report lacks {key} {metric} {v}"
            );
        }
    }

    let second = dpml(&args).json();
    assert_eq!(second["models_trained"], 0, "{second}");
    assert_eq!(second["models_from_cache"], 6);
    assert_eq!(second["attacks"], first["attacks"]);
}

/// A private audit at ε = 1 by the loss and one-run attacks.
const PRIVATE_ONE_RUN: [&str; 7] = [
    "--epsilon",
    "1",
    "--attack",
    "loss,one-run",
    "--canaries",
    "100",
    "--no-cache",
];

#[test]
fn private_audit_is_consistent() {
    let r = dpml(&audit_args(&PRIVATE_ONE_RUN)).json();
    let eps = r["epsilon_theoretical"].as_f64().unwrap();
    assert!(eps <= 1.0 && eps > 0.95, "{r}");
    assert_eq!(r["consistent"], true, "{r}");
    assert!(r["epsilon_lower_bound"].as_f64().unwrap() <= eps);
}

/// Every number in `v` (recursively), with its path, except under `skip`.
fn numbers(v: &serde_json::Value, path: &str, out: &mut Vec<(String, f64)>) {
    match v {
        serde_json::Value::Number(n) => out.push((path.to_string(), n.as_f64().unwrap())),
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                numbers(item, &format!("{path}[{i}]"), out);
            }
        }
        serde_json::Value::Object(map) => {
            for (k, item) in map {
                numbers(item, &format!("{path}.{k}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn report_escapes_hostile_names_marks_unresolved_tprs_and_states_every_number() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = "<script>alert(1)</script>";
    // A small table whose file name and sensitive column carry markup.
    let csv = dir.path().join("<script>x.csv");
    let mut text = format!("a,b,{hostile},label\n");
    for i in 0..300u32 {
        let label = u32::from(i % 3 == 0);
        let a = f64::from((i * 37) % 101) / 10.0 + f64::from(label);
        let b = f64::from((i * 53) % 97) / 10.0;
        text.push_str(&format!("{a},{b},{},{label}\n", i % 4));
    }
    std::fs::write(&csv, text).unwrap();
    let source = format!("csv:{}", csv.display());
    let out = dir.path().join("report");
    let r = dpml(&[
        "audit",
        "--dataset",
        &source,
        "--model",
        "logreg",
        "--epochs",
        "3",
        "--epsilon",
        "2",
        "--attack",
        "loss,one-run,attribute",
        "--sensitive-column",
        hostile,
        "--seed",
        "3",
        "--no-cache",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let json = r.json();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!html.contains("<script"), "unescaped markup in the report");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;script&gt;x.csv"));
    assert!(!html.contains("{\""), "raw JSON in the report");

    let mut all = Vec::new();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("audit.json")).unwrap()).unwrap();
    numbers(&saved, "", &mut all);
    assert!(all.len() > 40, "{all:?}");
    for (path, v) in &all {
        assert!(
            common::report_states(&html, *v),
            "report lacks {path} = {v}"
        );
    }
    // The one-run audit's own ε is stated beside its lower bound.
    let own = json["attacks"]["one_run"]["epsilon_theoretical"]
        .as_f64()
        .unwrap();
    assert!(common::report_states(&html, own));

    // 150 non-members resolve a 1% FPR but not 0.1%: that TPR is marked, naming 1000.
    let loss = &json["attacks"]["loss"];
    assert_eq!(loss["non_members"], 150, "{loss}");
    assert_eq!(loss["fpr_resolvable"]["0.01"], true);
    assert_eq!(loss["fpr_resolvable"]["0.001"], false);
    let unresolved = json["attacks"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|a| a["fpr_resolvable"].as_object())
        .flat_map(|m| m.values())
        .filter(|v| **v == false)
        .count();
    assert!(unresolved >= 1);
    assert_eq!(
        html.matches("not resolved: needs ≥ <data value=\"1000\">1000</data> non-members")
            .count(),
        unresolved,
        "every unresolved TPR is marked, and only those"
    );
}

#[test]
fn audit_defaults_run_on_every_builtin_dataset() {
    // Only --model, a privacy choice and the attack are required; every other flag keeps its
    // default (the one-run audit's canary model is the smallest one an audit trains).
    for dataset in ["iris", "wine", "breast-cancer", "digits"] {
        let r = dpml(&[
            "audit",
            "--dataset",
            dataset,
            "--model",
            "logreg",
            "--epsilon",
            "1",
            "--attack",
            "loss,one-run",
            "--no-cache",
            "--json",
        ]);
        assert_eq!(r.code, 0, "{dataset}: {}", r.stderr);
    }
}

#[test]
fn a_batch_size_the_canary_model_cannot_take_is_refused_by_name() {
    let r = dpml(&[
        "audit",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--epsilon",
        "1",
        "--attack",
        "one-run",
        "--batch-size",
        "64",
        "--no-cache",
    ]);
    r.assert_usage_error("batch-size must be at most 38");
}

/// The model cache holds models trained on the private data: by default it is a per-user
/// folder (never the output folder a report is shared from, nor the shared temporary
/// folder), created private (0700), each model file 0600. `--arch` audits an architecture file.
#[test]
fn audit_cache_is_private_by_default_and_audit_takes_an_arch() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("report");
    let arch = home.path().join("tiny.json");
    std::fs::write(
        &arch,
        r#"{"name": "tiny-digits", "input_shape": [1, 8, 8], "layers": [
            {"type": "conv2d", "in_channels": 1, "out_channels": 2, "kernel": 3, "stride": 1, "padding": 1},
            {"type": "relu"}, {"type": "flatten"},
            {"type": "linear", "in_features": 128, "out_features": 10}]}"#,
    )
    .unwrap();
    let mut args = audit_args(&["--epsilon", "2", "--attack", "loss", "--out"]);
    args.retain(|a| *a != "--model" && *a != "logreg");
    let (out_s, arch_s) = (out.to_str().unwrap(), arch.to_str().unwrap());
    args.extend([out_s, "--arch", arch_s]);
    let run = common::from_output(
        common::command(&args)
            .env("HOME", home.path())
            .env_remove("XDG_CACHE_HOME")
            .output()
            .unwrap(),
    );
    let v = run.json();
    assert_eq!(v["recipe"]["model"], "tiny-digits", "{v}");
    let cache = home.path().join(".cache/dpml/audit-models");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&cache), 0o700);
    assert_eq!(mode(&home.path().join(".cache/dpml")), 0o700);
    let files: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().collect();
    assert!(!files.is_empty());
    for f in files {
        assert_eq!(mode(&f.path()), 0o600, "{:?}", f.path());
    }
    assert!(!out.join("model-cache").exists());
}

/// Every model of an audit trains with the σ calibrated once for the target's N records, so
/// the ledger charges each at that σ: the one-run audit's model, on fewer records, costs more
/// than the target ε at it (calibrating σ again for its size undercharged it).
#[test]
fn an_audit_charges_every_model_at_the_sigma_it_trains_with() {
    fn noise_multipliers(event: &serde_json::Value, out: &mut Vec<f64>) {
        match event {
            serde_json::Value::Object(map) => {
                if let Some(s) = map.get("noise_multiplier").and_then(|s| s.as_f64()) {
                    out.push(s);
                }
                map.values().for_each(|v| noise_multipliers(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| noise_multipliers(v, out)),
            _ => {}
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("audit.db");
    common::create_ledger(&ledger, "100");
    let l = ledger.to_str().unwrap();
    let mut args = audit_args(&[&PRIVATE_ONE_RUN[..], &["--ledger", l]].concat());
    // A seeded run is not private: it cannot be charged.
    let seed = args.iter().position(|a| *a == "--seed").unwrap();
    args.drain(seed..seed + 2);
    let run = dpml(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let show = dpml(&["ledger", "show", "--ledger", l, "--json"]).json();
    let mut sigmas = Vec::new();
    noise_multipliers(&show["entries"][0]["event"], &mut sigmas);
    assert_eq!(sigmas.len(), 2, "the target and the one-run model: {show}");
    assert_eq!(sigmas[0], sigmas[1], "{show}");
}
