//! The white-box gradient-canary audit of DP-SGD (`dpml audit --attack gradient-canary`):
//! train once with m Dirac canaries ([`canaries`]), each included with probability 1/2, watch
//! every step's noisy gradient sum, score each canary by the likelihood ratio of its
//! coordinate's observations over the steps (or their plain sum, [`lr_score`]), and report
//!
//! - the one-run lower bound on ε of Steinke, Nasr, Jagielski (2023) with the ceiling that m
//!   canaries allow ([`crate::one_run`]),
//! - its GDP reading (a μ lower bound, [`crate::one_run::gdp_profile`], after Mahloujifar et
//!   al. 2024), and
//! - a Gaussian-DP ESTIMATE μ̂ from the member and non-member scores ([`gdp_estimate`],
//!   Nasr et al. 2023), converted to ε at the run's δ: an estimate, not a bound.
//!
//! # Privacy
//! The bounds hold with the stated confidence for any training run that is (ε, δ)-DP (resp.
//! μ-GDP) with respect to each canary; the accountant's ε covers each canary (see
//! [`canaries`]), so a bound above it is evidence of a bug. The estimate has no such status.
//!
//! # Citations
//! M. Nasr et al., "Tight Auditing of Differentially Private Machine Learning", USENIX
//! Security 2023; T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training
//! Run", NeurIPS 2023; S. Mahloujifar, L. Melis, K. Chaudhuri, "Auditing f-Differential
//! Privacy in One Run", 2024.

pub mod canaries;
pub mod gdp_bound;
pub mod gdp_estimate;
pub mod lr_score;

use dpml_accounting::gdp::{mu_for, mu_poisson};
use dpml_data::Dataset;
use dpml_learn::dpsgd::{Progress, StepHook, TrainConfig, TrainOutcome, train_hooked};
use dpml_mechanisms::DpRng;
use serde::Serialize;

pub use canaries::DiracCanaries;
pub use gdp_bound::{GdpThresholdBound, gdp_threshold_bound};
pub use gdp_estimate::{GdpEstimate, estimate};
pub use lr_score::CanaryScore;

use crate::driver::DriverError;
use crate::one_run::gdp_profile::{GdpOneRunResult, audit_sweep_gdp};
use crate::one_run::{OneRunResult, audit_sweep, ceiling, symmetric_choices};
use crate::sampling;

/// Fractions of the canaries guessed in the one-run sweeps (half "in", half "out").
pub const GUESS_FRACTIONS: [f64; 5] = [0.02, 0.05, 0.1, 0.2, 0.5];
/// Two-sided confidence of the GDP estimate's interval.
pub const ESTIMATE_INTERVAL_CONFIDENCE: f64 = 0.95;

type Result<T> = std::result::Result<T, DriverError>;

/// What the canary scores show: the bounds and the estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreAudit {
    /// Steinke et al.'s (ε, δ) lower bound (best over [`GUESS_FRACTIONS`], union-bounded).
    pub one_run: OneRunResult,
    /// The most that bound could show with these canaries (every guess right).
    pub one_run_ceiling: f64,
    /// The GDP (f-DP) reading of the same guesses: a μ lower bound and its ε if Gaussian.
    pub one_run_gdp: GdpOneRunResult,
    /// The Clopper–Pearson μ lower bound from the canaries as independent trials.
    pub gdp_threshold_bound: GdpThresholdBound,
    /// The GDP estimate from the score distributions (NOT a bound).
    pub gdp_estimate: GdpEstimate,
}

