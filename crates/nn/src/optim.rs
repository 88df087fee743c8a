//! Optimizers (SGD with momentum/Nesterov, Adam) and learning-rate schedules. They update the
//! parameters from whatever is in `grad` — in DP-SGD the loop has already added noise and
//! divided by the expected batch size.

use multiversion::multiversion;
use rayon::prelude::*;

use crate::error::{Result, invalid};
use crate::model::Sequential;

/// Values of a parameter per parallel task of an update (each value's update is independent
/// of the others, so the result does not depend on the number of threads). A pass over the
/// parameters is memory-bound and, on one thread, was a tenth of an MLP step.
pub(crate) const UPDATE_CHUNK: usize = 1 << 14;

/// An optimizer that updates a model's parameters from their `grad` buffers.
pub trait Optimizer {
    /// One update with learning rate `lr`.
    fn step(&mut self, model: &mut Sequential, lr: f32) {
        self.step_scaled(model, lr, 1.0);
    }

    /// One update with learning rate `lr` from the gradients times `grad_scale` (the DP-SGD
    /// loop's division by the batch size, done while the optimizer reads each gradient rather
    /// than in a pass of its own; the result is the same to the bit).
    fn step_scaled(&mut self, model: &mut Sequential, lr: f32, grad_scale: f32);

    /// The state carried between updates (moments, step count), to save in a checkpoint.
    fn state(&self) -> OptimizerState;

    /// Continues from a saved [`Optimizer::state`] of the same kind of optimizer.
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] when `state` has the wrong number of buffers.
    fn set_state(&mut self, state: OptimizerState) -> Result<()>;
}

/// What an optimizer carries from one update to the next: its update count and its
/// per-parameter buffers (SGD: the velocity; Adam: first then second moments).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct OptimizerState {
    /// Updates taken (Adam's bias correction uses it; SGD keeps 0).
    pub updates: i32,
    /// One list of per-parameter buffers per kind of moment.
    pub buffers: Vec<Vec<Vec<f32>>>,
}

/// The `buffers` of `state`, checked to be `want` lists.
fn take_buffers(state: OptimizerState, want: usize) -> Result<Vec<Vec<Vec<f32>>>> {
    if state.buffers.len() != want {
        return Err(invalid(format!(
            "optimizer state has {} buffer lists, this optimizer keeps {want}",
            state.buffers.len()
        )));
    }
    Ok(state.buffers)
}

fn check(name: &str, v: f32, lo: f32, hi: f32, hi_open: bool) -> Result<()> {
    let ok = v.is_finite() && v >= lo && (v < hi || (!hi_open && v <= hi));
    if ok {
        Ok(())
    } else {
        let close = if hi_open { ')' } else { ']' };
        Err(invalid(format!(
            "{name} must be in [{lo}, {hi}{close}, got {v}"
        )))
    }
}

/// Stochastic gradient descent with optional (Nesterov) momentum and weight decay, with
/// PyTorch's update rule: g ← g + λw; v ← μv + g; w ← w − lr·(g + μv if Nesterov else v).
#[derive(Debug, Clone)]
pub struct Sgd {
    momentum: f32,
    nesterov: bool,
    weight_decay: f32,
    velocity: Vec<Vec<f32>>,
}

impl Sgd {
    /// SGD with the given momentum (0 for plain SGD) and weight decay.
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] when momentum is outside [0, 1), weight decay is
    /// negative, or Nesterov is asked without momentum.
    pub fn new(momentum: f32, nesterov: bool, weight_decay: f32) -> Result<Self> {
        check("momentum", momentum, 0.0, 1.0, true)?;
        check("weight_decay", weight_decay, 0.0, f32::MAX, false)?;
        if nesterov && momentum == 0.0 {
            return Err(invalid("nesterov momentum needs momentum > 0, got 0"));
        }
        Ok(Self {
            momentum,
            nesterov,
            weight_decay,
            velocity: Vec::new(),
        })
    }
}

