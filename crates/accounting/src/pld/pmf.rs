//! A privacy-loss distribution on a uniform grid: probabilities of the losses `(lo + i)·h`, a mass
//! at `+∞`, and the two operations accounting needs — composition (convolution) and conversion to
//! `δ(ε)` and `ε(δ)`.
//!
//! A pessimistic PMF over-approximates the true distribution (every operation rounds losses up,
//! truncated upper tails go to `+∞`), an optimistic one under-approximates it (losses rounded
//! down, truncated lower tails dropped, and an explicit `slack` subtracted from δ for the little
//! mass the FFT window may wrap upwards).

use super::fft;
use crate::AccountingError;

/// The most grid points one PMF (or FFT window) may have: bounds memory at about
/// 16 bytes × 2^22 for the largest FFT buffer.
pub(crate) const MAX_POINTS: usize = 1 << 21;

/// Probability mass that may be cut from the two tails together after each composition.
pub(crate) const TAIL_MASS: f64 = 1e-15;

/// A discrete privacy-loss distribution (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pmf {
    /// Grid spacing of the losses.
    pub(crate) h: f64,
    /// Grid index of `probs[0]`: its loss is `lo · h`.
    pub(crate) lo: i64,
    /// Probabilities of the finite losses `(lo + i) · h`.
    pub(crate) probs: Vec<f64>,
    /// Probability of the loss `+∞` (counted in full in every δ).
    pub(crate) inf: f64,
    /// Optimistic only: a bound on mass that may sit too high; subtracted from every δ.
    pub(crate) slack: f64,
    /// Whether this is an upper (pessimistic) or lower (optimistic) approximation.
    pub(crate) pessimistic: bool,
}

/// A window of the `count`-fold sum of grid indices (relative to `count · lo`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    /// First index of the window.
    pub(crate) start: u64,
    /// Number of indices in the window.
    pub(crate) len: u64,
}

impl Pmf {
    /// The distribution of a mechanism that reveals nothing: all mass at loss 0.
    pub(crate) fn identity(h: f64, pessimistic: bool) -> Self {
        Pmf {
            h,
            lo: 0,
            probs: vec![1.0],
            inf: 0.0,
            slack: 0.0,
            pessimistic,
        }
    }

    /// The loss of grid index `i` of `probs` (may be one past either end).
    fn loss(&self, i: i64) -> f64 {
        (self.lo + i) as f64 * self.h
    }

    /// `δ(ε) = P(L = ∞) + Σ_{ℓ > ε} p(ℓ) (1 − e^{ε−ℓ})` for each ε (any order, any real).
    ///
    /// One sweep from the top of the grid: with the losses above ε included,
    /// `δ(ε) = A − e^{ε−ℓ_{k+1}} C` where `A` is their mass and `C = Σ p_i e^{ℓ_{k+1}−ℓ_i}` is
    /// kept relative to the lowest included loss, so nothing overflows.
    pub(crate) fn deltas(&self, epsilons: &[f64]) -> Vec<f64> {
        let mut order: Vec<usize> = (0..epsilons.len()).collect();
        order.sort_by(|&a, &b| epsilons[b].total_cmp(&epsilons[a]));
        let decay = (-self.h).exp();
        let n = self.probs.len() as i64;
        let (mut a, mut c, mut k) = (self.inf, 0.0, n - 1);
        let mut out = vec![0.0; epsilons.len()];
        for idx in order {
            let eps = epsilons[idx];
            while k >= 0 && self.loss(k) > eps {
                let p = self.probs[k as usize];
                c = p + decay * c;
                a += p;
                k -= 1;
            }
            let raw = if k == n - 1 {
                a
            } else {
                a - (eps - self.loss(k + 1)).exp() * c
            };
            out[idx] = (raw.max(0.0) - self.slack).clamp(0.0, 1.0);
        }
        out
    }

    /// The smallest ε ≥ 0 with `δ(ε) ≤ delta` (`+∞` when the mass at `+∞` exceeds `delta`).
    ///
    /// Exact for this PMF: on each grid cell `δ(ε) = A − e^{ε−ℓ_{k+1}} C` is inverted in closed
    /// form, no bisection.
    pub(crate) fn epsilon(&self, delta: f64) -> f64 {
        let target = delta + self.slack;
        if self.inf > target {
            return f64::INFINITY;
        }
        let decay = (-self.h).exp();
        let n = self.probs.len() as i64;
        let (mut a, mut c) = (self.inf, 0.0);
        for k in (0..n).rev() {
            // δ(ℓ_{k+1}) ≤ target is known here, so ε ≤ ℓ_{k+1}.
            let upper = self.loss(k + 1);
            if upper <= 0.0 {
                return 0.0;
            }
            if a - decay * c > target {
                // δ(ℓ_k) > target ≥ δ(ℓ_{k+1}): the answer lies in (ℓ_k, ℓ_{k+1}].
                return if c > 0.0 {
                    (upper + ((a - target) / c).ln()).max(0.0)
                } else {
                    upper
                };
            }
            let p = self.probs[k as usize];
            c = p + decay * c;
            a += p;
        }
        // Below the lowest loss δ(ε) = A − e^{ε−ℓ_0} C.
        if a > target && c > 0.0 {
            (self.loss(0) + ((a - target) / c).ln()).max(0.0)
        } else {
            0.0
        }
    }

