//! A private initialisation: centroids from a noisy grid histogram, as in the EUGkM step of
//! Su et al.'s hybrid approach (their best performer in low dimension): the bounds are cut into
//! `M^d` equal cells, each cell's count gets noise, and a weighted (non-private) k-means on the
//! centres of the cells whose noisy count clears a threshold, weighted by those counts, gives
//! the initial centroids for DPLloyd. The threshold τ is set so that about one empty cell is
//! expected to clear it (Laplace of scale b: `τ = b·ln(cells/2)`; Gaussian of σ:
//! `τ = σ·√(2 ln cells)`): without it the noise of the many empty cells forms a uniform floor
//! that pulls centroids into empty space.
//!
//! In high dimension (or with little data) the `M^d ≥ 2^d` cells would hold mostly noise.
//! When the expected positive noise mass of all cells, `M^d·E[max(0, Z)]`, exceeds the noisy
//! record count ñ, or `M^d > 2^20`, the histogram is not built: sphere packing is used instead
//! and only the count's budget is spent (the rest goes back to the iterations).
//!
//! # Privacy
//! Add/remove-one relation. A tenth of the initialisation budget releases a noisy record count
//! ñ (sensitivity 1), used only to choose `M`; the rest releases the histogram, in which one
//! record changes one cell by 1 (L1 = L2 sensitivity 1). Laplace: `ε_init = ε_n + ε_h` by
//! basic composition; Gaussian: `ρ_init = ρ_n + ρ_h` in zCDP. Everything after (clamping,
//! k-means on cell centres) is post-processing.
//!
//! # Grid size
//! Su et al. choose `M = (N·ε/10)^{2/(2+d)}` cells per dimension, balancing the noise per cell
//! against the coarseness of the grid. We use ñ for N, the histogram's ε (for the Gaussian
//! the ε whose Laplace variance 2/ε² equals the Gaussian's 1/(2ρ), i.e. √(4ρ)), and
//! `M ≥ 2`, lowering M until `M^d ≤ 2^20` cells.
//!
//! # Citations
//! D. Su, J. Cao, N. Li, E. Bertino, H. Jin, "Differentially private k-means clustering",
//! CODASPY 2016 (EUGkM and the hybrid EUGkM + DPLloyd); with M. Lyu, ACM TOPS 20(4), 2017.
//!
//! # Errors
//! [`LearnError::Mechanism`] if a noise scale is out of the exact samplers' range.

use dpml_mechanisms::{DpRng, PrivacyEvent};

use super::bounds::Bounds;
use super::init::{InitReport, initial_centroids};
use super::lloyd::lloyd_restarts;
use super::params::Init;
use super::release::{Allot, GridNoise};
use crate::LearnError;

/// Largest number of cells, 2^20.
const MAX_CELLS: usize = 1 << 20;
/// Share of the initialisation budget spent on the record count.
const COUNT_SHARE: f64 = 0.1;
/// Su et al.'s θ in `M = (N·ε/θ)^{2/(2+d)}`.
const THETA: f64 = 10.0;
/// Lloyd iterations on the synthetic cell data.
const MAX_ITER: usize = 100;

/// The budget of the initialisation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum InitBudget {
    /// Laplace noise with total pure ε.
    Epsilon(f64),
    /// Gaussian noise with total zCDP ρ.
    Rho(f64),
}

impl InitBudget {
    /// The amount (ε or ρ).
    fn amount(self) -> f64 {
        match self {
            InitBudget::Epsilon(x) | InitBudget::Rho(x) => x,
        }
    }

    /// Noisy counts with a `share` of this budget, their ε-equivalent (the ε whose Laplace
    /// variance 2/ε² equals the noise variance) and the expected positive part of the noise.
    fn counts(self, share: f64) -> Result<(GridNoise, f64, f64), LearnError> {
        match self {
            InitBudget::Epsilon(e) => {
                let c = GridNoise::count(Allot::L1Laplace(share * e))?;
                let half_scale = c.real_noise(0) / 2.0;
                Ok((c, share * e, half_scale))
            }
            InitBudget::Rho(r) => {
                let c = GridNoise::count(Allot::L2Gaussian(share * r))?;
                let positive = c.real_noise(0) / (2.0 * std::f64::consts::PI).sqrt();
                Ok((c, (4.0 * share * r).sqrt(), positive))
            }
        }
    }

    /// The count an empty cell's noise exceeds in about one of `cells` cells.
    fn threshold(self, noise: &GridNoise, cells: usize) -> f64 {
        let c = cells as f64;
        match self {
            InitBudget::Epsilon(_) => noise.real_noise(0) * (c / 2.0).ln().max(0.0),
            InitBudget::Rho(_) => noise.real_noise(0) * (2.0 * c.ln()).sqrt(),
        }
    }
}

/// The centroids found, the cost and what was done.
pub(crate) struct HistogramInit {
    /// Initial centroids, row-major `k × d`.
    pub centroids: Vec<f64>,
    /// Cost of the count and (when built) the histogram.
    pub event: PrivacyEvent,
    /// The budget spent (ε or ρ, as the budget given).
    pub spent: f64,
    /// What the initialisation did, for the output.
    pub report: InitReport,
}

