//! Private hyperparameter search (`dpml tune`, `dpml.tuning`): DP-SGD trials with
//! hyperparameters drawn at random from a space, a secret random number of them (Papernot &
//! Steinke's laws), each scored on a private validation split with noise (or on a public
//! validation set), the best model released under the guarantee of the whole search.
//!
//! - [`space`]: the search space (`--search` text or a TOML/JSON table) and its cells.
//! - [`plan`]: the privacy plan: per-cell noise calibrated so the search meets a total ε.
//! - [`search`]: running the trials and keeping the best.
//! - [`audit`]: the white-box canary audit of a whole search (an empirical check).
//! - this module: the workflows the fronts call: [`tune`] (a data source, as the command line
//!   names it) and [`fit`] (records in memory, as Python hands them over, with the table
//!   recipe of [`crate::train::fit()`]), and the release they return. Both charge the budget
//!   ledger as training does: the search's one event is checked before any trial trains and
//!   recorded before the release is returned or the kept model written.

pub mod audit;
pub mod plan;
mod report;
pub mod search;
pub mod space;

use std::path::PathBuf;

use dpml_data::{Dataset, LoadOptions, Source, SplitKey, load, validation_split};
use dpml_learn::dpsgd::{self, EpochLog, InputTransform, Task};
use dpml_learn::model_facts::{Guarantee, ModelFacts, SplitFacts, TuningFacts};
use dpml_mechanisms::{DpRng, Repetitions, TrialRelease};
use dpml_nn::Sequential;
use serde_json::{Value, json};

pub use plan::{CellNoise, Noise, Plan};
pub use search::{Search, SearchOutcome, TrainTrial, TrialProgress, TrialRecord, Validation};
pub use space::{Hyperparameter, Point, SearchSpace};

use crate::budget::{self, Charge, Ledger};
use crate::error::{Error, Result};
use crate::ledger_json;
use crate::observe::Observer;
use crate::privacy_model;
use crate::schema::{Declarations, clamp_diagnostics};
use crate::train::fit::{RunContext, model_facts};
use crate::train::{
    FitOptions, RecipeOptions, SplitOptions, fit_batch_to_data, load_split, private_needs, recipe,
};

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

/// What the trials are scored on, once loaded.
#[derive(Debug, Clone)]
enum ValidationData {
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
    /// What the search releases: the best trial (default), or every trial.
    pub release: TrialRelease,
    /// What the trials are scored on.
    pub validation: ValidationChoice,
    /// Save the kept model here.
    pub save_model: Option<PathBuf>,
}

/// What a search on records in memory asks for (the Python front): the table recipe of
/// [`crate::train::fit()`] with `fit`'s overrides (its `epsilon` the search's TOTAL ε, or its
/// `noise_multiplier` every trial's σ), bounds and classes; the space, the law, and the share
/// of the records held out (per record, keyed) to score the trials with noise.
#[derive(Debug, Clone)]
pub struct SearchFitOptions {
    /// The recipe every trial starts from, and what is declared about the records.
    pub fit: FitOptions,
    /// The search space.
    pub space: SearchSpace,
    /// The law of the number of trials.
    pub repetitions: Repetitions,
    /// What the search releases: the best trial (default), or every trial.
    pub release: TrialRelease,
    /// The share of the records held out for validation.
    pub validation_fraction: f64,
    /// ε of each trial's noisy count (default: [`DEFAULT_SCORE_SHARE`] of the total ε).
    pub score_epsilon: Option<f64>,
}

/// The model a search kept, with its privacy facts: its run's, with the guarantee of the whole
/// search ([`ModelFacts::with_tuning`]).
#[derive(Debug)]
pub struct KeptModel {
    /// Its place in [`Tuned::trials`].
    pub index: usize,
    /// The network.
    pub model: Sequential,
    /// The input transform it expects.
    pub input: InputTransform,
    /// What its file records.
    pub facts: ModelFacts,
    /// Its run's per-epoch log (losses and accuracies: diagnostics).
    pub epoch_log: Vec<EpochLog>,
}

/// A finished search: the release (JSON, diagnostics apart), the trials and the kept model.
#[derive(Debug)]
pub struct Tuned {
    /// The release: the kept model's guarantee and hyperparameters at top level (and every
    /// trial's hyperparameters and noisy score under `"trials"` when the search releases
    /// them); the trials, their number and every exact accuracy under
    /// [`privacy_model::DIAGNOSTICS_KEY`]; the ledger's balance under `"ledger"` when one was
    /// charged.
    pub release: Value,
    /// The search's privacy plan.
    pub plan: Plan,
    /// Every trial (its hyperparameters and noisy score covered by the guarantee only when the
    /// search releases every trial).
    pub trials: Vec<TrialRecord>,
    /// The kept model, when a trial ran.
    pub kept: Option<KeptModel>,
}

