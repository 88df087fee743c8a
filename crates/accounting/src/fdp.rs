//! f-DP trade-off curves β(α): the smallest type II error of any test at type I error α that
//! tries to tell neighbouring data sets apart (Dong, Roth, Su 2019).
//!
//! Curves for μ-GDP ([`gaussian_tradeoff`]), for one (ε, δ) pair ([`eps_delta_tradeoff`]) and
//! for a whole (ε, δ(ε)) family such as a PLD accountant's ([`tradeoff_from_delta_curve`], with
//! [`delta_curve`] to sample any [`Accountant`]), and the conversions back to (ε, δ)
//! ([`gaussian_to_eps_delta`], [`delta_from_tradeoff`]). [`alpha_grid`] gives log-spaced type I
//! errors for log-log ROC plots.
//!
//! # Privacy
//! A mechanism is f-DP if every test between M(D) and M(D′) has β(α) ≥ f(α). μ-GDP is
//! f = G_μ(α) = Φ(Φ⁻¹(1 − α) − μ); (ε, δ)-DP is f = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α));
//! a mechanism that is (ε, δ(ε))-DP for every ε satisfies the pointwise supremum of those
//! (Dong, Roth, Su 2019, Prop. 2.12), and conversely δ(ε) = sup_α (1 − f(α) − e^ε α) for a
//! symmetric f (their Prop. 2.12 again, via the convex conjugate).
//!
//! # Citations
//! J. Dong, A. Roth, W. Su, "Gaussian differential privacy", JRSS-B 84(1), 2022
//! (arXiv:1905.02383).
//!
//! # Errors
//! Every function returns [`AccountingError::InvalidParameter`] naming the value when an
//! argument is out of range or NaN.

use crate::gdp;
use crate::rdp::check;
use crate::{Accountant, AccountingError, PrivacyEvent};
use dpml_mechanisms::normal::{normal_cdf, normal_quantile};

/// The smallest type I error [`alpha_grid`] reaches.
pub const ALPHA_GRID_MIN: f64 = 1e-6;

/// β = G_μ(α) = Φ(Φ⁻¹(1 − α) − μ), the trade-off curve of μ-GDP.
///
/// Computed as Φ(−Φ⁻¹(α) − μ) so that α down to 1e-300 keeps its digits.
///
/// # Errors
/// μ must be ≥ 0 (+∞: β = 0, no privacy); α in [0, 1].
pub fn gaussian_tradeoff(mu: f64, alpha: f64) -> Result<f64, AccountingError> {
    let mu = check::non_negative_or_infinite("mu", mu)?;
    let alpha = check::probability("alpha", alpha)?;
    if mu == f64::INFINITY {
        // No privacy (e^{1/σ²} beyond f64): a test tells the two apart with no error.
        return Ok(0.0);
    }
    Ok(normal_cdf(-normal_quantile(alpha) - mu))
}

/// β = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)), the trade-off curve of (ε, δ)-DP.
///
/// # Errors
/// ε must be finite and ≥ 0; δ and α in [0, 1].
pub fn eps_delta_tradeoff(epsilon: f64, delta: f64, alpha: f64) -> Result<f64, AccountingError> {
    let eps = check::non_negative("epsilon", epsilon)?;
    let delta = check::probability("delta", delta)?;
    let alpha = check::probability("alpha", alpha)?;
    Ok(tradeoff_unchecked(eps, delta, alpha))
}

fn tradeoff_unchecked(eps: f64, delta: f64, alpha: f64) -> f64 {
    let first = 1.0 - delta - eps.exp() * alpha;
    let second = (-eps).exp() * (1.0 - delta - alpha);
    first.max(second).max(0.0)
}

