//! Private hyperparameter search (`dpml tune`, `dpml.tuning`): DP-SGD trials with
//! hyperparameters drawn at random from a space, a secret random number of them (Papernot &
//! Steinke's laws), each scored on a private validation split with noise (or on a public
//! validation set), the best model released under the guarantee of the whole search.
//!
//! - [`space`]: the search space (`--search` text or a TOML/JSON table) and its cells.
//! - [`budget`]: the privacy plan: per-cell noise calibrated so the search meets a total ε.
//! - [`search`]: running the trials and keeping the best.
//! - [`audit`]: the white-box canary audit of a whole search (an empirical check).
//! - this module: the workflows the fronts call: [`tune`] (a data source, as the command line
//!   names it) and [`tune_dataset`] (records already loaded, as Python hands them over), and
//!   the release they return.

pub mod audit;
pub mod budget;
mod report;
pub mod search;
pub mod space;

use std::path::PathBuf;

use dpml_data::{Dataset, LoadOptions, Source, SplitKey, load, validation_split};
use dpml_learn::dpsgd::{self, Task};
use dpml_learn::model_facts::{ModelFacts, TuningFacts};
use dpml_mechanisms::{DpRng, Repetitions};
use serde_json::Value;

pub use budget::{CellNoise, Noise, Plan};
pub use search::{Kept, Search, SearchOutcome, TrainTrial, TrialProgress, TrialRecord, Validation};
pub use space::{Hyperparameter, Point, SearchSpace};

use crate::error::{Error, Result};
use crate::observe::Observer;
use crate::privacy_model::{self, neighbouring};
use crate::schema::Declarations;
use crate::train::{RecipeOptions, SplitOptions, load_split, private_needs, recipe};

/// The share of the training records a private validation split holds by default.
pub const DEFAULT_VALIDATION_FRACTION: f64 = 0.1;

/// The share of the total ε each trial's noisy score gets by default (ε_score = ε / 10). The
/// score sees only validation records and training only the others, so a trial costs the
/// larger of the two, not their sum: a score whose curve stays below training's is free.
pub const DEFAULT_SCORE_SHARE: f64 = 0.1;

/// What the trials are scored on.
#[derive(Debug, Clone, PartialEq)]
pub enum ValidationChoice {
    /// A keyed per-record cut of the training records (the split rule of
    /// [`dpml_data::validation_split`]), scored with noise.
    Private {
        /// The share of the training records held out for validation.
        fraction: f64,
        /// ε of each trial's noisy count (default: [`DEFAULT_SCORE_SHARE`] of the total ε).
        score_epsilon: Option<f64>,
    },
    /// A data set the caller declares public (its test split if it has one, else all its
    /// records), scored exactly.
    Public {
        /// The public data set.
        source: Source,
    },
}

/// Loaded validation records, as [`tune_dataset`] takes them.
#[derive(Debug, Clone)]
pub enum ValidationData {
    /// Cut from the training records with the run's split key.
    Private {
        /// The share held out.
        fraction: f64,
        /// ε of each noisy count (default: a share of the total ε).
        score_epsilon: Option<f64>,
    },
    /// Records declared public, and what they are called in reports.
    Public {
        /// The records.
        set: Dataset,
        /// Their name.
        name: String,
    },
}

/// What `dpml tune` asks for.
#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// The data source (else the preset's).
    pub dataset: Option<Source>,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// A named recipe the trials start from.
    pub preset: Option<String>,
    /// Overrides of the recipe; its `epsilon` is the search's TOTAL ε (or its
    /// `noise_multiplier` every trial's σ).
    pub recipe: RecipeOptions,
    /// How the test set is cut (for the kept model's test accuracy, a diagnostic).
    pub split: SplitOptions,
    /// What is declared about the data.
    pub declarations: Declarations,
    /// The search space.
    pub space: SearchSpace,
    /// The law of the number of trials.
    pub repetitions: Repetitions,
    /// What the trials are scored on.
    pub validation: ValidationChoice,
    /// Save the kept model here.
    pub save_model: Option<PathBuf>,
}

/// A finished search: the release (JSON, diagnostics apart) and the trials, for plots.
#[derive(Debug)]
pub struct Tuned {
    /// The release: the kept model's guarantee and hyperparameters at top level; the trials,
    /// their number and every exact accuracy under [`privacy_model::DIAGNOSTICS_KEY`].
    pub release: Value,
    /// The search's privacy plan.
    pub plan: Plan,
    /// The law of the number of trials.
    pub repetitions: Repetitions,
    /// Every trial (not covered by the guarantee).
    pub trials: Vec<TrialRecord>,
    /// The kept trial's model, when a trial ran.
    pub kept: Option<Kept>,
    /// The number of records the trials trained on.
    pub train_size: usize,
    /// What the trials were scored on, in words.
    pub validation: String,
}

impl Tuned {
    /// The privacy facts of the kept model (its run's, with the search's guarantee), trained
    /// on `dataset`; `None` when no trial ran.
    pub fn facts(&self, dataset: &str) -> Option<ModelFacts> {
        let kept = self.kept.as_ref()?;
        let report = &kept.outcome.report;
        let tuning = TuningFacts {
            repetitions: self.repetitions,
            epsilon_per_trial: self.plan.epsilon_per_trial,
            epsilon_kept_run: report.epsilon,
            validation: self.validation.clone(),
            score: self.trials[kept.index].noisy_score,
        };
        Some(
            ModelFacts::from_training(report, dataset, self.train_size, neighbouring::ADD_REMOVE)
                .with_tuning(tuning, self.plan.epsilon, self.plan.delta),
        )
    }
}

