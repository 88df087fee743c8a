//! Layers: plain structs with a small forward and backward, and the [`Layer`] trait that the
//! [`crate::Sequential`] model drives. Parameterised layers also give per-sample gradient norms
//! and the clipped sum of per-sample gradients (see [`GradMode`]).

mod activation;
mod conv;
mod dropout;
mod flatten;
mod gelu;
mod groupnorm;
mod layernorm;
mod linear;
mod pool;
mod residual;
mod scatter;
mod spec;
mod standardize;

pub use activation::{Relu, Tanh};
pub use conv::{Conv2d, ConvNormMode};
pub use dropout::Dropout;
pub use flatten::Flatten;
pub use gelu::Gelu;
pub use groupnorm::GroupNorm;
pub use layernorm::LayerNorm;
pub use linear::Linear;
pub use pool::{AvgPool2d, MaxPool2d};
pub use residual::Residual;
pub use scatter::{Scattering2d, scattering_channels};
pub(crate) use spec::build_chain;
pub use spec::{BATCHNORM_REFUSAL, LayerSpec};
pub use standardize::GroupStandardize;

use crate::param::Param;
use crate::tensor::Tensor;

/// What the backward pass does with parameter gradients.
#[derive(Debug)]
pub enum GradMode<'a> {
    /// Add the plain sum over the batch of per-sample gradients into the parameters' `grad`.
    Sum,
    /// Do not touch `grad`; write each sample's squared gradient norm over this layer's
    /// parameters into the slice (one entry per sample) and keep what
    /// [`Layer::accumulate_clipped`] needs to form the clipped sum afterwards.
    PerSample(&'a mut [f32]),
    /// Do not touch `grad`: the input gradient only. The layer's norms and clipped sum come
    /// later from [`Layer::clip_in_place`] (the model asks this only of a layer with a
    /// [`Layer::clip_in_place_len`]).
    InputOnly,
}

/// One layer of a sequential model. Tensors are batches `[n, record...]`.
///
/// The model calls `forward`, then (for training) `backward` from the last layer to the first
/// with the layer's own input `x`, output `y` and output gradient `gy` (buffers the model
/// keeps, so layers need not copy them), and in private mode `accumulate_clipped` once the clip
/// factors are known.
pub trait Layer: Send + Sync + std::fmt::Debug {
    /// The description this layer was built from (saved with the model).
    fn spec(&self) -> LayerSpec;

    /// Shape of one output record.
    fn out_shape(&self) -> &[usize];

    /// Computes `y` from `x` (`y` is resized; its allocation is reused between calls).
    fn forward(&mut self, x: &Tensor, y: &mut Tensor);

    /// Backpropagates `gy` (gradient of the summed loss w.r.t. `y`): writes the input gradient
    /// into `gx` when asked, and handles parameter gradients as `mode` says.
    fn backward(
        &mut self,
        x: &Tensor,
        y: &Tensor,
        gy: &Tensor,
        gx: Option<&mut Tensor>,
        mode: GradMode<'_>,
    );

    /// After a [`GradMode::PerSample`] backward: adds Σᵢ cᵢ·gᵢ (gᵢ the per-sample gradient of
    /// this layer's parameters) into the parameters' `grad`. Layers without parameters do
    /// nothing.
    ///
    /// Factors are finite and in [0, 1]. A sample with cᵢ = 0 must contribute exactly nothing:
    /// its activations and gradients may be ±inf or NaN (that is why its factor is 0), so it
    /// has to be skipped, never multiplied by 0 (0·inf = NaN would poison the whole sum).
    /// Every sample with cᵢ ≠ 0 had a finite norm, so its per-sample gradient is finite.
    fn accumulate_clipped(&mut self, _x: &Tensor, _gy: &Tensor, _factors: &[f32]) {}

    /// The length of one per-sample gradient when this layer can clip in place (see
    /// [`Layer::clip_in_place`]); `None`, the default, when it cannot. A private model lets
    /// the layer with the longest one do so: a layer that otherwise keeps every sample's
    /// gradient for [`Layer::accumulate_clipped`] then writes and reads each one while it is
    /// still in the cache, rather than reading the batch's back from memory after the pass.
    fn clip_in_place_len(&self) -> Option<usize> {
        None
    }

    /// After a [`GradMode::InputOnly`] backward, once every other layer's per-sample norms are
    /// known: writes each sample's squared gradient norm over this layer's parameters into `sq`
    /// and adds Σᵢ cᵢ·gᵢ into the parameters' `grad`, with cᵢ = `factor(i, sq[i])` (the model's
    /// clip factor from the other layers' norms and this one). Samples with cᵢ = 0 are
    /// skipped, as in [`Layer::accumulate_clipped`]. Called only on a layer with a
    /// [`Layer::clip_in_place_len`].
    fn clip_in_place(
        &mut self,
        _x: &Tensor,
        _gy: &Tensor,
        _sq: &mut [f32],
        _factor: &(dyn Fn(usize, f32) -> f32 + Sync),
    ) {
    }

    /// Sets how a convolution computes per-sample norms; other layers ignore it.
    fn set_conv_norm_mode(&mut self, _mode: ConvNormMode) {}