/// The trade-off curve of a family of (ε, δ) guarantees (e.g. a PLD accountant's δ(ε) sampled
/// at many ε): β(α) = max over the points of [`eps_delta_tradeoff`].
///
/// The more points, the closer to the mechanism's true curve; any subset still gives a valid
/// lower bound on β, so a coarse grid is safe, only loose.
///
/// # Errors
/// `points` must not be empty; each ε finite and ≥ 0, each δ in [0, 1]; α in [0, 1].
pub fn tradeoff_from_delta_curve(
    points: &[(f64, f64)],
    alpha: f64,
) -> Result<f64, AccountingError> {
    let alpha = check::probability("alpha", alpha)?;
    if points.is_empty() {
        return Err(AccountingError::InvalidParameter(
            "the (epsilon, delta) curve must have at least one point, got none".into(),
        ));
    }
    let mut best: f64 = 0.0;
    for &(eps, delta) in points {
        let eps = check::non_negative("epsilon of a curve point", eps)?;
        let delta = check::probability("delta of a curve point", delta)?;
        best = best.max(tradeoff_unchecked(eps, delta, alpha));
    }
    Ok(best)
}

/// δ(ε) of a μ-GDP mechanism (the same as [`gdp::delta_for_epsilon`]).
///
/// # Errors
/// As [`gdp::delta_for_epsilon`].
pub fn gaussian_to_eps_delta(mu: f64, epsilon: f64) -> Result<f64, AccountingError> {
    gdp::delta_for_epsilon(mu, epsilon)
}

/// δ(ε) = max over the points (α, β) of 1 − β − e^ε α, for a symmetric trade-off curve given
/// at sample points (clamped to [0, 1]).
///
/// Exact for a piecewise-linear curve through the points; for a smooth curve it is slightly
/// below the true δ between grid points, so use a fine grid (e.g. [`alpha_grid`]) near the
/// α where the curve's slope is −e^ε.
///
/// # Errors
/// `curve` must not be empty, with α and β in [0, 1]; ε finite and ≥ 0.
pub fn delta_from_tradeoff(curve: &[(f64, f64)], epsilon: f64) -> Result<f64, AccountingError> {
    let eps = check::non_negative("epsilon", epsilon)?;
    if curve.is_empty() {
        return Err(AccountingError::InvalidParameter(
            "the trade-off curve must have at least one point, got none".into(),
        ));
    }
    let mut best: f64 = 0.0;
    for &(alpha, beta) in curve {
        let alpha = check::probability("alpha of a curve point", alpha)?;
        let beta = check::probability("beta of a curve point", beta)?;
        best = best.max(1.0 - beta - eps.exp() * alpha);
    }
    Ok(best.min(1.0))
}

/// The (ε, δ(ε)) curve of `event` under `accountant`, one point per ε in `epsilons`, ready for
/// [`tradeoff_from_delta_curve`].
///
/// # Errors
/// Whatever the accountant returns for a point (e.g. a negative ε or an unsupported event).
pub fn delta_curve(
    accountant: &dyn Accountant,
    event: &PrivacyEvent,
    epsilons: &[f64],
) -> Result<Vec<(f64, f64)>, AccountingError> {
    epsilons
        .iter()
        .map(|&eps| Ok((eps, accountant.delta(event, eps)?)))
        .collect()
}

