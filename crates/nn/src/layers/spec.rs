//! Serialisable layer descriptions: what is saved beside the weights, and what models are built
//! from. Building checks the incoming record shape and refuses layers that are not compatible
//! with per-sample clipping.

use dpml_mechanisms::DpRng;
use serde::{Deserialize, Serialize};

use super::{
    AvgPool2d, Conv2d, Dropout, Flatten, Gelu, GroupNorm, GroupStandardize, Layer, LayerNorm,
    Linear, MaxPool2d, Relu, Residual, Scattering2d, Tanh,
};
use crate::arch::MAX_LAYER_VALUES;
use crate::error::{NnError, Result};

/// The explanation given whenever batch normalisation is requested.
pub const BATCHNORM_REFUSAL: &str = "BatchNorm is not supported: it normalises each sample with \
statistics of the whole batch, so one sample's gradient depends on every other sample and \
per-sample clipping no longer bounds any record's influence (DP-SGD's guarantee breaks); use \
GroupNorm (per-sample normalisation) instead";

/// A layer description (JSON: `{"type": "conv2d", "in_channels": 1, ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LayerSpec {
    /// Fully connected `y = x Wᵀ + b`, records `[in_features]`.
    Linear {
        /// Input features.
        in_features: usize,
        /// Output features.
        out_features: usize,
    },
    /// 2-D convolution over `[in_channels, h, w]` records, square kernel.
    Conv2d {
        /// Input channels.
        in_channels: usize,
        /// Output channels.
        out_channels: usize,
        /// Kernel side.
        kernel: usize,
        /// Stride.
        stride: usize,
        /// Zero padding on each side.
        padding: usize,
    },
    /// Rectified linear unit.
    Relu,
    /// Hyperbolic tangent.
    Tanh,
    /// Max pooling (square window, no padding).
    MaxPool2d {
        /// Window side.
        kernel: usize,
        /// Stride.
        stride: usize,
    },
    /// Average pooling (square window, no padding).
    AvgPool2d {
        /// Window side.
        kernel: usize,
        /// Stride.
        stride: usize,
    },
    /// Flattens each record to one axis.
    Flatten,
    /// Group normalisation over `[channels, ...]` records (per sample, so DP-compatible).
    GroupNorm {
        /// Number of groups (must divide `channels`).
        groups: usize,
        /// Channels.
        channels: usize,
    },
    /// Group normalisation without affine parameters (PyTorch's `GroupNorm(affine=False)`):
    /// parameter-free, per sample.
    GroupStandardize {
        /// Number of groups (must divide `channels`).
        groups: usize,
        /// Channels.
        channels: usize,
    },
    /// The fixed scattering transform (order 2, Morlet wavelets as kymatio's `Scattering2D`)
    /// over `[c, h, w]` records. Parameter-free; allowed only as a model's first layer.
    Scattering2d {
        /// Number of scales J (subsampling by 2^J).
        j: usize,
        /// Number of angles L.
        l: usize,
    },
    /// Gaussian error linear unit (tanh approximation, PyTorch's `approximate="tanh"`).
    Gelu,
    /// Layer normalisation over each whole record, with element-wise weight and bias of the
    /// record's shape (PyTorch's `LayerNorm(shape)`). Per sample, so DP-compatible.
    LayerNorm {
        /// The record shape it normalises (must equal the incoming shape).
        shape: Vec<usize>,
    },
    /// Inverted dropout with drop probability `p` in training (per-sample masks from the
    /// model's generator), identity at evaluation.
    Dropout {
        /// Drop probability, in [0, 1).
        p: f32,
    },
    /// A residual block: the output of `layers` (which must keep the shape) is added to the
    /// block's input.
    Residual {
        /// The sub-sequence.
        layers: Vec<LayerSpec>,
    },
    /// Batch normalisation: recognised only to be refused with [`BATCHNORM_REFUSAL`].
    BatchNorm {
        /// Channels.
        channels: usize,
    },
}

