//! Privacy-loss-distribution (PLD) accounting: the tightest standard accountant for composed
//! mechanisms, with a guaranteed upper bound (pessimistic) and a guaranteed lower bound
//! (optimistic) on the true ε.
//!
//! The privacy loss of a mechanism on neighbouring data sets `D, D'` is `L = ln(P(o)/Q(o))` for
//! `o ~ P = M(D)`, `Q = M(D')`. Under adaptive composition losses add, so the composed PLD is the
//! convolution of the per-mechanism PLDs, and
//!
//! `δ(ε) = P(L = ∞) + E[(1 − e^{ε − L})₊]`.
//!
//! Each mechanism's PLD is discretised on a grid of spacing h from its exact masses
//! (module `discretize`), self-composed by one FFT raised to the repetition count on a window from
//! Chernoff bounds, and convolved with the others by FFT (modules `pmf`, `fft`). Tails are cut after
//! every composition (at most 1e-15 of mass, moved to `+∞` when pessimistic), so memory stays
//! bounded (module `build` picks h automatically and keeps every grid under 2²¹ points).
//!
//! Neighbouring relation: add/remove one record. For the Poisson-subsampled Gaussian the two
//! directions differ (remove: `(1−q)N(0,σ²) + qN(1,σ²)` vs `N(0,σ²)`; add: the reverse); both are
//! composed separately and the larger δ (equivalently the larger ε) is reported, as in Google's
//! `dp_accounting`.

mod build;
mod discrete;
mod discretize;
mod fft;
mod gaussian;
mod leaf;
mod pmf;

use crate::rdp::RdpAccountant;
use crate::{Accountant, AccountingError, BoundKind, PrivacyEvent};
use pmf::Pmf;

/// The smallest δ at which the pessimistic PLD reports its own ε. The discretised PLD is an
/// upper bound only up to about 1e-15 in δ: every composition moves up to 1e-15 of tail mass to
/// `+∞` (`pmf::TAIL_MASS`) and the FFT's round-off is of that order. Below 1e-12 that floor is
/// more than 0.1% of δ (and from about 1e-14 on it exceeds δ, so the PLD's ε is `+∞`), so
/// [`PldAccountant::upper_epsilon`] answers with the RDP bound there instead, and says so.
pub const MIN_DELTA: f64 = 1e-12;

/// Which side of the true privacy curve a discretised PLD approximates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Estimate {
    /// Losses rounded up ("connect the dots"): every δ and ε is an upper bound (safe to publish).
    #[default]
    Pessimistic,
    /// Losses merged/rounded down: every δ and ε is a lower bound (shows how tight the other is).
    Optimistic,
}

/// The privacy-loss-distribution accountant.
///
/// # Privacy
/// For add/remove-one neighbours and each direction `(P, Q)`:
/// `δ(ε) = P(L = ∞) + Σ_ℓ p(ℓ) (1 − e^{ε − ℓ})₊` with `L` the composed privacy loss (the
/// convolution of the mechanisms' PLDs); the event is `(ε, max over directions δ(ε))`-DP, and
/// ε(δ) is the smallest ε ≥ 0 with `δ(ε) ≤ δ`. With [`Estimate::Pessimistic`] the discretised PLD
/// dominates the true one (connect-the-dots splitting, tails to `+∞`), so the numbers are upper
/// bounds up to floating-point round-off (about 1e-15 in δ); with [`Estimate::Optimistic`] they
/// are lower bounds. Below δ = [`MIN_DELTA`] that round-off matters, and where the PLD's ε is
/// not finite it says nothing, so the pessimistic accountant's ε there is the RDP bound
/// ([`PldAccountant::upper_epsilon`], which also returns a note saying so).
///
/// Supported events: Laplace, Gaussian, randomized response, (ε, δ), discrete Laplace, discrete
/// Gaussian, Poisson-sampled Gaussian (and Poisson-sampled compositions of Gaussians), and any
/// `SelfComposed`/`Composed` of these.
///
/// # Citations
/// - Meiser, Mohammadi. "Tight on budget? Tight bounds for r-fold approximate differential
///   privacy." CCS 2018.
/// - Koskela, Jälkö, Honkela. "Computing tight differential privacy guarantees using FFT."
///   AISTATS 2020.
/// - Doroshenko, Ghazi, Kamath, Kumar, Manurangsi. "Connect the dots: tighter discrete
///   approximations of privacy loss distributions." PETS 2022.
/// - Google `dp_accounting`, `pld/` (privacy_loss_distribution.py, pld_pmf.py).
///
/// # Errors
/// [`AccountingError::InvalidParameter`] for δ outside (0, 1), ε negative or not finite, an
/// invalid event parameter (σ ≤ 0, q outside (0, 1], count 0, NaN, …) or a
/// `value_discretization_interval` that is negative, not finite, or too fine for the grid limit;
/// [`AccountingError::Unsupported`] for Poisson sampling of non-Gaussian events.
///
/// # Example
/// ```
/// use dpml_accounting::{Accountant, PrivacyEvent, pld::PldAccountant};
/// let sgd = PrivacyEvent::dp_sgd(1.1, 256.0 / 60000.0, 1000);
/// let (lower, upper) = PldAccountant::pessimistic().epsilon_bounds(&sgd, 1e-5)?;
/// assert!(lower <= upper);
/// assert_eq!(upper, PldAccountant::pessimistic().epsilon(&sgd, 1e-5)?);
/// # Ok::<(), dpml_accounting::AccountingError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PldAccountant {
    /// Grid spacing of the privacy losses; [`PldAccountant::AUTO`] (0) chooses it from the event
    /// (1e-4 unless the composed loss is tiny, coarser when the grid would exceed 2²¹ points).
    pub value_discretization_interval: f64,
    /// Upper (pessimistic) or lower (optimistic) bound.
    pub estimate: Estimate,
}

