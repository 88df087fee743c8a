//! Building the composed privacy-loss distribution of an event: choose the grid, discretise
//! each distinct mechanism once, self-compose it by its count, and convolve the results, for the
//! remove-one and (when it differs) the add-one direction.
//!
//! Automatic grid: start from 1e-4 (Google's `dp_accounting` default), finer when the composed
//! loss is small (a thousandth of its standard deviation or of the largest atom), aligned so the
//! largest atom of Laplace/RR/(ε, δ)/discrete Laplace falls on the grid, and coarsened until every
//! PMF and FFT window fits in [`AUTO_MAX_POINTS`] (bounded memory whatever ε or the step count).

use super::leaf::{Flat, Leaf};
use super::pmf::{MAX_POINTS, Pmf, TAIL_MASS, Window, too_many_points};
use crate::{AccountingError, PrivacyEvent};

/// The grid spacing used when the composed loss is not small.
pub(crate) const DEFAULT_INTERVAL: f64 = 1e-4;

/// Grid points per standard deviation (or per largest atom) of the composed loss, at least.
const POINTS_PER_SCALE: f64 = 1000.0;

/// The most points the automatic grid gives one PMF or window (explicit intervals may use up to
/// [`MAX_POINTS`]). A few steps at a small sampling rate otherwise ask for the finest grid of
/// all (the composed loss is narrow, each step's loss range wide): 2^21 points took 100 MB of FFT
/// buffers to gain nothing visible in ε.
const AUTO_MAX_POINTS: usize = 1 << 19;

/// How many times the automatic grid may be coarsened before giving up.
const MAX_ATTEMPTS: usize = 64;

/// The composed PMFs, one per neighbouring direction.
#[derive(Debug, Clone)]
pub(crate) struct Composed {
    /// Remove-one direction (P has the extra record).
    pub(crate) remove: Pmf,
    /// Add-one direction, when it differs from remove-one.
    pub(crate) add: Option<Pmf>,
    /// Grid spacing used.
    pub(crate) h: f64,
}

/// One distinct mechanism on the grid: its PMFs per direction and their composition windows.
struct Group {
    count: u64,
    remove: (Pmf, Window),
    add: Option<(Pmf, Window)>,
}

/// The composed PLD of `event` on grid `interval` (0: automatic).
///
/// # Errors
/// Invalid or unsupported events (see [`Flat::from_event`]); a fixed `interval` whose grid
/// would exceed [`MAX_POINTS`].
pub(crate) fn build(
    event: &PrivacyEvent,
    interval: f64,
    pessimistic: bool,
) -> Result<Composed, AccountingError> {
    let flat = Flat::from_event(event)?;
    let auto = interval == 0.0;
    if flat.leaves.is_empty() {
        let h = if auto { DEFAULT_INTERVAL } else { interval };
        return Ok(Composed {
            remove: Pmf::identity(h, pessimistic),
            add: None,
            h,
        });
    }
    let anchor = flat
        .leaves
        .iter()
        .filter_map(|(l, _)| l.anchor())
        .fold(None, |m: Option<f64>, a| Some(m.map_or(a, |m| m.max(a))));
    let mut h = if auto {
        initial_interval(&flat.leaves)?
    } else {
        interval
    };
    let cap = if auto { AUTO_MAX_POINTS } else { MAX_POINTS };
    for _ in 0..MAX_ATTEMPTS {
        if auto {
            h = align(h, anchor);
        }
        let widest = flat
            .leaves
            .iter()
            .map(|(l, _)| (l.span().1 - l.span().0) / h + 3.0)
            .fold(0.0, f64::max);
        if !widest.is_finite() {
            // Losses near f64::MAX: no grid spans them (an infinite interval would read ε = 0).
            return Err(AccountingError::Unsupported(
                "the privacy loss is too large to account for (ε beyond about 1e300, or noise \
                 below about 1e-150 of the sensitivity): such a release has no privacy"
                    .into(),
            ));
        }
        if widest > cap as f64 {
            if !auto {
                return Err(too_many_points(widest as u64, h));
            }
            h *= (widest / cap as f64 * 1.25).max(4.0);
            continue;
        }
        let groups = discretise(&flat.leaves, h, pessimistic)?;
        let need = total_points(&groups);
        if need > cap as u64 {
            if !auto {
                return Err(too_many_points(need, h));
            }
            h *= (need as f64 / cap as f64 * 1.25).max(4.0);
            continue;
        }
        return compose(&groups, h);
    }
    Err(AccountingError::InvalidParameter(format!(
        "no privacy-loss grid up to interval {h} fits in {cap} points for this event"
    )))
}

