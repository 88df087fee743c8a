//! One training run: recipe, split, normalisation, optional local perturbation of the inputs,
//! DP-SGD (checkpointed, on the caller's processes), the saved model and log, and the release.

use std::io::Write;
use std::path::{Path, PathBuf};

use dpml_data::Source;
use dpml_learn::dpsgd::{self, Collective, EpochLog, Objective, Task, TrainConfig, TrainOutcome};
use dpml_learn::model_facts::ModelFacts;
use dpml_learn::perturbation::{InputBudget, InputMechanism, perturb_dataset_in};
use dpml_mechanisms::DpRng;
use serde_json::{Value, json};

use super::checkpoint::{self, CheckpointOptions};
use super::recipe::{RecipeOptions, private_needs, recipe};
use super::split::{Loaded, SplitOptions, load_split, public_normalization};
use crate::error::{Error, Result};
use crate::observe::{Event, Observer};
use crate::privacy_model::{self, PrivacyModel, Release, neighbouring, public};
use crate::schema::{Declarations, provenance_report};

/// Local DP on the features: every feature of every training record perturbed once.
#[derive(Debug, Clone)]
pub struct InputPerturbationOptions {
    /// `laplace` or `gaussian`.
    pub mechanism: String,
    /// ε of each feature's perturbation.
    pub epsilon: f64,
    /// δ of each feature's Gaussian perturbation.
    pub delta: f64,
}

/// What to train, on what, and what to write.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    /// The data source (else the preset's).
    pub dataset: Option<Source>,
    /// Label column of a `csv:` source.
    pub label_column: Option<String>,
    /// Where the IDX data sets live.
    pub data_dir: Option<PathBuf>,
    /// A named recipe.
    pub preset: Option<String>,
    /// Overrides of the recipe.
    pub recipe: RecipeOptions,
    /// Classification or regression of the label's value.
    pub task: Task,
    /// How the test set is cut.
    pub split: SplitOptions,
    /// What is declared about the data.
    pub declarations: Declarations,
    /// K-fold cross-validation over all records instead of one run.
    pub folds: Option<usize>,
    /// Save the trained model here.
    pub save_model: Option<PathBuf>,
    /// Write one CSV row per epoch here.
    pub log: Option<PathBuf>,
    /// Local DP on the inputs before training.
    pub input_perturbation: Option<InputPerturbationOptions>,
    /// Checkpointing.
    pub checkpoint: CheckpointOptions,
}

impl TrainOptions {
    /// Options for `dataset` with `recipe`'s overrides and nothing else (the source's default
    /// recipe, a keyed split of 20 % when the source has no test split).
    pub fn new(dataset: Source, recipe: RecipeOptions) -> Self {
        Self {
            dataset: Some(dataset),
            label_column: None,
            data_dir: None,
            preset: None,
            recipe,
            task: Task::Classification,
            split: SplitOptions {
                test_fraction: 0.2,
                key: None,
            },
            declarations: Declarations::default(),
            folds: None,
            save_model: None,
            log: None,
            input_perturbation: None,
            checkpoint: CheckpointOptions::default(),
        }
    }
}

/// How a training workflow ended.
#[derive(Debug, Clone)]
pub enum TrainEnd {
    /// The release: the model's (or the folds') guarantee at top level, un-noised figures
    /// under [`privacy_model::DIAGNOSTICS_KEY`].
    Released(Value),
    /// Stopped early with a checkpoint saved; nothing is released.
    Stopped {
        /// Steps done.
        step: u64,
        /// Steps of the whole run.
        steps: u64,
        /// Where the checkpoint is.
        checkpoint: Option<PathBuf>,
    },
}