impl Default for PldAccountant {
    fn default() -> Self {
        Self::pessimistic()
    }
}

impl PldAccountant {
    /// `value_discretization_interval` meaning "choose automatically".
    pub const AUTO: f64 = 0.0;

    /// Upper bounds ([`BoundKind::UpperBound`]) on an automatic grid: the default.
    pub fn pessimistic() -> Self {
        PldAccountant {
            value_discretization_interval: Self::AUTO,
            estimate: Estimate::Pessimistic,
        }
    }

    /// Lower bounds ([`BoundKind::LowerBound`]) on an automatic grid.
    pub fn optimistic() -> Self {
        PldAccountant {
            value_discretization_interval: Self::AUTO,
            estimate: Estimate::Optimistic,
        }
    }

    /// The same accountant with a fixed grid spacing (`AUTO` for automatic).
    pub fn with_interval(self, value_discretization_interval: f64) -> Self {
        PldAccountant {
            value_discretization_interval,
            ..self
        }
    }

    /// The composed PLD of `event`, to query for many ε or δ without recomposing.
    ///
    /// # Errors
    /// As for the accountant (see [`PldAccountant`]).
    pub fn pld(&self, event: &PrivacyEvent) -> Result<Pld, AccountingError> {
        let h = self.value_discretization_interval;
        if !(h.is_finite() && h >= 0.0) {
            return Err(AccountingError::InvalidParameter(format!(
                "value_discretization_interval must be finite and > 0 (or 0 for automatic), got {h}"
            )));
        }
        let pessimistic = self.estimate == Estimate::Pessimistic;
        let composed = build::build(event, h, pessimistic)?;
        Ok(Pld {
            remove: composed.remove,
            add: composed.add,
            interval: composed.h,
            estimate: self.estimate,
        })
    }

    /// `(lower, upper)` bounds on the true ε at `delta`: the optimistic estimate on this
    /// accountant's grid and [`PldAccountant::upper_epsilon`] (`self.estimate` is ignored).
    ///
    /// # Errors
    /// As [`PldAccountant::upper_epsilon`].
    pub fn epsilon_bounds(
        &self,
        event: &PrivacyEvent,
        delta: f64,
    ) -> Result<(f64, f64), AccountingError> {
        check_delta(delta)?;
        let with = |estimate| PldAccountant { estimate, ..*self };
        let lower = with(Estimate::Optimistic).pld(event)?.epsilon(delta)?;
        let (upper, _) = self.upper_epsilon(event, delta)?;
        Ok((lower, upper))
    }

    /// A finite upper bound on ε at `delta`, with a note when it is not the PLD's own: the
    /// pessimistic PLD's ε, or the RDP bound ([`RdpAccountant::default`]) when δ is below
    /// [`MIN_DELTA`] or the PLD's ε is not finite (its truncated tails, moved to `+∞`, hold
    /// more than δ). The grid and `self.estimate` of `self` are used for the PLD.
    ///
    /// # Privacy
    /// Both are upper bounds on the true ε of `event` at `delta` (add/remove one record), so
    /// the answer is one; RDP is looser (by about 10–20% for DP-SGD) but has no floor in δ.
    ///
    /// # Errors
    /// As for the accountant (see [`PldAccountant`]); when RDP is needed but cannot handle the
    /// event (or gives no finite ε either), [`AccountingError::InvalidParameter`] naming δ and
    /// why: for such an event no finite ε is known at that δ.
    pub fn upper_epsilon(
        &self,
        event: &PrivacyEvent,
        delta: f64,
    ) -> Result<(f64, Option<String>), AccountingError> {
        check_delta(delta)?;
        let pessimistic = PldAccountant {
            estimate: Estimate::Pessimistic,
            ..*self
        };
        let why = if delta < MIN_DELTA {
            format!("delta = {delta:e} is below the PLD accountant's floor of {MIN_DELTA:e}")
        } else {
            let e = pessimistic.pld(event)?.epsilon(delta)?;
            if e.is_finite() {
                return Ok((e, None));
            }
            format!("the PLD's truncated tails exceed delta = {delta:e}")
        };
        let no_bound = |detail: String| {
            AccountingError::InvalidParameter(format!(
                "no finite epsilon at delta = {delta:e}: {why}, and RDP {detail}"
            ))
        };
        match RdpAccountant::default().epsilon(event, delta) {
            Ok(e) if e.is_finite() => {
                Ok((e, Some(format!("pld reports the RDP upper bound: {why}"))))
            }
            Ok(e) => Err(no_bound(format!("gives epsilon = {e}"))),
            Err(AccountingError::Unsupported(m) | AccountingError::InvalidParameter(m)) => {
                Err(no_bound(format!("cannot account for the event ({m})")))
            }
            Err(other) => Err(other),
        }
    }

