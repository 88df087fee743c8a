//! Releasing per-cluster (or per-cell) sums of grid values with exact noise: the one place
//! where the private k-means variants turn a budget into noise.
//!
//! A `GridNoise` holds the grid of every dimension ([`super::grid`]) and one exact noise per
//! dimension. Counts are the special case of one dimension with origin 0 and extent 1: the
//! count c is released as `round(c/g)` plus noise, whose sensitivity is `s = ⌈1/g⌉` grid steps
//! (for `g ≤ 1` a power of two `c/g` is exact and moves by exactly `1/g`; for `g > 1`,
//! `|round(a) − round(b)| ≤ 1` whenever `|a − b| ≤ 1`).
//!
//! # Privacy
//! Add/remove-one relation; one record changes the statistic of one cluster (or cell) only, by
//! a grid vector `q` with `|q_j| ≤ s_j` (parallel composition over clusters). With `w_j =
//! s_j·g_j ≥ m_j` the rounded extents:
//! - `L1Laplace(ε)`: dimension j gets discrete Laplace noise of scale
//!   `t_j = Σ_i w_i/(ε·g_j)` grid units, so it is `s_j/t_j = ε·w_j/Σ_i w_i`-DP and all d
//!   together ε-DP (the L1 Laplace mechanism, split into exact per-dimension events).
//! - `L2Gaussian(ρ)`: dimension j gets discrete Gaussian noise of σ_j =
//!   `√Σ_i w_i² / (√(2ρ)·g_j)` grid units, so it is `s_j²/(2σ_j²) = ρ·w_j²/Σ_i w_i²`-zCDP
//!   (Canonne, Kamath, Steinke 2020) and all d together ρ-zCDP.
//!
//! Scales and σ² are rounded up to rationals before sampling, and reported rounded down in the
//! events, so the cost computed from the events is at least the true cost.

use dpml_mechanisms::{DpRng, PrivacyEvent};

use super::grid::Grid;
use super::noise::IntNoise;
use crate::LearnError;

/// Steps per noise scale for Laplace noise: up to 2^30 grid steps per scale (the exact sampler
/// accepts up to 2^48), so the grid follows the data's extent in every useful regime.
const LAPLACE_NOISE_BITS: i32 = 30;
/// Steps per σ for Gaussian noise: the exact discrete Gaussian needs σ below about 2^15 steps.
const GAUSSIAN_NOISE_BITS: i32 = 13;

/// How a budget is divided over the dimensions of one release.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Allot {
    /// A vector release with L1 sensitivity `Σ w_j`: ε for all dimensions together.
    L1Laplace(f64),
    /// A vector release with L2 sensitivity `√Σ w_j²`: zCDP ρ for all dimensions together.
    L2Gaussian(f64),
}

/// Grids and exact noise for one kind of release.
#[derive(Debug, Clone)]
pub(crate) struct GridNoise {
    grid: Grid,
    noise: Vec<IntNoise>,
}

