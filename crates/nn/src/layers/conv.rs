//! 2-D convolution (im2col + GEMM) with per-sample gradient norms by either the unfolded ghost
//! norm or materialised per-sample gradients, chosen per layer (mixed ghost clipping).

use std::ops::Range;

use dpml_mechanisms::DpRng;
use multiversion::multiversion;
use rayon::prelude::*;

use super::{GradMode, Layer, LayerSpec, axpy, weighted_row_sum};
use crate::arch::MAX_LAYER_VALUES;
use crate::error::{Result, invalid};
use crate::kernels::{
    UnfoldMap, Window, add_into, broadcast_gemm, gemm, sample_ranges, split_mut, sq_norm,
};
use crate::param::{Param, kaiming_bound};
use crate::tensor::Tensor;

/// How a [`Conv2d`] computes per-sample gradient norms in private mode.
///
/// With unfolded input Aᵢ (`d × T`, d = in·k², T output positions) and output gradient Gᵢ
/// (`p × T`), sample i's weight gradient is Gᵢ Aᵢᵀ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConvNormMode {
    /// Pick per layer. Materialising costs ~T·d·p multiply-adds per sample, the same product
    /// non-private training forms, and makes the clipped sum a cheap weighted sum; the ghost norm
    /// costs ~T²(d+p) and then needs that product again for the clipped sum. So materialise
    /// unless a per-sample gradient is large (over 64 Ki values) and the ghost norm is
    /// cheap (T(d+p) < d·p, the cost model of Li et al. 2021), where ghost saves memory.
    #[default]
    Auto,
    /// ‖Gᵢ Aᵢᵀ‖²_F = Σ_{t,s} (aᵢₜ·aᵢₛ)(gᵢₜ·gᵢₛ): two T×T Gram matrices per sample; the clipped
    /// sum is then Σᵢ cᵢ Gᵢ Aᵢᵀ over the unfolded columns.
    Ghost,
    /// Form each Gᵢ Aᵢᵀ, take its norm, and form the clipped sum as Σᵢ cᵢ (Gᵢ Aᵢᵀ) — no
    /// second product. The per-sample gradients are kept for the clipped sum (`p·d` values per
    /// sample), except in the layer that the model lets clip in place
    /// ([`Layer::clip_in_place`]): that one adds each sample's as soon as its norm is known.
    Materialize,
}

/// Largest per-sample gradient (weights and bias) that [`ConvNormMode::Auto`] materialises:
/// 64 Ki values, 64 MiB for a physical batch of 256.
const MATERIALIZE_MAX: usize = 1 << 16;

/// Samples whose clipped gradients [`Conv2d`] sums into one accumulator in private mode (in
/// place, or by the ghost norm's second product): the groups depend on the batch alone, not
/// on the number of threads, so a seeded run sums in the same order and gives the same model
/// whatever the thread count. 32 rather than 16: half the accumulators to zero and add up,
/// and CNN private steps 1–2% faster on the 2-core Xeon (three runs of 6–10 interleaved
/// rounds of 150 steps: private / non-private 0.942 → 0.961, 0.950 → 0.953, 0.944 → 0.958);
/// a CNN chunk of 128 records still gives 4 groups to share among the threads.
const CLIP_GROUP: usize = 32;

/// Per-thread scratch space for [`Conv2d`]: gradient accumulator and unfolded-gradient/Gram
/// buffers.
#[derive(Debug, Clone, Default)]
struct Scratch {
    acc: Vec<f32>,
    buf: Vec<f32>,
    /// One sample's output gradient transposed (`t × p`), for [`add_sample_grad`].
    gt: Vec<f32>,
}

