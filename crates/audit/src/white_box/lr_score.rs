//! How a white-box auditor scores one Dirac canary from its per-step observations.
//!
//! At step t the auditor sees x_t = b_t + N(0, σ²) at the canary's coordinate (units of C),
//! where b_t = 1 when the canary is in the training set and Poisson sampling picked it
//! (probability q), else 0. Without the canary x_t ~ N(0, σ²); with it x_t follows the
//! mixture (1 − q)·N(0, σ²) + q·N(1, σ²). The density ratio of N(1, σ²) to N(0, σ²) at x is
//! exp((x² − (x − 1)²)/(2σ²)) = exp((2x − 1)/(2σ²)), so the per-step likelihood ratio of
//! "in" against "out" is (1 − q) + q·exp((2x − 1)/(2σ²)), and since the steps' noises are
//! independent the Neyman–Pearson optimal score over a run is
//!
//!   Σ_t log((1 − q) + q·exp((2x_t − 1)/(2σ²)))          ([`CanaryScore::LikelihoodRatio`]).
//!
//! With q = 1 it is an increasing affine function of Σ_t x_t, the plain sum
//! ([`CanaryScore::Sum`]); with q < 1 the sum weighs every step's noise equally although only
//! about qT steps carry the canary, and it reveals μ_sum = q√T/σ against the mechanism's
//! CLT μ = q√(T(e^{1/σ²} − 1)) (Bu et al. 2020). Under that CLT the log-likelihood ratio is
//! N(−μ²/2, μ²) out and N(μ²/2, μ²) in, so the standardised mean difference of the LR
//! scores estimates μ itself.
//!
//! # Privacy
//! Only the auditor's statistic: the bounds computed from any score are valid (they rank
//! canaries by it); a better score only makes them tighter.
//!
//! # Citations
//! M. Nasr et al., "Tight Auditing of Differentially Private Machine Learning", USENIX
//! Security 2023 (likelihood-ratio scores of a white-box adversary under subsampling);
//! Z. Bu, J. Dong, Q. Long, W. Su, "Deep learning with Gaussian differential privacy",
//! Harvard Data Science Review 2020 (the CLT μ).

use serde::Serialize;

/// Which statistic scores a canary over the steps of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CanaryScore {
    /// Σ_t log((1 − q) + q·exp((2x_t − 1)/(2σ²))): the optimal test under Poisson sampling.
    #[default]
    LikelihoodRatio,
    /// Σ_t x_t: optimal only for full batches (q = 1).
    Sum,
}

/// The log-likelihood ratio of one step's observation `x` (units of C) for sampling rate `q`
/// and noise multiplier `sigma`, computed without overflow for large exponents.
pub fn step_log_ratio(x: f64, q: f64, sigma: f64) -> f64 {
    let a = (2.0 * x - 1.0) / (2.0 * sigma * sigma);
    if a > 0.0 {
        // log((1 − q) + q e^a) = a + log(q + (1 − q) e^{−a}).
        a + (q + (1.0 - q) * (-a).exp()).ln()
    } else {
        // log(1 + q (e^a − 1)), accurate when q (e^a − 1) is tiny.
        (q * a.exp_m1()).ln_1p()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_mixture_density_ratio() {
        let normal = |x: f64, m: f64, s: f64| (-(x - m).powi(2) / (2.0 * s * s)).exp();
        for &(x, q, s) in &[(0.3, 0.01, 1.0), (-2.0, 0.5, 0.7), (4.0, 0.001, 2.0)] {
            let ratio = ((1.0 - q) * normal(x, 0.0, s) + q * normal(x, 1.0, s)) / normal(x, 0.0, s);
            assert!(
                (step_log_ratio(x, q, s) - ratio.ln()).abs() < 1e-12,
                "{x} {q} {s}"
            );
        }
    }

    #[test]
    fn full_batches_reduce_to_the_sum_and_extremes_stay_finite() {
        let s = 1.3;
        for &x in &[-1.0, 0.2, 2.5] {
            let affine = (2.0 * x - 1.0) / (2.0 * s * s);
            assert!((step_log_ratio(x, 1.0, s) - affine).abs() < 1e-12);
        }
        assert!(step_log_ratio(1e6, 0.01, 0.5).is_finite());
        assert!(step_log_ratio(-1e6, 0.01, 0.5).abs() < 0.02);
    }
}