/// Trains as `o` says on the processes of `comm` (the root, rank 0, alone writes files),
/// drawing the split, initialisation and noise from `rng` (every process's the same).
///
/// # Errors
/// Usage errors for a bad recipe, missing declarations, data that do not load or do not fit
/// the model; runtime errors for checkpoints and files that cannot be written.
pub fn train(
    o: &TrainOptions,
    rng: &mut DpRng,
    comm: &dyn Collective,
    observer: &mut dyn Observer,
) -> Result<TrainEnd> {
    let (source, cfg) = recipe(o.dataset.as_ref(), o.preset.as_deref(), &o.recipe, o.task)?;
    cfg.validate()?;
    if let Some(k) = o.folds {
        if o.checkpoint.any() {
            return Err(Error::usage(format!(
                "--folds {k} cannot be checkpointed: drop --checkpoint/--resume"
            )));
        }
        return super::crossval::cross_validate(o, &source, &cfg, k, rng, observer)
            .map(TrainEnd::Released);
    }
    let resumed = o.checkpoint.resumed()?;
    let checkpoint_plan = o.checkpoint.plan()?;
    // The key is drawn either way, so a seeded resumed run consumes its generator as the
    // original did; a resumed run holds out the records its checkpoint's run held out.
    let drawn = o.split.key(rng);
    let key = match resumed.as_ref().map(checkpoint::split_key).transpose()? {
        Some(Some(k)) => k,
        _ => drawn,
    };
    let opts = o
        .declarations
        .load_options(o.data_dir.as_deref(), o.label_column.as_deref())?;
    let Loaded {
        mut train,
        test,
        schema,
        split_key,
    } = load_split(
        &source,
        &opts,
        private_needs(&cfg, o.task, o.input_perturbation.is_some()),
        o.split.test_fraction,
        Some(key),
    )?;
    let cfg = normalized(o, &source, &schema, &train, &cfg)?;
    let perturbation = match &o.input_perturbation {
        Some(p) => {
            let mechanism = match p.mechanism.as_str() {
                "laplace" => InputMechanism::Laplace,
                "gaussian" => InputMechanism::Gaussian { delta: p.delta },
                other => {
                    return Err(Error::usage(format!(
                        "unknown --input-perturbation {other:?}; known: laplace, gaussian"
                    )));
                }
            };
            // Required when loading: input perturbation takes its sensitivities from the bounds.
            let ranges = schema.require_bounds(&train.name, train.n_features())?;
            Some(perturb_dataset_in(
                &mut train,
                &ranges,
                mechanism,
                InputBudget::PerFeature(p.epsilon),
                rng,
            )?)
        }
        None => None,
    };
    let run = dpsgd::Run {
        task: o.task,
        comm,
        checkpoint: checkpoint_plan.clone(),
        resume: resumed,
        stop_after: o.checkpoint.stop_after_steps,
        context: checkpoint::context(split_key),
    };
    let outcome = match train_observed(&run, &cfg, &train, Some(&test), rng, observer)? {
        dpsgd::RunEnd::Finished(o) => *o,
        dpsgd::RunEnd::Stopped { step, steps } => {
            return Ok(TrainEnd::Stopped {
                step,
                steps,
                checkpoint: checkpoint_plan.map(|p| p.dir),
            });
        }
    };
    // Only the root of a job of several processes writes files.
    let root = comm.rank() == 0;
    // Local DP on the features alone protects neither labels nor membership; with DP-SGD on
    // top, ε is DP-SGD's over whole records.
    let model = match (&perturbation, &outcome.event) {
        (Some(_), None) => training_privacy_model(neighbouring::FEATURES),
        _ => training_privacy_model(neighbouring::ADD_REMOVE),
    };
    if let (Some(path), true) = (&o.save_model, root) {
        let mut facts = ModelFacts::from_training(
            &outcome.report,
            &privacy_model::dataset_label(&source),
            train.n,
            neighbouring::ADD_REMOVE,
        );
        facts = facts.with_objective(Objective::new(o.task, train.n_classes), train.n_classes);
        if let Some(p) = &perturbation {
            facts = facts.with_input_perturbation(p, neighbouring::FEATURES);
        }
        dpsgd::save_with_facts(path, &outcome.model, &outcome.input, Some(&facts))?;
    }
    if let (Some(path), true) = (&o.log, root) {
        write_log(path, &outcome.report.epoch_log)?;
    }
    let mut report = match serde_json::to_value(&outcome.report).map_err(Error::internal)? {
        Value::Object(map) => map,
        _ => return Err(Error::internal("training report is not an object")),
    };
    report.remove("epoch_log");
    let mut release = Release::from_map(report, &model);
    release.diagnose(TRAINING_DIAGNOSTICS);
    release
        .insert("dataset", json!(source.name()))
        .insert("model", json!(cfg.model))
        .insert("preset", json!(o.preset))
        .insert("train_size", json!(train.n))
        .insert("batch_size", json!(cfg.batch_size))
        .insert("learning_rate", json!(cfg.lr))
        .insert("model_file", json!(o.save_model))
        .insert("event", json!(outcome.event))
        .insert("normalize", json!(cfg.normalize))
        .insert("schema", provenance_report(&schema))
        .insert("split_key", json!(split_key.map(|k| k.to_string())))
        .diagnostic("test_size", json!(test.n));
    if let Some(p) = &perturbation {
        release
            .insert("epsilon_per_record", json!(p.epsilon_per_record))
            .insert("epsilon_per_feature", json!(p.epsilon_per_feature))
            .insert("input_perturbation", json!(p));
    }
    Ok(TrainEnd::Released(release.into_value()))
}