/// The unfolded input of the last forward pass, for the whole batch (`n × d × t`), so that the
/// backward pass and the clipped sum reuse it instead of unfolding again: short strided row
/// copies cost as much as conv2's products, and unfolding twice was a fifth of the step. It
/// costs `n·d·t` values (19 MB for the cnn model at batch 256) in both modes.
#[derive(Debug, Clone, Default)]
struct Unfolded {
    cols: Vec<f32>,
    /// Which input `cols` unfolds: the address and length of its data, as [`Layer::backward`]
    /// and [`Layer::accumulate_clipped`] receive the tensor that the last forward pass read.
    /// Any other tensor (another batch, another size) does not match and is unfolded afresh.
    source: Option<(usize, usize)>,
}

impl Unfolded {
    fn key(x: &Tensor) -> (usize, usize) {
        (x.data().as_ptr() as usize, x.data().len())
    }

    /// Unfolds every record of `x` into `cols` (in parallel) unless it already holds them.
    fn ensure(&mut self, map: &UnfoldMap, dt: usize, x: &Tensor) {
        if self.source == Some(Self::key(x)) {
            return;
        }
        let (n, in_len) = (x.batch(), x.record_len());
        self.cols.resize(n * dt, 0.0);
        let ranges = sample_ranges(n);
        let parts = split_mut(&mut self.cols, dt, &ranges);
        ranges.into_par_iter().zip(parts).for_each(|(r, cols)| {
            for (i, c) in r.zip(cols.chunks_exact_mut(dt)) {
                map.im2col(&x.data()[i * in_len..(i + 1) * in_len], c);
            }
        });
        self.source = Some(Self::key(x));
    }

    /// Sample `i`'s unfolded input (`d × t`).
    fn sample(&self, i: usize, dt: usize) -> &[f32] {
        &self.cols[i * dt..(i + 1) * dt]
    }
}

/// Convolution over `[c, h, w]` records with a square kernel, stride and zero padding; weight
/// `[out, in, k, k]`, bias `[out]` (PyTorch layout).
#[derive(Debug, Clone)]
pub struct Conv2d {
    win: Window,
    map: UnfoldMap,
    out_ch: usize,
    out_shape: [usize; 3],
    /// Weight `[out, in, k, k]` (row-major, i.e. an `out × d` matrix).
    pub weight: Param,
    /// Bias `[out]`.
    pub bias: Param,
    mode: ConvNormMode,
    /// Materialised per-sample gradients `n × (d·p + p)` from the last private backward pass,
    /// each in [`add_sample_grad`]'s layout (weights transposed, then bias).
    per_sample: Vec<f32>,
    unfolded: Unfolded,
    scratch: Vec<Scratch>,
}

/// Refuses a convolution whose declared fields (padding above all: each unit adds a row and a
/// column of outputs) make its output or its unfolded input hold more than
/// [`MAX_LAYER_VALUES`] per record, before either is allocated.
fn check_layer_values(win: &Window, out_ch: usize, padding: usize) -> Result<()> {
    let positions = win.oh.checked_mul(win.ow);
    let unfolded =
        positions.and_then(|t| t.checked_mul(win.c.checked_mul(win.kh)?.checked_mul(win.kw)?));
    let outputs = positions.and_then(|t| t.checked_mul(out_ch));
    match (outputs, unfolded) {
        (Some(o), Some(u)) if o <= MAX_LAYER_VALUES && u <= MAX_LAYER_VALUES => Ok(()),
        _ => Err(invalid(format!(
            "conv2d padding {padding} with kernel {} and stride {} on input [{}, {}, {}] gives \
             {}×{} output positions, more than the limit of {MAX_LAYER_VALUES} values per \
             record and layer",
            win.kh, win.stride, win.c, win.h, win.w, win.oh, win.ow
        ))),
    }
}

