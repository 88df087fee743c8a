//! What a network learns from a record's label: its class (softmax cross-entropy, one output
//! per class) or its VALUE (regression with a mean squared error, one output).
//!
//! Regression reads the label the way label-DP regression does ([`crate::label_dp::Task`]):
//! a record's label is its class index y = value − lo of the declared integer label range
//! [lo, hi], so y ∈ [0, top] with top = hi − lo = K − 1. The network is trained on y/top ∈
//! [0, 1] (a public, data-independent scaling: the output unit starts near the targets'
//! scale whatever the range) and its predictions are mapped back to ×top and clamped to
//! [0, top] for reporting: errors are in the label's original units (a shift by lo changes
//! no difference).
//!
//! # Privacy
//! The objective changes what each record's gradient is, not how much one record can move the
//! model: DP-SGD clips every per-sample gradient to norm C whatever the loss, so the
//! subsampled Gaussian analysis (sensitivity C) holds unchanged for regression.

use dpml_nn::{LayerSpec, ModelSpec, Tensor, count_correct, cross_entropy, mse};

use super::error::{Result, config_err};
pub use crate::label_dp::Task;

/// The loss a run trains with and how its outputs are read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Objective {
    /// Softmax cross-entropy over one output per class.
    Classification,
    /// MSE of one output against the label value divided by `scale`.
    Regression {
        /// The largest label value (K − 1): predictions are clamped to [0, top].
        top: f32,
        /// The label value one output unit stands for: `top` for DP-SGD (targets in [0, 1]),
        /// 1 for a label-DP regression model (trained on values in label units).
        scale: f32,
    },
}

impl Objective {
    /// The objective of `task` on data with `n_classes` label values (K ≥ 2, checked with the
    /// data).
    pub fn new(task: Task, n_classes: usize) -> Self {
        let top = n_classes.saturating_sub(1).max(1) as f32;
        match task {
            Task::Classification => Objective::Classification,
            Task::Regression => Objective::Regression { top, scale: top },
        }
    }

    /// The objective a saved model was trained for, read from its privacy facts (a file
    /// without facts, or without a regression readout, is a classifier).
    pub fn of_saved(facts: Option<&crate::model_facts::ModelFacts>) -> Self {
        match facts.and_then(|f| f.regression.as_ref()) {
            Some(r) => Objective::Regression {
                top: r.label_values.saturating_sub(1).max(1) as f32,
                scale: r.output_scale as f32,
            },
            None => Objective::Classification,
        }
    }

    /// The label value one output unit stands for (`None` for classification).
    pub fn output_scale(self) -> Option<f64> {
        match self {
            Objective::Regression { scale, .. } => Some(f64::from(scale)),
            Objective::Classification => None,
        }
    }

    /// The task's name ("classification" or "regression").
    pub fn task(self) -> Task {
        match self {
            Objective::Classification => Task::Classification,
            Objective::Regression { .. } => Task::Regression,
        }
    }

    /// `spec` with the outputs this objective needs: unchanged for classification; for
    /// regression the last Linear layer gives one output.
    ///
    /// # Errors
    /// [`super::DpSgdError::InvalidConfig`] when the model has no Linear layer to end on.
    pub fn shape_model(self, mut spec: ModelSpec) -> Result<ModelSpec> {
        if self == Objective::Classification {
            return Ok(spec);
        }
        match spec.layers.iter_mut().rev().find_map(|l| match l {
            LayerSpec::Linear { out_features, .. } => Some(out_features),
            _ => None,
        }) {
            Some(out) => {
                *out = 1;
                Ok(spec)
            }
            None => Err(config_err(format!(
                "regression needs a model ending in a Linear layer; {:?} has none",
                spec.name
            ))),
        }
    }

    /// The per-sample training losses of `out` against `labels` into `losses` (and their
    /// gradient into `grad`), returning how many records were "right": the predicted class,
    /// or (regression) a prediction that rounds to the label value. `targets` is scratch.
    pub(crate) fn loss(
        self,
        out: &Tensor,
        labels: &[usize],
        grad: Option<&mut Tensor>,
        losses: &mut Vec<f32>,
        targets: &mut Tensor,
    ) -> Result<usize> {
        match self {
            Objective::Classification => {
                cross_entropy(out, labels, grad, losses)?;
                Ok(count_correct(out, labels))
            }
            Objective::Regression { scale, .. } => {
                targets.reset(labels.len(), &[1]);
                for (t, &y) in targets.data_mut().iter_mut().zip(labels) {
                    *t = y as f32 / scale;
                }
                mse(out, targets, grad, losses)?;
                Ok(self.errors(out, labels).filter(|e| e.abs() < 0.5).count())
            }
        }
    }

    /// Regression: each record's prediction error in the label's units (prediction mapped
    /// back to [0, top] and clamped, minus the label value). Empty for classification.
    pub(crate) fn errors<'a>(
        self,
        out: &'a Tensor,
        labels: &'a [usize],
    ) -> impl Iterator<Item = f64> + 'a {
        let readout = match self {
            Objective::Regression { top, scale } => Some((top, scale)),
            Objective::Classification => None,
        };
        readout.into_iter().flat_map(move |(top, scale)| {
            out.data()
                .iter()
                .zip(labels)
                .map(move |(&p, &y)| f64::from((p * scale).clamp(0.0, top)) - y as f64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_scales_targets_and_reads_errors_in_label_units() {
        let o = Objective::new(Task::Regression, 10);
        assert_eq!(
            o,
            Objective::Regression {
                top: 9.0,
                scale: 9.0
            }
        );
        // Predictions 1/3 (3 in label units), 1.5 (clamped to 9), −1 (clamped to 0).
        let out = Tensor::from_vec(&[3, 1], vec![1.0 / 3.0, 1.5, -1.0]).unwrap();
        let labels = [3, 7, 2];
        let e: Vec<f64> = o.errors(&out, &labels).collect();
        for (got, want) in e.iter().zip([0.0, 2.0, -2.0]) {
            assert!((got - want).abs() < 1e-5, "{e:?}");
        }
        let (mut g, mut l, mut t) = (Tensor::default(), Vec::new(), Tensor::default());
        let right = o.loss(&out, &labels, Some(&mut g), &mut l, &mut t).unwrap();
        assert_eq!(right, 1);
        // Per-sample loss against y/9: (1/3 − 3/9)² = 0, (1.5 − 7/9)², (−1 − 2/9)².
        let want = [
            0.0,
            (1.5f32 - 7.0 / 9.0).powi(2),
            (1.0f32 + 2.0 / 9.0).powi(2),
        ];
        for (a, b) in l.iter().zip(want) {
            assert!((a - b).abs() < 1e-5, "{l:?}");
        }
        assert!(
            Objective::Classification
                .errors(&out, &labels)
                .next()
                .is_none()
        );
    }

    #[test]
    fn regression_gives_the_last_linear_layer_one_output() {
        let spec = ModelSpec::named("mlp", &[4], 10, &[8]).unwrap();
        let r = Objective::Regression {
            top: 9.0,
            scale: 9.0,
        }
        .shape_model(spec.clone());
        let last = r.unwrap().layers.into_iter().rev().find_map(|l| match l {
            LayerSpec::Linear { out_features, .. } => Some(out_features),
            _ => None,
        });
        assert_eq!(last, Some(1));
        assert_eq!(
            Objective::Classification.shape_model(spec.clone()).unwrap(),
            spec
        );
    }
}
