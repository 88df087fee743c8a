//! Input normalisation from PUBLIC constants only (design invariant 2: nothing about the
//! private training data may leak through preprocessing, so no statistic is computed from it).
//!
//! A [`Normalization`] is what the user asks for; [`Normalization::resolve`] turns it into the
//! affine [`InputTransform`] x ↦ (x − shift)/scale that is applied to every record as batches
//! are gathered (training and evaluation alike) and saved with the model.

use serde::{Deserialize, Serialize};

use super::error::{Result, config_err, data_err};
use dpml_data::Dataset;

/// Mean and standard deviation of MNIST training pixels scaled to [0, 1], the public constants
/// of the PyTorch/Opacus MNIST examples (`Normalize((0.1307,), (0.3081,))`).
pub const MNIST_MEAN_STD: (f32, f32) = (0.1307, 0.3081);

/// Mean and standard deviation of Fashion-MNIST training pixels scaled to [0, 1], the values
/// published with the data set and used by the common torchvision recipes.
pub const FASHION_MNIST_MEAN_STD: (f32, f32) = (0.2860, 0.3530);

/// How records are normalised before they reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Normalization {
    /// Records are used as loaded.
    #[default]
    None,
    /// Map the data set's declared public feature range [lo, hi] (e.g. [0, 16] for `digits`)
    /// to [0, 1]. Refused for data sets without a declared range: a range read off the data
    /// would not be public.
    PublicRange,
    /// (x − mean)/std with public constants, e.g. [`MNIST_MEAN_STD`].
    MeanStd {
        /// Subtracted from every feature.
        mean: f32,
        /// Every feature is divided by it (> 0).
        std: f32,
    },
}

impl Normalization {
    /// `MeanStd` from a `(mean, std)` pair such as [`MNIST_MEAN_STD`].
    pub fn mean_std((mean, std): (f32, f32)) -> Self {
        Normalization::MeanStd { mean, std }
    }

    /// Checks the constants.
    ///
    /// # Errors
    /// [`super::DpSgdError::InvalidConfig`] when `mean` is not finite or `std` is not finite
    /// and > 0.
    pub fn validate(&self) -> Result<()> {
        if let Normalization::MeanStd { mean, std } = *self {
            if !mean.is_finite() {
                return Err(config_err(format!(
                    "normalization mean must be finite, got {mean}"
                )));
            }
            if !(std.is_finite() && std > 0.0) {
                return Err(config_err(format!(
                    "normalization std must be finite and > 0, got {std}"
                )));
            }
        }
        Ok(())
    }

    /// The transform for `data`.
    ///
    /// # Errors
    /// As [`Normalization::validate`]; [`super::DpSgdError::Data`] for `PublicRange` on a data
    /// set without a declared public feature range (or with an empty one).
    pub fn resolve(&self, data: &Dataset) -> Result<InputTransform> {
        self.validate()?;
        match *self {
            Normalization::None => Ok(InputTransform::IDENTITY),
            Normalization::MeanStd { mean, std } => Ok(InputTransform {
                shift: mean,
                scale: std,
            }),
            Normalization::PublicRange => match data.feature_range {
                Some((lo, hi)) if lo.is_finite() && hi.is_finite() && hi > lo => {
                    Ok(InputTransform {
                        shift: lo,
                        scale: hi - lo,
                    })
                }
                Some((lo, hi)) => Err(data_err(format!(
                    "data set {:?} declares an empty or invalid feature range [{lo}, {hi}]",
                    data.name
                ))),
                None => Err(data_err(format!(
                    "normalization \"public_range\" needs a declared public feature range, and data set {:?} \
                     has none (a range computed from the data would not be public); use mean_std with \
                     public constants or none",
                    data.name
                ))),
            },
        }
    }
}

/// The affine map x ↦ (x − shift)/scale applied to every feature of every record.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InputTransform {
    /// Subtracted first.
    pub shift: f32,
    /// Then divided by (> 0).
    pub scale: f32,
}

impl Default for InputTransform {
    fn default() -> Self {
        Self::IDENTITY
    }
}

impl InputTransform {
    /// The identity map.
    pub const IDENTITY: InputTransform = InputTransform {
        shift: 0.0,
        scale: 1.0,
    };

    /// Writes the transformed `record` into `out` (same length).
    pub(crate) fn apply(&self, record: &[f32], out: &mut [f32]) {
        if *self == Self::IDENTITY {
            out.copy_from_slice(record);
        } else {
            let inv = 1.0 / self.scale;
            out.iter_mut()
                .zip(record)
                .for_each(|(o, &v)| *o = (v - self.shift) * inv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(range: Option<(f32, f32)>) -> Dataset {
        Dataset {
            name: "t".into(),
            x: vec![0.0, 8.0, 16.0],
            n: 3,
            record_shape: vec![1],
            y: vec![0, 1, 0],
            n_classes: 2,
            feature_names: vec!["a".into()],
            class_names: vec!["0".into(), "1".into()],
            feature_range: range,
        }
    }

    #[test]
    fn public_range_maps_to_unit_interval_and_needs_a_declared_range() {
        let t = Normalization::PublicRange
            .resolve(&data(Some((0.0, 16.0))))
            .unwrap();
        let mut out = [9.0; 3];
        t.apply(&[0.0, 8.0, 16.0], &mut out);
        assert_eq!(out, [0.0, 0.5, 1.0]);
        let msg = Normalization::PublicRange
            .resolve(&data(None))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("public") && msg.contains("\"t\""), "{msg}");
    }

    #[test]
    fn mean_std_is_checked_and_applied() {
        let t = Normalization::mean_std(MNIST_MEAN_STD)
            .resolve(&data(None))
            .unwrap();
        let mut out = [9.0];
        t.apply(&[0.1307], &mut out);
        assert!(out[0].abs() < 1e-6);
        let bad = Normalization::MeanStd {
            mean: 0.0,
            std: 0.0,
        };
        assert!(bad.validate().unwrap_err().to_string().contains("got 0"));
    }
}
