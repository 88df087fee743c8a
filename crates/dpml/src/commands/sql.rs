//! `dpml sql`: a DP answer to a SQL query over Parquet and CSV tables (see `dpml_sql`). The
//! schema declares each table's privacy unit, bounds and key sets; with `--ledger` the spend is
//! recorded durably before anything is printed, and a query over budget prints nothing.
//! `--explain` (or `EXPLAIN DP SELECT …`) shows what the query would release and cost, reading
//! no private row and charging nothing. `--memory-limit` runs the query in a memory pool of
//! that size, spilling to a temporary folder; a query that still does not fit fails with the
//! limit's error (exit 2), charged like any query that fails once it reads private rows (the
//! failure can depend on them). `--cluster HOST:PORT` reads the private rows on an
//! Apache Ballista cluster (the guide's SQL chapter says how). A query that runs for more than
//! a second shows its progress on stderr: the stage, and the rows scanned and bytes spilled,
//! which are exact counts of private rows and so diagnostics (`--no-diagnostics` leaves them out).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use dpml_sql::memory::{Limits, format_bytes, parse_size};
use dpml_sql::progress::Stage;
use dpml_sql::{Engine, Request, Split, SqlError, strip_explain};
use serde_json::json;

use crate::args::{self, SeedArg};
use crate::error::{CliError, CliResult};
use crate::ledger_args::{LedgerArgs, balance_json};
use crate::output::Output;

/// Flags of `dpml sql`.
#[derive(Args, Debug)]
pub struct SqlArgs {
    /// The query: one SELECT (`EXPLAIN DP SELECT …` explains it). It may start with a `--`
    /// comment, as a query file read with `"$(cat q.sql)"` does.
    #[arg(allow_hyphen_values = true)]
    pub query: String,
    /// A table the query reads, NAME=PATH: a .parquet file, a folder of Parquet files, a .csv
    /// or .csv.gz file (repeat for each table).
    #[arg(long = "table", value_parser = table_arg, required = true)]
    pub tables: Vec<(String, PathBuf)>,
    /// Schema file (TOML or JSON) declaring each table under [tables.NAME]: privacy_unit,
    /// public, bounds, key sets, contribution bounds, foreign keys.
    #[arg(long, value_parser = args::input_path)]
    pub schema: PathBuf,
    /// ε of the whole query, split across its aggregates.
    #[arg(long, value_parser = args::positive)]
    pub epsilon: f64,
    /// δ of the whole query: lets GROUP BY release private keys by a noisy threshold.
    #[arg(long, value_parser = args::unit_from_zero, default_value = "0")]
    pub delta: f64,
    /// Relative share of ε of one aggregate, NAME=WEIGHT by its output column (default 1 each;
    /// repeat for several).
    #[arg(long = "weight", value_parser = weight_arg)]
    pub weights: Vec<(String, f64)>,
    /// Show the rewritten plan, each released aggregate's noise and the cost; read no private
    /// row, charge nothing.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// Read the private rows on the Apache Ballista cluster whose scheduler is at HOST:PORT:
    /// its executors compute exact per-unit state only; the bounding and the noise stay here.
    /// The scheduler and executors must read the tables at the same paths.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "memory_limit")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub ledger: LedgerArgs,
    #[command(flatten)]
    pub seed: SeedArg,
}

impl SqlArgs {
    /// The engine these flags ask for: on one machine (under the memory limit) or a cluster.
    fn engine(&self, schema: &dpml_data::Schema) -> Result<Engine, SqlError> {
        Engine::open(
            &schema.tables,
            &self.tables,
            self.memory.limits(),
            self.cluster.as_deref(),
        )
    }
}

/// The memory limit of SQL queries.
#[derive(Args, Debug)]
pub struct MemoryArgs {
    /// Run under this much memory, spilling sorts, aggregations and joins to a temporary
    /// folder: bytes or K, M, G, T (4G, 512M). A query that still does not fit fails, and is
    /// charged (whether it fits depends on the private rows).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = memory_limit_arg)]
    pub memory_limit: Option<usize>,
    /// Folder for spill files (default: the system's temporary folder).
    #[arg(long, value_name = "DIR", requires = "memory_limit", value_parser = folder_arg)]
    pub spill_dir: Option<PathBuf>,
}

impl MemoryArgs {
    /// The limits these flags ask for.
    pub fn limits(&self) -> Limits {
        Limits {
            memory: self.memory_limit,
            spill_dir: self.spill_dir.clone(),
        }
    }
}

/// `4G`, `512M`, bytes: at least [`dpml_sql::memory::MIN_LIMIT`].
fn memory_limit_arg(s: &str) -> Result<usize, String> {
    let bytes = parse_size(s).map_err(|e| e.to_string())?;
    Limits::memory(bytes).map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// An existing folder.
fn folder_arg(s: &str) -> Result<PathBuf, String> {
    if std::path::Path::new(s).is_dir() {
        Ok(PathBuf::from(s))
    } else {
        Err(format!("{s} is not a folder"))
    }
}

/// `NAME=PATH`.
fn table_arg(s: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = s
        .split_once('=')
        .ok_or_else(|| format!("{s} is not NAME=PATH"))?;
    dpml_sql::tables::check_name(name).map_err(|e| e.to_string())?;
    Ok((name.to_string(), PathBuf::from(path)))
}

/// `NAME=WEIGHT`.
fn weight_arg(s: &str) -> Result<(String, f64), String> {
    // The last `=`: a result column's name may hold one.
    let (name, w) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("{s} is not NAME=WEIGHT"))?;
    Ok((name.to_string(), args::positive(w)?))
}

