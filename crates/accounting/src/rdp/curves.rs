//! Closed-form RDP curves ε(α) of the basic mechanisms, one order at a time.
//!
//! Parameters arrive validated (finite, in range) and α is finite and > 1. Every formula is
//! evaluated in log space so that α up to 1024 and large ε neither overflow nor cancel.

/// Gaussian mechanism with noise multiplier σ: ε(α) = α/(2σ²) (Mironov 2017, Prop. 7).
pub(crate) fn gaussian(sigma: f64, alpha: f64) -> f64 {
    alpha / (2.0 * sigma * sigma)
}

/// Discrete Gaussian with parameter σ on an integer query of sensitivity Δ:
/// ε(α) ≤ αΔ²/(2σ²), because it is ½(Δ/σ)²-concentrated DP (Canonne, Kamath, Steinke 2020).
pub(crate) fn discrete_gaussian(sigma: f64, sensitivity: f64, alpha: f64) -> f64 {
    alpha * sensitivity * sensitivity / (2.0 * sigma * sigma)
}

/// Laplace mechanism with pure ε = Δ/b (Mironov 2017, Prop. 6), exactly:
/// ε(α) = (1/(α−1)) ln( α/(2α−1) e^{(α−1)ε} + (α−1)/(2α−1) e^{−αε} )
///      = ε + ln(1 + (α−1)(e^{(1−2α)ε} − 1)/(2α−1)) / (α−1).
pub(crate) fn laplace(epsilon: f64, alpha: f64) -> f64 {
    let am1 = alpha - 1.0;
    epsilon + (am1 * (epsilon * (1.0 - 2.0 * alpha)).exp_m1() / (2.0 * alpha - 1.0)).ln_1p() / am1
}

/// k-ary randomized response with parameter ε, exactly: for inputs x ≠ x′ the output laws P, Q
/// put p = e^ε/(e^ε + k − 1) on the true answer and p₀ = 1/(e^ε + k − 1) on each other one,
/// so they differ only at x and x′ and, with L = ln(e^ε + k − 1),
/// D_α(P‖Q) = (1/(α−1)) ln( p^α p₀^{1−α} + p₀^α p^{1−α} + (k − 2)p₀ )
///          = (1/(α−1)) ( ln(e^{αε} + e^{(1−α)ε} + k − 2) − L ).
/// Every pair (x, x′) gives the same value, and the formula is symmetric in P and Q, so it is
/// the maximum over ordered pairs.
pub(crate) fn randomized_response(epsilon: f64, categories: f64, alpha: f64) -> f64 {
    if epsilon == f64::INFINITY {
        return f64::INFINITY;
    }
    // L = ε + ln(1 + (k − 1)e^{−ε}) stays accurate for large ε.
    let ln_norm = epsilon + ((categories - 1.0) * (-epsilon).exp()).ln_1p();
    let a = alpha * epsilon;
    let b = (1.0 - alpha) * epsilon;
    // a ≥ b, so factor e^a out of the log-sum-exp.
    let rest = (b - a).exp() + (categories - 2.0) * (-a).exp();
    // a − L cancels for large ε, and the division by α − 1 magnifies its rounding (a few ulps
    // of a and L each): rounded outward by that much, the curve stays an upper bound.
    let rounding = 4.0 * f64::EPSILON * (a.abs() + ln_norm.abs()) / (alpha - 1.0);
    super::bound((a + rest.ln_1p() - ln_norm) / (alpha - 1.0) + rounding)
}

/// Any pure ε-DP mechanism: ε(α) ≤ D_α of binary randomized response with parameter ε.
///
/// Every ε-DP pair (P, Q) is a post-processing of the binary randomized-response pair
/// (Kairouz, Oh, Viswanath 2015), and Rényi divergence cannot grow under post-processing, so
/// this bound is tight; it is below both ε and αε²/2 (Bun, Steinke 2016, Prop. 3.3).
pub(crate) fn pure(epsilon: f64, alpha: f64) -> f64 {
    randomized_response(epsilon, 2.0, alpha)
}

