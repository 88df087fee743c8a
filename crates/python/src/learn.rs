//! DP-SGD, label DP and k-means over numpy arrays: each converts the arrays and the keywords
//! into `dpml-core`'s option structs and calls the core workflow `dpml train`, `dpml label-dp`
//! and `dpml kmeans` call, so the recipes, defaults and release fields are the command line's.
//! The Python estimators (python/dpml/learn.py) hold the scikit-learn conventions.

use std::path::PathBuf;

use dpml_core::data::{Dataset, FeatureBounds, Schema};
use dpml_core::kmeans::{KMeansRecipe, fit_kmeans};
use dpml_core::label_dp::{LabelDpRecipe, fit_label_dp};
use dpml_core::learn::dpsgd::{self, InputTransform, Normalization};
use dpml_core::learn::kmeans::{Algorithm, Bounds};
use dpml_core::learn::model_facts::ModelFacts;
use dpml_core::nn::Sequential;
use dpml_core::observe::Silent;
use dpml_core::train::fit::{Fitted, RunContext, save_bytes};
use dpml_core::train::{FitOptions, MEMORY_DATASET, RecipeOptions};
use dpml_core::tune::KeptModel;
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde_json::{Value, json};

use crate::guard::{self, value_error};
use crate::ledger::{PyLedger, inner};

/// A trained network, the input transform it was trained with, and the privacy facts its
/// file records (`None` for a file written without them).
#[pyclass(name = "TrainedModel", module = "dpml._native")]
pub struct TrainedModel {
    model: Sequential,
    input: InputTransform,
    facts: Option<ModelFacts>,
}

impl TrainedModel {
    fn from_fitted(f: Fitted) -> Self {
        Self {
            model: f.model,
            input: f.input,
            facts: Some(f.facts),
        }
    }

    /// The model a private search kept.
    pub(crate) fn from_kept(k: KeptModel) -> Self {
        Self {
            model: k.model,
            input: k.input,
            facts: Some(k.facts),
        }
    }

    fn from_saved(s: dpsgd::SavedModel) -> Self {
        Self {
            model: s.model,
            input: s.input,
            facts: s.facts,
        }
    }

    fn bytes(&self) -> PyResult<Vec<u8>> {
        match &self.facts {
            Some(f) => save_bytes(&self.model, &self.input, f).map_err(value_error),
            None => dpsgd::io::to_bytes(&self.model, &self.input).map_err(value_error),
        }
    }
}

#[pymethods]
impl TrainedModel {
    /// Logits `[n, outputs]` of the records `x` (post-processing: no privacy cost).
    fn predict_logits<'py>(
        &mut self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let n = x.as_array().nrows();
        let outputs = self.outputs();
        let data = dataset(
            &x,
            vec![0; n],
            &(0..outputs).map(|c| c.to_string()).collect::<Vec<_>>(),
        );
        let logits =
            dpsgd::predict_logits(&mut self.model, &self.input, &data).map_err(value_error)?;
        let k = logits.data().len() / n.max(1);
        let arr = Array2::from_shape_vec((n, k), logits.data().to_vec()).map_err(value_error)?;
        Ok(arr.into_pyarray(py))
    }

    /// The number of inputs per record.
    #[getter]
    fn n_features(&self) -> usize {
        self.model.input_shape().iter().product()
    }

    /// The number of outputs (classes).
    #[getter]
    fn outputs(&self) -> usize {
        self.model.output_shape().iter().product()
    }

    /// The privacy facts as JSON (`dpml inspect`'s `"privacy"`), `null` when unknown.
    fn facts_json(&self) -> PyResult<String> {
        guard::json(&self.facts).map_err(value_error)
    }

    /// The model file's bytes: what `dpml train --save-model` writes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &self.bytes()?))
    }

    /// The model in a model file's bytes (validated as `dpml inspect` reads a file).
    #[staticmethod]
    fn from_bytes(bytes: &[u8]) -> PyResult<Self> {
        dpsgd::io::from_bytes_with_facts(bytes)
            .map(Self::from_saved)
            .map_err(value_error)
    }

    /// Writes the model file to `path`.
    fn save(&self, path: PathBuf) -> PyResult<()> {
        // As `--save-model` is: never over a folder, a pipe, a budget ledger or its key.
        dpml_core::output_path::check_writable("path", &path).map_err(value_error)?;
        std::fs::write(&path, self.bytes()?)
            .map_err(|e| value_error(format!("{}: {e}", path.display())))
    }

    /// Reads a model file written by `dpml train --save-model` (or [`TrainedModel::save`]).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        dpsgd::load_saved(&path)
            .map(Self::from_saved)
            .map_err(value_error)
    }
}