    /// Cuts at most [`TAIL_MASS`]/2 from each end of the grid. Pessimistic: the lower tail joins
    /// the first kept loss (rounded up) and the upper tail goes to `+∞`. Optimistic: the lower
    /// tail is dropped (moved to `−∞`) and the upper tail joins the last kept loss (rounded down).
    pub(crate) fn truncate(&mut self) {
        let half = TAIL_MASS / 2.0;
        let n = self.probs.len();
        let (mut left, mut left_mass) = (0, 0.0);
        while left + 1 < n && left_mass + self.probs[left] <= half {
            left_mass += self.probs[left];
            left += 1;
        }
        let (mut right, mut right_mass) = (n, 0.0);
        while right > left + 1 && right_mass + self.probs[right - 1] <= half {
            right_mass += self.probs[right - 1];
            right -= 1;
        }
        if left == 0 && right == n {
            return;
        }
        let mut kept = self.probs[left..right].to_vec();
        if self.pessimistic {
            kept[0] += left_mass;
            self.inf += right_mass;
        } else if let Some(last) = kept.last_mut() {
            *last += right_mass;
        }
        self.probs = kept;
        self.lo += left as i64;
    }

    /// The distribution of the composition of `self` and `other` (independent losses add).
    pub(crate) fn compose(&self, other: &Pmf) -> Result<Pmf, AccountingError> {
        debug_assert_eq!(self.h.to_bits(), other.h.to_bits());
        debug_assert_eq!(self.pessimistic, other.pessimistic);
        let lo = self
            .lo
            .checked_add(other.lo)
            .ok_or_else(|| overflow("composition"))?;
        let mut out = Pmf {
            h: self.h,
            lo,
            probs: fft::convolve(&self.probs, &other.probs),
            inf: self.inf + other.inf - self.inf * other.inf,
            slack: self.slack + other.slack + self.slack * other.slack,
            pessimistic: self.pessimistic,
        };
        out.truncate();
        Ok(out)
    }

    /// [`Pmf::self_compose_in`] on its Chernoff window (tests only; the builder reuses windows).
    ///
    /// # Errors
    /// [`AccountingError::InvalidParameter`] when the window needs more than [`MAX_POINTS`]
    /// points (a coarser discretisation interval is needed) or the grid index overflows.
    #[cfg(test)]
    pub(crate) fn self_compose(&self, count: u64) -> Result<Pmf, AccountingError> {
        if count <= 1 {
            return Ok(self.clone());
        }
        self.self_compose_in(count, self.chernoff_window(count, TAIL_MASS / 2.0))
    }

