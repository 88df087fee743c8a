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
//! Counts violating `0 ≤ v ≤ r ≤ m ≤` [`MAX_CANARIES`], a negative or non-finite ε and
//! `δ ∉ [0, 1)` are rejected.

use statrs::function::gamma::ln_gamma;

use crate::error::{AuditError, Result};
use crate::validate;

/// The most canaries accepted. The binomial sums below walk the `O(√m)` terms that carry the
/// probability (about 10⁶ steps per p-value at this size, some 40 p-values per bound), so a
/// larger count would run for minutes; no data set gives this many canaries.
pub const MAX_CANARIES: u64 = 1_000_000_000;

/// A sum stops once its next term is below this fraction of it: beyond double precision.
const NEGLIGIBLE: f64 = 1e-18;

/// Terms of `α` below `e^−SKIP` times the largest pmf are skipped (counted as 0): even
/// `MAX_CANARIES` of them change `α` by less than `10⁹·e^−100 ≈ 4e-35` of itself.
const SKIP: f64 = 100.0;

/// Checks `0 ≤ v ≤ r ≤ m ≤ MAX_CANARIES`.
pub(crate) fn check_counts(m: u64, r: u64, v: u64) -> Result<()> {
    if m > MAX_CANARIES {
        return Err(AuditError::Invalid(format!(
            "canaries m must be at most {MAX_CANARIES}, got {m}"
        )));
    }
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

/// The pmf of `Bin(r, q)`, in logarithms: `ln_q = ln q`, `ln_1mq = ln(1 − q)`.
struct Binomial {
    r: u64,
    ln_q: f64,
    ln_1mq: f64,
    /// `(1 − q)/q = e^−ε`, for the ratio of neighbouring terms.
    odds: f64,
    /// A most likely count, `⌊(r + 1)q⌋`.
    mode: u64,
}

impl Binomial {
    /// Loader's saddle-point form: `ln C(r, k)` from three `ln Γ` of size `r ln r` would
    /// lose all but a few digits for `r` near 10⁹ (a 22% error at the median), while these
    /// terms are all small.
    fn ln_pmf(&self, k: u64) -> f64 {
        let r = self.r as f64;
        if k == 0 {
            return r * self.ln_1mq;
        }
        if k == self.r {
            return r * self.ln_q;
        }
        let (x, y) = (k as f64, (self.r - k) as f64);
        let lc = stirling_error(r)
            - stirling_error(x)
            - stirling_error(y)
            - deviance(x, r * self.ln_q.exp())
            - deviance(y, r * self.ln_1mq.exp());
        lc - 0.5 * (std::f64::consts::TAU.ln() + x.ln() + (-x / r).ln_1p())
    }

    /// `pmf(k + 1)/pmf(k)`.
    fn up(&self, k: u64) -> f64 {
        (self.r - k) as f64 / ((k + 1) as f64 * self.odds)
    }

    /// `pmf(k − 1)/pmf(k)`.
    fn down(&self, k: u64) -> f64 {
        k as f64 * self.odds / (self.r - k + 1) as f64
    }

    /// `P[Bin ≥ v]`, summing away from the mode so the terms fall: upwards from `v` above
    /// the mode, else `1 − P[Bin < v]` downwards from `v − 1`. The terms fall at least like a
    /// Gaussian's, so a sum stops within about 9 standard deviations (≤ 1.5·10⁵ terms).
    /// (`statrs`'s incomplete beta stops after 140 iterations and is 27% off at the
    /// median of `Bin(10⁷, 1/2)`.)
    fn tail(&self, v: u64) -> f64 {
        if v > self.mode {
            let (mut term, mut sum, mut k) = (self.ln_pmf(v).exp(), 0.0, v);
            loop {
                sum += term;
                if k == self.r || term <= sum * NEGLIGIBLE {
                    return sum;
                }
                term *= self.up(k);
                k += 1;
            }
        }
        if v == 0 {
            return 1.0;
        }
        let (mut term, mut below, mut k) = (self.ln_pmf(v - 1).exp(), 0.0, v - 1);
        loop {
            below += term;
            if k == 0 || term <= below * NEGLIGIBLE {
                return (1.0 - below).max(0.0);
            }
            term *= self.down(k);
            k -= 1;
        }
    }

    /// `α = max_{1 ≤ i ≤ v} P[v − i ≤ Bin < v]/i`: the largest running mean of
    /// `pmf(v − 1), pmf(v − 2), …`. The pmf rises to the mode and then falls, so the running
    /// mean rises while the next term exceeds it and falls for good once it does not; the walk
    /// stops there. Terms far above the mode (below `e^−SKIP` of its pmf) only add to the
    /// count `i`, so the walk starts below them.
    fn alpha(&self, v: u64) -> f64 {
        let mut k = v - 1;
        if k > self.mode {
            // ln_pmf falls from the mode up: the last k in [mode, v − 1] above the threshold.
            let floor = self.ln_pmf(self.mode) - SKIP;
            let (mut lo, mut hi) = (self.mode, k);
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                if self.ln_pmf(mid) >= floor {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            k = lo;
        }
        let mut term = self.ln_pmf(k).exp();
        let mut sum = 0.0_f64;
        loop {
            sum += term; // P[k ≤ Bin < v] (up to the skipped terms)
            let mean = sum / (v - k) as f64;
            if k == 0 {
                return mean;
            }
            term *= self.down(k);
            k -= 1;
            if term <= mean {
                return mean;
            }
        }
    }
}

/// `ln n! − ln(√(2πn)·(n/e)ⁿ)` for a whole `n ≥ 1` (Loader 2000, "Fast and accurate
/// computation of binomial probabilities"): directly while small, else its series.
fn stirling_error(n: f64) -> f64 {
    if n <= 15.0 {
        return ln_gamma(n + 1.0) - (n + 0.5) * n.ln() + n - 0.5 * std::f64::consts::TAU.ln();
    }
    let nn = n * n;
    (1.0 / 12.0
        - (1.0 / 360.0 - (1.0 / 1260.0 - (1.0 / 1680.0 - 1.0 / (1188.0 * nn)) / nn) / nn) / nn)
        / n
}

/// `x ln(x/np) + np − x` for `x, np > 0`, by its series near `x = np` where the direct form
/// cancels (Loader 2000).
fn deviance(x: f64, np: f64) -> f64 {
    if (x - np).abs() >= 0.1 * (x + np) {
        return x * (x / np).ln() + np - x;
    }
    let v = (x - np) / (x + np);
    let (mut sum, mut ej) = ((x - np) * v, 2.0 * x * v);
    for j in 1..1000 {
        ej *= v * v;
        let next = sum + ej / f64::from(2 * j + 1);
        if next == sum {
            break;
        }
        sum = next;
    }
    sum
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
    let bin = Binomial {
        r,
        ln_q,
        ln_1mq: -epsilon + ln_q,
        odds: (-epsilon).exp(),
        mode: (((r + 1) as f64 * ln_q.exp()) as u64).min(r),
    };
    let beta = bin.tail(v);
    if delta == 0.0 {
        return Ok(beta.min(1.0));
    }
    Ok((beta + 2.0 * m as f64 * delta * bin.alpha(v)).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::function::factorial::ln_binomial;

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
    fn large_counts_match_the_median_of_a_fair_coin() {
        // n even: P[Bin(n, 1/2) ≥ n/2] = (1 + P[Bin = n/2])/2, and by Stirling
        // P[Bin = n/2] = √(2/(πn))·(1 − 1/(4n) + O(n⁻²)). The median is where the terms fall
        // slowest; `ln C(n, k)` from `ln Γ` was 22% off here at n = 10⁹.
        for &n in &[1_000_000u64, 10_000_000, 1_000_000_000] {
            let p = p_value(n, n, n / 2, 0.0, 0.0).unwrap();
            let n_f = n as f64;
            let pmf = (2.0 / (std::f64::consts::PI * n_f)).sqrt() * (1.0 - 0.25 / n_f);
            let exact = 0.5 * (1.0 + pmf);
            assert!((p - exact).abs() < 1e-8 * pmf, "{n}: {p} vs {exact}");
        }
    }

    #[test]
    fn alpha_matches_the_direct_sum_far_above_the_mode() {
        // v − 1 far above the mode: the skipped terms and the early stop change nothing.
        for &(m, r, v) in &[(20_000u64, 20_000u64, 15_000u64), (3000, 3000, 2999)] {
            for &eps in &[0.0, 0.5, 1.0] {
                let a = p_value(m, r, v, eps, 1e-3).unwrap();
                let b = p_value_direct(m, r, v, eps, 1e-3);
                assert!((a - b).abs() < 1e-10 * b, "{m} {r} {v} {eps}: {a} vs {b}");
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
            p_value(MAX_CANARIES + 1, 3, 2, 1.0, 0.0)
                .unwrap_err()
                .to_string()
                .contains("got 1000000001")
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
