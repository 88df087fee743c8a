//! The training configuration ([`TrainConfig`]) and its checks. `validate` looks at the
//! configuration alone; `validate_data` also checks that the data fit it (record shape, labels,
//! size), so a run fails before any privacy is spent.

use serde::{Deserialize, Serialize};

use dpml_accounting::calibrate::steps_for_epochs;
use dpml_data::Dataset;
use dpml_nn::{Adam, LrSchedule, ModelSpec, Optimizer, Sgd};

use super::error::{DpSgdError, Result, config_err, data_err};
use super::normalize::Normalization;

/// Whether and how the run is private.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Privacy {
    /// Plain SGD on Poisson batches: no clipping, no noise, no ε.
    NonPrivate,
    /// DP-SGD with this noise multiplier σ (noise std σ·C on the clipped sum).
    NoiseMultiplier(f64),
    /// DP-SGD with σ calibrated before training so that the final ε (at `delta`, with the
    /// chosen accountant) does not exceed this target.
    TargetEpsilon(f64),
}

/// The accountant that reports (and, for [`Privacy::TargetEpsilon`], calibrates) ε.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountantKind {
    /// Privacy-loss distributions, pessimistic estimate: a tight upper bound (default).
    #[default]
    Pld,
    /// Rényi DP: an upper bound, looser than PLD.
    Rdp,
    /// Gaussian DP via the central limit theorem: an approximation that can underestimate ε;
    /// refused for calibration.
    Gdp,
}

impl AccountantKind {
    /// The name used in outputs and on the command line: "pld", "rdp", "gdp".
    pub fn name(self) -> &'static str {
        match self {
            AccountantKind::Pld => "pld",
            AccountantKind::Rdp => "rdp",
            AccountantKind::Gdp => "gdp",
        }
    }
}

impl std::str::FromStr for AccountantKind {
    type Err = DpSgdError;

    /// Parses "pld", "rdp" or "gdp".
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "pld" => Ok(AccountantKind::Pld),
            "rdp" => Ok(AccountantKind::Rdp),
            "gdp" => Ok(AccountantKind::Gdp),
            other => Err(config_err(format!(
                "unknown accountant {other:?}; known accountants: pld, rdp, gdp"
            ))),
        }
    }
}

/// The optimizer applied to the noisy, averaged gradient.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OptimizerKind {
    /// SGD with (Nesterov) momentum, PyTorch's update rule.
    Sgd {
        /// Momentum in [0, 1).
        #[serde(serialize_with = "crate::f32_json::one")]
        momentum: f32,
        /// Nesterov momentum (needs momentum > 0).
        nesterov: bool,
    },
    /// Adam with PyTorch's defaults (β = 0.9, 0.999, ε = 1e-8).
    Adam,
}

impl OptimizerKind {
    /// Builds the optimizer with `weight_decay`.
    ///
    /// # Errors
    /// [`DpSgdError::Nn`] for an out-of-range momentum or weight decay.
    pub(crate) fn build(self, weight_decay: f32) -> Result<Box<dyn Optimizer + Send>> {
        Ok(match self {
            OptimizerKind::Sgd { momentum, nesterov } => {
                Box::new(Sgd::new(momentum, nesterov, weight_decay)?)
            }
            OptimizerKind::Adam => Box::new(Adam::new(0.9, 0.999, 1e-8, weight_decay)?),
        })
    }
}

/// A learning-rate schedule, in units a user thinks in (epochs, the whole run).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScheduleKind {
    /// Always the base rate.
    #[default]
    Constant,
    /// Multiply the rate by `gamma` every `every_epochs` epochs.
    Step {
        /// Epochs between decays (≥ 1).
        every_epochs: usize,
        /// Decay factor in (0, 1].
        #[serde(serialize_with = "crate::f32_json::one")]
        gamma: f32,
    },
    /// Cosine annealing from the base rate to `min_lr` over the whole run.
    Cosine {
        /// Final rate (≥ 0).
        #[serde(serialize_with = "crate::f32_json::one")]
        min_lr: f32,
    },
}