/// Grid spacing from the spread of the composed loss: `min(1e-4, scale/1000)` where `scale` is the
/// larger of the composed standard deviation and the largest atom.
fn initial_interval(leaves: &[(Leaf, u64)]) -> Result<f64, AccountingError> {
    let (mut var_remove, mut var_add, mut anchor) = (0.0f64, 0.0f64, 0.0f64);
    for (leaf, count) in leaves {
        let (lo, hi) = leaf.span();
        let coarse = if hi > lo { (hi - lo) / 4096.0 } else { 1.0 };
        let cells = leaf.cells(coarse)?;
        let n = *count as f64;
        var_remove += n * cells.moments().1;
        var_add += n * if leaf.symmetric() {
            cells.moments().1
        } else {
            cells.swapped().moments().1
        };
        anchor = anchor.max(leaf.anchor().unwrap_or(0.0));
    }
    let scale = var_remove.max(var_add).sqrt().max(anchor);
    Ok(if scale > 0.0 && scale.is_finite() {
        DEFAULT_INTERVAL.min(scale / POINTS_PER_SCALE).max(1e-12)
    } else {
        DEFAULT_INTERVAL
    })
}

/// The largest `h' ≤ h` of the form `anchor / k` (k a positive integer), when `anchor ≥ h`.
fn align(h: f64, anchor: Option<f64>) -> f64 {
    match anchor {
        Some(a) if a >= h => a / (a / h).ceil(),
        _ => h,
    }
}

fn discretise(
    leaves: &[(Leaf, u64)],
    h: f64,
    pessimistic: bool,
) -> Result<Vec<Group>, AccountingError> {
    let half = TAIL_MASS / 2.0;
    leaves
        .iter()
        .map(|(leaf, count)| {
            let cells = leaf.cells(h)?;
            let remove = cells.to_pmf(pessimistic);
            let add = (!leaf.symmetric()).then(|| cells.swapped().to_pmf(pessimistic));
            let with_window = |p: Pmf| {
                let w = p.chernoff_window(*count, half);
                (p, w)
            };
            Ok(Group {
                count: *count,
                remove: with_window(remove),
                add: add.map(with_window),
            })
        })
        .collect()
}

/// Grid points the composition may need at once: the sum of the groups' windows, per direction.
fn total_points(groups: &[Group]) -> u64 {
    let remove: u64 = groups
        .iter()
        .map(|g| g.remove.1.len)
        .fold(0, u64::saturating_add);
    let add: u64 = groups
        .iter()
        .map(|g| g.add.as_ref().unwrap_or(&g.remove).1.len)
        .fold(0, u64::saturating_add);
    remove.max(add)
}

fn compose(groups: &[Group], h: f64) -> Result<Composed, AccountingError> {
    let direction = |pick: &dyn Fn(&Group) -> &(Pmf, Window)| -> Result<Pmf, AccountingError> {
        let mut parts = groups
            .iter()
            .map(|g| {
                let (pmf, window) = pick(g);
                pmf.self_compose_in(g.count, *window)
            })
            .collect::<Result<Vec<_>, _>>()?;
        parts.sort_by_key(|p| p.probs.len());
        let mut iter = parts.into_iter();
        let first = iter
            .next()
            .ok_or_else(|| AccountingError::InvalidParameter("empty composition".into()))?;
        iter.try_fold(first, |acc, p| acc.compose(&p))
    };
    let remove = direction(&|g| &g.remove)?;
    let add = if groups.iter().any(|g| g.add.is_some()) {
        Some(direction(&|g| g.add.as_ref().unwrap_or(&g.remove))?)
    } else {
        None
    };
    Ok(Composed { remove, add, h })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_puts_the_anchor_on_the_grid() {
        let h = align(1e-4, Some(3f64.ln()));
        assert!(h <= 1e-4 && h > 0.5e-4);
        let k = 3f64.ln() / h;
        assert!((k - k.round()).abs() < 1e-9, "{k}");
        assert_eq!(align(1e-4, Some(1e-5)), 1e-4);
        assert_eq!(align(1e-4, None), 1e-4);
    }

    #[test]
    fn fixed_interval_too_fine_is_refused_not_allocated() {
        let e = PrivacyEvent::dp_sgd(0.3, 0.5, 1000);
        match build(&e, 1e-6, true) {
            Err(AccountingError::InvalidParameter(m)) => assert!(m.contains("points"), "{m}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn automatic_interval_is_fine_for_small_losses_and_coarse_for_large() {
        let small = build(
            &PrivacyEvent::Gaussian {
                noise_multiplier: 200.0,
            },
            0.0,
            true,
        )
        .unwrap();
        assert!(small.h < 1e-5, "{}", small.h);
        let large = build(&PrivacyEvent::dp_sgd(0.3, 0.5, 1000), 0.0, true).unwrap();
        assert!(large.h > 1e-4, "{}", large.h);
        assert!(large.remove.probs.len() <= MAX_POINTS);
    }
}
