//! `dpml account`, `dpml calibrate` and `dpml tradeoff`, run as a user would, against the
//! reference values of the accounting issue (Google's dp_accounting, δ = 1e-5).

mod common;
use common::dpml;

fn account(sigma: &str, q: &str, steps: &str, extra: &[&str]) -> serde_json::Value {
    let mut a = vec![
        "account",
        "--noise-multiplier",
        sigma,
        "--sampling-rate",
        q,
        "--steps",
        steps,
        "--delta",
        "1e-5",
        "--json",
    ];
    a.extend_from_slice(extra);
    dpml(&a).json()
}

#[test]
fn account_reports_all_accountants_side_by_side() {
    let q = format!("{}", 256.0 / 60000.0);
    let v = account("1.1", &q, "14063", &[]);
    let eps = &v["epsilon"];
    let (rdp, pld, gdp) = (
        eps["rdp"].as_f64().unwrap(),
        eps["pld"].as_f64().unwrap(),
        eps["gdp"].as_f64().unwrap(),
    );
    assert!((rdp - 2.597).abs() < 0.002, "rdp {rdp}");
    assert!((v["rdp_order"].as_f64().unwrap() - 8.1).abs() < 1e-9);
    assert!((pld - 2.382).abs() < 0.01 * 2.382, "pld {pld}");
    assert!((gdp - 2.324).abs() < 0.002, "gdp {gdp}");
    assert!((v["mu"].as_f64().unwrap() - 0.5736).abs() < 0.0005);
    let lower = v["pld_lower"].as_f64().unwrap();
    assert!(
        lower <= pld && pld <= rdp,
        "lower {lower} pld {pld} rdp {rdp}"
    );
    assert_eq!(v["bounds"]["gdp"], "approximation");
    assert_eq!(v["bounds"]["rdp"], "upper_bound");
    let classic = account(
        "1.1",
        &q,
        "14063",
        &["--accountant", "rdp", "--conversion", "classic"],
    );
    assert!((classic["epsilon"]["rdp"].as_f64().unwrap() - 3.008).abs() < 0.002);
    assert!(classic["epsilon"]["pld"].is_null());
}

#[test]
fn epochs_form_matches_rate_and_steps() {
    let a = dpml(&[
        "account",
        "--noise-multiplier",
        "1.3",
        "--epochs",
        "15",
        "--batch-size",
        "256",
        "--train-size",
        "60000",
        "--delta",
        "1e-5",
        "--accountant",
        "rdp",
        "--json",
    ])
    .json();
    assert_eq!(a["inputs"]["steps"], 3516);
    assert!((a["epsilon"]["rdp"].as_f64().unwrap() - 0.955).abs() < 0.002);
}

#[test]
fn events_file_accounts_a_composition() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("events.json");
    std::fs::write(
        &f,
        r#"[{"type":"laplace","noise_multiplier":10.0},{"type":"laplace","noise_multiplier":10.0},
            {"type":"laplace","noise_multiplier":10.0},
            {"type":"self_composed","count":1000,"event":{"type":"poisson_sampled","sampling_rate":0.01,
              "event":{"type":"gaussian","noise_multiplier":1.0}}}]"#,
    )
    .unwrap();
    let v = dpml(&[
        "account",
        "--events",
        f.to_str().unwrap(),
        "--delta",
        "1e-5",
        "--json",
    ])
    .json();
    let pld = v["epsilon"]["pld"].as_f64().unwrap();
    let rdp = v["epsilon"]["rdp"].as_f64().unwrap();
    assert!(pld > 0.3 && pld <= rdp, "pld {pld} rdp {rdp}");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"type":"cauchy","scale":1}"#).unwrap();
    dpml(&[
        "account",
        "--events",
        bad.to_str().unwrap(),
        "--delta",
        "1e-5",
    ])
    .assert_usage_error("cauchy");
    std::fs::write(&bad, "{not json").unwrap();
    dpml(&[
        "account",
        "--events",
        bad.to_str().unwrap(),
        "--delta",
        "1e-5",
    ])
    .assert_usage_error("bad.json");
}

