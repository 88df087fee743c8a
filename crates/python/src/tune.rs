//! A private hyperparameter search over numpy arrays (`dpml.tuning`): dpml-core's
//! [`dpml_core::tune::fit`], the search `dpml tune` runs, on records in memory with the table
//! recipe the estimators train with. The estimator conventions (best_estimator_, cv_results_)
//! live in python/dpml/tuning.py.

use dpml_core::mechanisms::{Repetitions, TrialRelease};
use dpml_core::observe::Silent;
use dpml_core::tune::{DEFAULT_VALIDATION_FRACTION, SearchFitOptions, SearchSpace};
use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::guard::{self, value_error};
use crate::learn::{RecipeKeywords, TrainedModel, labelled};
use crate::ledger::{PyLedger, inner};

/// The kept model (`None` when the law drew no trial), the release (JSON: `dpml tune`'s
/// fields) and the kept run's per-epoch log (JSON).
type TuneResult = (Option<TrainedModel>, String, String);

/// Searches `space_json` (name → "LO..HI log", a list, or a table) with a secret number of
/// trials drawn from `repetitions_json` (`{"law": "poisson", "mean": 10}`), each a DP-SGD run
/// of the table recipe with the `recipe` keywords (whose `epsilon` is the search's TOTAL, or
/// whose `noise_multiplier` is every trial's σ), scored by a noisy count on a keyed
/// `validation_fraction` of the records; `release_trials` releases every trial (as `dpml tune
/// --release-trials`). With a `ledger`, charged as `dpml tune --ledger`.
#[pyfunction]
#[pyo3(signature = (x, y, classes, bounds, recipe, space_json, repetitions_json, *, validation_fraction=None, score_epsilon=None, release_trials=false, seed=None, ledger=None))]
#[allow(clippy::too_many_arguments)]
fn tune_fit(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    y: PyReadonlyArray1<'_, i64>,
    classes: Vec<String>,
    bounds: Option<Vec<(f64, f64)>>,
    recipe: RecipeKeywords,
    space_json: &str,
    repetitions_json: &str,
    validation_fraction: Option<f64>,
    score_epsilon: Option<f64>,
    release_trials: bool,
    seed: Option<u64>,
    ledger: Option<PyRef<'_, PyLedger>>,
) -> PyResult<TuneResult> {
    let mut rng = guard::rng(seed)?;
    let data = labelled(&x, &y, &classes)?;
    let ledger = inner(&ledger, seed)?;
    let space: serde_json::Value =
        serde_json::from_str(space_json).map_err(|e| value_error(format!("space: {e}")))?;
    let repetitions: Repetitions = serde_json::from_str(repetitions_json)
        .map_err(|e| value_error(format!("the law of the number of trials: {e}")))?;
    let options = SearchFitOptions {
        fit: recipe.fit_options(bounds, classes)?,
        space: SearchSpace::from_json(&space).map_err(value_error)?,
        repetitions,
        release: if release_trials {
            TrialRelease::Every
        } else {
            TrialRelease::Best
        },
        validation_fraction: validation_fraction.unwrap_or(DEFAULT_VALIDATION_FRACTION),
        score_epsilon,
    };
    let tuned = guard::run(py, || {
        dpml_core::tune::fit(&options, &data, &mut rng, &mut Silent, ledger)
    })?;
    let log = match &tuned.kept {
        Some(k) => guard::json(&k.epoch_log).map_err(value_error)?,
        None => "[]".into(),
    };
    let release = tuned.release.to_string();
    Ok((tuned.kept.map(TrainedModel::from_kept), release, log))
}

/// Registers the search.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tune_fit, m)?)?;
    Ok(())
}