impl Optimizer for Sgd {
    fn step_scaled(&mut self, model: &mut Sequential, lr: f32, grad_scale: f32) {
        let (mu, nesterov, wd) = (self.momentum, self.nesterov, self.weight_decay);
        let vel = &mut self.velocity;
        model.for_each_param_mut(|k, p| {
            if vel.len() <= k {
                vel.resize_with(k + 1, Vec::new);
            }
            let v = &mut vel[k];
            v.resize(p.len(), 0.0);
            p.value
                .par_chunks_mut(UPDATE_CHUNK)
                .zip(p.grad.par_chunks(UPDATE_CHUNK))
                .zip(v.par_chunks_mut(UPDATE_CHUNK))
                .for_each(|((w, g), v)| sgd_update(w, g, v, [lr, grad_scale, wd, mu], nesterov));
        });
    }

    fn state(&self) -> OptimizerState {
        OptimizerState {
            updates: 0,
            buffers: vec![self.velocity.clone()],
        }
    }

    fn set_state(&mut self, state: OptimizerState) -> Result<()> {
        let [velocity] = <[_; 1]>::try_from(take_buffers(state, 1)?).unwrap_or_default();
        self.velocity = velocity;
        Ok(())
    }
}

/// One SGD update of one parameter: `w` from its gradient `g` (times `scale`) and velocity
/// `v`. The three cases get a loop each: with the momentum and Nesterov tests inside one loop
/// the compiler keeps it scalar, and this pass over every parameter then costs a tenth of a
/// step of the MLP. Compiled for each SIMD level and chosen at run time (crate docs, "Vector
/// width").
#[multiversion(targets = "simd")]
fn sgd_update(w: &mut [f32], g: &[f32], v: &mut [f32], hyper: [f32; 4], nesterov: bool) {
    let [lr, scale, wd, mu] = hyper;
    let it = w.iter_mut().zip(g).zip(v.iter_mut());
    if mu == 0.0 {
        for (w, g) in w.iter_mut().zip(g) {
            *w -= lr * (g * scale + wd * *w);
        }
    } else if nesterov {
        for ((w, g), v) in it {
            let g = g * scale + wd * *w;
            *v = mu * *v + g;
            *w -= lr * (g + mu * *v);
        }
    } else {
        for ((w, g), v) in it {
            *v = mu * *v + (g * scale + wd * *w);
            *w -= lr * *v;
        }
    }
}

/// Adam (Kingma & Ba 2015) with bias correction and optional L2 weight decay added to the
/// gradient (PyTorch's `Adam`, not `AdamW`).
#[derive(Debug, Clone)]
pub struct Adam {
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    t: i32,
    m: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
}

impl Adam {
    /// Adam with the given moment decays, ε and weight decay (PyTorch defaults: 0.9, 0.999,
    /// 1e-8, 0).
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] when a beta is outside [0, 1), ε ≤ 0 or weight
    /// decay < 0.
    pub fn new(beta1: f32, beta2: f32, eps: f32, weight_decay: f32) -> Result<Self> {
        check("beta1", beta1, 0.0, 1.0, true)?;
        check("beta2", beta2, 0.0, 1.0, true)?;
        check("weight_decay", weight_decay, 0.0, f32::MAX, false)?;
        if !(eps.is_finite() && eps > 0.0) {
            return Err(invalid(format!(
                "adam eps must be finite and > 0, got {eps}"
            )));
        }
        Ok(Self {
            beta1,
            beta2,
            eps,
            weight_decay,
            t: 0,
            m: Vec::new(),
            v: Vec::new(),
        })
    }
}

impl Default for Adam {
    fn default() -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            t: 0,
            m: Vec::new(),
            v: Vec::new(),
        }
    }
}

/// One Adam update of one parameter: `w` from its gradient `g` (times `scale`) and moments
/// `m`, `v`, with bias corrections `c1`, `c2`. Compiled for each SIMD level, as [`sgd_update`].
#[multiversion(targets = "simd")]
fn adam_update(w: &mut [f32], g: &[f32], (m, v): (&mut [f32], &mut [f32]), hyper: [f32; 8]) {
    let [lr, scale, wd, b1, b2, c1, c2, eps] = hyper;
    for (((w, g), m), v) in w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
        let g = g * scale + wd * *w;
        *m = b1 * *m + (1.0 - b1) * g;
        *v = b2 * *v + (1.0 - b2) * g * g;
        *w -= lr * (*m / c1) / ((*v / c2).sqrt() + eps);
    }
}

