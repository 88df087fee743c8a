//! Model descriptions and the named architectures (`logreg`, `mlp`, `cnn`, `cnn-tanh`,
//! `scatter-cnn`, `scatter-linear`). A
//! [`ModelSpec`] is plain data (saved as JSON with the weights); [`crate::Sequential::new`]
//! builds it.

use serde::{Deserialize, Serialize};

use crate::error::{NnError, Result, invalid};
use crate::layers::{BATCHNORM_REFUSAL, LayerSpec, scattering_channels};

/// The architecture names [`ModelSpec::named`] knows.
pub const MODEL_NAMES: &[&str] = &[
    "logreg",
    "mlp",
    "cnn",
    "cnn-tanh",
    "scatter-cnn",
    "scatter-linear",
];

/// `name` as [`ModelSpec::named`] knows it (lower case), or why it is refused: BatchNorm is
/// not DP-compatible, and any other name outside [`MODEL_NAMES`] is unknown. Lets a command
/// line refuse a model name before any data is loaded.
///
/// # Errors
/// [`NnError::NotDpCompatible`] for a BatchNorm name; [`NnError::UnknownModel`] otherwise.
pub fn check_model_name(name: &str) -> Result<String> {
    let lower = name.to_ascii_lowercase();
    if lower.contains("batchnorm") || lower.contains("batch-norm") || lower.contains("batch_norm") {
        return Err(NnError::NotDpCompatible(BATCHNORM_REFUSAL.into()));
    }
    if MODEL_NAMES.contains(&lower.as_str()) {
        Ok(lower)
    } else {
        Err(NnError::UnknownModel {
            name: name.into(),
            known: MODEL_NAMES.join(", "),
        })
    }
}

/// Scales J of the scattering front end of `scatter-cnn` and `scatter-linear`.
const SCATTER_J: usize = 2;
/// Angles L of the scattering front end.
const SCATTER_L: usize = 8;
/// Normalisation groups over the scattering channels (Tramèr & Boneh's 27 for 81 channels).
const SCATTER_GROUPS: usize = 27;

/// A sequential model's description: a name, the record shape it takes, and its layers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// - `scatter-cnn`: Tramèr & Boneh's (2021) CNN on ScatterNet features, for `[c, h, w]`
    ///   images: Scattering2d (J = 2, L = 8: 81·c channels at ⌊h/4⌋ × ⌊w/4⌋), GroupNorm
    ///   without affine parameters (27 groups, their `GroupNorm(27, 81, affine=False)`), Conv 16@3×3 s2 p1, Tanh, Conv 32@3×3 s1 p1, Tanh, Flatten, Linear → 32,
    ///   Tanh, Linear 32→K. For MNIST: 81@7×7 → 16@4×4 → 32@4×4 → 512 → 32 → 10.
    /// - `scatter-linear`: their linear model on the same normalised features: Scattering2d,
    ///   GroupNorm without affine parameters (27 groups), Flatten, Linear → K.
    ///
    /// The scattering transform and the normalisation are fixed (no parameters), so DP-SGD
    /// computes them once per record before training.
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
        let lower = check_model_name(name)?;
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
                return shipped(&lower, input_shape, num_classes);
            }
            "scatter-cnn" | "scatter-linear" => {
                layers.extend(scatter_layers(&lower, input_shape, num_classes)?);
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

    /// Reads a description from JSON (the form saved with the weights):
    /// `{"name": ..., "input_shape": [C, H, W] or [D], "layers": [{"type": "conv2d", ...}, ...]}`.
    /// Only the text is checked here; [`ModelSpec::check`] checks that the layers chain.
    ///
    /// # Errors
    /// [`NnError::InvalidParameter`] for malformed JSON, a missing field or an unknown layer
    /// type (named, with the known types).
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| {
            let msg = e.to_string();
            invalid(match msg.strip_prefix("unknown variant ") {
                Some(rest) => format!("architecture: unknown layer type {rest}"),
                None => format!("architecture: {msg}"),
            })
        })
    }

    /// Builds the model once (throw-away initialisation) to check that every layer takes its
    /// predecessor's output shape, and returns it for inspection (shapes, parameter count).
    ///
    /// # Errors
    /// As [`crate::Sequential::new`]: a shape error names the layer (position and type) and
    /// both shapes.
    pub fn check(&self) -> Result<crate::Sequential> {
        crate::Sequential::new(self.clone(), &mut dpml_mechanisms::DpRng::seeded(0))
    }

    /// The number of trainable parameters the layers declare, computed from the description
    /// alone (nothing allocated); `None` when it overflows `usize`.
    pub fn parameter_count(&self) -> Option<usize> {
        self.layers
            .iter()
            .try_fold(0usize, |sum, l| sum.checked_add(l.parameter_count()?))
    }

    /// Refuses descriptions too large to build, before anything is allocated: a saved file or a
    /// flag can declare any size, and building first would abort the process on a declared
    /// `Linear 4 → 2^40`.
    ///
    /// # Errors
    /// [`NnError::InvalidParameter`] naming the declared size and the limit.
    pub fn check_size(&self) -> Result<usize> {
        self.input_shape
            .iter()
            .try_fold(1usize, |p, &s| p.checked_mul(s))
            .filter(|&r| r <= MAX_RECORD_ELEMENTS)
            .ok_or_else(|| {
                invalid(format!(
                    "model {:?}: input shape {:?} exceeds the limit of {MAX_RECORD_ELEMENTS} values per record",
                    self.name, self.input_shape
                ))
            })?;
        self.parameter_count()
            .filter(|&n| n <= MAX_PARAMETERS)
            .ok_or_else(|| {
                invalid(format!(
                    "model {:?} declares {} parameters, more than the limit of {MAX_PARAMETERS}",
                    self.name,
                    self.parameter_count()
                        .map_or_else(|| "over 2^64".to_string(), |n| n.to_string())
                ))
            })
    }
}