    /// `δ(ε)` for each of `epsilons` (any order), composing the PLD once: the privacy curve for
    /// f-DP trade-off curves.
    ///
    /// # Errors
    /// As for the accountant (see [`PldAccountant`]); any ε negative or not finite.
    pub fn delta_curve(
        &self,
        event: &PrivacyEvent,
        epsilons: &[f64],
    ) -> Result<Vec<f64>, AccountingError> {
        epsilons.iter().try_for_each(|e| check_epsilon(*e))?;
        self.pld(event)?.delta_curve(epsilons)
    }
}

impl Accountant for PldAccountant {
    fn name(&self) -> &'static str {
        "pld"
    }

    fn bound(&self) -> BoundKind {
        match self.estimate {
            Estimate::Pessimistic => BoundKind::UpperBound,
            Estimate::Optimistic => BoundKind::LowerBound,
        }
    }

    /// Pessimistic: [`PldAccountant::upper_epsilon`] (finite, an upper bound at every δ);
    /// optimistic: the optimistic PLD's ε.
    fn epsilon(&self, event: &PrivacyEvent, delta: f64) -> Result<f64, AccountingError> {
        check_delta(delta)?;
        match self.estimate {
            Estimate::Pessimistic => Ok(self.upper_epsilon(event, delta)?.0),
            Estimate::Optimistic => self.pld(event)?.epsilon(delta),
        }
    }

    fn delta(&self, event: &PrivacyEvent, epsilon: f64) -> Result<f64, AccountingError> {
        check_epsilon(epsilon)?;
        self.pld(event)?.delta(epsilon)
    }
}

/// A composed, discretised privacy-loss distribution (both neighbouring directions).
#[derive(Debug, Clone)]
pub struct Pld {
    remove: Pmf,
    add: Option<Pmf>,
    interval: f64,
    estimate: Estimate,
}

impl Pld {
    /// The smallest ε ≥ 0 with `δ(ε) ≤ delta` (`f64::INFINITY` when the probability of an infinite
    /// loss exceeds `delta`), the larger over the two directions. Exact for the discretised PLD,
    /// which is an upper bound only for `delta` ≥ [`MIN_DELTA`]: below it, or for a finite
    /// answer always, use [`PldAccountant::upper_epsilon`].
    ///
    /// # Errors
    /// [`AccountingError::InvalidParameter`] when `delta` is not in (0, 1).
    pub fn epsilon(&self, delta: f64) -> Result<f64, AccountingError> {
        check_delta(delta)?;
        let remove = self.remove.epsilon(delta);
        Ok(self
            .add
            .as_ref()
            .map_or(remove, |a| remove.max(a.epsilon(delta))))
    }

    /// `δ(ε)`, the larger over the two directions.
    ///
    /// # Errors
    /// [`AccountingError::InvalidParameter`] when `epsilon` is negative or not finite.
    pub fn delta(&self, epsilon: f64) -> Result<f64, AccountingError> {
        Ok(self.delta_curve(&[epsilon])?[0])
    }

    /// `δ(ε)` for each of `epsilons` (any order), in one sweep per direction.
    ///
    /// # Errors
    /// [`AccountingError::InvalidParameter`] when any ε is negative or not finite.
    pub fn delta_curve(&self, epsilons: &[f64]) -> Result<Vec<f64>, AccountingError> {
        epsilons.iter().try_for_each(|e| check_epsilon(*e))?;
        let mut out = self.remove.deltas(epsilons);
        if let Some(add) = &self.add {
            for (d, a) in out.iter_mut().zip(add.deltas(epsilons)) {
                *d = d.max(a);
            }
        }
        Ok(out)
    }

    /// The grid spacing used.
    pub fn value_discretization_interval(&self) -> f64 {
        self.interval
    }

    /// Whether this PLD gives upper or lower bounds.
    pub fn estimate(&self) -> Estimate {
        self.estimate
    }

    /// Number of grid points held (both directions): a measure of memory use.
    pub fn grid_points(&self) -> usize {
        self.remove.probs.len() + self.add.as_ref().map_or(0, |a| a.probs.len())
    }
}

fn check_delta(delta: f64) -> Result<(), AccountingError> {
    if delta > 0.0 && delta < 1.0 {
        Ok(())
    } else {
        Err(AccountingError::InvalidParameter(format!(
            "delta must be in (0, 1), got {delta}"
        )))
    }
}

fn check_epsilon(epsilon: f64) -> Result<(), AccountingError> {
    if epsilon.is_finite() && epsilon >= 0.0 {
        Ok(())
    } else {
        Err(AccountingError::InvalidParameter(format!(
            "epsilon must be finite and >= 0, got {epsilon}"
        )))
    }
}

#[cfg(test)]
mod tests;
