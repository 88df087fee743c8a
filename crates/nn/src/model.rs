//! The [`Sequential`] model: a chain of layers with one forward and one backward pass per
//! step, and in private mode per-sample gradient norms, clip factors and the clipped sum of
//! per-sample gradients formed in that same pass (the book-keeping trick, Bu et al. 2023).

use dpml_mechanisms::DpRng;

use crate::arch::ModelSpec;
use crate::error::{NnError, Result, invalid};
use crate::layers::{ConvNormMode, GradMode, Layer, build_chain};
use crate::param::Param;
use crate::tensor::Tensor;

/// Added to a norm before dividing, so a zero gradient gives factor 1 rather than NaN.
const TINY: f32 = 1e-6;

/// Clipping for a private backward pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClipConfig {
    /// C: each sample's gradient is scaled to total L2 norm at most C.
    pub max_grad_norm: f32,
    /// Clip each parameterised layer separately with Cₗ = C/√L (L layers with parameters), so
    /// Σₗ Cₗ² = C² and the whole per-sample gradient still has norm ≤ C (the sensitivity the
    /// noise is calibrated to is unchanged). Off: flat clipping of the total norm.
    pub per_layer: bool,
}

impl ClipConfig {
    /// Flat clipping at `max_grad_norm`.
    ///
    /// # Errors
    /// [`NnError::InvalidParameter`] unless `max_grad_norm` is finite and > 0.
    pub fn flat(max_grad_norm: f32) -> Result<Self> {
        Self::validate(max_grad_norm)?;
        Ok(Self {
            max_grad_norm,
            per_layer: false,
        })
    }

    /// Per-layer clipping with equal thresholds Cₗ = C/√L.
    ///
    /// # Errors
    /// As [`ClipConfig::flat`].
    pub fn per_layer(max_grad_norm: f32) -> Result<Self> {
        Self::validate(max_grad_norm)?;
        Ok(Self {
            max_grad_norm,
            per_layer: true,
        })
    }

    fn validate(c: f32) -> Result<()> {
        if c.is_finite() && c > 0.0 {
            Ok(())
        } else {
            Err(invalid(format!(
                "max_grad_norm must be finite and > 0, got {c}"
            )))
        }
    }
}

/// What [`Sequential::backward`] does with parameter gradients.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BackwardMode {
    /// Add the plain sum of per-sample gradients into each parameter's `grad`.
    NonPrivate,
    /// Add Σᵢ cᵢ gᵢ with cᵢ = min(1, C/(‖gᵢ‖ + 10⁻⁶)) (per layer if configured); a sample whose
    /// total norm is not finite (inf, NaN, or overflowing f32) gets cᵢ = 0 in every layer and is
    /// left out of the sum entirely, exactly as if its gradient were zero.
    Private(ClipConfig),
}

/// A sequential model built from a [`ModelSpec`]. It owns its activation and gradient buffers
/// and reuses them between steps (batch sizes may vary from step to step).
#[derive(Debug)]
pub struct Sequential {
    spec: ModelSpec,
    layers: Vec<Box<dyn Layer>>,
    /// acts[0] is the input, acts[l + 1] the output of layer l.
    acts: Vec<Tensor>,
    /// grads[l] is the loss gradient w.r.t. acts[l].
    grads: Vec<Tensor>,
    param_layers: Vec<usize>,
    sq: Vec<Vec<f32>>,
    factors: Vec<Vec<f32>>,
    norms: Vec<f32>,
}

/// A sample's clip factor in one of `layers` parameterised layers, from its total gradient
/// norm over all of them and its squared norm `layer_sq` in this one (used by per-layer
/// clipping only).
///
/// A non-finite total (a diverged sample, or a norm that overflows f32) gives factor 0 in
/// every layer, even where the layer's own norm is finite, and every layer leaves a factor-0
/// sample out of its clipped sum entirely (never 0·inf = NaN), so the step is exactly as if
/// the sample had a zero gradient. A finite norm gives a factor in (0, 1] (or an underflowed
/// 0, which is dropped the same way).
fn sample_factor(clip: ClipConfig, layers: usize, total: f32, layer_sq: f32) -> f32 {
    if !total.is_finite() {
        return 0.0;
    }
    let (c, norm) = if clip.per_layer {
        (clip.max_grad_norm / (layers as f32).sqrt(), layer_sq.sqrt())
    } else {
        (clip.max_grad_norm, total)
    };
    (c / (norm + TINY)).min(1.0)
}

