//! `dpml train` and `dpml eval`: DP-SGD (or non-private) training of a named model on a data
//! set, with a progress bar showing loss, accuracy and the ε spent so far; and evaluation of a
//! saved model. The training flags here are shared by every command that trains.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use dpml_core::observe::{Event, Observer};
use dpml_core::train::{
    self as core_train, EvalOptions, InputPerturbationOptions, OptimizerChoice, RecipeOptions,
    ScheduleChoice, SplitOptions, TrainEnd, TrainOptions,
};
use dpml_data::{Source, SplitKey};
use dpml_learn::dpsgd::{AccountantKind, Progress, Task, TrainConfig};

pub use dpml_core::train::public_normalization;

use super::checkpoint_args::CheckpointArgs;
use crate::args::{self, SeedArg};
use crate::error::CliResult;
use crate::ledger_args::LedgerArgs;
use crate::output::{Output, diag};
use crate::schema_args::SchemaArgs;
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
    // Architecture to train.
    #[arg(long, value_name = "NAME", value_parser = args::ModelName, help = recipe_help(
        "Architecture to train (cnn, cnn-tanh and scatter-cnn take 28x28 images; logreg, mlp and scatter-linear any records)",
        |c| c.model.clone()))]
    pub model: Option<String>,
    /// Train the network described in this JSON file (see `dpml arch show`) instead of a
    /// named model; its input_shape must be the data's record shape.
    #[arg(long, value_name = "FILE", value_parser = args::input_path, conflicts_with_all = ["model", "hidden"])]
    pub arch: Option<std::path::PathBuf>,
    // Hidden layer sizes of mlp.
    #[arg(long, value_delimiter = ',', value_parser = args::at_least_one_at_most(args::MAX_HIDDEN_WIDTH), help = recipe_help(
        "Hidden layer sizes of mlp, e.g. 512,256 (each at most 65536; 128 for an mlp on a recipe without any)",
        |c| format!("{:?}", c.hidden)))]
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
    // δ of the (ε, δ) guarantee.
    #[arg(long, value_parser = args::open_unit, help = recipe_help(
        "δ of the (ε, δ) guarantee", |c| short(c.delta)))]
    pub delta: Option<f64>,
    // Epochs.
    #[arg(long, value_parser = args::positive, help = recipe_help(
        "Epochs (the run has ⌈E·N/B⌉ steps)", |c| short(c.epochs)))]
    pub epochs: Option<f64>,
    // Expected (Poisson) batch size B.
    #[arg(long, value_parser = args::at_least_one, help = recipe_help(
        "Expected (Poisson) batch size B (a recipe's larger than the training set is cut to a quarter of it, as the output's notes say)",
        |c| c.batch_size.to_string()))]
    pub batch_size: Option<u64>,
    // Clipping norm C.
    #[arg(long, value_parser = args::positive, help = recipe_help(
        "Clipping norm C of each per-sample gradient", |c| short(f64::from(c.max_grad_norm))))]
    pub max_grad_norm: Option<f64>,
    // Learning rate.
    #[arg(long = "learning-rate", alias = "lr", value_parser = args::positive, help = recipe_help(
        "Learning rate", |c| short(f64::from(c.lr))))]
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
    // Accountant reporting (and calibrating) ε.
    #[arg(long, value_enum, help = recipe_help(
        "Accountant reporting (and calibrating) ε", |c| c.accountant.name().to_string()))]
    pub accountant: Option<AccountantArg>,
    /// Draw the noise from the exact discrete Gaussian on a fine grid (the default of private
    /// runs; accepted for scripts that ask for it).
    #[arg(long)]
    pub exact_noise: bool,
    /// Draw the noise from the floating-point Gaussian instead of the exact discrete one.
    #[arg(long, conflicts_with = "exact_noise")]
    pub float_noise: bool,
    /// Largest number of records through the model at once (virtual batching; models that keep
    /// much per record, such as convolutions, use fewer, about 32 MiB of state a chunk).
    #[arg(long = "physical-batch-size", value_name = "N", alias = "physical-batch", value_parser = args::at_least_one)]
    pub physical_batch: Option<u64>,
    /// Evaluate an exponential moving average of the parameters with this decay.
    #[arg(long, value_parser = args::open_unit)]
    pub ema: Option<f64>,
    /// Clip each layer separately (C/√L each) instead of the whole gradient.
    #[arg(long)]
    pub per_layer_clipping: bool,
}

