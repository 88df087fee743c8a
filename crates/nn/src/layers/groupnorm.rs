//! Group normalisation (Wu & He 2018): each sample is normalised with its own statistics, so
//! per-sample gradients stay per-sample (unlike BatchNorm). The affine parameters' per-sample
//! gradients are small (2 values per channel) and are formed directly.

use super::{GradMode, Layer, LayerSpec, weighted_row_sum};
use crate::error::{Result, invalid};
use crate::kernels::{add_into, sq_norm};
use crate::param::Param;
use crate::tensor::Tensor;

/// Variance floor added before the square root, as PyTorch's default.
const EPS: f32 = 1e-5;

/// GroupNorm over `[channels, ...]` records: channels split into `groups` groups, each
/// normalised to zero mean and unit variance over its channels and positions, then scaled by
/// `weight[c]` and shifted by `bias[c]` (initialised 1 and 0).
#[derive(Debug, Clone)]
pub struct GroupNorm {
    shape: Vec<usize>,
    groups: usize,
    /// Per-channel scale γ.
    pub weight: Param,
    /// Per-channel shift β.
    pub bias: Param,
    xhat: Vec<f32>,
    rstd: Vec<f32>,
    per_sample: Vec<f32>,
    acc: Vec<f32>,
}

impl GroupNorm {
    /// GroupNorm for records of shape `input` (`[channels, ...]`).
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] when `groups` is 0 or does not divide the channels.
    pub fn new(input: &[usize], groups: usize) -> Result<Self> {
        let channels = input.first().copied().unwrap_or(0);
        if groups == 0 || channels == 0 || channels % groups != 0 {
            return Err(invalid(format!(
                "group-norm groups must be > 0 and divide the channels, got groups={groups}, channels={channels}"
            )));
        }
        Ok(Self {
            shape: input.to_vec(),
            groups,
            weight: Param::filled("weight", &[channels], 1.0),
            bias: Param::filled("bias", &[channels], 0.0),
            xhat: Vec::new(),
            rstd: Vec::new(),
            per_sample: Vec::new(),
            acc: Vec::new(),
        })
    }

    fn channels(&self) -> usize {
        self.shape[0]
    }

    /// Positions per channel.
    fn spatial(&self) -> usize {
        self.shape[1..].iter().product()
    }

    /// Per-sample affine gradients of sample `i` into `out` (`[dγ; dβ]`).
    fn sample_grad(&self, i: usize, gy: &[f32], out: &mut [f32]) {
        let (c, s) = (self.channels(), self.spatial());
        let xh = &self.xhat[i * c * s..(i + 1) * c * s];
        let (dg, db) = out.split_at_mut(c);
        for ch in 0..c {
            let (g, x) = (&gy[ch * s..(ch + 1) * s], &xh[ch * s..(ch + 1) * s]);
            dg[ch] = g.iter().zip(x).map(|(a, b)| a * b).sum();
            db[ch] = g.iter().sum();
        }
    }
}

impl Layer for GroupNorm {
    fn spec(&self) -> LayerSpec {
        LayerSpec::GroupNorm {
            groups: self.groups,
            channels: self.channels(),
        }
    }