impl Sequential {
    /// Builds the model, checking every layer's input shape and initialising parameters from
    /// `rng` (PyTorch-style Kaiming-uniform).
    ///
    /// # Errors
    /// [`NnError::Shape`], [`NnError::InvalidParameter`] or [`NnError::NotDpCompatible`] from
    /// the first layer that cannot be built.
    pub fn new(spec: ModelSpec, rng: &mut DpRng) -> Result<Self> {
        spec.check_size()?;
        let layers = build_chain(&spec.layers, &spec.input_shape, rng, true).map_err(|e| {
            let at = |m: String| format!("model {:?} {m}", spec.name);
            match e {
                NnError::Shape(m) => NnError::Shape(at(m)),
                NnError::InvalidParameter(m) => NnError::InvalidParameter(at(m)),
                other => other,
            }
        })?;
        if layers.is_empty() {
            return Err(invalid(format!("model {:?} has no layers", spec.name)));
        }
        let param_layers: Vec<usize> = (0..layers.len())
            .filter(|&i| !layers[i].params().is_empty())
            .collect();
        let n = layers.len();
        Ok(Self {
            spec,
            layers,
            acts: vec![Tensor::default(); n + 1],
            grads: vec![Tensor::default(); n + 1],
            sq: vec![Vec::new(); param_layers.len()],
            factors: vec![Vec::new(); param_layers.len().max(1)],
            param_layers,
            norms: Vec::new(),
        })
    }

    /// The description the model was built from.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// Shape of one input record.
    pub fn input_shape(&self) -> &[usize] {
        &self.spec.input_shape
    }

    /// Shape of one output record.
    pub fn output_shape(&self) -> &[usize] {
        self.layers.last().map(|l| l.out_shape()).unwrap_or(&[])
    }

    /// The layers, in order.
    pub fn layers(&self) -> &[Box<dyn Layer>] {
        &self.layers
    }

    /// Sets how every Conv2d layer computes per-sample norms (default [`ConvNormMode::Auto`]).
    pub fn set_conv_norm_mode(&mut self, mode: ConvNormMode) {
        for l in &mut self.layers {
            l.set_conv_norm_mode(mode);
        }
    }

    /// Switches every layer to training (`true`: Dropout draws fresh per-sample masks on each
    /// forward pass) or evaluation (`false`, the state after building: Dropout is the
    /// identity). The DP-SGD step sets it around its own passes.
    pub fn set_training(&mut self, training: bool) {
        for l in &mut self.layers {
            l.set_training(training);
        }
    }

    /// Floating-point operations of one record's forward pass (see [`Layer::flops`]).
    pub fn flops_per_sample(&self) -> u64 {
        self.layers.iter().map(|l| l.flops()).sum()
    }

    /// Floating-point operations of one record's training step as [`Sequential::backward`]
    /// does it: the forward pass, the weight gradients (as many as the forward) and the input
    /// gradients (as many again), less the input gradient of the first layer with parameters,
    /// which is never computed. Counted as in [`Layer::flops`].
    pub fn train_flops_per_sample(&self) -> u64 {
        let skipped = self
            .param_layers
            .first()
            .map_or(0, |&l| self.layers[l].input_grad_flops());
        3 * self.flops_per_sample() - skipped
    }

    /// Values a training step keeps per record: the input and what every layer keeps
    /// ([`Layer::floats_per_record`]). An estimate of the working set.
    pub fn floats_per_record(&self) -> usize {
        let input: usize = self.spec.input_shape.iter().product();
        input
            + self
                .layers
                .iter()
                .map(|l| l.floats_per_record())
                .sum::<usize>()
    }

