//! `dpml sql`, run as a user would: the JSON fields of a release, `--explain`, the ledger, and
//! bad input (a missing table, an unknown column, a column without bounds, a malformed Parquet
//! file, a table whose privacy unit the schema does not name) as one line and exit 2.

mod common;
use common::dpml;

fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// `dpml sql QUERY` over the shop example, with `extra` flags.
fn sql(query: &str, extra: &[&str]) -> common::Run {
    let ex = examples();
    let visits = format!("visits={}", ex.join("shop_visits.csv").display());
    let regions = format!("regions={}", ex.join("regions.csv").display());
    let schema = ex.join("shop.toml").display().to_string();
    let mut args = vec![
        "sql", query, "--table", &visits, "--table", &regions, "--schema", &schema,
    ];
    args.extend(extra);
    dpml(&args)
}

#[test]
fn a_release_reports_its_noise_and_guarantee() {
    let v = sql(
        "SELECT day, COUNT(*) AS visits, SUM(spend) AS spend FROM visits GROUP BY day ORDER BY day",
        &["--epsilon", "1", "--seed", "3", "--json"],
    )
    .json();
    assert_eq!(v["rows"].as_array().unwrap().len(), 7);
    assert_eq!(v["rows"][0]["day"], 1);
    for f in [
        "epsilon",
        "delta",
        "accountant",
        "neighbouring",
        "public",
        "seeded",
    ] {
        assert!(!v[f].is_null(), "{f} missing: {v}");
    }
    assert_eq!(
        v["neighbouring"],
        "add or remove all rows of one privacy unit"
    );
    let cols = v["columns"].as_array().unwrap();
    assert_eq!(cols.len(), 2);
    for c in cols {
        for f in ["mechanism", "noise_scale", "sensitivity", "half_width_95"] {
            assert!(c[f].as_f64().is_some() || c[f].is_string(), "{f}: {c}");
        }
    }
    // COUNT: L0 = 3 groups per shopper, L∞ = 2 visits each.
    assert_eq!(cols[0]["sensitivity"], 6.0);
    // Nothing computed without noise is printed.
    assert!(v.get("diagnostics").is_none());
    // The human summary shows the rows.
    let text = sql(
        "SELECT day, COUNT(*) AS visits FROM visits GROUP BY day",
        &["--epsilon", "1", "--seed", "3"],
    );
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("released 7 row(s)"), "{}", text.stdout);
    // A query file's leading SQL comment is part of the query, not a flag.
    let commented = sql(
        "-- visits per day\nSELECT day, COUNT(*) AS visits FROM visits GROUP BY day",
        &["--epsilon", "1", "--seed", "3"],
    );
    assert_eq!(commented.code, 0, "{}", commented.stderr);
}

#[test]
fn explain_shows_the_threshold_and_charges_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("l");
    let l = ledger.display().to_string();
    dpml(&[
        "ledger",
        "create",
        "--ledger",
        &l,
        "--budget-epsilon",
        "1",
        "--json",
    ])
    .json();
    let v = sql(
        "EXPLAIN DP SELECT region, COUNT(*) FROM visits GROUP BY region",
        &[
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--ledger",
            &l,
            "--json",
        ],
    )
    .json();
    assert_eq!(v["explain"], true);
    let t = &v["aggregates"][0]["threshold"];
    assert!(t["tau"].as_i64().unwrap() > 1, "{v}");
    let shown = dpml(&["ledger", "show", "--ledger", &l, "--json"]).json();
    assert_eq!(
        shown["entries"].as_array().map_or(0, Vec::len),
        0,
        "{shown}"
    );
}

