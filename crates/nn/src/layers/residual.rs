//! A residual block: a sub-sequence of layers whose output is added to the block's input
//! (`y = x + f(x)`, He et al. 2016), so small ResNets can be written as data. The parameters of
//! every layer inside count as one group: in private mode the block's per-sample squared norm
//! is the sum of its layers' (so they enter the model's total norm, and per-layer clipping
//! clips the block as one layer), and the clipped sum is formed layer by layer with the same
//! factors.

use dpml_mechanisms::DpRng;

use super::{ConvNormMode, GradMode, Layer, LayerSpec, build_chain};
use crate::error::{NnError, Result, invalid};
use crate::kernels::add_into;
use crate::param::Param;
use crate::tensor::Tensor;

/// `y = x + f(x)` with `f` a chain of layers mapping records of shape `shape` to that shape.
#[derive(Debug)]
pub struct Residual {
    shape: Vec<usize>,
    layers: Vec<Box<dyn Layer>>,
    /// acts[j] is the output of sub-layer j (its input is acts[j − 1], or x for j = 0).
    acts: Vec<Tensor>,
    /// grads[j] is the loss gradient w.r.t. acts[j].
    grads: Vec<Tensor>,
    /// The gradient w.r.t. x through f.
    through: Tensor,
    /// Per-sample squared norms of each sub-layer with parameters.
    sq: Vec<f32>,
}

impl Residual {
    /// Builds the sub-layers for records of shape `input`, initialising them from `rng`.
    ///
    /// # Errors
    /// [`NnError::Shape`] when the sub-layers do not chain or do not give back the input's
    /// shape (both shapes named); [`NnError::InvalidParameter`] for an empty block; build
    /// errors of the sub-layers, naming the sub-layer.
    pub fn new(specs: &[LayerSpec], input: &[usize], rng: &mut DpRng) -> Result<Self> {
        if specs.is_empty() {
            return Err(invalid(
                "a residual block needs at least one layer, got none",
            ));
        }
        let layers = build_chain(specs, input, rng, false)?;
        let out = layers.last().map(|l| l.out_shape()).unwrap_or(input);
        if out != input {
            return Err(NnError::Shape(format!(
                "a residual block adds its layers' output to its input, so they must give back \
                 its shape: input {input:?}, output of its layers {out:?}"
            )));
        }
        let m = layers.len();
        Ok(Self {
            shape: input.to_vec(),
            layers,
            acts: vec![Tensor::default(); m],
            grads: vec![Tensor::default(); m],
            through: Tensor::default(),
            sq: Vec::new(),
        })
    }
}

impl Layer for Residual {
    fn spec(&self) -> LayerSpec {
        LayerSpec::Residual {
            layers: self.layers.iter().map(|l| l.spec()).collect(),
        }
    }

    fn out_shape(&self) -> &[usize] {
        &self.shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        for j in 0..self.layers.len() {
            let (done, rest) = self.acts.split_at_mut(j);
            let inp = if j == 0 { x } else { &done[j - 1] };
            self.layers[j].forward(inp, &mut rest[0]);
        }
        y.reset(x.batch(), &self.shape);
        let f = &self.acts[self.layers.len() - 1];
        super::par_map3(x.data(), f.data(), y.data_mut(), |a, b| a + b);
    }

    fn backward(
        &mut self,
        x: &Tensor,
        _y: &Tensor,
        gy: &Tensor,
        gx: Option<&mut Tensor>,
        mode: GradMode<'_>,
    ) {
        let (n, m) = (x.batch(), self.layers.len());
        self.grads[m - 1].copy_from(gy);
        let input_only = matches!(mode, GradMode::InputOnly);
        let mut total = match mode {
            GradMode::PerSample(sq) => {
                sq[..n].iter_mut().for_each(|s| *s = 0.0);
                Some(sq)
            }
            GradMode::Sum | GradMode::InputOnly => None,
        };
        let want_gx = gx.is_some();
        for j in (0..m).rev() {
            let (lo, hi) = self.grads.split_at_mut(j);
            let inp = if j == 0 { x } else { &self.acts[j - 1] };
            let g_in = if j > 0 {
                Some(&mut lo[j - 1])
            } else if want_gx {
                Some(&mut self.through)
            } else {
                None
            };
            let has_params = !self.layers[j].params().is_empty();
            match total.as_deref_mut() {
                Some(sq) if has_params => {
                    self.sq.clear();
                    self.sq.resize(n, 0.0);
                    let layer_sq = GradMode::PerSample(&mut self.sq);
                    self.layers[j].backward(inp, &self.acts[j], &hi[0], g_in, layer_sq);
                    sq.iter_mut().zip(&self.sq).for_each(|(t, s)| *t += s);
                }
                _ => {
                    let mode = if input_only {
                        GradMode::InputOnly
                    } else {
                        GradMode::Sum
                    };
                    self.layers[j].backward(inp, &self.acts[j], &hi[0], g_in, mode);
                }
            }
        }
        if let Some(gx) = gx {
            gx.copy_from(&self.through);
            add_into(gx.data_mut(), gy.data());
        }
    }

