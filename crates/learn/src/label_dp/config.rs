//! The label-DP configuration ([`LabelDpConfig`]) and its checks: bad values and combinations
//! that make no sense are refused before any label is touched.

use serde::{Deserialize, Serialize};

use super::error::{LabelDpError, config_err};
use super::rr_prior::TopKRule;
use crate::dpsgd::{Normalization, OptimizerKind, Privacy, TrainConfig};

/// What the labels are used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// Predict the class; reports test accuracy.
    #[default]
    Classification,
    /// Predict the class index as a number (the digit value 0…9 on MNIST) with MSE; reports
    /// test MSE and MAE.
    Regression,
}

/// How each label is privatised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabelMechanism {
    /// Laplace noise: scale 2/ε on each coordinate of the one-hot label (classification) or
    /// (K − 1)/ε on the label value (regression).
    Laplace,
    /// k-ary randomized response over all K classes.
    Rr,
    /// RR-with-prior over several stages (Ghazi et al. 2021).
    RrPrior,
}

/// Post-processing of a Laplace-noised one-hot label (classification only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PostProcess {
    /// Clamp every coordinate to [0, 1] and round: a multi-hot (or all-zero) vector, trained
    /// with binary cross-entropy per class as the classic experiment does; vectors with no 1
    /// or several 1s are kept as they are.
    ClampRound,
    /// The nearest one-hot vector (argmax of the noisy vector), trained with cross-entropy.
    Argmax,
    /// Clamp to [0, 1] and renormalise to sum 1, trained with soft-target cross-entropy; a
    /// vector that clamps to all zeros becomes the one-hot of its noisy argmax.
    Soft,
}

macro_rules! names {
    ($t:ty, $what:literal, $($v:path => $s:literal),+) => {
        impl $t {
            /// The name used in outputs and on the command line.
            pub fn name(self) -> &'static str {
                match self { $($v => $s),+ }
            }
        }
        impl std::str::FromStr for $t {
            type Err = LabelDpError;
            /// Parses the command-line name.
            fn from_str(s: &str) -> Result<Self, LabelDpError> {
                match s {
                    $($s => Ok($v),)+
                    other => Err(config_err(format!(
                        concat!("unknown ", $what, " {:?}; known: {}"), other, [$($s),+].join(", ")
                    ))),
                }
            }
        }
    };
}
names!(Task, "task", Task::Classification => "classification", Task::Regression => "regression");
names!(LabelMechanism, "mechanism", LabelMechanism::Laplace => "laplace", LabelMechanism::Rr => "rr", LabelMechanism::RrPrior => "rr-prior");
names!(PostProcess, "postprocess", PostProcess::ClampRound => "clamp-round", PostProcess::Argmax => "argmax", PostProcess::Soft => "soft");

/// Default number of stages of RR-with-prior.
pub const DEFAULT_STAGES: usize = 2;

/// Most stages accepted for RR-with-prior.
pub const MAX_STAGES: usize = 10;

/// Fewest optimiser steps of the default recipe (see [`default_training`]).
pub const DEFAULT_MIN_STEPS: f64 = 1000.0;

/// The default training recipe on privatised labels: a 512-unit MLP, Adam at learning rate
/// 3·10⁻⁴ on mini-batches of 128 (fewer when the data set is smaller), 3 epochs or enough for
/// [`DEFAULT_MIN_STEPS`] steps, whichever is more, and the returned model is the exponential
/// moving average (decay 0.999) of the iterates.
///
/// Why: networks memorise noisy labels, so training is short (on MNIST at ε = 1, 3 epochs beat
/// 10), and at small ε the label noise dominates every gradient, so steps are small and the
/// iterates are averaged. On MNIST at ε = 0.1 (seed 1) RR-with-prior went from chance (0.10
/// at learning rate 10⁻³ without averaging) to 0.42, and at ε = 0.5…5 both it and Laplace
/// gained or held (`dpml label-dp --dataset mnist --mechanism rr-prior|laplace --epsilon E`).
/// Small steps need many of them: on digits (1,437 training records) 3 epochs are 34 steps,
/// and RR-with-prior at ε = 2 scored 0.39 after 3 epochs, 0.90 after 36 and 0.93 after 100.
pub fn default_training(normalize: Normalization, records: usize) -> TrainConfig {
    let batch_size = 128.min(records.max(1));
    let epochs = (DEFAULT_MIN_STEPS * batch_size as f64 / records.max(1) as f64)
        .ceil()
        .max(3.0);
    TrainConfig {
        model: "mlp".into(),
        hidden: vec![512],
        epochs,
        batch_size,
        physical_batch: batch_size,
        lr: 3e-4,
        optimizer: OptimizerKind::Adam,
        privacy: Privacy::NonPrivate,
        normalize,
        ema: Some(0.999),
        ..TrainConfig::default()
    }
}

