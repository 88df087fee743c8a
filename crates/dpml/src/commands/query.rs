//! `dpml query`: a DP count, sum, mean or histogram of one column of a table. Sensitivity comes
//! from the declared `--bounds`, never from the data; with `--ledger` the spend is recorded
//! durably before the result is printed, and a request over budget releases nothing.

use std::path::Path;

use clap::{Args, ValueEnum};
use dpml_core::query::{self as core_query, NoiseKind, QueryOptions};

use crate::args::{self, DataArgs, SeedArg};
use crate::error::CliResult;
use crate::ledger_args::{LedgerArgs, balance_json};
use crate::output::Output;

/// The statistic to release.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// Number of rows (sensitivity 1).
    Count,
    /// Sum of the column clamped to --bounds (sensitivity max(|LO|, |HI|)).
    Sum,
    /// Mean of the column clamped to --bounds (half the budget on the sum, half on the count).
    Mean,
    /// Counts in --bins equal bins over --bounds (sensitivity 1).
    Histogram,
}

/// The noise distribution.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseArg {
    /// ε-DP.
    Laplace,
    /// (ε, δ)-DP, analytic calibration.
    Gaussian,
}

/// Flags of `dpml query`.
#[derive(Args, Debug)]
pub struct QueryArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// Column to aggregate.
    #[arg(long)]
    pub column: String,
    /// The statistic.
    #[arg(long, value_enum)]
    pub aggregate: Aggregate,
    /// Declared clamping bounds LO,HI or LO:HI (required for sum, mean and histogram unless
    /// --schema declares the column's).
    #[arg(long, value_parser = args::bounds, allow_hyphen_values = true)]
    pub bounds: Option<(f64, f64)>,
    /// Schema file (JSON, or TOML by its .toml name), as `dpml train --schema`: how to read
    /// the table (delimiter, fills, categories) and the column's declared bounds.
    #[arg(long, value_parser = args::input_path)]
    pub schema: Option<std::path::PathBuf>,
    /// Histogram bins.
    #[arg(long, value_parser = args::at_least_one, default_value = "10")]
    pub bins: u64,
    /// ε of this release.
    #[arg(long, value_parser = args::positive)]
    pub epsilon: f64,
    /// Noise distribution.
    #[arg(long, value_enum, default_value = "laplace")]
    pub mechanism: NoiseArg,
    /// δ (Gaussian noise only).
    #[arg(long, value_parser = args::open_unit)]
    pub delta: Option<f64>,
    #[command(flatten)]
    pub ledger: LedgerArgs,
    #[command(flatten)]
    pub seed: SeedArg,
}

/// Run `dpml query`.
pub fn run(a: &QueryArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let options = QueryOptions {
        dataset: a.data.dataset.clone(),
        label_column: a.data.label_column.clone(),
        data_dir: data_dir.map(Path::to_path_buf),
        column: a.column.clone(),
        aggregate: match a.aggregate {
            Aggregate::Count => core_query::Aggregate::Count,
            Aggregate::Sum => core_query::Aggregate::Sum,
            Aggregate::Mean => core_query::Aggregate::Mean,
            Aggregate::Histogram => core_query::Aggregate::Histogram,
        },
        bounds: a.bounds,
        schema: a.schema.clone(),
        bins: a.bins,
        epsilon: a.epsilon,
        noise: match a.mechanism {
            NoiseArg::Laplace => NoiseKind::Laplace,
            NoiseArg::Gaussian => NoiseKind::Gaussian,
        },
        delta: a.delta,
    };
    options.check()?;
    // Open the ledger next: a bad or corrupt ledger stops us before any noise is drawn.
    let ledger = a.ledger.open(&a.seed)?;
    let (mut release, balance) = core_query::query(&options, &mut a.seed.rng()?, ledger.as_ref())?;
    if let (Some(bal), Some(obj)) = (balance, release.as_object_mut()) {
        obj.insert("ledger".into(), balance_json(&bal));
    }
    out.emit(&release);
    Ok(())
}
