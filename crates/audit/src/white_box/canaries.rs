//! Dirac gradient canaries (Nasr et al. 2023): canary i is a synthetic record whose clipped
//! gradient is +C on one parameter coordinate cᵢ and 0 elsewhere (all coordinates distinct).
//! Each canary is in the training set with probability 1/2 (drawn before training); an
//! included canary joins each step's batch with the step's sampling rate q, exactly like a
//! real record under Poisson sampling, and then adds C to coordinate cᵢ of the clipped sum.
//!
//! The white-box auditor sees every step's noisy sum. Its observation of canary i at step t
//! is x_t = (noisy_t\[cᵢ\] − data_t\[cᵢ\]) / C, where data_t is the clipped sum of the real
//! records: subtracting it is what an adversary that chooses the data set (records with zero
//! gradient at the canaries' coordinates) would see, so x_t = 1[i sampled at t] + N(0, σ²).
//! Both scores of [`super::lr_score`] are accumulated: the sum Σ_t x_t and the
//! likelihood-ratio score; [`DiracCanaries::scores`] returns the one chosen.
//!
//! # Privacy
//! Each canary is one record under add/remove adjacency: L2 norm C, Poisson sampling with the
//! step's q, so the accountant's `dp_sgd(σ, q, T)` covers it (see
//! [`dpml_learn::dpsgd::step_hook`]). The scores of different canaries use different
//! coordinates, so they are independent given the inclusion bits.

use dpml_learn::dpsgd::{StepContext, StepHook};
use dpml_mechanisms::DpRng;
use dpml_nn::Sequential;

use super::lr_score::{CanaryScore, step_log_ratio};

/// The hook that inserts the canaries and accumulates their scores.
#[derive(Debug, Clone)]
pub struct DiracCanaries {
    /// Flat parameter coordinate of each canary (in [`Sequential::params`] order).
    coords: Vec<usize>,
    /// (parameter index, offset) of each coordinate, resolved on the first step.
    located: Vec<(usize, usize)>,
    /// Whether each canary is in the training set.
    included: Vec<bool>,
    /// The real records' clipped sum at each coordinate in the current step.
    data_sum: Vec<f64>,
    /// Σ over steps of x_t = (noisy − data) / C.
    sums: Vec<f64>,
    /// Σ over steps of the log-likelihood ratio of x_t.
    log_ratios: Vec<f64>,
    /// Which of the two [`Self::scores`] returns.
    score: CanaryScore,
    /// Steps observed.
    steps: u64,
}

impl DiracCanaries {
    /// Canaries on the distinct flat coordinates `coords` with inclusion bits `included`
    /// (same length; the caller checks both), scored by `score`.
    pub fn new(coords: Vec<usize>, included: Vec<bool>, score: CanaryScore) -> Self {
        let m = coords.len();
        Self {
            coords,
            located: Vec::new(),
            included,
            data_sum: vec![0.0; m],
            sums: vec![0.0; m],
            log_ratios: vec![0.0; m],
            score,
            steps: 0,
        }
    }

    /// The canaries' scores by the chosen statistic (higher = more likely included).
    pub fn scores(&self) -> &[f64] {
        self.scores_by(self.score)
    }

    /// The canaries' scores by `score`.
    pub fn scores_by(&self, score: CanaryScore) -> &[f64] {
        match score {
            CanaryScore::LikelihoodRatio => &self.log_ratios,
            CanaryScore::Sum => &self.sums,
        }
    }

    /// The statistic [`Self::scores`] returns.
    pub fn score(&self) -> CanaryScore {
        self.score
    }

    /// The inclusion bits.
    pub fn included(&self) -> &[bool] {
        &self.included
    }

    /// Private steps observed.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    fn locate(&mut self, model: &Sequential) {
        if !self.located.is_empty() {
            return;
        }
        let mut starts = Vec::new();
        let mut total = 0usize;
        for p in model.params() {
            starts.push(total);
            total += p.len();
        }
        self.located = self
            .coords
            .iter()
            .map(|&c| {
                let k = starts.partition_point(|&s| s <= c) - 1;
                (k, c - starts[k])
            })
            .collect();
    }

    /// Calls `f(canary, value)` with a mutable reference to each canary's gradient entry.
    fn for_each_entry(&self, model: &mut Sequential, mut f: impl FnMut(usize, &mut f32)) {
        let mut params = model.params_mut();
        for (i, &(k, off)) in self.located.iter().enumerate() {
            f(i, &mut params[k].grad[off]);
        }
    }
}

impl StepHook for DiracCanaries {
    fn before_noise(&mut self, ctx: &StepContext, model: &mut Sequential, rng: &mut DpRng) {
        self.locate(model);
        let c = ctx.max_grad_norm as f32;
        let q = ctx.sampling_rate;
        let mut data_sum = std::mem::take(&mut self.data_sum);
        let included = &self.included;
        self.for_each_entry(model, |i, g| {
            data_sum[i] = f64::from(*g);
            // The canary's own Poisson draw, as for every real record.
            if included[i] && rng.uniform_f64() < q {
                *g += c;
            }
        });
        self.data_sum = data_sum;
    }

    fn after_noise(&mut self, ctx: &StepContext, model: &mut Sequential) {
        let (c, q, sigma) = (ctx.max_grad_norm, ctx.sampling_rate, ctx.noise_multiplier);
        let mut sums = std::mem::take(&mut self.sums);
        let mut log_ratios = std::mem::take(&mut self.log_ratios);
        let data_sum = &self.data_sum;
        self.for_each_entry(model, |i, g| {
            let x = (f64::from(*g) - data_sum[i]) / c;
            sums[i] += x;
            log_ratios[i] += step_log_ratio(x, q, sigma);
        });
        self.sums = sums;
        self.log_ratios = log_ratios;
        self.steps += 1;
    }
}
