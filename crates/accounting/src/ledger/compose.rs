//! How the ledger adds up its entries: basic sequential composition with outward rounding, or
//! the tightest of basic composition and upper-bound accountants (PLD, RDP).

use super::{Budget, Composition, LedgerError};
use crate::pld::PldAccountant;
use crate::rdp::{Conversion, RdpAccountant};
use crate::{Accountant, AccountingError, BoundKind, PrivacyEvent};

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
    // An infinite total fits no budget, though `limit · (1 + slack)` overflows to +∞ for a
    // limit near f64::MAX.
    total.is_finite() && total <= limit * (1.0 + ROUNDING_SLACK)
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

/// How much more ε than an accountant's the entries' own (ε, δ), added up, may cost and still
/// be preferred: adding up spends no more δ than the entries' own (none after pure-ε spends),
/// so δ is spent on an accountant's bound only where it saves more than 1% of ε.
pub(super) const DELTA_WORTH: f64 = 0.01;

/// Composes `costs` under `composition` for a ledger with `budget`.
///
/// Basic: (Σε_i, Σδ_i). With accountants (upper bounds only): their smallest ε for
/// Composed(events) at δ_budget competes with Σε_i, which is kept (with Σδ_i) when Σδ_i ≤
/// δ_budget and it is at most [`DELTA_WORTH`] above the accountant's ε (unless only the
/// accountant's fits the budget). An accountant that gives no bound (it cannot handle the
/// events, or has no finite ε at the budget's δ, as after a spend of the whole δ budget by an
/// (ε, δ) event), or a budget with δ = 0 (accountants need δ > 0), leaves basic composition,
/// which always holds.
///
/// # Errors
/// [`LedgerError::Accountant`] if an accountant is not an upper bound, or returns NaN or a
/// negative ε.
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
    let names = match composition {
        Composition::Basic => return Ok(basic),
        Composition::Accountant(a) => {
            require_upper_bound(a.as_ref())?;
            a.name().to_string()
        }
        Composition::Tightest => "pld".to_string(),
    };
    if costs.is_empty() {
        return Ok(Spent {
            composition: names,
            ..basic
        });
    }
    if budget.delta == 0.0 {
        return Ok(Spent {
            composition: "basic (accountants need a δ budget > 0)".into(),
            ..basic
        });
    }
    let events = PrivacyEvent::Composed {
        events: costs.iter().map(|c| c.event.clone()).collect(),
    };
    let bounds = match composition {
        Composition::Accountant(a) => vec![accountant_bound(a.as_ref(), &events, budget.delta)?],
        _ => vec![
            pld_bound(&events, budget.delta)?,
            accountant_bound(
                &RdpAccountant::new(Conversion::Current),
                &events,
                budget.delta,
            )?,
        ],
    };
    let mut no_bound = Vec::new();
    let mut best: Option<(f64, String)> = None;
    for bound in bounds {
        match bound {
            Bound::Epsilon(e, name) if best.as_ref().is_none_or(|(b, _)| e < *b) => {
                best = Some((e, name))
            }
            Bound::Epsilon(..) => {}
            Bound::NoBound(why) => no_bound.push(why),
        }
    }
    let Some((epsilon, name)) = best else {
        return Ok(Spent {
            composition: format!("basic ({})", no_bound.join("; ")),
            ..basic
        });
    };
    let accounted = Spent {
        epsilon,
        delta: budget.delta,
        composition: name.clone(),
    };
    let basic_holds = fits(basic.delta, budget.delta);
    let basic_close = basic.epsilon <= epsilon * (1.0 + DELTA_WORTH);
    let basic_fits_as_well = basic.within(budget) || !accounted.within(budget);
    if basic_holds && basic_close && basic_fits_as_well {
        let why = if basic.epsilon <= epsilon {
            format!("basic (tighter than {name})")
        } else {
            format!("basic (within 1% of {name}, spending no more δ)")
        };
        return Ok(Spent {
            composition: why,
            ..basic
        });
    }
    Ok(accounted)
}

/// What one accountant says about the composed events.
enum Bound {
    /// Its ε at the budget's δ, and the name of who computed it.
    Epsilon(f64, String),
    /// It gives no bound for them: why.
    NoBound(String),
}

/// The PLD accountant's upper bound (which is RDP's below the PLD's floor in δ: named so).
fn pld_bound(events: &PrivacyEvent, delta: f64) -> Result<Bound, LedgerError> {
    match PldAccountant::pessimistic().upper_epsilon(events, delta) {
        Ok((e, note)) => check_epsilon("pld", e)
            .map(|e| Bound::Epsilon(e, if note.is_some() { "rdp" } else { "pld" }.into())),
        Err(e) => Ok(no_bound("pld", &e)),
    }
}

/// An accountant's ε, refused unless it is an upper bound.
fn accountant_bound(
    accountant: &dyn Accountant,
    events: &PrivacyEvent,
    delta: f64,
) -> Result<Bound, LedgerError> {
    let name = accountant.name();
    require_upper_bound(accountant)?;
    match accountant.epsilon(events, delta) {
        Ok(e) => check_epsilon(name, e).map(|e| Bound::Epsilon(e, name.to_string())),
        Err(e) => Ok(no_bound(name, &e)),
    }
}

/// Why an accountant gave no bound: basic composition, which always holds, answers instead.
fn no_bound(name: &str, error: &AccountingError) -> Bound {
    match error {
        AccountingError::Unsupported(why) => Bound::NoBound(format!("{name} unsupported: {why}")),
        other => Bound::NoBound(format!("{name} gives no bound: {other}")),
    }
}

/// Only an upper bound may limit a budget.
fn require_upper_bound(accountant: &dyn Accountant) -> Result<(), LedgerError> {
    if accountant.bound() == BoundKind::UpperBound {
        return Ok(());
    }
    Err(LedgerError::Accountant {
        accountant: accountant.name().to_string(),
        message: format!(
            "it reports {:?}, not an upper bound, so it may not limit a budget",
            accountant.bound()
        ),
    })
}

fn check_epsilon(name: &str, e: f64) -> Result<f64, LedgerError> {
    if e.is_nan() || e < 0.0 {
        return Err(LedgerError::Accountant {
            accountant: name.to_string(),
            message: format!("it returned an invalid ε = {e}"),
        });
    }
    Ok(e)
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
        // A limit near f64::MAX: its slack overflows, an infinite total must still not fit.
        assert!(!fits(f64::INFINITY, f64::MAX));
        assert!(fits(f64::MAX, f64::MAX));
    }
}
