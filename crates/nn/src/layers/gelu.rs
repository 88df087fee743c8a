//! GELU with the tanh approximation (PyTorch's `GELU(approximate="tanh")`, Hendrycks & Gimpel
//! 2016): `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`. The exact form needs erf, which std
//! lacks; the two differ by under 1e-3. The backward pass reads the cached input.

use super::{GradMode, Layer, LayerSpec, par_map3};
use crate::tensor::Tensor;

/// √(2/π).
const K: f32 = 0.797_884_6;
/// The cubic coefficient of the approximation.
const A: f32 = 0.044_715;

fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + (K * (x + A * x * x * x)).tanh())
}

/// d gelu / dx.
fn gelu_grad(x: f32) -> f32 {
    let t = (K * (x + A * x * x * x)).tanh();
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * K * (1.0 + 3.0 * A * x * x)
}

/// Gaussian error linear unit (tanh approximation), element-wise.
#[derive(Debug, Clone)]
pub struct Gelu {
    shape: Vec<usize>,
}

impl Gelu {
    /// The activation for records of shape `shape` (output shape is the same).
    pub fn new(shape: &[usize]) -> Self {
        Self {
            shape: shape.to_vec(),
        }
    }
}

impl Layer for Gelu {
    fn spec(&self) -> LayerSpec {
        LayerSpec::Gelu
    }

    fn out_shape(&self) -> &[usize] {
        &self.shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        y.reset(x.batch(), &self.shape);
        par_map3(x.data(), x.data(), y.data_mut(), |v, _| gelu(v));
    }

    fn backward(
        &mut self,
        x: &Tensor,
        _y: &Tensor,
        gy: &Tensor,
        gx: Option<&mut Tensor>,
        _mode: GradMode<'_>,
    ) {
        if let Some(gx) = gx {
            gx.reset(x.batch(), &self.shape);
            par_map3(x.data(), gy.data(), gx.data_mut(), |v, g| g * gelu_grad(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::check_layer;

    #[test]
    fn gradient_matches_finite_differences_on_odd_colour_images() {
        check_layer(&mut Gelu::new(&[3, 17, 23]), &[2, 3, 17, 23], 3);
    }

    #[test]
    fn matches_known_values() {
        // PyTorch GELU(approximate="tanh"): gelu(1) = 0.841192, gelu(-1) = -0.158808.
        assert!((gelu(1.0) - 0.841_192).abs() < 1e-5);
        assert!((gelu(-1.0) + 0.158_808).abs() < 1e-5);
        assert_eq!(gelu(0.0), 0.0);
    }
}