    /// The distribution of `count` independent copies composed, by one FFT raised to the power
    /// `count`, on a `window` from `chernoff_window(count, TAIL_MASS / 2)` (all but
    /// [`TAIL_MASS`] of the result).
    ///
    /// # Errors
    /// [`AccountingError::InvalidParameter`] when the window needs more than [`MAX_POINTS`]
    /// points (a coarser discretisation interval is needed) or the grid index overflows.
    pub(crate) fn self_compose_in(
        &self,
        count: u64,
        window: Window,
    ) -> Result<Pmf, AccountingError> {
        if count <= 1 {
            return Ok(self.clone());
        }
        let tail = TAIL_MASS / 2.0;
        if window.len > MAX_POINTS as u64 {
            return Err(too_many_points(window.len, self.h));
        }
        let lo = i64::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(self.lo))
            .and_then(|x| x.checked_add(i64::try_from(window.start).ok()?))
            .ok_or_else(|| {
                AccountingError::InvalidParameter(format!(
                    "{count} compositions (the steps or the count of one event) are too many \
                     for the privacy-loss grid: its index overflows"
                ))
            })?;
        let probs =
            fft::self_convolve_window(&self.probs, count, window.start, window.len as usize);
        let powered = |x: f64| -(count as f64 * (-x).ln_1p()).exp_m1();
        let mut out = Pmf {
            h: self.h,
            lo,
            probs,
            inf: powered(self.inf),
            slack: 0.0,
            pessimistic: self.pessimistic,
        };
        if self.pessimistic {
            // Mass above the window wrapped to lower losses: count its bound at +∞.
            out.inf = (out.inf + tail).min(1.0);
        } else {
            // Mass below the window wrapped to higher losses: subtract its bound from δ.
            out.slack = (count as f64 * self.slack.ln_1p()).exp_m1() + tail;
        }
        out.truncate();
        Ok(out)
    }

    /// A window of index sums (relative to `count · lo`) outside which the `count`-fold sum has
    /// at most `tail` mass on each side, by Chernoff bounds at a few orders λ:
    /// `P(S ≥ u) ≤ exp(count·K(λ) − λ u)` with `K(λ) = ln Σ p_i e^{λ i}`.
    pub(crate) fn chernoff_window(&self, count: u64, tail: f64) -> Window {
        let n = self.probs.len();
        let full = Window {
            start: 0,
            len: count.saturating_mul(n as u64 - 1).saturating_add(1),
        };
        let mass: f64 = self.probs.iter().sum();
        if count <= 1 || mass <= 0.0 {
            return full;
        }
        let mean = self
            .probs
            .iter()
            .enumerate()
            .map(|(i, p)| i as f64 * p)
            .sum::<f64>()
            / mass;
        let var = self
            .probs
            .iter()
            .enumerate()
            .map(|(i, p)| (i as f64 - mean).powi(2) * p)
            .sum::<f64>()
            / mass;
        let t = count as f64;
        let sd = (var * t).sqrt();
        if sd == 0.0 || !sd.is_finite() {
            let at = (mean.round() as u64).saturating_mul(count);
            return Window { start: at, len: 1 };
        }
        let log_p: Vec<(f64, f64)> = self
            .probs
            .iter()
            .enumerate()
            .filter(|(_, p)| **p > 0.0)
            .map(|(i, p)| (i as f64 - mean, p.ln()))
            .collect();
        let log_mgf = |lambda: f64| {
            let top = log_p
                .iter()
                .map(|(x, lp)| lambda * x + lp)
                .fold(f64::NEG_INFINITY, f64::max);
            top + log_p
                .iter()
                .map(|(x, lp)| (lambda * x + lp - top).exp())
                .sum::<f64>()
                .ln()
        };
        let log_inv_tail = (1.0 / tail).ln();
        // Each side's bound, (t K(±λ) + ln(1/tail)) / λ, minimised over the order λ = z/sd. The
        // Gaussian-optimal z is sqrt(2 ln(1/tail)) ≈ 8.3, but a heavy-tailed step (a rare large
        // loss, as Poisson sampling at a small rate gives) needs z far below 1: a fixed handful
        // of orders from 1 up left such windows a hundred times too wide, and the grid coarse.
        let margin = |sign: f64| {
            min_over_orders(|z| {
                let lambda = z / sd;
                (t * log_mgf(sign * lambda) + log_inv_tail) / lambda
            })
        };
        let upper = (t * mean + margin(1.0)).min(full.len as f64 - 1.0);
        let lower = (t * mean - margin(-1.0)).max(0.0);
        let start = lower.floor().max(0.0);
        let end = upper.ceil().max(start);
        Window {
            start: start as u64,
            len: (end - start) as u64 + 1,
        }
    }
}

/// The smallest finite value of `f(z)` for z > 0 (`+∞` when there is none), `f` being a
/// Chernoff margin in the order z: a geometric sweep from 2⁻¹² to 2⁶ in steps of 4, then
/// golden-section search around the best point in log z (each evaluation is a pass over the
/// PMF: 22 of them). Any z gives a valid bound, so the search only has to
/// be good, not exact.
fn min_over_orders(f: impl Fn(f64) -> f64) -> f64 {
    let value = |log_z: f64| {
        let v = f(log_z.exp());
        if v.is_finite() { v } else { f64::INFINITY }
    };
    let step = 2.0 * std::f64::consts::LN_2;
    let grid: Vec<f64> = (-6..=3).map(|k| f64::from(k) * step).collect();
    let values: Vec<f64> = grid.iter().map(|&g| value(g)).collect();
    let best = (0..grid.len())
        .min_by(|&a, &b| values[a].total_cmp(&values[b]))
        .unwrap_or(0);
    if values[best] == f64::INFINITY {
        return f64::INFINITY;
    }
    let (mut a, mut b) = (grid[best] - step, grid[best] + step);
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut c, mut d) = (b - ratio * (b - a), a + ratio * (b - a));
    let (mut fc, mut fd) = (value(c), value(d));
    for _ in 0..10 {
        if fc <= fd {
            (b, d, fd) = (d, c, fc);
            c = b - ratio * (b - a);
            fc = value(c);
        } else {
            (a, c, fc) = (c, d, fd);
            d = a + ratio * (b - a);
            fd = value(d);
        }
    }
    values[best].min(fc).min(fd)
}

