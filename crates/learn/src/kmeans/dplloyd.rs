//! DPLloyd (Su et al. 2016): Lloyd iterations whose centroid updates use only noisy
//! per-cluster counts and noisy per-cluster sums, with Laplace noise (pure ε-DP) or Gaussian
//! noise (zCDP, then (ε, δ)).
//!
//! # Privacy
//! Neighbouring data sets differ by adding or removing one record (add/remove-one). Each
//! iteration assigns records to the current centroids (already private) and releases
//! - the k cluster counts: one record changes one count by 1 (L1 = L2 sensitivity 1);
//! - the k cluster sums of each dimension j over grid values `q ∈ [−s_j, s_j]`
//!   ([`super::grid`]): one record changes one cluster's sum by at most `s_j`.
//!
//! **Laplace**: the counts get discrete Laplace noise of scale `1/ε_C` (ε_C-DP); dimension j
//! gets scale `t_j = Δ₁'/(ε_S·g_j)` in grid units, where `Δ₁' = Σ_j s_j·g_j` is the L1
//! sensitivity of a sum vector in real units, so it is `(s_j/t_j)`-DP and the d dimensions
//! together are `Σ_j s_j·g_j/Δ₁'·ε_S = ε_S`-DP. Each iteration is `(ε_C + ε_S)`-DP and T
//! iterations `T·(ε_C + ε_S) = ε`-DP by basic composition.
//!
//! **Gaussian**: the counts get discrete Gaussian noise with σ_C² = 1/(2ρ_C) (ρ_C-zCDP) and
//! dimension j gets σ_j = σ_S/g_j with σ_S = Δ₂'/√(2ρ_S), `Δ₂' = √Σ_j (s_j·g_j)²`, so it is
//! `s_j²/(2σ_j²)`-zCDP and the dimensions together `ρ_S`-zCDP (Canonne, Kamath, Steinke 2020,
//! Thm. 4 for the discrete Gaussian). T iterations are `T·(ρ_C + ρ_S) = ρ`-zCDP (Bun & Steinke
//! 2016), converted to (ε, δ) through its Rényi curve α·ρ.
//!
//! Every noise parameter is rounded up before sampling, so the realised cost is at most the
//! stated one. The centroid update `clamp(o + g·(S̃/C̃))` (or keeping the old centroid when
//! `C̃ < 1`) is post-processing.
//!
//! # Citations
//! - D. Su, J. Cao, N. Li, E. Bertino, H. Jin, "Differentially private k-means clustering",
//!   CODASPY 2016; and with M. Lyu, ACM TOPS 20(4), 2017.
//! - C. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential privacy",
//!   NeurIPS 2020.
//! - M. Bun, T. Steinke, "Concentrated differential privacy", TCC 2016.
//!
//! # Errors
//! [`LearnError::Mechanism`] when a noise scale is beyond the exact samplers' range (an ε so
//! small, or bounds so wide, that the noise would exceed about 2^48 grid steps).

use dpml_mechanisms::{DpRng, PrivacyEvent};

use super::bounds::Bounds;
use super::budget::{BudgetSplit, count_share, rho_for};
use super::grid::Grid;
use super::histogram::InitBudget;
use super::lloyd::nearest;
use super::noise::IntNoise;
use super::params::{Coordinates, SplitRule};
use crate::LearnError;

/// The total budget of a DPLloyd run and the noise it implies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Budget {
    /// Laplace noise, total pure ε.
    Laplace {
        /// Total ε.
        epsilon: f64,
    },
    /// Gaussian noise, total (ε, δ), i.e. zCDP ρ ([`rho_for`]).
    Gaussian {
        /// Total ε.
        epsilon: f64,
        /// δ.
        delta: f64,
        /// The zCDP ρ that converts to (ε, δ).
        rho: f64,
    },
}

impl Budget {
    /// Laplace for `delta = None`, else Gaussian calibrated to (ε, δ).
    ///
    /// # Errors
    /// [`LearnError::Accounting`] if the accountant refuses ε or δ.
    pub(crate) fn new(epsilon: f64, delta: Option<f64>) -> Result<Self, LearnError> {
        Ok(match delta {
            None => Budget::Laplace { epsilon },
            Some(delta) => Budget::Gaussian { epsilon, delta, rho: rho_for(epsilon, delta)? },
        })
    }

    /// The fraction `share` of the budget, for a private initialisation.
    pub(crate) fn share(self, share: f64) -> InitBudget {
        match self {
            Budget::Laplace { epsilon } => InitBudget::Epsilon(share * epsilon),
            Budget::Gaussian { rho, .. } => InitBudget::Rho(share * rho),
        }
    }
}

/// A calibrated DPLloyd run: grid, noise and the stated split.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    grid: Grid,
    count_noise: IntNoise,
    sum_noise: Vec<IntNoise>,
    iterations: usize,
    /// The budget as stated in the output.
    pub split: BudgetSplit,
}

