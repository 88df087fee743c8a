//! Measuring DP SQL against the same SQL without DP (`dpml bench sql`, the `tpch_targets`
//! example): both run over the same tables under the same memory limit, interleaved in one
//! run (a plain run, then a DP run, `runs` times), and the released cells are compared with
//! the exact answer.
//!
//! [`Exact`] answers SQL **without** differential privacy: it exists to measure, on benchmark
//! data such as generated TPC-H. Nothing it returns may be released.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use datafusion::prelude::SessionContext;
use dpml_mechanisms::DpRng;
use serde::Serialize;
use serde_json::Value;

pub use crate::calibrate::centred_sum_abs_quantile;
use crate::engine::{query_runtime, session};
use crate::error::{Result, SqlError, out_of_memory, plan_err};
use crate::{Engine, Limits, Request};

/// DataFusion without DP over a set of tables (see the module docs).
pub struct Exact {
    ctx: SessionContext,
    runtime: tokio::runtime::Runtime,
    limit: Option<u64>,
}

impl Exact {
    /// The `given` tables (name, path) under `limits`.
    ///
    /// # Errors
    /// [`SqlError::Input`] for a table that cannot be read.
    pub fn new(given: &[(String, PathBuf)], limits: &Limits) -> Result<Self> {
        let runtime = query_runtime()?;
        let ctx = session(limits, false)?;
        runtime.block_on(async {
            for (name, path) in given {
                // Exact diagnostics release nothing: a CSV's types may come from its rows.
                crate::tables::register(&ctx, name, path, None, false).await?;
            }
            Ok::<_, SqlError>(())
        })?;
        Ok(Self {
            ctx,
            runtime,
            limit: limits.memory.map(|m| m as u64),
        })
    }

    /// The exact answer of `sql`, as rows of JSON objects (as [`crate::DpResult::rows_json`]).
    ///
    /// # Errors
    /// [`SqlError::Input`] for SQL DataFusion cannot run; [`SqlError::OutOfMemory`].
    pub fn rows(&self, sql: &str) -> Result<Value> {
        let batches = self.runtime.block_on(async {
            let df = self.ctx.sql(sql).await.map_err(plan_err)?;
            df.collect()
                .await
                .map_err(|e| out_of_memory(&e, self.limit).unwrap_or_else(|| plan_err(e)))
        })?;
        crate::result::rows_json(&batches)
    }
}

/// What one query measured.
#[derive(Debug, Clone, Serialize)]
pub struct QueryMeasurement {
    /// The query's name (its file's stem).
    pub name: String,
    /// Median seconds of the DP runs.
    pub dp_seconds: f64,
    /// Median seconds of the plain runs.
    pub plain_seconds: f64,
    /// `dp_seconds / plain_seconds`.
    pub time_ratio: f64,
    /// Rows the DP query's scans read (one run).
    pub rows_scanned: u64,
    /// `rows_scanned / dp_seconds`.
    pub rows_per_second: f64,
    /// Peak resident memory of the process during a DP run (the largest of the runs; None
    /// where the peak cannot be reset, off Linux).
    pub peak_rss_bytes: Option<u64>,
    /// The same during a plain run.
    pub plain_peak_rss_bytes: Option<u64>,
    /// Bytes the DP query spilled to disk (the largest of the runs).
    pub spilled_bytes: u64,
    /// Per released column: the median over its released cells (of all runs) of
    /// |released − exact| / |exact| (cells whose exact value is 0 and groups the exact answer
    /// lacks are left out).
    pub median_relative_error: BTreeMap<String, f64>,
    /// Rows of the exact answer.
    pub exact_rows: usize,
    /// Rows released (median over the runs).
    pub released_rows: usize,
    /// DP and plain runs each.
    pub runs: usize,
}

/// Which run of a query is starting (for progress).
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// 1-based.
    pub run: usize,
    /// Of how many.
    pub runs: usize,
    /// The DP run (else the plain one).
    pub dp: bool,
}