/// A label-DP experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelDpConfig {
    /// Classification or regression.
    pub task: Task,
    /// The label mechanism.
    pub mechanism: LabelMechanism,
    /// Post-processing for Laplace classification (`None` there means `ClampRound`, the
    /// classic experiment); must be `None` otherwise.
    pub postprocess: Option<PostProcess>,
    /// ε of each label (the per-record ε-label-DP guarantee).
    pub epsilon: f64,
    /// Stages of RR-with-prior (`None` means [`DEFAULT_STAGES`]); must be `None` otherwise.
    pub stages: Option<usize>,
    /// RR-with-prior only: the prior is softmax(logits/T) of the previous stage's model
    /// (`None` means T = 1, the paper's choice). T > 1 softens an over-confident model so that
    /// top-k keeps more than one class more often (on MNIST at ε = 1, T = 2 measured +1 point
    /// of test accuracy, one seed). Must be `None` for other mechanisms.
    pub prior_temperature: Option<f64>,
    /// RR-with-prior only: how each record's candidate set and encoding are chosen (`None`
    /// means [`TopKRule::Information`]; [`TopKRule::ExpectedAccuracy`] is the paper's rule). Must be `None` for other
    /// mechanisms.
    #[serde(default)]
    pub top_k_rule: Option<TopKRule>,
    /// Model and optimisation. `privacy` must be [`Privacy::NonPrivate`]: the labels are
    /// already private and the features are public, so training adds no noise.
    pub training: TrainConfig,
}

impl LabelDpConfig {
    /// The post-processing actually used (Laplace classification only).
    pub fn effective_postprocess(&self) -> Option<PostProcess> {
        match (self.task, self.mechanism) {
            (Task::Classification, LabelMechanism::Laplace) => {
                Some(self.postprocess.unwrap_or(PostProcess::ClampRound))
            }
            _ => None,
        }
    }

    /// The number of stages actually used (1 except for RR-with-prior).
    pub fn effective_stages(&self) -> usize {
        match self.mechanism {
            LabelMechanism::RrPrior => self.stages.unwrap_or(DEFAULT_STAGES),
            _ => 1,
        }
    }

