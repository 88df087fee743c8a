//! A private hyperparameter search over numpy arrays (`dpml.tuning`): dpml-core's search, the
//! workflow `dpml tune` runs, on records handed over by Python. The estimator conventions
//! (best_estimator_, cv_results_) live in python/dpml/tuning.py.

use dpml_core::data::SplitKey;
use dpml_core::learn::dpsgd;
use dpml_core::mechanisms::Repetitions;
use dpml_core::observe::Silent;
use dpml_core::tune::{Noise, Search, SearchSpace, ValidationData, tune_dataset};
use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::guard;
use crate::learn::{TrainedModel, check_ranges, dataset, labels, recipe, value_error};

/// Searches `space` (JSON: name → "LO..HI log", a list, or a table) with trials drawn from
/// `repetitions` (JSON: `{"law": "poisson", "mean": 10}`), each a DP-SGD run of the tabular
/// recipe with `overrides` (whose privacy is the search's total ε or every trial's σ), scored
/// by a noisy count on a keyed `validation_fraction` of the records. Returns the kept model
/// (`None` when the law drew no trial) and the release (JSON: `dpml tune`'s fields).
#[pyfunction]
#[pyo3(signature = (x, y, classes, ranges, overrides_json, space_json, repetitions_json, validation_fraction, score_epsilon=None, seed=None))]
#[allow(clippy::too_many_arguments)]
fn tune_fit(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    y: PyReadonlyArray1<'_, i64>,
    classes: usize,
    ranges: Vec<(f64, f64)>,
    overrides_json: &str,
    space_json: &str,
    repetitions_json: &str,
    validation_fraction: f64,
    score_epsilon: Option<f64>,
    seed: Option<u64>,
) -> PyResult<(Option<TrainedModel>, String)> {
    let mut rng = guard::rng(seed)?;
    check_ranges(&x, &ranges)?;
    let data = dataset(&x, labels(&y, classes)?, classes);
    let base = recipe(dpsgd::tabular_recipe(), overrides_json, &ranges).map_err(value_error)?;
    let space: serde_json::Value =
        serde_json::from_str(space_json).map_err(|e| value_error(format!("space: {e}")))?;
    let repetitions: Repetitions = serde_json::from_str(repetitions_json)
        .map_err(|e| value_error(format!("the law of the number of trials: {e}")))?;
    let search = Search {
        space: SearchSpace::from_json(&space).map_err(value_error)?,
        repetitions,
        noise: Noise::of(&base.privacy).map_err(value_error)?,
        delta: base.delta,
        base,
    };
    let tuned = guard::run(py, || {
        let key = SplitKey::from_rng(rng.as_rng());
        let validation = ValidationData::Private {
            fraction: validation_fraction,
            score_epsilon,
        };
        let mut tuned = tune_dataset(
            &search,
            &data,
            None,
            validation,
            &key,
            &mut rng,
            &mut Silent,
            &mut |_| Ok(()),
        )?;
        tuned.release["split_key"] = key.to_string().into();
        Ok::<_, dpml_core::Error>(tuned)
    })?;
    let report = guard::json(&tuned.release).map_err(value_error)?;
    let model = tuned
        .kept
        .map(|k| TrainedModel::new(k.outcome.model, k.outcome.input, classes));
    Ok((model, report))
}

/// Registers the search.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tune_fit, m)?)?;
    Ok(())
}