impl ScheduleKind {
    /// The engine's schedule for a run of `steps` steps with `steps_per_epoch` steps an epoch.
    pub(crate) fn to_nn(self, steps: u64, steps_per_epoch: u64) -> LrSchedule {
        let clamp = |v: u64| usize::try_from(v.max(1)).unwrap_or(usize::MAX);
        match self {
            ScheduleKind::Constant => LrSchedule::Constant,
            ScheduleKind::Step {
                every_epochs,
                gamma,
            } => LrSchedule::Step {
                every: clamp((every_epochs as u64).saturating_mul(steps_per_epoch)),
                gamma,
            },
            ScheduleKind::Cosine { min_lr } => LrSchedule::Cosine {
                total_steps: clamp(steps),
                min_lr,
            },
        }
    }
}

/// Everything that defines a DP-SGD (or non-private) training run.
///
/// The widest hidden layer of a named model: keeps a typo from allocating terabytes, on every
/// front (the command line's `--hidden`, Python's `hidden_layer_sizes`).
pub const MAX_HIDDEN_WIDTH: usize = 1 << 16;

/// Sizes follow Opacus' vocabulary: `batch_size` is the EXPECTED Poisson batch size B (each
/// record joins each step with probability q = B/N), `physical_batch` only bounds memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Architecture: one of [`super::MODEL_NAMES`].
    pub model: String,
    /// Hidden layer sizes for "mlp" (ignored otherwise).
    pub hidden: Vec<usize>,
    /// An explicit architecture (the JSON of `--arch`); when given it is trained instead of
    /// the named `model`, whose name and `hidden` are then ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<ModelSpec>,
    /// Number of epochs E (may be fractional); the run has T = ⌈E·N/B⌉ steps.
    pub epochs: f64,
    /// Expected batch size B (q = B/N).
    pub batch_size: usize,
    /// Clipping norm C of each per-sample gradient (ignored when non-private).
    #[serde(serialize_with = "crate::f32_json::one")]
    pub max_grad_norm: f32,
    /// Base learning rate (JSON `learning_rate`, the CLI's `--learning-rate`; `lr` is still
    /// read).
    #[serde(
        rename = "learning_rate",
        alias = "lr",
        serialize_with = "crate::f32_json::one"
    )]
    pub lr: f32,
    /// Optimizer.
    pub optimizer: OptimizerKind,
    /// Learning-rate schedule.
    pub lr_schedule: ScheduleKind,
    /// Non-private, fixed σ, or target ε.
    pub privacy: Privacy,
    /// δ of the reported (ε, δ) (default 1e-5).
    pub delta: f64,
    /// Accountant for ε (default PLD).
    pub accountant: AccountantKind,
    /// Draw a private run's noise from the exact discrete Gaussian on a fine grid (see
    /// [`super::noise`]), the default; `false` draws floating-point Gaussian noise. No effect on
    /// a non-private run.
    pub exact_noise: bool,
    /// At most this many records go through the model at once (virtual batching; fewer where
    /// the model keeps much per record, about 32 MiB of state per chunk at most). JSON
    /// `physical_batch_size` as the CLI's `--physical-batch-size`; `physical_batch` is still read.
    #[serde(rename = "physical_batch_size", alias = "physical_batch")]
    pub physical_batch: usize,
    /// Exponential moving average of the parameters with this decay, used for evaluation and
    /// returned as the model (post-processing: no privacy cost).
    #[serde(serialize_with = "crate::f32_json::option")]
    pub ema: Option<f32>,
    /// Clip each layer to C/√L instead of the whole gradient to C.
    pub per_layer_clipping: bool,
    /// L2 weight decay added to the gradient by the optimizer.
    #[serde(serialize_with = "crate::f32_json::one")]
    pub weight_decay: f32,
    /// Input normalisation from public constants.
    pub normalize: Normalization,
}