/// The records `x` labelled `y` (each an index into `classes`) as a data set.
pub(crate) fn labelled(
    x: &PyReadonlyArray2<'_, f64>,
    y: &PyReadonlyArray1<'_, i64>,
    classes: &[String],
) -> PyResult<Dataset> {
    Ok(dataset(x, labels(y, classes.len())?, classes))
}

/// Records in memory as a data set named [`MEMORY_DATASET`], labels indexing `classes`.
fn dataset(x: &PyReadonlyArray2<'_, f64>, y: Vec<u32>, classes: &[String]) -> Dataset {
    let x = x.as_array();
    let (n, d) = (x.nrows(), x.ncols());
    Dataset {
        name: MEMORY_DATASET.into(),
        x: x.iter().map(|&v| v as f32).collect(),
        n,
        record_shape: vec![d],
        y,
        n_classes: classes.len(),
        feature_names: (0..d).map(|j| format!("x{j}")).collect(),
        class_names: classes.to_vec(),
        feature_range: None,
    }
}

/// The label indices of `y`, each in `0..classes`.
fn labels(y: &PyReadonlyArray1<'_, i64>, classes: usize) -> PyResult<Vec<u32>> {
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

/// The declared per-feature `(low, high)` pairs as the library's bounds.
fn feature_bounds(ranges: Option<Vec<(f64, f64)>>) -> Option<FeatureBounds> {
    ranges.map(FeatureBounds::PerFeature)
}

/// The model, the release (JSON, the command line's fields) and the per-epoch log (JSON).
type FitResult = (TrainedModel, String, String);

fn fit_result(f: Fitted) -> PyResult<FitResult> {
    let release = f.release.to_string();
    let log = guard::json(&f.epoch_log).map_err(value_error)?;
    Ok((TrainedModel::from_fitted(f), release, log))
}

/// The DP-SGD recipe of the network estimators, as one dict of their keywords (every key
/// present; `None`: the table recipe's value).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct RecipeKeywords {
    model: Option<String>,
    hidden: Option<Vec<usize>>,
    arch_json: Option<String>,
    epsilon: Option<f64>,
    noise_multiplier: Option<f64>,
    delta: Option<f64>,
    epochs: Option<f64>,
    batch_size: Option<usize>,
    max_grad_norm: Option<f64>,
    learning_rate: Option<f64>,
}

impl RecipeKeywords {
    /// What `dpml train` on a table would be asked with these keywords, the declared `bounds`
    /// and `classes`.
    pub(crate) fn fit_options(
        self,
        bounds: Option<Vec<(f64, f64)>>,
        classes: Vec<String>,
    ) -> PyResult<FitOptions> {
        let arch_spec = self
            .arch_json
            .map(|text| dpml_core::arch::arch_from_json(&text, "arch"))
            .transpose()
            .map_err(value_error)?;
        Ok(FitOptions {
            recipe: RecipeOptions {
                model: self.model,
                hidden: self.hidden,
                arch_spec,
                epsilon: self.epsilon,
                noise_multiplier: self.noise_multiplier,
                delta: self.delta,
                epochs: self.epochs,
                batch_size: self.batch_size,
                max_grad_norm: self.max_grad_norm,
                lr: self.learning_rate,
                ..RecipeOptions::default()
            },
            bounds: feature_bounds(bounds),
            classes,
        })
    }
}

/// Trains a DP-SGD classifier with `dpml train`'s table recipe, overridden by the `recipe`
/// keywords given (`None`: the recipe's).
#[pyfunction]
#[pyo3(signature = (x, y, classes, bounds, recipe, *, seed=None, ledger=None))]
#[allow(clippy::too_many_arguments)]
fn dpsgd_fit(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    y: PyReadonlyArray1<'_, i64>,
    classes: Vec<String>,
    bounds: Option<Vec<(f64, f64)>>,
    recipe: RecipeKeywords,
    seed: Option<u64>,
    ledger: Option<PyRef<'_, PyLedger>>,
) -> PyResult<FitResult> {
    let mut rng = guard::rng(seed)?;
    let data = labelled(&x, &y, &classes)?;
    let ledger = inner(&ledger, seed)?;
    let options = recipe.fit_options(bounds, classes)?;
    let fitted = guard::run(py, || {
        dpml_core::train::fit(&options, &data, &mut rng, &mut Silent, ledger)
    })?;
    fit_result(fitted)
}

