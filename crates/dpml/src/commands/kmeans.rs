//! `dpml kmeans`: plain or differentially private k-means on a table, with accuracy against the
//! labels (best one-to-one matching of clusters to classes), NICV and inertia as diagnostics
//! (computed from the records without noise). Bounds are public declarations (`--bounds`),
//! never read from the data.

use std::path::Path;

use clap::Args;
use dpml_core::kmeans::{DEFAULT_ALGORITHM, DEFAULT_CLUSTERS, KMeansOptions, KMeansRecipe};
use dpml_learn::kmeans::Algorithm;

use crate::args::{self, DataArgs, SeedArg};
use crate::error::CliResult;
use crate::ledger_args::LedgerArgs;
use crate::output::Output;
use crate::schema_args::SchemaArgs;

/// Flags of `dpml kmeans`.
#[derive(Args, Debug)]
pub struct KMeansArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// Number of clusters.
    #[arg(long, value_parser = args::at_least_one, default_value_t = DEFAULT_CLUSTERS as u64)]
    pub k: u64,
    /// lloyd (non-private), dplloyd (Laplace), dplloyd-gaussian (zCDP), input-perturbation.
    #[arg(long, default_value = DEFAULT_ALGORITHM.name())]
    pub algorithm: Algorithm,
    /// Total ε (per record for input-perturbation).
    #[arg(long, value_parser = args::positive)]
    pub epsilon: Option<f64>,
    /// δ (dplloyd-gaussian only).
    #[arg(long, value_parser = args::open_unit)]
    pub delta: Option<f64>,
    /// Lloyd iterations (default: chosen for the algorithm and budget; at most 10000).
    #[arg(long, value_parser = args::at_least_one_at_most(args::MAX_ITERATIONS))]
    pub iterations: Option<u64>,
    /// What is declared about the data: its feature bounds bound every sensitivity.
    #[command(flatten)]
    pub schema: SchemaArgs,
    #[command(flatten)]
    pub ledger: LedgerArgs,
    #[command(flatten)]
    pub seed: SeedArg,
}

/// Run `dpml kmeans`.
pub fn run(a: &KMeansArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let options = KMeansOptions {
        dataset: a.data.dataset.clone(),
        label_column: a.data.label_column.clone(),
        data_dir: data_dir.map(Path::to_path_buf),
        declarations: a.schema.declarations(),
        recipe: KMeansRecipe {
            k: a.k as usize,
            algorithm: a.algorithm,
            epsilon: a.epsilon,
            delta: a.delta,
            iterations: a.iterations.map(|t| t as usize),
        },
    };
    let ledger = a.ledger.open(&a.seed)?;
    out.emit(&dpml_core::kmeans::kmeans(
        &options,
        &mut a.seed.rng()?,
        ledger.as_ref(),
    )?);
    Ok(())
}