impl GridNoise {
    /// The release of dimensions with origins `origin` and extents `extent` (`m_j > 0`) under
    /// `allot`.
    ///
    /// # Errors
    /// [`LearnError::InvalidParameter`] naming ρ when a Gaussian release would need σ above
    /// about 2^15 times its sensitivity (ρ below about 5·10^-10), beyond the exact sampler;
    /// [`LearnError::Mechanism`] when a Laplace scale is out of range (ε below about 10^-14).
    pub(crate) fn new(origin: Vec<f64>, extent: &[f64], allot: Allot) -> Result<Self, LearnError> {
        let l1: f64 = extent.iter().sum();
        let l2 = extent.iter().map(|m| m * m).sum::<f64>().sqrt();
        let (noise_estimate, bits) = match allot {
            Allot::L1Laplace(eps) => (l1 / eps, LAPLACE_NOISE_BITS),
            Allot::L2Gaussian(rho) => (l2 / (2.0 * rho).sqrt(), GAUSSIAN_NOISE_BITS),
        };
        let grid = Grid::new(origin, extent, noise_estimate, bits);
        let d = grid.dims();
        let w: Vec<f64> = (0..d).map(|j| grid.real_bound(j)).collect();
        let w1: f64 = w.iter().sum();
        let w2 = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        let noise = (0..d)
            .map(|j| match allot {
                Allot::L1Laplace(eps) => IntNoise::laplace(w1 / (eps * grid.step(j))),
                Allot::L2Gaussian(rho) => IntNoise::gaussian(w2 / ((2.0 * rho).sqrt() * grid.step(j))).map_err(|_| {
                    LearnError::invalid(
                        "rho (zCDP of one noisy release)",
                        "is too small for exact Gaussian noise (sigma must stay below 2^15 times the sensitivity): raise epsilon or delta",
                        rho,
                    )
                }),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { grid, noise })
    }

    /// A count: one dimension, origin 0, extent 1.
    ///
    /// # Errors
    /// As [`GridNoise::new`].
    pub(crate) fn count(allot: Allot) -> Result<Self, LearnError> {
        Self::new(vec![0.0], &[1.0], allot)
    }

    /// The grid.
    pub(crate) fn grid(&self) -> &Grid {
        &self.grid
    }

    /// A noisy count (this must be a [`GridNoise::count`]): `(round(c/g) + Z)·g`.
    pub(crate) fn release_count(&self, count: usize, rng: &mut DpRng) -> f64 {
        let steps = (count as f64 / self.grid.step(0)).round() as i128;
        self.release(0, steps, rng)
    }

    /// `sum` (grid units) of dimension `j` plus fresh noise, back in real units.
    pub(crate) fn release(&self, j: usize, sum: i128, rng: &mut DpRng) -> f64 {
        (sum + i128::from(self.noise[j].sample(rng))) as f64 * self.grid.step(j)
    }

    /// The noise scale (Laplace) or σ (Gaussian) of dimension `j` in real units.
    pub(crate) fn real_noise(&self, j: usize) -> f64 {
        self.noise[j].parameter() * self.grid.step(j)
    }

    /// L1 sensitivity in real units, `Σ w_j`.
    pub(crate) fn l1(&self) -> f64 {
        (0..self.grid.dims()).map(|j| self.grid.real_bound(j)).sum()
    }

    /// L2 sensitivity in real units, `√Σ w_j²`.
    pub(crate) fn l2(&self) -> f64 {
        (0..self.grid.dims())
            .map(|j| self.grid.real_bound(j).powi(2))
            .sum::<f64>()
            .sqrt()
    }

    /// The cost: one event per dimension (integer sensitivity `s_j`).
    pub(crate) fn events(&self) -> Vec<PrivacyEvent> {
        self.noise
            .iter()
            .enumerate()
            .map(|(j, n)| n.event(self.grid.bound(j)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pure(events: &[PrivacyEvent]) -> f64 {
        events
            .iter()
            .map(|e| match e {
                PrivacyEvent::DiscreteLaplace { scale, sensitivity } => *sensitivity as f64 / scale,
                other => panic!("{other:?}"),
            })
            .sum()
    }

    #[test]
    fn budgets_are_met_exactly_by_the_events() {
        let ext = [1.8, 1.2, 2.95, 1.2];
        let l1 = GridNoise::new(vec![0.0; 4], &ext, Allot::L1Laplace(0.7)).unwrap();
        assert!((pure(&l1.events()) - 0.7).abs() < 1e-12);
        // Equal real-unit scale in every dimension: Σ w / ε.
        for j in 0..4 {
            assert!((l1.real_noise(j) / (l1.l1() / 0.7) - 1.0).abs() < 1e-12);
        }
        let g = GridNoise::new(vec![0.0; 4], &ext, Allot::L2Gaussian(0.02)).unwrap();
        let rho: f64 = g
            .events()
            .iter()
            .map(|e| match e {
                PrivacyEvent::DiscreteGaussian { sigma, sensitivity } => {
                    (*sensitivity as f64 / sigma).powi(2) / 2.0
                }
                other => panic!("{other:?}"),
            })
            .sum();
        assert!((rho - 0.02).abs() < 1e-9, "{rho}");
    }

    #[test]
    fn counts_are_exact_and_huge_noise_degrades_gracefully() {
        let c = GridNoise::count(Allot::L2Gaussian(0.5)).unwrap();
        // σ = 1: step 2^-13, sensitivity 2^13 steps = exactly 1: no inflation.
        assert_eq!(c.grid().bound(0), 1 << 13);
        assert!((c.l2() - 1.0).abs() < 1e-15);
        let mut rng = DpRng::seeded(1);
        let noisy: Vec<f64> = (0..2000).map(|_| c.release_count(40, &mut rng)).collect();
        let mean = noisy.iter().sum::<f64>() / 2000.0;
        // σ = 1, 2000 draws: the mean is within 5 SE = 0.11 of 40.
        assert!((mean - 40.0).abs() < 0.11, "{mean}");
        // Laplace with noise far above the extent (ε = 1e-9): the step grows, the sensitivity
        // is rounded up to whole steps (more noise, never less privacy) and 10^12 records still
        // show through noise of scale 10^9.
        let huge = GridNoise::count(Allot::L1Laplace(1e-9)).unwrap();
        assert!(huge.l1() >= 1.0);
        assert!((pure(&huge.events()) - 1e-9).abs() < 1e-20);
        let v = huge.release_count(1_000_000_000_000, &mut rng);
        assert!((v / 1e12 - 1.0).abs() < 0.1, "{v}");
        // ρ = 1e-12 needs σ ≈ 7·10^5 × the sensitivity: beyond the exact sampler, refused.
        let msg = GridNoise::count(Allot::L2Gaussian(1e-12))
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with("rho (zCDP of one noisy release) is too small")
                && msg.ends_with("got 0.000000000001"),
            "{msg}"
        );
    }
}