impl Conv2d {
    /// A convolution with PyTorch's default initialisation (U(±1/√(in·k²))).
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] for zero sizes or a kernel larger than the padded
    /// input.
    pub fn new(
        input: [usize; 3],
        out_ch: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        rng: &mut DpRng,
    ) -> Result<Self> {
        let [c, h, w] = input;
        if c == 0 || out_ch == 0 {
            return Err(invalid(format!(
                "conv2d channels must be > 0, got in={c}, out={out_ch}"
            )));
        }
        if padding
            .checked_mul(2)
            .and_then(|p| p.checked_add(h.max(w)))
            .is_none()
        {
            return Err(invalid(format!(
                "conv2d padding {padding} is too large: the padded input's side overflows"
            )));
        }
        let win = Window::new(c, h, w, kernel, stride, padding).ok_or_else(|| {
            invalid(format!(
                "conv2d kernel {kernel} with stride {stride} and padding {padding} does not fit input {input:?}"
            ))
        })?;
        check_layer_values(&win, out_ch, padding)?;
        let map = UnfoldMap::new(&win)
            .ok_or_else(|| invalid(format!("conv2d input {input:?} is too large")))?;
        let b = kaiming_bound(win.d());
        Ok(Self {
            win,
            map,
            out_ch,
            out_shape: [out_ch, win.oh, win.ow],
            weight: Param::uniform("weight", &[out_ch, c, kernel, kernel], b, rng),
            bias: Param::uniform("bias", &[out_ch], b, rng),
            mode: ConvNormMode::Auto,
            per_sample: Vec::new(),
            unfolded: Unfolded::default(),
            scratch: Vec::new(),
        })
    }

    /// Sets how per-sample norms are computed.
    pub fn set_norm_mode(&mut self, mode: ConvNormMode) {
        self.mode = mode;
    }

    /// The mode actually used (see [`ConvNormMode::Auto`]).
    pub fn effective_norm_mode(&self) -> ConvNormMode {
        let (t, d, p) = (self.win.t(), self.win.d(), self.out_ch);
        match self.mode {
            ConvNormMode::Auto if self.grad_len() > MATERIALIZE_MAX && t * (d + p) < d * p => {
                ConvNormMode::Ghost
            }
            ConvNormMode::Auto => ConvNormMode::Materialize,
            m => m,
        }
    }

    /// Number of weight values plus bias values (length of one per-sample gradient).
    fn grad_len(&self) -> usize {
        self.out_ch * self.win.d() + self.out_ch
    }

    /// Makes one scratch per range, each accumulator zeroed and `buf` of length `buf_len`.
    fn prepare_scratch(&mut self, parts: usize, buf_len: usize) {
        let glen = self.grad_len();
        self.scratch.resize_with(parts, Scratch::default);
        for s in &mut self.scratch[..parts] {
            s.acc.clear();
            s.acc.resize(glen, 0.0);
            s.buf.resize(buf_len, 0.0);
        }
    }

    /// Adds the first `parts` accumulators, in order, into the parameter gradients (summed
    /// first, so that [`Conv2d::add_grad`] transposes once).
    fn reduce_scratch(&mut self, parts: usize) {
        let mut scratch = std::mem::take(&mut self.scratch);
        if let Some((first, rest)) = scratch[..parts].split_first_mut() {
            for s in rest {
                add_into(&mut first.acc, &s.acc);
            }
            self.add_grad(&first.acc);
        }
        self.scratch = scratch;
    }

    /// Runs `work(samples, scratch, unfolded, out)` on the batch `x` in fixed groups of
    /// [`CLIP_GROUP`] samples, in parallel, each group with its own scratch (accumulator
    /// zeroed, `buf` of `buf_len`) and its samples' entries of `out` (one per sample, or none
    /// when `out` is empty), then adds the groups' accumulators into `grad` in order.
    fn sum_in_groups(
        &mut self,
        x: &Tensor,
        buf_len: usize,
        out: &mut [f32],
        work: impl Fn(Range<usize>, &mut Scratch, &Unfolded, &mut [f32]) + Sync,
    ) {
        let n = x.batch();
        let groups: Vec<Range<usize>> = (0..n.div_ceil(CLIP_GROUP))
            .map(|g| g * CLIP_GROUP..((g + 1) * CLIP_GROUP).min(n))
            .collect();
        let parts = groups.len();
        self.prepare_scratch(parts, buf_len);
        self.unfolded
            .ensure(&self.map, self.win.d() * self.win.t(), x);
        let outs = split_mut(out, 1, &groups);
        let unfolded = &self.unfolded;
        (self.scratch[..parts].par_iter_mut())
            .zip(groups)
            .zip(outs)
            .for_each(|((s, samples), out)| work(samples, s, unfolded, out));
        self.reduce_scratch(parts);
    }

    /// Adds one gradient in [`add_sample_grad`]'s layout (weights transposed, then bias) into
    /// the parameter gradients.
    fn add_grad(&mut self, grad: &[f32]) {
        let (p, d) = (self.out_ch, self.win.d());
        let (wt, b) = grad.split_at(p * d);
        for (j, row) in wt.chunks_exact(p).enumerate() {
            for (i, &v) in row.iter().enumerate() {
                self.weight.grad[i * d + j] += v;
            }
        }
        add_into(&mut self.bias.grad, b);
    }
}

