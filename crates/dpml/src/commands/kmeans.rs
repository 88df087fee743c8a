//! `dpml kmeans`: plain or differentially private k-means on a table, with accuracy against the
//! labels (best one-to-one matching of clusters to classes), NICV and inertia as diagnostics
//! (computed from the records without noise). Bounds are public declarations (`--bounds`),
//! never read from the data.

use std::path::Path;

use clap::Args;
use dpml_data::{Dataset, Schema};
use dpml_learn::kmeans::{Algorithm, Bounds, KMeansParams, clustering_accuracy, fit, nicv};
use serde_json::json;

use crate::args::{self, DataArgs, SeedArg};
use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};
use crate::schema_args::{Needs, SchemaArgs, provenance_report, require_declared};

/// Flags of `dpml kmeans`.
#[derive(Args, Debug)]
pub struct KMeansArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// Number of clusters.
    #[arg(long, value_parser = args::at_least_one)]
    pub k: u64,
    /// lloyd (non-private), dplloyd (Laplace), dplloyd-gaussian (zCDP), input-perturbation.
    #[arg(long, default_value = "dplloyd")]
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
    pub seed: SeedArg,
}

/// Run `dpml kmeans`.
pub fn run(a: &KMeansArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let splits = a
        .schema
        .load(&a.data.dataset, a.data.label_column.as_deref(), data_dir)?;
    let data = splits.train;
    let d = data.n_features();
    let bounds = declared_bounds(&splits.schema, &data)?;
    let mut params = KMeansParams::new(a.k as usize, a.algorithm, bounds.clone());
    match (a.algorithm.is_private(), a.epsilon) {
        (true, Some(e)) => params = params.with_epsilon(e),
        (true, None) => {
            return Err(CliError::usage(format!(
                "--epsilon is required for {}",
                a.algorithm.name()
            )));
        }
        (false, Some(e)) => {
            return Err(CliError::usage(format!(
                "--epsilon {e} given, but lloyd is not private"
            )));
        }
        (false, None) => {}
    }
    if let Some(delta) = a.delta {
        params = params.with_delta(delta);
    }
    if let Some(t) = a.iterations {
        params = params.with_iterations(t as usize);
    }
    let mut rng = a.seed.rng()?;
    let result = fit(&params, &data.x, data.n, d, &mut rng)?;
    let accuracy = clustering_accuracy(&result.assignments, &data.y, result.k, data.n_classes)?;
    let nicv = nicv(&data.x, d, &result.centroids, &bounds)?;
    let centroids: Vec<&[f64]> = result.centroids.chunks(d).collect();
    // Input perturbation protects each record's features on their own (local DP).
    let relation = match a.algorithm {
        Algorithm::InputPerturbation => neighbouring::FEATURES,
        _ => neighbouring::ADD_REMOVE,
    };
    let model = PrivacyModel::new(
        relation,
        &[public::DATA_SET_SIZE, public::SCHEMA, public::ALGORITHM],
    );
    let mut release = Release::new(&model);
    release
        .insert("centroids", json!(centroids))
        .insert("epsilon", json!(result.epsilon))
        .insert("delta", json!(result.delta))
        .insert("iterations", json!(result.iterations))
        .insert("budget_split", json!(result.budget_split))
        .insert("init", json!(result.init))
        .insert("algorithm", json!(a.algorithm.name()))
        .insert("k", json!(result.k))
        .insert("train_size", json!(data.n))
        .insert("bounds", json!({"lo": bounds.lo(), "hi": bounds.hi()}))
        .insert("schema", provenance_report(&splits.schema))
        .insert("event", json!(result.event))
        .insert("seeded", json!(result.seeded))
        // Against the true labels and the true records, without noise.
        .diagnostic("accuracy", json!(accuracy))
        .diagnostic("nicv", json!(nicv))
        .diagnostic("inertia", json!(result.inertia));
    out.emit(&release.into_value());
    Ok(())
}

/// The clamping box of k-means: the schema's feature bounds (declared, or the data set's
/// own), never computed from the records.
///
/// # Errors
/// A usage error naming `--bounds` when none are declared.
pub fn declared_bounds(schema: &Schema, data: &Dataset) -> CliResult<Bounds> {
    let needs = Needs {
        bounds: true,
        ..Needs::default()
    };
    let ranges = require_declared(schema, data, needs)?.unwrap_or_default();
    Ok(Bounds::from_pairs(&ranges)?)
}