/// Audits canary `scores` with inclusion bits `included` at `delta` and `confidence`.
///
/// # Errors
/// As [`audit_sweep`], [`audit_sweep_gdp`] and [`estimate`] (fewer than 2 canaries in or out).
pub fn audit_scores(
    scores: &[f64],
    included: &[bool],
    delta: f64,
    confidence: f64,
) -> Result<ScoreAudit> {
    let choices = symmetric_choices(scores.len(), &GUESS_FRACTIONS);
    let group = |want: bool| -> Vec<f64> {
        scores
            .iter()
            .zip(included)
            .filter(|&(_, &inc)| inc == want)
            .map(|(&s, _)| s)
            .collect()
    };
    Ok(ScoreAudit {
        one_run: audit_sweep(scores, included, &choices, delta, confidence)?,
        one_run_ceiling: ceiling(scores.len(), &choices, delta, confidence)?,
        one_run_gdp: audit_sweep_gdp(scores, included, &choices, delta, confidence)?,
        gdp_threshold_bound: gdp_threshold_bound(scores, included, delta, confidence)?,
        gdp_estimate: estimate(
            &group(true),
            &group(false),
            delta,
            ESTIMATE_INTERVAL_CONFIDENCE,
        )?,
    })
}

/// The settings of a gradient-canary audit.
#[derive(Debug, Clone, PartialEq)]
pub struct GradientCanaryConfig {
    /// The DP-SGD recipe (must be private).
    pub recipe: TrainConfig,
    /// Canaries m (at least 4, at most the training records and the model's parameters).
    pub canaries: usize,
    /// Confidence of the lower bounds.
    pub confidence: f64,
    /// How each canary is scored from its observations.
    pub score: CanaryScore,
}

/// The accountant's side, in the units the audit reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccountantView {
    /// ε at `delta` (the trainer's accountant, PLD by default).
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// The μ whose GDP curve has this ε at δ (the GDP equivalent of the accountant's claim).
    pub mu_at_epsilon: f64,
    /// The CLT μ of the run, q·√(T(e^{1/σ²} − 1)) (Bu et al. 2020): what the
    /// likelihood-ratio score's estimate approaches when the CLT holds.
    pub mu_clt: f64,
    /// What the summed Dirac score can show for a perfect implementation: q·√T/σ (the score
    /// is C·Bin(T, q) + N(0, Tσ²C²) in and N(0, Tσ²C²) out; equal to the CLT μ as σ grows,
    /// below it for small σ, where summing is not the optimal test).
    pub mu_of_summed_score: f64,
    /// σ.
    pub noise_multiplier: f64,
    /// q.
    pub sampling_rate: f64,
    /// T.
    pub steps: u64,
}

/// The outcome of a gradient-canary audit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GradientCanaryReport {
    /// Canaries m.
    pub canaries: usize,
    /// Canaries included in training.
    pub included: usize,
    /// The statistic the canaries were scored by.
    pub score: CanaryScore,
    /// Real training records.
    pub records: usize,
    /// The accountant's claim.
    pub accountant: AccountantView,
    /// The bounds and the estimate.
    #[serde(flatten)]
    pub audit: ScoreAudit,
    /// Whether the one-run (ε, δ) bound stays at or below the accountant's ε.
    pub consistent: bool,
    /// Test accuracy of the trained model, when a test set was given (diagnostic).
    pub test_accuracy: Option<f64>,
}

/// Checks the settings against the training data; returns the model's parameter count.
///
/// # Errors
/// [`DriverError::Invalid`] naming the value: a non-private recipe, fewer than 4 canaries,
/// more canaries than training records or than model parameters, a confidence outside (0, 1);
/// the trainer's own refusals.
pub fn validate(cfg: &GradientCanaryConfig, data: &Dataset) -> Result<usize> {
    let bad = |m: String| Err(DriverError::Invalid(m));
    if cfg.canaries < 4 {
        return bad(format!(
            "canaries must be at least 4, got {} (the GDP estimate needs 2 in and 2 out)",
            cfg.canaries
        ));
    }
    if cfg.canaries > data.n {
        return bad(format!(
            "canaries must be at most the training records ({}), got {}",
            data.n, cfg.canaries
        ));
    }
    if !(cfg.confidence > 0.0 && cfg.confidence < 1.0) {
        return bad(format!(
            "confidence must be in (0, 1), got {}",
            cfg.confidence
        ));
    }
    if matches!(cfg.recipe.privacy, dpml_learn::dpsgd::Privacy::NonPrivate) {
        return bad(
            "attack \"gradient-canary\" audits DP-SGD: give --epsilon or --noise-multiplier".into(),
        );
    }
    cfg.recipe.validate()?;
    let params = cfg
        .recipe
        .validate_data(data, None)?
        .check()
        .map_err(dpml_learn::dpsgd::DpSgdError::from)?
        .num_params();
    if cfg.canaries > params {
        return bad(format!(
            "canaries must be at most the model's parameters ({params}: one coordinate each), got {}",
            cfg.canaries
        ));
    }
    Ok(params)
}