/// Runs `dpml tune`: loads the source, cuts the test and validation records (per record,
/// keyed), searches, and saves the kept model with the search's guarantee in its facts. `charge`
/// receives the plan before anything trains (a budget ledger).
///
/// # Errors
/// Usage errors for a bad recipe, space, law or data, a target that cannot be met (all before
/// training); what `charge` returns; training and file errors.
pub fn tune(
    o: &TuneOptions,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    charge: &mut dyn FnMut(&Plan) -> Result<()>,
) -> Result<Tuned> {
    let (source, cfg) = recipe(
        o.dataset.as_ref(),
        o.preset.as_deref(),
        &o.recipe,
        Task::Classification,
    )?;
    let noise = Noise::of(&cfg.privacy)?;
    let key = o.split.key(rng);
    let opts = o
        .declarations
        .load_options(o.data_dir.as_deref(), o.label_column.as_deref())?;
    let loaded = load_split(
        &source,
        &opts,
        private_needs(&cfg, Task::Classification, false),
        o.split.test_fraction,
        Some(key),
    )?;
    let cfg = crate::train::run::with_public_normalization(
        o.preset.as_deref(),
        &source,
        &loaded.schema,
        &loaded.train,
        &cfg,
    )?;
    let validation = match &o.validation {
        ValidationChoice::Private {
            fraction,
            score_epsilon,
        } => ValidationData::Private {
            fraction: *fraction,
            score_epsilon: *score_epsilon,
        },
        ValidationChoice::Public { source: public } => ValidationData::Public {
            set: public_records(public, &source, &opts)?,
            name: privacy_model::dataset_label(public),
        },
    };
    let search = Search {
        space: o.space.clone(),
        repetitions: o.repetitions,
        noise,
        delta: cfg.delta,
        base: cfg,
    };
    let mut tuned = tune_dataset(
        &search,
        &loaded.train,
        Some(&loaded.test),
        validation,
        &key,
        rng,
        observer,
        charge,
    )?;
    let label = privacy_model::dataset_label(&source);
    if let (Some(path), Some(kept), Some(facts)) = (&o.save_model, &tuned.kept, tuned.facts(&label))
    {
        dpsgd::save_with_facts(path, &kept.outcome.model, &kept.outcome.input, Some(&facts))?;
    }
    if let Value::Object(map) = &mut tuned.release {
        let model = search.base.model.clone();
        for (k, v) in [
            ("dataset", Value::from(source.name())),
            ("model", Value::from(model)),
            ("preset", serde_json::json!(o.preset)),
            ("schema", crate::schema::provenance_report(&loaded.schema)),
            ("split_key", Value::from(key.to_string())),
            (
                "model_file",
                serde_json::json!(o.save_model.as_ref().filter(|_| tuned.kept.is_some())),
            ),
        ] {
            map.insert(k.into(), v);
        }
    }
    Ok(tuned)
}

/// Runs a search on loaded records: `train` (the validation records are cut from it with
/// `key` unless `validation` brings public ones), `test` for the kept model's test accuracy (a
/// diagnostic). The fronts' common workflow: [`tune`] loads a source first; the Python binding
/// hands over arrays.
///
/// # Errors
/// As [`tune`].
#[allow(clippy::too_many_arguments)]
pub fn tune_dataset(
    search: &Search,
    train: &Dataset,
    test: Option<&Dataset>,
    validation: ValidationData,
    key: &SplitKey,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    charge: &mut dyn FnMut(&Plan) -> Result<()>,
) -> Result<Tuned> {
    let (fit, set, scoring, name) = match validation {
        ValidationData::Private {
            fraction,
            score_epsilon,
        } => {
            let (fit, set) = validation_split(train, fraction, key)?;
            let score_epsilon = match (score_epsilon, search.noise) {
                (Some(e), _) => e,
                (None, Noise::TotalEpsilon(total)) => total * DEFAULT_SCORE_SHARE,
                (None, Noise::Multiplier(_)) => {
                    return Err(Error::usage(
                        "with --noise-multiplier, give the score's ε (--score-epsilon)",
                    ));
                }
            };
            (
                fit,
                set,
                Some(score_epsilon),
                "private validation split".to_string(),
            )
        }
        ValidationData::Public { set, name } => (
            train.clone(),
            set,
            None,
            format!("public validation set {name}"),
        ),
    };
    let validation = match scoring {
        Some(score_epsilon) => Validation::Private {
            set: &set,
            score_epsilon,
        },
        None => Validation::Public { set: &set },
    };
    let mut outcome = search::run(search, &fit, validation, rng, observer, charge)?;
    let test_eval = match (&mut outcome.kept, test) {
        (Some(kept), Some(test)) => Some(dpsgd::evaluate(
            &mut kept.outcome.model,
            &kept.outcome.input,
            test,
        )?),
        _ => None,
    };
    let release = report::release(
        search,
        &outcome,
        &report::Scoring {
            what: &name,
            score_epsilon: scoring,
            set: &set,
        },
        fit.n,
        test_eval.as_ref(),
        rng.is_seeded(),
    );
    Ok(Tuned {
        release,
        plan: outcome.plan,
        repetitions: search.repetitions,
        trials: outcome.trials,
        kept: outcome.kept,
        train_size: fit.n,
        validation: name,
    })
}

/// The records of a public validation source: its test split, else all its records. The
/// training source itself is refused unless it has a test split (its records would be the
/// private training data).
fn public_records(public: &Source, training: &Source, opts: &LoadOptions) -> Result<Dataset> {
    let sets = load(public, opts)?;
    match sets.test {
        Some(test) => Ok(test),
        None if public == training => Err(Error::usage(format!(
            "--public-validation {} names the training data itself: its records are private",
            public.name()
        ))),
        None => Ok(sets.train),
    }
}
