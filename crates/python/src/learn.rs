//! DP-SGD training and prediction, and DP k-means, over numpy arrays. The Python estimators
//! (python/dpml/learn.py) hold the scikit-learn conventions; the training is dpml-learn's.

use dpml_data::Dataset;
use dpml_learn::dpsgd::{self, InputTransform, Normalization, TrainConfig};
use dpml_learn::kmeans::{self, Algorithm, Bounds, KMeansParams};
use dpml_learn::label_dp::{self, LabelDpConfig, RrWithPrior, TopKRule};
use dpml_nn::Sequential;
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use serde_json::Value;

use crate::guard;

/// A trained network and the input transform it was trained with.
#[pyclass(name = "TrainedModel")]
pub struct TrainedModel {
    model: Sequential,
    input: InputTransform,
    classes: usize,
}

impl TrainedModel {
    /// A network for `classes` classes that reads records through `input`.
    pub(crate) fn new(model: Sequential, input: InputTransform, classes: usize) -> Self {
        Self {
            model,
            input,
            classes,
        }
    }
}

pub(crate) fn dataset(x: &PyReadonlyArray2<'_, f64>, y: Vec<u32>, classes: usize) -> Dataset {
    let x = x.as_array();
    let (n, d) = (x.nrows(), x.ncols());
    Dataset {
        name: "python".into(),
        x: x.iter().map(|&v| v as f32).collect(),
        n,
        record_shape: vec![d],
        y,
        n_classes: classes,
        feature_names: (0..d).map(|j| format!("x{j}")).collect(),
        class_names: (0..classes).map(|c| c.to_string()).collect(),
        feature_range: None,
    }
}

