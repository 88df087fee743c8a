//! The p-value of the one-run audit: how likely at least `v` correct guesses out of `r` are
//! under the null hypothesis that the training run is (ε, δ)-DP.
//!
//! # Privacy
//! With `m` canaries each included independently with probability 1/2, `r` non-abstaining
//! guesses and `W` correct ones, an (ε, δ)-DP training run satisfies, for `q = e^ε/(1+e^ε)`,
//!
//! `P[W ≥ v] ≤ P[Bin(r, q) ≥ v] + 2mδ · max_{1 ≤ i ≤ v} P[v − i ≤ Bin(r, q) < v] / i`.
//!
//! # Citations
//! T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training Run",
//! NeurIPS 2023 (arXiv:2305.08846): the main theorem (Theorem 3.1) and the `p_value_DP_audit`
//! routine of their appendix's reference code, which this module follows term by term.
//!
//! # Errors
//! Counts violating `0 ≤ v ≤ r ≤ m`, a negative or non-finite ε and `δ ∉ [0, 1)` are rejected.

use statrs::function::beta::checked_beta_reg;
use statrs::function::factorial::ln_binomial;

use crate::error::{AuditError, Result};
use crate::validate;

/// Checks `0 ≤ v ≤ r ≤ m`.
pub(crate) fn check_counts(m: u64, r: u64, v: u64) -> Result<()> {
    if r > m {
        return Err(AuditError::Invalid(format!(
            "guesses r must be at most the number of canaries m ({m}), got {r}"
        )));
    }
    if v > r {
        return Err(AuditError::Invalid(format!(
            "correct guesses v must be at most the number of guesses r ({r}), got {v}"
        )));
    }
    Ok(())
}

/// Upper bound on `P[W ≥ v]` for an (ε, δ)-DP run (the formula in the module docs), capped
/// at 1.
///
/// # Errors
/// See the module docs.
pub fn p_value(m: u64, r: u64, v: u64, epsilon: f64, delta: f64) -> Result<f64> {
    check_counts(m, r, v)?;
    validate::delta(delta)?;
    if !(epsilon >= 0.0 && epsilon.is_finite()) {
        return Err(AuditError::OutOfRange {
            name: "epsilon",
            range: "[0, ∞)",
            value: epsilon,
        });
    }
    if v == 0 {
        return Ok(1.0);
    }
    // q = e^ε/(1+e^ε) and its logarithms without overflow: ln q = −ln(1+e^−ε),
    // ln(1−q) = −ε − ln(1+e^−ε).
    let ln_q = -(-epsilon).exp().ln_1p();
    let ln_1mq = -epsilon + ln_q;
    let q = ln_q.exp();
    // P[Bin(r, q) ≥ v] = I_q(v, r − v + 1).
    let beta = checked_beta_reg(v as f64, (r - v + 1) as f64, q).map_err(|e| {
        AuditError::Numeric(format!("binomial tail I_{q}({v}, {}): {e}", r - v + 1))
    })?;
    if delta == 0.0 {
        return Ok(beta.min(1.0));
    }
    // α = max_i P[v − i ≤ Bin < v]/i. The partial sums never exceed P[Bin < v] = 1 − β, so
    // once (1 − β)/i ≤ α no later i can win.
    let below = (1.0 - beta).max(0.0);
    let mut ln_pmf = ln_binomial(r, v - 1) + (v - 1) as f64 * ln_q + (r - v + 1) as f64 * ln_1mq;
    let (mut sum, mut alpha) = (0.0_f64, 0.0_f64);
    for i in 1..=v {
        let k = v - i; // this step adds P[Bin = k]
        sum += ln_pmf.exp();
        alpha = alpha.max(sum / i as f64);
        if k == 0 || below / (i as f64) <= alpha {
            break;
        }
        // pmf(k − 1) = pmf(k) · k/(r − k + 1) · (1 − q)/q.
        ln_pmf += (k as f64).ln() - ((r - k + 1) as f64).ln() + ln_1mq - ln_q;
    }
    Ok((beta + 2.0 * m as f64 * delta * alpha).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct transcription with exact pmf sums (no recursion, no early stop).
    fn p_value_direct(m: u64, r: u64, v: u64, eps: f64, delta: f64) -> f64 {
        let q = 1.0 / (1.0 + (-eps).exp());
        let pmf = |k: u64| {
            (ln_binomial(r, k) + k as f64 * q.ln() + (r - k) as f64 * (1.0 - q).ln()).exp()
        };
        let beta: f64 = (v..=r).map(pmf).sum();
        let (mut sum, mut alpha) = (0.0, 0.0f64);
        for i in 1..=v {
            sum += pmf(v - i);
            alpha = alpha.max(sum / i as f64);
        }
        (beta + alpha * delta * 2.0 * m as f64).min(1.0)
    }

    #[test]
    fn matches_the_direct_formula() {
        for &(m, r, v) in &[
            (10u64, 10u64, 9u64),
            (1000, 200, 130),
            (5000, 600, 350),
            (50, 3, 1),
        ] {
            for &eps in &[0.0, 0.3, 1.0, 2.5] {
                for &delta in &[0.0, 1e-5, 1e-3] {
                    let a = p_value(m, r, v, eps, delta).unwrap();
                    let b = p_value_direct(m, r, v, eps, delta);
                    assert!(
                        (a - b).abs() < 1e-10 * b.max(1e-300) + 1e-14,
                        "{m} {r} {v} {eps} {delta}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn zero_epsilon_is_a_fair_coin() {
        // ε = 0, δ = 0: P[Bin(4, 1/2) ≥ 3] = 5/16.
        assert!((p_value(4, 4, 3, 0.0, 0.0).unwrap() - 5.0 / 16.0).abs() < 1e-14);
        assert_eq!(p_value(4, 4, 0, 0.0, 0.0).unwrap(), 1.0);
    }

    #[test]
    fn bad_counts_are_named() {
        assert!(
            p_value(5, 6, 1, 1.0, 0.0)
                .unwrap_err()
                .to_string()
                .contains("got 6")
        );
        assert!(
            p_value(5, 3, 4, 1.0, 0.0)
                .unwrap_err()
                .to_string()
                .contains("got 4")
        );
        assert!(
            p_value(5, 3, 2, f64::NAN, 0.0)
                .unwrap_err()
                .to_string()
                .contains("NaN")
        );
        assert!(
            p_value(5, 3, 2, 1.0, 1.0)
                .unwrap_err()
                .to_string()
                .contains("delta")
        );
    }
}