/// The fields of a [`dpsgd::TrainReport`] computed from the training or test records without
/// noise: diagnostics, not part of the release (the test records are private data too).
const TRAINING_DIAGNOSTICS: &[&str] = &[
    "train_accuracy",
    "test_accuracy",
    "test_loss",
    "test_mse",
    "test_mae",
];

/// The privacy model of a trained model: `neighbouring`, with the training-set size, the
/// schema, the recipe and the split rule public.
fn training_privacy_model(neighbouring: &'static str) -> PrivacyModel {
    PrivacyModel::new(
        neighbouring,
        &[
            public::TRAINING_SET_SIZE,
            public::SCHEMA,
            public::RECIPE,
            public::SPLIT_RULE,
        ],
    )
}

/// `cfg` with the run's public normalisation ([`public_normalization`]), unless a preset
/// fixed one and no bounds are declared.
pub(super) fn normalized(
    o: &TrainOptions,
    source: &Source,
    schema: &dpml_data::Schema,
    data: &dpml_data::Dataset,
    cfg: &TrainConfig,
) -> Result<TrainConfig> {
    with_public_normalization(o.preset.as_deref(), source, schema, data, cfg)
}

/// `cfg` with the public normalisation of `source` ([`public_normalization`]), unless `preset`
/// fixed one and no bounds are declared.
///
/// # Errors
/// As [`public_normalization`].
pub(crate) fn with_public_normalization(
    preset: Option<&str>,
    source: &Source,
    schema: &dpml_data::Schema,
    data: &dpml_data::Dataset,
    cfg: &TrainConfig,
) -> Result<TrainConfig> {
    let mut cfg = cfg.clone();
    if preset.is_none() || schema.bounds_provenance == Some(dpml_data::Provenance::Declared) {
        cfg.normalize = public_normalization(source, schema, data)?;
    }
    Ok(cfg)
}

/// Trains `cfg` for `task` on this process alone, reporting to `observer`.
///
/// # Errors
/// As [`dpsgd::train_run`].
pub fn train_task_observed(
    task: Task,
    cfg: &TrainConfig,
    train: &dpml_data::Dataset,
    test: Option<&dpml_data::Dataset>,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
) -> Result<TrainOutcome> {
    let run = dpsgd::Run {
        task,
        ..dpsgd::Run::default()
    };
    match train_observed(&run, cfg, train, test, rng, observer)? {
        dpsgd::RunEnd::Finished(o) => Ok(*o),
        dpsgd::RunEnd::Stopped { .. } => Err(Error::internal(
            "a run without --stop-after-steps stopped early",
        )),
    }
}

/// [`dpsgd::train_run`], its progress (and that of a model's fixed leading layers, which map
/// every record once before the first step) reported to `observer` between
/// [`Event::RunStarted`] and [`Event::RunFinished`].
///
/// # Errors
/// As [`dpsgd::train_run`].
pub fn train_observed(
    run: &dpsgd::Run<'_>,
    cfg: &TrainConfig,
    train: &dpml_data::Dataset,
    test: Option<&dpml_data::Dataset>,
    rng: &mut DpRng,
    observer: &mut dyn Observer,
) -> Result<dpsgd::RunEnd> {
    observer.observe(Event::RunStarted);
    // Both closures report to the one observer; they never run at the same time.
    let observer = std::cell::RefCell::new(observer);
    let end = dpsgd::train_run(
        run,
        cfg,
        train,
        test,
        rng,
        &mut |p| observer.borrow_mut().observe(Event::Training(p)),
        &mut |p| observer.borrow_mut().observe(Event::Prefix(p)),
    )?;
    observer.into_inner().observe(Event::RunFinished);
    Ok(end)
}

/// Writes one CSV row per epoch to `path`, after a `#` line saying the losses and accuracies
/// are diagnostics (readers skip it as a comment, e.g. pandas' `comment="#"`).
///
/// # Errors
/// A usage error naming the file when it cannot be written.
pub fn write_log(path: &Path, log: &[EpochLog]) -> Result<()> {
    let err = |e: std::io::Error| Error::usage(format!("writing {}: {e}", path.display()));
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    writeln!(f, "{}", privacy_model::CSV_DIAGNOSTICS_COMMENT).map_err(err)?;
    writeln!(
        f,
        "epoch,steps,train_loss,train_accuracy,test_accuracy,test_loss,epsilon"
    )
    .map_err(err)?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
    for e in log {
        writeln!(
            f,
            "{},{},{},{},{},{},{}",
            e.epoch,
            e.steps,
            e.train_loss,
            e.train_accuracy,
            opt(e.test_accuracy),
            opt(e.test_loss),
            opt(e.epsilon)
        )
        .map_err(err)?;
    }
    f.flush().map_err(err)
}
