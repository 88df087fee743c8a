//! Gaussian differential privacy (μ-GDP): the central-limit-theorem accountant for DP-SGD and
//! the exact conversions between μ and (ε, δ).
//!
//! A mechanism is μ-GDP if distinguishing neighbours is at least as hard as distinguishing
//! N(0, 1) from N(μ, 1) (Dong, Roth, Su 2019). Gaussians compose exactly: μ² adds. For T steps
//! of the Poisson-subsampled Gaussian, the CLT of Bu, Dong, Long, Su (2020) gives
//! μ ≈ q·√(T(e^{1/σ²} − 1)). That is an approximation that can **underestimate** ε (Gopi, Lee,
//! Wutschitz 2021 show cases where the CLT ε is below the true ε), so [`GdpAccountant`] reports
//! [`BoundKind::Approximation`]; the conversions themselves ([`delta_for_epsilon`],
//! [`epsilon_for_delta`], [`mu_for`]) are exact for a truly μ-GDP mechanism.

use crate::rdp::check;
use crate::{Accountant, AccountingError, BoundKind, PrivacyEvent};
use dpml_mechanisms::normal::{normal_cdf, normal_log_cdf};

/// Bisection steps for the root finders: each halves the bracket, so 200 steps reach the
/// resolution of f64 from any bracket that fits in f64.
const BISECTION_STEPS: usize = 200;

/// μ of T Poisson-subsampled Gaussian steps by the CLT: μ = q·√(T(e^{1/σ²} − 1)); at q = 1
/// (no subsampling) the exact μ = √T/σ.
///
/// # Privacy
/// Approximately μ-GDP for large T and small q (the CLT of Bu, Dong, Long, Su 2020); can
/// underestimate the true privacy loss. Exact at q = 1: T Gaussian mechanisms compose to
/// √T/σ-GDP (Dong, Roth, Su 2019, Cor. 3.3).
///
/// # Citations
/// Z. Bu, J. Dong, Q. Long, W. Su, "Deep learning with Gaussian differential privacy",
/// Harvard Data Science Review 2(3), 2020.
///
/// # Errors
/// [`AccountingError::InvalidParameter`] if q ∉ (0, 1], σ is not finite and > 0, or T = 0.
/// The result is +∞ when e^{1/σ²} overflows (σ below about 0.038).
pub fn mu_poisson(
    sampling_rate: f64,
    noise_multiplier: f64,
    steps: u64,
) -> Result<f64, AccountingError> {
    let q = check::sampling_rate(sampling_rate)?;
    let sigma = check::positive("noise_multiplier", noise_multiplier)?;
    let t = check::count("steps", steps)? as f64;
    Ok((t * step_mu_squared(q, sigma)).sqrt())
}

/// μ² of one Poisson-subsampled Gaussian step: q²(e^{1/σ²} − 1) by the CLT, but exactly 1/σ²
/// at q = 1, where the step is a plain Gaussian mechanism and T of them compose to √T/σ-GDP
/// with no approximation (the CLT formula would give the larger, inexact √(T(e^{1/σ²} − 1))).
fn step_mu_squared(q: f64, sigma: f64) -> f64 {
    let x = 1.0 / (sigma * sigma);
    if q == 1.0 {
        return x;
    }
    let mu_squared = q * q * x.exp_m1();
    if mu_squared.is_nan() {
        // 0 · ∞: q² underflowed and e^x overflowed; ln(q²(e^x − 1)) = 2 ln q + x + ln(1 − e^{−x}).
        return (2.0 * q.ln() + x + (-(-x).exp()).ln_1p()).exp();
    }
    mu_squared
}

/// μ of T uniformly subsampled (fixed batch size, sampling without replacement) Gaussian steps
/// by the CLT: μ = √2·q·√(T(e^{1/σ²}Φ(1.5/σ) + 3Φ(−0.5/σ) − 2)).
///
/// # Privacy
/// The uniform-subsampling CLT of Bu, Dong, Long, Su (2020), as in TF Privacy's
/// `compute_mu_uniform`; the √2 comes from the replace-one neighbouring relation that
/// fixed-size batches need. An approximation, like [`mu_poisson`].
///
/// # Citations
/// As [`mu_poisson`].
///
/// # Errors
/// As [`mu_poisson`].
pub fn mu_uniform(
    sampling_rate: f64,
    noise_multiplier: f64,
    steps: u64,
) -> Result<f64, AccountingError> {
    let q = check::sampling_rate(sampling_rate)?;
    let sigma = check::positive("noise_multiplier", noise_multiplier)?;
    let t = check::count("steps", steps)? as f64;
    // e^x Φ(c) + 3Φ(−a) − 2 with x = 1/σ², c = 1.5/σ, a = 0.5/σ, rewritten with
    // Φ(z) − ½ = erf(z/√2)/2 so that large σ does not cancel catastrophically:
    // = (e^x − 1)Φ(c) + ½erf(c/√2) − (3/2)erf(a/√2).
    let x = 1.0 / (sigma * sigma);
    let (c, a) = (1.5 / sigma, 0.5 / sigma);
    let r = std::f64::consts::FRAC_1_SQRT_2;
    let inner = x.exp_m1() * normal_cdf(c) + 0.5 * libm::erf(c * r) - 1.5 * libm::erf(a * r);
    Ok(std::f64::consts::SQRT_2 * q * (t * inner.max(0.0)).sqrt())
}