/// Runs `dpml tune`: loads the source, cuts the test and validation records (per record,
/// keyed by one split key, apart by purpose), searches, and saves the kept model with the
/// search's guarantee and the split in its facts. With a `ledger`, the search's event is
/// checked before any trial trains and recorded before the kept model is written.
///
/// # Errors
/// Usage errors for a bad recipe, space, law or data, a target that cannot be met, a ledger
/// that refuses the spend (all before training); training and file errors.
pub fn tune(
    o: &TuneOptions,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    ledger: Option<&Ledger>,
) -> Result<Tuned> {
    let (source, cfg) = recipe(
        o.dataset.as_ref(),
        o.preset.as_deref(),
        &o.recipe,
        Task::Classification,
    )?;
    let noise = Noise::of(&cfg.privacy)?;
    if let Some(path) = &o.save_model {
        crate::output_path::check_writable("--save-model", path)?;
    }
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
        SPLIT_BASIS,
    )?;
    let mut cfg = crate::train::run::with_public_normalization(
        o.preset.as_deref(),
        &source,
        &loaded.schema,
        &loaded.train,
        &cfg,
    )?;
    let notes = fit_batch_to_data(&mut cfg, &o.recipe, loaded.train.n)
        .into_iter()
        .collect();
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
        release: o.release,
        noise,
        delta: cfg.delta,
        base: cfg,
    };
    let ctx = RunContext {
        dataset: source.name(),
        dataset_label: privacy_model::dataset_label(&source),
        preset: o.preset.as_deref(),
        schema: &loaded.schema,
        split: loaded.split_key.map(|k| SplitFacts {
            key: k.to_string(),
            test_fraction: o.split.test_fraction,
        }),
        test_size: Some(loaded.test.n),
        notes,
    };
    let mut tuned = run_search(
        &search,
        &loaded.train,
        Some(&loaded.test),
        validation,
        &key,
        &ctx,
        rng,
        observer,
        ledger,
    )?;
    privacy_model::add_diagnostics(
        &mut tuned.release,
        clamp_diagnostics(
            &loaded.clamped,
            &loaded.train.feature_names,
            loaded.train.n + loaded.test.n,
        ),
    );
    if let (Some(path), Some(kept)) = (&o.save_model, &tuned.kept) {
        dpsgd::save_with_facts(path, &kept.model, &kept.input, Some(&kept.facts))?;
        tuned.release["model_file"] = json!(path);
    }
    Ok(tuned)
}

/// A search on records in memory (the Python front), as [`tune`] runs one on a table: the
/// trials start from the table recipe with `o.fit`'s overrides, the validation records are a
/// keyed per-record cut of `data` (the key drawn from `rng` and reported), and the ledger is
/// charged as `dpml tune --ledger` charges it (on [`crate::train::MEMORY_DATASET`]).
///
/// # Errors
/// As [`tune`].
pub fn fit(
    o: &SearchFitOptions,
    data: &Dataset,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    ledger: Option<&Ledger>,
) -> Result<Tuned> {
    let (cfg, schema, notes) = o.fit.table_recipe(data)?;
    let search = Search {
        space: o.space.clone(),
        repetitions: o.repetitions,
        release: o.release,
        noise: Noise::of(&cfg.privacy)?,
        delta: cfg.delta,
        base: cfg,
    };
    let key = SplitKey::from_rng(rng.as_rng());
    let ctx = RunContext {
        notes,
        ..RunContext::in_memory(&schema)
    };
    let validation = ValidationData::Private {
        fraction: o.validation_fraction,
        score_epsilon: o.score_epsilon,
    };
    run_search(
        &search, data, None, validation, &key, &ctx, rng, observer, ledger,
    )
}

/// What a search's split hashes: its trials are DP-SGD runs, whose guarantee is stated for
/// adding or removing whole records.
const SPLIT_BASIS: dpml_data::SplitBasis = Guarantee::DpSgd.split_basis();

/// What the ledger is charged for a search on `dataset`: the whole search's event and
/// guarantee (the bound of what it releases), one entry.
fn search_charge(plan: &Plan, repetitions: &Repetitions, dataset: &str) -> Charge {
    let what = match plan.release {
        TrialRelease::Best => "the best of",
        TrialRelease::Every => "every one of",
    };
    Charge::of(
        "tune",
        dataset,
        plan.search.clone(),
        plan.epsilon,
        plan.delta,
    )
    .labelled(format!(
        "tune on {dataset}: {what} {} trials",
        repetitions.describe()
    ))
}

