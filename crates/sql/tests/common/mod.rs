//! What the TPC-H integration tests share: the tables at scale factor 0.01, the queries of
//! `benchmarks/sql/` by name, and their budget.

use std::path::PathBuf;

use dpml_sql::{Request, tpch};

/// TPC-H at scale factor 0.01 in a temporary folder (kept while the value lives), its tables
/// (name, path) and its DP schema.
pub struct Tpch {
    pub dir: tempfile::TempDir,
    pub tables: Vec<(String, PathBuf)>,
    pub schema: dpml_data::Schema,
}

pub fn tpch() -> Tpch {
    let dir = tempfile::tempdir().unwrap();
    let tables = tpch::generate(dir.path(), 0.01).unwrap();
    let schema = dpml_data::Schema::from_file(&dir.path().join("schema.toml")).unwrap();
    Tpch {
        dir,
        tables,
        schema,
    }
}

/// ε = 1, δ = 10⁻⁶: the budget the benchmark queries are written for.
#[allow(dead_code)] // not every test file runs queries with the default budget
pub fn request() -> Request {
    Request {
        epsilon: 1.0,
        delta: 1e-6,
        ..Request::default()
    }
}

/// The SQL of the benchmark query `name`.
#[allow(dead_code)]
pub fn query(name: &str) -> &'static str {
    tpch::QUERIES.iter().find(|(n, _)| *n == name).unwrap().1
}
