//! k-means clustering, plain or differentially private (DPLloyd, input perturbation), released
//! with accuracy against the labels, NICV and inertia as diagnostics (computed from the
//! records without noise). Bounds are public declarations, never read from the data.

use std::path::PathBuf;

use dpml_data::{Dataset, Schema, Source};
use dpml_learn::kmeans::{Algorithm, Bounds, KMeansParams, clustering_accuracy, fit, nicv};
use dpml_mechanisms::{DpRng, PrivacyEvent};
use serde_json::{Value, json};

use crate::budget::{self, Charge, Ledger, Neighbouring};
use crate::error::{Error, Result};
use crate::ledger_json;
use crate::privacy_model::{self, PrivacyModel, Release, neighbouring, public};
use crate::schema::{Declarations, Needs, clamp_diagnostics, provenance_report, require_declared};
use crate::train::fit::RunContext;

/// How to cluster: the algorithm and its budget.
#[derive(Debug, Clone)]
pub struct KMeansRecipe {
    /// Number of clusters.
    pub k: usize,
    /// The algorithm (default: DPLloyd).
    pub algorithm: Algorithm,
    /// Total ε (per record for input perturbation); required exactly when private.
    pub epsilon: Option<f64>,
    /// δ (Gaussian DPLloyd only).
    pub delta: Option<f64>,
    /// Lloyd iterations (default: chosen for the algorithm and budget).
    pub iterations: Option<usize>,
}

/// The number of clusters when none is given (scikit-learn's `KMeans` default).
pub const DEFAULT_CLUSTERS: usize = 8;

/// The algorithm when none is named: DPLloyd (Laplace noise on each iteration's counts and
/// sums).
pub const DEFAULT_ALGORITHM: Algorithm = Algorithm::DpLloyd;

impl KMeansRecipe {
    /// The library's parameters for clustering inside `bounds`.
    ///
    /// # Errors
    /// A usage error for an ε given to (or missing from) the algorithm.
    fn params(&self, bounds: Bounds) -> Result<KMeansParams> {
        let mut params = KMeansParams::new(self.k, self.algorithm, bounds);
        match (self.algorithm.is_private(), self.epsilon) {
            (true, Some(e)) => params = params.with_epsilon(e),
            (true, None) => {
                return Err(Error::usage(format!(
                    "--epsilon is required for {}",
                    self.algorithm.name()
                )));
            }
            (false, Some(e)) => {
                return Err(Error::usage(format!(
                    "--epsilon {e} given, but lloyd is not private"
                )));
            }
            (false, None) => {}
        }
        if let Some(delta) = self.delta {
            params = params.with_delta(delta);
        }
        if let Some(t) = self.iterations {
            params = params.with_iterations(t);
        }
        Ok(params)
    }
}

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
    /// The algorithm and its budget.
    pub recipe: KMeansRecipe,
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
/// with the clustering quality as diagnostics; with a `ledger`, charged as [`fit_kmeans`] says.
///
/// # Errors
/// Usage errors for data that do not load, missing bounds, an ε given to (or missing from)
/// the algorithm, or parameters the algorithm refuses; the ledger's refusals.
pub fn kmeans(o: &KMeansOptions, rng: &mut DpRng, ledger: Option<&Ledger>) -> Result<Value> {
    let opts = o
        .declarations
        .load_options(o.data_dir.as_deref(), o.label_column.as_deref())?;
    let splits = dpml_data::load(&o.dataset, &opts)?;
    let data = splits.train;
    let bounds = declared_bounds(&splits.schema, &data)?;
    let ctx = RunContext {
        dataset: o.dataset.name(),
        dataset_label: privacy_model::dataset_label(&o.dataset),
        ..RunContext::in_memory(&splits.schema)
    };
    let mut fitted = fit_kmeans(&o.recipe, &data, bounds, &ctx, true, rng, ledger)?;
    crate::privacy_model::add_diagnostics(
        &mut fitted.release,
        clamp_diagnostics(&splits.clamped, &data.feature_names, data.n),
    );
    Ok(fitted.release)
}

/// Clustered records: the released centroids, each record's nearest centroid, and the release.
#[derive(Debug, Clone)]
pub struct KMeansFitted {
    /// The centroids, `k × d` row by row.
    pub centroids: Vec<f64>,
    /// Each record's cluster (post-processing of the centroids on the records).
    pub assignments: Vec<usize>,
    /// The release: centroids, ε, δ, the event at top level; the clustering quality under
    /// diagnostics.
    pub release: Value,
}

