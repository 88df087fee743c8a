//! The one-run audit against Gaussian differential privacy: instead of testing one (ε, δ)
//! pair, test the whole privacy profile of μ-GDP and report the largest μ rejected, with the ε
//! that μ implies at the run's δ.
//!
//! # Privacy
//! A μ-GDP mechanism is (ε, δ_μ(ε))-DP for EVERY ε ≥ 0 (Dong, Roth, Su 2022), so Steinke et
//! al.'s p-value ([`super::p_value`]) holds at each of those pairs and their minimum over ε is
//! still a valid p-value for the null "the run is μ-GDP". The p-value grows with μ, so the
//! largest rejected μ is found by bisection. Trying several `(k₊, k₋)` divides the level among
//! them, as in [`super::audit_sweep`].
//!
//! What this bounds is μ: the run is not μ'-GDP for any μ' ≤ μ̲, with the stated confidence.
//! The ε reported beside it (ε of μ̲-GDP at the run's δ) is a lower bound on the run's ε only
//! for mechanisms whose trade-off curve is Gaussian (a plain Gaussian mechanism, DP-SGD with
//! full batches, approximately DP-SGD with many subsampled steps): it is the f-DP reading of a
//! one-run audit, tighter than the (ε, δ) one because δ no longer enters as a fixed additive
//! slack.
//!
//! # Citations
//! - S. Mahloujifar, L. Melis, K. Chaudhuri, "Auditing f-Differential Privacy in One Run",
//!   2024 (arXiv:2410.22235): the f-DP view of one-run audits. This module is a simpler
//!   variant of theirs (the GDP profile plugged into Steinke et al.'s bound), not their exact
//!   recursive bound, and is at most as tight.
//! - T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training Run",
//!   NeurIPS 2023.
//! - J. Dong, A. Roth, W. Su, "Gaussian differential privacy", JRSS-B 2022.

use dpml_accounting::gdp::{delta_for_epsilon, epsilon_for_delta};

use super::{GuessCounts, guess_counts, p_value};
use crate::error::{AuditError, Result};
use crate::validate;

/// Points of the ε grid over which the p-value is minimised.
const EPSILON_GRID: usize = 48;
/// Bisection steps on μ (the bracket is at most 64 wide: 2⁻²⁶ resolution is ample).
const MU_STEPS: usize = 32;
/// No one-run audit can reject μ this large (p-values at every ε are 1 long before).
const MU_MAX: f64 = 64.0;

/// The outcome of a GDP one-run audit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GdpOneRunResult {
    /// The μ lower bound: the run is not μ'-GDP for μ' ≤ this, with `confidence`.
    pub mu_lower_bound: f64,
    /// ε of `mu_lower_bound`-GDP at `delta`: a lower bound on ε for Gaussian-shaped
    /// trade-off curves (see the module docs).
    pub epsilon_if_gaussian: f64,
    /// The largest μ any outcome could show with these canaries and choices (all correct).
    pub mu_ceiling: f64,
    /// ε of `mu_ceiling` at `delta`.
    pub epsilon_ceiling_if_gaussian: f64,
    /// Guesses of the best choice.
    pub guesses: u64,
    /// Correct guesses of the best choice.
    pub correct: u64,
    /// δ at which ε is read.
    pub delta: f64,
    /// Overall confidence (after the correction for several choices).
    pub confidence: f64,
}

/// The smallest p-value over the GDP profile's (ε, δ_μ(ε)) pairs.
fn p_value_gdp(c: &GuessCounts, mu: f64) -> Result<f64> {
    // Beyond μ²/2 + 8μ the profile's δ is below 1e-15: nothing is gained there.
    let top = mu * mu / 2.0 + 8.0 * mu + 1.0;
    let mut best = 1.0_f64;
    for i in 0..=EPSILON_GRID {
        let eps = top * i as f64 / EPSILON_GRID as f64;
        let delta = delta_for_epsilon(mu, eps)
            .map_err(|e| AuditError::Numeric(format!("GDP profile at mu {mu}: {e}")))?
            .min(1.0 - 1e-12);
        best = best.min(p_value(c.m, c.r, c.v, eps, delta)?);
    }
    Ok(best)
}