#[test]
fn account_rejects_bad_input() {
    let run = |sigma: &str, q: &str, t: &str, d: &str| {
        dpml(&[
            "account",
            "--noise-multiplier",
            sigma,
            "--sampling-rate",
            q,
            "--steps",
            t,
            "--delta",
            d,
        ])
    };
    run("0", "0.01", "10", "1e-5").assert_usage_error("0");
    run("-1", "0.01", "10", "1e-5").assert_usage_error("-1");
    run("1", "1.5", "10", "1e-5").assert_usage_error("1.5");
    run("1", "0", "10", "1e-5").assert_usage_error("0");
    run("1", "0.01", "0", "1e-5").assert_usage_error("0");
    run("1", "0.01", "10", "1").assert_usage_error("1");
    run("NaN", "0.01", "10", "1e-5").assert_usage_error("NaN");
    run("1", "NaN", "10", "1e-5").assert_usage_error("NaN");
    // Negative numbers in exponent form and infinities are values, refused by their flag's
    // own rule, not taken for unknown flags.
    run("1", "0.01", "10", "-1e-5").assert_usage_error("'-1e-5' for '--delta");
    run("-inf", "0.01", "10", "1e-5").assert_usage_error("'-inf' for '--noise-multiplier");
    run("1", "-2.5E-3", "10", "1e-5").assert_usage_error("'-2.5E-3' for '--sampling-rate");
}

/// At a small sampling rate (σ = 0.8, q = 0.001, T = 1000) the PLD bound was 1.95% above the
/// fine-grid truth (0.3095 against 0.30355) and its lower bound 0: both within 1% now, the
/// lower bound beside the upper one, in the JSON and the human summary.
#[test]
fn pld_bounds_are_tight_at_small_sampling_rates_and_both_shown() {
    let v = account("0.8", "0.001", "1000", &[]);
    let (upper, lower) = (
        v["epsilon"]["pld"].as_f64().unwrap(),
        v["pld_lower"].as_f64().unwrap(),
    );
    let truth = 0.303_554;
    assert!(upper >= truth && upper <= truth * 1.01, "{v}");
    assert!(lower <= truth && lower >= truth * 0.99, "{v}");
    let human = dpml(&[
        "account",
        "--noise-multiplier",
        "0.8",
        "--sampling-rate",
        "0.001",
        "--steps",
        "1000",
        "--delta",
        "1e-5",
    ]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(
        human.stdout.contains("(PLD; lower bound 0.30"),
        "{}",
        human.stdout
    );
}

/// A subnormal δ: every accountant answers with a number, or is left out with a note; none
/// prints `null` without a word.
#[test]
fn a_subnormal_delta_gives_numbers_or_notes() {
    let v = dpml(&[
        "account",
        "--noise-multiplier",
        "1",
        "--sampling-rate",
        "0.01",
        "--steps",
        "100",
        "--delta",
        "1e-320",
        "--json",
    ])
    .json();
    let notes = v["notes"].to_string();
    for (name, e) in v["epsilon"].as_object().unwrap() {
        assert!(
            e.as_f64().is_some_and(f64::is_finite) || notes.contains(name.as_str()),
            "{name}: {v}"
        );
    }
    assert!(v["epsilon"]["gdp"].as_f64().is_some_and(|e| e > 0.0), "{v}");
}

#[test]
fn calibrate_never_exceeds_the_target() {
    for acc in ["rdp", "pld"] {
        let v = dpml(&[
            "calibrate",
            "--epsilon",
            "3",
            "--delta",
            "1e-5",
            "--epochs",
            "10",
            "--batch-size",
            "256",
            "--train-size",
            "60000",
            "--accountant",
            acc,
            "--json",
        ])
        .json();
        let eps = v["epsilon"].as_f64().unwrap();
        assert!(eps <= 3.0 && eps > 2.9, "{acc}: {eps}");
        assert!(v["noise_multiplier"].as_f64().unwrap() > 0.5);
    }
    dpml(&[
        "calibrate",
        "--epsilon",
        "0",
        "--delta",
        "1e-5",
        "--sampling-rate",
        "0.01",
        "--steps",
        "10",
    ])
    .assert_usage_error("0");
}

#[test]
fn tradeoff_writes_csv_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("curves");
    let v = dpml(&[
        "tradeoff",
        "--noise-multiplier",
        "1.1",
        "--sampling-rate",
        "0.004",
        "--steps",
        "1000",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ])
    .json();
    assert!(v["mu"].as_f64().unwrap() > 0.0);
    // The tight accountant's ε, which the headline leads with, and the looser RDP one.
    let (pld, rdp) = (
        v["epsilon"]["pld"].as_f64().unwrap(),
        v["epsilon"]["rdp"].as_f64().unwrap(),
    );
    assert!(0.0 < pld && pld <= rdp, "{v}");
    let csv = std::fs::read_to_string(out.join("tradeoff.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "alpha,beta_gdp,beta_pld,beta_rdp_family,beta_rdp_eps_delta"
    );
    for line in lines {
        let cols: Vec<f64> = line.split(',').map(|x| x.parse().unwrap()).collect();
        let alpha = cols[0];
        for &beta in &cols[1..] {
            assert!((0.0..=1.0 - alpha + 1e-9).contains(&beta), "{line}");
        }
        // The tight PLD curve is at least as high as the (looser) RDP ones.
        assert!(cols[2] + 1e-6 >= cols[3], "{line}");
    }
    assert_eq!(
        &std::fs::read(out.join("tradeoff.png")).unwrap()[..4],
        b"\x89PNG"
    );
    assert!(
        std::fs::read_to_string(out.join("tradeoff.svg"))
            .unwrap()
            .contains("</svg>")
    );
}

/// A ledger at one of the names `tradeoff --out` writes is refused before anything is written.
#[test]
fn tradeoff_never_writes_over_a_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("tradeoff.csv");
    common::create_ledger(&ledger, "5");
    dpml(&[
        "tradeoff",
        "--noise-multiplier",
        "1",
        "--sampling-rate",
        "0.01",
        "--steps",
        "100",
        "--out",
        dir.path().to_str().unwrap(),
    ])
    .assert_usage_error("holds a budget ledger");
    assert_eq!(common::ledger_entries(ledger.to_str().unwrap()), 0);
}

