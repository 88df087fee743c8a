//! `dpml bench sql`: DP SQL against the same SQL on DataFusion without DP, on TPC-H generated
//! once into a folder (`tpchgen`, no download). Per query of `benchmarks/sql/` (embedded in
//! the binary): the median time of DP and plain runs interleaved in one run and their ratio,
//! rows scanned per second, the peak resident memory, and the median relative error of each
//! released column against the exact answer (TPC-H is generated benchmark data, so the exact
//! answer is printed as a measure of accuracy, not kept back as a diagnostic of private data).

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use dpml_sql::bench::{Exact, Step, machine, measure};
use dpml_sql::memory::format_bytes;
use dpml_sql::{Engine, Request, tpch};
use serde_json::json;

use crate::args;
use crate::commands::sql::MemoryArgs;
use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::progress::Progress;

/// The file in the data folder that records the scale factor its tables were generated at.
const SCALE_FILE: &str = "tpch-scale-factor";

/// Flags of `dpml bench sql`.
#[derive(Args, Debug)]
pub struct SqlBenchArgs {
    /// TPC-H scale factor (1: 6 million line items, about 0.3 GB of Parquet).
    #[arg(long, value_parser = scale_factor, default_value = "1")]
    pub scale_factor: f64,
    /// Folder of the TPC-H tables: generated there on first use (one NAME.parquet per table
    /// and the DP schema as schema.toml), reused after.
    #[arg(long, value_name = "DIR")]
    pub data: PathBuf,
    /// Runs of each query, DP and plain interleaved (medians are reported), at most 10000.
    #[arg(long, value_parser = args::at_least_one_at_most(args::MAX_REPEATS), default_value = "3")]
    pub runs: u64,
    /// Only this query (by name, e.g. q1; repeat for several).
    #[arg(long = "query", value_parser = query_name)]
    pub queries: Vec<String>,
    /// ε of each DP query.
    #[arg(long, value_parser = args::positive, default_value = "1")]
    pub epsilon: f64,
    /// δ of each DP query (queries that group by private keys need δ > 0).
    #[arg(long, value_parser = args::open_unit, default_value = "1e-6")]
    pub delta: f64,
    #[command(flatten)]
    pub memory: MemoryArgs,
    #[command(flatten)]
    pub seed: args::SeedArg,
}

/// A scale factor in (0, 1000].
fn scale_factor(s: &str) -> Result<f64, String> {
    let v = args::positive(s)?;
    if v <= 1000.0 {
        Ok(v)
    } else {
        Err(format!("must be at most 1000, got {s}"))
    }
}

/// One of the embedded queries.
fn query_name(s: &str) -> Result<String, String> {
    if tpch::QUERIES.iter().any(|(n, _)| *n == s) {
        Ok(s.to_string())
    } else {
        let names: Vec<&str> = tpch::QUERIES.iter().map(|(n, _)| *n).collect();
        Err(format!("no query {s}: one of {}", names.join(", ")))
    }
}

/// Tables by (name, path).
type Tables = Vec<(String, PathBuf)>;

/// The tables in `dir` at `sf`: generated unless the folder already holds them at that scale
/// factor; the seconds generation took, if it ran.
fn tables(dir: &Path, sf: f64) -> CliResult<(Tables, Option<f64>)> {
    let marker = dir.join(SCALE_FILE);
    if let Ok(text) = std::fs::read_to_string(&marker) {
        let had: f64 = text
            .trim()
            .parse()
            .map_err(|_| CliError::usage(format!("{} is not a scale factor", marker.display())))?;
        if had != sf {
            return Err(CliError::usage(format!(
                "{} holds TPC-H at scale factor {had}, not {sf}: give another --data folder",
                dir.display()
            )));
        }
        let tables = tpch::tables(dir);
        if let Some((_, missing)) = tables.iter().find(|(_, p)| !p.exists()) {
            return Err(CliError::usage(format!(
                "{} is missing: delete {} to generate the tables again",
                missing.display(),
                marker.display()
            )));
        }
        return Ok((tables, None));
    }
    crate::output::diag!(
        "bench sql: generating TPC-H at scale factor {sf} into {} ...",
        dir.display()
    );
    let start = Instant::now();
    let tables = tpch::generate(dir, sf)?;
    std::fs::write(&marker, format!("{sf}\n"))
        .map_err(|e| CliError::usage(format!("cannot write {}: {e}", marker.display())))?;
    Ok((tables, Some(start.elapsed().as_secs_f64())))
}

/// Run `dpml bench sql`.
pub fn run(a: &SqlBenchArgs, out: Output) -> CliResult<()> {
    let (tables, generated) = tables(&a.data, a.scale_factor)?;
    // The DP schema is the embedded one, rewritten each time (so it matches this binary).
    let schema_path = a.data.join("schema.toml");
    std::fs::write(&schema_path, tpch::SCHEMA)
        .map_err(|e| CliError::usage(format!("cannot write {}: {e}", schema_path.display())))?;
    let schema = dpml_data::Schema::from_file(&schema_path)?;
    let limits = a.memory.limits();
    let engine = Engine::with_limits(&schema.tables, &tables, limits.clone())?;
    let exact = Exact::new(&tables, &limits)?;
    let request = Request {
        epsilon: a.epsilon,
        delta: a.delta,
        ..Request::default()
    };
    let mut rng = a.seed.rng()?;
    let chosen: Vec<(&str, &str)> = tpch::QUERIES
        .iter()
        .filter(|(n, _)| a.queries.is_empty() || a.queries.iter().any(|q| q == n))
        .copied()
        .collect();
    let runs = a.runs as usize;
    let bar = Progress::new((chosen.len() * runs * 2) as u64, "bench sql", "run", false);
    let mut results = Vec::new();
    for (name, sql) in &chosen {
        let mut on_step = |s: Step| {
            bar.set_message(format!(
                "{name} {} {}/{}",
                if s.dp { "DP" } else { "plain" },
                s.run,
                s.runs
            ));
            bar.inc(1);
        };
        let m = measure(
            &engine,
            &exact,
            name,
            sql,
            &request,
            runs,
            &mut rng,
            &mut on_step,
        )?;
        let head = format!(
            "{name}: DP {:.3} s, plain {:.3} s, ratio {:.2}, peak RSS {}",
            m.dp_seconds,
            m.plain_seconds,
            m.time_ratio,
            m.peak_rss_bytes.map_or("-".into(), format_bytes)
        );
        bar.line(&head, None, "");
        results.push(m);
    }
    bar.finish_and_clear();
    let queries = serde_json::to_value(&results).map_err(CliError::internal)?;
    out.emit(&json!({
        "benchmark": "sql",
        "scale_factor": a.scale_factor,
        "data": a.data.display().to_string(),
        "generated_seconds": generated,
        "epsilon": a.epsilon,
        "delta": a.delta,
        "runs": runs,
        "memory_limit": a.memory.memory_limit,
        "seeded": rng.is_seeded(),
        "machine": machine(),
        "note": "medians of interleaved runs on this machine, DP against DataFusion without \
                 DP over the same tables and memory limit; peak RSS is the process's during a \
                 run; relative errors are against the exact answer of generated TPC-H data",
        "queries": queries,
    }));
    Ok(())
}