/// The largest μ rejected at `level` (0 when even μ = 0 is not).
fn mu_at_level(c: &GuessCounts, level: f64) -> Result<f64> {
    let rejected = |mu: f64| p_value_gdp(c, mu).map(|p| p < level);
    if !rejected(0.0)? {
        return Ok(0.0);
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while rejected(hi)? {
        lo = hi;
        hi *= 2.0;
        if hi > MU_MAX {
            return Err(AuditError::Numeric(format!(
                "GDP one-run bound: mu {hi} still rejected"
            )));
        }
    }
    for _ in 0..MU_STEPS {
        let mid = 0.5 * (lo + hi);
        if rejected(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

fn epsilon_of(mu: f64, delta: f64) -> Result<f64> {
    if mu == 0.0 {
        return Ok(0.0);
    }
    epsilon_for_delta(mu, delta).map_err(|e| AuditError::Invalid(e.to_string()))
}

/// Audits one run against μ-GDP from canary scores and inclusion bits, trying each `(k₊, k₋)`
/// of `choices` at level `(1 − confidence)/choices.len()` and keeping the best.
///
/// # Errors
/// As [`super::audit_sweep`]; δ must be in (0, 1) (ε of a GDP mechanism at δ = 0 is ∞).
pub fn audit_sweep_gdp(
    scores: &[f64],
    included: &[bool],
    choices: &[(usize, usize)],
    delta: f64,
    confidence: f64,
) -> Result<GdpOneRunResult> {
    validate::open_unit("delta", delta)?;
    let counts = guess_counts(scores, included, choices, delta, confidence)?;
    let level = (1.0 - confidence) / counts.len() as f64;
    let mut best: Option<(f64, GuessCounts)> = None;
    let mut ceiling = 0.0_f64;
    for c in counts {
        let mu = mu_at_level(&c, level)?;
        if best.is_none_or(|(b, _)| mu > b) {
            best = Some((mu, c));
        }
        ceiling = ceiling.max(mu_at_level(&GuessCounts { v: c.r, ..c }, level)?);
    }
    let (mu, c) = best.ok_or_else(|| AuditError::Numeric("GDP sweep produced no result".into()))?;
    Ok(GdpOneRunResult {
        mu_lower_bound: mu,
        epsilon_if_gaussian: epsilon_of(mu, delta)?,
        mu_ceiling: ceiling,
        epsilon_ceiling_if_gaussian: epsilon_of(ceiling, delta)?,
        guesses: c.r,
        correct: c.v,
        delta,
        confidence,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdp_bound_is_at_least_the_epsilon_delta_bound_on_strong_evidence() {
        // 1000 canaries, 100 guesses all correct: the (ε, δ) audit at δ = 1e-5 pays 2mδ;
        // the GDP audit reads the same evidence through the whole profile.
        let scores: Vec<f64> = (0..1000).map(f64::from).collect();
        let included: Vec<bool> = (0..1000).map(|i| i >= 500).collect();
        let choices = [(50, 50)];
        let plain = super::super::audit_sweep(&scores, &included, &choices, 1e-5, 0.95).unwrap();
        let gdp = audit_sweep_gdp(&scores, &included, &choices, 1e-5, 0.95).unwrap();
        assert!(gdp.mu_lower_bound > 0.0);
        assert!(
            gdp.epsilon_if_gaussian >= plain.epsilon,
            "{gdp:?} {plain:?}"
        );
        assert!(gdp.mu_ceiling >= gdp.mu_lower_bound);
    }

    #[test]
    fn random_guesses_reject_nothing() {
        let scores: Vec<f64> = (0..400).map(|i| f64::from((i * 37) % 400)).collect();
        let included: Vec<bool> = (0..400).map(|i| i % 2 == 0).collect();
        let gdp = audit_sweep_gdp(&scores, &included, &[(100, 100)], 1e-5, 0.95).unwrap();
        assert!(gdp.mu_lower_bound < 0.1, "{gdp:?}");
    }

    #[test]
    fn zero_delta_is_named() {
        let e = audit_sweep_gdp(&[1.0, 0.0], &[true, false], &[(1, 1)], 0.0, 0.95).unwrap_err();
        assert!(e.to_string().contains("delta"), "{e}");
    }
}
