//! How the ledger adds up its entries: basic sequential composition with outward rounding, or
//! the tighter of basic composition and an upper-bound accountant.

use super::{Budget, Composition, LedgerError};
use crate::{AccountingError, BoundKind, PrivacyEvent};

/// Relative tolerance when comparing a total with the budget.
///
/// Decimal inputs such as 0.1 are not exact in binary: ten spends of ε = 0.1 sum to
/// 1.0000000000000000555… > 1.0 in exact arithmetic on the stored numbers. A total within
/// `budget · (1 + ROUNDING_SLACK)` counts as within the budget, so a user's decimal arithmetic
/// holds; the total can exceed the budget by at most 10⁻¹² relative, far below any meaningful ε.
pub(super) const ROUNDING_SLACK: f64 = 1e-12;

/// The cost of one entry, as composition sees it.
pub(super) struct Cost<'a> {
    /// What the computation did.
    pub event: &'a PrivacyEvent,
    /// Its ε by itself.
    pub epsilon: f64,
    /// Its δ by itself.
    pub delta: f64,
}

/// The composed spending of a list of entries.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Spent {
    /// Composed ε (an upper bound).
    pub epsilon: f64,
    /// The δ at which `epsilon` holds.
    pub delta: f64,
    /// Which composition produced the numbers.
    pub composition: String,
}

impl Spent {
    /// Whether both totals fit in `budget` (up to [`ROUNDING_SLACK`]).
    pub fn within(&self, budget: &Budget) -> bool {
        fits(self.epsilon, budget.epsilon) && fits(self.delta, budget.delta)
    }
}

fn fits(total: f64, limit: f64) -> bool {
    total <= limit * (1.0 + ROUNDING_SLACK)
}

/// The smallest `f64` greater than `x`, for finite `x ≥ 0`.
fn next_up(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

/// `a + b` rounded toward +∞ (for finite a, b ≥ 0), so that a sum of costs never falls below
/// the exact sum of the stored numbers. The rounding error is recovered exactly by
/// Knuth's TwoSum.
fn add_up(a: f64, b: f64) -> f64 {
    let s = a + b;
    if !s.is_finite() {
        return s;
    }
    let b_virtual = s - a;
    let a_virtual = s - b_virtual;
    let error = (a - a_virtual) + (b - b_virtual);
    if error > 0.0 { next_up(s) } else { s }
}

/// Σ values, rounded toward +∞.
pub(super) fn sum_up(values: impl IntoIterator<Item = f64>) -> f64 {
    values.into_iter().fold(0.0, add_up)
}

/// Composes `costs` under `composition` for a ledger with `budget`.
///
/// Basic: (Σε_i, Σδ_i). Accountant (upper bound only): ε = min(Σε_i, ε_acc(Composed(events),
/// δ_budget)) where Σε_i only competes if Σδ_i ≤ δ_budget (otherwise it is no bound at δ_budget);
/// δ is δ_budget when the accountant's ε is used, Σδ_i when basic is tighter. An accountant
/// answering `Unsupported`, or a budget with δ = 0 (accountants need δ > 0), falls back to basic.
///
/// # Errors
/// [`LedgerError::Accountant`] if the accountant is not an upper bound, fails for another reason
/// than `Unsupported`, or returns NaN or a negative ε.
pub(super) fn compose(
    budget: &Budget,
    composition: &Composition,
    costs: &[Cost<'_>],
) -> Result<Spent, LedgerError> {
    let basic = Spent {
        epsilon: sum_up(costs.iter().map(|c| c.epsilon)),
        delta: sum_up(costs.iter().map(|c| c.delta)),
        composition: "basic".to_string(),
    };
    let Composition::Accountant(accountant) = composition else {
        return Ok(basic);
    };
    let name = accountant.name();
    let refuse = |message: String| LedgerError::Accountant {
        accountant: name.to_string(),
        message,
    };
    if accountant.bound() != BoundKind::UpperBound {
        return Err(refuse(format!(
            "it reports {:?}, not an upper bound, so it may not limit a budget",
            accountant.bound()
        )));
    }
    if costs.is_empty() {
        return Ok(Spent {
            composition: name.to_string(),
            ..basic
        });
    }
    if budget.delta == 0.0 {
        return Ok(Spent {
            composition: format!("basic ({name} needs a δ budget > 0)"),
            ..basic
        });
    }
    let events = PrivacyEvent::Composed {
        events: costs.iter().map(|c| c.event.clone()).collect(),
    };
    let epsilon = match accountant.epsilon(&events, budget.delta) {
        Ok(e) if e.is_nan() || e < 0.0 => {
            return Err(refuse(format!("it returned an invalid ε = {e}")));
        }
        Ok(e) => e,
        Err(AccountingError::Unsupported(why)) => {
            return Ok(Spent {
                composition: format!("basic ({name} unsupported: {why})"),
                ..basic
            });
        }
        Err(other) => return Err(refuse(other.to_string())),
    };
    if basic.delta <= budget.delta && basic.epsilon < epsilon {
        return Ok(Spent {
            composition: format!("basic (tighter than {name})"),
            ..basic
        });
    }
    Ok(Spent {
        epsilon,
        delta: budget.delta,
        composition: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_up_never_falls_below_the_exact_sum() {
        // 0.1 + 0.2 rounds to nearest 0.30000000000000004 (above the exact sum), while
        // 0.1 + 0.7 rounds to nearest 0.7999999999999999 (below it): rounding up must step
        // that one up by one ulp and leave exact sums alone.
        assert_eq!(add_up(0.5, 0.25), 0.75);
        assert_eq!(add_up(0.1, 0.7), next_up(0.1 + 0.7));
        assert!(add_up(0.1, 0.2) >= 0.1 + 0.2);
        assert_eq!(sum_up([]), 0.0);
        assert_eq!(add_up(f64::MAX, f64::MAX), f64::INFINITY);
        // Exact check with integers scaled by 2^-30: sums of dyadic numbers are exact.
        let xs: Vec<f64> = (1..100)
            .map(|i| f64::from(i) / f64::from(1 << 30))
            .collect();
        assert_eq!(sum_up(xs.iter().copied()), 4950.0 / f64::from(1 << 30));
    }

    #[test]
    fn fits_allows_decimal_rounding_but_not_more() {
        let ten_tenths = sum_up(std::iter::repeat_n(0.1, 10));
        assert!(ten_tenths > 1.0, "the exact sum exceeds 1.0: {ten_tenths}");
        assert!(fits(ten_tenths, 1.0));
        assert!(!fits(1.0 + 1e-9, 1.0));
        assert!(fits(0.0, 0.0));
        assert!(!fits(1e-300, 0.0));
        assert!(!fits(f64::INFINITY, 1.0));
    }
}
