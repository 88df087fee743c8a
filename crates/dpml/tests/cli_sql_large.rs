//! `dpml sql --memory-limit` and `dpml bench sql`, run as a user would: bad limits are one
//! line and exit 2; the benchmark at scale factor 0.01 prints its fields for every query; a
//! query under a limit too small for it fails with the limit's error, and is charged (whether
//! a query fits depends on the private rows).

mod common;
use common::dpml;

fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn bad_memory_limits_are_one_line_and_exit_2() {
    let ex = examples();
    let visits = format!("visits={}", ex.join("shop_visits.csv").display());
    let schema = ex.join("shop.toml").display().to_string();
    // `query` over the shop's visits under `--memory-limit limit`, with `extra` flags.
    let sql = |query: &str, limit: &str, extra: &[&str]| {
        let mut args = vec!["sql", query, "--table", &visits, "--schema", &schema];
        args.extend_from_slice(&["--epsilon", "1", "--memory-limit", limit]);
        args.extend_from_slice(extra);
        dpml(&args)
    };
    for bad in [
        "4X",
        "0",
        "G",
        "1000",
        "lots",
        "4 GB x",
        "-1G",
        "99999999999T",
    ] {
        sql("SELECT COUNT(*) FROM visits", bad, &[]).assert_usage_error(bad);
    }
    // A query that fits runs as without a limit.
    let q = "SELECT day, COUNT(*) AS visits FROM visits GROUP BY day";
    let v = sql(q, "64M", &["--json"]).json();
    assert_eq!(v["memory_limit"], 64 << 20);
    assert_eq!(v["rows"].as_array().unwrap().len(), 7);
}

#[test]
fn bench_sql_measures_every_query_and_a_tiny_limit_is_charged() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("tpch");
    let d = data.display().to_string();
    // One run of each query at scale factor 0.01 into `d`, with `extra` flags.
    let bench = |extra: &[&str]| {
        let mut args = vec!["bench", "sql", "--scale-factor", "0.01", "--data", &d];
        args.extend_from_slice(&["--runs", "1", "--json"]);
        args.extend_from_slice(extra);
        dpml(&args).json()
    };
    let v = bench(&["--seed", "1"]);
    assert_eq!(v["command"], "bench sql");
    assert!(v["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(v["generated_seconds"].as_f64().is_some());
    let queries = v["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 8, "{v}");
    for q in queries {
        for f in [
            "dp_seconds",
            "plain_seconds",
            "time_ratio",
            "rows_per_second",
        ] {
            assert!(q[f].as_f64().unwrap() > 0.0, "{f}: {q}");
        }
        assert!(q["name"].is_string());
        assert!(q["median_relative_error"].is_object(), "{q}");
        if cfg!(target_os = "linux") {
            assert!(q["peak_rss_bytes"].as_u64().unwrap() > 1 << 20, "{q}");
        }
    }
    // Q1's four large groups: COUNT of ~15,000 line items each with noise of scale ~3,200.
    let q1 = queries.iter().find(|q| q["name"] == "q1").unwrap();
    let e = &q1["median_relative_error"];
    assert!(e["count_order"].as_f64().unwrap() < 1.0, "{q1}");
    for f in ["schema.toml", "lineitem.parquet", "orders.parquet"] {
        assert!(data.join(f).exists(), "{f}");
    }
    // The second time the tables are reused; another scale factor is refused.
    let again = bench(&["--query", "q1"]);
    assert!(again["generated_seconds"].is_null());
    assert_eq!(again["queries"].as_array().unwrap().len(), 1);
    dpml(&["bench", "sql", "--scale-factor", "0.1", "--data", &d]).assert_usage_error("0.01");
    dpml(&["bench", "sql", "--data", &d, "--query", "q99"]).assert_usage_error("q99");

    // dpml sql over those tables under 64K: the limit's error, and the query charged.
    let ledger = dir.path().join("ledger").display().to_string();
    let created = dpml(&[
        "ledger",
        "create",
        "--ledger",
        &ledger,
        "--budget-epsilon",
        "5",
        "--budget-delta",
        "1e-5",
        "--json",
    ]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    let mut args = vec![
        "sql".to_string(),
        // Q1 without its leading comment (a first word "--" would read as a flag).
        dpml_sql::tpch::QUERIES[1]
            .1
            .lines()
            .filter(|l| !l.starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n"),
        "--schema".into(),
        data.join("schema.toml").display().to_string(),
        "--epsilon".into(),
        "1".into(),
        "--delta".into(),
        "1e-6".into(),
        "--ledger".into(),
        ledger.clone(),
        "--memory-limit".into(),
        "64K".into(),
    ];
    for t in ["lineitem", "orders", "customer"] {
        args.push("--table".into());
        args.push(format!(
            "{t}={}",
            data.join(format!("{t}.parquet")).display()
        ));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let failed = dpml(&refs);
    failed.assert_usage_error("the query needs more than the memory limit 64.0 KiB");
    assert!(
        failed
            .stderr
            .contains("the query's spend was recorded in the ledger"),
        "{}",
        failed.stderr
    );
    assert_eq!(common::ledger_entries(&ledger), 1);
}
