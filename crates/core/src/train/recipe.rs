//! The recipe of a training run: a named preset or the data source's default, with the
//! caller's overrides applied.

use std::path::PathBuf;

use dpml_data::Source;
use dpml_learn::dpsgd::{
    self, AccountantKind, ModelSpec, OptimizerKind, Privacy, ScheduleKind, Task, TrainConfig,
};

use crate::error::{Error, Result};
use crate::schema::Needs;

/// Optimizers a caller may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptimizerChoice {
    /// SGD (with the recipe's or the given momentum).
    Sgd,
    /// Adam.
    Adam,
}

/// Learning-rate schedules a caller may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleChoice {
    /// The same rate throughout.
    Constant,
    /// Cosine annealing to 0 over the run.
    Cosine,
}

/// Overrides of a recipe. Every one is optional so that a preset (or a workflow's own
/// defaults) can supply it and a given value overrides it. Error messages name the command
/// line's flags, which every front documents.
#[derive(Debug, Clone, Default)]
pub struct RecipeOptions {
    /// Architecture name.
    pub model: Option<String>,
    /// A network described in this JSON file instead of a named model.
    pub arch: Option<PathBuf>,
    /// A network given as a description (the JSON of an `--arch` file, e.g. the Python
    /// estimators' `arch=` dict) instead of a named model.
    pub arch_spec: Option<ModelSpec>,
    /// Hidden layer sizes of mlp.
    pub hidden: Option<Vec<usize>>,
    /// Target ε: σ is calibrated before training.
    pub epsilon: Option<f64>,
    /// Noise multiplier σ.
    pub noise_multiplier: Option<f64>,
    /// Train without privacy.
    pub non_private: bool,
    /// δ of the (ε, δ) guarantee.
    pub delta: Option<f64>,
    /// Epochs.
    pub epochs: Option<f64>,
    /// Expected (Poisson) batch size.
    pub batch_size: Option<usize>,
    /// Clipping norm of each per-sample gradient.
    pub max_grad_norm: Option<f64>,
    /// Learning rate.
    pub lr: Option<f64>,
    /// Optimizer.
    pub optimizer: Option<OptimizerChoice>,
    /// SGD momentum.
    pub momentum: Option<f64>,
    /// Learning-rate schedule.
    pub schedule: Option<ScheduleChoice>,
    /// Accountant reporting (and calibrating) ε.
    pub accountant: Option<AccountantKind>,
    /// Draw the noise from the exact discrete Gaussian (the default of private recipes; kept
    /// for scripts that ask for it).
    pub exact_noise: bool,
    /// Draw the noise from the floating-point Gaussian instead.
    pub float_noise: bool,
    /// Largest number of records through the model at once.
    pub physical_batch: Option<usize>,
    /// Decay of an exponential moving average of the parameters.
    pub ema: Option<f64>,
    /// Clip each layer separately.
    pub per_layer_clipping: bool,
}

/// Hidden sizes of `mlp` when neither the recipe nor the overrides give any.
const DEFAULT_MLP_HIDDEN: [usize; 1] = [128];

