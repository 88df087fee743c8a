//! Dropout: in training each value of each record is zeroed with probability p and the rest
//! scaled by 1/(1 − p); at evaluation it is the identity. Masks are drawn per sample from the
//! layer's own generator (forked from the model's at build time), independently of the data,
//! so every sample's gradient still depends only on that sample and per-sample clipping keeps
//! its guarantee.

use dpml_mechanisms::DpRng;

use super::{GradMode, Layer, LayerSpec, par_map3};
use crate::error::{Result, invalid};
use crate::tensor::Tensor;

/// Inverted dropout with drop probability `p`.
#[derive(Debug, Clone)]
pub struct Dropout {
    shape: Vec<usize>,
    p: f32,
    rng: DpRng,
    training: bool,
    /// 0 or 1/(1 − p) per value of the last training forward pass.
    mask: Vec<f32>,
}

impl Dropout {
    /// Dropout for records of shape `shape`; starts in evaluation mode (identity).
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] unless `0 ≤ p < 1`.
    pub fn new(shape: &[usize], p: f32, rng: &mut DpRng) -> Result<Self> {
        if !(0.0..1.0).contains(&p) {
            return Err(invalid(format!("dropout p must be in [0, 1), got {p}")));
        }
        Ok(Self {
            shape: shape.to_vec(),
            p,
            rng: rng.fork(),
            training: false,
            mask: Vec::new(),
        })
    }
}

impl Layer for Dropout {
    fn spec(&self) -> LayerSpec {
        LayerSpec::Dropout { p: self.p }
    }

    fn out_shape(&self) -> &[usize] {
        &self.shape
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }

    fn forward(&mut self, x: &Tensor, y: &mut Tensor) {
        y.reset(x.batch(), &self.shape);
        if !self.training || self.p == 0.0 {
            y.data_mut().copy_from_slice(x.data());
            return;
        }
        let (p, keep) = (f64::from(self.p), 1.0 / (1.0 - self.p));
        let rng = &mut self.rng;
        self.mask.clear();
        self.mask
            .extend((0..x.data().len()).map(|_| if rng.uniform_f64() < p { 0.0 } else { keep }));
        // A dropped value is 0 exactly, even where x is ±inf or NaN.
        par_map3(x.data(), &self.mask, y.data_mut(), |v, m| {
            if m == 0.0 { 0.0 } else { v * m }
        });
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
            if !self.training || self.p == 0.0 {
                gx.data_mut().copy_from_slice(gy.data());
            } else {
                par_map3(gy.data(), &self.mask, gx.data_mut(), |g, m| {
                    if m == 0.0 { 0.0 } else { g * m }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::testutil::{check_layer, random};

    #[test]
    fn evaluation_is_the_identity_and_passes_finite_differences() {
        let mut d = Dropout::new(&[3, 17, 23], 0.5, &mut DpRng::seeded(0)).unwrap();
        check_layer(&mut d, &[2, 3, 17, 23], 4);
        let x = random(&[2, 3, 17, 23], &mut DpRng::seeded(1));
        let mut y = Tensor::default();
        d.forward(&x, &mut y);
        assert_eq!(y, x);
    }

    #[test]
    fn training_drops_about_p_and_backward_uses_the_same_mask() {
        let mut d = Dropout::new(&[3, 17, 23], 0.25, &mut DpRng::seeded(0)).unwrap();
        d.set_training(true);
        let x = random(&[4, 3, 17, 23], &mut DpRng::seeded(1));
        let mut y = Tensor::default();
        d.forward(&x, &mut y);
        let n = x.data().len() as f64;
        let dropped = y.data().iter().filter(|&&v| v == 0.0).count() as f64;
        // 4692 values, p = 0.25: the standard deviation of the fraction is 0.0063.
        assert!((dropped / n - 0.25).abs() < 0.03, "dropped {}", dropped / n);
        let gy = random(y.shape(), &mut DpRng::seeded(2));
        let mut gx = Tensor::default();
        d.backward(&x, &y, &gy, Some(&mut gx), GradMode::Sum);
        for ((&xv, &yv), (&g, &gxv)) in x
            .data()
            .iter()
            .zip(y.data())
            .zip(gy.data().iter().zip(gx.data()))
        {
            let want = if yv == 0.0 { 0.0 } else { g / 0.75 };
            assert!((gxv - want).abs() < 1e-6 && (yv == 0.0 || (yv - xv / 0.75).abs() < 1e-6));
        }
        // Two passes draw different masks.
        let mut y2 = Tensor::default();
        d.forward(&x, &mut y2);
        assert_ne!(y, y2);
    }

    #[test]
    fn refuses_p_outside_the_unit_interval() {
        let msg = Dropout::new(&[3], 1.0, &mut DpRng::seeded(0))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("got 1"), "{msg}");
    }
}
