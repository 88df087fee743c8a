//! Evaluating a saved model, and the list of named recipes.

use std::path::PathBuf;

use dpml_data::{Source, SplitBasis};
use dpml_learn::dpsgd;
use serde_json::{Value, json};

use super::split::{SplitOptions, load_split};
use crate::error::{Error, Result};
use crate::model_file::facts_json;
use crate::privacy_model;
use crate::schema::{Declarations, Needs};

/// What to evaluate on what.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// A model file saved by a training run.
    pub model_file: PathBuf,
    /// The data set whose test split it is evaluated on.
    pub dataset: Source,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// The training run's split (its key is needed for a source without a test split; by
    /// default, the split the model file records).
    pub split: SplitOptions,
    /// What is declared about the data.
    pub declarations: Declarations,
}

/// Evaluates the model of `o` on its data set's test split: the source's own, else the split
/// given, else the one the model file records (the records its training run held out).
/// Evaluation releases nothing: every figure is a diagnostic; the model's own guarantee is
/// what its file records.
///
/// # Errors
/// Usage errors for a file or data set that does not load, or a model that does not fit it.
pub fn eval(o: &EvalOptions) -> Result<Value> {
    let opts = o
        .declarations
        .load_options(o.data_dir.as_deref(), o.label_column.as_deref())?;
    let mut saved = dpsgd::load_saved(&o.model_file)?;
    let recorded = saved.facts.as_ref().and_then(|f| f.split.as_ref());
    let split = match (o.split.key, recorded) {
        (None, Some(s)) => SplitOptions {
            test_fraction: s.test_fraction,
            key: Some(s.key.parse().map_err(|e: dpml_data::DataError| {
                Error::usage(format!(
                    "{}: the split key it records does not parse: {e}",
                    o.model_file.display()
                ))
            })?),
        },
        _ => o.split,
    };
    // The training run's split hashed what its guarantee leaves fixed: the same part here
    // (without a key, the source's own test split is used whatever the basis).
    let basis = saved
        .facts
        .as_ref()
        .map_or(SplitBasis::Record, |f| f.guarantee.split_basis());
    let test = load_split(
        &o.dataset,
        &opts,
        Needs::default(),
        split.test_fraction,
        split.key,
        basis,
    )?
    .test;
    let e = dpsgd::evaluate_saved(&mut saved, &test)?;
    let mut diagnostics =
        json!({"test_accuracy": e.accuracy, "test_loss": e.loss, "test_size": e.n});
    if let (Some(mse), Some(mae)) = (e.mse, e.mae) {
        diagnostics["test_mse"] = json!(mse);
        diagnostics["test_mae"] = json!(mae);
    }
    Ok(json!({
        "model_file": o.model_file,
        "model_privacy": facts_json(saved.facts.as_ref())?,
        "dataset": o.dataset.name(),
        "split_key": split.key.map(|k| k.to_string()),
        privacy_model::DIAGNOSTICS_NOTE_KEY: privacy_model::experiment_note("every figure under diagnostics"),
        privacy_model::DIAGNOSTICS_KEY: diagnostics,
    }))
}

/// The named training recipes, each with the command that trains it, its model, its target
/// ε (`null` when non-private or calibrated from a fixed σ), and the test accuracy and wall
/// time of its `--seed 1` run (release build, 2 cores).
pub fn presets() -> Value {
    let list: Vec<Value> = dpsgd::presets()
        .into_iter()
        .map(|p| {
            let epsilon = match p.config.privacy {
                dpsgd::Privacy::TargetEpsilon(e) => Some(e),
                _ => None,
            };
            json!({"name": p.name, "description": p.description, "dataset": p.dataset,
                   "model": p.config.model, "epsilon": epsilon,
                   "expected_accuracy": p.expected_accuracy, "time": p.wall_time,
                   "command": format!("dpml train --preset {}", p.name), "config": p.config})
        })
        .collect();
    json!({ "presets": list })
}