    /// Runs the model on a batch `[n, input_shape...]` and returns the outputs `[n, ...]`.
    /// The input and every activation are kept for [`Sequential::backward`].
    ///
    /// # Errors
    /// [`NnError::Shape`] when the records do not have the model's input shape.
    pub fn forward(&mut self, x: &Tensor) -> Result<&Tensor> {
        self.forward_from(0, x)
    }

    /// The number of leading layers without parameters (e.g. a fixed scattering transform
    /// followed by parameter-free layers). Their outputs do not depend on training, so they can
    /// be computed once per record with [`Sequential::forward_prefix`] and training can run
    /// the rest with [`Sequential::forward_from`].
    pub fn fixed_prefix_len(&self) -> usize {
        self.param_layers
            .first()
            .copied()
            .unwrap_or(self.layers.len())
    }

    /// Shape of one record entering layer `start` (the input shape for 0).
    ///
    /// # Errors
    /// [`NnError::InvalidParameter`] when `start` exceeds the number of layers.
    pub fn shape_before(&self, start: usize) -> Result<&[usize]> {
        match start {
            0 => Ok(&self.spec.input_shape),
            s if s <= self.layers.len() => Ok(self.layers[s - 1].out_shape()),
            s => Err(invalid(format!(
                "layer index must be <= {} for model {:?}, got {s}",
                self.layers.len(),
                self.spec.name
            ))),
        }
    }

    /// Runs only the first `end` layers on a batch of input records and returns their output
    /// (`end` ≤ [`Sequential::fixed_prefix_len`]). Used to map records through the fixed
    /// prefix once, before training.
    ///
    /// # Errors
    /// [`NnError::InvalidParameter`] when `end` exceeds the fixed prefix; [`NnError::Shape`]
    /// when the records do not have the model's input shape.
    pub fn forward_prefix(&mut self, x: &Tensor, end: usize) -> Result<&Tensor> {
        self.check_prefix(end)?;
        self.check_batch(x, 0)?;
        self.acts[0].copy_from(x);
        self.run_layers(0, end);
        Ok(&self.acts[end])
    }

    /// Runs layers `start..` on a batch that already went through the first `start` layers
    /// (`start` ≤ [`Sequential::fixed_prefix_len`], e.g. the output of
    /// [`Sequential::forward_prefix`]). [`Sequential::backward`] works afterwards as after
    /// [`Sequential::forward`]: the skipped layers have no parameters and no gradient flows
    /// into them.
    ///
    /// # Errors
    /// [`NnError::InvalidParameter`] when `start` exceeds the fixed prefix; [`NnError::Shape`]
    /// when the records do not have the shape layer `start` takes.
    pub fn forward_from(&mut self, start: usize, x: &Tensor) -> Result<&Tensor> {
        self.check_prefix(start)?;
        self.check_batch(x, start)?;
        self.acts[start].copy_from(x);
        self.run_layers(start, self.layers.len());
        Ok(&self.acts[self.layers.len()])
    }

    /// As [`Sequential::forward_from`], taking the batch's buffer rather than copying it: `x`
    /// gets the buffer the model held before (contents unspecified) for the caller to reuse.
    ///
    /// # Errors
    /// As [`Sequential::forward_from`] (and `x` is then left as it was).
    pub fn forward_from_taking(&mut self, start: usize, x: &mut Tensor) -> Result<&Tensor> {
        self.check_prefix(start)?;
        self.check_batch(x, start)?;
        std::mem::swap(&mut self.acts[start], x);
        self.run_layers(start, self.layers.len());
        Ok(&self.acts[self.layers.len()])
    }

    fn check_prefix(&self, k: usize) -> Result<()> {
        let p = self.fixed_prefix_len();
        if k > p {
            return Err(invalid(format!(
                "model {:?} has {p} leading parameter-free layers, cannot split at layer {k}",
                self.spec.name
            )));
        }
        Ok(())
    }