/// The recipe: `base` (the CLI's recipe for the task) with the given fields (the recipe's JSON
/// names) replaced, and features min-max scaled from the declared per-feature `ranges`.
pub(crate) fn recipe(
    base: TrainConfig,
    overrides_json: &str,
    ranges: &[(f64, f64)],
) -> Result<TrainConfig, String> {
    let mut base = serde_json::to_value(base).map_err(|e| e.to_string())?;
    let overrides: Value =
        serde_json::from_str(overrides_json).map_err(|e| format!("invalid recipe: {e}"))?;
    if let (Value::Object(b), Value::Object(o)) = (&mut base, overrides) {
        b.extend(o);
    }
    let mut cfg: TrainConfig =
        serde_json::from_value(base).map_err(|e| format!("invalid recipe: {e}"))?;
    cfg.normalize = Normalization::feature_ranges(ranges);
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// The declared per-feature ranges, one pair per column of `x`.
pub(crate) fn check_ranges(x: &PyReadonlyArray2<'_, f64>, ranges: &[(f64, f64)]) -> PyResult<()> {
    let d = x.as_array().ncols();
    if ranges.len() == d {
        return Ok(());
    }
    Err(value_error(format!(
        "bounds must give one (low, high) pair per feature ({d}), got {}",
        ranges.len()
    )))
}

/// Trains with DP-SGD; returns the model and the training report (JSON, the CLI's names).
#[pyfunction]
#[pyo3(signature = (x, y, classes, ranges, overrides_json, seed=None))]
fn dpsgd_fit(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    y: PyReadonlyArray1<'_, i64>,
    classes: usize,
    ranges: Vec<(f64, f64)>,
    overrides_json: &str,
    seed: Option<u64>,
) -> PyResult<(TrainedModel, String)> {
    let mut rng = guard::rng(seed)?;
    check_ranges(&x, &ranges)?;
    let labels = labels(&y, classes)?;
    let data = dataset(&x, labels, classes);
    let cfg = recipe(dpsgd::tabular_recipe(), overrides_json, &ranges).map_err(value_error)?;
    let outcome = guard::run(py, || {
        dpsgd::train(&cfg, &data, None, &mut rng, &mut |_: &dpsgd::Progress| {})
    })?;
    fitted(
        TrainedModel::new(outcome.model, outcome.input, classes),
        &outcome.report,
        &cfg,
        &outcome.event,
    )
}

/// Label DP (`dpml label-dp`): privatises every label once with `mechanism` at `epsilon`
/// (ε-label-DP per record; the features are not protected) and trains the network of
/// `label_dp`'s default recipe, with the given recipe fields replaced, on the privatised
/// labels. Returns the model and the report (JSON, the CLI's names; no test fields).
#[pyfunction]
#[pyo3(signature = (x, y, classes, ranges, mechanism, epsilon, overrides_json, stages=None, seed=None))]
#[allow(clippy::too_many_arguments)]
fn label_dp_fit(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    y: PyReadonlyArray1<'_, i64>,
    classes: usize,
    ranges: Vec<(f64, f64)>,
    mechanism: &str,
    epsilon: f64,
    overrides_json: &str,
    stages: Option<usize>,
    seed: Option<u64>,
) -> PyResult<(TrainedModel, String)> {
    let mut rng = guard::rng(seed)?;
    check_ranges(&x, &ranges)?;
    let labels = labels(&y, classes)?;
    let data = dataset(&x, labels, classes);
    let base = label_dp::default_training(Normalization::None, data.n);
    let cfg = LabelDpConfig {
        task: label_dp::Task::Classification,
        mechanism: mechanism.parse().map_err(value_error)?,
        postprocess: None,
        epsilon,
        stages,
        prior_temperature: None,
        top_k_rule: None,
        training: recipe(base, overrides_json, &ranges).map_err(value_error)?,
    };
    let outcome = guard::run(py, || label_dp::train(&cfg, &data, &mut rng, &mut |_| {}))?;
    fitted(
        TrainedModel::new(outcome.model, outcome.input, classes),
        &outcome.report,
        &cfg.training,
        &outcome.event,
    )
}

/// A fitted model with its report (JSON, the CLI's names) completed by the recipe it trained
/// with and its privacy event.
fn fitted(
    model: TrainedModel,
    report: &impl serde::Serialize,
    recipe: &TrainConfig,
    event: &impl serde::Serialize,
) -> PyResult<(TrainedModel, String)> {
    let mut report = serde_json::to_value(report).map_err(value_error)?;
    report["recipe"] = serde_json::to_value(recipe).map_err(value_error)?;
    report["event"] = serde_json::to_value(event).map_err(value_error)?;
    Ok((model, report.to_string()))
}

/// RR-with-prior on its own (Ghazi et al. 2021): each label `y[i]` is released by randomized
/// response over the candidate classes chosen from its public `priors[i]` (ε-label-DP per
/// record; the priors must not depend on the private labels). Returns the released class of
/// each record, each record's label likelihood `[n, classes]` (the probability of its output
/// under every possible true label, what a learner needs) and the event (JSON).
#[pyfunction]
#[pyo3(signature = (y, priors, epsilon, rule="expected-accuracy", seed=None))]
#[allow(clippy::type_complexity)]
fn rr_with_prior<'py>(
    py: Python<'py>,
    y: PyReadonlyArray1<'py, i64>,
    priors: PyReadonlyArray2<'py, f64>,
    epsilon: f64,
    rule: &str,
    seed: Option<u64>,
) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray2<f32>>, String)> {
    let mut rng = guard::rng(seed)?;
    let priors = priors.as_array();
    let (n, k) = (priors.nrows(), priors.ncols());
    if y.as_array().len() != n {
        return Err(value_error(format!(
            "priors must have one row per label ({}), got {n}",
            y.as_array().len()
        )));
    }
    let labels = labels(&y, k)?;
    let rule: TopKRule = rule.parse().map_err(value_error)?;
    let rr = RrWithPrior::new(epsilon, k)
        .map_err(value_error)?
        .with_rule(rule);
    let prior_rows: Vec<f64> = priors.iter().copied().collect();
    let (released, channels) = guard::run(py, || {
        let mut released = Vec::with_capacity(n);
        let mut channels = Vec::with_capacity(n * k);
        let mut row = Vec::with_capacity(k);
        for (label, prior) in labels.iter().zip(prior_rows.chunks_exact(k)) {
            let plan = rr.plan(prior)?;
            released.push(i64::from(rr.release(&mut rng, *label, &plan, &mut row)?));
            channels.extend_from_slice(&row);
        }
        Ok::<_, label_dp::LabelDpError>((released, channels))
    })?;
    let channels = Array2::from_shape_vec((n, k), channels).map_err(value_error)?;
    let event = guard::json(&rr.event()).map_err(value_error)?;
    Ok((released.into_pyarray(py), channels.into_pyarray(py), event))
}