/// `--help`'s text of a recipe flag: `what`, then its default in each recipe the library
/// starts from ([`core_train::default_help`]), `show` formatting the field.
fn recipe_help(what: &str, show: impl Fn(&TrainConfig) -> String) -> String {
    format!("{what} [default: {}]", core_train::default_help(show))
}

impl TrainingArgs {
    /// The recipe overrides these flags give, for the library.
    pub fn options(&self) -> RecipeOptions {
        RecipeOptions {
            model: self.model.clone(),
            arch: self.arch.clone(),
            arch_spec: None,
            hidden: self
                .hidden
                .as_ref()
                .map(|h| h.iter().map(|&v| v as usize).collect()),
            epsilon: self.epsilon,
            noise_multiplier: self.noise_multiplier,
            non_private: self.non_private,
            delta: self.delta,
            epochs: self.epochs,
            batch_size: self.batch_size.map(|b| b as usize),
            max_grad_norm: self.max_grad_norm,
            lr: self.lr,
            optimizer: self.optimizer.map(|o| match o {
                OptimizerArg::Sgd => OptimizerChoice::Sgd,
                OptimizerArg::Adam => OptimizerChoice::Adam,
            }),
            momentum: self.momentum,
            schedule: self.schedule.map(|s| match s {
                ScheduleArg::Constant => ScheduleChoice::Constant,
                ScheduleArg::Cosine => ScheduleChoice::Cosine,
            }),
            accountant: self.accountant.map(|a| match a {
                AccountantArg::Pld => AccountantKind::Pld,
                AccountantArg::Rdp => AccountantKind::Rdp,
                AccountantArg::Gdp => AccountantKind::Gdp,
            }),
            exact_noise: self.exact_noise,
            float_noise: self.float_noise,
            physical_batch: self.physical_batch.map(|b| b as usize),
            ema: self.ema,
            per_layer_clipping: self.per_layer_clipping,
        }
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

    /// The split options these flags give, for the library.
    pub fn options(&self) -> SplitOptions {
        SplitOptions {
            test_fraction: self.test_fraction,
            key: self.given_key(),
        }
    }

    /// The run's key ([`SplitOptions::key`]).
    pub fn key(&self, rng: &mut dpml_mechanisms::DpRng) -> SplitKey {
        self.options().key(rng)
    }
}

/// What a training command trains on and from which recipe: the data set (else the preset's)
/// and a named recipe.
#[derive(Args, Debug, Clone)]
pub struct SourceArgs {
    #[arg(long, value_parser = args::dataset, help = concat!("Data set: ", args::dataset_help!()))]
    pub dataset: Option<Source>,
    /// Label column of a csv: data set.
    #[arg(long)]
    pub label_column: Option<String>,
    /// A named recipe (see `dpml presets`); flags given with it override it.
    #[arg(long)]
    pub preset: Option<String>,
}

/// Flags of `dpml train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    #[command(flatten)]
    pub source: SourceArgs,
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
    #[command(flatten)]
    pub ledger: LedgerArgs,
}

impl TrainArgs {
    /// What these flags ask of the library's training workflow.
    fn options(&self, data_dir: Option<&Path>) -> TrainOptions {
        TrainOptions {
            dataset: self.source.dataset.clone(),
            label_column: self.source.label_column.clone(),
            data_dir: data_dir.map(Path::to_path_buf),
            preset: self.source.preset.clone(),
            recipe: self.training.options(),
            task: self.task,
            split: self.split.options(),
            declarations: self.schema.declarations(),
            folds: self.folds.map(|k| k as usize),
            save_model: self.save_model.clone(),
            log: self.log.clone(),
            // Clap requires the two together.
            input_perturbation: self
                .input_perturbation
                .as_ref()
                .zip(self.input_epsilon)
                .map(|(mechanism, epsilon)| InputPerturbationOptions {
                    mechanism: mechanism.clone(),
                    epsilon,
                    delta: self.input_delta,
                }),
            checkpoint: self.checkpoint.options(self.seed.seed),
        }
    }
}