/// Clusters the records of `data` inside `bounds` (declared, as `ctx.schema` says) as
/// `recipe` says, drawing from `rng`. With `labelled`, the clustering accuracy against the
/// records' labels is a diagnostic too. With a `ledger`, the total ε is checked before the
/// first iteration and the run's event recorded (as `kmeans` on `ctx`'s data set) before the
/// centroids are returned, its balance under `"ledger"`; plain Lloyd cannot be charged.
///
/// # Errors
/// Usage errors for an ε given to (or missing from) the algorithm, or parameters the
/// algorithm refuses; the ledger's refusals.
pub fn fit_kmeans(
    recipe: &KMeansRecipe,
    data: &Dataset,
    bounds: Bounds,
    ctx: &RunContext<'_>,
    labelled: bool,
    rng: &mut DpRng,
    ledger: Option<&Ledger>,
) -> Result<KMeansFitted> {
    let d = data.n_features();
    let params = recipe.params(bounds.clone())?;
    if !recipe.algorithm.is_private() {
        budget::refuse_non_private(ledger, recipe.algorithm.name())?;
    }
    // Input perturbation protects each record's features on their own (local DP).
    let (relation, charged_under) = match recipe.algorithm {
        Algorithm::InputPerturbation => (neighbouring::FEATURES, Neighbouring::Features),
        _ => (neighbouring::ADD_REMOVE, Neighbouring::Record),
    };
    if let Some(epsilon) = recipe.epsilon {
        let delta = recipe.delta.unwrap_or(0.0);
        let planned = PrivacyEvent::EpsilonDelta { epsilon, delta };
        budget::check(
            ledger,
            &Charge::of("kmeans", &ctx.dataset, planned, epsilon, delta).under(charged_under),
        )?;
    }
    let result = fit(&params, &data.x, data.n, d, rng)?;
    let balance = match &result.event {
        Some(event) => budget::charge(
            ledger,
            &Charge::of(
                "kmeans",
                &ctx.dataset,
                event.clone(),
                result.epsilon.unwrap_or(0.0),
                result.delta.unwrap_or(0.0),
            )
            .labelled(format!("{} with k = {}", recipe.algorithm.name(), recipe.k))
            .under(charged_under),
        )?,
        None => None,
    };
    let accuracy = labelled
        .then(|| clustering_accuracy(&result.assignments, &data.y, result.k, data.n_classes))
        .transpose()?;
    let nicv = nicv(&data.x, d, &result.centroids, &bounds)?;
    let centroids: Vec<&[f64]> = result.centroids.chunks(d).collect();
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
        .insert("algorithm", json!(recipe.algorithm.name()))
        .insert("k", json!(result.k))
        .insert("train_size", json!(data.n))
        .insert("bounds", json!({"lo": bounds.lo(), "hi": bounds.hi()}))
        .insert("schema", provenance_report(ctx.schema))
        .insert("event", json!(result.event))
        .insert("seeded", json!(result.seeded))
        // Against the true records (and labels), without noise.
        .diagnostic("nicv", json!(nicv))
        .diagnostic("inertia", json!(result.inertia));
    if let Some(a) = accuracy {
        release.diagnostic("accuracy", json!(a));
    }
    if let Some(b) = balance {
        release.insert("ledger", ledger_json::balance(&b));
    }
    Ok(KMeansFitted {
        centroids: result.centroids,
        assignments: result.assignments,
        release: release.into_value(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points() -> Dataset {
        let x: Vec<f32> = (0..200)
            .map(|i| if i % 4 < 2 { -1.0 } else { 1.0 })
            .collect();
        Dataset {
            name: "array".into(),
            n: 100,
            x,
            record_shape: vec![2],
            y: vec![0; 100],
            n_classes: 1,
            feature_names: vec!["a".into(), "b".into()],
            class_names: vec!["0".into()],
            feature_range: None,
        }
    }

    fn recipe(algorithm: Algorithm, epsilon: Option<f64>) -> KMeansRecipe {
        KMeansRecipe {
            k: 2,
            algorithm,
            epsilon,
            delta: None,
            iterations: None,
        }
    }

    #[test]
    fn a_ledger_is_checked_before_any_noise_and_charged_before_the_centroids_return() {
        let (_dir, ledger) = budget::test_ledger(1.0);
        let schema = Schema::default();
        let ctx = RunContext::in_memory(&schema);
        let bounds = || Bounds::from_pairs(&[(-2.0, 2.0), (-2.0, 2.0)]).unwrap();
        let run = |r: &KMeansRecipe, rng: &mut DpRng| {
            fit_kmeans(r, &points(), bounds(), &ctx, false, rng, Some(&ledger))
        };
        // Over budget, and plain Lloyd: refused with the generator untouched, nothing charged.
        for r in [
            recipe(Algorithm::DpLloyd, Some(2.0)),
            recipe(Algorithm::Lloyd, None),
        ] {
            let mut rng = DpRng::seeded(3);
            assert!(run(&r, &mut rng).is_err());
            assert_eq!(
                rng.next_u64(),
                DpRng::seeded(3).next_u64(),
                "no noise drawn"
            );
        }
        assert_eq!(ledger.balance().unwrap().entries, 0);
        let fitted = run(
            &recipe(Algorithm::DpLloyd, Some(0.5)),
            &mut DpRng::seeded(3),
        )
        .unwrap();
        let entries = ledger.entries().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(
            (entries[0].command.as_str(), entries[0].epsilon),
            ("kmeans", 0.5)
        );
        assert_eq!(fitted.release["ledger"]["entries"], 1);
    }
}
