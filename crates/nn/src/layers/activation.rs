//! Element-wise activations: ReLU and Tanh. Their backward passes read the cached output.

use super::{GradMode, Layer, LayerSpec, par_map3};
use crate::tensor::Tensor;

macro_rules! activation {
    ($name:ident, $spec:ident, $doc:literal, $f:expr, $df:expr) => {
        #[doc = $doc]
        #[derive(Debug, Clone)]
        pub struct $name {
            shape: Vec<usize>,
        }

        impl $name {
            /// The activation for records of shape `shape` (output shape is the same).
            pub fn new(shape: &[usize]) -> Self {
                Self {
                    shape: shape.to_vec(),
                }
            }
        }

        impl Layer for $name {
            fn spec(&self) -> LayerSpec {
                LayerSpec::$spec
            }

            fn out_shape(&self) -> &[usize] {
                &self.shape
            }

            fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
                y.reset(x.batch(), &self.shape);
                par_map3(x.data(), x.data(), y.data_mut(), |v, _| $f(v));
            }

            fn backward(
                &mut self,
                _x: &Tensor,
                y: &Tensor,
                gy: &Tensor,
                gx: Option<&mut Tensor>,
                _mode: GradMode<'_>,
            ) {
                if let Some(gx) = gx {
                    gx.reset(y.batch(), &self.shape);
                    par_map3(y.data(), gy.data(), gx.data_mut(), $df);
                }
            }
        }
    };
}

activation!(
    Relu,
    Relu,
    "Rectified linear unit, `max(x, 0)`.",
    |v: f32| v.max(0.0),
    |y: f32, g: f32| if y > 0.0 { g } else { 0.0 }
);
activation!(
    Tanh,
    Tanh,
    "Hyperbolic tangent.",
    |v: f32| v.tanh(),
    |y: f32, g: f32| g * (1.0 - y * y)
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::check_layer;

    #[test]
    fn relu_gradient_matches_finite_differences() {
        check_layer(&mut Relu::new(&[3, 4]), &[2, 3, 4], 1);
    }

    #[test]
    fn tanh_gradient_matches_finite_differences() {
        check_layer(&mut Tanh::new(&[7]), &[5, 7], 2);
    }
}
