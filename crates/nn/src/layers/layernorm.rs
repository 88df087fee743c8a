//! Layer normalisation (Ba et al. 2016) over each whole record: every sample is normalised with
//! its own mean and variance over all its values, then scaled and shifted element-wise
//! (PyTorch's `LayerNorm(record_shape)`). Per sample, so DP-compatible. Sample i's affine
//! gradients are gᵢ ⊙ x̂ᵢ and gᵢ, so their squared norm is Σ (gᵢx̂ᵢ)² + Σ gᵢ², formed from the
//! cached x̂ without storing per-sample gradients; the clipped sum is one weighted pass.

use super::{GradMode, Layer, LayerSpec};
use crate::error::{Result, invalid};
use crate::param::Param;
use crate::tensor::Tensor;

/// Variance floor added before the square root, as PyTorch's default.
const EPS: f32 = 1e-5;

/// LayerNorm over records of shape `shape`, with weight and bias of that shape (initialised 1
/// and 0).
#[derive(Debug, Clone)]
pub struct LayerNorm {
    shape: Vec<usize>,
    /// Element-wise scale γ.
    pub weight: Param,
    /// Element-wise shift β.
    pub bias: Param,
    xhat: Vec<f32>,
    rstd: Vec<f32>,
}

impl LayerNorm {
    /// LayerNorm for records of shape `shape`.
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] for an empty record shape.
    pub fn new(shape: &[usize]) -> Result<Self> {
        let d: usize = shape.iter().product();
        if shape.is_empty() || d == 0 {
            return Err(invalid(format!(
                "layer_norm needs a non-empty record shape, got {shape:?}"
            )));
        }
        Ok(Self {
            shape: shape.to_vec(),
            weight: Param::filled("weight", shape, 1.0),
            bias: Param::filled("bias", shape, 0.0),
            xhat: Vec::new(),
            rstd: Vec::new(),
        })
    }

    fn len(&self) -> usize {
        self.weight.len()
    }
}

impl Layer for LayerNorm {
    fn spec(&self) -> LayerSpec {
        LayerSpec::LayerNorm {
            shape: self.shape.clone(),
        }
    }

    fn out_shape(&self) -> &[usize] {
        &self.shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        let (n, d) = (x.batch(), self.len());
        y.reset(n, &self.shape);
        self.xhat.resize(n * d, 0.0);
        self.rstd.resize(n, 0.0);
        for (i, ((xr, xh), yr)) in x
            .data()
            .chunks_exact(d)
            .zip(self.xhat.chunks_exact_mut(d))
            .zip(y.data_mut().chunks_exact_mut(d))
            .enumerate()
        {
            let mean = xr.iter().sum::<f32>() / d as f32;
            let var = xr.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
            let rstd = 1.0 / (var + EPS).sqrt();
            self.rstd[i] = rstd;
            for (j, ((h, &v), o)) in xh.iter_mut().zip(xr).zip(yr.iter_mut()).enumerate() {
                *h = (v - mean) * rstd;
                *o = self.weight.value[j] * *h + self.bias.value[j];
            }
        }
    }

    fn backward(
        &mut self,
        x: &Tensor,
        _y: &Tensor,
        gy: &Tensor,
        gx: Option<&mut Tensor>,
        mode: GradMode<'_>,
    ) {
        let (n, d) = (x.batch(), self.len());
        if let Some(gx) = gx {
            gx.reset(n, &self.shape);
            // dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)) with ĝ = γ ⊙ dy.
            for i in 0..n {
                let (g, xh) = (gy.record(i), &self.xhat[i * d..(i + 1) * d]);
                let (mut m1, mut m2) = (0.0f32, 0.0f32);
                for j in 0..d {
                    let gh = self.weight.value[j] * g[j];
                    m1 += gh;
                    m2 += gh * xh[j];
                }
                m1 /= d as f32;
                m2 /= d as f32;
                let out = &mut gx.data_mut()[i * d..(i + 1) * d];
                for j in 0..d {
                    out[j] = self.rstd[i] * (self.weight.value[j] * g[j] - m1 - xh[j] * m2);
                }
            }
        }
        match mode {
            GradMode::Sum => self.add_weighted(gy, None),
            GradMode::PerSample(sq) => {
                for (i, s) in sq.iter_mut().enumerate().take(n) {
                    let (g, xh) = (gy.record(i), &self.xhat[i * d..(i + 1) * d]);
                    *s = g
                        .iter()
                        .zip(xh)
                        .map(|(a, b)| (a * b) * (a * b) + a * a)
                        .sum();
                }
            }
            GradMode::InputOnly => {}
        }
    }

    fn accumulate_clipped(&mut self, _x: &Tensor, gy: &Tensor, factors: &[f32]) {
        self.add_weighted(gy, Some(factors));
    }

    fn params(&self) -> Vec<&Param> {
        vec![&self.weight, &self.bias]
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.weight, &mut self.bias]
    }
}

impl LayerNorm {
    /// Adds Σᵢ cᵢ·(gᵢ ⊙ x̂ᵢ) and Σᵢ cᵢ·gᵢ into the gradients (cᵢ = 1 without factors). Samples
    /// with cᵢ = 0 are skipped, not scaled: their values may be non-finite.
    fn add_weighted(&mut self, gy: &Tensor, factors: Option<&[f32]>) {
        let d = self.len();
        for i in 0..gy.batch() {
            let c = factors.map_or(1.0, |f| f[i]);
            if c == 0.0 {
                continue;
            }
            let (g, xh) = (gy.record(i), &self.xhat[i * d..(i + 1) * d]);
            for j in 0..d {
                self.weight.grad[j] += c * g[j] * xh[j];
                self.bias.grad[j] += c * g[j];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::{
        check_layer, check_per_sample, check_poisoned_sample, perturb_params,
    };

    fn perturbed(shape: &[usize]) -> LayerNorm {
        // Non-trivial γ, β so the tests exercise the affine part.
        let mut l = LayerNorm::new(shape).unwrap();
        perturb_params(&mut l, 9);
        l
    }

    #[test]
    fn gradients_match_finite_differences_on_odd_colour_images() {
        check_layer(&mut perturbed(&[3, 17, 23]), &[2, 3, 17, 23], 4);
    }

    #[test]
    fn per_sample_norms_match_brute_force() {
        check_per_sample(&mut perturbed(&[3, 17, 23]), &[5, 3, 17, 23], 8);
    }

    #[test]
    fn a_poisoned_sample_is_left_out_of_the_clipped_sum() {
        check_poisoned_sample(&mut perturbed(&[3, 5, 7]), &[4, 3, 5, 7], 9);
    }
}
