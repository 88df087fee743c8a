//! Evaluation of a trained model: accuracy, mean cross-entropy, per-example losses (for
//! membership-inference audits) and raw logits. Evaluation reads the data in chunks, so memory
//! stays flat whatever the data set size.

use dpml_data::Dataset;
use dpml_nn::{Sequential, Tensor};
use serde::Serialize;

use super::batch::{check_fits_at, gather};
use super::error::Result;
use super::io::SavedModel;
use super::normalize::InputTransform;
use super::objective::Objective;
use crate::model_facts::ModelFacts;

/// Records per forward pass during evaluation.
const EVAL_CHUNK: usize = 256;

/// The result of evaluating a model on a data set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Eval {
    /// Fraction of records whose largest logit is their label (regression: whose prediction
    /// is within 0.5 of the label value).
    pub accuracy: f64,
    /// Mean softmax cross-entropy (regression: the training loss, MSE on the scaled targets).
    pub loss: f64,
    /// Regression: mean squared error in the label's units (`None` for classification).
    pub mse: Option<f64>,
    /// Regression: mean absolute error in the label's units.
    pub mae: Option<f64>,
    /// Number of records.
    pub n: usize,
    /// Each record's training loss, in data order.
    #[serde(skip)]
    pub per_example_loss: Vec<f32>,
}

/// Runs `model` from layer `start` over `data` (records transformed by `input`, the transform
/// the model was trained with; for `start` > 0, records already mapped through the first
/// `start` parameter-free layers) in chunks, calling `f(logits, labels)` for each chunk.
fn for_each_chunk(
    model: &mut Sequential,
    start_layer: usize,
    input: &InputTransform,
    data: &Dataset,
    mut f: impl FnMut(&Tensor, &[usize]) -> Result<()>,
) -> Result<()> {
    check_fits_at(model, start_layer, data)?;
    let (mut x, mut labels) = (Tensor::default(), Vec::new());
    for start in (0..data.n).step_by(EVAL_CHUNK) {
        let end = (start + EVAL_CHUNK).min(data.n);
        gather(data, end - start, |j| start + j, input, &mut x, &mut labels);
        let logits = model.forward_from(start_layer, &x)?;
        f(logits, &labels)?;
    }
    Ok(())
}

/// Checks that a saved model answers for `data`: the record shape, and exactly the data's
/// classes (a classifier) or the label range it was trained on (a regression model, read from
/// its `facts`). Training may give a model more outputs than classes, but a saved model with
/// a different class count was trained on other data: its accuracy here would be meaningless.
///
/// # Errors
/// [`super::DpSgdError::Data`] naming the model's and the data's shapes or class counts.
pub fn check_saved_model_fits(
    model: &Sequential,
    facts: Option<&ModelFacts>,
    data: &Dataset,
) -> Result<()> {
    check_fits_at(model, 0, data)?;
    let outputs: usize = model.output_shape().iter().product();
    let name = &model.spec().name;
    match facts.and_then(|f| f.regression.as_ref()) {
        Some(_) if outputs != 1 => Err(super::error::data_err(format!(
            "model {name:?} is recorded as a regression model but has {outputs} outputs"
        ))),
        Some(r) if r.label_values != data.n_classes => Err(super::error::data_err(format!(
            "regression model {name:?} was trained on {} label values, data set {:?} declares {}",
            r.label_values, data.name, data.n_classes
        ))),
        Some(_) => Ok(()),
        None if outputs != data.n_classes => Err(super::error::data_err(format!(
            "model {name:?} has {outputs} classes, data set {:?} has {} classes",
            data.name, data.n_classes
        ))),
        // The classes in another order would swap what each output means, silently.
        None => match facts.and_then(|f| f.classes.as_ref()) {
            Some(classes) if *classes != data.class_names => Err(super::error::data_err(format!(
                "model {name:?} was trained on classes {classes:?}, data set {:?} has \
                     {:?}: declare them in the model's order",
                data.name, data.class_names
            ))),
            _ => Ok(()),
        },
    }
}

/// Evaluates a saved model on `data` for the task it was trained for (its facts): accuracy and
/// loss; for regression also MSE and MAE in the label's units.
///
/// # Errors
/// As [`check_saved_model_fits`] and [`evaluate`].
pub fn evaluate_saved(saved: &mut SavedModel, data: &Dataset) -> Result<Eval> {
    check_saved_model_fits(&saved.model, saved.facts.as_ref(), data)?;
    let objective = Objective::of_saved(saved.facts.as_ref());
    evaluate_for(objective, &mut saved.model, 0, &saved.input, data)
}

/// Accuracy, mean loss and per-example losses of `model` on `data`.
///
/// # Errors
/// [`super::DpSgdError::Data`] when the records do not fit the model (shape or classes) or
/// the data set is malformed; [`super::DpSgdError::Nn`] from the engine.
pub fn evaluate(model: &mut Sequential, input: &InputTransform, data: &Dataset) -> Result<Eval> {
    evaluate_from(model, 0, input, data)
}

/// As [`evaluate`] on records that enter the model at layer `start_layer` (records already
/// mapped through its fixed prefix, see `super::batch::map_through_prefix`).
pub(crate) fn evaluate_from(
    model: &mut Sequential,
    start_layer: usize,
    input: &InputTransform,
    data: &Dataset,
) -> Result<Eval> {
    evaluate_for(Objective::Classification, model, start_layer, input, data)
}

/// As [`evaluate_from`] for a model trained for `objective`.
pub(crate) fn evaluate_for(
    objective: Objective,
    model: &mut Sequential,
    start_layer: usize,
    input: &InputTransform,
    data: &Dataset,
) -> Result<Eval> {
    let mut correct = 0usize;
    let mut per_example_loss = Vec::with_capacity(data.n);
    let (mut losses, mut targets) = (Vec::new(), Tensor::default());
    let (mut se, mut ae) = (0.0, 0.0);
    for_each_chunk(model, start_layer, input, data, |out, labels| {
        correct += objective.loss(out, labels, None, &mut losses, &mut targets)?;
        per_example_loss.extend_from_slice(&losses);
        for e in objective.errors(out, labels) {
            se += e * e;
            ae += e.abs();
        }
        Ok(())
    })?;
    let n = data.n as f64;
    let loss = per_example_loss.iter().map(|&l| f64::from(l)).sum::<f64>() / n;
    let regression = matches!(objective, Objective::Regression { .. });
    Ok(Eval {
        accuracy: correct as f64 / n,
        loss,
        mse: regression.then_some(se / n),
        mae: regression.then_some(ae / n),
        n: data.n,
        per_example_loss,
    })
}

/// The logits of every record, as a tensor `[n, classes]` in data order.
///
/// # Errors
/// As [`evaluate`].
pub fn predict_logits(
    model: &mut Sequential,
    input: &InputTransform,
    data: &Dataset,
) -> Result<Tensor> {
    let k: usize = model.output_shape().iter().product();
    let mut out = Vec::with_capacity(data.n * k);
    for_each_chunk(model, 0, input, data, |logits, _| {
        out.extend_from_slice(logits.data());
        Ok(())
    })?;
    Ok(Tensor::from_vec(&[data.n, k], out)?)
}
