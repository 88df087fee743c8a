//! `dpml sql`: a DP answer to a SQL query over Parquet and CSV tables (see `dpml_sql`). The
//! schema declares each table's privacy unit, bounds and key sets; with `--ledger` the spend is
//! recorded durably before anything is printed, and a query over budget prints nothing.
//! `--explain` (or `EXPLAIN DP SELECT …`) shows what the query would release and cost, reading
//! no private row and charging nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
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
    pub ledger: LedgerArgs,
    #[command(flatten)]
    pub seed: SeedArg,
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
    let (name, w) = s
        .split_once('=')
        .ok_or_else(|| format!("{s} is not NAME=WEIGHT"))?;
    Ok((name.to_string(), args::positive(w)?))
}

/// DP SQL's errors keep their classification: the user's input exits 2, the rest 1.
impl From<SqlError> for CliError {
    fn from(e: SqlError) -> Self {
        match &e {
            _ if e.is_input() => CliError::usage(e),
            SqlError::Ledger { .. } => CliError::runtime(e),
            _ => CliError::internal(e.to_string().trim_start_matches("internal error: ")),
        }
    }
}

/// Run `dpml sql`.
pub fn run(a: &SqlArgs, out: Output) -> CliResult<()> {
    let (explain_prefix, query) = strip_explain(&a.query);
    let schema = dpml_data::Schema::from_file(&a.schema)?;
    if schema.tables.is_empty() {
        return Err(CliError::usage(format!(
            "{} declares no [tables.NAME]: dpml sql needs each table's privacy unit (or \
             public = true)",
            a.schema.display()
        )));
    }
    let request = Request {
        epsilon: a.epsilon,
        delta: a.delta,
        split: Split {
            weights: a.weights.iter().cloned().collect::<BTreeMap<_, _>>(),
        },
    };
    if a.explain || explain_prefix {
        let engine = Engine::new(&schema.tables, &a.tables)?;
        out.emit(&engine.explain(query, &request)?.to_json());
        return Ok(());
    }
    // Open the ledger first: a bad ledger stops us before any row is read.
    let ledger = a.ledger.open()?;
    let mut rng = a.seed.rng()?;
    let engine = Engine::new(&schema.tables, &a.tables)?;
    let result = engine.run(query, &request, &mut rng, ledger.as_ref())?;
    let mut v = result.to_json()?;
    v["seeded"] = json!(rng.is_seeded());
    if let Some(b) = &result.report.ledger {
        v["ledger"] = balance_json(b);
    }
    out.emit(&v);
    Ok(())
}