    /// Switches between training (Dropout draws masks) and evaluation (Dropout is the
    /// identity); other layers ignore it.
    fn set_training(&mut self, _training: bool) {}

    /// Floating-point operations of one record's forward pass, counted as 2 × the
    /// multiply-adds of Linear and Conv2d (weights × output positions; biases, activations,
    /// normalisation and pooling are not counted). A residual block sums its layers.
    fn flops(&self) -> u64 {
        let out: usize = self.out_shape().iter().product();
        let macs = match self.spec() {
            LayerSpec::Linear {
                in_features,
                out_features,
            } => in_features * out_features,
            LayerSpec::Conv2d {
                in_channels,
                kernel,
                ..
            } => in_channels * kernel * kernel * out,
            _ => 0,
        };
        2 * macs as u64
    }

    /// Values a training step keeps per record for this layer, from the forward pass to the
    /// end of the backward pass: its output and that output's gradient, and what the layer
    /// keeps of its own ([`Layer::own_floats_per_record`]). An estimate of the working set,
    /// for choosing how many records go through the model at once.
    fn floats_per_record(&self) -> usize {
        2 * self.out_shape().iter().product::<usize>() + self.own_floats_per_record()
    }

    /// Values this layer keeps per record besides its output and that output's gradient: a
    /// convolution's unfolded input and per-sample gradient, a residual block's layers.
    fn own_floats_per_record(&self) -> usize {
        0
    }

    /// Floating-point operations of the gradient with respect to this layer's input, which
    /// backward leaves out when nothing upstream learns (the model's first layer with
    /// parameters): as many as the forward pass for Linear and Conv2d; a residual block's
    /// first layer's.
    fn input_grad_flops(&self) -> u64 {
        self.flops()
    }

    /// The parameters (empty for parameter-free layers).
    fn params(&self) -> Vec<&Param> {
        Vec::new()
    }

    /// The parameters, mutable.
    fn params_mut(&mut self) -> Vec<&mut Param> {
        Vec::new()
    }
}

/// Applies `f` element-wise over matching chunks of three slices in parallel (large tensors
/// only; small ones run inline).
pub(crate) fn par_map3(a: &[f32], b: &[f32], out: &mut [f32], f: impl Fn(f32, f32) -> f32 + Sync) {
    use rayon::prelude::*;
    const MIN: usize = 1 << 15;
    if out.len() < 2 * MIN {
        out.iter_mut()
            .zip(a.iter().zip(b))
            .for_each(|(o, (&x, &y))| *o = f(x, y));
    } else {
        out.par_chunks_mut(MIN)
            .zip(a.par_chunks(MIN).zip(b.par_chunks(MIN)))
            .for_each(|(o, (a, b))| {
                o.iter_mut()
                    .zip(a.iter().zip(b))
                    .for_each(|(o, (&x, &y))| *o = f(x, y))
            });
    }
}

/// Adds `Σᵢ cᵢ · rows[i]` into `dst` (`rows` is `c.len() × dst.len()`), splitting the
/// coordinates across threads. The clipped sum for materialised per-sample gradients. Rows
/// with cᵢ = 0 are skipped, not scaled: they may hold non-finite values.
pub(crate) fn weighted_row_sum(rows: &[f32], c: &[f32], dst: &mut [f32]) {
    use rayon::prelude::*;
    let width = dst.len();
    let chunk = width.div_ceil(rayon::current_num_threads().max(1)).max(256);
    dst.par_chunks_mut(chunk).enumerate().for_each(|(j, d)| {
        let (off, len) = (j * chunk, d.len());
        let row = |i: usize| &rows[i * width + off..i * width + off + len];
        // Four rows a pass: four streams in flight from memory, and `d` loaded and stored a
        // quarter as often.
        let mut four = [(0, 0.0); 4];
        let mut held = 0;
        for (i, &ci) in c.iter().enumerate().filter(|&(_, &ci)| ci != 0.0) {
            four[held] = (i, ci);
            held += 1;
            if held == 4 {
                let [(i0, c0), (i1, c1), (i2, c2), (i3, c3)] = four;
                axpy4([c0, c1, c2, c3], [row(i0), row(i1), row(i2), row(i3)], d);
                held = 0;
            }
        }
        for &(i, ci) in &four[..held] {
            axpy(ci, row(i), d);
        }
    });
}

/// `y += a·x`. Compiled for each SIMD level and chosen at run time (crate docs, "Vector
/// width"): the clipped sum of materialised per-sample gradients runs through it.
#[multiversion::multiversion(targets = "simd")]
pub(crate) fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
}

/// `y += a₀·x₀ + a₁·x₁ + a₂·x₂ + a₃·x₃`, as [`axpy`].
#[multiversion::multiversion(targets = "simd")]
fn axpy4(a: [f32; 4], x: [&[f32]; 4], y: &mut [f32]) {
    let [x0, x1, x2, x3] = x;
    for ((((y, x0), x1), x2), x3) in y.iter_mut().zip(x0).zip(x1).zip(x2).zip(x3) {
        *y += a[0] * x0 + a[1] * x1 + a[2] * x2 + a[3] * x3;
    }
}

#[cfg(test)]
pub(crate) mod testutil;
