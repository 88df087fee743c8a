//! `dpml train` and `dpml eval`: DP-SGD (or non-private) training of a named model on a data
//! set, with a progress bar showing loss, accuracy and the ε spent so far; and evaluation of a
//! saved model. The training flags here are shared by every command that trains.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use dpml_data::{
    Dataset, LoadOptions, Provenance, Schema, Source, SplitKey, load, train_test_split,
};
use dpml_learn::crossval::{epsilon_all_folds, k_fold, mean_std};
use dpml_learn::dpsgd::{
    self, AccountantKind, EpochLog, FASHION_MNIST_MEAN_STD, MNIST_MEAN_STD, Normalization,
    Objective, OptimizerKind, Privacy, Progress, ScheduleKind, Task, TrainConfig,
};
use dpml_learn::model_facts::ModelFacts;
use dpml_learn::perturbation::{InputBudget, InputMechanism, perturb_dataset_in};
use serde_json::{Value, json};

use super::checkpoint_args::{self, CheckpointArgs};
use super::inspect::facts_json;
use crate::args::{self, SeedArg};
use crate::error::{CliError, CliResult};
use crate::output::{Output, diag};
use crate::privacy_model::{self, PrivacyModel, Release, neighbouring, public};
use crate::schema_args::{Needs, SchemaArgs, provenance_report, require_declared};
use crate::summary::short;

/// Optimizers on the command line.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum OptimizerArg {
    /// SGD (with --momentum).
    Sgd,
    /// Adam.
    Adam,
}

/// Learning-rate schedules on the command line.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum ScheduleArg {
    /// The same rate throughout.
    Constant,
    /// Cosine annealing to 0 over the run.
    Cosine,
}

/// Accountants on the command line.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum AccountantArg {
    /// Privacy-loss distribution (tight upper bound).
    Pld,
    /// Rényi DP (upper bound).
    Rdp,
    /// Gaussian DP via the CLT (approximation; not for calibration).
    Gdp,
}

/// The flags that define a training recipe. Every one is optional so that a preset (or a
/// command's own defaults) can supply it and a flag given on the command line overrides it.
#[derive(Args, Debug, Clone, Default)]
pub struct TrainingArgs {
    /// Architecture to train (cnn, cnn-tanh and scatter-cnn take 28x28 images; logreg,
    /// mlp and scatter-linear any records).
    #[arg(long, value_name = "NAME", value_parser = args::ModelName)]
    pub model: Option<String>,
    /// Train the network described in this JSON file (see `dpml arch show`) instead of a
    /// named model; its input_shape must be the data's record shape.
    #[arg(long, value_name = "FILE", value_parser = args::input_path, conflicts_with_all = ["model", "hidden"])]
    pub arch: Option<std::path::PathBuf>,
    /// Hidden layer sizes of mlp, e.g. 512,256 (default: the recipe's, else 128; each at
    /// most 65536).
    #[arg(long, value_delimiter = ',', value_parser = args::at_least_one_at_most(args::MAX_HIDDEN_WIDTH))]
    pub hidden: Option<Vec<u64>>,
    /// Target ε: σ is calibrated before training so the final ε does not exceed it.
    #[arg(long, value_parser = args::positive, conflicts_with_all = ["noise_multiplier", "non_private"])]
    pub epsilon: Option<f64>,
    /// Noise multiplier σ (noise std σ·C on the clipped sum).
    #[arg(long, value_parser = args::positive, conflicts_with = "non_private")]
    pub noise_multiplier: Option<f64>,
    /// Train without privacy (a baseline).
    #[arg(long)]
    pub non_private: bool,
    /// δ of the (ε, δ) guarantee.
    #[arg(long, value_parser = args::open_unit)]
    pub delta: Option<f64>,
    /// Epochs (the run has ⌈E·N/B⌉ steps).
    #[arg(long, value_parser = args::positive)]
    pub epochs: Option<f64>,
    /// Expected (Poisson) batch size B.
    #[arg(long, value_parser = args::at_least_one)]
    pub batch_size: Option<u64>,
    /// Clipping norm C of each per-sample gradient.
    #[arg(long, value_parser = args::positive)]
    pub max_grad_norm: Option<f64>,
    /// Learning rate.
    #[arg(long = "learning-rate", alias = "lr", value_parser = args::positive)]
    pub lr: Option<f64>,
    /// Optimizer.
    #[arg(long, value_enum)]
    pub optimizer: Option<OptimizerArg>,
    /// SGD momentum in [0, 1).
    #[arg(long, value_parser = args::finite)]
    pub momentum: Option<f64>,
    /// Learning-rate schedule.
    #[arg(long, value_enum)]
    pub schedule: Option<ScheduleArg>,
    /// Accountant reporting (and calibrating) ε.
    #[arg(long, value_enum)]
    pub accountant: Option<AccountantArg>,
    /// Draw the noise from the exact discrete Gaussian on a fine grid.
    #[arg(long)]
    pub exact_noise: bool,
    /// Largest number of records through the model at once (virtual batching).
    #[arg(long = "physical-batch-size", value_name = "N", alias = "physical-batch", value_parser = args::at_least_one)]
    pub physical_batch: Option<u64>,
    /// Evaluate an exponential moving average of the parameters with this decay.
    #[arg(long, value_parser = args::open_unit)]
    pub ema: Option<f64>,
    /// Clip each layer separately (C/√L each) instead of the whole gradient.
    #[arg(long)]
    pub per_layer_clipping: bool,
}