impl LayerSpec {
    /// The shapes of the parameters this layer declares, by name (`weight`, `bias`), in
    /// PyTorch layout, from the description alone (nothing allocated): what a saved file must
    /// hold for this layer, checked before the layer is built.
    /// Parameters inside a residual block are named `{position in the block}.{name}`.
    pub fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let named =
            |v: Vec<(&str, Vec<usize>)>| v.into_iter().map(|(n, s)| (n.to_string(), s)).collect();
        match *self {
            LayerSpec::Linear {
                in_features,
                out_features,
            } => named(vec![
                ("weight", vec![out_features, in_features]),
                ("bias", vec![out_features]),
            ]),
            LayerSpec::Conv2d {
                in_channels,
                out_channels,
                kernel,
                ..
            } => named(vec![
                ("weight", vec![out_channels, in_channels, kernel, kernel]),
                ("bias", vec![out_channels]),
            ]),
            LayerSpec::GroupNorm { channels, .. } => {
                named(vec![("weight", vec![channels]), ("bias", vec![channels])])
            }
            LayerSpec::LayerNorm { ref shape } => {
                named(vec![("weight", shape.clone()), ("bias", shape.clone())])
            }
            LayerSpec::Residual { ref layers } => layers
                .iter()
                .enumerate()
                .flat_map(|(j, l)| {
                    l.parameter_shapes()
                        .into_iter()
                        .map(move |(n, s)| (format!("{j}.{n}"), s))
                })
                .collect(),
            LayerSpec::Relu
            | LayerSpec::Tanh
            | LayerSpec::MaxPool2d { .. }
            | LayerSpec::AvgPool2d { .. }
            | LayerSpec::Flatten
            | LayerSpec::Gelu
            | LayerSpec::Dropout { .. }
            | LayerSpec::GroupStandardize { .. }
            | LayerSpec::Scattering2d { .. }
            | LayerSpec::BatchNorm { .. } => Vec::new(),
        }
    }

    /// The number of trainable parameters of [`LayerSpec::parameter_shapes`]; `None` when it
    /// overflows. Checked before building (see [`crate::ModelSpec::check_size`]).
    pub fn parameter_count(&self) -> Option<usize> {
        self.parameter_shapes()
            .iter()
            .try_fold(0usize, |sum, (_, shape)| {
                sum.checked_add(shape.iter().try_fold(1usize, |p, &d| p.checked_mul(d))?)
            })
    }

    /// Builds the layer for records of shape `input`, initialising parameters from `rng`.
    ///
    /// # Errors
    /// [`NnError::Shape`] when `input` does not fit the layer (the message names both shapes),
    /// [`NnError::InvalidParameter`] for zero sizes, [`NnError::NotDpCompatible`] for BatchNorm.
    pub fn build(&self, input: &[usize], rng: &mut DpRng) -> Result<Box<dyn Layer>> {
        let mismatch = |want: String| {
            NnError::Shape(format!(
                "{} expects input records of shape {want}, got {input:?}",
                self.type_name()
            ))
        };
        Ok(match *self {
            LayerSpec::Linear {
                in_features,
                out_features,
            } => {
                if input != [in_features] {
                    return Err(mismatch(format!("[{in_features}]")));
                }
                Box::new(Linear::new(in_features, out_features, rng)?)
            }
            LayerSpec::Conv2d {
                in_channels,
                out_channels,
                kernel,
                stride,
                padding,
            } => {
                let [c, h, w] = *input else {
                    return Err(mismatch(format!("[{in_channels}, h, w]")));
                };
                if c != in_channels {
                    return Err(mismatch(format!("[{in_channels}, h, w]")));
                }
                Box::new(Conv2d::new(
                    [c, h, w],
                    out_channels,
                    kernel,
                    stride,
                    padding,
                    rng,
                )?)
            }
            LayerSpec::Relu => Box::new(Relu::new(input)),
            LayerSpec::Tanh => Box::new(Tanh::new(input)),
            LayerSpec::MaxPool2d { kernel, stride } => {
                Box::new(MaxPool2d::new(image(input, self)?, kernel, stride)?)
            }
            LayerSpec::AvgPool2d { kernel, stride } => {
                Box::new(AvgPool2d::new(image(input, self)?, kernel, stride)?)
            }
            LayerSpec::Flatten => Box::new(Flatten::new(input)),
            LayerSpec::GroupNorm { groups, channels } => {
                if input.first() != Some(&channels) {
                    return Err(mismatch(format!("[{channels}, ...]")));
                }
                Box::new(GroupNorm::new(input, groups)?)
            }
            LayerSpec::GroupStandardize { groups, channels } => {
                if input.first() != Some(&channels) {
                    return Err(mismatch(format!("[{channels}, ...]")));
                }
                Box::new(GroupStandardize::new(input, groups)?)
            }
            LayerSpec::Scattering2d { j, l } => {
                Box::new(Scattering2d::new(image(input, self)?, j, l)?)
            }
            LayerSpec::Gelu => Box::new(Gelu::new(input)),
            LayerSpec::LayerNorm { ref shape } => {
                if input != shape.as_slice() {
                    return Err(mismatch(format!("{shape:?}")));
                }
                Box::new(LayerNorm::new(shape)?)
            }
            LayerSpec::Dropout { p } => Box::new(Dropout::new(input, p, rng)?),
            LayerSpec::Residual { ref layers } => Box::new(Residual::new(layers, input, rng)?),
            LayerSpec::BatchNorm { .. } => {
                return Err(NnError::NotDpCompatible(BATCHNORM_REFUSAL.into()));
            }
        })
    }

    /// The layer's JSON `type` tag (`"conv2d"`, `"residual"`, ...), used in messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            LayerSpec::Linear { .. } => "linear",
            LayerSpec::Conv2d { .. } => "conv2d",
            LayerSpec::Relu => "relu",
            LayerSpec::Tanh => "tanh",
            LayerSpec::Gelu => "gelu",
            LayerSpec::MaxPool2d { .. } => "max_pool2d",
            LayerSpec::AvgPool2d { .. } => "avg_pool2d",
            LayerSpec::Flatten => "flatten",
            LayerSpec::GroupNorm { .. } => "group_norm",
            LayerSpec::GroupStandardize { .. } => "group_standardize",
            LayerSpec::LayerNorm { .. } => "layer_norm",
            LayerSpec::Dropout { .. } => "dropout",
            LayerSpec::Residual { .. } => "residual",
            LayerSpec::Scattering2d { .. } => "scattering2d",
            LayerSpec::BatchNorm { .. } => "batch_norm",
        }
    }
}

