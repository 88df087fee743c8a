//! `dpml kmeans`: plain or differentially private k-means on a table, with accuracy against the
//! labels (best one-to-one matching of clusters to classes), NICV and inertia as diagnostics
//! (computed from the records without noise). Bounds are public declarations (`--bounds`),
//! never read from the data.

use std::path::Path;

use clap::Args;
use dpml_data::{LoadOptions, Source, load};
use dpml_learn::kmeans::{Algorithm, Bounds, KMeansParams, clustering_accuracy, fit, nicv};
use serde_json::json;

use crate::args::{self, DataArgs, SeedArg};
use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};

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
    /// Lloyd iterations (default: chosen for the algorithm and budget).
    #[arg(long, value_parser = args::at_least_one)]
    pub iterations: Option<u64>,
    /// Public feature bounds: LO,HI for every feature, or lo1:hi1,lo2:hi2,… one per feature
    /// (default: the data set's published ranges where dpml knows them).
    #[arg(long, allow_hyphen_values = true)]
    pub bounds: Option<String>,
    #[command(flatten)]
    pub seed: SeedArg,
}

/// Run `dpml kmeans`.
pub fn run(a: &KMeansArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let opts = LoadOptions {
        data_dir: data_dir.map(Path::to_path_buf),
        label_column: a.data.label_column.clone(),
    };
    let data = load(&a.data.dataset, &opts)?.train;
    let d = data.n_features();
    let bounds = match &a.bounds {
        Some(spec) => parse_bounds(spec, d)?,
        None => public_bounds(&a.data.dataset, &data)?,
    };
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
        .insert("n", json!(data.n))
        .insert("bounds", json!({"lo": bounds.lo(), "hi": bounds.hi()}))
        .insert("event", json!(result.event))
        .insert("seeded", json!(result.seeded))
        // Against the true labels and the true records, without noise.
        .diagnostic("accuracy", json!(accuracy))
        .diagnostic("nicv", json!(nicv))
        .diagnostic("inertia", json!(result.inertia));
    out.emit(&release.into_value());
    Ok(())
}

/// `LO,HI` for all features, or `lo:hi` pairs separated by commas, one per feature.
pub fn parse_bounds(spec: &str, d: usize) -> CliResult<Bounds> {
    let bad = |why: String| CliError::usage(format!("--bounds {spec}: {why}"));
    let pairs: Vec<(f64, f64)> = if spec.contains(':') {
        spec.split(',')
            .map(|p| {
                let (lo, hi) = p
                    .split_once(':')
                    .ok_or_else(|| bad(format!("{p} is not lo:hi")))?;
                Ok((
                    args::finite(lo).map_err(bad)?,
                    args::finite(hi).map_err(bad)?,
                ))
            })
            .collect::<CliResult<_>>()?
    } else {
        let (lo, hi) = args::bounds(spec).map_err(bad)?;
        vec![(lo, hi); d]
    };
    if pairs.len() != d {
        return Err(bad(format!(
            "{} ranges given, but the data has {d} features",
            pairs.len()
        )));
    }
    Ok(Bounds::from_pairs(&pairs)?)
}

/// Bounds published with the data set itself (never computed from the records): the
/// per-feature ranges of its documentation ([`Source::published_ranges`], one table shared
/// with `dpml train`'s scaling), else its one declared range for every feature (MNIST's
/// [0, 1]).
pub fn public_bounds(source: &Source, data: &dpml_data::Dataset) -> CliResult<Bounds> {
    if let Some(b) = Bounds::published(source)? {
        if b.dims() == data.n_features() {
            return Ok(b);
        }
    }
    match data.feature_range {
        Some((lo, hi)) => Ok(Bounds::uniform(
            f64::from(lo),
            f64::from(hi),
            data.n_features(),
        )?),
        None => Err(CliError::usage(format!(
            "{} has no published feature ranges: pass --bounds (sensitivity comes from declared bounds, never from the data)",
            source.name()
        ))),
    }
}