/// Hidden sizes of `--model mlp` when neither the recipe nor `--hidden` gives any.
const DEFAULT_MLP_HIDDEN: [usize; 1] = [128];

impl TrainingArgs {
    /// `base` with every given flag applied.
    pub fn apply(&self, mut cfg: TrainConfig) -> CliResult<TrainConfig> {
        if let Some(m) = &self.model {
            cfg.model = m.clone();
        }
        if let Some(h) = &self.hidden {
            cfg.hidden = h.iter().map(|&v| v as usize).collect();
        }
        if let Some(path) = &self.arch {
            let spec = crate::commands::arch::load_arch(path)?;
            cfg.model = spec.name.clone();
            cfg.arch = Some(spec);
        }
        // `--model mlp` on a recipe made for another model has no hidden sizes: give it one
        // layer rather than failing on a flag the user never had to know about.
        if cfg.model.eq_ignore_ascii_case("mlp") && cfg.hidden.is_empty() {
            cfg.hidden = DEFAULT_MLP_HIDDEN.to_vec();
        }
        match (self.epsilon, self.noise_multiplier, self.non_private) {
            (Some(e), _, _) => cfg.privacy = Privacy::TargetEpsilon(e),
            (_, Some(s), _) => cfg.privacy = Privacy::NoiseMultiplier(s),
            (_, _, true) => cfg.privacy = Privacy::NonPrivate,
            _ => {}
        }
        set(&mut cfg.delta, self.delta);
        set(&mut cfg.epochs, self.epochs);
        set(&mut cfg.batch_size, self.batch_size.map(|b| b as usize));
        set(&mut cfg.max_grad_norm, self.max_grad_norm.map(|c| c as f32));
        set(&mut cfg.lr, self.lr.map(|l| l as f32));
        set(
            &mut cfg.physical_batch,
            self.physical_batch.map(|b| b as usize),
        );
        if let Some(e) = self.ema {
            cfg.ema = Some(e as f32);
        }
        cfg.exact_noise |= self.exact_noise;
        cfg.per_layer_clipping |= self.per_layer_clipping;
        match (self.optimizer, self.momentum) {
            (Some(OptimizerArg::Adam), Some(m)) => {
                return Err(CliError::usage(format!(
                    "--momentum {m} applies to sgd, not adam"
                )));
            }
            (Some(OptimizerArg::Adam), None) => cfg.optimizer = OptimizerKind::Adam,
            (Some(OptimizerArg::Sgd), m) => {
                // Keep a recipe's momentum unless --momentum says otherwise.
                let kept = match cfg.optimizer {
                    OptimizerKind::Sgd { momentum, .. } => momentum,
                    OptimizerKind::Adam => 0.0,
                };
                let momentum = m.map_or(kept, |m| m as f32);
                cfg.optimizer = OptimizerKind::Sgd {
                    momentum,
                    nesterov: false,
                };
            }
            (None, Some(m)) => match &mut cfg.optimizer {
                OptimizerKind::Sgd { momentum, .. } => *momentum = m as f32,
                OptimizerKind::Adam => {
                    return Err(CliError::usage(format!(
                        "--momentum {m} applies to sgd, not adam"
                    )));
                }
            },
            (None, None) => {}
        }
        if let Some(s) = self.schedule {
            cfg.lr_schedule = match s {
                ScheduleArg::Constant => ScheduleKind::Constant,
                ScheduleArg::Cosine => ScheduleKind::Cosine { min_lr: 0.0 },
            };
        }
        if let Some(a) = self.accountant {
            cfg.accountant = match a {
                AccountantArg::Pld => AccountantKind::Pld,
                AccountantArg::Rdp => AccountantKind::Rdp,
                AccountantArg::Gdp => AccountantKind::Gdp,
            };
        }
        Ok(cfg)
    }

