//! Rényi-DP accountant: per-event RDP curves on a grid of orders, composed by addition and
//! converted to (ε, δ).
//!
//! Handles the Poisson-subsampled Gaussian at integer and fractional orders, Gaussian, Laplace,
//! discrete Laplace, discrete Gaussian, k-ary randomized response and pure (ε, 0) events, their
//! self-compositions and compositions. (ε, δ) events with δ > 0 have no RDP curve and are
//! composed by basic composition beside the curve. The work is O(Σ orders) per distinct event
//! and independent of the number of steps (a T-fold self-composition multiplies by T).

pub(crate) mod check;
mod compose;
mod conversion;
mod curves;
mod repeat;
mod repeat_all;
mod sampled_gaussian;

pub use conversion::Conversion;

use crate::{Accountant, AccountingError, BoundKind, PrivacyEvent};
use compose::{Cost, PureAs};

/// An RDP value as a bound: rounding below 0 is 0, and NaN (sums that overflowed, as
/// `∞ − ∞`) is +∞. Never `NaN.max(0.0)`, which is 0: no privacy loss where there is all of it.
pub(crate) fn bound(value: f64) -> f64 {
    if value.is_nan() {
        f64::INFINITY
    } else {
        value.max(0.0)
    }
}

/// The default RDP orders: 1.1 to 10.9 in steps of 0.1, the integers 11 to 63, then 128, 256,
/// 512 and 1024 (156 orders).
pub fn default_orders() -> Vec<f64> {
    let fine = (11..=109).map(|k| f64::from(k) / 10.0);
    let integers = (11..=63).map(f64::from);
    let large = [128.0, 256.0, 512.0, 1024.0];
    fine.chain(integers).chain(large).collect()
}

/// The Rényi-DP accountant (add/remove-one neighbouring relation).
///
/// # Privacy
/// A mechanism is (α, ε(α))-RDP if D_α(M(D) ‖ M(D′)) ≤ ε(α) for all neighbours D, D′.
/// RDP composes additively: ε_total(α) = Σᵢ εᵢ(α) (Mironov 2017, Prop. 1). Curves used:
/// - Gaussian(σ): α/(2σ²); discrete Gaussian: αΔ²/(2σ²) (Canonne, Kamath, Steinke 2020).
/// - Poisson-sampled Gaussian: ln(A_α)/(α − 1), integer α by the binomial sum and fractional α
///   by the two-sided erfc series (Mironov, Talwar, Zhang 2019, §3.2–3.3).
/// - Laplace with ε = 1/b: ε + ln(1 + (α−1)(e^{(1−2α)ε} − 1)/(2α−1))/(α−1) (Mironov 2017,
///   Prop. 6); discrete Laplace and k-ary randomized response: their exact Rényi divergences.
/// - Pure (ε, 0) events: the binary randomized-response curve with parameter ε, the largest
///   RDP any ε-DP pair can have (Kairouz, Oh, Viswanath 2015), below min(ε, αε²/2).
/// - Poisson sampling around pure/approximate events: (ln(1 + q(e^ε − 1)), qδ) (Balle, Barthe,
///   Gaboardi 2018), then as above.
///
/// Conversion to (ε, δ) by [`Conversion`] (default: Balle et al. 2020, Thm 21), minimised over
/// the orders. With (εᵢ, δᵢ) events (δᵢ > 0) in the composition:
/// ε = ε_rdp(δ − Σδᵢ) + Σεᵢ (basic composition, Dwork et al. 2006). Pure events are placed both
/// in the RDP curve and in the basic-composition sum, and the smaller ε is reported.
/// The result is an upper bound ([`BoundKind::UpperBound`]).
///
/// # Citations
/// - I. Mironov, "Rényi differential privacy", CSF 2017.
/// - I. Mironov, K. Talwar, L. Zhang, "Rényi differential privacy of the sampled Gaussian
///   mechanism", arXiv:1908.10530, 2019.
/// - B. Balle, G. Barthe, M. Gaboardi, J. Hsu, T. Sato, "Hypothesis testing interpretations and
///   Rényi differential privacy", AISTATS 2020.
/// - P. Kairouz, S. Oh, P. Viswanath, "The composition theorem for differential privacy",
///   ICML 2015.
///
/// # Errors
/// [`AccountingError::InvalidParameter`] for a bad order, δ, ε or event field (the message names
/// it); [`AccountingError::Unsupported`] for Poisson sampling around events other than Gaussians
/// or (ε, δ)-expressible ones, and from [`RdpAccountant::rdp`] for events with δ > 0.
///
/// # Example
/// ```
/// use dpml_accounting::rdp::{Conversion, RdpAccountant};
/// use dpml_accounting::PrivacyEvent;
///
/// let acc = RdpAccountant::new(Conversion::Current);
/// let event = PrivacyEvent::dp_sgd(1.1, 256.0 / 60000.0, 14063);
/// let (eps, order) = acc.epsilon_and_order(&event, 1e-5)?;
/// assert!((eps - 2.597).abs() < 2e-3 && order == 8.1);
/// # Ok::<(), dpml_accounting::AccountingError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RdpAccountant {
    /// The orders α (each finite and > 1) at which curves are evaluated.
    pub orders: Vec<f64>,
    /// How curves are converted to (ε, δ).
    pub conversion: Conversion,
}

impl Default for RdpAccountant {
    fn default() -> Self {
        RdpAccountant::new(Conversion::Current)
    }
}

