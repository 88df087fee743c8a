//! Choosing one candidate privately: the permute-and-flip mechanism, an exponential-mechanism
//! variant that is never worse in expected utility (McKenna & Sheldon 2020).

use crate::exact::bernoulli_exp_ratio;
use crate::grid::Grid;
use crate::rational::ulps_down;
use crate::validate::{self, invalid};
use crate::{DpRng, MechanismError, PrivacyEvent, Rational};

/// Utilities are rounded to a grid of about 2^-20 of the utility sensitivity.
const UTILITY_GRID_BITS: i32 = 20;

/// Grid utilities are clamped to ±2^62 (a 1-Lipschitz map) so differences fit in 63 bits.
const UTILITY_CLAMP: i128 = 1 << 62;

/// Permute-and-flip: visit the candidates in a uniformly random order and stop at the first
/// candidate i accepted with probability exp(−ε (q* − q_i) / (2Δu)), where q* is the best
/// utility.
///
/// # Privacy
/// McKenna & Sheldon 2020 (Theorem 1): for a utility of sensitivity Δu (each candidate's utility
/// moves by at most Δu between neighbours) the mechanism is ε-DP. Utilities are rounded to a
/// grid h = 2^(⌊log2 Δu⌋ − 20), which on the grid has integer sensitivity Δ_h = ⌊Δu/h⌋ + 1
/// (bound proved in the grid module); the rate ε/(2Δ_h) is rounded *down* to a rational r, and
/// each acceptance is an exact Bernoulli(exp(−r·(Q* − Q_i))) draw on integers. This is exactly
/// permute-and-flip with ε' = 2Δ_h·r ≤ ε on a utility of sensitivity Δ_h: ε-DP. The candidate
/// with the best utility is accepted with probability 1, so the walk always ends.
///
/// # Citations
/// - R. McKenna, D. Sheldon. *Permute-and-Flip: A New Mechanism for Differentially Private
///   Selection*. NeurIPS 2020.
/// - F. McSherry, K. Talwar. *Mechanism Design via Differential Privacy*. FOCS 2007 (the
///   exponential mechanism).
///
/// # Errors
/// [`PermuteAndFlip::new`] returns [`MechanismError::InvalidParameter`] for ε or a sensitivity
/// that is not finite and > 0; [`PermuteAndFlip::select`] for an empty candidate list or a
/// non-finite utility (naming its index).
///
/// ```
/// use dpml_mechanisms::{DpRng, PermuteAndFlip};
/// let pf = PermuteAndFlip::new(1.0, 1.0)?;
/// let choice = pf.select(&mut DpRng::seeded(1), &[3.0, 10.0, 4.0])?;
/// assert!(choice < 3);
/// # Ok::<(), dpml_mechanisms::MechanismError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PermuteAndFlip {
    epsilon: f64,
    sensitivity: f64,
    grid: Grid,
    rate: Rational,
}

