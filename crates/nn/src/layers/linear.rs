//! Fully connected layer with ghost per-sample gradient norms.

use dpml_mechanisms::DpRng;
use rayon::prelude::*;

use super::{GradMode, Layer, LayerSpec};
use crate::error::{Result, invalid};
use crate::kernels::{par_gemm, sq_norm};
use crate::param::{Param, kaiming_bound};
use crate::tensor::Tensor;

/// `y = x Wᵀ + b` with `W` of shape `[out, in]` (PyTorch layout).
///
/// Per-sample gradients are never materialised: sample i's weight gradient is the outer
/// product gᵢ aᵢᵀ, so ‖gᵢ aᵢᵀ‖²_F = ‖aᵢ‖²‖gᵢ‖² (the ghost norm, Goodfellow 2015), plus ‖gᵢ‖²
/// for the bias; the clipped sum is the single product Gᵀ diag(c) A.
///
/// A sample with clip factor 0 (a non-finite norm) is left out of that product altogether,
/// not multiplied by 0: its activation row may hold ±inf or NaN, and 0·inf = NaN in a GEMM
/// that sums over samples would poison every weight.
#[derive(Debug, Clone)]
pub struct Linear {
    inp: usize,
    out: usize,
    out_shape: [usize; 1],
    /// Weight `[out, in]`.
    pub weight: Param,
    /// Bias `[out]`.
    pub bias: Param,
    /// diag(c)·G for the samples with c ≠ 0, from the last clipped accumulation.
    scaled: Vec<f32>,
    /// The activation rows of those samples, gathered only when some sample is dropped.
    kept_x: Vec<f32>,
    /// The indices of those samples.
    kept: Vec<usize>,
}

impl Linear {
    /// A layer with PyTorch's default initialisation (U(±1/√in) for weight and bias).
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] when a size is zero.
    pub fn new(inp: usize, out: usize, rng: &mut DpRng) -> Result<Self> {
        if inp == 0 || out == 0 {
            return Err(invalid(format!(
                "linear sizes must be > 0, got in={inp}, out={out}"
            )));
        }
        let b = kaiming_bound(inp);
        Ok(Self {
            inp,
            out,
            out_shape: [out],
            weight: Param::uniform("weight", &[out, inp], b, rng),
            bias: Param::uniform("bias", &[out], b, rng),
            scaled: Vec::new(),
            kept_x: Vec::new(),
            kept: Vec::new(),
        })
    }

    /// Adds Gᵀ A (`out × in`) and the column sums of G into the gradients.
    fn add_grads(&mut self, g: &[f32], x: &[f32], n: usize) {
        par_gemm(
            self.out,
            n,
            self.inp,
            1.0,
            g,
            true,
            x,
            false,
            1.0,
            &mut self.weight.grad,
        );
        for row in g.chunks_exact(self.out) {
            self.bias
                .grad
                .iter_mut()
                .zip(row)
                .for_each(|(b, v)| *b += v);
        }
    }
}

impl Layer for Linear {
    fn spec(&self) -> LayerSpec {
        LayerSpec::Linear {
            in_features: self.inp,
            out_features: self.out,
        }
    }

    fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        let n = x.batch();
        y.reset(n, &self.out_shape);
        let yd = y.data_mut();
        for row in yd.chunks_exact_mut(self.out) {
            row.copy_from_slice(&self.bias.value);
        }
        par_gemm(
            n,
            self.inp,
            self.out,
            1.0,
            x.data(),
            false,
            &self.weight.value,
            true,
            1.0,
            yd,
        );
    }

    fn backward(
        &mut self,
        x: &Tensor,
        _y: &Tensor,
        gy: &Tensor,
        gx: Option<&mut Tensor>,
        mode: GradMode<'_>,
    ) {
        let n = x.batch();
        if let Some(gx) = gx {
            gx.reset(n, &[self.inp]);
            par_gemm(
                n,
                self.out,
                self.inp,
                1.0,
                gy.data(),
                false,
                &self.weight.value,
                false,
                0.0,
                gx.data_mut(),
            );
        }
        match mode {
            GradMode::Sum => self.add_grads(gy.data(), x.data(), n),
            GradMode::PerSample(sq) => {
                let rows = rows_per_task(self.inp + self.out);
                sq.par_iter_mut()
                    .with_min_len(rows)
                    .enumerate()
                    .for_each(|(i, s)| *s = (sq_norm(x.record(i)) + 1.0) * sq_norm(gy.record(i)));
            }
            GradMode::InputOnly => {}
        }
    }

    fn accumulate_clipped(&mut self, x: &Tensor, gy: &Tensor, factors: &[f32]) {
        // c = 0 marks a dropped sample (non-finite norm): its x row may be non-finite, so it
        // must not enter the GEMM at all. The common case drops nothing and uses x in place;
        // otherwise the kept rows of x are gathered (a copy of the size of `scaled`).
        let mut scaled = std::mem::take(&mut self.scaled);
        let mut kept_x = std::mem::take(&mut self.kept_x);
        let mut kept = std::mem::take(&mut self.kept);
        kept.clear();
        kept.extend((0..factors.len()).filter(|&i| factors[i] != 0.0));
        let gather_x = kept.len() < factors.len();
        // The rows in parallel: on a wide layer this copy is a few percent of a step.
        let rows = rows_per_task(self.inp + self.out);
        scaled.resize(kept.len() * self.out, 0.0);
        scaled
            .par_chunks_mut(self.out)
            .with_min_len(rows)
            .zip(&kept)
            .for_each(|(row, &i)| {
                let c = factors[i];
                row.iter_mut()
                    .zip(gy.record(i))
                    .for_each(|(s, v)| *s = c * v);
            });
        if gather_x {
            kept_x.resize(kept.len() * self.inp, 0.0);
            kept_x
                .par_chunks_mut(self.inp)
                .with_min_len(rows)
                .zip(&kept)
                .for_each(|(row, &i)| row.copy_from_slice(x.record(i)));
        }
        if !kept.is_empty() {
            let xs = if gather_x { &kept_x[..] } else { x.data() };
            self.add_grads(&scaled, xs, kept.len());
        }
        self.scaled = scaled;
        self.kept_x = kept_x;
        self.kept = kept;
    }

    fn params(&self) -> Vec<&Param> {
        vec![&self.weight, &self.bias]
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.weight, &mut self.bias]
    }
}

/// Samples per parallel task for per-sample work on rows of `width` values: about 16k values,
/// so that small layers stay on one thread.
fn rows_per_task(width: usize) -> usize {
    ((1 << 14) / width.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::{check_layer, check_per_sample, check_poisoned_sample};

    #[test]
    fn gradients_match_finite_differences() {
        let mut l = Linear::new(5, 3, &mut DpRng::seeded(1)).unwrap();
        check_layer(&mut l, &[4, 5], 11);
    }

    #[test]
    fn per_sample_norms_and_clipped_sum_match_brute_force() {
        let mut l = Linear::new(6, 4, &mut DpRng::seeded(2)).unwrap();
        check_per_sample(&mut l, &[5, 6], 12);
    }

    #[test]
    fn a_poisoned_sample_is_left_out_of_the_clipped_sum() {
        let mut l = Linear::new(6, 4, &mut DpRng::seeded(3)).unwrap();
        check_poisoned_sample(&mut l, &[5, 6], 13);
    }
}
