//! A Clopper–Pearson lower bound on μ from independent canaries (Nasr et al. 2023): with
//! Dirac canaries on distinct coordinates each canary's score is an independent trial of
//! "canary in" against "canary out", so a threshold's false-positive and false-negative
//! rates are binomial proportions. A μ-GDP mechanism has FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ) at every
//! threshold, i.e. μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR); the right side decreases in both rates, so
//! with Clopper–Pearson UPPER bounds on both it is a lower bound on μ.
//!
//! # Privacy
//! The threshold is chosen on one half of the canaries (by index, the halves are random
//! because coordinates and coins are) and measured on the other, each rate's bound at
//! `(1 − confidence)/2`, so μ̲ holds with `confidence` for every μ-GDP run. Read as ε at δ it
//! bounds ε only for Gaussian-shaped trade-off curves (full-batch DP-SGD is exactly GDP).
//!
//! # Citations
//! M. Nasr et al., "Tight Auditing of Differentially Private Machine Learning", USENIX
//! Security 2023 (GDP bounds from Clopper–Pearson intervals on canary trials); C. Clopper,
//! E. Pearson, Biometrika 1934.

use dpml_accounting::gdp::epsilon_for_delta;
use dpml_mechanisms::normal::normal_quantile;

use crate::bounds::clopper_pearson_upper;
use crate::error::{AuditError, Result};
use crate::validate;

/// The μ lower bound and the rates behind it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GdpThresholdBound {
    /// μ̲: the run is not μ'-GDP for any μ' < μ̲, with `confidence`.
    pub mu_lower_bound: f64,
    /// ε of μ̲-GDP at `delta` (an ε bound for Gaussian-shaped trade-off curves).
    pub epsilon_if_gaussian: f64,
    /// The threshold chosen on the first half.
    pub threshold: f64,
    /// Upper bound on the false-positive rate on the second half.
    pub fpr_upper: f64,
    /// Upper bound on the false-negative rate on the second half.
    pub fnr_upper: f64,
    /// δ.
    pub delta: f64,
    /// Confidence.
    pub confidence: f64,
}

/// (μ̲, FPR upper, FNR upper) at threshold `t` on `scores`, each rate bounded at `each`:
/// μ̲ = Φ⁻¹(1 − FPR⁺) − Φ⁻¹(FNR⁺), at least 0 (0 also when a rate bound is 1, which leaves μ
/// unconstrained).
fn bounded_mu(scores: &[(f64, bool)], t: f64, each: f64) -> Result<(f64, f64, f64)> {
    let (fp, fn_, n_out, n_in) = errors(scores, t);
    let fpr = clopper_pearson_upper(fp as u64, n_out as u64, each)?;
    let fnr = clopper_pearson_upper(fn_ as u64, n_in as u64, each)?;
    let mu = if fpr >= 1.0 || fnr >= 1.0 {
        0.0
    } else {
        (normal_quantile(1.0 - fpr) - normal_quantile(fnr)).max(0.0)
    };
    Ok((mu, fpr, fnr))
}

/// Counts (false positives among `out`, false negatives among `inn`) at "in iff score ≥ t".
fn errors(scores: &[(f64, bool)], t: f64) -> (usize, usize, usize, usize) {
    let (mut fp, mut fn_, mut n_out, mut n_in) = (0, 0, 0, 0);
    for &(s, inc) in scores {
        if inc {
            n_in += 1;
            fn_ += usize::from(s < t);
        } else {
            n_out += 1;
            fp += usize::from(s >= t);
        }
    }
    (fp, fn_, n_out, n_in)
}

/// The bound from canary `scores` and inclusion bits (see the module docs).
///
/// # Errors
/// Non-finite scores, mismatched lengths, a half without both members and non-members, δ or
/// the confidence outside (0, 1).
pub fn gdp_threshold_bound(
    scores: &[f64],
    included: &[bool],
    delta: f64,
    confidence: f64,
) -> Result<GdpThresholdBound> {
    validate::finite_nonempty("canary scores", scores)?;
    validate::open_unit("delta", delta)?;
    validate::confidence(confidence)?;
    if included.len() != scores.len() {
        return Err(AuditError::Invalid(format!(
            "inclusion bits must match the canary scores ({}), got {}",
            scores.len(),
            included.len()
        )));
    }
    let pairs: Vec<(f64, bool)> = scores
        .iter()
        .copied()
        .zip(included.iter().copied())
        .collect();
    let (choose, measure): (Vec<_>, Vec<_>) =
        pairs.iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let choose: Vec<(f64, bool)> = choose.into_iter().map(|(_, &p)| p).collect();
    let measure: Vec<(f64, bool)> = measure.into_iter().map(|(_, &p)| p).collect();
    let both = |h: &[(f64, bool)]| h.iter().any(|p| p.1) && h.iter().any(|p| !p.1);
    if !both(&choose) || !both(&measure) {
        return Err(AuditError::Invalid(format!(
            "the GDP threshold bound needs members and non-members in both halves of the {} canaries",
            scores.len()
        )));
    }
    let each = 1.0 - (1.0 - confidence) / 2.0;
    // The threshold maximises the same bounded μ on the first half: a point estimate would
    // favour extreme thresholds whose zero counts say little.
    let mut best = (f64::NEG_INFINITY, f64::INFINITY);
    for &(t, _) in &choose {
        let mu = bounded_mu(&choose, t, each)?.0;
        if mu > best.0 {
            best = (mu, t);
        }
    }
    let threshold = best.1;
    let (mu, fpr_upper, fnr_upper) = bounded_mu(&measure, threshold, each)?;
    let epsilon_if_gaussian = if mu > 0.0 {
        epsilon_for_delta(mu, delta).map_err(|e| AuditError::Invalid(e.to_string()))?
    } else {
        0.0
    };
    Ok(GdpThresholdBound {
        mu_lower_bound: mu,
        epsilon_if_gaussian,
        threshold,
        fpr_upper,
        fnr_upper,
        delta,
        confidence,
    })
}
