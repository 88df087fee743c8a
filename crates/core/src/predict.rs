//! Answering classification queries with output perturbation. Laplace noise of scale 2/ε goes
//! on each predicted probability vector (its L1 sensitivity is 2) and the noisy argmax is
//! released; every answered query costs ε, and with a ledger the total is recorded durably
//! BEFORE any answer is computed (over budget: nothing is released).

use std::path::PathBuf;

use crate::budget::{self, Balance, Charge, Ledger};
use dpml_data::{Dataset, Source, load};
use dpml_learn::dpsgd::{self, predict_logits};
use dpml_learn::perturbation::{OutputPerturbation, softmax_rows};
use dpml_mechanisms::DpRng;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};
use crate::schema::Declarations;

/// The queries.
#[derive(Debug, Clone)]
pub struct PredictOptions {
    /// A model file saved by a training run.
    pub model_file: PathBuf,
    /// The query records' source (its test split, else all its records).
    pub dataset: Source,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// What is declared about the data.
    pub declarations: Declarations,
    /// ε of each answered query.
    pub epsilon: f64,
    /// Answer only the first N records.
    pub queries: Option<u64>,
}

/// Answers the queries of `o`: the model's probability vectors on the query records, Laplace
/// noise on each, the noisy argmax released; with a `ledger`, the total ε is recorded durably
/// BEFORE any answer is computed (over budget: nothing is released), and the ledger's balance
/// after it comes back beside the release.
///
/// # Errors
/// Usage errors for a model file that does not load, a regression model, a model that does not
/// fit the data; the ledger's refusals and failures.
pub fn predict(
    a: &PredictOptions,
    rng: &mut DpRng,
    ledger: Option<&Ledger>,
) -> Result<(Value, Option<Balance>)> {
    let dpsgd::SavedModel {
        mut model,
        input,
        facts,
    } = dpsgd::load_saved(&a.model_file).map_err(Error::usage)?;
    if let Some(f) = facts.as_ref().filter(|f| f.regression.is_some()) {
        return Err(Error::usage(format!(
            "{}: predict answers classification queries, this is a {} model",
            a.model_file.display(),
            f.task.name()
        )));
    }
    let opts = a
        .declarations
        .load_options(a.data_dir.as_deref(), a.label_column.as_deref())?;
    let splits = load(&a.dataset, &opts)?;
    let (data, split) = match splits.test {
        Some(t) => (t, "test"),
        None => (splits.train, "all"),
    };
    let data = match a.queries {
        Some(q) if (q as usize) < data.n => data.subset(&(0..q as usize).collect::<Vec<_>>()),
        _ => data,
    };
    dpsgd::check_saved_model_fits(&model, facts.as_ref(), &data)?;
    let probs = softmax_rows(&predict_logits(&mut model, &input, &data).map_err(Error::usage)?);
    let (fields, balance) = answer(&probs, &data, a.epsilon, ledger, rng)?;
    let model = PrivacyModel::new(neighbouring::MODEL_TRAINING, &[public::QUERIES]);
    let mut release = Release::from_map(fields, &model);
    release
        // The noisy answers scored against the query records' true labels, without noise.
        .diagnose(&["test_accuracy"])
        .insert("dataset", json!(a.dataset.name()))
        .insert("split", json!(split))
        .insert("model_file", json!(a.model_file.display().to_string()));
    Ok((release.into_value(), balance))
}

/// Checks the model's outputs against the data, THEN charges `ledger` (if any) for every
/// query, THEN draws the noisy labels and scores them. A model that does not fit the data
/// (another class count, non-probability outputs) or a spend over budget returns an error
/// before anything is charged or drawn: nothing is spent on answers that cannot be given.
pub fn answer(
    probs: &[f64],
    data: &Dataset,
    epsilon: f64,
    ledger: Option<&Ledger>,
    rng: &mut DpRng,
) -> Result<(Map<String, Value>, Option<Balance>)> {
    let k = probs.len().checked_div(data.n).unwrap_or(data.n_classes);
    if k != data.n_classes {
        return Err(Error::usage(format!(
            "the model outputs {k} classes but {} has {} classes; nothing was charged",
            data.name, data.n_classes
        )));
    }
    let op = OutputPerturbation::new(epsilon, k).map_err(Error::usage)?;
    op.check_rows(probs).map_err(|e| {
        Error::usage(format!(
            "the model's outputs on {} are not probabilities ({e}); nothing was charged",
            data.name
        ))
    })?;
    let queries = data.n as u64;
    let epsilon_total = op.epsilon_for(queries);
    let charge = Charge::of(
        "predict",
        data.name.clone(),
        op.event_for(queries),
        epsilon_total,
        0.0,
    )
    .labelled(format!(
        "{queries} queries with output perturbation, epsilon {epsilon} each"
    ));
    let balance = budget::charge(ledger, &charge)?;
    let labels = op.release_labels(rng, probs).map_err(Error::usage)?;
    let correct = labels
        .iter()
        .zip(&data.y)
        .filter(|&(&p, &y)| p == y as usize)
        .count();
    let mut obj = Map::new();
    obj.insert(
        "test_accuracy".into(),
        json!(if queries == 0 {
            f64::NAN
        } else {
            correct as f64 / queries as f64
        }),
    );
    obj.insert("epsilon".into(), json!(epsilon));
    obj.insert("queries".into(), json!(queries));
    obj.insert("epsilon_total".into(), json!(epsilon_total));
    obj.insert("sensitivity".into(), json!(2.0));
    obj.insert(
        "sensitivity_note".into(),
        json!("L1 sensitivity of a probability vector is 2 (the simplex's L1 diameter); each answer is the argmax of the noisy vector"),
    );
    obj.insert("noise_scale".into(), json!(op.scale()));
    obj.insert("predictions".into(), json!(labels));
    obj.insert("seeded".into(), json!(rng.is_seeded()));
    Ok((obj, balance))
}