impl Default for TrainConfig {
    /// Opacus' MNIST example: `cnn`, 10 epochs, B = 256, C = 1, lr 0.1 (SGD, momentum 0),
    /// σ = 1.1 (exact discrete Gaussian noise), δ = 1e-5, PLD accounting.
    fn default() -> Self {
        Self {
            model: "cnn".into(),
            hidden: Vec::new(),
            arch: None,
            epochs: 10.0,
            batch_size: 256,
            max_grad_norm: 1.0,
            lr: 0.1,
            optimizer: OptimizerKind::Sgd {
                momentum: 0.0,
                nesterov: false,
            },
            lr_schedule: ScheduleKind::Constant,
            privacy: Privacy::NoiseMultiplier(1.1),
            delta: 1e-5,
            accountant: AccountantKind::Pld,
            exact_noise: true,
            physical_batch: 512,
            ema: None,
            per_layer_clipping: false,
            weight_decay: 0.0,
            normalize: Normalization::None,
        }
    }
}

fn positive_f64(name: &str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(config_err(format!(
            "{name} must be finite and > 0, got {v}"
        )))
    }
}

fn positive_f32(name: &str, v: f32) -> Result<()> {
    positive_f64(name, f64::from(v))
}

impl TrainConfig {
    /// Whether the run adds noise (anything but [`Privacy::NonPrivate`]).
    pub fn is_private(&self) -> bool {
        !matches!(self.privacy, Privacy::NonPrivate)
    }

    /// Checks every value on its own.
    ///
    /// # Errors
    /// [`DpSgdError::InvalidConfig`] naming the first bad value (batch size 0, C ≤ 0, lr ≤ 0,
    /// epochs ≤ 0, δ ∉ (0, 1), σ or ε ≤ 0, physical batch 0, EMA decay ∉ (0, 1), bad schedule,
    /// GDP asked to calibrate, exact noise without privacy); [`DpSgdError::Nn`] for an unknown
    /// model, BatchNorm, an `mlp` without hidden sizes, or bad optimizer settings.
    pub fn validate(&self) -> Result<()> {
        if let Some(&w) = self.hidden.iter().find(|&&w| w > MAX_HIDDEN_WIDTH) {
            return Err(config_err(format!(
                "hidden: a layer width must be at most {MAX_HIDDEN_WIDTH}, got {w}"
            )));
        }
        // Unknown names and BatchNorm are refused by the engine with its own explanation; the
        // record shape here is a stand-in (the real one is checked in `validate_data`).
        match &self.arch {
            Some(spec) => drop(spec.check()?),
            None => drop(ModelSpec::named(
                &self.model,
                &[1, 28, 28],
                10,
                &self.hidden,
            )?),
        }
        positive_f64("epochs", self.epochs)?;
        if self.batch_size == 0 {
            return Err(config_err("batch_size must be >= 1, got 0"));
        }
        positive_f32("max_grad_norm", self.max_grad_norm)?;
        positive_f32("lr", self.lr)?;
        if !(self.delta > 0.0 && self.delta < 1.0) {
            return Err(config_err(format!(
                "delta must be in (0, 1), got {}",
                self.delta
            )));
        }
        match self.privacy {
            Privacy::NonPrivate => {}
            Privacy::NoiseMultiplier(s) => positive_f64("noise_multiplier", s)?,
            Privacy::TargetEpsilon(e) => {
                positive_f64("target epsilon", e)?;
                if self.accountant == AccountantKind::Gdp {
                    return Err(config_err(
                        "accountant \"gdp\" cannot calibrate a target epsilon: the CLT approximation can \
                         underestimate epsilon; use \"pld\" (default) or \"rdp\", or give a noise multiplier",
                    ));
                }
            }
        }
        if self.physical_batch == 0 {
            return Err(config_err("physical_batch must be >= 1, got 0"));
        }
        if let Some(d) = self.ema
            && !(d > 0.0 && d < 1.0)
        {
            return Err(config_err(format!("ema decay must be in (0, 1), got {d}")));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(config_err(format!(
                "weight_decay must be finite and >= 0, got {}",
                self.weight_decay
            )));
        }
        match self.lr_schedule {
            ScheduleKind::Constant => {}
            ScheduleKind::Step {
                every_epochs,
                gamma,
            } => {
                if every_epochs == 0 {
                    return Err(config_err(
                        "lr schedule step needs every_epochs >= 1, got 0",
                    ));
                }
                if !(gamma > 0.0 && gamma <= 1.0) {
                    return Err(config_err(format!(
                        "lr schedule step gamma must be in (0, 1], got {gamma}"
                    )));
                }
            }
            ScheduleKind::Cosine { min_lr } => {
                if !(min_lr.is_finite() && min_lr >= 0.0 && min_lr <= self.lr) {
                    return Err(config_err(format!(
                        "cosine min_lr must be in [0, lr = {}], got {min_lr}",
                        self.lr
                    )));
                }
            }
        }
        self.optimizer.build(self.weight_decay)?;
        self.normalize.validate()
    }

