//! Why the TPC-H histogram and Q1 cannot run within 2× of the same SQL without DP: the
//! per-unit state that any bounding of a customer's contributions needs, timed on DataFusion
//! alone, without DP.
//!
//! For each query it times the plain query and its *floor*: plain SQL that computes one exact
//! row per (customer, group) — for Q1 after joining each line item to its order, the only way
//! to its customer — clamps it, and adds the rows up per group. The floor does less than a DP
//! query must (no choice of L0 groups, no noise, no fixed point) and everything the plain
//! query does, so floor / plain is what per-customer state costs when DataFusion's own
//! aggregation keeps it (dpml's bounder keeps it itself, and beats it on the histogram).
//!
//! ```text
//! dpml bench sql --scale-factor 1 --data target/tpch-sf1 --runs 1   # the tables, once
//! cargo run --release -p dpml-sql --example per_unit_floor -- --data target/tpch-sf1 [--timed 5]
//! ```

use std::path::PathBuf;
use std::time::Instant;

use dpml_sql::bench::{Exact, machine, median};
use dpml_sql::{Limits, tpch};

/// Q1's aggregates (its AVGs are a SUM over a COUNT: the same state).
const Q1_SUMS: &str = "SUM(l_quantity) AS q, SUM(l_extendedprice) AS p, \
     SUM(l_extendedprice * (1 - l_discount)) AS d, \
     SUM(CAST(l_extendedprice AS DOUBLE) * (1 - l_discount) * (1 + l_tax)) AS c, \
     SUM(l_discount) AS di, COUNT(*) AS n";
const Q1_WHERE: &str = "l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY";

/// (name, plain SQL, floor SQL).
fn queries() -> Vec<(&'static str, String, String)> {
    vec![
        (
            "orderpriority_histogram",
            "SELECT o_orderpriority, COUNT(*) FROM orders GROUP BY o_orderpriority".into(),
            "SELECT o_orderpriority, SUM(LEAST(n, 10)) FROM (SELECT o_custkey, o_orderpriority, \
             COUNT(*) AS n FROM orders GROUP BY o_custkey, o_orderpriority) \
             GROUP BY o_orderpriority"
                .into(),
        ),
        (
            "q1",
            format!(
                "SELECT l_returnflag, l_linestatus, {Q1_SUMS} FROM lineitem WHERE {Q1_WHERE} \
                 GROUP BY l_returnflag, l_linestatus"
            ),
            format!(
                "SELECT l_returnflag, l_linestatus, SUM(LEAST(q, 500)), SUM(LEAST(p, 5e5)), \
                 SUM(LEAST(d, 5e5)), SUM(LEAST(c, 5e5)), SUM(LEAST(di, 1)), SUM(LEAST(n, 10)) \
                 FROM (SELECT o_custkey, l_returnflag, l_linestatus, {Q1_SUMS} \
                 FROM lineitem JOIN orders ON l_orderkey = o_orderkey WHERE {Q1_WHERE} \
                 GROUP BY o_custkey, l_returnflag, l_linestatus) \
                 GROUP BY l_returnflag, l_linestatus"
            ),
        ),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut data = PathBuf::from("target/tpch-sf1");
    let mut timed = 5;
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--data" => data = PathBuf::from(value),
            "--timed" => timed = value.parse().expect("--timed N"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        data.join("lineitem.parquet").exists(),
        "no TPC-H tables in {}: run `dpml bench sql --scale-factor 1 --data {0} --runs 1` first",
        data.display()
    );
    let exact = Exact::new(&tpch::tables(&data), &Limits::unlimited()).expect("tables");
    let m = machine();
    println!(
        "machine: {}, {} threads; {}",
        m.cpu,
        m.cores,
        data.display()
    );
    println!(
        "{:<24} {:>9} {:>9} {:>12}",
        "query", "plain s", "floor s", "floor/plain"
    );
    for (name, plain, floor) in queries() {
        let mut times = (Vec::new(), Vec::new());
        // One warm-up each, then interleaved.
        for i in 0..=timed {
            for (sql, into) in [(&plain, &mut times.0), (&floor, &mut times.1)] {
                let start = Instant::now();
                exact.rows(sql).expect("plain SQL");
                if i > 0 {
                    into.push(start.elapsed().as_secs_f64());
                }
            }
        }
        let (p, f) = (median(times.0), median(times.1));
        println!("{name:<24} {p:>9.4} {f:>9.4} {:>12.1}", f / p);
    }
}