/// The most trainable parameters a model may have (1 GiB of f32 weights; DP-SGD also keeps
/// per-sample gradients, so anything near this is far beyond what it can train).
pub const MAX_PARAMETERS: usize = 1 << 28;

/// The most values one input record may have (MNIST has 784, CIFAR 3072).
pub const MAX_RECORD_ELEMENTS: usize = 1 << 22;

/// The most values one layer may compute per record (its output, or a convolution's unfolded
/// input): 128 MiB of f32 per record, far above any trainable model (a 3×3 convolution of 64
/// channels on 224×224 unfolds to 2.9·10⁷), far below what a declared padding of 10⁵ asks
/// (4·10¹⁰ output positions).
pub const MAX_LAYER_VALUES: usize = 1 << 25;

/// The shipped description of `cnn` or `cnn-tanh` (crates/nn/archs/*.json, the same JSON a
/// user passes with `--arch`), for `[1, 28, 28]` records, with the last layer resized to
/// `num_classes` outputs.
fn shipped(name: &str, input_shape: &[usize], num_classes: usize) -> Result<ModelSpec> {
    let text = match name {
        "cnn" => include_str!("../archs/cnn.json"),
        _ => include_str!("../archs/cnn-tanh.json"),
    };
    let mut spec = ModelSpec::from_json(text)?;
    if input_shape != spec.input_shape {
        return Err(NnError::Shape(format!(
            "model {name:?} expects records of shape {:?}, the data has records of shape {input_shape:?}",
            spec.input_shape
        )));
    }
    if let Some(LayerSpec::Linear { out_features, .. }) = spec.layers.last_mut() {
        *out_features = num_classes;
    }
    Ok(spec)
}

