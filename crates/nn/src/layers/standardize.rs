//! Group standardisation: GroupNorm without the affine parameters (PyTorch's
//! `GroupNorm(affine=False)`), as Tramèr & Boneh (2021) normalise scattering features. Each
//! sample is normalised with its own statistics only, so it is DP-compatible, and having no
//! parameters it can belong to a model's fixed prefix (computed once per record).

use rayon::prelude::*;

use super::{GradMode, Layer, LayerSpec};
use crate::error::{Result, invalid};
use crate::tensor::Tensor;

/// Variance floor added before the square root, as PyTorch's default.
const EPS: f32 = 1e-5;

/// Splits the channels of `[channels, ...]` records into `groups` groups of consecutive
/// channels and normalises each group of each sample to zero mean and unit variance:
/// y = (x − μ_g)/√(σ²_g + 10⁻⁵).
#[derive(Debug, Clone)]
pub struct GroupStandardize {
    shape: Vec<usize>,
    groups: usize,
}

impl GroupStandardize {
    /// For records of shape `input` (`[channels, ...]`).
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] when `groups` is 0 or does not divide the channels.
    pub fn new(input: &[usize], groups: usize) -> Result<Self> {
        let channels = input.first().copied().unwrap_or(0);
        if groups == 0 || channels == 0 || channels % groups != 0 {
            return Err(invalid(format!(
                "group-standardize groups must be > 0 and divide the channels, got groups={groups}, channels={channels}"
            )));
        }
        Ok(Self {
            shape: input.to_vec(),
            groups,
        })
    }

    /// Values per group of one sample.
    fn group_len(&self) -> usize {
        self.shape.iter().product::<usize>() / self.groups
    }
}

/// 1/√(σ² + ε) and μ of one group.
fn stats(g: &[f32]) -> (f32, f32) {
    let n = g.len() as f32;
    let mean = g.iter().sum::<f32>() / n;
    let var = g.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    (1.0 / (var + EPS).sqrt(), mean)
}

impl Layer for GroupStandardize {
    fn spec(&self) -> LayerSpec {
        LayerSpec::GroupStandardize {
            groups: self.groups,
            channels: self.shape[0],
        }
    }

    fn out_shape(&self) -> &[usize] {
        &self.shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        let glen = self.group_len();
        y.reset(x.batch(), &self.shape);
        y.data_mut()
            .par_chunks_mut(glen)
            .zip(x.data().par_chunks(glen))
            .for_each(|(yg, xg)| {
                let (rstd, mean) = stats(xg);
                yg.iter_mut()
                    .zip(xg)
                    .for_each(|(o, v)| *o = (v - mean) * rstd);
            });
    }

    /// dx = rstd·(dy − mean(dy) − ŷ·mean(dy·ŷ)) per group, ŷ the output.
    fn backward(
        &mut self,
        x: &Tensor,
        y: &Tensor,
        gy: &Tensor,
        gx: Option<&mut Tensor>,
        _mode: GradMode<'_>,
    ) {
        let Some(gx) = gx else { return };
        let glen = self.group_len();
        gx.reset(x.batch(), &self.shape);
        gx.data_mut()
            .par_chunks_mut(glen)
            .zip(x.data().par_chunks(glen))
            .zip(y.data().par_chunks(glen).zip(gy.data().par_chunks(glen)))
            .for_each(|((dx, xg), (yg, g))| {
                let (rstd, _) = stats(xg);
                let n = glen as f32;
                let m1 = g.iter().sum::<f32>() / n;
                let m2 = g.iter().zip(yg).map(|(a, b)| a * b).sum::<f32>() / n;
                for ((d, gv), yv) in dx.iter_mut().zip(g).zip(yg) {
                    *d = rstd * (gv - m1 - yv * m2);
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::check_layer;

    #[test]
    fn gradient_matches_finite_differences() {
        check_layer(
            &mut GroupStandardize::new(&[4, 3, 3], 2).unwrap(),
            &[3, 4, 3, 3],
            1,
        );
    }

    #[test]
    fn groups_have_zero_mean_and_unit_variance() {
        let mut l = GroupStandardize::new(&[6, 2], 3).unwrap();
        let x = Tensor::from_vec(&[1, 6, 2], (0..12).map(|v| (v * v) as f32).collect()).unwrap();
        let mut y = Tensor::default();
        l.forward(&x, &mut y);
        for g in y.data().chunks(4) {
            let mean = g.iter().sum::<f32>() / 4.0;
            let var = g.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 4.0;
            assert!(
                mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-3,
                "{mean} {var}"
            );
        }
        assert!(GroupStandardize::new(&[6, 2], 4).is_err());
        assert!(l.params().is_empty());
    }
}