impl PermuteAndFlip {
    /// Permute-and-flip with privacy `epsilon` for utilities of sensitivity `sensitivity`.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn new(epsilon: f64, sensitivity: f64) -> Result<Self, MechanismError> {
        let epsilon = validate::epsilon(epsilon)?;
        let sensitivity = validate::sensitivity(sensitivity)?;
        let grid = Grid::below(sensitivity, UTILITY_GRID_BITS)?;
        let grid_sensitivity = grid.sensitivity(sensitivity)?;
        // ε/(2Δ_h): one correctly rounded division; one ulp down bounds it from below.
        let rate = Rational::floor_from_f64_precise(
            ulps_down(epsilon / (2.0 * grid_sensitivity as f64), 1).max(0.0),
        )?;
        Ok(Self {
            epsilon,
            sensitivity,
            grid,
            rate,
        })
    }

    /// The requested ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The declared utility sensitivity Δu.
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }

    /// The privacy cost of one selection: pure ε-DP.
    pub fn event(&self) -> PrivacyEvent {
        PrivacyEvent::EpsilonDelta {
            epsilon: self.epsilon,
            delta: 0.0,
        }
    }

    /// The index of the selected candidate.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn select(&self, rng: &mut DpRng, utilities: &[f64]) -> Result<usize, MechanismError> {
        if utilities.is_empty() {
            return Err(invalid("cannot select from an empty candidate list"));
        }
        let scores = utilities
            .iter()
            .enumerate()
            .map(|(i, &u)| {
                if !u.is_finite() {
                    return Err(invalid(format!(
                        "utility of candidate {i} must be finite, got {u}"
                    )));
                }
                Ok(self.grid.snap(u)?.clamp(-UTILITY_CLAMP, UTILITY_CLAMP))
            })
            .collect::<Result<Vec<i128>, _>>()?;
        let best = scores.iter().copied().max().unwrap_or(0);
        let mut order: Vec<usize> = (0..scores.len()).collect();
        for i in (1..order.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        for &i in &order {
            // 0 ≤ best − score < 2^63 and rate.num < 2^64: the product fits in u128.
            let gap = (best - scores[i]) as u128;
            if bernoulli_exp_ratio(rng, u128::from(self.rate.num()) * gap, self.rate.den()) {
                return Ok(i);
            }
        }
        // Unreachable: the best candidate has gap 0 and is accepted with probability 1.
        Ok(order[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{chi_square, chi_square_critical, violates};

    /// Exact permute-and-flip probabilities by enumerating the orders (small candidate lists).
    fn exact_probs(utilities: &[f64], eps: f64, sens: f64) -> Vec<f64> {
        let best = utilities.iter().cloned().fold(f64::MIN, f64::max);
        let p: Vec<f64> = utilities
            .iter()
            .map(|u| (-eps * (best - u) / (2.0 * sens)).exp())
            .collect();
        let n = p.len();
        let mut probs = vec![0.0; n];
        let mut perms: Vec<Vec<usize>> = vec![Vec::new()];
        for k in 0..n {
            perms = perms
                .into_iter()
                .flat_map(|perm| {
                    (0..=perm.len()).map(move |pos| {
                        let mut q = perm.clone();
                        q.insert(pos, k);
                        q
                    })
                })
                .collect();
        }
        let count = perms.len() as f64;
        for perm in &perms {
            let mut reach = 1.0;
            for &i in perm {
                probs[i] += reach * p[i] / count;
                reach *= 1.0 - p[i];
            }
        }
        probs
    }

    fn counts(pf: &PermuteAndFlip, rng: &mut DpRng, utilities: &[f64], n: usize) -> Vec<u64> {
        let mut c = vec![0u64; utilities.len()];
        for _ in 0..n {
            c[pf.select(rng, utilities).unwrap()] += 1;
        }
        c
    }

    #[test]
    fn selection_follows_permute_and_flip() {
        let u = [0.0, 1.0, 2.5, 2.0];
        let pf = PermuteAndFlip::new(1.0, 1.0).unwrap();
        let probs = exact_probs(&u, 1.0, 1.0);
        assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let n = 40_000u64;
        let c = counts(&pf, &mut DpRng::seeded(71), &u, n as usize);
        let (stat, df) = chi_square(&c, &probs, n);
        assert!(
            stat < chi_square_critical(df, 0.001),
            "{stat} df {df}: {c:?} vs {probs:?}"
        );
    }

    #[test]
    fn privacy_check_passes_and_catches_double_epsilon() {
        // Two candidates with utilities swapped by one unit each (neighbours, Δu = 1): PF's
        // output ratio is 2e^{ε/2} − 1, below e^ε for the honest ε, above it at 2ε.
        let (u, v) = ([0.0, 1.0], [1.0, 0.0]);
        let n = 100_000;
        let mut rng = DpRng::seeded(72);
        let honest = PermuteAndFlip::new(1.0, 1.0).unwrap();
        let (a, b) = (
            counts(&honest, &mut rng, &u, n),
            counts(&honest, &mut rng, &v, n),
        );
        let (bad, z, crit) = violates(&a, &b, n as u64, 1.0, 0.0);
        assert!(!bad, "PF flagged: {z} > {crit}");
        let under = PermuteAndFlip::new(2.0, 1.0).unwrap();
        let (a, b) = (
            counts(&under, &mut rng, &u, n),
            counts(&under, &mut rng, &v, n),
        );
        assert!(
            violates(&a, &b, n as u64, 1.0, 0.0).0,
            "PF at 2ε not caught at ε"
        );
    }

    #[test]
    fn invalid_input_is_named() {
        let pf = PermuteAndFlip::new(1.0, 1.0).unwrap();
        let mut rng = DpRng::seeded(0);
        assert!(
            pf.select(&mut rng, &[])
                .unwrap_err()
                .to_string()
                .contains("empty candidate list")
        );
        assert!(
            pf.select(&mut rng, &[1.0, f64::NAN])
                .unwrap_err()
                .to_string()
                .contains("candidate 1")
        );
        assert!(
            PermuteAndFlip::new(0.0, 1.0)
                .unwrap_err()
                .to_string()
                .contains("epsilon")
        );
        assert!(
            PermuteAndFlip::new(1.0, -1.0)
                .unwrap_err()
                .to_string()
                .contains("sensitivity")
        );
        assert_eq!(pf.select(&mut rng, &[5.0]).unwrap(), 0);
        assert_eq!(
            pf.event(),
            PrivacyEvent::EpsilonDelta {
                epsilon: 1.0,
                delta: 0.0
            }
        );
        // Extreme utilities do not overflow.
        assert_eq!(pf.select(&mut rng, &[-1e300, 1e300]).unwrap(), 1);
    }
}
