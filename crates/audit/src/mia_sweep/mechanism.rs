//! The three ways a model of the sweep is trained: without privacy, with DP-SGD (central DP),
//! or non-privately on records perturbed by local DP (noise on every record's inputs).

use std::sync::Mutex;

use dpml_data::Dataset;
use dpml_learn::dpsgd::{Privacy, TrainConfig};
use dpml_learn::perturbation::{InputBudget, InputMechanism, perturb_dataset_in};
use dpml_mechanisms::DpRng;
use serde::Serialize;

use crate::driver::{DriverError, TrainingInputs};

/// How a model (target or reference) is made private.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Plain training: the baseline.
    NonPrivate,
    /// Central DP: DP-SGD calibrated to the grid's ε (the accountant states it).
    DpSgd,
    /// Local DP: Laplace noise on every feature, ε per record (the record's L1 range as the
    /// sensitivity, as `dpml sweep --experiment input-perturbation`), then plain training.
    LocalDp,
}

impl Mechanism {
    /// The name in results and legends.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::NonPrivate => "non-private",
            Mechanism::DpSgd => "dp-sgd",
            Mechanism::LocalDp => "local-dp",
        }
    }

    /// The recipe of this mechanism at `epsilon`: DP-SGD targets ε; the other two train
    /// without noise in the trainer (local DP puts its noise on the inputs instead).
    pub fn recipe(self, base: &TrainConfig, epsilon: Option<f64>) -> TrainConfig {
        let mut cfg = base.clone();
        cfg.privacy = match (self, epsilon) {
            (Mechanism::DpSgd, Some(e)) => Privacy::TargetEpsilon(e),
            _ => Privacy::NonPrivate,
        };
        cfg
    }
}

/// Local-DP input perturbation of every training set, through dpml's own
/// [`perturb_dataset_in`]; it remembers the per-record ε that perturbation states.
#[derive(Debug)]
pub struct LocalInputs {
    ranges: Vec<(f64, f64)>,
    epsilon: f64,
    stated: Mutex<Option<f64>>,
}

impl LocalInputs {
    /// Laplace noise at `epsilon` per record, features clamped to the public `ranges`.
    pub fn new(ranges: Vec<(f64, f64)>, epsilon: f64) -> Self {
        Self {
            ranges,
            epsilon,
            stated: Mutex::new(None),
        }
    }

    /// The per-record ε the perturbation reported (`None` before any record was perturbed).
    pub fn epsilon_per_record(&self) -> Option<f64> {
        self.stated.lock().ok().and_then(|s| *s)
    }
}

impl TrainingInputs for LocalInputs {
    fn prepare(
        &self,
        mut train: Dataset,
        rng: &mut DpRng,
    ) -> crate::driver::error::Result<Dataset> {
        let report = perturb_dataset_in(
            &mut train,
            &self.ranges,
            InputMechanism::Laplace,
            InputBudget::PerRecord(self.epsilon),
            rng,
        )
        .map_err(|e| DriverError::Invalid(format!("local-DP input perturbation: {e}")))?;
        if let Ok(mut s) = self.stated.lock() {
            *s = Some(report.epsilon_per_record);
        }
        Ok(train)
    }
}