/// Below the PLD's δ floor, `account` reports a finite PLD ε (the RDP bound) with a note, and
/// `calibrate` with PLD finds a σ at δ = 1e-15 instead of calling every σ unreachable.
#[test]
fn pld_is_finite_at_tiny_delta_and_calibrates_there() {
    let schedule = ["--sampling-rate", "0.0042666", "--steps", "1000"];
    let mut a = vec![
        "account",
        "--noise-multiplier",
        "1.1",
        "--delta",
        "1e-15",
        "--json",
    ];
    a.extend(schedule);
    let v = dpml(&a).json();
    let (pld, rdp) = (&v["epsilon"]["pld"], &v["epsilon"]["rdp"]);
    assert!(pld.as_f64().unwrap().is_finite(), "{v}");
    assert_eq!(pld, rdp);
    assert!(v["pld_lower"].as_f64().unwrap() <= pld.as_f64().unwrap());
    let notes = v["notes"].to_string();
    assert!(notes.contains("pld reports the RDP upper bound"), "{notes}");
    let mut c = vec![
        "calibrate",
        "--epsilon",
        "3",
        "--delta",
        "1e-15",
        "--accountant",
        "pld",
        "--json",
    ];
    c.extend(schedule);
    let v = dpml(&c).json();
    assert!(v["noise_multiplier"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["epsilon"].as_f64().unwrap() <= 3.0);
}

/// A trained model always has a finite ε: at δ below the PLD accountant's floor the report
/// carries the RDP bound and says so, with GDP's marked as an approximation.
#[test]
fn training_reports_a_finite_epsilon_at_tiny_delta_and_names_its_kind() {
    let base = [
        "train",
        "--dataset",
        "iris",
        "--model",
        "logreg",
        "--noise-multiplier",
        "1.5",
        "--epochs",
        "2",
        "--batch-size",
        "16",
        "--seed",
        "1",
        "--json",
    ];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        dpml(&args).json()
    };
    let v = run(&["--delta", "1e-14"]);
    let eps = v["epsilon"].as_f64().unwrap_or(f64::NAN);
    assert!(eps.is_finite() && eps > 0.0, "{v}");
    assert_eq!(v["bounds"], "upper_bound", "{v}");
    assert!(
        v["accountant_note"]
            .as_str()
            .is_some_and(|n| n.contains("RDP")),
        "{v}"
    );
    let v = run(&["--accountant", "gdp"]);
    assert_eq!(v["bounds"], "approximation", "{v}");
    assert!(v.get("accountant_note").is_none(), "{v}");
}

#[test]
fn a_tiny_rate_with_a_tiny_sigma_is_accounted_by_every_accountant() {
    // q² underflows and e^{1/σ²} overflows in the CLT's μ: GDP reads no privacy, and the
    // other accountants still answer.
    let v = account("1e-3", "1e-300", "1", &[]);
    let eps = &v["epsilon"];
    assert_eq!(eps["pld"].as_f64(), Some(0.0), "{v}");
    assert!(eps["rdp"].as_f64().unwrap() > 0.0, "{v}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t");
    let run = dpml(&[
        "tradeoff",
        "--noise-multiplier",
        "1e-3",
        "--sampling-rate",
        "1e-300",
        "--steps",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}
