//! Flatten: each record becomes one axis (row-major, so `[c, h, w]` flattens as PyTorch does).

use super::{GradMode, Layer, LayerSpec};
use crate::tensor::Tensor;

/// Reshapes `[n, a, b, ...]` to `[n, a·b·...]`.
#[derive(Debug, Clone)]
pub struct Flatten {
    in_shape: Vec<usize>,
    out_shape: [usize; 1],
}

impl Flatten {
    /// Flatten for records of shape `input`.
    pub fn new(input: &[usize]) -> Self {
        Self {
            in_shape: input.to_vec(),
            out_shape: [input.iter().product()],
        }
    }
}

impl Layer for Flatten {
    fn spec(&self) -> LayerSpec {
        LayerSpec::Flatten
    }

    fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        y.reset(x.batch(), &self.out_shape);
        y.data_mut().copy_from_slice(x.data());
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
            gx.reset(x.batch(), &self.in_shape);
            gx.data_mut().copy_from_slice(gy.data());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::check_layer;

    #[test]
    fn flatten_gradient_is_identity() {
        let mut f = Flatten::new(&[2, 3]);
        assert_eq!(f.out_shape(), &[6]);
        check_layer(&mut f, &[2, 2, 3], 1);
    }
}
