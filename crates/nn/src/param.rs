//! Trainable parameters and their initialisation.

use dpml_mechanisms::DpRng;

/// A trainable parameter: its values and the gradient buffer the backward pass adds into.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Name within its layer (`"weight"` or `"bias"`).
    pub name: &'static str,
    /// Shape (PyTorch layout: Linear `[out, in]`, Conv2d `[out, in, kh, kw]`).
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub value: Vec<f32>,
    /// Gradient, same layout as `value`. Backward passes ADD into it; see
    /// [`crate::Sequential::zero_grad`].
    pub grad: Vec<f32>,
}

impl Param {
    /// A parameter filled with `v`.
    pub fn filled(name: &'static str, shape: &[usize], v: f32) -> Self {
        let n = shape.iter().product();
        Self {
            name,
            shape: shape.to_vec(),
            value: vec![v; n],
            grad: vec![0.0; n],
        }
    }

    /// A parameter drawn from U(−bound, bound), PyTorch's default for Linear and Conv2d:
    /// `kaiming_uniform_(a = √5)` gives bound = 1/√fan_in for weights, and biases use the same
    /// bound.
    pub fn uniform(name: &'static str, shape: &[usize], bound: f32, rng: &mut DpRng) -> Self {
        let mut p = Self::filled(name, shape, 0.0);
        for v in &mut p.value {
            *v = ((2.0 * rng.uniform_f64() - 1.0) * bound as f64) as f32;
        }
        p
    }

    /// Number of scalar values.
    pub fn len(&self) -> usize {
        self.value.len()
    }

    /// Whether the parameter holds no values.
    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }
}

/// PyTorch's default bound for Linear/Conv2d weights and biases: 1/√fan_in.
pub(crate) fn kaiming_bound(fan_in: usize) -> f32 {
    1.0 / (fan_in.max(1) as f32).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_init_stays_in_bound_and_has_uniform_variance() {
        let mut rng = DpRng::seeded(3);
        let n = 20_000;
        let p = Param::uniform("weight", &[n], 0.5, &mut rng);
        assert!(p.value.iter().all(|v| v.abs() <= 0.5));
        // Var of U(-b, b) is b²/3 = 1/12; the sample variance has sd ≈ b²·√(4/45)/√n
        // (fourth moment b⁴/5): 0.25·0.298/141 ≈ 5.3e-4. Allow 5 sd.
        let var: f32 = p.value.iter().map(|v| v * v).sum::<f32>() / n as f32;
        assert!((var - 0.25 / 3.0).abs() < 5.0 * 5.3e-4, "{var}");
    }
}