/// Builds `specs` in order from records of shape `input`, each layer taking the previous
/// one's output shape. A shape error names the layer by position and type, then both shapes.
/// The scattering transform gives no input gradient, so it is allowed only as layer 0 and only
/// when `scatter_first` (a model's own first layer, not inside a block).
///
/// # Errors
/// As [`LayerSpec::build`], prefixed with `layer {i} ({type})`.
pub(crate) fn build_chain(
    specs: &[LayerSpec],
    input: &[usize],
    rng: &mut DpRng,
    scatter_first: bool,
) -> Result<Vec<Box<dyn Layer>>> {
    let mut shape = input.to_vec();
    let mut layers = Vec::with_capacity(specs.len());
    for (i, l) in specs.iter().enumerate() {
        let at = format!("layer {i} ({})", l.type_name());
        if matches!(l, LayerSpec::Scattering2d { .. }) && (i > 0 || !scatter_first) {
            return Err(crate::error::invalid(format!(
                "{at}: the scattering transform gives no input gradient, so it can only be a \
                 model's first layer, got it at position {i}{}",
                if scatter_first {
                    ""
                } else {
                    " of a residual block"
                }
            )));
        }
        let layer = l.build(&shape, rng).map_err(|e| match e {
            NnError::Shape(m) => NnError::Shape(format!("{at}: {m}")),
            NnError::InvalidParameter(m) => NnError::InvalidParameter(format!("{at}: {m}")),
            other => other,
        })?;
        shape = layer.out_shape().to_vec();
        // Layers whose output can outgrow their input check before they allocate (conv2d);
        // this catches any other before the activations are sized from it.
        if shape
            .iter()
            .try_fold(1usize, |p, &s| p.checked_mul(s))
            .is_none_or(|n| n > MAX_LAYER_VALUES)
        {
            return Err(crate::error::invalid(format!(
                "{at}: output shape {shape:?} exceeds the limit of {MAX_LAYER_VALUES} values per \
                 record and layer"
            )));
        }
        layers.push(layer);
    }
    Ok(layers)
}

/// `input` as `[c, h, w]`, or a shape error naming the layer.
fn image(input: &[usize], spec: &LayerSpec) -> Result<[usize; 3]> {
    match *input {
        [c, h, w] => Ok([c, h, w]),
        _ => Err(NnError::Shape(format!(
            "{} expects [channels, h, w] records, got {input:?}",
            spec.type_name()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batchnorm_is_refused_with_explanation() {
        let err = LayerSpec::BatchNorm { channels: 4 }
            .build(&[4, 8, 8], &mut DpRng::seeded(0))
            .unwrap_err();
        assert!(matches!(err, NnError::NotDpCompatible(_)));
        let msg = err.to_string();
        assert!(
            msg.contains("per-sample clipping") && msg.contains("GroupNorm"),
            "{msg}"
        );
    }

    #[test]
    fn shape_mismatch_names_both_shapes() {
        let spec = LayerSpec::Linear {
            in_features: 10,
            out_features: 2,
        };
        let msg = spec
            .build(&[12], &mut DpRng::seeded(0))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("[10]") && msg.contains("[12]"), "{msg}");
        let spec = LayerSpec::Conv2d {
            in_channels: 3,
            out_channels: 2,
            kernel: 3,
            stride: 1,
            padding: 0,
        };
        let msg = spec
            .build(&[1, 8, 8], &mut DpRng::seeded(0))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("[3, h, w]") && msg.contains("[1, 8, 8]"),
            "{msg}"
        );
    }

    #[test]
    fn json_round_trip() {
        let spec = LayerSpec::Conv2d {
            in_channels: 1,
            out_channels: 16,
            kernel: 8,
            stride: 2,
            padding: 3,
        };
        let s = serde_json::to_string(&spec).unwrap();
        assert!(s.contains("\"type\":\"conv2d\""), "{s}");
        assert_eq!(serde_json::from_str::<LayerSpec>(&s).unwrap(), spec);
    }
}
