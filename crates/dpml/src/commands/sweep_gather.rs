//! `dpml sweep` under mpirun: the grid's runs are divided among the ranks (run i on rank
//! i mod K, each with the generator forked for it in grid order, so every run is the one a
//! single process would make) and their metrics gathered on the root, bit for bit.

use serde_json::{Value, json};

use crate::cluster;
use crate::error::{CliError, CliResult};

use dpml_core::sweep::Metrics;

/// The metric names sweeps report (metrics cross the wire by name; a name missing here fails
/// every sweep that reports it, in one process too).
const METRICS: &[&str] = &[
    "test_accuracy",
    "accuracy",
    "nicv",
    "test_mse",
    dpml_core::sweep::DP_SGD_MSE,
    dpml_core::sweep::LABEL_DP_MSE,
];

/// This process's runs' metrics (by run index) gathered into all `n` runs' metrics in run
/// order on the root; `None` on the other ranks.
///
/// # Errors
/// An internal error for a metric name outside [`METRICS`] or a run missing from the gather.
pub fn gather(n: usize, mine: Vec<(usize, Metrics)>) -> CliResult<Option<Vec<Metrics>>> {
    let encoded = mine
        .into_iter()
        .map(|(i, m)| {
            let rows: Vec<Value> = m
                .iter()
                .map(|(name, fold, v)| json!([name, fold, v.to_bits()]))
                .collect();
            (i, Value::Array(rows))
        })
        .collect();
    let Some(all) = cluster::gather_items(n, encoded) else {
        if cluster::is_root() {
            return Err(CliError::internal(
                "a sweep run is missing from the gathered results",
            ));
        }
        return Ok(None);
    };
    all.iter()
        .map(decode)
        .collect::<CliResult<Vec<_>>>()
        .map(Some)
}

/// The inverse of the encoding in [`gather`].
fn decode(run: &Value) -> CliResult<Metrics> {
    let bad = || CliError::internal(format!("malformed gathered sweep metrics: {run}"));
    run.as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|row| {
            let name = row.get(0).and_then(Value::as_str).ok_or_else(bad)?;
            let name = METRICS.iter().find(|m| **m == name).ok_or_else(bad)?;
            let fold = row.get(1).and_then(Value::as_u64).map(|f| f as usize);
            let bits = row.get(2).and_then(Value::as_u64).ok_or_else(bad)?;
            Ok((*name, fold, f64::from_bits(bits)))
        })
        .collect()
}