    /// Checks that `x` is a batch of records of the shape layer `start` takes.
    fn check_batch(&self, x: &Tensor, start: usize) -> Result<()> {
        let want = self.shape_before(start)?;
        if x.shape().len() < 2 || x.shape()[1..] != *want {
            let at = if start == 0 {
                String::new()
            } else {
                format!(" layer {start}")
            };
            return Err(NnError::Shape(format!(
                "model {:?}{at} expects a batch of records of shape {want:?}, got tensor of shape {:?}",
                self.spec.name,
                x.shape()
            )));
        }
        Ok(())
    }

    /// Runs layers `start..end` on `acts[start]`.
    fn run_layers(&mut self, start: usize, end: usize) {
        for l in start..end {
            let (done, rest) = self.acts.split_at_mut(l + 1);
            self.layers[l].forward(&done[l], &mut rest[0]);
        }
    }

    /// The outputs of the last forward pass.
    pub fn output(&self) -> &Tensor {
        &self.acts[self.layers.len()]
    }

    /// Backpropagates `grad_out`, the gradient of the SUM of per-sample losses w.r.t. the
    /// outputs of the last forward pass, adding into each parameter's `grad` (call
    /// [`Sequential::zero_grad`] between steps; accumulating over several calls gives virtual
    /// batches). Returns each sample's unclipped gradient norm in private mode (the total over
    /// all layers), and an empty slice in non-private mode.
    ///
    /// # Errors
    /// [`NnError::Shape`] when `grad_out` does not match the last output.
    pub fn backward(&mut self, grad_out: &Tensor, mode: BackwardMode) -> Result<&[f32]> {
        let nl = self.layers.len();
        if grad_out.shape() != self.acts[nl].shape() {
            return Err(NnError::Shape(format!(
                "output gradient has shape {:?}, the last output has {:?}",
                grad_out.shape(),
                self.acts[nl].shape()
            )));
        }
        let n = grad_out.batch();
        self.grads[nl].copy_from(grad_out);
        let first = self.param_layers.first().copied().unwrap_or(nl);
        let private = matches!(mode, BackwardMode::Private(_));
        let in_place = if private { self.in_place_layer() } else { None };
        for l in (first..nl).rev() {
            let (lo, hi) = self.grads.split_at_mut(l + 1);
            let gx = if l > first { Some(&mut lo[l]) } else { None };
            let gmode = match self.param_layers.iter().position(|&q| q == l) {
                Some(k) if in_place == Some(k) => GradMode::InputOnly,
                Some(k) if private => {
                    self.sq[k].resize(n, 0.0);
                    GradMode::PerSample(&mut self.sq[k])
                }
                _ => GradMode::Sum,
            };
            self.layers[l].backward(&self.acts[l], &self.acts[l + 1], &hi[0], gx, gmode);
        }
        let BackwardMode::Private(clip) = mode else {
            self.norms.clear();
            return Ok(&self.norms);
        };
        if let Some(k) = in_place {
            self.clip_in_place(k, n, clip);
        }
        self.clip_factors(n, clip);
        for (k, &l) in self.param_layers.iter().enumerate() {
            if in_place == Some(k) {
                continue;
            }
            let f = if clip.per_layer {
                &self.factors[k]
            } else {
                &self.factors[0]
            };
            self.layers[l].accumulate_clipped(&self.acts[l], &self.grads[l + 1], f);
        }
        Ok(&self.norms)
    }

    /// The parameterised layer (its index among them) that clips in place in private mode:
    /// of those that can ([`Layer::clip_in_place_len`]), the one with the longest per-sample
    /// gradient.
    fn in_place_layer(&self) -> Option<usize> {
        self.param_layers
            .iter()
            .enumerate()
            .filter_map(|(k, &l)| Some((self.layers[l].clip_in_place_len()?, k)))
            .max()
            .map(|(_, k)| k)
    }