/// Label DP (`dpml label-dp`): privatises every label once and trains on the privatised
/// labels, with `dpml label-dp`'s recipe overridden by the keywords given.
#[pyfunction]
#[pyo3(signature = (x, y, classes, bounds, *, mechanism=None, epsilon=None, stages=None, top_k_rule=None, hidden=None, epochs=None, batch_size=None, learning_rate=None, seed=None, ledger=None))]
#[allow(clippy::too_many_arguments)]
fn label_dp_fit(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    y: PyReadonlyArray1<'_, i64>,
    classes: Vec<String>,
    bounds: Option<Vec<(f64, f64)>>,
    mechanism: Option<&str>,
    epsilon: Option<f64>,
    stages: Option<usize>,
    top_k_rule: Option<&str>,
    hidden: Option<Vec<usize>>,
    epochs: Option<f64>,
    batch_size: Option<u64>,
    learning_rate: Option<f64>,
    seed: Option<u64>,
    ledger: Option<PyRef<'_, PyLedger>>,
) -> PyResult<FitResult> {
    let mut rng = guard::rng(seed)?;
    let data = labelled(&x, &y, &classes)?;
    let ledger = inner(&ledger, seed)?;
    let defaults = LabelDpRecipe::default();
    let recipe = LabelDpRecipe {
        mechanism: match mechanism {
            Some(m) => m.parse().map_err(value_error)?,
            None => defaults.mechanism,
        },
        epsilon: epsilon.unwrap_or(defaults.epsilon),
        stages,
        top_k_rule: top_k_rule
            .map(str::parse)
            .transpose()
            .map_err(value_error)?,
        hidden,
        epochs,
        batch_size,
        lr: learning_rate,
        ..defaults
    };
    let mut schema = Schema::default()
        .with_classes(classes)
        .map_err(value_error)?;
    let normalize = match feature_bounds(bounds) {
        Some(b) => {
            schema = schema.with_bounds(b).map_err(value_error)?;
            let ranges = schema
                .require_bounds(MEMORY_DATASET, data.n_features())
                .map_err(value_error)?;
            Normalization::feature_ranges(&ranges)
        }
        None => Normalization::None,
    };
    let ctx = RunContext::in_memory(&schema);
    let fitted = guard::run(py, || {
        fit_label_dp(
            &recipe,
            &data,
            None,
            normalize,
            &ctx,
            &mut rng,
            &mut Silent,
            ledger,
        )
    })?;
    fit_result(fitted)
}

/// RR-with-prior on its own (Ghazi et al. 2021): the released class of each record, each
/// record's label likelihood `[n, classes]` and the event (JSON).
#[pyfunction]
#[pyo3(signature = (y, priors, epsilon, rule=None, seed=None, ledger=None))]
#[allow(clippy::type_complexity)]
fn rr_with_prior<'py>(
    py: Python<'py>,
    y: PyReadonlyArray1<'py, i64>,
    priors: PyReadonlyArray2<'py, f64>,
    epsilon: f64,
    rule: Option<&str>,
    seed: Option<u64>,
    ledger: Option<PyRef<'py, PyLedger>>,
) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray2<f32>>, String)> {
    let mut rng = guard::rng(seed)?;
    let ledger = inner(&ledger, seed)?;
    let priors = priors.as_array();
    let (n, k) = (priors.nrows(), priors.ncols());
    if y.as_array().len() != n {
        return Err(value_error(format!(
            "priors must have one row per label ({}), got {n}",
            y.as_array().len()
        )));
    }
    let labels = labels(&y, k)?;
    let rule = rule.map(str::parse).transpose().map_err(value_error)?;
    let rows: Vec<f64> = priors.iter().copied().collect();
    let r = guard::run(py, || {
        dpml_core::label_dp::rr_with_prior(&labels, &rows, k, epsilon, rule, &mut rng, ledger)
    })?;
    let released: Vec<i64> = r.released.iter().map(|&c| i64::from(c)).collect();
    let likelihood = Array2::from_shape_vec((n, k), r.likelihood).map_err(value_error)?;
    let event = guard::json(&r.event).map_err(value_error)?;
    Ok((
        released.into_pyarray(py),
        likelihood.into_pyarray(py),
        event,
    ))
}