/// The search both workflows run on loaded records: `train` (the validation records are cut
/// from it with `key` unless `validation` brings public ones), `test` for the kept model's test
/// accuracy (a diagnostic); `ctx` says where the records came from. With a `ledger`: checked
/// before any trial trains, charged before the release returns.
#[allow(clippy::too_many_arguments)]
fn run_search(
    search: &Search,
    train: &Dataset,
    test: Option<&Dataset>,
    validation: ValidationData,
    key: &SplitKey,
    ctx: &RunContext<'_>,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
    ledger: Option<&Ledger>,
) -> Result<Tuned> {
    let (fit, set, scoring, name, cut) = match validation {
        ValidationData::Private {
            fraction,
            score_epsilon,
        } => {
            let (fit, set) = validation_split(train, fraction, key, SPLIT_BASIS)?;
            let score_epsilon = match (score_epsilon, search.noise) {
                (Some(e), _) => e,
                (None, Noise::TotalEpsilon(total)) => total * DEFAULT_SCORE_SHARE,
                (None, Noise::Multiplier(_)) => {
                    return Err(Error::usage(
                        "with --noise-multiplier, give the score's ε (--score-epsilon)",
                    ));
                }
            };
            let what = "private validation split".to_string();
            (fit, set, Some(score_epsilon), what, Some(key.to_string()))
        }
        ValidationData::Public { set, name } => {
            let what = format!("public validation set {name}");
            (train.clone(), set, None, what, None)
        }
    };
    let validation = match scoring {
        Some(score_epsilon) => Validation::Private {
            set: &set,
            score_epsilon,
        },
        None => Validation::Public { set: &set },
    };
    // Checked before the first trial: a search that would overspend never trains.
    let mut check = |plan: &Plan| {
        budget::check(
            ledger,
            &search_charge(plan, &search.repetitions, &ctx.dataset),
        )
    };
    let mut outcome = search::run(search, &fit, validation, rng, observer, &mut check)?;
    let test_eval = match (&mut outcome.kept, test) {
        (Some(kept), Some(test)) => Some(dpsgd::evaluate(
            &mut kept.outcome.model,
            &kept.outcome.input,
            test,
        )?),
        _ => None,
    };
    let mut release = report::release(
        search,
        &outcome,
        &report::Scoring {
            what: &name,
            score_epsilon: scoring,
            set: &set,
            key: cut,
        },
        ctx,
        fit.n,
        test_eval.as_ref(),
        rng.is_seeded(),
    );
    // Recorded before the release returns (and the kept model is written): whatever K was,
    // the search is one release.
    let charge = search_charge(&outcome.plan, &search.repetitions, &ctx.dataset);
    if let Some(b) = budget::charge(ledger, &charge)? {
        release["ledger"] = ledger_json::balance(&b);
    }
    let kept =
        outcome.kept.map(|mut k| {
            let trial = &outcome.trials[k.index];
            let tuning = TuningFacts {
                repetitions: search.repetitions,
                epsilon_per_trial: outcome.plan.epsilon_per_trial,
                epsilon_kept_run: k.outcome.report.epsilon,
                validation: name.clone(),
                score: trial.noisy_score,
                released: outcome.plan.release,
            };
            let facts = model_facts(&k.outcome.report, Task::Classification, &fit, ctx)
                .with_tuning(tuning, outcome.plan.epsilon, outcome.plan.delta);
            KeptModel {
                index: k.index,
                model: k.outcome.model,
                input: k.outcome.input,
                facts,
                epoch_log: std::mem::take(&mut k.outcome.report.epoch_log),
            }
        });
    Ok(Tuned {
        release,
        plan: outcome.plan,
        trials: outcome.trials,
        kept,
    })
}

/// The records of a public validation source: its test split, else all its records. The
/// training source itself is refused unless it has a test split (its records would be the
/// private training data), however its files are named (`./r.csv`, an absolute path, a link:
/// files are compared by identity).
fn public_records(public: &Source, training: &Source, opts: &LoadOptions) -> Result<Dataset> {
    let sets = load(public, opts)?;
    let shares_a_file = || {
        public.paths().iter().any(|p| {
            training
                .paths()
                .iter()
                .any(|t| crate::output_path::same_file(p, t))
        })
    };
    match sets.test {
        Some(test) => Ok(test),
        None if public == training || shares_a_file() => Err(Error::usage(format!(
            "--public-validation {} names the training data itself: its records are private",
            public.name()
        ))),
        None => Ok(sets.train),
    }
}
