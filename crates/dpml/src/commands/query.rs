//! `dpml query`: a DP count, sum, mean or histogram of one column of a table. Sensitivity comes
//! from the declared `--bounds`, never from the data; with `--ledger` the spend is recorded
//! durably before the result is printed, and a request over budget releases nothing.

use std::path::Path;

use clap::{Args, ValueEnum};
use dpml_accounting::ledger::Spend;
use dpml_data::{LoadOptions, load_table};
use dpml_mechanisms::stats::{self, Noise, StatValue};
use serde_json::{Map, json};

use crate::args::{self, DataArgs, SeedArg};
use crate::error::{CliError, CliResult};
use crate::ledger_args::{LedgerArgs, balance_json};
use crate::output::Output;
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};

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
    /// Declared clamping bounds LO,HI (required for sum, mean and histogram).
    #[arg(long, value_parser = args::bounds, allow_hyphen_values = true)]
    pub bounds: Option<(f64, f64)>,
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

/// Upper limit on histogram bins.
const MAX_BINS: u64 = 1_000_000;

/// Run `dpml query`.
pub fn run(a: &QueryArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let noise = match (a.mechanism, a.delta) {
        (NoiseArg::Laplace, None) => Noise::Laplace,
        (NoiseArg::Gaussian, Some(delta)) => Noise::Gaussian { delta },
        (NoiseArg::Gaussian, None) => {
            return Err(CliError::usage(
                "--delta is required with --mechanism gaussian",
            ));
        }
        (NoiseArg::Laplace, Some(d)) => {
            return Err(CliError::usage(format!(
                "--delta {d} given, but Laplace noise is pure epsilon-DP"
            )));
        }
    };
    if a.bins > MAX_BINS {
        return Err(CliError::usage(format!(
            "--bins {} exceeds the limit {MAX_BINS}",
            a.bins
        )));
    }
    // Open the ledger first: a bad or corrupt ledger stops us before any noise is drawn.
    let ledger = a.ledger.open()?;
    let opts = LoadOptions {
        data_dir: data_dir.map(Path::to_path_buf),
        label_column: a.data.label_column.clone(),
        ..LoadOptions::default()
    };
    let table = load_table(&a.data.dataset, &opts)?;
    let column = table.column(&a.column)?;
    let bounds = || {
        a.bounds.ok_or_else(|| {
            CliError::usage(format!(
                "--bounds LO,HI is required for {:?}: sensitivity comes from declared bounds, never from the data",
                a.aggregate
            ))
        })
    };
    let mut rng = a.seed.rng()?;
    let release = match a.aggregate {
        Aggregate::Count => stats::count(&mut rng, column, a.epsilon, noise)?,
        Aggregate::Sum => stats::sum(&mut rng, column, bounds()?, a.epsilon, noise)?,
        Aggregate::Mean => stats::mean(&mut rng, column, bounds()?, a.epsilon, noise)?,
        Aggregate::Histogram => stats::histogram(
            &mut rng,
            column,
            bounds()?,
            a.bins as usize,
            a.epsilon,
            noise,
        )?,
    };

    let mut obj = Map::new();
    obj.insert(
        "value".into(),
        match &release.value {
            StatValue::Scalar(v) => json!(v),
            StatValue::Vector(v) => json!(v),
        },
    );
    obj.insert(
        "mechanism".into(),
        json!(format!("{:?}", a.mechanism).to_lowercase()),
    );
    obj.insert(
        "aggregate".into(),
        json!(format!("{:?}", a.aggregate).to_lowercase()),
    );
    obj.insert("column".into(), json!(a.column));
    obj.insert("epsilon".into(), json!(release.epsilon));
    obj.insert("delta".into(), json!(release.delta));
    obj.insert("sensitivity".into(), json!(release.sensitivity));
    match (release.scale, release.sigma) {
        (Some(b), _) => obj.insert("scale".into(), json!(b)),
        (_, Some(s)) => obj.insert("sigma".into(), json!(s)),
        _ => None,
    };
    if let Some(ledger) = ledger {
        // Durably recorded before anything is printed; over budget → error, nothing printed.
        let spend = Spend {
            label: format!(
                "query {:?} of {} on {}",
                a.aggregate,
                a.column,
                a.data.dataset.name()
            )
            .to_lowercase(),
            event: release.event.clone(),
            epsilon: release.epsilon,
            delta: release.delta,
        };
        let bal = ledger.spend(&spend)?;
        obj.insert("ledger".into(), balance_json(&bal));
    }
    obj.insert("seeded".into(), json!(rng.is_seeded()));
    // Every figure is noisy: nothing to diagnose. N is not assumed public (a count releases it).
    let model = PrivacyModel::new(neighbouring::ADD_REMOVE, &[public::QUERY]);
    out.emit(&Release::from_map(obj, &model).into_value());
    Ok(())
}