/// δ(ε) of a μ-GDP mechanism: δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).
///
/// # Privacy
/// Exact: μ-GDP is equivalent to (ε, δ(ε))-DP for all ε ≥ 0 (Dong, Roth, Su 2019, Cor. 2.13).
/// Computed in log space (ln Φ from the erfc tail), so it neither overflows at large ε nor
/// loses its digits when δ is tiny.
///
/// # Citations
/// J. Dong, A. Roth, W. Su, "Gaussian differential privacy", JRSS-B 84(1), 2022
/// (arXiv:1905.02383, 2019).
///
/// # Errors
/// [`AccountingError::InvalidParameter`] if μ is negative or NaN (+∞ gives δ = 1), or ε is
/// negative or not finite.
pub fn delta_for_epsilon(mu: f64, epsilon: f64) -> Result<f64, AccountingError> {
    let mu = check::non_negative_or_infinite("mu", mu)?;
    let eps = check::non_negative("epsilon", epsilon)?;
    Ok(delta_unchecked(mu, eps))
}

fn delta_unchecked(mu: f64, eps: f64) -> f64 {
    if mu == 0.0 {
        return 0.0;
    }
    if mu == f64::INFINITY {
        return 1.0;
    }
    let ln_first = normal_log_cdf(-eps / mu + mu / 2.0);
    let ln_second = eps + normal_log_cdf(-eps / mu - mu / 2.0);
    if ln_second >= ln_first {
        return 0.0;
    }
    (ln_first.exp() * -(ln_second - ln_first).exp_m1()).clamp(0.0, 1.0)
}

/// The smallest ε with δ(ε) ≤ δ for a μ-GDP mechanism (bisection; the returned ε is on the safe
/// side: δ(ε) ≤ δ).
///
/// # Privacy
/// Inverts [`delta_for_epsilon`]. The search starts from the bracket
/// [0, μ²/2 + μ√(2 ln(1/δ))], whose upper end is the zCDP conversion of μ-GDP (ρ = μ²/2,
/// Bun, Steinke 2016, Prop. 1.3) and so always satisfies δ(ε) ≤ δ.
///
/// # Citations
/// As [`delta_for_epsilon`]; M. Bun, T. Steinke, "Concentrated differential privacy", TCC 2016.
///
/// # Errors
/// [`AccountingError::InvalidParameter`] if μ is negative or NaN or δ ∉ (0, 1). μ = +∞ gives
/// ε = +∞.
pub fn epsilon_for_delta(mu: f64, delta: f64) -> Result<f64, AccountingError> {
    let mu = check::non_negative_or_infinite("mu", mu)?;
    let delta = check::delta(delta)?;
    if mu == f64::INFINITY {
        return Ok(f64::INFINITY);
    }
    if delta_unchecked(mu, 0.0) <= delta {
        return Ok(0.0);
    }
    // −ln δ, not ln(1/δ): 1/δ overflows for a subnormal δ (1e-320), its logarithm does not.
    let mut hi = mu * mu / 2.0 + mu * (-2.0 * delta.ln()).sqrt();
    // Rounding can put δ(hi) a hair above δ; widen until it is not (or nothing finite is).
    while hi.is_finite() && delta_unchecked(mu, hi) > delta {
        hi = hi * 2.0 + 1e-12;
    }
    let eps = bisect(0.0, hi, |eps| delta_unchecked(mu, eps) <= delta).1;
    if !eps.is_finite() {
        return Err(AccountingError::Unsupported(format!(
            "the Gaussian-DP conversion has no finite epsilon for mu = {mu} at delta = {delta}"
        )));
    }
    Ok(eps)
}

/// The largest μ such that a μ-GDP mechanism is (ε, δ)-DP (bisection; the returned μ is on the
/// safe side: δ(ε; μ) ≤ δ).
///
/// # Privacy
/// δ(ε; μ) increases with μ, so this inverts [`delta_for_epsilon`] in μ.
///
/// # Citations
/// As [`delta_for_epsilon`].
///
/// # Errors
/// [`AccountingError::InvalidParameter`] if ε is negative or not finite or δ ∉ (0, 1).
pub fn mu_for(epsilon: f64, delta: f64) -> Result<f64, AccountingError> {
    let eps = check::non_negative("epsilon", epsilon)?;
    let delta = check::delta(delta)?;
    let mut hi = 1.0;
    // δ(ε; μ) → 1 as μ → ∞, so doubling ends (μ ≈ √(2ε) + O(1) suffices).
    while delta_unchecked(hi, eps) <= delta {
        hi *= 2.0;
    }
    Ok(bisect(0.0, hi, |mu| delta_unchecked(mu, eps) > delta).0)
}