    /// Layer `k`'s norms and clipped sum ([`Layer::clip_in_place`]), every other layer's
    /// norms being in `self.sq`: each sample's factor is the one [`Sequential::clip_factors`]
    /// then gives it, from the same total summed in the same order.
    fn clip_in_place(&mut self, k: usize, n: usize, clip: ClipConfig) {
        let mut own = std::mem::take(&mut self.sq[k]);
        own.resize(n, 0.0);
        let (sq, layers) = (&self.sq, self.param_layers.len());
        let factor = |i: usize, s: f32| {
            let total =
                (sq.iter().enumerate()).fold(0.0f32, |t, (j, v)| t + if j == k { s } else { v[i] });
            sample_factor(clip, layers, total.sqrt(), s)
        };
        let l = self.param_layers[k];
        self.layers[l].clip_in_place(&self.acts[l], &self.grads[l + 1], &mut own, &factor);
        self.sq[k] = own;
    }

    /// Total per-sample norms into `self.norms` and clip factors into `self.factors` (one
    /// vector for flat clipping, one per parameterised layer otherwise).
    fn clip_factors(&mut self, n: usize, clip: ClipConfig) {
        self.norms.clear();
        self.norms.resize(n, 0.0);
        for sq in &self.sq {
            self.norms.iter_mut().zip(sq).for_each(|(t, s)| *t += s);
        }
        self.norms.iter_mut().for_each(|t| *t = t.sqrt());
        let layers = self.param_layers.len();
        let norms = &self.norms;
        if clip.per_layer {
            for (f, sq) in self.factors.iter_mut().zip(&self.sq) {
                f.clear();
                f.extend(
                    (sq.iter().zip(norms))
                        .map(|(&s, &total)| sample_factor(clip, layers, total, s)),
                );
            }
        } else {
            let f = &mut self.factors[0];
            f.clear();
            f.extend(
                norms
                    .iter()
                    .map(|&total| sample_factor(clip, layers, total, 0.0)),
            );
        }
    }

    /// Sets every parameter gradient to zero.
    pub fn zero_grad(&mut self) {
        use rayon::prelude::*;
        self.for_each_param_mut(|_, p| {
            p.grad
                .par_chunks_mut(crate::optim::UPDATE_CHUNK)
                .for_each(|g| g.fill(0.0));
        });
    }

    /// Calls `f(index, param)` for every parameter in a fixed order (allocation-free; the
    /// optimizers and the DP-SGD loop's noise use this).
    pub fn for_each_param_mut(&mut self, mut f: impl FnMut(usize, &mut Param)) {
        let mut k = 0;
        for &l in &self.param_layers {
            for p in self.layers[l].params_mut() {
                f(k, p);
                k += 1;
            }
        }
    }

    /// All parameters, in the order of [`Sequential::for_each_param_mut`].
    pub fn params(&self) -> Vec<&Param> {
        self.param_layers
            .iter()
            .flat_map(|&l| self.layers[l].params())
            .collect()
    }

    /// All parameters, mutable.
    pub fn params_mut(&mut self) -> Vec<&mut Param> {
        let pl = &self.param_layers;
        self.layers
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| pl.contains(i))
            .flat_map(|(_, l)| l.params_mut())
            .collect()
    }

    /// Parameters with their saved names (`"{layer index}.{name}"`, as PyTorch's Sequential).
    pub fn named_params(&self) -> Vec<(String, &Param)> {
        self.param_layers
            .iter()
            .flat_map(|&l| {
                // The description's names, so parameters inside a residual block get their
                // position in the block (`3.0.weight`), in the order `params` lists them.
                let names = self.layers[l].spec().parameter_shapes();
                names
                    .into_iter()
                    .zip(self.layers[l].params())
                    .map(move |((name, _), p)| (format!("{l}.{name}"), p))
            })
            .collect()
    }

    /// Total number of scalar parameters.
    pub fn num_params(&self) -> usize {
        self.params().iter().map(|p| p.len()).sum()
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
