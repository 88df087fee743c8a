//! 2-D convolution (im2col + GEMM) with per-sample gradient norms by either the unfolded ghost
//! norm or materialised per-sample gradients, chosen per layer (mixed ghost clipping).

use dpml_mechanisms::DpRng;
use rayon::prelude::*;

use super::{GradMode, Layer, LayerSpec, weighted_row_sum};
use crate::error::{Result, invalid};
use crate::kernels::{Window, add_into, gemm, sample_ranges, split_mut, sq_norm};
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
    /// Form each Gᵢ Aᵢᵀ (kept, `p·d` values per sample), take its norm, and form the clipped
    /// sum as Σᵢ cᵢ (Gᵢ Aᵢᵀ) — no second product.
    Materialize,
}

/// Largest per-sample gradient (weights and bias) that [`ConvNormMode::Auto`] materialises:
/// 64 Ki values, 64 MiB for a physical batch of 256.
const MATERIALIZE_MAX: usize = 1 << 16;

/// Per-thread scratch space for [`Conv2d`]: one sample's unfolded input (recomputed where
/// needed rather than cached for the whole batch: it stays in cache and keeps memory flat),
/// gradient accumulator, and unfolded-gradient/Gram buffers.
#[derive(Debug, Clone, Default)]
struct Scratch {
    cols: Vec<f32>,
    acc: Vec<f32>,
    buf: Vec<f32>,
}

