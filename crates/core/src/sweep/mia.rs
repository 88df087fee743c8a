//! The mia sweep: local against central DP under attack. At each ε of the grid a model trained
//! with DP-SGD and a model trained on locally perturbed inputs (ε per record), plus one
//! non-private baseline, each audited with the loss attack and LiRA
//! ([`dpml_audit::mia_sweep`] trains and attacks). This module plans the sweep from the
//! caller's options (data, declared schema, recipe, audit sizes) and assembles its results;
//! the fronts draw the figure.

use std::path::Path;

use dpml_audit::driver::{AuditConfig, ModelReady, Spread};
use dpml_audit::mia_sweep::{CSV_HEADER, MiaPoint, MiaSweepConfig, run_mia_sweep};
use dpml_data::{Dataset, load};
use dpml_learn::dpsgd::TrainConfig;
use dpml_mechanisms::DpRng;
use serde_json::{Value, json};

use super::SweepOptions;
use super::setup::recipe_for;
use crate::error::{Error, Result};
use crate::privacy_model;
use crate::schema::{Needs, require_declared};

/// Records each target trains on when the caller does not say: small enough for a sweep of
/// many audited models, large enough for the attacks' ROC to resolve low rates.
pub const DEFAULT_TRAIN_SIZE: usize = 1000;

/// What a mia sweep runs, on what.
#[derive(Debug, Clone)]
pub struct MiaOptions {
    /// The data, the ε grid, the declarations, the recipe overrides and the seed (the
    /// experiment, repeats, k, folds and split of a sweep do not apply).
    pub sweep: SweepOptions,
    /// Records each target trains on (N; as many held-out records are the non-members and
    /// the test set); `None`: min([`DEFAULT_TRAIN_SIZE`], half the data set).
    pub train_size: Option<usize>,
    /// LiRA's reference models per point, trained with the point's mechanism and ε.
    pub reference_models: usize,
    /// Confidence of the empirical ε lower bounds.
    pub confidence: f64,
    /// Threads training models side by side (`None`: the CPU count).
    pub threads: Option<usize>,
}

/// A checked mia sweep, ready to run.
#[derive(Debug)]
pub struct MiaPlan {
    /// The audit of every point and the grid.
    pub config: MiaSweepConfig,
    /// The population that members and non-members are drawn from.
    pub data: Dataset,
    /// The training recipe (its privacy is set per point).
    pub recipe: TrainConfig,
    /// N.
    pub train_size: usize,
}

/// Loads the data and checks everything before any model trains: the classes and feature
/// bounds must be declared (local DP's sensitivity is the record's declared L1 range), the
/// recipe valid, the sizes possible.
///
/// # Errors
/// A usage error naming the bad option or the missing declaration.
pub fn plan(o: &MiaOptions) -> Result<MiaPlan> {
    let s = &o.sweep;
    if let Some(k) = s.folds {
        return Err(Error::usage(format!(
            "--folds {k} applies to --experiment dp-sgd, not mia"
        )));
    }
    let opts = s
        .declarations
        .load_options(s.data_dir.as_deref(), s.label_column.as_deref())?;
    // The audits draw members and held-out non-members from one population, as `dpml audit`.
    let sets = load(&s.dataset, &opts)?;
    let data = sets.train;
    let needs = Needs {
        classes: true,
        bounds: true,
        label_range: false,
    };
    let ranges = require_declared(&sets.schema, &data, needs)?.unwrap_or_default();
    let mut recipe = recipe_for(s, &sets.schema, &data)?;
    recipe.validate().map_err(Error::usage)?;
    let train_size = o
        .train_size
        .unwrap_or_else(|| DEFAULT_TRAIN_SIZE.min(data.n / 2));
    if s.recipe.batch_size.is_none() {
        // The default batch follows a small N; a given batch size is kept (and checked).
        recipe.batch_size = recipe.batch_size.min(train_size).max(1);
    }
    let threads = crate::audit_workflow::threads_or_cores(o.threads);
    let config = MiaSweepConfig {
        audit: AuditConfig {
            target_size: train_size,
            reference_models: o.reference_models,
            confidence: o.confidence,
            threads,
            seed: s.seed,
            ..AuditConfig::new(recipe.clone())
        },
        epsilons: s.epsilons.clone(),
        feature_ranges: ranges,
    };
    config.validate_for(&data)?;
    Ok(MiaPlan {
        config,
        data,
        recipe,
        train_size,
    })
}

impl MiaPlan {
    /// Trains and attacks every point (`ready` after each model; the models of each audit
    /// spread over `spread`'s processes). `None` on a process of a group that is not the root.
    ///
    /// # Errors
    /// As [`run_mia_sweep`].
    pub fn run(
        &self,
        rng: &mut DpRng,
        ready: &(dyn Fn(&ModelReady) + Sync),
        spread: &dyn Spread,
    ) -> Result<Option<Vec<MiaPoint>>> {
        Ok(run_mia_sweep(&self.config, &self.data, rng, ready, spread)?)
    }
}

/// Writes `results.csv`: one row per mechanism, ε and attack, the accountant's ε beside each
/// empirical lower bound.
///
/// # Errors
/// A usage error naming the file that cannot be written.
pub fn write_results_csv(points: &[MiaPoint], path: &Path) -> Result<()> {
    let lines = std::iter::once(CSV_HEADER.to_string())
        .chain(points.iter().flat_map(MiaPoint::csv_lines))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(path, format!("{lines}\n"))
        .map_err(|e| Error::usage(format!("writing {}: {e}", path.display())))
}

/// The points whose empirical lower bound exceeds the ε their mechanism guarantees (a bug in
/// dpml's training or accounting), by name.
pub fn violations(points: &[MiaPoint]) -> Vec<String> {
    points
        .iter()
        .filter(|p| !p.consistent)
        .map(|p| format!("{} at ε = {}", p.mechanism.name(), p.epsilon.unwrap_or(0.0)))
        .collect()
}

/// The sweep's JSON: the setup, every point, whether every lower bound stayed under its
/// guarantee, and `files` (the paths the caller wrote, merged in).
///
/// # Errors
/// An internal error if the recipe cannot be serialised.
pub fn result(
    o: &MiaOptions,
    plan: &MiaPlan,
    points: &[MiaPoint],
    files: Value,
    seeded: bool,
) -> Result<Value> {
    let violations = violations(points);
    let mut result = json!({
        "experiment": "mia",
        "dataset": o.sweep.dataset.name(),
        "epsilons": o.sweep.epsilons,
        "runs": points.len(),
        "train_size": plan.train_size,
        "reference_models": plan.config.audit.reference_models,
        "confidence": plan.config.audit.confidence,
        "threads": plan.config.audit.threads,
        "recipe": serde_json::to_value(&plan.recipe).map_err(Error::internal)?,
        "local_dp": "Laplace noise on every feature, ε per record (the record's L1 range as sensitivity), then non-private training",
        "points": points,
        "consistent": violations.is_empty(),
        "violations": violations,
        privacy_model::DIAGNOSTICS_NOTE_KEY: privacy_model::experiment_note(
            "the accuracies (test_accuracy: the N held-out records of each audit) and the attacks' metrics and epsilon lower bounds",
        ),
        "seeded": seeded,
    });
    if let (Value::Object(r), Value::Object(f)) = (&mut result, files) {
        r.extend(f);
    }
    Ok(result)
}