    /// Whether the command line chose the privacy mode.
    pub fn chooses_privacy(&self) -> bool {
        self.epsilon.is_some() || self.noise_multiplier.is_some() || self.non_private
    }
}

fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *field = v;
    }
}

/// Train and test sets: the source's own test split, or a per-record keyed split
/// ([`dpml_data::train_test_split`]: removing one record moves only that record, so the
/// training run's guarantee holds for the data set given).
#[derive(Args, Debug, Clone)]
pub struct SplitArgs {
    /// Share held out for testing when the data set has no test split of its own (each record
    /// independently, so the test size varies around it).
    #[arg(long, value_parser = args::open_unit, default_value = "0.2")]
    pub test_fraction: f64,
    /// Key of the split and folds, 64 hex digits, as an earlier run reported in "split_key":
    /// repeats its split. Without it, training commands draw a fresh key from the run's
    /// generator (so --seed fixes it).
    #[arg(long, value_parser = parse_split_key)]
    pub split_key: Option<SplitKey>,
    /// Deprecated: a split key derived from this number (use --split-key).
    #[arg(long, hide = true, conflicts_with = "split_key")]
    pub split_seed: Option<u64>,
}

fn parse_split_key(s: &str) -> Result<SplitKey, String> {
    s.parse().map_err(|e: dpml_data::DataError| e.to_string())
}

impl SplitArgs {
    /// The key given on the command line: `--split-key`, or one derived from `--split-seed`.
    pub fn given_key(&self) -> Option<SplitKey> {
        self.split_key
            .or_else(|| self.split_seed.map(SplitKey::from_seed))
    }

    /// The run's key: the given one, else a fresh one from `rng`. A key is drawn either way,
    /// so that `--seed S --split-key K` with the K a `--seed S` run reported repeats that run
    /// exactly. The key is published; that reveals nothing of the generator's other output
    /// (ChaCha20 is a cryptographic generator), and the split's guarantee holds for any key.
    pub fn key(&self, rng: &mut dpml_mechanisms::DpRng) -> SplitKey {
        let drawn = SplitKey::from_rng(rng.as_rng());
        self.given_key().unwrap_or(drawn)
    }
}

/// A data set loaded for training: train and test sets, the schema they were read under, and
/// the split key that cut them (`None` when the source brings its own test split).
pub struct Loaded {
    /// The training records.
    pub train: Dataset,
    /// The test records.
    pub test: Dataset,
    /// What is declared about the data, with provenance.
    pub schema: Schema,
    /// The key of the per-record split, when there was one.
    pub split_key: Option<SplitKey>,
}

/// Load `source` under `opts` (its schema), check that what the computation `needs` is
/// declared (before any record is split or used), then split: the source's own test split,
/// else the keyed per-record split of its records under `key`.
///
/// # Errors
/// A usage error naming the flag that declares a missing declaration; a usage error when the
/// source needs a split and `key` is `None`; data errors, among them
/// [`dpml_data::DataError::EmptySplit`].
pub fn load_split(
    source: &Source,
    opts: &LoadOptions,
    needs: Needs,
    test_fraction: f64,
    key: Option<SplitKey>,
) -> CliResult<Loaded> {
    let sets = load(source, opts)?;
    require_declared(&sets.schema, &sets.train, needs)?;
    let (train, test, split_key) = match (sets.test, key) {
        (Some(test), _) => (sets.train, test, None),
        (None, Some(key)) => {
            let (train, test) = train_test_split(&sets.train, test_fraction, &key)?;
            (train, test, Some(key))
        }
        (None, None) => {
            return Err(CliError::usage(format!(
                "{} has no test split of its own: give --split-key HEX, the \"split_key\" of the \
                 run that held records out",
                source.name()
            )));
        }
    };
    Ok(Loaded {
        train,
        test,
        schema: sets.schema,
        split_key,
    })
}