/// Draws the canaries: distinct coordinates among `params` and fair inclusion coins.
///
/// # Errors
/// As [`validate`].
pub fn plan(cfg: &GradientCanaryConfig, data: &Dataset, rng: &mut DpRng) -> Result<DiracCanaries> {
    let params = validate(cfg, data)?;
    let mut coords: Vec<usize> = (0..params).collect();
    sampling::shuffle(&mut coords, rng);
    coords.truncate(cfg.canaries);
    let included = (0..cfg.canaries).map(|_| rng.below(2) == 1).collect();
    Ok(DiracCanaries::new(coords, included, cfg.score))
}

/// Trains with `hook` (the canaries, or a test's wrapper around them) and the given progress
/// observer.
///
/// # Errors
/// The trainer's.
pub fn train_with(
    cfg: &GradientCanaryConfig,
    data: &Dataset,
    test: Option<&Dataset>,
    rng: &mut DpRng,
    progress: &mut dyn FnMut(&Progress),
    hook: &mut dyn StepHook,
) -> Result<TrainOutcome> {
    Ok(train_hooked(&cfg.recipe, data, test, rng, progress, hook)?)
}

/// Audits the canaries' scores after `outcome`'s training and compares with its accountant.
///
/// # Errors
/// [`DriverError::Invalid`] when the run had no private step or no accounted ε; the scoring
/// errors of [`audit_scores`].
pub fn finish(
    cfg: &GradientCanaryConfig,
    data: &Dataset,
    canaries: &DiracCanaries,
    outcome: &TrainOutcome,
) -> Result<GradientCanaryReport> {
    let report = &outcome.report;
    let (Some(epsilon), Some(sigma)) = (report.epsilon, report.noise_multiplier) else {
        return Err(DriverError::Invalid(
            "the run has no accounted epsilon: the gradient-canary audit needs DP-SGD".into(),
        ));
    };
    let delta = cfg.recipe.delta;
    let q = report.sampling_rate;
    let steps = report.steps;
    let audit = audit_scores(
        canaries.scores(),
        canaries.included(),
        delta,
        cfg.confidence,
    )?;
    let accountant = AccountantView {
        epsilon,
        delta,
        mu_at_epsilon: mu_for(epsilon, delta)?,
        mu_clt: mu_poisson(q, sigma, steps)?,
        mu_of_summed_score: q * (steps as f64).sqrt() / sigma,
        noise_multiplier: sigma,
        sampling_rate: q,
        steps,
    };
    // Only Steinke et al.'s bound holds for every (ε, δ)-DP run; the GDP readings bound ε
    // only for Gaussian-shaped trade-off curves, so they are reported, not enforced.
    let consistent = audit.one_run.epsilon <= epsilon;
    Ok(GradientCanaryReport {
        canaries: cfg.canaries,
        included: canaries.included().iter().filter(|&&b| b).count(),
        score: canaries.score(),
        records: data.n,
        accountant,
        audit,
        consistent,
        test_accuracy: report.test_accuracy,
    })
}

/// Plans, trains and audits (see the module docs).
///
/// # Errors
/// As [`plan`], [`train_with`] and [`finish`].
pub fn run_gradient_canary_audit(
    cfg: &GradientCanaryConfig,
    data: &Dataset,
    test: Option<&Dataset>,
    rng: &mut DpRng,
    progress: &mut dyn FnMut(&Progress),
) -> Result<GradientCanaryReport> {
    let mut canaries = plan(cfg, data, rng)?;
    let outcome = train_with(cfg, data, test, rng, progress, &mut canaries)?;
    finish(cfg, data, &canaries, &outcome)
}

#[cfg(test)]
mod tests;