/// Run `dpml train`.
pub fn run(a: &TrainArgs, data_dir: Option<&Path>, out: Output) -> CliResult<()> {
    let options = a.options(data_dir);
    // Under mpirun every rank must draw the same split and keys.
    let mut rng = crate::cluster::shared_rng(a.seed.rng()?);
    let ledger = a.ledger.open(&a.seed)?;
    let mut bars = Bars::new(out);
    let end = crate::cluster::with_comm(|comm| {
        core_train::train(&options, &mut rng, comm, &mut bars, ledger.as_ref())
    })?;
    match end {
        TrainEnd::Released(release) => out.emit(&release),
        TrainEnd::Stopped {
            step,
            steps,
            checkpoint,
        } => stopped(step, steps, checkpoint.as_deref(), out),
    }
    Ok(())
}

/// A run stopped by `--stop-after-steps`: says where its checkpoint is and how to continue;
/// no result is printed as if the run had finished (with `--json`, a `"status": "stopped"`
/// object without any model figures).
fn stopped(step: u64, steps: u64, checkpoint: Option<&Path>, out: Output) {
    let dir = checkpoint
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if crate::cluster::is_root() {
        diag!("dpml: stopped after step {step} of {steps}; continue with --resume {dir}");
    }
    if out.json {
        out.emit(&serde_json::json!({
            "status": "stopped",
            "steps_done": step,
            "steps": steps,
            "checkpoint": dir,
        }));
    }
}

/// Training progress on stderr: a bar over the steps of each run on a terminal, otherwise one
/// line per epoch (elapsed time, samples/s, ε so far and, unless `--no-diagnostics`, loss and
/// test accuracy); a line per stage (`fold 2/5`).
pub struct Bars {
    out: Output,
    run: Option<RunBar>,
}

/// The bar of the run in progress.
struct RunBar {
    bar: crate::progress::Progress,
    epochs: u64,
    samples: u64,
}

impl Bars {
    /// No run in progress yet.
    pub fn new(out: Output) -> Self {
        Self { out, run: None }
    }
}

impl Observer for Bars {
    fn observe(&mut self, event: Event<'_>) {
        match event {
            Event::Stage(what) => diag!("{what}"),
            Event::RunStarted => {
                self.run = Some(RunBar {
                    bar: crate::progress::Progress::new(0, "train", "step", false),
                    epochs: 0,
                    samples: 0,
                });
            }
            Event::RunFinished => {
                if let Some(r) = self.run.take() {
                    r.bar.finish_and_clear();
                }
            }
            Event::Training(p) => {
                if let Some(r) = &mut self.run {
                    r.training(p, self.out.diagnostics);
                }
            }
            Event::Prefix(p) => {
                // Models with fixed leading layers (the scattering transform) map every
                // record through them once before the first step.
                if let Some(r) = &self.run {
                    r.bar.set_length(p.total as u64);
                    r.bar.set_position(p.done as u64);
                    r.bar
                        .set_message(format!("features of the {} records", p.set));
                    if p.done == p.total {
                        r.bar.line(
                            &format!("features of the {} {} records", p.total, p.set),
                            None,
                            "",
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

impl RunBar {
    fn training(&mut self, p: &Progress, diagnostics: bool) {
        let bar = &self.bar;
        match p {
            Progress::Started {
                steps,
                epochs,
                noise_multiplier,
                ..
            } => {
                self.epochs = *epochs;
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
                self.samples += *batch_size as u64;
                bar.set_position(*step);
                if loss.is_finite() && diagnostics {
                    bar.set_message(format!("loss {loss:.3}"));
                }
            }
            Progress::Epoch(log) => {
                let mut tail = Vec::new();
                if diagnostics {
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
                    &format!("epoch {}/{}", log.epoch, self.epochs),
                    Some((self.samples as f64, "sample")),
                    &tail.join(", "),
                );
            }
        }
    }
}

/// Flags of `dpml eval`.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// A model file saved by `dpml train --save-model`.
    #[arg(long, value_name = "FILE", alias = "model", value_parser = args::input_path)]
    pub model_file: PathBuf,
    #[arg(long, value_parser = args::dataset,
          help = concat!("Data set to evaluate on (its test split): ", args::dataset_help!()))]
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
    let options = EvalOptions {
        model_file: a.model_file.clone(),
        dataset: a.dataset.clone(),
        label_column: a.label_column.clone(),
        data_dir: data_dir.map(Path::to_path_buf),
        split: a.split.options(),
        declarations: a.schema.declarations(),
    };
    out.emit(&core_train::eval(&options)?);
    Ok(())
}

/// Run `dpml presets`.
pub fn presets(out: Output) -> CliResult<()> {
    out.emit(&core_train::presets());
    Ok(())
}