/// The error for a grid that would exceed [`MAX_POINTS`].
pub(crate) fn too_many_points(points: u64, h: f64) -> AccountingError {
    AccountingError::InvalidParameter(format!(
        "the privacy-loss grid would need {points} points at value_discretization_interval {h}, \
         more than the limit of {MAX_POINTS}; use a larger interval (or 0 for automatic)"
    ))
}

fn overflow(what: &str) -> AccountingError {
    AccountingError::InvalidParameter(format!("privacy-loss grid index overflows in {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pmf(lo: i64, probs: &[f64], inf: f64, pessimistic: bool) -> Pmf {
        Pmf {
            h: 0.5,
            lo,
            probs: probs.to_vec(),
            inf,
            slack: 0.0,
            pessimistic,
        }
    }

    /// δ(ε) straight from the definition, one term per loss.
    fn delta_direct(p: &Pmf, eps: f64) -> f64 {
        p.inf
            + p.probs
                .iter()
                .enumerate()
                .map(|(i, q)| {
                    let l = (p.lo + i as i64) as f64 * p.h;
                    if l > eps {
                        q * -(eps - l).exp_m1()
                    } else {
                        0.0
                    }
                })
                .sum::<f64>()
    }

    #[test]
    fn delta_sweep_matches_definition() {
        let p = pmf(-3, &[0.1, 0.2, 0.05, 0.3, 0.15, 0.1, 0.09], 0.01, true);
        let eps = [-2.0, 0.0, 0.3, 0.5, 0.74, 1.6, 5.0, -0.25];
        let got = p.deltas(&eps);
        for (e, d) in eps.iter().zip(&got) {
            let want = delta_direct(&p, *e);
            assert!((d - want).abs() < 1e-15, "eps {e}: {d} vs {want}");
        }
    }

    #[test]
    fn epsilon_inverts_delta_exactly() {
        let p = pmf(-3, &[0.1, 0.2, 0.05, 0.3, 0.15, 0.1, 0.09], 0.01, true);
        for target in [0.011, 0.02, 0.05, 0.1, 0.2] {
            let e = p.epsilon(target);
            assert!(e > 0.0);
            let d = delta_direct(&p, e);
            assert!(
                (d - target).abs() < 1e-13,
                "delta({e}) = {d}, want {target}"
            );
        }
        assert_eq!(
            p.epsilon(0.005),
            f64::INFINITY,
            "mass at infinity exceeds delta"
        );
        assert_eq!(p.epsilon(0.9), 0.0, "delta(0) is already below 0.9");
    }

    #[test]
    fn truncation_moves_tails_the_safe_way() {
        let probs = [1e-17, 2e-16, 0.5, 0.5 - 6e-16, 3e-16, 1e-17];
        let mut p = pmf(0, &probs, 0.0, true);
        p.truncate();
        assert_eq!(p.lo, 2);
        assert_eq!(p.probs.len(), 2);
        assert!((p.inf - 3.1e-16).abs() < 1e-30);
        assert!((p.probs[0] - (0.5 + 2.1e-16)).abs() < 1e-16);
        let mut o = pmf(0, &probs, 0.0, false);
        o.truncate();
        assert_eq!(o.inf, 0.0);
        assert!((o.probs[1] - (0.5 - 6e-16 + 3.1e-16)).abs() < 1e-16);
    }

    #[test]
    fn self_composition_matches_repeated_composition() {
        let p = pmf(-1, &[0.3, 0.45, 0.25], 0.001, true);
        let mut rep = p.clone();
        for _ in 1..20 {
            rep = rep.compose(&p).unwrap();
        }
        let fast = p.self_compose(20).unwrap();
        for e in [0.0, 1.0, 2.5, 4.0] {
            let (a, b) = (fast.deltas(&[e])[0], rep.deltas(&[e])[0]);
            // The fast path adds the Chernoff tail bound (TAIL_MASS/2) to the mass at +inf.
            assert!(
                (a - b).abs() < 1e-14 && a >= b - 1e-16,
                "eps {e}: {a} vs {b}"
            );
        }
        assert!((fast.inf - (1.0 - 0.999f64.powi(20))).abs() < 1e-14);
    }

    #[test]
    fn chernoff_window_holds_the_mass() {
        let p = pmf(0, &[0.2, 0.5, 0.3], 0.0, true);
        let w = p.chernoff_window(1000, 1e-15);
        // Mean index 1.1 per step, sd 0.7 per step: the window must contain mean ± 8 sd and be
        // far narrower than the trivial support 0..=2000.
        let (mean, sd) = (1100.0, 0.7 * 1000f64.sqrt());
        assert!((w.start as f64) < mean - 8.0 * sd && (w.start + w.len) as f64 > mean + 8.0 * sd);
        assert!(w.len < 600, "{w:?}");
    }
}