/// Initial centroids for `k` clusters of `points` (row-major, clamped into `bounds`).
///
/// # Errors
/// As the module.
pub(crate) fn histogram_init(
    points: &[f64],
    bounds: &Bounds,
    k: usize,
    budget: InitBudget,
    restarts: usize,
    rng: &mut DpRng,
) -> Result<HistogramInit, LearnError> {
    let d = bounds.dims();
    let n = points.len() / d;
    let (count_noise, _, _) = budget.counts(COUNT_SHARE)?;
    let noisy_n = count_noise.release_count(n, rng).max(1.0);
    let (cell_noise, eps_h, positive_part) = budget.counts(1.0 - COUNT_SHARE)?;
    let mut m = ((noisy_n * eps_h / THETA)
        .powf(2.0 / (2.0 + d as f64))
        .floor() as usize)
        .max(2);
    let cells_of = |m: usize| {
        u32::try_from(d)
            .ok()
            .and_then(|d| m.checked_pow(d))
            .filter(|&c| c <= MAX_CELLS)
    };
    // The widest side whose grid fits MAX_CELLS, in closed form (then corrected for float
    // rounding): a huge ε makes `m` about 2^64, and stepping down one at a time never ends.
    let mut side = (MAX_CELLS as f64).powf(1.0 / d as f64).floor() as usize;
    while side > 2 && cells_of(side).is_none() {
        side -= 1;
    }
    while cells_of(side + 1).is_some() {
        side += 1;
    }
    m = m.min(side.max(2));
    let cells = match cells_of(m) {
        Some(c) if c as f64 * positive_part <= noisy_n => c,
        _ => {
            // Mostly noise: skip the histogram, spend only the count.
            let cells = (m as f64).powi(d as i32);
            return Ok(HistogramInit {
                centroids: initial_centroids(Init::SpherePacking, bounds, k, rng),
                event: PrivacyEvent::Composed {
                    events: count_noise.events(),
                },
                spent: COUNT_SHARE * budget.amount(),
                report: InitReport::HistogramSkipped {
                    cells,
                    noise_mass: cells * positive_part,
                    noisy_count: noisy_n,
                },
            });
        }
    };
    let mut counts = vec![0usize; cells];
    for row in points.chunks_exact(d) {
        let cell = row.iter().enumerate().fold(0usize, |acc, (j, &x)| {
            let bin = ((x - bounds.lo()[j]) / bounds.width(j) * m as f64)
                .floor()
                .clamp(0.0, (m - 1) as f64) as usize;
            acc * m + bin
        });
        counts[cell] += 1;
    }
    // Noise on every cell, empty or not; then keep the cells above the noise floor.
    let tau = budget.threshold(&cell_noise, cells);
    let mut centres = Vec::new();
    let mut weights = Vec::new();
    for (cell, &c) in counts.iter().enumerate() {
        let noisy = cell_noise.release_count(c, rng);
        if noisy > tau {
            let mut rest = cell;
            let mut centre = vec![0.0; d];
            for j in (0..d).rev() {
                centre[j] = bounds.lo()[j] + ((rest % m) as f64 + 0.5) / m as f64 * bounds.width(j);
                rest /= m;
            }
            centres.extend(centre);
            weights.push(noisy);
        }
    }
    let event = PrivacyEvent::Composed {
        events: count_noise
            .events()
            .into_iter()
            .chain(cell_noise.events())
            .collect(),
    };
    let centroids = if weights.len() >= k {
        lloyd_restarts(&centres, &weights, d, k, MAX_ITER, restarts, rng).centroids
    } else {
        // Fewer cells above the floor than clusters: a data-independent start.
        initial_centroids(Init::SpherePacking, bounds, k, rng)
    };
    Ok(HistogramInit {
        centroids,
        event,
        spent: budget.amount(),
        report: InitReport::Histogram { cells_per_dim: m },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_two_far_groups_at_large_budget() {
        let bounds = Bounds::uniform(0.0, 1.0, 2).unwrap();
        let points: Vec<f64> = (0..400)
            .flat_map(|i| if i % 2 == 0 { [0.1, 0.1] } else { [0.9, 0.8] })
            .collect();
        let mut rng = DpRng::seeded(2);
        let init =
            histogram_init(&points, &bounds, 2, InitBudget::Epsilon(10.0), 3, &mut rng).unwrap();
        // (ñ·9/10)^{1/2} with ñ = 400 ± a few (discrete Laplace of scale 1): 18 or 19 cells.
        let InitReport::Histogram { cells_per_dim } = init.report else {
            panic!("{:?}", init.report)
        };
        assert!((18..=19).contains(&cells_per_dim), "{cells_per_dim}");
        assert_eq!(init.spent, 10.0);
        let mut c: Vec<(f64, f64)> = init.centroids.chunks(2).map(|r| (r[0], r[1])).collect();
        c.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Cell centres are within half a cell (1/36) of the points; stray noisy cells are few.
        assert!(
            (c[0].0 - 0.1).abs() < 0.05 && (c[1].1 - 0.8).abs() < 0.05,
            "{c:?}"
        );
        let PrivacyEvent::Composed { events } = init.event else {
            panic!("composed")
        };
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn skips_a_histogram_of_mostly_noise_and_spends_only_the_count() {
        // d = 21 needs more than 2^20 cells; d = 8 with 50 records at ε = 1: 256 cells with
        // positive noise mass ≈ 256 · 1/(2·0.9) ≈ 142 > ñ ≈ 50.
        for d in [21, 8] {
            let bounds = Bounds::uniform(0.0, 1.0, d).unwrap();
            let mut rng = DpRng::seeded(2);
            let init = histogram_init(
                &vec![0.5; 50 * d],
                &bounds,
                2,
                InitBudget::Epsilon(1.0),
                1,
                &mut rng,
            )
            .unwrap();
            assert!(
                matches!(init.report, InitReport::HistogramSkipped { .. }),
                "{:?}",
                init.report
            );
            assert!((init.spent - 0.1).abs() < 1e-12);
            let PrivacyEvent::Composed { events } = &init.event else {
                panic!("{:?}", init.event)
            };
            assert_eq!(events.len(), 1);
            assert_eq!(init.centroids.len(), 2 * d);
        }
    }
}