    /// Checks that `train` (and `test`, if given) fit this configuration and its model, and
    /// returns the model description for them.
    ///
    /// # Errors
    /// [`DpSgdError::Data`] for an empty training set, B > N, a feature buffer or label out of
    /// shape, a NaN or infinite feature, or a test set whose record shape or classes differ;
    /// [`DpSgdError::Nn`] when the model cannot take records of this shape (naming both
    /// shapes); as [`Normalization::resolve`].
    pub fn validate_data(&self, train: &Dataset, test: Option<&Dataset>) -> Result<ModelSpec> {
        check_dataset(train)?;
        if self.batch_size > train.n {
            return Err(data_err(format!(
                "batch_size must be <= the number of training records N = {}, got {}",
                train.n, self.batch_size
            )));
        }
        steps_for_epochs(self.epochs, self.batch_size as u64, train.n as u64)?;
        if let Some(t) = test {
            check_dataset(t)?;
            if t.record_shape != train.record_shape || t.n_classes != train.n_classes {
                return Err(data_err(format!(
                    "test set {:?} has records {:?} with {} classes, the training set {:?} has {:?} with {}",
                    t.name,
                    t.record_shape,
                    t.n_classes,
                    train.name,
                    train.record_shape,
                    train.n_classes
                )));
            }
        }
        self.normalize.resolve(train)?;
        self.model_for(train, train.n_classes)
    }

    /// The model description for records of `data` and `outputs` outputs: the explicit
    /// `arch` when given (checked against both), else the named `model`.
    ///
    /// # Errors
    /// [`DpSgdError::Data`] when `arch`'s input shape is not the records' shape or its output
    /// not `[outputs]`; [`DpSgdError::Nn`] as [`ModelSpec::named`] or when the layers do not
    /// chain.
    pub fn model_for(&self, data: &Dataset, outputs: usize) -> Result<ModelSpec> {
        match &self.arch {
            Some(spec) => check_arch_fits(spec, data, outputs),
            None => Ok(ModelSpec::named(
                &self.model,
                &data.record_shape,
                outputs,
                &self.hidden,
            )?),
        }
    }
}

/// An explicit architecture against the data: its input shape must be the records' shape and
/// its output `[outputs]` (one score per class).
fn check_arch_fits(spec: &ModelSpec, train: &Dataset, outputs: usize) -> Result<ModelSpec> {
    if spec.input_shape != train.record_shape {
        return Err(data_err(format!(
            "architecture {:?} has input_shape {:?}, the data set {:?} has records of shape {:?}",
            spec.name, spec.input_shape, train.name, train.record_shape
        )));
    }
    let out = spec.check()?.output_shape().to_vec();
    if out != [outputs] {
        return Err(data_err(format!(
            "architecture {:?} outputs records of shape {out:?}, training on {:?} needs [{outputs}]",
            spec.name, train.name
        )));
    }
    Ok(spec.clone())
}