impl Plan {
    /// Calibrates T iterations on data in `bounds` to `budget` less `init_spent` (the ε, or
    /// zCDP ρ for the Gaussian, already spent by a private initialisation), dividing each
    /// iteration by `rule`, with sums about the origin chosen by `coordinates`.
    ///
    /// # Errors
    /// As the module.
    pub(crate) fn new(
        budget: Budget,
        bounds: &Bounds,
        coordinates: Coordinates,
        rule: SplitRule,
        iterations: usize,
        init_spent: f64,
    ) -> Result<Self, LearnError> {
        let d = bounds.dims();
        let (origin, extent): (Vec<f64>, Vec<f64>) = (0..d)
            .map(|j| match coordinates {
                Coordinates::Centred => (bounds.mid(j), 0.5 * bounds.width(j)),
                Coordinates::Raw => (0.0, bounds.lo()[j].abs().max(bounds.hi()[j].abs())),
            })
            .unzip();
        let t = iterations as f64;
        match budget {
            Budget::Laplace { epsilon } => {
                let eps_init = init_spent;
                let per_iter = (epsilon - eps_init) / t;
                let eps_count = per_iter * count_share(rule, &extent, false);
                let eps_sum = per_iter - eps_count;
                let l1: f64 = extent.iter().sum();
                let grid = Grid::new(origin, &extent, l1 / eps_sum);
                let l1 = (0..d).map(|j| grid.real_bound(j)).sum::<f64>();
                let sum_scale = l1 / eps_sum;
                let sum_noise = (0..d).map(|j| IntNoise::laplace(sum_scale / grid.step(j))).collect::<Result<_, _>>()?;
                let count_noise = IntNoise::laplace(1.0 / eps_count)?;
                let split = BudgetSplit::Laplace {
                    epsilon,
                    epsilon_init: eps_init,
                    iterations,
                    epsilon_per_iteration: per_iter,
                    epsilon_count: eps_count,
                    epsilon_sum: eps_sum,
                    count_scale: count_noise.parameter(),
                    sum_scale,
                    sum_sensitivity: l1,
                    split: rule,
                };
                Ok(Self { grid, count_noise, sum_noise, iterations, split })
            }
            Budget::Gaussian { epsilon, delta, rho } => {
                let rho_init = init_spent;
                let per_iter = (rho - rho_init) / t;
                let rho_count = per_iter * count_share(rule, &extent, true);
                let rho_sum = per_iter - rho_count;
                let l2 = extent.iter().map(|m| m * m).sum::<f64>().sqrt();
                let grid = Grid::new(origin, &extent, l2 / (2.0 * rho_sum).sqrt());
                let l2 = (0..d).map(|j| grid.real_bound(j).powi(2)).sum::<f64>().sqrt();
                let sum_sigma = l2 / (2.0 * rho_sum).sqrt();
                let sum_noise = (0..d).map(|j| IntNoise::gaussian(sum_sigma / grid.step(j))).collect::<Result<_, _>>()?;
                let count_noise = IntNoise::gaussian(1.0 / (2.0 * rho_count).sqrt())?;
                let split = BudgetSplit::Gaussian {
                    epsilon,
                    delta,
                    rho,
                    rho_init,
                    iterations,
                    rho_per_iteration: per_iter,
                    rho_count,
                    rho_sum,
                    count_sigma: count_noise.parameter(),
                    sum_sigma,
                    sum_sensitivity: l2,
                    split: rule,
                };
                Ok(Self { grid, count_noise, sum_noise, iterations, split })
            }
        }
    }

    /// The cost of the whole run: T self-composed iterations, each the count release and the
    /// d per-dimension sum releases.
    pub(crate) fn event(&self) -> PrivacyEvent {
        let mut events = vec![self.count_noise.event(1)];
        events.extend(self.sum_noise.iter().enumerate().map(|(j, noise)| noise.event(self.grid.bound(j))));
        PrivacyEvent::Composed { events }.repeated(self.iterations as u64)
    }

    /// Runs the T noisy updates from `centroids` on `points` (row-major, clamped into
    /// `bounds`) and returns the final centroids.
    pub(crate) fn run(&self, points: &[f64], bounds: &Bounds, mut centroids: Vec<f64>, rng: &mut DpRng) -> Vec<f64> {
        let d = self.grid.dims();
        let k = centroids.len() / d;
        let q = self.grid.quantise(points);
        for _ in 0..self.iterations {
            let mut counts = vec![0i64; k];
            let mut sums = vec![0i128; k * d];
            for (point, qrow) in points.chunks_exact(d).zip(q.chunks_exact(d)) {
                let (c, _) = nearest(point, &centroids, d);
                counts[c] += 1;
                for (s, &v) in sums[c * d..(c + 1) * d].iter_mut().zip(qrow) {
                    *s += i128::from(v);
                }
            }
            for c in 0..k {
                // Noise is drawn for every cluster, empty or not: skipping would reveal emptiness.
                let noisy_count = counts[c] as f64 + self.count_noise.sample(rng) as f64;
                let noisy_sums: Vec<f64> =
                    (0..d).map(|j| (sums[c * d + j] + i128::from(self.sum_noise[j].sample(rng))) as f64).collect();
                if noisy_count < 1.0 {
                    continue; // too few (noisy) members to locate: keep the previous centroid
                }
                for (j, s) in noisy_sums.iter().enumerate() {
                    centroids[c * d + j] = bounds.clamp(j, self.grid.to_real(j, s / noisy_count));
                }
            }
        }
        centroids
    }
}