/// Flags of `dpml train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Data set: mnist, fashion-mnist, digits, iris, breast-cancer, wine, csv:PATH.
    #[arg(long, value_parser = args::dataset)]
    pub dataset: Option<Source>,
    /// Label column of a csv: data set.
    #[arg(long)]
    pub label_column: Option<String>,
    /// A named recipe (see `dpml presets`); flags given with it override it.
    #[arg(long)]
    pub preset: Option<String>,
    #[command(flatten)]
    pub training: TrainingArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub seed: SeedArg,
    /// Save the trained model to FILE (safetensors with its architecture and privacy facts;
    /// see `dpml inspect`).
    #[arg(long, value_name = "FILE", alias = "out")]
    pub save_model: Option<PathBuf>,
    /// Write one CSV row per epoch (loss, accuracy, ε so far). Its losses and accuracies are
    /// diagnostics (computed from private data without noise), as its first line says.
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// K-fold cross-validation over all records: mean and standard deviation of the test
    /// accuracy over the K folds (diagnostics). "epsilon" is that of releasing all K models
    /// (each record trains K − 1 of them); "epsilon_per_model" that of one.
    #[arg(long, value_parser = args::at_least_one, conflicts_with_all = ["save_model", "log"])]
    pub folds: Option<u64>,
    /// classification (default) or regression: MSE on the label's value, clamped to the
    /// declared label range (--label-range LO,HI or the schema's; MNIST and digits: 0-9);
    /// test MSE and MAE reported.
    #[arg(long, default_value = "classification", value_parser = super::label_dp::parse::<Task>)]
    pub task: Task,
    /// What is declared about the data (bounds, classes, label range).
    #[command(flatten)]
    pub schema: SchemaArgs,
    /// Local DP: perturb every feature of every training record once before training
    /// (laplace or gaussian; needs public feature ranges: published, or --bounds).
    #[arg(long, requires = "input_epsilon")]
    pub input_perturbation: Option<String>,
    /// ε of each feature's perturbation; a record's ε composes over its features (reported).
    #[arg(long, value_parser = args::positive, requires = "input_perturbation")]
    pub input_epsilon: Option<f64>,
    /// δ of each feature's Gaussian perturbation.
    #[arg(long, value_parser = args::open_unit, default_value = "1e-6")]
    pub input_delta: f64,
    #[command(flatten)]
    pub checkpoint: CheckpointArgs,
}

/// The recipe: preset (if any) overridden by flags; the data set it names.
pub fn recipe(a: &TrainArgs) -> CliResult<(Source, TrainConfig, Option<String>)> {
    let (dataset, base) = match &a.preset {
        Some(name) => {
            let p = dpsgd::preset(name)?;
            let ds: Source = p.dataset.parse()?;
            (Some(ds), p.config)
        }
        None if !a.training.chooses_privacy() => {
            return Err(CliError::usage(
                "choose --epsilon E, --noise-multiplier S or --non-private (or a --preset)",
            ));
        }
        None => (None, TrainConfig::default()),
    };
    let dataset = a
        .dataset
        .clone()
        .or(dataset)
        .ok_or_else(|| CliError::usage("--dataset is required without a --preset"))?;
    let base = match a.preset {
        Some(_) => base,
        None => default_recipe(&dataset)?,
    };
    let cfg = task_recipe(a.task, &a.training, a.training.apply(base)?);
    Ok((dataset, cfg, a.preset.clone()))
}

/// The largest learning rate a regression takes from a recipe made for classification.
const REGRESSION_MAX_RECIPE_LR: f32 = 0.5;

/// `cfg` (a recipe with the flags applied) for `task`: a regression keeps the recipe's
/// learning rate only up to [`REGRESSION_MAX_RECIPE_LR`] unless `--learning-rate` was given.
/// The recipes are tuned for cross-entropy, whose gradient is bounded; the MSE's grows with
/// the error, and digits' logistic recipe (lr 2) diverges on it (test MSE above that of a
/// constant, where 0.5 and 0.2 land near 4 at ε = 3).
pub fn task_recipe(task: Task, flags: &TrainingArgs, mut cfg: TrainConfig) -> TrainConfig {
    if task == Task::Regression && flags.lr.is_none() {
        cfg.lr = cfg.lr.min(REGRESSION_MAX_RECIPE_LR);
    }
    cfg
}

/// The recipe flags start from when no preset is named: a small MLP for tables (the embedded
/// tabular sets and `csv:` files, [`dpsgd::tabular_recipe`]), the `digits-eps1` recipe for the
/// 8x8 digits (the MNIST CNN needs 28x28 records), else the Opacus MNIST example
/// ([`TrainConfig::default`]).
pub fn default_recipe(source: &Source) -> CliResult<TrainConfig> {
    Ok(match source {
        Source::Iris | Source::Wine | Source::BreastCancer | Source::Csv(_) => {
            dpsgd::tabular_recipe()
        }
        Source::Digits => dpsgd::preset("digits-eps1")?.config,
        _ => TrainConfig::default(),
    })
}