    fn out_shape(&self) -> &[usize] {
        &self.shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        let (n, c, s) = (x.batch(), self.channels(), self.spatial());
        let glen = c / self.groups * s;
        y.reset(n, &self.shape);
        self.xhat.resize(n * c * s, 0.0);
        self.rstd.resize(n * self.groups, 0.0);
        for (gi, (xg, xh)) in x
            .data()
            .chunks_exact(glen)
            .zip(self.xhat.chunks_exact_mut(glen))
            .enumerate()
        {
            let mean = xg.iter().sum::<f32>() / glen as f32;
            let var = xg.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / glen as f32;
            let rstd = 1.0 / (var + EPS).sqrt();
            self.rstd[gi] = rstd;
            xh.iter_mut()
                .zip(xg)
                .for_each(|(h, v)| *h = (v - mean) * rstd);
        }
        for (k, (yv, h)) in y.data_mut().iter_mut().zip(&self.xhat).enumerate() {
            let ch = (k / s) % c;
            *yv = self.weight.value[ch] * h + self.bias.value[ch];
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
        let (n, c, s) = (x.batch(), self.channels(), self.spatial());
        let cpg = c / self.groups;
        let glen = cpg * s;
        if let Some(gx) = gx {
            gx.reset(n, &self.shape);
            // dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)) per group, with ĝ = γ·dy.
            let out = gx.data_mut();
            for gi in 0..n * self.groups {
                let base = gi * glen;
                let ch0 = (gi % self.groups) * cpg;
                let (mut m1, mut m2) = (0.0f32, 0.0f32);
                for j in 0..glen {
                    let gh = self.weight.value[ch0 + j / s] * gy.data()[base + j];
                    m1 += gh;
                    m2 += gh * self.xhat[base + j];
                }
                m1 /= glen as f32;
                m2 /= glen as f32;
                let rstd = self.rstd[gi];
                for j in 0..glen {
                    let gh = self.weight.value[ch0 + j / s] * gy.data()[base + j];
                    out[base + j] = rstd * (gh - m1 - self.xhat[base + j] * m2);
                }
            }
        }
        let plen = 2 * c;
        match mode {
            GradMode::Sum => {
                let mut acc = std::mem::take(&mut self.acc);
                acc.resize(plen, 0.0);
                for i in 0..n {
                    self.sample_grad(i, gy.record(i), &mut acc);
                    add_into(&mut self.weight.grad, &acc[..c]);
                    add_into(&mut self.bias.grad, &acc[c..]);
                }
                self.acc = acc;
            }
            GradMode::PerSample(sq) => {
                let mut ps = std::mem::take(&mut self.per_sample);
                ps.resize(n * plen, 0.0);
                for (i, row) in ps.chunks_exact_mut(plen).enumerate() {
                    self.sample_grad(i, gy.record(i), row);
                    sq[i] = sq_norm(row);
                }
                self.per_sample = ps;
            }
            GradMode::InputOnly => {}
        }
    }

    fn accumulate_clipped(&mut self, x: &Tensor, _gy: &Tensor, factors: &[f32]) {
        let c = self.channels();
        self.acc.clear();
        self.acc.resize(2 * c, 0.0);
        // Skips factor-0 rows, which may be non-finite.
        weighted_row_sum(
            &self.per_sample[..x.batch() * 2 * c],
            factors,
            &mut self.acc,
        );
        add_into(&mut self.weight.grad, &self.acc[..c]);
        add_into(&mut self.bias.grad, &self.acc[c..]);
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
    use crate::layers::testutil::{
        check_layer, check_per_sample, check_poisoned_sample, perturb_params,
    };

    fn perturbed(g: &mut GroupNorm) {
        // Non-trivial γ, β so the test exercises the affine part.
        perturb_params(g, 9);
    }

    #[test]
    fn gradients_match_finite_differences() {
        let mut g = GroupNorm::new(&[4, 3, 2], 2).unwrap();
        perturbed(&mut g);
        check_layer(&mut g, &[2, 4, 3, 2], 4);
    }

    #[test]
    fn per_sample_norms_match_brute_force() {
        let mut g = GroupNorm::new(&[6, 5], 3).unwrap();
        perturbed(&mut g);
        check_per_sample(&mut g, &[4, 6, 5], 8);
    }

    #[test]
    fn a_poisoned_sample_is_left_out_of_the_clipped_sum() {
        let mut g = GroupNorm::new(&[6, 5], 3).unwrap();
        perturbed(&mut g);
        check_poisoned_sample(&mut g, &[4, 6, 5], 9);
    }

    #[test]
    fn groups_must_divide_channels() {
        let msg = GroupNorm::new(&[6, 4], 4).unwrap_err().to_string();
        assert!(
            msg.contains("groups=4") && msg.contains("channels=6"),
            "{msg}"
        );
    }
}
