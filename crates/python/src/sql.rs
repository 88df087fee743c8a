//! DP SQL (`dpml.sql`, `dpml.sql_explain`): the same engine and JSON as `dpml sql`. The
//! released table crosses to Python through the Arrow C stream interface: an object with
//! `__arrow_c_stream__`, which `pyarrow.table()` reads without copying (arrow's own `pyarrow`
//! feature is built for another PyO3 than this package's).

use std::collections::BTreeMap;
use std::path::PathBuf;

use dpml_sql::datafusion::arrow::datatypes::SchemaRef;
use dpml_sql::datafusion::arrow::ffi_stream::FFI_ArrowArrayStream;
use dpml_sql::datafusion::arrow::record_batch::{RecordBatch, RecordBatchIterator};
use dpml_sql::memory::parse_size;
use dpml_sql::{Engine, Limits, Request, Split, SqlError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::guard;
use crate::ledger::{PyLedger, inner};

/// A released table, readable once or many times as an Arrow C stream.
#[pyclass(name = "SqlTable", frozen)]
pub struct SqlTable {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

#[pymethods]
impl SqlTable {
    /// The Arrow PyCapsule interface: a stream of the released batches (the same batches
    /// every time; nothing is recomputed or redrawn).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // A requested schema is a hint; the released types are kept as they are.
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(
            self.batches.clone().into_iter().map(Ok),
            self.schema.clone(),
        );
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        // The consumer moves the stream out (its release set to null); a stream never read is
        // released when the capsule is dropped.
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }
}

/// The limits of `memory_limit` (bytes or `4G`-style text; None: no limit).
fn limits(memory_limit: Option<&str>) -> Result<Limits, String> {
    match memory_limit {
        None => Ok(Limits::unlimited()),
        Some(text) => parse_size(text)
            .and_then(Limits::memory)
            .map_err(|e| e.to_string()),
    }
}

/// The engine over `tables` (name → path) declared by the schema file `schema`: under the
/// memory limit `memory_limit`, or reading the private rows on the Ballista cluster whose
/// scheduler is at `cluster` (as `dpml sql`, not both).
fn engine(
    schema: &str,
    tables: Vec<(String, String)>,
    memory_limit: Option<&str>,
    cluster: Option<&str>,
) -> Result<Engine, String> {
    let schema = dpml_core::data::Schema::from_file(schema.as_ref()).map_err(|e| e.to_string())?;
    let tables: Vec<(String, PathBuf)> = tables
        .into_iter()
        .map(|(n, p)| (n, PathBuf::from(p)))
        .collect();
    Engine::open(&schema.tables, &tables, limits(memory_limit)?, cluster).map_err(|e| e.to_string())
}

fn request(epsilon: f64, delta: f64, weights: Option<BTreeMap<String, f64>>) -> Request {
    Request {
        epsilon,
        delta,
        split: Split {
            weights: weights.unwrap_or_default(),
        },
    }
}

/// (table, report JSON) of a DP query.
#[pyfunction]
#[pyo3(signature = (query, tables, schema, epsilon, delta=0.0, weights=None, ledger=None, seed=None, memory_limit=None, cluster=None))]
#[allow(clippy::too_many_arguments)]
fn sql_run(
    py: Python<'_>,
    query: &str,
    tables: Vec<(String, String)>,
    schema: &str,
    epsilon: f64,
    delta: f64,
    weights: Option<BTreeMap<String, f64>>,
    ledger: Option<PyRef<'_, PyLedger>>,
    seed: Option<u64>,
    memory_limit: Option<String>,
    cluster: Option<String>,
) -> PyResult<(SqlTable, String)> {
    let mut rng = guard::rng(seed)?;
    let ledger = inner(&ledger, seed)?;
    guard::run(py, || {
        let engine = engine(schema, tables, memory_limit.as_deref(), cluster.as_deref())?;
        let result = engine
            .run(query, &request(epsilon, delta, weights), &mut rng, ledger)
            .map_err(|e: SqlError| e.to_string())?;
        let mut report = result.to_json().map_err(|e| e.to_string())?;
        report["seeded"] = serde_json::Value::Bool(rng.is_seeded());
        add_setup(&mut report, &engine, cluster.as_deref());
        Ok::<_, String>((
            SqlTable {
                schema: result.schema(),
                batches: result.batches().to_vec(),
            },
            report.to_string(),
        ))
    })
}

/// The explanation (JSON) of a DP query: reads no private row, charges nothing.
#[pyfunction]
#[pyo3(signature = (query, tables, schema, epsilon, delta=0.0, weights=None, memory_limit=None, cluster=None))]
#[allow(clippy::too_many_arguments)]
fn sql_explain(
    py: Python<'_>,
    query: &str,
    tables: Vec<(String, String)>,
    schema: &str,
    epsilon: f64,
    delta: f64,
    weights: Option<BTreeMap<String, f64>>,
    memory_limit: Option<String>,
    cluster: Option<String>,
) -> PyResult<String> {
    guard::run(py, || {
        let engine = engine(schema, tables, memory_limit.as_deref(), cluster.as_deref())?;
        let e = engine
            .explain(query, &request(epsilon, delta, weights))
            .map_err(|e| e.to_string())?;
        let mut explained = e.to_json();
        add_setup(&mut explained, &engine, cluster.as_deref());
        Ok::<_, String>(explained.to_string())
    })
}

/// The engine's setup in a report or an explanation, as `dpml sql --json` gives it.
fn add_setup(json: &mut serde_json::Value, engine: &Engine, cluster: Option<&str>) {
    json["memory_limit"] = serde_json::json!(engine.memory_limit());
    json["cluster"] = serde_json::json!(cluster);
}

/// Registers the SQL functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SqlTable>()?;
    m.add_function(wrap_pyfunction!(sql_run, m)?)?;
    m.add_function(wrap_pyfunction!(sql_explain, m)?)?;
    Ok(())
}