/// acc = alpha·[(Gᵢ Aᵢᵀ)ᵀ, row sums of Gᵢ] + beta·acc: sample i's weight gradient TRANSPOSED
/// (`d × p`, formed as Aᵢ Gᵢᵀ by [`broadcast_gemm`], which reads the unfolded input in place;
/// `gt` holds Gᵢᵀ), then its bias gradient. Norms and weighted sums do not depend on the
/// layout; [`Conv2d::add_grad`] transposes once per batch. With `beta == 0` the old contents
/// of `acc` are not read (as in [`gemm`]): a reused buffer may hold a dropped sample's NaN
/// from an earlier batch, and 0·NaN = NaN would carry it over to whichever sample reuses it.
fn add_sample_grad(
    (p, t, d): (usize, usize, usize),
    alpha: f32,
    g: &[f32],
    a: &[f32],
    beta: f32,
    acc: &mut [f32],
    gt: &mut Vec<f32>,
) {
    let (w, b) = acc.split_at_mut(p * d);
    gt.resize(t * p, 0.0);
    for (i, row) in g.chunks_exact(t).enumerate() {
        for (l, &v) in row.iter().enumerate() {
            gt[l * p + i] = v;
        }
    }
    broadcast_gemm((d, t, p), alpha, a, (t, 1), gt, beta, w);
    for (bj, row) in b.iter_mut().zip(g.chunks_exact(t)) {
        let sum = alpha * row.iter().sum::<f32>();
        *bj = if beta == 0.0 { sum } else { beta * *bj + sum };
    }
}

/// The forward pass of records `xs` (each unfolded into `cols`, kept for the backward pass)
/// into `ys`. Compiled for each SIMD level and chosen at run time: the unfold is a gather that
/// AVX-512 vectorises (the baseline x86-64 build has no vector gather).
#[multiversion(targets = "simd")]
fn forward_samples(
    map: &UnfoldMap,
    (p, d, t, in_len): (usize, usize, usize, usize),
    wv: &[f32],
    bv: &[f32],
    xs: &[f32],
    cols: &mut [f32],
    ys: &mut [f32],
) {
    for ((x, a), yi) in xs
        .chunks_exact(in_len)
        .zip(cols.chunks_exact_mut(d * t))
        .zip(ys.chunks_exact_mut(p * t))
    {
        map.im2col(x, a);
        for (row, b) in yi.chunks_exact_mut(t).zip(bv) {
            row.iter_mut().for_each(|v| *v = *b);
        }
        broadcast_gemm((p, d, t), 1.0, wv, (d, 1), a, 1.0, yi);
    }
}

impl Layer for Conv2d {
    fn spec(&self) -> LayerSpec {
        LayerSpec::Conv2d {
            in_channels: self.win.c,
            out_channels: self.out_ch,
            kernel: self.win.kh,
            stride: self.win.stride,
            padding: self.win.pad,
        }
    }

    fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        let (n, win, p) = (x.batch(), self.win, self.out_ch);
        let (d, t) = (win.d(), win.t());
        y.reset(n, &self.out_shape);
        let ranges = sample_ranges(n);
        let ys = split_mut(y.data_mut(), p * t, &ranges);
        // Unfold and multiply sample by sample (the unfolded record is still in cache for its
        // product), keeping the unfolded batch for the backward pass.
        self.unfolded.cols.resize(n * d * t, 0.0);
        let cols = split_mut(&mut self.unfolded.cols, d * t, &ranges);
        let (wv, bv, map) = (&self.weight.value, &self.bias.value, &self.map);
        let in_len = x.record_len();
        ranges
            .into_par_iter()
            .zip(cols)
            .zip(ys)
            .for_each(|((r, cols), ys)| {
                let xs = &x.data()[r.start * in_len..r.end * in_len];
                forward_samples(map, (p, d, t, in_len), wv, bv, xs, cols, ys);
            });
        self.unfolded.source = Some(Unfolded::key(x));
    }

    fn backward(
        &mut self,
        x: &Tensor,
        _y: &Tensor,
        gy: &Tensor,
        gx: Option<&mut Tensor>,
        mode: GradMode<'_>,
    ) {
        let (n, win, p) = (x.batch(), self.win, self.out_ch);
        let (d, t) = (win.d(), win.t());
        let glen = self.grad_len();
        let ranges = sample_ranges(n);
        let norm_mode = self.effective_norm_mode();
        let private = !matches!(mode, GradMode::Sum);
        let input_only = matches!(mode, GradMode::InputOnly);
        let keep = !input_only && private && norm_mode == ConvNormMode::Materialize;
        let buf_len = if private && norm_mode == ConvNormMode::Ghost {
            2 * t * t
        } else {
            d * t
        };
        self.prepare_scratch(ranges.len(), buf_len.max(d * t));
        self.unfolded.ensure(&self.map, d * t, x);
        if keep {
            self.per_sample.resize(n * glen, 0.0);
        }
        let mut empty = Tensor::default();
        let want_gx = gx.is_some();
        let gx = match gx {
            Some(g) => {
                g.reset(n, &[win.c, win.h, win.w]);
                g.fill_zero();
                g
            }
            None => &mut empty,
        };
        let in_len = win.c * win.h * win.w;
        let gxs = split_mut(gx.data_mut(), in_len, &ranges);
        let mut no_sq: [f32; 0] = [];
        let sq = match mode {
            GradMode::PerSample(sq) => sq,
            GradMode::Sum | GradMode::InputOnly => &mut no_sq[..],
        };
        let sqs = split_mut(sq, 1, &ranges);
        let pss = split_mut(
            if keep {
                &mut self.per_sample[..]
            } else {
                &mut []
            },
            glen,
            &ranges,
        );
        let (wv, unfolded, map) = (&self.weight.value, &self.unfolded, &self.map);
        let scratch = &mut self.scratch[..ranges.len()];
        let parts = ranges.len();
        ranges
            .into_par_iter()
            .zip(scratch)
            .zip(gxs)
            .zip(sqs)
            .zip(pss)
            .for_each(|((((r, s), gx), sq), ps)| {
                for (k, i) in r.enumerate() {
                    let a = unfolded.sample(i, d * t);
                    let g = &gy.data()[i * p * t..(i + 1) * p * t];
                    if want_gx {
                        let dcols = &mut s.buf[..d * t];
                        broadcast_gemm((d, p, t), 1.0, wv, (1, d), g, 0.0, dcols);
                        map.col2im(dcols, &mut gx[k * in_len..(k + 1) * in_len]);
                    }
                    if input_only {
                        continue;
                    }
                    if !private {
                        add_sample_grad((p, t, d), 1.0, g, a, 1.0, &mut s.acc, &mut s.gt);
                    } else if norm_mode == ConvNormMode::Materialize {
                        let psi = &mut ps[k * glen..(k + 1) * glen];
                        add_sample_grad((p, t, d), 1.0, g, a, 0.0, psi, &mut s.gt);
                        sq[k] = sq_norm(psi);
                    } else {
                        let (ga, gg) = s.buf[..2 * t * t].split_at_mut(t * t);
                        gemm(t, d, t, 1.0, a, true, a, false, 0.0, ga);
                        gemm(t, p, t, 1.0, g, true, g, false, 0.0, gg);
                        let bias: f32 = g
                            .chunks_exact(t)
                            .map(|row| row.iter().sum::<f32>().powi(2))
                            .sum();
                        sq[k] = ga.iter().zip(gg.iter()).map(|(u, v)| u * v).sum::<f32>() + bias;
                    }
                }
            });
        if !private {
            self.reduce_scratch(parts);
        }
    }

    fn own_floats_per_record(&self) -> usize {
        self.win.d() * self.win.t() + self.grad_len()
    }

    fn accumulate_clipped(&mut self, x: &Tensor, gy: &Tensor, factors: &[f32]) {
        let (n, win, p) = (x.batch(), self.win, self.out_ch);
        let (d, t) = (win.d(), win.t());
        if self.effective_norm_mode() == ConvNormMode::Materialize {
            let glen = self.grad_len();
            // One pass over the kept per-sample gradients (`weighted_row_sum` skips factor-0
            // rows, which may be non-finite).
            let mut tmp = std::mem::take(&mut self.scratch);
            // The first thread's scratch serves; the others' are kept for the next backward
            // pass (dropping them here made every chunk allocate them again).
            if tmp.is_empty() {
                tmp.push(Scratch::default());
            }
            tmp[0].acc.clear();
            tmp[0].acc.resize(glen, 0.0);
            weighted_row_sum(&self.per_sample[..n * glen], factors, &mut tmp[0].acc);
            self.add_grad(&tmp[0].acc);
            self.scratch = tmp;
            return;
        }
        // In fixed groups of samples, so that the sums do not depend on the number of threads.
        self.sum_in_groups(x, 0, &mut [], |samples, s, unfolded, _| {
            // Factor-0 samples are skipped: their unfolded input may be non-finite.
            for i in samples.filter(|&i| factors[i] != 0.0) {
                let g = &gy.data()[i * p * t..(i + 1) * p * t];
                let a = unfolded.sample(i, d * t);
                add_sample_grad((p, t, d), factors[i], g, a, 1.0, &mut s.acc, &mut s.gt);
            }
        });
    }

    fn clip_in_place_len(&self) -> Option<usize> {
        (self.effective_norm_mode() == ConvNormMode::Materialize).then(|| self.grad_len())
    }

    /// Each sample's gradient formed into its group's scratch buffer, its norm taken and its
    /// clipped value added into the group's accumulator while the buffer is still in the
    /// cache; the groups' sums then go into `grad` in order.
    fn clip_in_place(
        &mut self,
        x: &Tensor,
        gy: &Tensor,
        sq: &mut [f32],
        factor: &(dyn Fn(usize, f32) -> f32 + Sync),
    ) {
        let (n, win, p) = (x.batch(), self.win, self.out_ch);
        let (d, t) = (win.d(), win.t());
        let glen = self.grad_len();
        self.sum_in_groups(x, glen, &mut sq[..n], |samples, s, unfolded, sq| {
            for (i, sq) in samples.zip(sq) {
                let g = &gy.data()[i * p * t..(i + 1) * p * t];
                let a = unfolded.sample(i, d * t);
                let grad = &mut s.buf[..glen];
                add_sample_grad((p, t, d), 1.0, g, a, 0.0, grad, &mut s.gt);
                *sq = sq_norm(grad);
                // Factor 0: a dropped sample, whose gradient may be non-finite.
                let c = factor(i, *sq);
                if c != 0.0 {
                    axpy(c, grad, &mut s.acc);
                }
            }
        });
    }

    fn set_conv_norm_mode(&mut self, mode: ConvNormMode) {
        self.set_norm_mode(mode);
    }

    fn params(&self) -> Vec<&Param> {
        vec![&self.weight, &self.bias]
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.weight, &mut self.bias]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::{check_layer, check_per_sample, check_poisoned_sample};

    #[test]
    fn gradients_match_finite_differences_with_stride_and_padding() {
        let mut c = Conv2d::new([2, 7, 6], 3, 3, 2, 1, &mut DpRng::seeded(1)).unwrap();
        check_layer(&mut c, &[2, 2, 7, 6], 5);
        let mut c = Conv2d::new([1, 5, 5], 2, 2, 1, 0, &mut DpRng::seeded(2)).unwrap();
        check_layer(&mut c, &[3, 1, 5, 5], 6);
    }

    #[test]
    fn per_sample_norms_ghost_and_materialized_match_brute_force() {
        for mode in [ConvNormMode::Ghost, ConvNormMode::Materialize] {
            let mut c = Conv2d::new([2, 8, 8], 4, 3, 2, 1, &mut DpRng::seeded(3)).unwrap();
            c.set_norm_mode(mode);
            assert_eq!(c.effective_norm_mode(), mode);
            check_per_sample(&mut c, &[5, 2, 8, 8], 7);
        }
    }

    #[test]
    fn a_poisoned_sample_is_left_out_of_the_clipped_sum_in_both_modes() {
        for mode in [ConvNormMode::Ghost, ConvNormMode::Materialize] {
            let mut c = Conv2d::new([2, 8, 8], 4, 3, 2, 1, &mut DpRng::seeded(4)).unwrap();
            c.set_norm_mode(mode);
            assert_eq!(c.effective_norm_mode(), mode);
            check_poisoned_sample(&mut c, &[5, 2, 8, 8], 8);
        }
    }

    #[test]
    fn auto_mode_follows_the_cost_model() {
        let mut rng = DpRng::seeded(0);
        // cnn conv1: T = 196, d = 64, p = 16: ghost 196·80 > 64·16 → materialise.
        let c1 = Conv2d::new([1, 28, 28], 16, 8, 2, 3, &mut rng).unwrap();
        assert_eq!(c1.effective_norm_mode(), ConvNormMode::Materialize);
        // cnn conv2: T = 25, d = 256, p = 32: ghost would be cheap (25·288 < 8192), but
        // 8,224 values per sample are small enough to keep → materialise.
        let c2 = Conv2d::new([16, 13, 13], 32, 4, 2, 0, &mut rng).unwrap();
        assert_eq!(c2.effective_norm_mode(), ConvNormMode::Materialize);
        // A wide layer: T = 9, d = 64·9, p = 256: 147,712 values per sample, 9·832 < 147,456
        // → ghost.
        let c3 = Conv2d::new([64, 5, 5], 256, 3, 1, 0, &mut rng).unwrap();
        assert_eq!(c3.effective_norm_mode(), ConvNormMode::Ghost);
    }

    /// Sum-mode backward (parameter and input gradients) and a private backward with its
    /// clipped sum, from a conv whose unfold cache is `warm` (filled by `prior`, a forward pass
    /// over a different batch) or `cold` (a fresh layer that only saw `x`).
    fn grads_after(
        prior: Option<&Tensor>,
        x: &Tensor,
        gy: &Tensor,
        mode: ConvNormMode,
    ) -> Vec<f32> {
        let mut c = Conv2d::new([2, 9, 7], 3, 3, 2, 1, &mut DpRng::seeded(9)).unwrap();
        c.set_norm_mode(mode);
        let mut y = Tensor::default();
        if let Some(p) = prior {
            c.forward(p, &mut y);
        }
        // Backward and clipped sum on `x` without a forward on it: nothing of `prior` may
        // leak in. (The layer contract gives backward the last forward's input; a mismatch
        // must still not serve the stale unfold.)
        let mut gx = Tensor::default();
        c.backward(x, &y, gy, Some(&mut gx), GradMode::Sum);
        let mut out = gx.data().to_vec();
        out.extend(c.params().iter().flat_map(|q| q.grad.clone()));
        let mut sq = vec![0.0; x.batch()];
        c.backward(x, &y, gy, None, GradMode::PerSample(&mut sq));
        out.extend_from_slice(&sq);
        let factors: Vec<f32> = (0..x.batch()).map(|i| 0.25 * (i % 4) as f32).collect();
        c.params_mut().iter_mut().for_each(|q| q.grad.fill(0.0));
        c.accumulate_clipped(x, gy, &factors);
        out.extend(c.params().iter().flat_map(|q| q.grad.clone()));
        out
    }

    #[test]
    fn the_unfold_cache_never_serves_another_batch() {
        let mut rng = DpRng::seeded(5);
        let mut data =
            |len: usize| -> Vec<f32> { (0..len).map(|_| rng.uniform_f64() as f32 - 0.5).collect() };
        let (rec, out) = (2 * 9 * 7, 3 * 5 * 4);
        let x = Tensor::from_vec(&[5, 2, 9, 7], data(5 * rec)).unwrap();
        let gy = Tensor::from_vec(&[5, 3, 5, 4], data(5 * out)).unwrap();
        // Larger, smaller and same-sized batches with other values.
        let priors = [7, 3, 5].map(|n| Tensor::from_vec(&[n, 2, 9, 7], data(n * rec)).unwrap());
        for mode in [ConvNormMode::Ghost, ConvNormMode::Materialize] {
            let want = grads_after(None, &x, &gy, mode);
            for p in &priors {
                let got = grads_after(Some(p), &x, &gy, mode);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "{mode:?} after batch {}",
                    p.batch()
                );
            }
        }
    }

    #[test]
    fn backward_after_a_smaller_then_larger_forward_matches_a_fresh_layer() {
        // The model's buffers are reused across steps of varying batch size: forward on 6,
        // then 2, then 6 records again must leave a cache for exactly the last batch.
        let mut rng = DpRng::seeded(6);
        let mut data =
            |len: usize| -> Vec<f32> { (0..len).map(|_| rng.uniform_f64() as f32 - 0.5).collect() };
        let rec = 2 * 9 * 7;
        let mut x = Tensor::default();
        let mut c = Conv2d::new([2, 9, 7], 3, 3, 2, 1, &mut DpRng::seeded(9)).unwrap();
        let mut y = Tensor::default();
        for n in [6, 2, 6] {
            x.reset(n, &[2, 9, 7]);
            x.data_mut().copy_from_slice(&data(n * rec));
            c.forward(&x, &mut y);
        }
        let gy = Tensor::from_vec(y.shape(), data(y.data().len())).unwrap();
        let mut gx = Tensor::default();
        c.backward(&x, &y, &gy, Some(&mut gx), GradMode::Sum);
        let mut got = gx.data().to_vec();
        got.extend(c.params().iter().flat_map(|q| q.grad.clone()));
        let x2 = Tensor::from_vec(x.shape(), x.data().to_vec()).unwrap();
        let mut want = grads_after(None, &x2, &gy, ConvNormMode::Materialize);
        want.truncate(got.len());
        assert_eq!(got, want);
    }

    #[test]
    fn kernel_too_large_is_refused() {
        let err = Conv2d::new([1, 3, 3], 2, 5, 1, 0, &mut DpRng::seeded(0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("[1, 3, 3]") && err.contains('5'), "{err}");
    }
}