/// `n` type I errors log-spaced from [`ALPHA_GRID_MIN`] (1e-6) to 1, for log-log ROC plots.
///
/// `n = 0` gives an empty grid and `n = 1` the single point 1e-6.
pub fn alpha_grid(n: usize) -> Vec<f64> {
    let lo = ALPHA_GRID_MIN.log10();
    match n {
        0 => Vec::new(),
        1 => vec![ALPHA_GRID_MIN],
        _ => (0..n)
            .map(|k| {
                if k + 1 == n {
                    1.0
                } else {
                    10f64.powf(lo - lo * k as f64 / (n - 1) as f64)
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdp::RdpAccountant;

    #[test]
    fn gaussian_tradeoff_values_and_symmetry() {
        // G_0 is the line 1 − α (perfect privacy).
        for &a in &[0.0, 1e-6, 0.3, 1.0] {
            assert!((gaussian_tradeoff(0.0, a).unwrap() - (1.0 - a)).abs() < 1e-15);
        }
        // mpmath: Φ(Φ⁻¹(1 − 1e-6) − 3) and Φ(Φ⁻¹(0.95) − 1).
        let v = gaussian_tradeoff(3.0, 1e-6).unwrap();
        assert!((v - 0.960_235_399_292_428_1).abs() < 1e-13, "{v}");
        let v = gaussian_tradeoff(1.0, 0.05).unwrap();
        assert!((v - 0.740_488_977_158_555_9).abs() < 1e-13, "{v}");
        // G_μ is symmetric: G_μ(G_μ(α)) = α.
        for &mu in &[0.2, 1.0, 4.0] {
            for &a in &[1e-4, 0.01, 0.2, 0.7] {
                let back = gaussian_tradeoff(mu, gaussian_tradeoff(mu, a).unwrap()).unwrap();
                assert!(
                    (back - a).abs() < 1e-12 * a.max(1e-3),
                    "μ={mu} α={a}: {back}"
                );
            }
        }
        assert_eq!(gaussian_tradeoff(1.0, 0.0).unwrap(), 1.0);
        assert_eq!(gaussian_tradeoff(1.0, 1.0).unwrap(), 0.0);
        // μ = ∞ (e^{1/σ²} overflowed): no privacy, β = 0 everywhere.
        for a in [0.0, 0.3, 1.0] {
            assert_eq!(gaussian_tradeoff(f64::INFINITY, a).unwrap(), 0.0);
        }
        assert!(gaussian_tradeoff(f64::NAN, 0.3).is_err());
    }

    #[test]
    fn eps_delta_tradeoff_lines() {
        let (eps, delta) = (1.0_f64, 0.01);
        // Small α: the steep line 1 − δ − e^ε α.
        let a = 0.01;
        assert!(
            (eps_delta_tradeoff(eps, delta, a).unwrap() - (1.0 - delta - eps.exp() * a)).abs()
                < 1e-15
        );
        // Large α: the shallow line e^{−ε}(1 − δ − α), down to 0 at α = 1 − δ.
        let a = 0.8;
        let expected = (-eps).exp() * (1.0 - delta - a);
        assert!((eps_delta_tradeoff(eps, delta, a).unwrap() - expected).abs() < 1e-15);
        assert_eq!(eps_delta_tradeoff(eps, delta, 0.995).unwrap(), 0.0);
        assert!((eps_delta_tradeoff(0.0, 0.0, 0.4).unwrap() - 0.6).abs() < 1e-15);
        // Symmetric: f(f(α)) = α where f(α) > 0.
        let f = |a: f64| eps_delta_tradeoff(eps, delta, a).unwrap();
        for &a in &[0.05, 0.2, 0.5] {
            assert!((f(f(a)) - a).abs() < 1e-12);
        }
    }

    #[test]
    fn delta_family_envelope_recovers_the_gaussian_curve() {
        // The (ε, δ_μ(ε)) family of μ-GDP has G_μ as its exact envelope (Dong, Roth, Su,
        // Prop. 2.12); each line is a valid lower bound, so the sampled envelope is never above
        // G_μ. How far below: for convex f and tangent lines at a < b with slopes s_a < s_b, the
        // gap on [a, b] is at most the height of the triangle under the chord,
        // (b − a)(s_b − s_a)/4. Adjacent grid values ε, ε + h give |s_a| = e^h |s_b|, and
        // convexity gives (b − a)|s_b| ≤ f(a) − f(b) ≤ 1, so the gap is ≤ (e^h − 1)/4.
        let mu = 1.0;
        let eps_grid: Vec<f64> = (0..=3000).map(|k| f64::from(k) * 0.005).collect();
        let points: Vec<(f64, f64)> = eps_grid
            .iter()
            .map(|&e| (e, gaussian_to_eps_delta(mu, e).unwrap()))
            .collect();
        for a in alpha_grid(60) {
            let exact = gaussian_tradeoff(mu, a).unwrap();
            let envelope = tradeoff_from_delta_curve(&points, a).unwrap();
            assert!(envelope <= exact + 1e-12, "α={a}: {envelope} > {exact}");
            assert!(
                exact - envelope <= (0.005_f64.exp_m1()) / 4.0,
                "α={a}: {envelope} vs {exact}"
            );
        }
    }

    #[test]
    fn delta_from_tradeoff_inverts_the_gaussian_curve() {
        let mu = 1.5;
        let alphas: Vec<f64> = (1..100_000).map(|k| f64::from(k) / 100_000.0).collect();
        let curve: Vec<(f64, f64)> = alphas
            .iter()
            .map(|&a| (a, gaussian_tradeoff(mu, a).unwrap()))
            .collect();
        for &eps in &[0.0, 0.5, 1.0, 2.0] {
            let exact = gaussian_to_eps_delta(mu, eps).unwrap();
            let from_curve = delta_from_tradeoff(&curve, eps).unwrap();
            // With grid spacing s = 1e-5, the maximiser α* of g(α) = 1 − f(α) − e^ε α is within
            // s of a grid point α_k, and g(α*) − g(α_k) ≤ |g′|·s ≤ (|f′(α_k)| + e^ε)·s, where
            // |f′| ≈ e^ε near α*; so the sampled δ is below the exact one by ≤ 2e^ε·s.
            let tolerance = 2.0 * eps.exp() * 1e-5;
            assert!(
                from_curve <= exact + 1e-12 && exact - from_curve < tolerance,
                "{eps}"
            );
        }
    }

    #[test]
    fn delta_curve_samples_any_accountant() {
        let acc = RdpAccountant::default();
        let event = PrivacyEvent::dp_sgd(1.1, 0.01, 1000);
        let curve = delta_curve(&acc, &event, &[0.5, 1.0, 2.0]).unwrap();
        assert_eq!(curve.len(), 3);
        assert!(curve.windows(2).all(|w| w[0].1 >= w[1].1));
        let beta = tradeoff_from_delta_curve(&curve, 0.01).unwrap();
        assert!(beta > 0.0 && beta < 0.99);
        assert!(delta_curve(&acc, &event, &[-1.0]).is_err());
    }

    #[test]
    fn alpha_grid_is_log_spaced_from_1e_minus_6_to_1() {
        let g = alpha_grid(7);
        assert_eq!(g.len(), 7);
        assert_eq!(g[0], 1e-6);
        assert_eq!(g[6], 1.0);
        for (k, a) in g.iter().enumerate() {
            assert!((a.log10() - (-6.0 + k as f64)).abs() < 1e-12);
        }
        assert!(alpha_grid(0).is_empty());
        assert_eq!(alpha_grid(1), vec![1e-6]);
    }

    #[test]
    fn bad_input_is_rejected_with_the_value_named() {
        let msg = |r: Result<f64, AccountingError>| match r {
            Err(AccountingError::InvalidParameter(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(msg(gaussian_tradeoff(-1.0, 0.1)).contains("mu must be >= 0, got -1"));
        assert!(msg(gaussian_tradeoff(1.0, 1.5)).contains("alpha must be in [0, 1], got 1.5"));
        assert!(msg(eps_delta_tradeoff(f64::NAN, 0.0, 0.1)).contains("NaN"));
        assert!(msg(eps_delta_tradeoff(1.0, 2.0, 0.1)).contains("delta"));
        assert!(msg(tradeoff_from_delta_curve(&[], 0.1)).contains("none"));
        assert!(msg(tradeoff_from_delta_curve(&[(1.0, -0.5)], 0.1)).contains("got -0.5"));
        assert!(msg(delta_from_tradeoff(&[(0.1, 2.0)], 1.0)).contains("beta"));
        assert!(msg(gaussian_to_eps_delta(f64::NAN, 1.0)).contains("mu"));
    }
}