impl RecipeOptions {
    /// `cfg` with every given override applied.
    ///
    /// # Errors
    /// A usage error for an unreadable architecture file or a momentum given to Adam.
    pub fn apply(&self, mut cfg: TrainConfig) -> Result<TrainConfig> {
        if let Some(m) = &self.model {
            cfg.model = m.clone();
        }
        if let Some(h) = &self.hidden {
            cfg.hidden = h.clone();
        }
        let spec = match (&self.arch, &self.arch_spec) {
            (Some(path), _) => Some(crate::arch::load_arch(path)?),
            (None, spec) => spec.clone(),
        };
        if let Some(spec) = spec {
            cfg.model = spec.name.clone();
            cfg.arch = Some(spec);
        }
        // `mlp` on a recipe made for another model has no hidden sizes: give it one layer
        // rather than failing on a setting the user never had to know about.
        if cfg.model.eq_ignore_ascii_case("mlp") && cfg.hidden.is_empty() {
            cfg.hidden = DEFAULT_MLP_HIDDEN.to_vec();
        }
        match (self.epsilon, self.noise_multiplier, self.non_private) {
            (Some(e), Some(s), _) => {
                return Err(Error::usage(format!(
                    "give one of --epsilon {e} and --noise-multiplier {s}, not both"
                )));
            }
            (Some(e), _, _) => cfg.privacy = Privacy::TargetEpsilon(e),
            (_, Some(s), _) => cfg.privacy = Privacy::NoiseMultiplier(s),
            (_, _, true) => cfg.privacy = Privacy::NonPrivate,
            _ => {}
        }
        set(&mut cfg.delta, self.delta);
        set(&mut cfg.epochs, self.epochs);
        set(&mut cfg.batch_size, self.batch_size);
        set(&mut cfg.max_grad_norm, self.max_grad_norm.map(|c| c as f32));
        set(&mut cfg.lr, self.lr.map(|l| l as f32));
        set(&mut cfg.physical_batch, self.physical_batch);
        if let Some(e) = self.ema {
            cfg.ema = Some(e as f32);
        }
        if self.exact_noise || self.float_noise {
            let flag = if self.exact_noise {
                "--exact-noise"
            } else {
                "--float-noise"
            };
            if self.exact_noise && self.float_noise {
                return Err(Error::usage(
                    "--exact-noise and --float-noise exclude each other",
                ));
            }
            if matches!(cfg.privacy, Privacy::NonPrivate) {
                return Err(Error::usage(format!(
                    "{flag} needs a private run (--epsilon or --noise-multiplier)"
                )));
            }
            cfg.exact_noise = self.exact_noise;
        }
        cfg.per_layer_clipping |= self.per_layer_clipping;
        let adam_momentum =
            |m: f64| Error::usage(format!("--momentum {m} applies to sgd, not adam"));
        match (self.optimizer, self.momentum) {
            (Some(OptimizerChoice::Adam), Some(m)) => return Err(adam_momentum(m)),
            (Some(OptimizerChoice::Adam), None) => cfg.optimizer = OptimizerKind::Adam,
            (Some(OptimizerChoice::Sgd), m) => {
                // Keep a recipe's momentum unless a momentum is given.
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
                OptimizerKind::Adam => return Err(adam_momentum(m)),
            },
            (None, None) => {}
        }
        if let Some(s) = self.schedule {
            cfg.lr_schedule = match s {
                ScheduleChoice::Constant => ScheduleKind::Constant,
                ScheduleChoice::Cosine => ScheduleKind::Cosine { min_lr: 0.0 },
            };
        }
        if let Some(a) = self.accountant {
            cfg.accountant = a;
        }
        Ok(cfg)
    }

    /// Whether the overrides choose the privacy mode.
    pub fn chooses_privacy(&self) -> bool {
        self.epsilon.is_some() || self.noise_multiplier.is_some() || self.non_private
    }
}

fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *field = v;
    }
}

/// The recipe of a run: the `preset` (if any) overridden by `overrides`, for `task`; and the
/// data set: `dataset`, else the preset's.
///
/// # Errors
/// A usage error for an unknown preset, a run that chooses no privacy mode without a preset,
/// no data set, or overrides [`RecipeOptions::apply`] refuses.
pub fn recipe(
    dataset: Option<&Source>,
    preset: Option<&str>,
    overrides: &RecipeOptions,
    task: Task,
) -> Result<(Source, TrainConfig)> {
    let (preset_dataset, base) = match preset {
        Some(name) => {
            let p = dpsgd::preset(name)?;
            let ds: Source = p.dataset.parse()?;
            (Some(ds), p.config)
        }
        None if !overrides.chooses_privacy() => {
            return Err(Error::usage(
                "choose --epsilon E, --noise-multiplier S or --non-private (or a --preset)",
            ));
        }
        None => (None, TrainConfig::default()),
    };
    let dataset = dataset
        .cloned()
        .or(preset_dataset)
        .ok_or_else(|| Error::usage("--dataset is required without a --preset"))?;
    let base = match preset {
        Some(_) => base,
        None => default_recipe(&dataset)?,
    };
    let cfg = task_recipe(task, overrides, overrides.apply(base)?);
    Ok((dataset, cfg))
}