/// Measures `sql` (called `name`): `runs` plain runs on `exact` interleaved with `runs` DP
/// runs on `engine` under `request`, with noise from `rng`; `on_step` hears each run start.
///
/// # Errors
/// Any failure of either run.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    engine: &Engine,
    exact: &Exact,
    name: &str,
    sql: &str,
    request: &Request,
    runs: usize,
    rng: &mut DpRng,
    on_step: &mut dyn FnMut(Step),
) -> Result<QueryMeasurement> {
    let runs = runs.max(1);
    let (mut t_plain, mut t_dp) = (Vec::new(), Vec::new());
    let (mut rss_plain, mut rss_dp) = (None, None);
    let mut truth = Value::Null;
    let mut released = Vec::new();
    let mut columns = Vec::new();
    let (mut rows_scanned, mut spilled) = (0, 0);
    for run in 1..=runs {
        let step = |dp| Step { run, runs, dp };
        on_step(step(false));
        let reset = reset_peak_rss();
        let t = Instant::now();
        truth = exact.rows(sql)?;
        t_plain.push(t.elapsed().as_secs_f64());
        rss_plain = rss_plain.max(peak_rss().filter(|_| reset));

        on_step(step(true));
        let reset = reset_peak_rss();
        let t = Instant::now();
        let r = engine.run(sql, request, rng, None)?;
        t_dp.push(t.elapsed().as_secs_f64());
        rss_dp = rss_dp.max(peak_rss().filter(|_| reset));
        let counters = engine.progress().snapshot();
        rows_scanned = counters.rows_scanned;
        spilled = spilled.max(counters.spilled_bytes);
        columns = r
            .report
            .guarantee
            .columns
            .iter()
            .map(|c| c.name.clone())
            .collect();
        released.push(r.rows_json()?);
    }
    let (dp_seconds, plain_seconds) = (median(t_dp), median(t_plain));
    let released_rows = median(
        released
            .iter()
            .map(|r| r.as_array().map_or(0, Vec::len) as f64)
            .collect(),
    ) as usize;
    Ok(QueryMeasurement {
        name: name.to_string(),
        dp_seconds,
        plain_seconds,
        time_ratio: dp_seconds / plain_seconds,
        rows_scanned,
        rows_per_second: rows_scanned as f64 / dp_seconds,
        peak_rss_bytes: rss_dp,
        plain_peak_rss_bytes: rss_plain,
        spilled_bytes: spilled,
        median_relative_error: median_relative_errors(&truth, &released, &columns),
        exact_rows: truth.as_array().map_or(0, Vec::len),
        released_rows,
        runs,
    })
}

/// Per released column, the median relative error of its cells against `exact` (see
/// [`QueryMeasurement::median_relative_error`]); columns with no comparable cell are left out.
pub fn median_relative_errors(
    exact: &Value,
    released: &[Value],
    columns: &[String],
) -> BTreeMap<String, f64> {
    let truth = keyed(exact, columns);
    let mut errors: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for rows in released {
        for (key, values) in keyed(rows, columns) {
            let Some(t) = truth.get(&key) else { continue };
            for (col, v) in values {
                if let Some(&x) = t.get(&col)
                    && x != 0.0
                {
                    errors.entry(col).or_default().push((v - x).abs() / x.abs());
                }
            }
        }
    }
    errors.into_iter().map(|(c, e)| (c, median(e))).collect()
}

/// The median (NaN of nothing).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A JSON number (or a number written as a string, as decimals are).
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The rows of a result keyed by their other columns than `aggregates`: key → (column → value).
pub fn keyed(rows: &Value, aggregates: &[String]) -> BTreeMap<String, BTreeMap<String, f64>> {
    let mut out = BTreeMap::new();
    for obj in rows
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
    {
        let key: Vec<String> = obj
            .iter()
            .filter(|(k, _)| !aggregates.contains(k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let values = obj
            .iter()
            .filter(|(k, _)| aggregates.contains(k))
            .filter_map(|(k, v)| number(v).map(|x| (k.clone(), x)))
            .collect();
        out.insert(key.join(","), values);
    }
    out
}

/// The machine a benchmark ran on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// The CPU's model name (/proc/cpuinfo; empty where unknown).
    pub cpu: String,
    /// Cores (hardware threads) this process may use.
    pub cores: usize,
}

/// This machine.
pub fn machine() -> Machine {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default();
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// Resets the process's peak resident memory (Linux: `/proc/self/clear_refs`); false where
/// it cannot.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident memory since the last reset, in bytes (Linux `VmHWM`).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn relative_errors_compare_cells_of_the_same_group() {
        let exact = json!([{"k": 1, "n": 100.0}, {"k": 2, "n": 50.0}, {"k": 3, "n": 0.0}]);
        let released = vec![
            json!([{"k": 1, "n": 110.0}, {"k": 2, "n": 45.0}, {"k": 3, "n": 4.0}]),
            json!([{"k": 1, "n": 100.0}, {"k": 9, "n": 1.0}]),
        ];
        let e = median_relative_errors(&exact, &released, &["n".to_string()]);
        // 0.1, 0.1, 0.0: group 3 (exact 0) and group 9 (not in the exact answer) left out.
        assert!((e["n"] - 0.1).abs() < 1e-12, "{e:?}");
        assert_eq!(median(vec![3.0, 1.0]), 2.0);
        assert!(median(Vec::new()).is_nan());
    }
}