/// Convolution over `[c, h, w]` records with a square kernel, stride and zero padding; weight
/// `[out, in, k, k]`, bias `[out]` (PyTorch layout).
#[derive(Debug, Clone)]
pub struct Conv2d {
    win: Window,
    out_ch: usize,
    out_shape: [usize; 3],
    /// Weight `[out, in, k, k]` (row-major, i.e. an `out × d` matrix).
    pub weight: Param,
    /// Bias `[out]`.
    pub bias: Param,
    mode: ConvNormMode,
    /// Materialised per-sample gradients `n × (p·d + p)` from the last private backward pass.
    per_sample: Vec<f32>,
    scratch: Vec<Scratch>,
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
        let win = Window::new(c, h, w, kernel, stride, padding).ok_or_else(|| {
            invalid(format!(
                "conv2d kernel {kernel} with stride {stride} and padding {padding} does not fit input {input:?}"
            ))
        })?;
        let b = kaiming_bound(win.d());
        Ok(Self {
            win,
            out_ch,
            out_shape: [out_ch, win.oh, win.ow],
            weight: Param::uniform("weight", &[out_ch, c, kernel, kernel], b, rng),
            bias: Param::uniform("bias", &[out_ch], b, rng),
            mode: ConvNormMode::Auto,
            per_sample: Vec::new(),
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
        let dt = self.win.d() * self.win.t();
        for s in &mut self.scratch[..parts] {
            s.cols.resize(dt, 0.0);
            s.acc.clear();
            s.acc.resize(glen, 0.0);
            s.buf.resize(buf_len, 0.0);
        }
    }

    /// Adds the per-thread accumulators into the parameter gradients.
    fn reduce_scratch(&mut self, parts: usize) {
        let pd = self.out_ch * self.win.d();
        for s in &self.scratch[..parts] {
            add_into(&mut self.weight.grad, &s.acc[..pd]);
            add_into(&mut self.bias.grad, &s.acc[pd..]);
        }
    }
}

/// acc = alpha·[Gᵢ Aᵢᵀ, row sums of Gᵢ] + beta·acc. With `beta == 0` the old contents of
/// `acc` are not read (as in [`gemm`]): a reused buffer may hold a dropped sample's NaN from an
/// earlier batch, and 0·NaN = NaN would carry it over to whichever sample reuses the row.
fn add_sample_grad(
    (p, t, d): (usize, usize, usize),
    alpha: f32,
    g: &[f32],
    a: &[f32],
    beta: f32,
    acc: &mut [f32],
) {
    let (w, b) = acc.split_at_mut(p * d);
    gemm(p, t, d, alpha, g, false, a, true, beta, w);
    for (bj, row) in b.iter_mut().zip(g.chunks_exact(t)) {
        let sum = alpha * row.iter().sum::<f32>();
        *bj = if beta == 0.0 { sum } else { beta * *bj + sum };
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
        self.prepare_scratch(ranges.len(), 0);
        let ys = split_mut(y.data_mut(), p * t, &ranges);
        let (wv, bv) = (&self.weight.value, &self.bias.value);
        let in_len = x.record_len();
        let scratch = &mut self.scratch[..ranges.len()];
        ranges
            .into_par_iter()
            .zip(scratch)
            .zip(ys)
            .for_each(|((r, s), ys)| {
                for (k, i) in r.enumerate() {
                    win.im2col(&x.data()[i * in_len..(i + 1) * in_len], &mut s.cols);
                    let yi = &mut ys[k * p * t..(k + 1) * p * t];
                    for (row, b) in yi.chunks_exact_mut(t).zip(bv) {
                        row.iter_mut().for_each(|v| *v = *b);
                    }
                    gemm(p, d, t, 1.0, wv, false, &s.cols, false, 1.0, yi);
                }
            });
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
        let private = matches!(mode, GradMode::PerSample(_));
        let buf_len = if private && norm_mode == ConvNormMode::Ghost {
            2 * t * t
        } else {
            d * t
        };
        self.prepare_scratch(ranges.len(), buf_len.max(d * t));
        if private && norm_mode == ConvNormMode::Materialize {
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
            GradMode::Sum => &mut no_sq[..],
        };
        let sqs = split_mut(sq, 1, &ranges);
        let pss = split_mut(
            if private && norm_mode == ConvNormMode::Materialize {
                &mut self.per_sample[..]
            } else {
                &mut []
            },
            glen,
            &ranges,
        );
        let wv = &self.weight.value;
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
                    win.im2col(&x.data()[i * in_len..(i + 1) * in_len], &mut s.cols);
                    let a = &s.cols;
                    let g = &gy.data()[i * p * t..(i + 1) * p * t];
                    if want_gx {
                        let dcols = &mut s.buf[..d * t];
                        gemm(d, p, t, 1.0, wv, true, g, false, 0.0, dcols);
                        win.col2im(dcols, &mut gx[k * in_len..(k + 1) * in_len]);
                    }
                    if !private {
                        add_sample_grad((p, t, d), 1.0, g, a, 1.0, &mut s.acc);
                    } else if norm_mode == ConvNormMode::Materialize {
                        let psi = &mut ps[k * glen..(k + 1) * glen];
                        add_sample_grad((p, t, d), 1.0, g, a, 0.0, psi);
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

    fn accumulate_clipped(&mut self, x: &Tensor, gy: &Tensor, factors: &[f32]) {
        let (n, win, p) = (x.batch(), self.win, self.out_ch);
        let (d, t) = (win.d(), win.t());
        if self.effective_norm_mode() == ConvNormMode::Materialize {
            let glen = self.grad_len();
            let pd = p * d;
            // One pass over the kept per-sample gradients: weight part then bias part
            // (`weighted_row_sum` skips factor-0 rows, which may be non-finite).
            let mut tmp = std::mem::take(&mut self.scratch);
            tmp.resize_with(1, Scratch::default);
            tmp[0].acc.clear();
            tmp[0].acc.resize(glen, 0.0);
            weighted_row_sum(&self.per_sample[..n * glen], factors, &mut tmp[0].acc);
            add_into(&mut self.weight.grad, &tmp[0].acc[..pd]);
            add_into(&mut self.bias.grad, &tmp[0].acc[pd..]);
            self.scratch = tmp;
            return;
        }
        let ranges = sample_ranges(n);
        self.prepare_scratch(ranges.len(), 0);
        let in_len = x.record_len();
        let scratch = &mut self.scratch[..ranges.len()];
        let parts = ranges.len();
        ranges.into_par_iter().zip(scratch).for_each(|(r, s)| {
            // Factor-0 samples are skipped: their unfolded input may be non-finite.
            for i in r.filter(|&i| factors[i] != 0.0) {
                win.im2col(&x.data()[i * in_len..(i + 1) * in_len], &mut s.cols);
                let g = &gy.data()[i * p * t..(i + 1) * p * t];
                add_sample_grad((p, t, d), factors[i], g, &s.cols, 1.0, &mut s.acc);
            }
        });
        self.reduce_scratch(parts);
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

    #[test]
    fn kernel_too_large_is_refused() {
        let err = Conv2d::new([1, 3, 3], 2, 5, 1, 0, &mut DpRng::seeded(0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("[1, 3, 3]") && err.contains('5'), "{err}");
    }
}
