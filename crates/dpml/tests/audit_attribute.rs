//! `dpml audit --attack attribute` as a user runs it: the JSON carries the attribute entry
//! and joins the overall bound; `all` includes the attack when a sensitive column is given;
//! the report has its section; a private run stays consistent; bad columns, the label and
//! image data sets exit 2 with a named error.

mod common;

use common::dpml;

/// A small, fast audit (a few epochs of a small MLP on an embedded table).
fn args<'a>(dataset: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "audit",
        "--dataset",
        dataset,
        "--model",
        "mlp",
        "--hidden",
        "32",
        "--epochs",
        "5",
        "--batch-size",
        "16",
        "--seed",
        "1",
        "--threads",
        "2",
        "--no-cache",
        "--json",
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
fn breast_cancer_attribute_audit_has_the_fields() {
    let r = dpml(&args(
        "breast-cancer",
        &[
            "--non-private",
            "--attack",
            "loss,attribute",
            "--sensitive-column",
            "mean_radius",
        ],
    ))
    .json();
    let a = &r["attacks"]["attribute"];
    assert_eq!(a["sensitive_column"], "mean_radius", "{a}");
    // 30 continuous features: mean_radius takes far more than 10 values → 5 quantile bins.
    assert_eq!(a["candidates"].as_array().map(Vec::len), Some(5), "{a}");
    assert_eq!(a["candidate_kind"], "quantile_bins");
    for key in [
        "member_accuracy",
        "nonmember_accuracy",
        "baseline_accuracy",
        "advantage",
        "epsilon_lower_bound",
    ] {
        let v = a[key].as_f64().unwrap_or(f64::NAN);
        assert!(v.is_finite(), "{key}: {a}");
    }
    let (m, n) = (
        a["member_accuracy"].as_f64().unwrap(),
        a["nonmember_accuracy"].as_f64().unwrap(),
    );
    assert!((a["advantage"].as_f64().unwrap() - (m - n)).abs() < 1e-12);
    // Five bins of about 20% each: always guessing the largest is right about 1 time in 5.
    let base = a["baseline_accuracy"].as_f64().unwrap();
    assert!((0.15..0.3).contains(&base), "{a}");
    // The overall bound is the best of every attack's, the attribute one included.
    let best = r["epsilon_lower_bound"].as_f64().unwrap();
    assert!(best >= a["epsilon_lower_bound"].as_f64().unwrap());
    assert!(
        best >= r["attacks"]["loss"]["epsilon_lower_bound"]
            .as_f64()
            .unwrap()
    );
    // Non-private: no ε claimed, nothing to be consistent with.
    assert!(r["consistent"].is_null(), "{r}");
    assert_eq!(r["verdict"], "no claim to check");
}

#[test]
fn all_includes_attribute_with_a_sensitive_column_and_the_report_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let out_s = out.to_str().unwrap();
    let base = [
        "--non-private",
        "--attack",
        "all",
        "--reference-models",
        "4",
        "--canaries",
        "20",
    ];
    let mut with = base.to_vec();
    with.extend(["--sensitive-column", "petal_width", "--out", out_s]);
    let r = dpml(&args("iris", &with)).json();
    let a = &r["attacks"]["attribute"];
    assert_eq!(a["sensitive_column"], "petal_width", "{r}");
    for key in ["loss", "lira", "lira_offline", "one_run"] {
        assert!(r["attacks"].get(key).is_some(), "{key} missing");
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<h2>Attribute inference</h2>") && html.contains("petal_width"));
    let acc = a["member_accuracy"].as_f64().unwrap();
    assert!(common::report_states(&html, acc), "report lacks {acc}");
    assert_eq!(r["lira_settings"]["queries"], "single", "{r}");
    assert_eq!(r["lira_settings"]["variance"], "global", "{r}");
    let without = dpml(&args("iris", &base)).json();
    assert!(without["attacks"].get("attribute").is_none(), "{without}");
    // Shifted LiRA queries need images.
    let mut shifts = base.to_vec();
    shifts.extend(["--lira-queries", "shifts"]);
    dpml(&args("iris", &shifts)).assert_usage_error("need image records");
}

#[test]
fn private_attribute_audit_is_consistent() {
    let r = dpml(&args(
        "wine",
        &[
            "--epsilon",
            "1",
            "--attack",
            "attribute",
            "--sensitive-column",
            "alcohol",
        ],
    ))
    .json();
    let eps = r["epsilon_theoretical"].as_f64().unwrap();
    let bound = r["attacks"]["attribute"]["epsilon_lower_bound"]
        .as_f64()
        .unwrap();
    assert!(bound <= eps, "{r}");
    assert_eq!(r["consistent"], true, "{r}");
}

#[test]
fn bad_sensitive_columns_exit_2_with_the_name() {
    let attr = |ds: &'static str, col: &'static str| {
        dpml(&args(
            ds,
            &[
                "--non-private",
                "--attack",
                "attribute",
                "--sensitive-column",
                col,
            ],
        ))
    };
    let r = attr("breast-cancer", "mean_radiuss");
    r.assert_usage_error("unknown sensitive column \"mean_radiuss\"");
    assert!(
        r.stderr.contains("mean_radius, mean_texture"),
        "{}",
        r.stderr
    );
    attr("iris", "target").assert_usage_error("sensitive column \"target\" is the label");
    attr("digits", "pixel_3").assert_usage_error("needs a tabular data set");
    dpml(&args("iris", &["--non-private", "--attack", "attribute"]))
        .assert_usage_error("needs a sensitive column (--sensitive-column NAME)");
    dpml(&args(
        "iris",
        &[
            "--non-private",
            "--attack",
            "attribute",
            "--sensitive-column",
            "petal_width",
            "--attribute-bins",
            "1",
        ],
    ))
    .assert_usage_error("attribute-bins must be at least 2, got 1");

    // A CSV's default label is its last column.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.csv");
    let mut text = String::from("age,income,label\n");
    for i in 0..20 {
        text.push_str(&format!("{},{},{}\n", 20 + i, 1000 * i, i % 2));
    }
    std::fs::write(&path, text).unwrap();
    let source = format!("csv:{}", path.display());
    let r = dpml(&args(
        &source,
        &[
            "--non-private",
            "--attack",
            "attribute",
            "--sensitive-column",
            "label",
        ],
    ));
    r.assert_usage_error("sensitive column \"label\" is the label");
}