/// Discrete Laplace P(k) ∝ e^{−|k|/t} on an integer query of sensitivity Δ, exactly.
///
/// With λ = 1/t, s = e^{−λ}, r = s^{2α−1}, summing P^α Q^{1−α} over k ≤ 0, 0 < k < Δ, k ≥ Δ:
/// A = e^{(α−1)λΔ} [ (1 + s^{(2α−1)Δ})/(1 + s) + tanh(λ/2) · r(1 − r^{Δ−1})/(1 − r) ],
/// ε(α) = ln A/(α − 1) = λΔ + ln[…]/(α − 1), which tends to the pure ε = Δ/t as α → ∞.
pub(crate) fn discrete_laplace(scale: f64, sensitivity: f64, alpha: f64) -> f64 {
    if sensitivity == 0.0 {
        return 0.0;
    }
    let lambda = 1.0 / scale;
    if lambda == f64::INFINITY {
        return f64::INFINITY;
    }
    let ln_r = -(2.0 * alpha - 1.0) * lambda;
    // r(1 − r^{Δ−1})/(1 − r), computed with expm1 so small λ does not cancel.
    let middle = ln_r.exp() * (-((sensitivity - 1.0) * ln_r).exp_m1()) / (-ln_r.exp_m1());
    let ends = (1.0 + (ln_r * sensitivity).exp()) / (1.0 + (-lambda).exp());
    let bracket = ends + (lambda / 2.0).tanh() * middle;
    super::bound(lambda * sensitivity + bracket.ln() / (alpha - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rényi divergence of two discrete laws given as log-probabilities.
    fn renyi(ln_p: &[f64], ln_q: &[f64], alpha: f64) -> f64 {
        let terms: Vec<f64> = ln_p
            .iter()
            .zip(ln_q)
            .map(|(a, b)| alpha * a + (1.0 - alpha) * b)
            .collect();
        let m = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        (m + terms.iter().map(|t| (t - m).exp()).sum::<f64>().ln()) / (alpha - 1.0)
    }

    #[test]
    fn laplace_matches_mironov_closed_form_and_tends_to_pure_epsilon() {
        for &(eps, alpha) in &[(0.5, 2.0), (1.0, 1.5), (2.0, 10.0), (0.1, 64.0)] {
            let am1: f64 = alpha - 1.0;
            let direct = ((alpha / (2.0 * alpha - 1.0)) * (am1 * eps).exp()
                + (am1 / (2.0 * alpha - 1.0)) * (-alpha * eps).exp())
            .ln()
                / am1;
            assert!(
                (laplace(eps, alpha) - direct).abs() < 1e-12,
                "{eps} {alpha}"
            );
        }
        // As α → ∞, ε(α) → ε from below; the gap is ≈ ln 2/(α − 1).
        let eps = 1.0;
        let at_1024 = laplace(eps, 1024.0);
        assert!(at_1024 < eps && eps - at_1024 < 2.0 * std::f64::consts::LN_2 / 1023.0);
        assert!(laplace(eps, 1e9) > eps - 1e-8);
    }

    #[test]
    fn randomized_response_matches_brute_force_over_pairs() {
        for &(eps, k) in &[(1.0_f64, 2_usize), (3.0_f64.ln(), 2), (0.7, 5), (4.0, 10)] {
            let norm = eps.exp() + k as f64 - 1.0;
            let law = |x: usize| -> Vec<f64> {
                (0..k)
                    .map(|y| if y == x { eps - norm.ln() } else { -norm.ln() })
                    .collect()
            };
            for &alpha in &[1.5, 2.0, 7.3, 100.0] {
                let mut worst = f64::NEG_INFINITY;
                for x in 0..k {
                    for x2 in 0..k {
                        if x != x2 {
                            worst = worst.max(renyi(&law(x), &law(x2), alpha));
                        }
                    }
                }
                let ours = randomized_response(eps, k as f64, alpha);
                assert!((ours - worst).abs() < 1e-12, "ε={eps} k={k} α={alpha}");
            }
        }
        assert!(randomized_response(0.0, 3.0, 2.0) < 1e-14);
        // Large α approaches ε.
        assert!((randomized_response(2.0, 4.0, 1e8) - 2.0).abs() < 1e-6);
    }

    #[test]
    fn randomized_response_at_a_huge_epsilon_stays_an_upper_bound() {
        // The exact D_α is ε − O(e^{−ε}), which is ε in f64; αε − L cancels and the division
        // by α − 1 magnifies the rounding, which must not take the curve below it.
        for eps in [1e11, 1e20, 1e100, 1e300] {
            for alpha in [1.01, 1.1, 1.5, 2.0, 32.0] {
                let ours = randomized_response(eps, 2.0, alpha);
                assert!(ours >= eps, "ε={eps} α={alpha}: {ours}");
                assert!(ours <= eps * (1.0 + 1e-12), "ε={eps} α={alpha}: {ours}");
            }
        }
        use crate::{Accountant, PrivacyEvent, RdpAccountant};
        let rr = PrivacyEvent::RandomizedResponse {
            epsilon: 1e20,
            categories: 2,
        };
        assert!(RdpAccountant::default().epsilon(&rr, 1e-5).unwrap() >= 1e20);
    }

    #[test]
    fn pure_bound_is_below_epsilon_and_zcdp_bound() {
        for &eps in &[0.01, 0.1, 1.0, 5.0, 30.0] {
            for &alpha in &[1.1, 2.0, 10.0, 1024.0] {
                let v = pure(eps, alpha);
                let bun_steinke = f64::min(eps, alpha * eps * eps / 2.0);
                assert!(v <= bun_steinke * (1.0 + 1e-12), "ε={eps} α={alpha}: {v}");
                assert!(v >= 0.0 && v.is_finite());
            }
        }
    }

    #[test]
    fn discrete_laplace_matches_brute_force_sum() {
        for &(t, delta) in &[(1.0_f64, 1_i64), (2.5, 3), (0.4, 2), (10.0, 5)] {
            let lambda = 1.0 / t;
            let ln_z = ((1.0 + (-lambda).exp()) / (1.0 - (-lambda).exp())).ln();
            let range = -400..400;
            let p: Vec<f64> = range
                .clone()
                .map(|k: i64| -lambda * k.abs() as f64 - ln_z)
                .collect();
            let q: Vec<f64> = range
                .map(|k: i64| -lambda * (k - delta).abs() as f64 - ln_z)
                .collect();
            for &alpha in &[1.5, 2.0, 9.9, 63.0] {
                let brute = renyi(&p, &q, alpha).max(renyi(&q, &p, alpha));
                let ours = discrete_laplace(t, delta as f64, alpha);
                assert!(
                    (ours - brute).abs() < 1e-10,
                    "t={t} Δ={delta} α={alpha}: {ours} vs {brute}"
                );
                assert!(ours <= delta as f64 / t);
            }
        }
        assert_eq!(discrete_laplace(1.0, 0.0, 2.0), 0.0);
        // Large α tends to the pure ε = Δ/t.
        assert!((discrete_laplace(2.0, 3.0, 1e9) - 1.5).abs() < 1e-8);
    }
}