/// k-means (`dpml kmeans`) of the rows of `x` inside declared per-feature `bounds`: the
/// centroids `[k, d]`, each row's cluster, and the release (JSON).
#[pyfunction]
#[pyo3(signature = (x, k, bounds, *, algorithm=None, epsilon=None, delta=None, iterations=None, seed=None, ledger=None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn kmeans_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    k: usize,
    bounds: Vec<(f64, f64)>,
    algorithm: Option<&str>,
    epsilon: Option<f64>,
    delta: Option<f64>,
    iterations: Option<usize>,
    seed: Option<u64>,
    ledger: Option<PyRef<'py, PyLedger>>,
) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<i64>>, String)> {
    let mut rng = guard::rng(seed)?;
    let ledger = inner(&ledger, seed)?;
    let d = x.as_array().ncols();
    let data = dataset(&x, vec![0; x.as_array().nrows()], &["0".to_string()]);
    let recipe = KMeansRecipe {
        k,
        algorithm: match algorithm {
            Some(a) => a.parse::<Algorithm>().map_err(value_error)?,
            None => dpml_core::kmeans::DEFAULT_ALGORITHM,
        },
        epsilon,
        delta,
        iterations,
    };
    let schema = Schema::default()
        .with_bounds(FeatureBounds::PerFeature(bounds.clone()))
        .map_err(value_error)?;
    let ctx = RunContext::in_memory(&schema);
    let fitted = guard::run(py, || {
        let bounds = Bounds::from_pairs(&bounds).map_err(|e| e.to_string())?;
        fit_kmeans(&recipe, &data, bounds, &ctx, false, &mut rng, ledger).map_err(|e| e.to_string())
    })?;
    let rows = fitted.centroids.len() / d.max(1);
    let centroids = Array2::from_shape_vec((rows, d), fitted.centroids).map_err(value_error)?;
    let assignments: Vec<i64> = fitted.assignments.iter().map(|&c| c as i64).collect();
    Ok((
        centroids.into_pyarray(py),
        assignments.into_pyarray(py),
        fitted.release.to_string(),
    ))
}

/// The defaults of every front, from `dpml-core` (JSON): the table recipe of `dpml train`,
/// label DP's, k-means', a search's, calibration's and RR-with-prior's.
#[pyfunction]
fn defaults() -> PyResult<String> {
    let table = dpml_core::train::table_recipe();
    let target_epsilon = match table.privacy {
        dpsgd::Privacy::TargetEpsilon(e) => Some(e),
        _ => None,
    };
    let label_dp = LabelDpRecipe::default();
    let v: Value = json!({
        "table": {
            "model": table.model,
            "hidden": table.hidden,
            "epsilon": target_epsilon,
            "delta": table.delta,
            "epochs": table.epochs,
            "batch_size": table.batch_size,
            "max_grad_norm": table.max_grad_norm,
            "learning_rate": table.lr,
            "accountant": table.accountant.name(),
        },
        "label_dp": {
            "epsilon": label_dp.epsilon,
            "mechanism": label_dp.mechanism.name(),
        },
        "kmeans": {
            "algorithm": dpml_core::kmeans::DEFAULT_ALGORITHM.name(),
            "n_clusters": dpml_core::kmeans::DEFAULT_CLUSTERS,
        },
        "tune": {
            "validation_fraction": dpml_core::tune::DEFAULT_VALIDATION_FRACTION,
            "score_share": dpml_core::tune::DEFAULT_SCORE_SHARE,
        },
        "calibration_accountant": dpml_core::account::CalibrationAccountant::default().name(),
        "top_k_rule": dpml_core::learn::label_dp::TopKRule::default().name(),
    });
    Ok(v.to_string())
}

/// Registers the learning functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(dpsgd_fit, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans_fit, m)?)?;
    m.add_function(wrap_pyfunction!(label_dp_fit, m)?)?;
    m.add_function(wrap_pyfunction!(rr_with_prior, m)?)?;
    m.add_function(wrap_pyfunction!(defaults, m)?)?;
    m.add_class::<TrainedModel>()?;
    Ok(())
}