impl RdpAccountant {
    /// An accountant with the [`default_orders`] and the given conversion.
    pub fn new(conversion: Conversion) -> Self {
        RdpAccountant {
            orders: default_orders(),
            conversion,
        }
    }

    /// The RDP of `event` at each of [`RdpAccountant::orders`] (same length and order).
    ///
    /// # Errors
    /// As [`RdpAccountant`]; also [`AccountingError::Unsupported`] if the event contains an
    /// (ε, δ) part with δ > 0, which has no RDP curve.
    pub fn rdp(&self, event: &PrivacyEvent) -> Result<Vec<f64>, AccountingError> {
        let cost = self.cost(event, PureAs::Rdp)?;
        if cost.delta > 0.0 {
            return Err(AccountingError::Unsupported(format!(
                "the event contains (ε, δ) parts with total δ = {} > 0, which have no RDP curve; \
                 use epsilon_and_order, which composes them by basic composition",
                cost.delta
            )));
        }
        Ok(cost.rdp)
    }

    /// The smallest ε such that `event` is (ε, δ)-DP, and the order α that attains it.
    ///
    /// # Errors
    /// As [`RdpAccountant`]; also [`AccountingError::InvalidParameter`] if δ is not in (0, 1)
    /// or does not exceed the total δ of the (ε, δ) events in the composition.
    pub fn epsilon_and_order(
        &self,
        event: &PrivacyEvent,
        delta: f64,
    ) -> Result<(f64, f64), AccountingError> {
        let delta = check::delta(delta)?;
        let as_rdp = self.cost(event, PureAs::Rdp)?;
        let mut best = self.epsilon_of(&as_rdp, delta)?;
        if as_rdp.has_pure {
            let as_eps = self.epsilon_of(&self.cost(event, PureAs::Epsilon)?, delta)?;
            if as_eps.0 < best.0 {
                best = as_eps;
            }
        }
        Ok(best)
    }

    /// The smallest δ such that `event` is (ε, δ)-DP, and the order α that attains it.
    ///
    /// # Errors
    /// As [`RdpAccountant`]; also [`AccountingError::InvalidParameter`] if ε is negative or not
    /// finite.
    pub fn delta_and_order(
        &self,
        event: &PrivacyEvent,
        epsilon: f64,
    ) -> Result<(f64, f64), AccountingError> {
        let epsilon = check::non_negative("epsilon", epsilon)?;
        let as_rdp = self.cost(event, PureAs::Rdp)?;
        let mut best = self.delta_of(&as_rdp, epsilon);
        if as_rdp.has_pure {
            let as_eps = self.delta_of(&self.cost(event, PureAs::Epsilon)?, epsilon);
            if as_eps.0 < best.0 {
                best = as_eps;
            }
        }
        Ok(best)
    }

    fn cost(&self, event: &PrivacyEvent, mode: PureAs) -> Result<Cost, AccountingError> {
        self.check_orders()?;
        compose::cost(event, &self.orders, mode)
    }

    fn check_orders(&self) -> Result<(), AccountingError> {
        if self.orders.is_empty() {
            return Err(AccountingError::InvalidParameter(
                "RDP orders must not be empty".into(),
            ));
        }
        match self.orders.iter().find(|a| !(a.is_finite() && **a > 1.0)) {
            Some(a) => Err(AccountingError::InvalidParameter(format!(
                "RDP orders must be finite and > 1, got {a}"
            ))),
            None => Ok(()),
        }
    }

    /// ε = ε_rdp(δ − Σδᵢ) + Σεᵢ.
    fn epsilon_of(&self, cost: &Cost, delta: f64) -> Result<(f64, f64), AccountingError> {
        let remaining = delta - cost.delta;
        if cost.rdp_is_zero() && remaining >= 0.0 {
            return Ok((cost.epsilon, self.orders[0]));
        }
        if remaining <= 0.0 {
            return Err(AccountingError::InvalidParameter(format!(
                "delta = {delta} must exceed the total delta {} of the (ε, δ) events in the \
                 composition (they are composed by basic composition: ε = ε_rdp(δ − Σδᵢ) + Σεᵢ)",
                cost.delta
            )));
        }
        let (eps, order) = conversion::epsilon(&self.orders, &cost.rdp, remaining, self.conversion);
        Ok((eps + cost.epsilon, order))
    }

    /// δ = δ_rdp(ε − Σεᵢ) + Σδᵢ, or 1 (no guarantee) when ε < Σεᵢ.
    fn delta_of(&self, cost: &Cost, epsilon: f64) -> (f64, f64) {
        let remaining = epsilon - cost.epsilon;
        if remaining < 0.0 {
            return (1.0, self.orders[0]);
        }
        let (d, order) = if cost.rdp_is_zero() {
            (0.0, self.orders[0])
        } else {
            conversion::delta(&self.orders, &cost.rdp, remaining, self.conversion)
        };
        ((d + cost.delta).min(1.0), order)
    }
}

impl Accountant for RdpAccountant {
    fn name(&self) -> &'static str {
        "rdp"
    }

    fn bound(&self) -> BoundKind {
        BoundKind::UpperBound
    }

    fn epsilon(&self, event: &PrivacyEvent, delta: f64) -> Result<f64, AccountingError> {
        Ok(self.epsilon_and_order(event, delta)?.0)
    }

    fn delta(&self, event: &PrivacyEvent, epsilon: f64) -> Result<f64, AccountingError> {
        Ok(self.delta_and_order(event, epsilon)?.0)
    }
}

#[cfg(test)]
mod tests;