/// DP SQL's errors keep their classification: the user's input exits 2, the rest 1.
impl From<SqlError> for CliError {
    fn from(e: SqlError) -> Self {
        match &e {
            _ if e.is_input() => CliError::usage(e),
            SqlError::Ledger { .. } | SqlError::Cluster { .. } => CliError::runtime(e),
            _ => CliError::internal(e.to_string().trim_start_matches("internal error: ")),
        }
    }
}

/// Run `dpml sql`.
pub fn run(a: &SqlArgs, out: Output) -> CliResult<()> {
    let explain_prefix = strip_explain(&a.query).0;
    let schema = dpml_data::Schema::from_file(&a.schema)?;
    if schema.tables.is_empty() {
        return Err(CliError::usage(format!(
            "{} declares no [tables.NAME]: dpml sql needs each table's privacy unit (or \
             public = true)",
            a.schema.display()
        )));
    }
    let mut weights = BTreeMap::new();
    for (name, w) in &a.weights {
        if weights.insert(name.clone(), *w).is_some() {
            return Err(CliError::usage(format!(
                "--weight {name}=… is given twice: give each aggregate one weight"
            )));
        }
    }
    let request = Request {
        epsilon: a.epsilon,
        delta: a.delta,
        split: Split { weights },
    };
    if a.explain || explain_prefix {
        let engine = a.engine(&schema)?;
        let mut v = engine.explain(&a.query, &request)?.to_json();
        v["memory_limit"] = json!(a.memory.memory_limit);
        v["cluster"] = json!(a.cluster);
        out.emit(&v);
        return Ok(());
    }
    // Open the ledger first: a bad ledger stops us before any row is read.
    let ledger = a.ledger.open(&a.seed)?;
    let mut rng = a.seed.rng()?;
    let engine = a.engine(&schema)?;
    let result = watched(&engine, "sql", out.diagnostics, || {
        engine.run(&a.query, &request, &mut rng, ledger.as_ref())
    })?;
    let mut v = result.to_json()?;
    v["seeded"] = json!(rng.is_seeded());
    if let Some(b) = &result.report.ledger {
        v["ledger"] = balance_json(b);
    }
    v["memory_limit"] = json!(a.memory.memory_limit);
    v["cluster"] = json!(a.cluster);
    out.emit(&v);
    Ok(())
}

/// Runs `f` (one query of `engine`) while its progress shows on stderr: nothing for a query
/// that ends within a second; then a spinner with the stage on a terminal, otherwise a line
/// at each change of stage and every 10 seconds. With `counts`, the rows scanned and the
/// bytes spilled too: exact counts of private rows, so diagnostics (`--no-diagnostics` leaves
/// them out).
pub fn watched<T>(engine: &Engine, what: &str, counts: bool, f: impl FnOnce() -> T) -> T {
    let counters = engine.progress();
    dpml_sql::progress::watching(|stop| watch(&counters, what, counts, stop), f)
}

fn watch(
    counters: &Arc<dpml_sql::progress::Progress>,
    what: &str,
    counts: bool,
    stop: &AtomicBool,
) {
    const QUIET: Duration = Duration::from_secs(1);
    const EVERY: Duration = Duration::from_secs(10);
    let start = Instant::now();
    let mut shown: Option<(crate::progress::Progress, Stage, Instant)> = None;
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(250));
        if stop.load(Ordering::Relaxed) || start.elapsed() < QUIET {
            continue;
        }
        let now = counters.snapshot();
        let (bar, stage, last) = shown.get_or_insert_with(|| {
            let bar = if counts {
                crate::progress::Progress::counter(what, "row")
            } else {
                crate::progress::Progress::activity(what)
            };
            (bar, Stage::Idle, Instant::now())
        });
        let (head, tail) = describe(&now, counts);
        if counts {
            bar.set_position(now.rows_scanned);
            bar.set_message(format!("{}, {tail}", now.stage));
        } else {
            bar.set_message(&head);
        }
        if !bar.is_bar() && (*stage != now.stage || last.elapsed() >= EVERY) {
            bar.line(&head, None, &tail);
            *stage = now.stage;
            *last = Instant::now();
        }
    }
    if let Some((bar, ..)) = shown {
        bar.finish_and_clear();
    }
}

/// A progress line's head and tail: the stage, and with `counts` the rows scanned and the
/// bytes spilled (exact counts of private rows: diagnostics).
fn describe(now: &dpml_sql::progress::Snapshot, counts: bool) -> (String, String) {
    if !counts {
        return (now.stage.to_string(), String::new());
    }
    (
        format!(
            "{}, {} rows scanned",
            now.stage,
            crate::summary::grouped(now.rows_scanned)
        ),
        format!("{} spilled", format_bytes(now.spilled_bytes)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_counts_private_rows_only_as_diagnostics() {
        let now = dpml_sql::progress::Snapshot {
            stage: Stage::Releasing,
            rows_scanned: 123_457,
            spilled_bytes: 98_765_432,
            spill_count: 3,
        };
        let (head, tail) = describe(&now, true);
        assert!(head.contains("123,457 rows scanned"), "{head}");
        assert!(tail.contains("spilled"), "{tail}");
        let (head, tail) = describe(&now, false);
        assert_eq!(head, Stage::Releasing.to_string());
        assert!(
            tail.is_empty() && !head.chars().any(|c| c.is_ascii_digit()),
            "{head}"
        );
    }
}
