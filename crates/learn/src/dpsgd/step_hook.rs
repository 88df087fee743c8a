//! A white-box view of DP-SGD for auditors: a [`StepHook`] sees every private step's clipped
//! gradient sum just before the noise is added, may add synthetic per-record gradients to it
//! (gradient canaries), and sees the noisy sum just after (the step's private release).
//!
//! # Privacy
//! A hook that only adds gradients of L2 norm at most C, each for a synthetic record that it
//! includes in the step with probability q (the step's sampling rate, [`StepContext`]), adds
//! records to the training set as far as DP-SGD's analysis is concerned: every release is
//! still the clipped sum of the (real and synthetic) batch plus N(0, σ²C²) noise, so the
//! accountant's `dp_sgd(σ, q, T)` covers each synthetic record as it covers a real one. What
//! a hook does beyond that (changing the noise) is outside the analysis; the only such hook
//! lives in tests, to check that audits catch a broken trainer.
//!
//! # Citations
//! M. Nasr, J. Hayes, T. Steinke, B. Balle, F. Tramèr, M. Jagielski, N. Carlini, A. Terzis,
//! "Tight Auditing of Differentially Private Machine Learning", USENIX Security 2023
//! (white-box auditor with gradient canaries).

use dpml_mechanisms::DpRng;
use dpml_nn::Sequential;

/// What a hook knows about the step it is called in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepContext {
    /// The step, from 0.
    pub step: u64,
    /// The Poisson sampling rate q of every record.
    pub sampling_rate: f64,
    /// The clipping norm C.
    pub max_grad_norm: f64,
    /// The noise multiplier σ (noise N(0, σ²C²) per coordinate): an auditor's likelihood
    /// ratio test needs it.
    pub noise_multiplier: f64,
}

/// Called once before training, then around the noise of every private step (never on
/// non-private steps). `Send`: a step runs on a thread of the rayon pool.
pub trait StepHook: Send {
    /// Called once on the freshly initialised model before the first step: a hook may set the
    /// initial parameters (an auditor's worst-case initialisation). DP-SGD's guarantee holds
    /// for every initialisation chosen without the private data.
    fn initialise(&mut self, _model: &mut Sequential) {}

    /// The parameters' `grad` buffers hold the clipped gradient sum of the step's batch; the
    /// hook may add to them. `rng` is the training's generator.
    fn before_noise(&mut self, ctx: &StepContext, model: &mut Sequential, rng: &mut DpRng);
    /// The `grad` buffers hold the noisy sum (before the division by the expected batch size
    /// and the optimizer step): the step's release.
    fn after_noise(&mut self, ctx: &StepContext, model: &mut Sequential);
}
