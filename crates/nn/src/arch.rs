//! Model descriptions and the named architectures (`logreg`, `mlp`, `cnn`, `cnn-tanh`). A
//! [`ModelSpec`] is plain data (saved as JSON with the weights); [`crate::Sequential::new`]
//! builds it.

use serde::{Deserialize, Serialize};

use crate::error::{NnError, Result, invalid};
use crate::layers::{BATCHNORM_REFUSAL, LayerSpec};

/// The architecture names [`ModelSpec::named`] knows.
pub const MODEL_NAMES: &[&str] = &["logreg", "mlp", "cnn", "cnn-tanh"];

/// A sequential model's description: a name, the record shape it takes, and its layers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Architecture name (one of [`MODEL_NAMES`] or a user's own).
    pub name: String,
    /// Shape of one input record, e.g. `[1, 28, 28]` or `[64]`.
    pub input_shape: Vec<usize>,
    /// The layers, in order.
    pub layers: Vec<LayerSpec>,
}

impl ModelSpec {
    /// A named architecture for records of shape `input_shape` (the data's record shape) and
    /// `num_classes` outputs:
    ///
    /// - `logreg`: (Flatten,) Linear d→K.
    /// - `mlp`: (Flatten,) then Linear + ReLU for each size in `hidden`, then Linear → K.
    /// - `cnn`: Opacus' SampleConvNet on `[1, 28, 28]`: Conv 16@8×8 s2 p3, ReLU, MaxPool 2/1,
    ///   Conv 32@4×4 s2, ReLU, MaxPool 2/1, Flatten, Linear 512→32, ReLU, Linear 32→K.
    /// - `cnn-tanh`: the same with Tanh (Papernot et al. 2020).
    ///
    /// # Errors
    /// [`NnError::NotDpCompatible`] for any name mentioning batch normalisation,
    /// [`NnError::UnknownModel`] for other unknown names, [`NnError::Shape`] when the CNNs get
    /// records that are not `[1, 28, 28]` (naming both shapes), and
    /// [`NnError::InvalidParameter`] for zero sizes or an `mlp` without hidden sizes.
    pub fn named(
        name: &str,
        input_shape: &[usize],
        num_classes: usize,
        hidden: &[usize],
    ) -> Result<Self> {
        let lower = name.to_ascii_lowercase();
        if lower.contains("batchnorm")
            || lower.contains("batch-norm")
            || lower.contains("batch_norm")
        {
            return Err(NnError::NotDpCompatible(BATCHNORM_REFUSAL.into()));
        }
        let d: usize = input_shape.iter().product();
        if d == 0 || input_shape.is_empty() {
            return Err(NnError::Shape(format!(
                "model {name:?} needs non-empty records, got shape {input_shape:?}"
            )));
        }
        if num_classes == 0 {
            return Err(invalid(format!(
                "num_classes must be > 0, got {num_classes}"
            )));
        }
        if let Some(h) = hidden.iter().find(|&&h| h == 0) {
            return Err(invalid(format!(
                "hidden sizes must be > 0, got {h} in {hidden:?}"
            )));
        }
        let mut layers = Vec::new();
        if input_shape.len() > 1 && matches!(lower.as_str(), "logreg" | "mlp") {
            layers.push(LayerSpec::Flatten);
        }
        match lower.as_str() {
            "logreg" => layers.push(LayerSpec::Linear {
                in_features: d,
                out_features: num_classes,
            }),
            "mlp" => {
                if hidden.is_empty() {
                    return Err(invalid(
                        "model \"mlp\" needs at least one hidden size, got none",
                    ));
                }
                let mut prev = d;
                for &h in hidden {
                    layers.push(LayerSpec::Linear {
                        in_features: prev,
                        out_features: h,
                    });
                    layers.push(LayerSpec::Relu);
                    prev = h;
                }
                layers.push(LayerSpec::Linear {
                    in_features: prev,
                    out_features: num_classes,
                });
            }
            "cnn" | "cnn-tanh" => {
                if input_shape != [1, 28, 28] {
                    return Err(NnError::Shape(format!(
                        "model {name:?} expects records of shape [1, 28, 28], the data has records of shape {input_shape:?}"
                    )));
                }
                let act = if lower == "cnn" {
                    LayerSpec::Relu
                } else {
                    LayerSpec::Tanh
                };
                layers.extend([
                    LayerSpec::Conv2d {
                        in_channels: 1,
                        out_channels: 16,
                        kernel: 8,
                        stride: 2,
                        padding: 3,
                    },
                    act.clone(),
                    LayerSpec::MaxPool2d {
                        kernel: 2,
                        stride: 1,
                    },
                    LayerSpec::Conv2d {
                        in_channels: 16,
                        out_channels: 32,
                        kernel: 4,
                        stride: 2,
                        padding: 0,
                    },
                    act.clone(),
                    LayerSpec::MaxPool2d {
                        kernel: 2,
                        stride: 1,
                    },
                    LayerSpec::Flatten,
                    LayerSpec::Linear {
                        in_features: 512,
                        out_features: 32,
                    },
                    act,
                    LayerSpec::Linear {
                        in_features: 32,
                        out_features: num_classes,
                    },
                ]);
            }
            _ => {
                return Err(NnError::UnknownModel {
                    name: name.into(),
                    known: MODEL_NAMES.join(", "),
                });
            }
        }
        Ok(Self {
            name: lower,
            input_shape: input_shape.to_vec(),
            layers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sequential;
    use dpml_mechanisms::DpRng;

    #[test]
    fn cnn_has_sample_convnet_shapes() {
        let spec = ModelSpec::named("cnn", &[1, 28, 28], 10, &[]).unwrap();
        let m = Sequential::new(spec, &mut DpRng::seeded(0)).unwrap();
        let shapes: Vec<Vec<usize>> = m.layers().iter().map(|l| l.out_shape().to_vec()).collect();
        assert_eq!(shapes[0], [16, 14, 14]);
        assert_eq!(shapes[2], [16, 13, 13]);
        assert_eq!(shapes[3], [32, 5, 5]);
        assert_eq!(shapes[5], [32, 4, 4]);
        assert_eq!(shapes[6], [512]);
        assert_eq!(m.output_shape(), &[10]);
        // Opacus SampleConvNet: 1040 + 8224 + 16416 + 330 parameters.
        assert_eq!(m.num_params(), 26_010);
    }

    #[test]
    fn cnn_refuses_other_record_shapes_naming_both() {
        let msg = ModelSpec::named("cnn-tanh", &[64], 10, &[])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("[1, 28, 28]") && msg.contains("[64]"), "{msg}");
    }

    #[test]
    fn batchnorm_and_unknown_names_are_refused() {
        let err = ModelSpec::named("cnn-batchnorm", &[1, 28, 28], 10, &[]).unwrap_err();
        assert!(matches!(err, NnError::NotDpCompatible(_)), "{err}");
        assert!(err.to_string().contains("GroupNorm"));
        let msg = ModelSpec::named("resnet", &[3], 2, &[])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("resnet") && msg.contains("mlp"), "{msg}");
    }

    #[test]
    fn mlp_and_logreg_flatten_images() {
        let m = ModelSpec::named("mlp", &[1, 8, 8], 10, &[32, 16]).unwrap();
        assert_eq!(m.layers.len(), 6);
        assert_eq!(
            m.layers[1],
            LayerSpec::Linear {
                in_features: 64,
                out_features: 32
            }
        );
        assert!(ModelSpec::named("mlp", &[4], 3, &[]).is_err());
        let l = ModelSpec::named("logreg", &[30], 2, &[]).unwrap();
        assert_eq!(
            l.layers,
            vec![LayerSpec::Linear {
                in_features: 30,
                out_features: 2
            }]
        );
    }
}