/// `cfg` with the run's public normalisation ([`public_normalization`]), unless a preset
/// fixed one and no bounds are declared.
fn normalized(
    a: &TrainArgs,
    source: &Source,
    schema: &Schema,
    data: &Dataset,
    cfg: &TrainConfig,
) -> CliResult<TrainConfig> {
    let mut cfg = cfg.clone();
    if a.preset.is_none() || schema.bounds_provenance == Some(Provenance::Declared) {
        cfg.normalize = public_normalization(source, schema, data)?;
    }
    Ok(cfg)
}

/// What a run of `cfg` for `task` needs declared: classes to learn, bounds to scale or perturb
/// features, and for regression the label range (always: it says what a label's value is,
/// and bounds the targets and their scale).
fn private_needs(cfg: &TrainConfig, task: Task, perturbs_inputs: bool) -> Needs {
    let private = !matches!(cfg.privacy, Privacy::NonPrivate);
    let regression = task == Task::Regression;
    Needs {
        classes: private && !regression,
        bounds: private || perturbs_inputs,
        label_range: regression,
    }
}

/// Run `dpml train`.
pub fn run(a: &TrainArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let (source, cfg, preset) = recipe(a)?;
    cfg.validate()?;
    // Under mpirun every rank must draw the same split and keys.
    let mut rng = crate::cluster::shared_rng(a.seed.rng()?);
    if let Some(k) = a.folds {
        if a.checkpoint.checkpoint.is_some() || a.checkpoint.resume.is_some() {
            return Err(CliError::usage(format!(
                "--folds {k} cannot be checkpointed: drop --checkpoint/--resume"
            )));
        }
        return cross_validate(a, &source, &cfg, k as usize, data_dir, &mut rng, out);
    }
    let resumed = a.checkpoint.resumed()?;
    let checkpoint_plan = a.checkpoint.plan()?;
    // The key is drawn either way, so a seeded resumed run consumes its generator as the
    // original did; a resumed run holds out the records its checkpoint's run held out.
    let drawn = a.split.key(&mut rng);
    let key = match resumed
        .as_ref()
        .map(checkpoint_args::split_key)
        .transpose()?
    {
        Some(Some(k)) => k,
        _ => drawn,
    };
    let opts = a.schema.load_options(data_dir, a.label_column.as_deref())?;
    let Loaded {
        mut train,
        test,
        schema,
        split_key,
    } = load_split(
        &source,
        &opts,
        private_needs(&cfg, a.task, a.input_perturbation.is_some()),
        a.split.test_fraction,
        Some(key),
    )?;
    let cfg = normalized(a, &source, &schema, &train, &cfg)?;
    let perturbation = match (&a.input_perturbation, a.input_epsilon) {
        (Some(name), Some(eps)) => {
            let mechanism = match name.as_str() {
                "laplace" => InputMechanism::Laplace,
                "gaussian" => InputMechanism::Gaussian {
                    delta: a.input_delta,
                },
                other => {
                    return Err(CliError::usage(format!(
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
                InputBudget::PerFeature(eps),
                &mut rng,
            )?)
        }
        _ => None,
    };
    let end = crate::cluster::with_comm(|comm| {
        let run = dpsgd::Run {
            task: a.task,
            comm,
            checkpoint: checkpoint_plan.clone(),
            resume: resumed,
            stop_after: a.checkpoint.stop_after_steps,
            context: checkpoint_args::context(split_key),
        };
        train_run_with_progress(&run, &cfg, &train, Some(&test), &mut rng, out)
    })?;
    let outcome = match end {
        dpsgd::RunEnd::Finished(o) => *o,
        dpsgd::RunEnd::Stopped { step, steps } => {
            return stopped(step, steps, checkpoint_plan.as_ref(), out);
        }
    };
    // Only the root of a job of several processes writes files.
    let root = crate::cluster::is_root();
    // Local DP on the features alone protects neither labels nor membership; with DP-SGD on
    // top, ε is DP-SGD's over whole records.
    let model = match (&perturbation, &outcome.event) {
        (Some(_), None) => training_privacy_model(neighbouring::FEATURES),
        _ => training_privacy_model(neighbouring::ADD_REMOVE),
    };
    if let (Some(path), true) = (&a.save_model, root) {
        let mut facts = ModelFacts::from_training(
            &outcome.report,
            &privacy_model::dataset_label(&source),
            train.n,
            neighbouring::ADD_REMOVE,
        );
        facts = facts.with_objective(Objective::new(a.task, train.n_classes), train.n_classes);
        if let Some(p) = &perturbation {
            facts = facts.with_input_perturbation(p, neighbouring::FEATURES);
        }
        dpsgd::save_with_facts(path, &outcome.model, &outcome.input, Some(&facts))?;
    }
    if let (Some(path), true) = (&a.log, root) {
        write_log(path, &outcome.report.epoch_log)?;
    }
    let mut report = match serde_json::to_value(&outcome.report).map_err(CliError::internal)? {
        Value::Object(map) => map,
        _ => return Err(CliError::internal("training report is not an object")),
    };
    report.remove("epoch_log");
    let mut release = Release::from_map(report, &model);
    release.diagnose(TRAINING_DIAGNOSTICS);
    release
        .insert("dataset", json!(source.name()))
        .insert("model", json!(cfg.model))
        .insert("preset", json!(preset))
        .insert("train_size", json!(train.n))
        .insert("batch_size", json!(cfg.batch_size))
        .insert("learning_rate", json!(cfg.lr))
        .insert("model_file", json!(a.save_model))
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
    out.emit(&release.into_value());
    Ok(())
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

/// Input normalisation from public constants only: MNIST-family mean/std; else the data set's
/// one public feature range (digits' [0, 16]); else min-max scaling from the schema's feature
/// bounds, clamped to [0, 1] (the built-in ranges of iris, wine and breast-cancer, or the
/// user's declared ones, which also replace the first two); else none (a `csv:` table without
/// declared bounds, in a non-private run).
///
/// # Errors
/// A usage error when declared per-feature bounds do not number the data's features.
pub fn public_normalization(
    source: &Source,
    schema: &Schema,
    data: &Dataset,
) -> CliResult<Normalization> {
    let declared = schema.bounds_provenance == Some(Provenance::Declared);
    Ok(match source {
        Source::Mnist if !declared => Normalization::mean_std(MNIST_MEAN_STD),
        Source::FashionMnist if !declared => Normalization::mean_std(FASHION_MNIST_MEAN_STD),
        _ if !declared && data.feature_range.is_some() => Normalization::PublicRange,
        _ => match schema.feature_bounds(data.n_features())? {
            Some(r) => Normalization::feature_ranges(&r),
            None => Normalization::None,
        },
    })
}

/// Every record of `source`, its own test split included (for cross-validation and
/// clustering), with its schema.
pub fn load_all(source: &Source, opts: &LoadOptions) -> CliResult<(Dataset, Schema)> {
    let sets = load(source, opts)?;
    let mut all = sets.train;
    if let Some(test) = sets.test {
        all.x.extend_from_slice(&test.x);
        all.y.extend_from_slice(&test.y);
        all.n += test.n;
    }
    Ok((all, sets.schema))
}

/// `dpml train --folds K`: one model per fold, each tested on its held-out fold.
fn cross_validate(
    a: &TrainArgs,
    source: &Source,
    cfg: &TrainConfig,
    k: usize,
    data_dir: Option<&Path>,
    rng: &mut dpml_mechanisms::DpRng,
    out: Output,
) -> CliResult<()> {
    let key = a.split.key(rng);
    let opts = a.schema.load_options(data_dir, a.label_column.as_deref())?;
    let (all, schema) = load_all(source, &opts)?;
    require_declared(&schema, &all, private_needs(cfg, a.task, false))?;
    let cfg = normalized(a, source, &schema, &all, cfg)?;
    let mut events = Vec::with_capacity(k);
    let mut mses = Vec::with_capacity(k);
    let cv = k_fold::<CliError>(&cfg, &all, k, &key, rng, &mut |i, cfg, train, test, rng| {
        diag!("fold {}/{k}", i + 1);
        let outcome = train_task_with_progress(a.task, cfg, train, Some(test), rng, out)?;
        events.push(outcome.event.clone());
        mses.extend(outcome.report.test_mse);
        Ok(outcome)
    })?;
    let accountant = dpsgd::accountant(cfg.accountant);
    let epsilon_all_folds = epsilon_all_folds(&events, accountant.as_ref(), cfg.delta)?;
    let (mean, std) = mean_std(&cv.accuracies);
    let model = PrivacyModel::new(
        neighbouring::ADD_REMOVE,
        &[
            public::FOLD_SIZES,
            public::SCHEMA,
            public::RECIPE,
            public::SPLIT_RULE,
        ],
    );
    let mut release = Release::new(&model);
    release
        .insert("folds", json!(k))
        .insert("epsilon", json!(epsilon_all_folds))
        .insert("epsilon_all_folds", json!(epsilon_all_folds))
        .insert("epsilon_per_model", json!(cv.epsilon()))
        .insert("epsilon_per_fold", json!(cv.epsilons))
        .insert("event_per_fold", json!(events))
        .insert("delta", json!(cfg.delta))
        .insert("accountant", json!(accountant.name()))
        .insert("dataset", json!(source.name()))
        .insert("model", json!(cfg.model))
        .insert("normalize", json!(cfg.normalize))
        .insert("split_key", json!(key.to_string()))
        .insert("fold_sizes", json!(cv.test_sizes))
        .insert(
            "note",
            json!(
                "epsilon = epsilon_all_folds: the guarantee of releasing all K models, each record \
                 being in the training set of K - 1 of them; epsilon_per_model is one model's"
            ),
        )
        .insert("seeded", json!(rng.is_seeded()))
        .insert("task", json!(a.task.name()));
    if a.task == Task::Regression {
        // A regression's score is its test MSE; its "accuracy" (predictions within 0.5 of the
        // label) is not worth a headline.
        let (mse_mean, mse_std) = mean_std(&mses);
        release
            .diagnostic("test_mse_mean", json!(mse_mean))
            .diagnostic("test_mse_std", json!(mse_std))
            .diagnostic("fold_mses", json!(mses));
    } else {
        release
            .diagnostic("test_accuracy_mean", json!(mean))
            .diagnostic("test_accuracy_std", json!(std))
            .diagnostic("fold_accuracies", json!(cv.accuracies));
    }
    out.emit(&release.into_value());
    Ok(())
}

/// Train with progress on stderr: a bar over the steps on a terminal, otherwise one line per
/// epoch (elapsed time, samples/s, ε so far and, unless `--no-diagnostics`, loss and test
/// accuracy), for `task`: classification or regression of the label value.
pub fn train_task_with_progress(
    task: Task,
    cfg: &TrainConfig,
    train: &Dataset,
    test: Option<&Dataset>,
    rng: &mut dpml_mechanisms::DpRng,
    out: Output,
) -> CliResult<dpsgd::TrainOutcome> {
    let run = dpsgd::Run {
        task,
        ..dpsgd::Run::default()
    };
    match train_run_with_progress(&run, cfg, train, test, rng, out)? {
        dpsgd::RunEnd::Finished(o) => Ok(*o),
        dpsgd::RunEnd::Stopped { .. } => Err(CliError::internal(
            "a run without --stop-after-steps stopped early",
        )),
    }
}

/// A run stopped by `--stop-after-steps`: says where its checkpoint is and how to continue;
/// no result is printed as if the run had finished (with `--json`, a `"status": "stopped"`
/// object without any model figures).
fn stopped(
    step: u64,
    steps: u64,
    plan: Option<&dpsgd::CheckpointPlan>,
    out: Output,
) -> CliResult<()> {
    let dir = plan
        .map(|p| p.dir.display().to_string())
        .unwrap_or_default();
    if crate::cluster::is_root() {
        diag!("dpml: stopped after step {step} of {steps}; continue with --resume {dir}");
    }
    if out.json {
        out.emit(&json!({
            "status": "stopped",
            "steps_done": step,
            "steps": steps,
            "checkpoint": dir,
        }));
    }
    Ok(())
}

/// As [`train_task_with_progress`] for a [`dpsgd::Run`] (processes, checkpoints).
pub fn train_run_with_progress(
    run: &dpsgd::Run<'_>,
    cfg: &TrainConfig,
    train: &Dataset,
    test: Option<&Dataset>,
    rng: &mut dpml_mechanisms::DpRng,
    out: Output,
) -> CliResult<dpsgd::RunEnd> {
    let bar = crate::progress::Progress::new(0, "train", "step", false);
    let (mut epochs, mut samples) = (0u64, 0u64);
    let mut observer = |p: &Progress| match p {
        Progress::Started {
            steps,
            steps_per_epoch,
            noise_multiplier,
            ..
        } => {
            epochs = steps.div_ceil((*steps_per_epoch).max(1));
            bar.set_length(*steps);
            bar.set_position(0);
            bar.start_work();
            if let Some(s) = noise_multiplier {
                bar.line(&format!("noise multiplier σ = {}", short(*s)), None, "");
            }
        }
        Progress::Step {
            step,
            loss,
            batch_size,
            ..
        } => {
            samples += *batch_size as u64;
            bar.set_position(*step);
            if loss.is_finite() && out.diagnostics {
                bar.set_message(format!("loss {loss:.3}"));
            }
        }
        Progress::Epoch(log) => {
            let mut tail = Vec::new();
            if out.diagnostics {
                tail.push(format!("loss {}", short(log.train_loss)));
                match (log.test_mse, log.test_accuracy) {
                    (Some(mse), _) => tail.push(format!("test MSE {}", short(mse))),
                    (None, Some(a)) => tail.push(format!("test accuracy {:.2}%", 100.0 * a)),
                    (None, None) => {}
                }
            }
            if let Some(e) = log.epsilon {
                tail.push(format!("ε {}", short(e)));
            }
            bar.line(
                &format!("epoch {}/{epochs}", log.epoch),
                Some((samples as f64, "sample")),
                &tail.join(", "),
            );
        }
    };
    // Models with fixed leading layers (the scattering transform) map every record through
    // them once before the first step.
    let mut prefix_observer = |p: &dpsgd::train::PrefixProgress| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(format!("features of the {} records", p.set));
        if p.done == p.total {
            bar.line(
                &format!("features of the {} {} records", p.total, p.set),
                None,
                "",
            );
        }
    };
    let end = dpsgd::train_run(
        run,
        cfg,
        train,
        test,
        rng,
        &mut observer,
        &mut prefix_observer,
    )?;
    bar.finish_and_clear();
    Ok(end)
}

/// `--log`: one CSV row per epoch, after a `#` line saying the losses and accuracies are
/// diagnostics (readers skip it as a comment, e.g. pandas' `comment="#"`).
fn write_log(path: &Path, log: &[EpochLog]) -> CliResult<()> {
    let err = |e: std::io::Error| CliError::usage(format!("writing {}: {e}", path.display()));
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

/// Flags of `dpml eval`.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// A model file saved by `dpml train --save-model`.
    #[arg(long, value_name = "FILE", alias = "model", value_parser = args::input_path)]
    pub model_file: PathBuf,
    /// Data set to evaluate on (its test split).
    #[arg(long, value_parser = args::dataset)]
    pub dataset: Source,
    /// Label column of a csv: data set.
    #[arg(long)]
    pub label_column: Option<String>,
    /// The training run's split: its --test-fraction and "split_key" (needed for a data set
    /// without a test split of its own).
    #[command(flatten)]
    pub split: SplitArgs,
    /// What is declared about the data (as for `dpml train`).
    #[command(flatten)]
    pub schema: SchemaArgs,
}

/// Run `dpml eval`.
pub fn eval(a: &EvalArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let opts = a.schema.load_options(data_dir, a.label_column.as_deref())?;
    let given = a.split.given_key();
    let test = load_split(
        &a.dataset,
        &opts,
        Needs::default(),
        a.split.test_fraction,
        given,
    )?
    .test;
    let mut saved = dpsgd::load_saved(&a.model_file)?;
    let e = dpsgd::evaluate_saved(&mut saved, &test)?;
    let mut diagnostics =
        json!({"test_accuracy": e.accuracy, "test_loss": e.loss, "test_size": e.n});
    if let (Some(mse), Some(mae)) = (e.mse, e.mae) {
        diagnostics["test_mse"] = json!(mse);
        diagnostics["test_mae"] = json!(mae);
    }
    // Evaluation releases nothing: every figure is a diagnostic. The model's own guarantee is
    // what its file records.
    out.emit(&json!({
        "model_file": a.model_file,
        "model_privacy": facts_json(saved.facts.as_ref())?,
        "dataset": a.dataset.name(),
        privacy_model::DIAGNOSTICS_NOTE_KEY: privacy_model::experiment_note("every figure under diagnostics"),
        privacy_model::DIAGNOSTICS_KEY: diagnostics,
    }));
    Ok(())
}

/// Run `dpml presets`.
pub fn presets(out: Output) -> CliResult<()> {
    let list: Vec<Value> = dpsgd::presets()
        .into_iter()
        .map(|p| {
            json!({"name": p.name, "description": p.description, "dataset": p.dataset,
                   "command": format!("dpml train --preset {}", p.name), "config": p.config})
        })
        .collect();
    out.emit(&json!({ "presets": list }));
    Ok(())
}