#[test]
fn an_overspend_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let l = dir.path().join("l").display().to_string();
    dpml(&[
        "ledger",
        "create",
        "--ledger",
        &l,
        "--budget-epsilon",
        "1",
        "--json",
    ])
    .json();
    let q = "SELECT COUNT(*) FROM visits";
    sql(q, &["--epsilon", "0.7", "--ledger", &l, "--json"]).json();
    let second = sql(q, &["--epsilon", "0.7", "--ledger", &l]);
    second.assert_usage_error("budget");
    assert!(second.stdout.is_empty());
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let ex = examples();
    let schema = ex.join("shop.toml").display().to_string();
    let q = "SELECT COUNT(*) FROM visits";
    // The COUNT over `visits` read from `path`.
    let count_of = |path: &std::path::Path| {
        let t = format!("visits={}", path.display());
        dpml(&[
            "sql",
            q,
            "--table",
            &t,
            "--schema",
            &schema,
            "--epsilon",
            "1",
        ])
    };
    // A missing table file.
    count_of(&dir.path().join("nope.csv")).assert_usage_error("nope.csv");
    // An unknown column.
    sql("SELECT SUM(spent) FROM visits", &["--epsilon", "1"]).assert_usage_error("spent");
    // A column without declared bounds.
    sql("SELECT SUM(user_id) FROM visits", &["--epsilon", "1"])
        .assert_usage_error("no declared bounds");
    // One aggregate weighted twice.
    sql(
        "SELECT COUNT(*) AS n, SUM(spend) AS s FROM visits",
        &["--epsilon", "1", "--weight", "n=1", "--weight", "n=3"],
    )
    .assert_usage_error("--weight n=… is given twice");
    // A seeded run with a ledger: reproducible noise is not private.
    let ledger = dir.path().join("l.ledger").display().to_string();
    sql(
        q,
        &[
            "--epsilon",
            "1",
            "--seed",
            "1",
            "--ledger",
            &ledger,
            "--budget",
            "2",
        ],
    )
    .assert_usage_error("--seed 1 with --ledger");
    assert!(!dir.path().join("l.ledger").exists(), "nothing was created");
    // A CSV column without a declared type is text, whatever its rows hold.
    sql("SELECT SUM(region) FROM visits", &["--epsilon", "1"])
        .assert_usage_error("declare a CSV column's type");
    // A malformed Parquet file.
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, b"PAR1 this is not parquet").unwrap();
    count_of(&bad).assert_usage_error("bad.parquet");
    // A footer whose length is past the file's start (the metadata decoder panicked), alone
    // and in a folder, and a file of two columns of one name (a CSV header's too).
    let short = dir.path().join("short.parquet");
    std::fs::write(&short, b"PAR1garbagePAR1").unwrap();
    count_of(&short).assert_usage_error("short.parquet cannot be used: its footer is damaged");
    let folder = dir.path().join("parts");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(&short, folder.join("short.parquet")).unwrap();
    count_of(&folder).assert_usage_error("parts/short.parquet cannot be used");
    let twice = dir.path().join("twice.csv");
    std::fs::write(&twice, "user_id,spend,spend\n1,2,3\n").unwrap();
    count_of(&twice).assert_usage_error("twice.csv has two columns named \"spend\"");
    // A table with repeated units that the schema does not declare.
    let other = dir.path().join("other.toml");
    std::fs::write(&other, "[tables.regions]\npublic = true\n").unwrap();
    let visits = format!("visits={}", ex.join("shop_visits.csv").display());
    dpml(&[
        "sql",
        q,
        "--table",
        &visits,
        "--schema",
        &other.display().to_string(),
        "--epsilon",
        "1",
    ])
    .assert_usage_error("privacy unit");
    // A CSV file with a header only (no value to tell a column's type from), an empty one,
    // and a FIFO (which would be read until a writer closes it: perhaps never).
    let header = dir.path().join("header.csv");
    std::fs::write(&header, "user_id,day,spend,region\n").unwrap();
    let fifo = dir.path().join("fifo.csv");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    // A private table's types are declared, so a file with a header alone is an empty table
    // (a refusal would tell that it is empty); a public one's are told from its first rows.
    let answered = count_of(&header);
    assert_eq!(answered.code, 0, "{}", answered.stderr);
    let visits = format!("visits={}", ex.join("shop_visits.csv").display());
    let regions = format!("regions={}", header.display());
    dpml(&[
        "sql",
        q,
        "--table",
        &visits,
        "--table",
        &regions,
        "--schema",
        &schema,
        "--epsilon",
        "1",
    ])
    .assert_usage_error("no value");
    for (path, words) in [
        (empty, "the header naming the columns, is empty"),
        (fifo, "not a regular file"),
    ] {
        if !path.exists() {
            assert!(made.as_ref().map_or(true, |s| !s.success()));
            continue;
        }
        count_of(&path).assert_usage_error(words);
    }
    // A group listed twice (once a panic that left the progress watcher waiting for ever).
    sql(
        "SELECT day, COUNT(*) FROM visits GROUP BY day, day",
        &["--epsilon", "1"],
    )
    .assert_usage_error("twice");
    // A chain of operators too deep to plan (once a stack overflow that aborted), and a
    // column named by 70,000 characters (once a panic in the table's padding).
    let deep = format!(
        "SELECT COUNT(*) FROM visits WHERE spend < 1{}",
        "+1".repeat(2_000)
    );
    sql(&deep, &["--epsilon", "1"]).assert_usage_error("operators and keywords");
    let wide = format!("SELECT COUNT(*) AS {} FROM visits", "w".repeat(70_000));
    let r = sql(&wide, &["--epsilon", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A refused construct, with --json: the error object.
    let r = sql(
        "SELECT SUM(spend) OVER () FROM visits",
        &["--epsilon", "1", "--json"],
    );
    r.assert_usage_error("window function");
}

#[test]
fn a_cluster_out_of_reach_fails_by_name_and_charges_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = common::new_ledger(dir.path());
    let l = ledger.display().to_string();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let q = "SELECT COUNT(*) FROM visits";
    let r = sql(
        q,
        &["--epsilon", "1", "--cluster", &address, "--ledger", &l],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    let line = r.stderr.trim();
    assert!(
        !line.contains('\n')
            && line.contains(&format!("the cluster at {address} failed the query"))
            && line.contains("nothing was released or charged"),
        "{line}"
    );
    assert_eq!(common::ledger_entries(&l), 0);
    // A scheduler in reach (here a port that only accepts) and a CSV table, which the
    // executors cannot read as dpml does: refused before the charge.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let reachable = listener.local_addr().unwrap().to_string();
    let r = sql(
        q,
        &["--epsilon", "1", "--cluster", &reachable, "--ledger", &l],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("table visits is not Parquet"),
        "{}",
        r.stderr
    );
    assert_eq!(common::ledger_entries(&l), 0);
    // Not HOST:PORT, and a memory limit beside a cluster: usage errors.
    sql(q, &["--epsilon", "1", "--cluster", "localhost"]).assert_usage_error("HOST:PORT");
    sql(
        q,
        &[
            "--epsilon",
            "1",
            "--cluster",
            &address,
            "--memory-limit",
            "1G",
        ],
    )
    .assert_usage_error("--memory-limit");
}