/// Buffer sizes, labels and values of one data set.
pub(crate) fn check_dataset(d: &Dataset) -> Result<()> {
    if d.n == 0 {
        return Err(data_err(format!("data set {:?} has no records", d.name)));
    }
    let f = d.n_features();
    if f == 0 || d.x.len() != d.n.saturating_mul(f) || d.y.len() != d.n {
        return Err(data_err(format!(
            "data set {:?}: {} feature values and {} labels for n = {} records of shape {:?}",
            d.name,
            d.x.len(),
            d.y.len(),
            d.n,
            d.record_shape
        )));
    }
    if d.n_classes < 2 {
        return Err(data_err(format!(
            "data set {:?} needs at least 2 classes, got {}",
            d.name, d.n_classes
        )));
    }
    if let Some((i, &c)) =
        d.y.iter()
            .enumerate()
            .find(|&(_, &c)| c as usize >= d.n_classes)
    {
        return Err(data_err(format!(
            "data set {:?}: record {i} has label {c}, >= {} classes",
            d.name, d.n_classes
        )));
    }
    if let Some(i) = d.x.iter().position(|v| !v.is_finite()) {
        return Err(data_err(format!(
            "data set {:?}: record {}, feature {} is {}: features must be finite numbers",
            d.name,
            i / f,
            i % f,
            d.x[i]
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(r: Result<impl std::fmt::Debug>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn bad_values_are_named() {
        let ok = TrainConfig::default();
        ok.validate().unwrap();
        let with = |f: &dyn Fn(&mut TrainConfig)| {
            let mut c = ok.clone();
            f(&mut c);
            msg(c.validate())
        };
        assert!(with(&|c| c.batch_size = 0).contains("batch_size must be >= 1, got 0"));
        assert!(
            with(&|c| c.max_grad_norm = 0.0)
                .contains("max_grad_norm must be finite and > 0, got 0")
        );
        assert!(with(&|c| c.max_grad_norm = -1.0).contains("got -1"));
        assert!(with(&|c| c.lr = f32::NAN).contains("lr must be finite and > 0, got NaN"));
        assert!(with(&|c| c.epochs = 0.0).contains("epochs"));
        assert!(with(&|c| c.delta = 1.0).contains("delta"));
        assert!(with(&|c| c.privacy = Privacy::NoiseMultiplier(0.0)).contains("noise_multiplier"));
        assert!(with(&|c| c.privacy = Privacy::TargetEpsilon(-1.0)).contains("got -1"));
        assert!(with(&|c| c.model = "resnet".into()).contains("resnet"));
        assert!(with(&|c| c.model = "cnn-batchnorm".into()).contains("GroupNorm"));
        assert!(with(&|c| c.model = "mlp".into()).contains("hidden"));
        assert!(
            with(&|c| c.hidden = vec![8, MAX_HIDDEN_WIDTH + 1])
                .contains("hidden: a layer width must be at most 65536, got 65537")
        );
        assert!(with(&|c| c.physical_batch = 0).contains("physical_batch"));
        assert!(with(&|c| c.ema = Some(1.0)).contains("ema"));
        assert!(
            with(&|c| {
                c.privacy = Privacy::TargetEpsilon(1.0);
                c.accountant = AccountantKind::Gdp;
            })
            .contains("gdp")
        );
        assert!(
            with(&|c| c.optimizer = OptimizerKind::Sgd {
                momentum: 1.5,
                nesterov: false
            })
            .contains("momentum")
        );
        assert!(
            with(&|c| c.lr_schedule = ScheduleKind::Step {
                every_epochs: 0,
                gamma: 0.5
            })
            .contains("every_epochs")
        );
        assert!(
            "xyz"
                .parse::<AccountantKind>()
                .unwrap_err()
                .to_string()
                .contains("xyz")
        );
    }

    #[test]
    fn config_round_trips_through_json() {
        let c = TrainConfig {
            privacy: Privacy::TargetEpsilon(3.0),
            lr_schedule: ScheduleKind::Cosine { min_lr: 0.0 },
            normalize: Normalization::mean_std(super::super::normalize::MNIST_MEAN_STD),
            ..TrainConfig::default()
        };
        let s = serde_json::to_string(&c).unwrap();
        assert!(s.contains("\"target_epsilon\""), "{s}");
        let back: TrainConfig = serde_json::from_str(&s).unwrap();
        assert_eq!(back, c);
    }
}