/// Bisection on a monotone predicate with `ok(lo) == false`, `ok(hi) == true` assumed:
/// returns the final (lo, hi) bracket of the switch point.
fn bisect(mut lo: f64, mut hi: f64, ok: impl Fn(f64) -> bool) -> (f64, f64) {
    for _ in 0..BISECTION_STEPS {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    (lo, hi)
}

/// The GDP / central-limit-theorem accountant (add/remove-one relation).
///
/// # Privacy
/// Assigns each event a μ and composes by μ² = Σ μᵢ² (exact for Gaussians, Dong, Roth, Su
/// 2019, Cor. 3.3): Gaussian(σ) is 1/σ-GDP exactly; a Poisson-subsampled Gaussian step
/// contributes q²(e^{1/σ²} − 1) to μ², the CLT of Bu et al. 2020, meaningful only when many
/// such steps are composed; at q = 1 the step is a plain Gaussian and contributes 1/σ². Then ε(δ) by [`epsilon_for_delta`] and δ(ε) by
/// [`delta_for_epsilon`].
///
/// **This is an approximation** ([`BoundKind::Approximation`]): the CLT can underestimate the
/// true ε, in particular for few steps or large q (Gopi, Lee, Wutschitz 2021). Use the RDP or
/// PLD accountant for a guarantee.
///
/// # Citations
/// - Z. Bu, J. Dong, Q. Long, W. Su, "Deep learning with Gaussian differential privacy", 2020.
/// - J. Dong, A. Roth, W. Su, "Gaussian differential privacy", 2019/2022.
/// - S. Gopi, Y. T. Lee, L. Wutschitz, "Numerical composition of differential privacy",
///   NeurIPS 2021.
///
/// # Errors
/// [`AccountingError::InvalidParameter`] for bad parameters (named in the message);
/// [`AccountingError::Unsupported`] for events other than Gaussian, Poisson-sampled Gaussian and
/// their (self-)compositions.
///
/// # Example
/// ```
/// use dpml_accounting::gdp::GdpAccountant;
/// use dpml_accounting::{Accountant, PrivacyEvent};
///
/// let event = PrivacyEvent::dp_sgd(1.1, 256.0 / 60000.0, 14063);
/// let mu = GdpAccountant.mu(&event)?;
/// assert!((mu - 0.5736).abs() < 1e-4);
/// assert!((GdpAccountant.epsilon(&event, 1e-5)? - 2.324).abs() < 2e-3);
/// # Ok::<(), dpml_accounting::AccountingError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GdpAccountant;

impl GdpAccountant {
    /// The μ of `event` (see [`GdpAccountant`]).
    ///
    /// # Errors
    /// As [`GdpAccountant`].
    pub fn mu(&self, event: &PrivacyEvent) -> Result<f64, AccountingError> {
        Ok(mu_squared(event)?.sqrt())
    }
}

fn mu_squared(event: &PrivacyEvent) -> Result<f64, AccountingError> {
    match event {
        PrivacyEvent::Gaussian { noise_multiplier } => {
            let s = check::positive("noise_multiplier of a gaussian event", *noise_multiplier)?;
            Ok(1.0 / (s * s))
        }
        PrivacyEvent::PoissonSampled {
            sampling_rate,
            event,
        } => match event.as_ref() {
            PrivacyEvent::Gaussian { noise_multiplier } => {
                let q = check::sampling_rate(*sampling_rate)?;
                let s = check::positive("noise_multiplier of a gaussian event", *noise_multiplier)?;
                Ok(step_mu_squared(q, s))
            }
            other => Err(unsupported(&format!("poisson_sampled({})", other.kind()))),
        },
        PrivacyEvent::SelfComposed { event, count } => {
            let n = check::count("count of a self_composed event", *count)?;
            Ok(mu_squared(event)? * n as f64)
        }
        PrivacyEvent::Composed { events } => {
            let mut total = 0.0;
            for e in events {
                total += mu_squared(e)?;
            }
            Ok(total)
        }
        other => Err(unsupported(other.kind())),
    }
}

fn unsupported(what: &str) -> AccountingError {
    AccountingError::Unsupported(format!(
        "the GDP (CLT) accountant handles gaussian and poisson_sampled(gaussian) events and their \
         compositions only; got {what}"
    ))
}

impl Accountant for GdpAccountant {
    fn name(&self) -> &'static str {
        "gdp"
    }

    fn bound(&self) -> BoundKind {
        BoundKind::Approximation
    }

    fn epsilon(&self, event: &PrivacyEvent, delta: f64) -> Result<f64, AccountingError> {
        epsilon_for_delta(self.mu(event)?, delta)
    }

    fn delta(&self, event: &PrivacyEvent, epsilon: f64) -> Result<f64, AccountingError> {
        delta_for_epsilon(self.mu(event)?, epsilon)
    }
}

#[cfg(test)]
mod tests;