impl Optimizer for Adam {
    fn step_scaled(&mut self, model: &mut Sequential, lr: f32, grad_scale: f32) {
        self.t = self.t.saturating_add(1);
        let (b1, b2, eps, wd) = (self.beta1, self.beta2, self.eps, self.weight_decay);
        let c1 = 1.0 - b1.powi(self.t);
        let c2 = 1.0 - b2.powi(self.t);
        let (ms, vs) = (&mut self.m, &mut self.v);
        model.for_each_param_mut(|k, p| {
            if ms.len() <= k {
                ms.resize_with(k + 1, Vec::new);
                vs.resize_with(k + 1, Vec::new);
            }
            ms[k].resize(p.len(), 0.0);
            vs[k].resize(p.len(), 0.0);
            p.value
                .par_chunks_mut(UPDATE_CHUNK)
                .zip(p.grad.par_chunks(UPDATE_CHUNK))
                .zip(ms[k].par_chunks_mut(UPDATE_CHUNK))
                .zip(vs[k].par_chunks_mut(UPDATE_CHUNK))
                .for_each(|(((w, g), m), v)| {
                    adam_update(w, g, (m, v), [lr, grad_scale, wd, b1, b2, c1, c2, eps]);
                });
        });
    }

    fn state(&self) -> OptimizerState {
        OptimizerState {
            updates: self.t,
            buffers: vec![self.m.clone(), self.v.clone()],
        }
    }

    fn set_state(&mut self, state: OptimizerState) -> Result<()> {
        self.t = state.updates;
        let [m, v] = <[_; 2]>::try_from(take_buffers(state, 2)?).unwrap_or_default();
        (self.m, self.v) = (m, v);
        Ok(())
    }
}

/// A learning-rate schedule: the rate at step t (from 0) given the base rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LrSchedule {
    /// Always the base rate.
    Constant,
    /// Multiply by `gamma` every `every` steps.
    Step {
        /// Steps between decays (> 0).
        every: usize,
        /// Decay factor in (0, 1].
        gamma: f32,
    },
    /// Cosine annealing from the base rate to `min_lr` over `total_steps`, then `min_lr`.
    Cosine {
        /// Length of the schedule (> 0).
        total_steps: usize,
        /// Final rate (≥ 0).
        min_lr: f32,
    },
}

impl LrSchedule {
    /// Checks the schedule's parameters.
    ///
    /// # Errors
    /// [`crate::NnError::InvalidParameter`] naming the bad value.
    pub fn validate(&self) -> Result<()> {
        match *self {
            LrSchedule::Constant => Ok(()),
            LrSchedule::Step { every, gamma } => {
                if every == 0 {
                    return Err(invalid("step schedule needs every > 0, got 0"));
                }
                if !(gamma > 0.0 && gamma <= 1.0) {
                    return Err(invalid(format!(
                        "step schedule gamma must be in (0, 1], got {gamma}"
                    )));
                }
                Ok(())
            }
            LrSchedule::Cosine {
                total_steps,
                min_lr,
            } => {
                if total_steps == 0 {
                    return Err(invalid("cosine schedule needs total_steps > 0, got 0"));
                }
                check("cosine min_lr", min_lr, 0.0, f32::MAX, false)
            }
        }
    }

