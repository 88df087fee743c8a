//! The one-run audit of Steinke, Nasr and Jagielski (2023): insert `m` canaries, each included
//! independently with probability 1/2, train once, score the canaries, guess "in" for the
//! `k₊` highest scores and "out" for the `k₋` lowest (abstaining on the rest), and turn the
//! number of correct guesses into a lower bound on ε.
//!
//! # Privacy
//! The bound is the largest ε (to 1e-6, rounded down) whose p-value ([`p_value`]) is below
//! `1 − confidence`: observing this many correct guesses would have probability at most
//! `1 − confidence` if the run were (ε, δ)-DP, so with that confidence it is not. Found by
//! bisection (the p-value grows with ε). Trying several `(k₊, k₋)` and keeping the best is
//! only valid with a correction: [`audit_sweep`] divides `1 − confidence` among the tries.
//!
//! # Citations
//! T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training Run",
//! NeurIPS 2023 (arXiv:2305.08846), Theorem 3.1 and the reference code of their appendix.
//!
//! # Errors
//! Empty or non-finite scores, inclusion bits of another length, no guesses or more guesses
//! than canaries, more than [`MAX_CANARIES`] canaries, `δ ∉ [0, 1)` and `confidence ∉ (0, 1)` are rejected with named values.

mod canaries;
pub mod gdp_profile;
mod p_value;

pub use canaries::CanaryPlan;
pub use p_value::{MAX_CANARIES, p_value};

use crate::error::{AuditError, Result};
use crate::validate;

/// Bisection stops when the bracket on ε is narrower than this.
const EPSILON_TOLERANCE: f64 = 1e-6;

/// The outcome of a one-run audit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct OneRunResult {
    /// Number of canaries `m`.
    pub canaries: u64,
    /// Guesses made `r = k₊ + k₋` (abstentions excluded).
    pub guesses: u64,
    /// Correct guesses `v`.
    pub correct: u64,
    /// "In" guesses `k₊`.
    pub k_plus: u64,
    /// "Out" guesses `k₋`.
    pub k_minus: u64,
    /// The ε lower bound, holding with the stated confidence.
    pub epsilon: f64,
    /// δ of the null hypothesis.
    pub delta: f64,
    /// The confidence of the bound (after any correction for several tries, the overall one).
    pub confidence: f64,
}

/// The largest ε such that `v` correct out of `r` guesses on `m` canaries still has p-value
/// `< 1 − confidence` under (ε, δ)-DP; 0 when even ε = 0 cannot be rejected.
///
/// # Errors
/// See the module docs.
pub fn epsilon_lower_bound(m: u64, r: u64, v: u64, delta: f64, confidence: f64) -> Result<f64> {
    validate::confidence(confidence)?;
    epsilon_at_level(m, r, v, delta, 1.0 - confidence)
}