/// The layers of `scatter-cnn` / `scatter-linear` for `[c, h, w]` records.
fn scatter_layers(name: &str, input: &[usize], num_classes: usize) -> Result<Vec<LayerSpec>> {
    let &[c, h, w] = input else {
        return Err(NnError::Shape(format!(
            "model {name:?} expects image records of shape [channels, h, w], the data has records of shape {input:?}"
        )));
    };
    let side = 1usize << SCATTER_J;
    let channels = c * scattering_channels(SCATTER_J, SCATTER_L);
    let (sh, sw) = (h / side, w / side);
    let mut layers = vec![
        LayerSpec::Scattering2d {
            j: SCATTER_J,
            l: SCATTER_L,
        },
        LayerSpec::GroupStandardize {
            groups: SCATTER_GROUPS,
            channels,
        },
    ];
    if name == "scatter-linear" {
        layers.extend([
            LayerSpec::Flatten,
            LayerSpec::Linear {
                in_features: channels * sh * sw,
                out_features: num_classes,
            },
        ]);
        return Ok(layers);
    }
    // Conv 3×3 stride 2 padding 1 halves each side (rounding up); the second keeps it.
    let (oh, ow) = (sh.saturating_sub(1) / 2 + 1, sw.saturating_sub(1) / 2 + 1);
    layers.extend([
        LayerSpec::Conv2d {
            in_channels: channels,
            out_channels: 16,
            kernel: 3,
            stride: 2,
            padding: 1,
        },
        LayerSpec::Tanh,
        LayerSpec::Conv2d {
            in_channels: 16,
            out_channels: 32,
            kernel: 3,
            stride: 1,
            padding: 1,
        },
        LayerSpec::Tanh,
        LayerSpec::Flatten,
        LayerSpec::Linear {
            in_features: 32 * oh * ow,
            out_features: 32,
        },
        LayerSpec::Tanh,
        LayerSpec::Linear {
            in_features: 32,
            out_features: num_classes,
        },
    ]);
    Ok(layers)
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

    #[test]
    fn scatter_cnn_has_tramer_boneh_shapes() {
        let spec = ModelSpec::named("scatter-cnn", &[1, 28, 28], 10, &[]).unwrap();
        let m = Sequential::new(spec, &mut DpRng::seeded(0)).unwrap();
        let shapes: Vec<Vec<usize>> = m.layers().iter().map(|l| l.out_shape().to_vec()).collect();
        assert_eq!(shapes[0], [81, 7, 7]);
        assert_eq!(shapes[2], [16, 4, 4]);
        assert_eq!(shapes[4], [32, 4, 4]);
        assert_eq!(shapes[6], [512]);
        assert_eq!(m.output_shape(), &[10]);
        // conv 81·16·9 + 16, conv 16·32·9 + 32, linear 512·32 + 32, 32·10 + 10.
        assert_eq!(m.num_params(), 11_680 + 4_640 + 16_416 + 330);
        assert_eq!(m.fixed_prefix_len(), 2);
        let lin = ModelSpec::named("scatter-linear", &[1, 28, 28], 10, &[]).unwrap();
        let m = Sequential::new(lin, &mut DpRng::seeded(0)).unwrap();
        assert_eq!(m.num_params(), 3969 * 10 + 10);
        // Small images work too (digits: 8×8 → 81@2×2 → 16@1×1).
        let d = ModelSpec::named("scatter-cnn", &[1, 8, 8], 10, &[]).unwrap();
        assert!(Sequential::new(d, &mut DpRng::seeded(0)).is_ok());
        let msg = ModelSpec::named("scatter-cnn", &[64], 10, &[])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("[64]"), "{msg}");
    }

    #[test]
    fn unknown_layer_types_are_refused_by_name() {
        let text = r#"{"name": "x", "input_shape": [4], "layers": [{"type": "attention"}]}"#;
        let msg = ModelSpec::from_json(text).unwrap_err().to_string();
        assert!(
            msg.contains("unknown layer type")
                && msg.contains("attention")
                && msg.contains("conv2d"),
            "{msg}"
        );
    }

    #[test]
    fn shapes_that_do_not_chain_name_the_layer_and_both_shapes() {
        let text = r#"{"name": "x", "input_shape": [3, 9, 9], "layers": [
            {"type": "conv2d", "in_channels": 3, "out_channels": 4, "kernel": 3, "stride": 1, "padding": 0},
            {"type": "flatten"},
            {"type": "linear", "in_features": 100, "out_features": 2}]}"#;
        let msg = ModelSpec::from_json(text)
            .unwrap()
            .check()
            .unwrap_err()
            .to_string();
        // conv 3x3 on 9x9 gives 4@7x7 = 196 features.
        assert!(
            msg.contains("layer 2 (linear)") && msg.contains("[100]") && msg.contains("[196]"),
            "{msg}"
        );
    }

    /// The parametric names are generated for the data's shape; their MNIST instances are
    /// shipped as files to start an `--arch` from, and must stay what the names build.
    #[test]
    fn shipped_mnist_instances_equal_the_named_architectures() {
        let cases = [
            (
                "logreg",
                &[][..],
                include_str!("../archs/mnist/logreg.json"),
            ),
            (
                "mlp",
                &[512][..],
                include_str!("../archs/mnist/mlp-512.json"),
            ),
            (
                "scatter-cnn",
                &[][..],
                include_str!("../archs/mnist/scatter-cnn.json"),
            ),
            (
                "scatter-linear",
                &[][..],
                include_str!("../archs/mnist/scatter-linear.json"),
            ),
        ];
        for (name, hidden, text) in cases {
            let named = ModelSpec::named(name, &[1, 28, 28], 10, hidden).unwrap();
            assert_eq!(named, ModelSpec::from_json(text).unwrap(), "{name}");
        }
    }

    #[test]
    fn shipped_example_resnet_builds_with_its_parameters_named_by_position() {
        let spec =
            ModelSpec::from_json(include_str!("../archs/examples/resnet-gn-3x32x32.json")).unwrap();
        let m = spec.check().unwrap();
        assert_eq!(m.output_shape(), &[10]);
        assert_eq!(Some(m.num_params()), spec.parameter_count());
        let names: Vec<String> = m.named_params().into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&"3.0.weight".to_string()), "{names:?}");
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(ModelSpec::from_json(&json).unwrap(), spec);
    }

    #[test]
    fn flops_count_two_per_multiply_add_of_linear_and_conv() {
        let spec = ModelSpec::named("logreg", &[4], 3, &[]).unwrap();
        assert_eq!(spec.check().unwrap().flops_per_sample(), 2 * 4 * 3);
        // cnn: conv1 1·64·16·14·14, conv2 16·16·32·5·5, linear 512·32 + 32·10.
        let cnn = ModelSpec::named("cnn", &[1, 28, 28], 10, &[]).unwrap();
        let macs = 64 * 16 * 196 + 256 * 32 * 25 + 512 * 32 + 320;
        assert_eq!(cnn.check().unwrap().flops_per_sample(), 2 * macs);
        // Training: three times the forward, less conv1's input gradient (never computed).
        let conv1 = 2 * 64 * 16 * 196;
        assert_eq!(
            cnn.check().unwrap().train_flops_per_sample(),
            3 * 2 * macs - conv1
        );
        assert_eq!(
            spec.check().unwrap().train_flops_per_sample(),
            2 * 2 * 4 * 3
        );
        // A residual block first: only its first inner layer skips the input gradient.
        let linear = |n| crate::layers::LayerSpec::Linear {
            in_features: n,
            out_features: n,
        };
        let res = ModelSpec {
            name: "res".into(),
            input_shape: vec![4],
            layers: vec![
                crate::layers::LayerSpec::Residual {
                    layers: vec![linear(4), crate::layers::LayerSpec::Relu, linear(4)],
                },
                crate::layers::LayerSpec::Linear {
                    in_features: 4,
                    out_features: 3,
                },
            ],
        };
        let fwd = 2 * (16 + 16 + 12);
        assert_eq!(
            res.check().unwrap().train_flops_per_sample(),
            3 * fwd - 2 * 16
        );
    }

    /// The working-set estimate: the input, every output with its gradient, and the
    /// convolutions' unfolded inputs and per-sample gradients.
    #[test]
    fn floats_per_record_count_outputs_gradients_and_conv_state() {
        let cnn = ModelSpec::named("cnn", &[1, 28, 28], 10, &[]).unwrap();
        // Outputs: conv1 16·14·14, relu, pool 16·13·13, conv2 32·5·5, relu, pool 32·4·4,
        // flatten 512, linear 32, relu, linear 10; each with its gradient.
        let outputs = 3136 + 3136 + 2704 + 800 + 800 + 512 + 512 + 32 + 32 + 10;
        // conv1: unfolded 64·196 and 16·64 + 16; conv2: unfolded 256·25 and 32·256 + 32.
        let conv = 64 * 196 + 1040 + 256 * 25 + 8224;
        assert_eq!(
            cnn.check().unwrap().floats_per_record(),
            784 + 2 * outputs + conv
        );
    }
}