    /// Checks values and combinations (the training configuration itself is checked by the
    /// trainer).
    ///
    /// # Errors
    /// [`LabelDpError::InvalidConfig`] naming the bad value: ε not finite and > 0, regression
    /// with randomized response, a post-processing rule outside Laplace classification, stages
    /// outside RR-with-prior or outside 2..=10, private training.
    pub fn validate(&self) -> Result<(), LabelDpError> {
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return Err(config_err(format!(
                "epsilon must be finite and > 0, got {}",
                self.epsilon
            )));
        }
        if self.task == Task::Regression && self.mechanism != LabelMechanism::Laplace {
            return Err(config_err(format!(
                "task regression needs mechanism laplace (randomized response releases a class, not a number), got {}",
                self.mechanism.name()
            )));
        }
        if let Some(p) = self.postprocess
            && self.effective_postprocess().is_none()
        {
            return Err(config_err(format!(
                "postprocess {} applies to task classification with mechanism laplace only, got task {} with mechanism {}",
                p.name(),
                self.task.name(),
                self.mechanism.name()
            )));
        }
        match (self.mechanism, self.stages) {
            (LabelMechanism::RrPrior, Some(s)) if !(2..=MAX_STAGES).contains(&s) => {
                return Err(config_err(format!(
                    "stages must be in 2..={MAX_STAGES} for rr-prior, got {s}"
                )));
            }
            (LabelMechanism::RrPrior, _) | (_, None) => {}
            (m, Some(s)) => {
                return Err(config_err(format!(
                    "stages applies to mechanism rr-prior only, got stages {s} with {}",
                    m.name()
                )));
            }
        }
        match (self.mechanism, self.prior_temperature) {
            (_, None) => {}
            (LabelMechanism::RrPrior, Some(t)) if t.is_finite() && t > 0.0 => {}
            (LabelMechanism::RrPrior, Some(t)) => {
                return Err(config_err(format!(
                    "prior_temperature must be finite and > 0, got {t}"
                )));
            }
            (m, Some(t)) => {
                return Err(config_err(format!(
                    "prior_temperature applies to mechanism rr-prior only, got {t} with {}",
                    m.name()
                )));
            }
        }
        if let (Some(r), false) = (self.top_k_rule, self.mechanism == LabelMechanism::RrPrior) {
            return Err(config_err(format!(
                "top_k_rule applies to mechanism rr-prior only, got {} with {}",
                r.name(),
                self.mechanism.name()
            )));
        }
        if self.training.privacy != Privacy::NonPrivate {
            return Err(config_err(format!(
                "label DP trains without gradient noise (labels are privatised once, features are public): \
                 training.privacy must be non_private, got {:?}",
                self.training.privacy
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_recipe_takes_three_epochs_or_enough_steps() {
        let mnist = default_training(Normalization::PublicRange, 60_000);
        assert_eq!((mnist.epochs, mnist.batch_size), (3.0, 128));
        let digits = default_training(Normalization::PublicRange, 1437);
        assert_eq!(digits.epochs, 90.0); // ⌈1000 · 128 / 1437⌉
        assert!(digits.epochs * 1437.0 / 128.0 >= DEFAULT_MIN_STEPS);
        let tiny = default_training(Normalization::PublicRange, 50);
        assert_eq!((tiny.batch_size, tiny.epochs), (50, 1000.0));
        assert_eq!(tiny.ema, Some(0.999));
    }

    pub(crate) fn base() -> LabelDpConfig {
        LabelDpConfig {
            task: Task::Classification,
            mechanism: LabelMechanism::Laplace,
            postprocess: None,
            epsilon: 1.0,
            stages: None,
            prior_temperature: None,
            top_k_rule: None,
            training: TrainConfig {
                privacy: Privacy::NonPrivate,
                ..TrainConfig::default()
            },
        }
    }

    #[test]
    fn nonsense_is_refused_by_name() {
        let msg = |f: &dyn Fn(&mut LabelDpConfig)| {
            let mut c = base();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        base().validate().unwrap();
        assert!(msg(&|c| c.epsilon = f64::NAN).contains("epsilon must be finite and > 0, got NaN"));
        assert!(msg(&|c| c.epsilon = 0.0).contains("got 0"));
        assert!(msg(&|c| c.epsilon = -2.0).contains("got -2"));
        assert!(
            msg(&|c| {
                c.task = Task::Regression;
                c.mechanism = LabelMechanism::Rr;
            })
            .contains("regression needs mechanism laplace")
        );
        assert!(
            msg(&|c| {
                c.mechanism = LabelMechanism::Rr;
                c.postprocess = Some(PostProcess::Soft);
            })
            .contains("postprocess soft")
        );
        assert!(
            msg(&|c| {
                c.task = Task::Regression;
                c.postprocess = Some(PostProcess::Argmax);
            })
            .contains("postprocess argmax")
        );
        assert!(msg(&|c| c.stages = Some(3)).contains("stages applies to mechanism rr-prior"));
        assert!(
            msg(&|c| {
                c.mechanism = LabelMechanism::RrPrior;
                c.stages = Some(1);
            })
            .contains("got 1")
        );
        assert!(
            msg(&|c| c.training.privacy = Privacy::NoiseMultiplier(1.0)).contains("non_private")
        );
        assert!(
            msg(&|c| c.top_k_rule = Some(TopKRule::Information))
                .contains("top_k_rule applies to mechanism rr-prior only, got information")
        );
        assert!(
            "best"
                .parse::<TopKRule>()
                .unwrap_err()
                .to_string()
                .contains("\"best\"")
        );
        assert!(
            "gauss"
                .parse::<LabelMechanism>()
                .unwrap_err()
                .to_string()
                .contains("unknown mechanism \"gauss\"")
        );
        assert!(
            "round"
                .parse::<PostProcess>()
                .unwrap_err()
                .to_string()
                .contains("unknown postprocess \"round\"")
        );
        assert!(
            "ranking"
                .parse::<Task>()
                .unwrap_err()
                .to_string()
                .contains("ranking")
        );
        assert_eq!(
            "rr-prior".parse::<LabelMechanism>().unwrap(),
            LabelMechanism::RrPrior
        );
    }

    #[test]
    fn defaults_follow_the_mechanism() {
        assert_eq!(
            base().effective_postprocess(),
            Some(PostProcess::ClampRound)
        );
        let mut c = base();
        c.mechanism = LabelMechanism::RrPrior;
        assert_eq!(
            (c.effective_postprocess(), c.effective_stages()),
            (None, DEFAULT_STAGES)
        );
    }
}
