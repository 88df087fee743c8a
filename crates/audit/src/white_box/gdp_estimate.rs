//! A Gaussian-DP ESTIMATE (not a bound) from member and non-member scores: if the scores of
//! included canaries look like N(μ, 1) and those of excluded ones like N(0, 1) after scaling,
//! the mechanism behaves like μ-GDP for these canaries, and μ̂ = (mean_in − mean_out)/sd.
//!
//! # Privacy
//! Nothing here is a guarantee in either direction: μ̂ is a point estimate with a normal-theory
//! interval. It is close to the truth when the scores are Gaussian with equal variances (a
//! Gaussian mechanism; DP-SGD with full batches and Dirac canaries), and it estimates what the
//! SCORE reveals: for subsampled DP-SGD the summed score reveals less than the mechanism (it
//! is not the optimal test when q < 1); the likelihood-ratio score
//! ([`super::lr_score`]) reveals the CLT μ when the CLT holds (small q, σ ≳ 1), and less
//! than the accountant's μ when it does not (small σ: the trade-off curve is then not
//! Gaussian and its ε is set by rare steps). Reported beside the accountant, never instead.
//!
//! # Citations
//! M. Nasr, J. Hayes, T. Steinke, B. Balle, F. Tramèr, M. Jagielski, N. Carlini, A. Terzis,
//! "Tight Auditing of Differentially Private Machine Learning", USENIX Security 2023 (the GDP
//! estimate from canary score distributions); J. Dong, A. Roth, W. Su, "Gaussian differential
//! privacy", JRSS-B 2022 (μ to (ε, δ)).

use dpml_accounting::gdp::epsilon_for_delta;
use dpml_mechanisms::normal::normal_quantile_upper;

use crate::error::{AuditError, Result};
use crate::validate;

/// μ̂ with its interval and the ε they imply at δ (all estimates).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GdpEstimate {
    /// μ̂ = (mean_in − mean_out)/pooled sd, clamped at 0.
    pub mu_estimate: f64,
    /// The normal-theory interval of μ̂ at `interval_confidence`, lower end clamped at 0.
    pub mu_interval: [f64; 2],
    /// ε of μ̂-GDP at `delta`.
    pub epsilon_estimate: f64,
    /// ε of the interval's ends.
    pub epsilon_interval: [f64; 2],
    /// Two-sided confidence of the intervals.
    pub interval_confidence: f64,
    /// δ at which ε is read.
    pub delta: f64,
    /// Member (included canary) scores.
    pub members: usize,
    /// Non-member scores.
    pub non_members: usize,
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let ss = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>();
    (mean, ss)
}

fn eps(mu: f64, delta: f64) -> Result<f64> {
    if mu <= 0.0 {
        return Ok(0.0);
    }
    epsilon_for_delta(mu, delta).map_err(|e| AuditError::Invalid(e.to_string()))
}

/// Estimates μ from member and non-member scores (at least 2 of each), with the interval
/// μ̂ ± z·se, se² = 1/n_in + 1/n_out + μ̂²/(2(n_in + n_out − 2)) (the large-sample variance of
/// a standardised mean difference, Hedges & Olkin 1985).
///
/// # Errors
/// Fewer than 2 scores in either group, non-finite scores, all scores equal, δ or the
/// confidence outside (0, 1).
pub fn estimate(
    members: &[f64],
    non_members: &[f64],
    delta: f64,
    interval_confidence: f64,
) -> Result<GdpEstimate> {
    validate::finite_nonempty("member scores", members)?;
    validate::finite_nonempty("non-member scores", non_members)?;
    validate::open_unit("delta", delta)?;
    validate::open_unit("interval confidence", interval_confidence)?;
    let (n_in, n_out) = (members.len(), non_members.len());
    if n_in < 2 || n_out < 2 {
        return Err(AuditError::Invalid(format!(
            "the GDP estimate needs at least 2 member and 2 non-member scores, got {n_in} and {n_out}"
        )));
    }
    let (m_in, ss_in) = mean_var(members);
    let (m_out, ss_out) = mean_var(non_members);
    let dof = (n_in + n_out - 2) as f64;
    let sd = ((ss_in + ss_out) / dof).sqrt();
    if sd.is_nan() || sd <= 0.0 {
        return Err(AuditError::Invalid(
            "scores have zero spread: the GDP estimate needs a noisy score".into(),
        ));
    }
    let mu = ((m_in - m_out) / sd).max(0.0);
    let se = (1.0 / n_in as f64 + 1.0 / n_out as f64 + mu * mu / (2.0 * dof)).sqrt();
    let z = normal_quantile_upper((1.0 - interval_confidence) / 2.0);
    let lo = (mu - z * se).max(0.0);
    let hi = mu + z * se;
    Ok(GdpEstimate {
        mu_estimate: mu,
        mu_interval: [lo, hi],
        epsilon_estimate: eps(mu, delta)?,
        epsilon_interval: [eps(lo, delta)?, eps(hi, delta)?],
        interval_confidence,
        delta,
        members: n_in,
        non_members: n_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separated_scores_give_their_distance() {
        // Members at ±1 around 2, non-members at ±1 around 0: pooled sd = √(n/(n−1)).
        let members = [1.0, 3.0, 1.0, 3.0];
        let non_members = [-1.0, 1.0, -1.0, 1.0];
        let e = estimate(&members, &non_members, 1e-5, 0.95).unwrap();
        let sd = (8.0f64 / 6.0).sqrt();
        assert!((e.mu_estimate - 2.0 / sd).abs() < 1e-12, "{e:?}");
        assert!(e.mu_interval[0] < e.mu_estimate && e.mu_estimate < e.mu_interval[1]);
        assert!(e.epsilon_interval[0] <= e.epsilon_estimate);
    }

    #[test]
    fn bad_input_is_named() {
        let e = estimate(&[1.0], &[0.0, 1.0], 1e-5, 0.95).unwrap_err();
        assert!(e.to_string().contains("got 1 and 2"), "{e}");
        let e = estimate(&[1.0, 1.0], &[1.0, 1.0], 1e-5, 0.95).unwrap_err();
        assert!(e.to_string().contains("zero spread"), "{e}");
        let e = estimate(&[1.0, 2.0], &[1.0, 0.0], 0.0, 0.95).unwrap_err();
        assert!(e.to_string().contains("delta"), "{e}");
    }
}
