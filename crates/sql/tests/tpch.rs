//! Every DP query of `benchmarks/sql/` on TPC-H generated at scale factor 0.01: it is accepted,
//! released with the stated guarantee, and its noisy answers are close to the exact ones where
//! the noise is small against them (the released cells are the bounded answers plus noise).

use std::collections::BTreeMap;
use std::path::PathBuf;

use dpml_mechanisms::DpRng;
use dpml_sql::datafusion::prelude::{ParquetReadOptions, SessionContext};
use dpml_sql::{Engine, tpch};

mod common;

fn queries() -> BTreeMap<String, String> {
    tpch::QUERIES
        .iter()
        .map(|(n, q)| (n.to_string(), q.to_string()))
        .collect()
}

/// The embedded queries are the files of `benchmarks/sql/`, all of them.
#[test]
fn the_embedded_queries_are_the_benchmark_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../benchmarks/sql");
    let on_disk: BTreeMap<String, String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "sql"))
        .map(|e| {
            (
                e.path().file_stem().unwrap().to_string_lossy().into(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    assert_eq!(on_disk, queries());
}

#[test]
fn the_tpch_dp_queries_run_at_scale_factor_0_01() {
    let common::Tpch {
        dir: _dir,
        tables,
        schema,
    } = common::tpch();
    let engine = Engine::new(&schema.tables, &tables).unwrap();
    let request = common::request();
    let queries = queries();
    assert_eq!(queries.len(), 8, "{:?}", queries.keys());
    let mut rng = DpRng::seeded(11);
    for (name, sql) in &queries {
        let explained = engine
            .explain(sql, &request)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(explained.guarantee.epsilon <= 1.0 + 1e-12, "{name}");
        let r = engine
            .run(sql, &request, &mut rng, None)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let v = r.to_json().unwrap();
        assert!(!v["columns"].as_array().unwrap().is_empty(), "{name}");
        assert!(
            (v["epsilon"].as_f64().unwrap() - 1.0).abs() < 1e-12,
            "{name}"
        );
        assert!(v["delta"].as_f64().unwrap() <= 1e-6, "{name}");
    }
    // Q1 with public keys: all six (flag, status) groups; the large ones close to the truth.
    let ctx = SessionContext::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let exact = rt.block_on(async {
        for (name, path) in &tables {
            ctx.register_parquet(
                name.as_str(),
                path.to_str().unwrap(),
                ParquetReadOptions::default(),
            )
            .await
            .unwrap();
        }
        ctx.sql(&queries["q1"])
            .await
            .unwrap()
            .collect()
            .await
            .unwrap()
    });
    let exact_rows: usize = exact.iter().map(|b| b.num_rows()).sum();
    let r = engine
        .run(&queries["q1"], &request, &mut rng, None)
        .unwrap();
    let rows = r.rows_json().unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 6);
    assert_eq!(exact_rows, 4, "TPC-H Q1 has four non-empty groups");
    let total: f64 = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["count_order"].as_f64().unwrap())
        .sum();
    // SF 0.01: about 59,000 line items; the six noisy counts (scale 3,200 at ε/8) add up close.
    assert!((total - 59_000.0).abs() < 40_000.0, "{total}");
}