    fn accumulate_clipped(&mut self, x: &Tensor, _gy: &Tensor, factors: &[f32]) {
        for j in 0..self.layers.len() {
            if self.layers[j].params().is_empty() {
                continue;
            }
            let inp = if j == 0 { x } else { &self.acts[j - 1] };
            self.layers[j].accumulate_clipped(inp, &self.grads[j], factors);
        }
    }

    fn set_conv_norm_mode(&mut self, mode: ConvNormMode) {
        self.layers
            .iter_mut()
            .for_each(|l| l.set_conv_norm_mode(mode));
    }

    fn set_training(&mut self, training: bool) {
        self.layers
            .iter_mut()
            .for_each(|l| l.set_training(training));
    }

    fn flops(&self) -> u64 {
        self.layers.iter().map(|l| l.flops()).sum()
    }

    fn own_floats_per_record(&self) -> usize {
        self.layers.iter().map(|l| l.floats_per_record()).sum()
    }

    fn input_grad_flops(&self) -> u64 {
        // Without a wanted input gradient only the first inner layer skips its own.
        self.layers.first().map_or(0, |l| l.input_grad_flops())
    }

    fn params(&self) -> Vec<&Param> {
        self.layers.iter().flat_map(|l| l.params()).collect()
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        self.layers
            .iter_mut()
            .flat_map(|l| l.params_mut())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::{check_layer, check_per_sample, check_poisoned_sample};

    /// conv 3×3 (padding 1, so the shape is kept) + GroupNorm + ReLU + LayerNorm + GELU.
    fn block(c: usize, h: usize, w: usize) -> Residual {
        let specs = [
            LayerSpec::Conv2d {
                in_channels: c,
                out_channels: c,
                kernel: 3,
                stride: 1,
                padding: 1,
            },
            LayerSpec::GroupNorm {
                groups: c,
                channels: c,
            },
            LayerSpec::Relu,
            LayerSpec::LayerNorm {
                shape: vec![c, h, w],
            },
            LayerSpec::Gelu,
        ];
        Residual::new(&specs, &[c, h, w], &mut DpRng::seeded(5)).unwrap()
    }

    #[test]
    fn gradients_match_finite_differences() {
        check_layer(&mut block(3, 7, 5), &[2, 3, 7, 5], 11);
    }

    #[test]
    fn per_sample_norms_include_every_inner_layer_on_odd_colour_images() {
        check_per_sample(&mut block(3, 17, 23), &[4, 3, 17, 23], 12);
    }

    #[test]
    fn a_poisoned_sample_is_left_out_of_the_clipped_sum() {
        check_poisoned_sample(&mut block(3, 5, 7), &[4, 3, 5, 7], 13);
    }

    #[test]
    fn shape_changes_are_refused_naming_both_shapes() {
        let specs = [LayerSpec::Conv2d {
            in_channels: 3,
            out_channels: 4,
            kernel: 3,
            stride: 1,
            padding: 1,
        }];
        let msg = Residual::new(&specs, &[3, 8, 8], &mut DpRng::seeded(0))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("[3, 8, 8]") && msg.contains("[4, 8, 8]"),
            "{msg}"
        );
        let msg = Residual::new(&[], &[3], &mut DpRng::seeded(0))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("at least one layer"), "{msg}");
    }
}