    /// The learning rate at step `t`.
    pub fn lr(&self, base: f32, t: usize) -> f32 {
        match *self {
            LrSchedule::Constant => base,
            LrSchedule::Step { every, gamma } => base * gamma.powi((t / every.max(1)) as i32),
            LrSchedule::Cosine {
                total_steps,
                min_lr,
            } => {
                let frac = (t.min(total_steps) as f32) / total_steps.max(1) as f32;
                min_lr + 0.5 * (base - min_lr) * (1.0 + (std::f32::consts::PI * frac).cos())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelSpec;
    use dpml_mechanisms::DpRng;

    fn model_with_grad(g: f32) -> Sequential {
        let spec = ModelSpec::named("logreg", &[2], 2, &[]).unwrap();
        let mut m = Sequential::new(spec, &mut DpRng::seeded(0)).unwrap();
        m.for_each_param_mut(|_, p| {
            p.value.iter_mut().for_each(|v| *v = 1.0);
            p.grad.iter_mut().for_each(|v| *v = g);
        });
        m
    }

    fn first_value(m: &Sequential) -> f32 {
        m.params()[0].value[0]
    }

    /// Scaling the gradients inside the update is the same, to the bit, as scaling them first
    /// and updating, for every kind of update (plain, momentum, Nesterov, weight decay, Adam).
    #[test]
    fn scaled_step_is_the_step_on_scaled_gradients() {
        let make: [fn() -> Box<dyn Optimizer>; 5] = [
            || Box::new(Sgd::new(0.0, false, 0.0).unwrap()),
            || Box::new(Sgd::new(0.0, false, 0.01).unwrap()),
            || Box::new(Sgd::new(0.9, false, 0.01).unwrap()),
            || Box::new(Sgd::new(0.9, true, 0.01).unwrap()),
            || Box::new(Adam::new(0.9, 0.999, 1e-8, 0.01).unwrap()),
        ];
        let scale = 1.0 / 7.0f32;
        for (k, make) in make.iter().enumerate() {
            let (mut fused, mut apart) = (model_with_grad(0.3), model_with_grad(0.3));
            let (mut a, mut b) = (make(), make());
            for _ in 0..3 {
                a.step_scaled(&mut fused, 0.1, scale);
                apart.for_each_param_mut(|_, p| p.grad.iter_mut().for_each(|g| *g = 0.3 * scale));
                b.step(&mut apart, 0.1);
            }
            let (x, y) = (fused.params(), apart.params());
            for (p, q) in x.iter().zip(&y) {
                assert_eq!(p.value, q.value, "optimizer {k}");
            }
            assert_ne!(first_value(&fused), 1.0, "optimizer {k} did not move");
        }
    }

    #[test]
    fn sgd_momentum_and_nesterov_follow_pytorch() {
        // Two steps with constant gradient 1, lr 0.1, μ 0.9: v1 = 1, v2 = 1.9.
        let mut m = model_with_grad(1.0);
        let mut o = Sgd::new(0.9, false, 0.0).unwrap();
        o.step(&mut m, 0.1);
        o.step(&mut m, 0.1);
        assert!((first_value(&m) - (1.0 - 0.1 - 0.19)).abs() < 1e-6);
        // Nesterov: updates g + μv: 1 + 0.9 = 1.9, then 1 + 0.9·1.9 = 2.71.
        let mut m = model_with_grad(1.0);
        let mut o = Sgd::new(0.9, true, 0.0).unwrap();
        o.step(&mut m, 0.1);
        o.step(&mut m, 0.1);
        assert!((first_value(&m) - (1.0 - 0.19 - 0.271)).abs() < 1e-6);
    }

    #[test]
    fn adam_first_step_is_lr_times_sign() {
        // After bias correction, m̂ = g and v̂ = g², so the first step is lr·g/(|g| + ε).
        let mut m = model_with_grad(-3.0);
        Adam::default().step(&mut m, 0.01);
        assert!((first_value(&m) - 1.01).abs() < 1e-6);
    }

    #[test]
    fn bad_hyperparameters_are_refused() {
        assert!(
            Sgd::new(1.0, false, 0.0)
                .unwrap_err()
                .to_string()
                .contains("momentum")
        );
        assert!(Sgd::new(0.0, true, 0.0).is_err());
        assert!(
            Adam::new(0.9, 0.999, 0.0, 0.0)
                .unwrap_err()
                .to_string()
                .contains("eps")
        );
        assert!(
            LrSchedule::Step {
                every: 0,
                gamma: 0.5
            }
            .validate()
            .is_err()
        );
        assert!(
            LrSchedule::Cosine {
                total_steps: 10,
                min_lr: f32::NAN
            }
            .validate()
            .is_err()
        );
    }

    #[test]
    fn schedules() {
        let s = LrSchedule::Step {
            every: 10,
            gamma: 0.5,
        };
        assert_eq!(s.lr(1.0, 9), 1.0);
        assert_eq!(s.lr(1.0, 25), 0.25);
        let c = LrSchedule::Cosine {
            total_steps: 100,
            min_lr: 0.0,
        };
        assert!((c.lr(1.0, 0) - 1.0).abs() < 1e-6);
        assert!((c.lr(1.0, 50) - 0.5).abs() < 1e-6);
        assert!(c.lr(1.0, 200).abs() < 1e-6);
        assert_eq!(LrSchedule::Constant.lr(0.3, 1000), 0.3);
    }
}