/// The largest learning rate a regression takes from a recipe made for classification.
const REGRESSION_MAX_RECIPE_LR: f32 = 0.5;

/// `cfg` (a recipe with the overrides applied) for `task`: a regression keeps the recipe's
/// learning rate only up to `REGRESSION_MAX_RECIPE_LR` unless a learning rate was given.
/// The recipes are tuned for cross-entropy, whose gradient is bounded; the MSE's grows with
/// the error, and digits' logistic recipe (lr 2) diverges on it (test MSE above that of a
/// constant, where 0.5 and 0.2 land near 4 at ε = 3).
pub fn task_recipe(task: Task, overrides: &RecipeOptions, mut cfg: TrainConfig) -> TrainConfig {
    if task == Task::Regression && overrides.lr.is_none() {
        cfg.lr = cfg.lr.min(REGRESSION_MAX_RECIPE_LR);
    }
    cfg
}

/// The recipe of a table (the embedded tabular sets, `csv:` files, and records handed in by
/// the Python estimators): a small MLP ([`dpsgd::tabular_recipe`]).
pub fn table_recipe() -> TrainConfig {
    dpsgd::tabular_recipe()
}

/// The preset the 8x8 digits train with when none is named (the MNIST CNN needs 28x28
/// records).
const DIGITS_RECIPE: &str = "digits-eps1";

/// The recipe overrides start from when no preset is named: [`table_recipe`] for tables, the
/// `digits-eps1` recipe for the 8x8 digits, else the Opacus MNIST example
/// ([`TrainConfig::default`]).
///
/// # Errors
/// Only if the built-in preset went missing.
pub fn default_recipe(source: &Source) -> Result<TrainConfig> {
    Ok(match source {
        Source::Iris | Source::Wine | Source::BreastCancer | Source::Csv(_) => table_recipe(),
        Source::Digits => dpsgd::preset(DIGITS_RECIPE)?.config,
        _ => TrainConfig::default(),
    })
}

/// A recipe field's defaults as `--help` states them: its value in the table recipe, the
/// digits recipe and the others, e.g. `tables 30, digits 40, other data 10 (a --preset: its
/// own)`. `show` formats the field of a recipe.
pub fn default_help(show: impl Fn(&TrainConfig) -> String) -> String {
    let digits = dpsgd::preset(DIGITS_RECIPE).map_or_else(|_| "-".into(), |p| show(&p.config));
    format!(
        "tables (iris, wine, breast-cancer, csv:) {}, digits {digits}, other data {}; a --preset: its own",
        show(&table_recipe()),
        show(&TrainConfig::default())
    )
}

/// The share of the training records a default batch is cut to when the recipe's does not fit.
const FITTED_BATCH_SHARE: usize = 4;

/// Fits the recipe's batch to `n` training records when the caller gave none: a batch larger
/// than the records (q = B/N above 1) becomes a quarter of them. Returns the note that says
/// so. A batch the caller gave is kept (training refuses it by name if it does not fit).
pub fn fit_batch_to_data(
    cfg: &mut TrainConfig,
    overrides: &RecipeOptions,
    n: usize,
) -> Option<String> {
    if overrides.batch_size.is_some() || cfg.batch_size <= n {
        return None;
    }
    let fitted = (n / FITTED_BATCH_SHARE).max(1);
    let note = format!(
        "batch_size {fitted}: the recipe's {} exceeds the {n} training records, so the default is a quarter of them (give --batch-size to choose)",
        cfg.batch_size
    );
    cfg.batch_size = fitted;
    Some(note)
}

/// What a run of `cfg` for `task` needs declared: classes to learn, bounds to scale or perturb
/// features, and for regression the label range (always: it says what a label's value is,
/// and bounds the targets and their scale).
pub fn private_needs(cfg: &TrainConfig, task: Task, perturbs_inputs: bool) -> Needs {
    let private = !matches!(cfg.privacy, Privacy::NonPrivate);
    let regression = task == Task::Regression;
    Needs {
        classes: private && !regression,
        bounds: private || perturbs_inputs,
        label_range: regression,
    }
}