pub(crate) fn epsilon_at_level(m: u64, r: u64, v: u64, delta: f64, level: f64) -> Result<f64> {
    let rejected = |eps: f64| p_value(m, r, v, eps, delta).map(|p| p < level);
    if !rejected(0.0)? {
        return Ok(0.0);
    }
    // Invariant: ε = lo is rejected, ε = hi is not. For ε ≥ 40, q rounds to 1 and the p-value
    // is 1, so the doubling ends by then.
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while rejected(hi)? {
        lo = hi;
        hi *= 2.0;
    }
    while hi - lo > EPSILON_TOLERANCE {
        let mid = 0.5 * (lo + hi);
        if rejected(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Audits one run from canary scores (higher = more likely included) and the true inclusion
/// bits: guesses "in" for the `k_plus` highest and "out" for the `k_minus` lowest scores
/// (ties broken by position, which does not depend on inclusion), then bounds ε.
///
/// # Errors
/// See the module docs.
pub fn audit(
    scores: &[f64],
    included: &[bool],
    k_plus: usize,
    k_minus: usize,
    delta: f64,
    confidence: f64,
) -> Result<OneRunResult> {
    audit_sweep(scores, included, &[(k_plus, k_minus)], delta, confidence)
}

/// Audits with each `(k₊, k₋)` in `choices` and returns the best bound, each tried at level
/// `(1 − confidence) / choices.len()` so the best holds with `confidence` overall (union bound).
///
/// # Errors
/// See the module docs; also an empty `choices`.
pub fn audit_sweep(
    scores: &[f64],
    included: &[bool],
    choices: &[(usize, usize)],
    delta: f64,
    confidence: f64,
) -> Result<OneRunResult> {
    let level = (1.0 - confidence) / choices.len().max(1) as f64;
    let mut best: Option<OneRunResult> = None;
    for c in guess_counts(scores, included, choices, delta, confidence)? {
        let epsilon = epsilon_at_level(c.m, c.r, c.v, delta, level)?;
        let result = OneRunResult {
            canaries: c.m,
            guesses: c.r,
            correct: c.v,
            k_plus: c.k_plus,
            k_minus: c.k_minus,
            epsilon,
            delta,
            confidence,
        };
        if best.is_none_or(|b| result.epsilon > b.epsilon) {
            best = Some(result);
        }
    }
    best.ok_or_else(|| AuditError::Numeric("one-run sweep produced no result".into()))
}

/// The guesses of one `(k₊, k₋)` choice: `r` guesses of which `v` are correct, on `m`
/// canaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GuessCounts {
    pub m: u64,
    pub r: u64,
    pub v: u64,
    pub k_plus: u64,
    pub k_minus: u64,
}

/// Checks the inputs of a sweep and counts the correct guesses of every choice: "in" for the
/// `k₊` highest scores, "out" for the `k₋` lowest (ties broken by position, which does not
/// depend on inclusion).
pub(crate) fn guess_counts(
    scores: &[f64],
    included: &[bool],
    choices: &[(usize, usize)],
    delta: f64,
    confidence: f64,
) -> Result<Vec<GuessCounts>> {
    validate::finite_nonempty("canary scores", scores)?;
    validate::delta(delta)?;
    validate::confidence(confidence)?;
    let m = scores.len();
    if included.len() != m {
        return Err(AuditError::Invalid(format!(
            "inclusion bits must match the canary scores ({m}), got {}",
            included.len()
        )));
    }
    if choices.is_empty() {
        return Err(AuditError::Invalid(
            "choices is empty: give at least one (k+, k-)".into(),
        ));
    }
    // Canaries by decreasing score; the stable sort keeps ties in position order.
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    choices
        .iter()
        .map(|&(k_plus, k_minus)| {
            let r = k_plus
                .checked_add(k_minus)
                .filter(|&r| r >= 1 && r <= m)
                .ok_or_else(|| {
                    AuditError::Invalid(format!(
                        "guesses k+ + k- must be between 1 and the number of canaries ({m}), \
                         got {k_plus} + {k_minus}"
                    ))
                })?;
            let hits_in = order[..k_plus].iter().filter(|&&i| included[i]).count();
            let hits_out = order[m - k_minus..]
                .iter()
                .filter(|&&i| !included[i])
                .count();
            Ok(GuessCounts {
                m: m as u64,
                r: r as u64,
                v: (hits_in + hits_out) as u64,
                k_plus: k_plus as u64,
                k_minus: k_minus as u64,
            })
        })
        .collect()
}

/// The largest bound any outcome of `choices` could give on `m` canaries (every guess
/// correct), at the per-choice level of [`audit_sweep`]: no audit with this many canaries can
/// show more, whatever the mechanism.
///
/// # Errors
/// As [`audit_sweep`].
pub fn ceiling(m: usize, choices: &[(usize, usize)], delta: f64, confidence: f64) -> Result<f64> {
    validate::delta(delta)?;
    validate::confidence(confidence)?;
    let level = (1.0 - confidence) / choices.len().max(1) as f64;
    choices.iter().try_fold(0.0_f64, |best, &(kp, km)| {
        let r = (kp + km) as u64;
        Ok(best.max(epsilon_at_level(m as u64, r, r, delta, level)?))
    })
}

/// Symmetric guess choices for a sweep: `k₊ = k₋ = ⌈f·m/2⌉` for each fraction `f` of the
/// canaries guessed, duplicates dropped.
pub fn symmetric_choices(m: usize, fractions: &[f64]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = fractions
        .iter()
        .map(|&f| {
            let k = ((f * m as f64 / 2.0).ceil() as usize).clamp(1, (m / 2).max(1));
            (k, k.min(m - k))
        })
        .filter(|&(a, b)| a + b >= 1)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpml_mechanisms::DpRng;

    #[test]
    fn all_correct_matches_the_closed_form() {
        // δ = 0, v = r: p-value = q^r, so the bound solves q^r = 0.05: q = 0.05^(1/r),
        // ε = ln(q/(1−q)). For r = 100 that is 3.4930.
        let eps = epsilon_lower_bound(1000, 100, 100, 0.0, 0.95).unwrap();
        let q = 0.05f64.powf(1.0 / 100.0);
        assert!((eps - (q / (1.0 - q)).ln()).abs() < 2e-6, "{eps}");
    }

    #[test]
    fn perfect_guesses_give_a_positive_bound_that_grows_with_m() {
        // Scores that reveal inclusion exactly: guess all m, all correct.
        let mut rng = DpRng::seeded(9);
        let mut last = 0.0;
        for &m in &[50usize, 200, 1000, 5000] {
            let plan = CanaryPlan::draw(m, m, &mut rng).unwrap();
            let scores: Vec<f64> = plan
                .included
                .iter()
                .map(|&b| if b { 1.0 } else { 0.0 })
                .collect();
            let k_plus = plan.included.iter().filter(|&&b| b).count();
            let res = audit(&scores, &plan.included, k_plus, m - k_plus, 1e-5, 0.95).unwrap();
            assert_eq!(res.correct, m as u64);
            assert!(res.epsilon > 2.0 && res.epsilon > last, "m={m}: {res:?}");
            last = res.epsilon;
        }
    }

    #[test]
    fn random_guesses_give_about_zero() {
        // Scores independent of inclusion: v ~ Bin(r, 1/2). Even a 4-sd excess (probability
        // 3e-5) at r = 1000, v = 563, only supports ε with P[Bin(1000, q) ≥ 563] < 5%, i.e.
        // q < 0.563 − 1.645·0.0157 ≈ 0.537, ε < ln(0.537/0.463) ≈ 0.148.
        let mut rng = DpRng::seeded(4);
        for _ in 0..5 {
            let plan = CanaryPlan::draw(1000, 1000, &mut rng).unwrap();
            let scores: Vec<f64> = (0..1000).map(|_| rng.uniform_f64()).collect();
            let res = audit(&scores, &plan.included, 500, 500, 1e-5, 0.95).unwrap();
            assert!(res.epsilon < 0.15, "{res:?}");
        }
    }

    #[test]
    fn delta_and_sweeps_only_lower_the_bound() {
        let a = epsilon_lower_bound(1000, 200, 190, 0.0, 0.95).unwrap();
        let b = epsilon_lower_bound(1000, 200, 190, 1e-4, 0.95).unwrap();
        assert!(b < a && b > 0.0, "{a} {b}");
        // A sweep over 4 choices pays for them: each runs at level 0.05/4.
        let scores: Vec<f64> = (0..100).map(|i| i as f64).collect();
        let included: Vec<bool> = (0..100).map(|i| i >= 50).collect();
        let one = audit(&scores, &included, 30, 30, 0.0, 0.95).unwrap();
        let sweep = audit_sweep(
            &scores,
            &included,
            &[(30, 30), (10, 10), (5, 5), (1, 1)],
            0.0,
            0.95,
        )
        .unwrap();
        assert_eq!((sweep.k_plus, sweep.correct), (30, 60));
        assert!(sweep.epsilon < one.epsilon);
    }

    #[test]
    fn huge_counts_return_or_are_refused() {
        // Each p-value walks O(√m) terms: m = 10⁹ (the most accepted) takes tens of ms, and
        // the old O(m) sums ran for minutes. δ = 0, v = r: q^r = 0.05 as above.
        let n = MAX_CANARIES;
        let eps = epsilon_lower_bound(n, n, n, 0.0, 0.95).unwrap();
        let q = 0.05f64.powf(1.0 / n as f64);
        assert!((eps - (q / (1.0 - q)).ln()).abs() < 1e-4, "{eps}");
        let with_delta = epsilon_lower_bound(n, n, n, 1e-5, 0.95).unwrap();
        assert!(with_delta > 0.0 && with_delta <= eps, "{with_delta} {eps}");
        // Near the median, where the sums are longest.
        let near = epsilon_lower_bound(n, n, n / 2 + 100_000, 0.0, 0.95).unwrap();
        assert!(near > 0.0 && near < 0.01, "{near}");
        let e = epsilon_lower_bound(1 << 63, 1 << 63, 1 << 63, 1e-5, 0.95).unwrap_err();
        assert!(e.to_string().contains("got 9223372036854775808"), "{e}");
    }

    #[test]
    fn bad_input_is_named() {
        let e = audit(&[1.0, 2.0], &[true], 1, 0, 0.0, 0.95).unwrap_err();
        assert!(e.to_string().contains("got 1"), "{e}");
        let e = audit(&[1.0, 2.0], &[true, false], 2, 1, 0.0, 0.95).unwrap_err();
        assert!(e.to_string().contains("got 2 + 1"), "{e}");
        let e = audit(&[1.0, 2.0], &[true, false], 0, 0, 0.0, 0.95).unwrap_err();
        assert!(e.to_string().contains("got 0 + 0"), "{e}");
        let e = audit(&[f64::NAN, 2.0], &[true, false], 1, 1, 0.0, 0.95).unwrap_err();
        assert!(e.to_string().contains("canary scores[0]"), "{e}");
        assert!(audit(&[], &[], 1, 0, 0.0, 0.95).is_err());
        assert!(
            epsilon_lower_bound(10, 5, 5, 0.0, 1.5)
                .unwrap_err()
                .to_string()
                .contains("1.5")
        );
    }
}
