//! k-means clustering, plain or differentially private (DPLloyd, input perturbation), released
//! with accuracy against the labels, NICV and inertia as diagnostics (computed from the
//! records without noise). Bounds are public declarations, never read from the data.

use std::path::PathBuf;

use dpml_data::{Dataset, Schema, Source};
use dpml_learn::kmeans::{Algorithm, Bounds, KMeansParams, clustering_accuracy, fit, nicv};
use dpml_mechanisms::{DpRng, PrivacyEvent};
use serde_json::{Value, json};

use crate::budget::{self, Charge, Ledger};
use crate::error::{Error, Result};
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};
use crate::schema::{Declarations, Needs, provenance_report, require_declared};

/// What to cluster, and how.
#[derive(Debug, Clone)]
pub struct KMeansOptions {
    /// The data source (its training split).
    pub dataset: Source,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// What is declared about the data: its feature bounds bound every sensitivity.
    pub declarations: Declarations,
    /// Number of clusters.
    pub k: usize,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Total ε (per record for input perturbation); required exactly when private.
    pub epsilon: Option<f64>,
    /// δ (Gaussian DPLloyd only).
    pub delta: Option<f64>,
    /// Lloyd iterations (default: chosen for the algorithm and budget).
    pub iterations: Option<usize>,
}

/// The clamping box of k-means: the schema's feature bounds (declared, or the data set's
/// own), never computed from the records.
///
/// # Errors
/// A usage error naming `--bounds` when none are declared.
pub fn declared_bounds(schema: &Schema, data: &Dataset) -> Result<Bounds> {
    let needs = Needs {
        bounds: true,
        ..Needs::default()
    };
    let ranges = require_declared(schema, data, needs)?.unwrap_or_default();
    Ok(Bounds::from_pairs(&ranges)?)
}

/// Clusters as `o` says, drawing from `rng`: the release (centroids, ε, δ, the privacy event)
/// with the clustering quality as diagnostics; with a `ledger`, the total ε is checked before
/// the data is read and the run's event recorded before the release is returned (plain Lloyd
/// cannot be charged).
///
/// # Errors
/// Usage errors for data that do not load, missing bounds, an ε given to (or missing from)
/// the algorithm, or parameters the algorithm refuses.
pub fn kmeans(o: &KMeansOptions, rng: &mut DpRng, ledger: Option<&Ledger>) -> Result<Value> {
    if !o.algorithm.is_private() {
        budget::refuse_non_private(ledger, o.algorithm.name())?;
    }
    if let (Some(l), Some(epsilon)) = (ledger, o.epsilon) {
        let delta = o.delta.unwrap_or(0.0);
        let planned = PrivacyEvent::EpsilonDelta { epsilon, delta };
        budget::check(
            Some(l),
            &Charge::of("kmeans", o.dataset.name(), planned, epsilon, delta),
        )?;
    }
    let opts = o
        .declarations
        .load_options(o.data_dir.as_deref(), o.label_column.as_deref())?;
    let splits = dpml_data::load(&o.dataset, &opts)?;
    let data = splits.train;
    let d = data.n_features();
    let bounds = declared_bounds(&splits.schema, &data)?;
    let mut params = KMeansParams::new(o.k, o.algorithm, bounds.clone());
    match (o.algorithm.is_private(), o.epsilon) {
        (true, Some(e)) => params = params.with_epsilon(e),
        (true, None) => {
            return Err(Error::usage(format!(
                "--epsilon is required for {}",
                o.algorithm.name()
            )));
        }
        (false, Some(e)) => {
            return Err(Error::usage(format!(
                "--epsilon {e} given, but lloyd is not private"
            )));
        }
        (false, None) => {}
    }
    if let Some(delta) = o.delta {
        params = params.with_delta(delta);
    }
    if let Some(t) = o.iterations {
        params = params.with_iterations(t);
    }
    let result = fit(&params, &data.x, data.n, d, rng)?;
    let balance = match &result.event {
        Some(event) => budget::charge(
            ledger,
            &Charge::of(
                "kmeans",
                o.dataset.name(),
                event.clone(),
                result.epsilon.unwrap_or(0.0),
                result.delta.unwrap_or(0.0),
            )
            .labelled(format!("{} with k = {}", o.algorithm.name(), o.k)),
        )?,
        None => None,
    };
    let accuracy = clustering_accuracy(&result.assignments, &data.y, result.k, data.n_classes)?;
    let nicv = nicv(&data.x, d, &result.centroids, &bounds)?;
    let centroids: Vec<&[f64]> = result.centroids.chunks(d).collect();
    // Input perturbation protects each record's features on their own (local DP).
    let relation = match o.algorithm {
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
        .insert("algorithm", json!(o.algorithm.name()))
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
    if let Some(b) = balance {
        release.insert("ledger", json!(b));
    }
    Ok(release.into_value())
}
