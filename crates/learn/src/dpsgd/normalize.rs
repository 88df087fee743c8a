//! Input normalisation from PUBLIC constants only (design invariant 2: nothing about the
//! private training data may leak through preprocessing, so no statistic is computed from it).
//!
//! A [`Normalization`] is what the user asks for; [`Normalization::resolve`] turns it into the
//! [`InputTransform`] (x ↦ (x − shift)/scale, or per-feature min-max scaling clamped to
//! [0, 1]) that is applied to every record as batches are gathered (training and evaluation
//! alike) and saved with the model.

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
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Normalization {
    /// Records are used as loaded.
    #[default]
    None,
    /// Map the data set's declared public feature range [lo, hi] (e.g. [0, 16] for `digits`)
    /// to [0, 1]. Refused for data sets without a declared range: a range read off the data
    /// would not be public.
    PublicRange,
    /// Map feature j from its PUBLISHED range [lo_j, hi_j] (e.g.
    /// `dpml_data::Source::published_ranges`, or bounds the user declares) to [0, 1],
    /// clamping values outside it. One pair per feature, in column order.
    FeatureRanges {
        /// `(lo_j, hi_j)` per feature, finite with lo_j < hi_j.
        #[serde(serialize_with = "crate::f32_json::pairs")]
        ranges: Vec<(f32, f32)>,
    },
    /// (x − mean)/std with public constants, e.g. [`MNIST_MEAN_STD`].
    MeanStd {
        /// Subtracted from every feature.
        #[serde(serialize_with = "crate::f32_json::one")]
        mean: f32,
        /// Every feature is divided by it (> 0).
        #[serde(serialize_with = "crate::f32_json::one")]
        std: f32,
    },
}

impl Normalization {
    /// `MeanStd` from a `(mean, std)` pair such as [`MNIST_MEAN_STD`].
    pub fn mean_std((mean, std): (f32, f32)) -> Self {
        Normalization::MeanStd { mean, std }
    }

    /// `FeatureRanges` from public `(lo, hi)` pairs, one per feature (converted to f32).
    pub fn feature_ranges(ranges: &[(f64, f64)]) -> Self {
        Normalization::FeatureRanges {
            ranges: ranges
                .iter()
                .map(|&(lo, hi)| (lo as f32, hi as f32))
                .collect(),
        }
    }

    /// Checks the constants.
    ///
    /// # Errors
    /// [`super::DpSgdError::InvalidConfig`] when `mean` is not finite or `std` is not finite
    /// and > 0, or when `FeatureRanges` is empty or has a pair that is not finite with
    /// lo < hi (naming the feature and both ends).
    pub fn validate(&self) -> Result<()> {
        if let Normalization::FeatureRanges { ranges } = self {
            check_ranges(ranges).map_err(config_err)?;
        }
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
    /// set without a declared public feature range (or with an empty one), or for
    /// `FeatureRanges` whose length is not the data set's number of features.
    pub fn resolve(&self, data: &Dataset) -> Result<InputTransform> {
        self.validate()?;
        match self {
            Normalization::None => Ok(InputTransform::IDENTITY),
            &Normalization::MeanStd { mean, std } => Ok(InputTransform {
                shift: mean,
                scale: std,
                ..InputTransform::IDENTITY
            }),
            Normalization::FeatureRanges { ranges } => {
                if ranges.len() != data.n_features() {
                    return Err(data_err(format!(
                        "{} feature ranges declared, but data set {:?} has {} features",
                        ranges.len(),
                        data.name,
                        data.n_features()
                    )));
                }
                Ok(InputTransform {
                    ranges: ranges.clone(),
                    ..InputTransform::IDENTITY
                })
            }
            Normalization::PublicRange => match data.feature_range {
                Some((lo, hi)) if lo.is_finite() && hi.is_finite() && hi > lo => {
                    Ok(InputTransform {
                        shift: lo,
                        scale: hi - lo,
                        ..InputTransform::IDENTITY
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

/// Checks public per-feature ranges: at least one, each finite with lo < hi.
pub(crate) fn check_ranges(ranges: &[(f32, f32)]) -> std::result::Result<(), String> {
    if ranges.is_empty() {
        return Err("feature ranges must cover at least one feature, got none".into());
    }
    match ranges
        .iter()
        .position(|&(lo, hi)| !(lo.is_finite() && hi.is_finite() && lo < hi))
    {
        Some(j) => Err(format!(
            "feature range {j} must be finite with lo < hi, got [{}, {}]",
            ranges[j].0, ranges[j].1
        )),
        None => Ok(()),
    }
}

/// The map applied to every record: x ↦ (x − shift)/scale on every feature or, when `ranges`
/// is not empty, x_j ↦ clamp((x_j − lo_j)/(hi_j − lo_j), 0, 1) per feature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputTransform {
    /// Subtracted first.
    #[serde(serialize_with = "crate::f32_json::one")]
    pub shift: f32,
    /// Then divided by (> 0).
    #[serde(serialize_with = "crate::f32_json::one")]
    pub scale: f32,
    /// Public per-feature ranges `(lo_j, hi_j)`; when not empty they replace `shift` and
    /// `scale` (which are then 0 and 1) and outputs are clamped to [0, 1]. Files written
    /// before this field existed load with none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(serialize_with = "crate::f32_json::pairs")]
    pub ranges: Vec<(f32, f32)>,
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
        ranges: Vec::new(),
    };

    /// Number of features this transform is fixed to (`None` when it applies to any record).
    pub fn features(&self) -> Option<usize> {
        (!self.ranges.is_empty()).then_some(self.ranges.len())
    }

    /// Writes the transformed `record` into `out` (same length; with per-feature ranges, also
    /// the length of `ranges`, which [`Normalization::resolve`] and the model loader check).
    pub(crate) fn apply(&self, record: &[f32], out: &mut [f32]) {
        if !self.ranges.is_empty() {
            debug_assert_eq!(record.len(), self.ranges.len());
            for ((o, &v), &(lo, hi)) in out.iter_mut().zip(record).zip(&self.ranges) {
                *o = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
            }
        } else if *self == Self::IDENTITY {
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
    fn feature_ranges_scale_each_feature_and_clamp() {
        let mut d = data(None);
        d.x = vec![1.0, 10.0, 2.0, 30.0];
        d.n = 2;
        d.record_shape = vec![2];
        d.y = vec![0, 1];
        let n = Normalization::feature_ranges(&[(0.0, 2.0), (10.0, 20.0)]);
        let t = n.resolve(&d).unwrap();
        assert_eq!(t.features(), Some(2));
        let mut out = [9.0; 2];
        t.apply(&[1.0, 10.0], &mut out);
        assert_eq!(out, [0.5, 0.0]);
        // Outside the published range: clamped to [0, 1].
        t.apply(&[-1.0, 30.0], &mut out);
        assert_eq!(out, [0.0, 1.0]);
        // One range per feature, each finite with lo < hi.
        let msg = Normalization::feature_ranges(&[(0.0, 1.0)])
            .resolve(&d)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("1 feature ranges") && msg.contains("2 features"),
            "{msg}"
        );
        let msg = Normalization::feature_ranges(&[(0.0, 1.0), (3.0, 3.0)])
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("feature range 1") && msg.contains("[3, 3]"),
            "{msg}"
        );
        assert!(Normalization::feature_ranges(&[]).validate().is_err());
        // Serialised with the model and read back.
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<InputTransform>(&json).unwrap(), t);
        let old: InputTransform = serde_json::from_str(r#"{"shift":0.5,"scale":2.0}"#).unwrap();
        assert!(old.ranges.is_empty() && old.features().is_none());
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