pub(crate) fn value_error(e: impl std::fmt::Display) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(e.to_string())
}

pub(crate) fn labels(y: &PyReadonlyArray1<'_, i64>, classes: usize) -> PyResult<Vec<u32>> {
    y.as_array()
        .iter()
        .map(|&v| {
            u32::try_from(v)
                .ok()
                .filter(|&c| (c as usize) < classes)
                .ok_or_else(|| value_error(format!("labels must be in 0..{classes}, got {v}")))
        })
        .collect()
}

#[pymethods]
impl TrainedModel {
    /// Logits `[n, classes]` of the records `x` (post-processing: no privacy cost).
    fn predict_logits<'py>(
        &mut self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let n = x.as_array().nrows();
        let data = dataset(&x, vec![0; n], self.classes);
        let logits =
            dpsgd::predict_logits(&mut self.model, &self.input, &data).map_err(value_error)?;
        let k = logits.data().len() / n.max(1);
        let arr = Array2::from_shape_vec((n, k), logits.data().to_vec()).map_err(value_error)?;
        Ok(arr.into_pyarray(py))
    }
}

/// DP k-means (DP-Lloyd) of the rows of `x` inside declared per-feature `ranges`: the
/// centroids `[k, d]` and the fit's report (JSON).
#[pyfunction]
#[pyo3(signature = (x, k, epsilon, ranges, iterations=None, seed=None))]
fn kmeans_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    k: usize,
    epsilon: Option<f64>,
    ranges: Vec<(f64, f64)>,
    iterations: Option<usize>,
    seed: Option<u64>,
) -> PyResult<(Bound<'py, PyArray2<f64>>, String)> {
    let mut rng = guard::rng(seed)?;
    let view = x.as_array();
    let (n, d) = (view.nrows(), view.ncols());
    let points: Vec<f64> = view.iter().copied().collect();
    let (centroids, json) = guard::run(py, || {
        let bounds = Bounds::from_pairs(&ranges).map_err(|e| e.to_string())?;
        let algorithm = if epsilon.is_some() {
            Algorithm::DpLloyd
        } else {
            Algorithm::Lloyd
        };
        let mut params = KMeansParams::new(k, algorithm, bounds);
        params.epsilon = epsilon;
        params.iterations = iterations;
        let fit = kmeans::fit(&params, &points, n, d, &mut rng).map_err(|e| e.to_string())?;
        let mut report = serde_json::to_value(&fit).map_err(|e| e.to_string())?;
        if let Value::Object(m) = &mut report {
            m.remove("assignments");
            m.remove("centroids");
        }
        Ok::<_, String>((fit.centroids, report.to_string()))
    })?;
    let arr = Array2::from_shape_vec((k, d), centroids).map_err(value_error)?;
    Ok((arr.into_pyarray(py), json))
}

/// Registers the learning functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(dpsgd_fit, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_fit, m)?)?;
    m.add_function(wrap_pyfunction!(label_dp_fit, m)?)?;
    m.add_function(wrap_pyfunction!(rr_with_prior, m)?)?;
    m.add_class::<TrainedModel>()?;
    Ok(())
}
