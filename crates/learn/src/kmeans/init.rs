//! Initial centroids for the private Lloyd variants, chosen without looking at the data (so they
//! cost no privacy): only the declared bounds and the random generator are used.

use dpml_mechanisms::DpRng;
use serde::Serialize;

use super::bounds::Bounds;
use super::lloyd::squared_distance;
use super::params::Init;

/// What the initialisation of a private Lloyd run did, as stated in its output.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum InitReport {
    /// Sphere packing inside the bounds (data-independent).
    SpherePacking,
    /// k-means on a noisy grid histogram with this many cells per dimension.
    Histogram {
        /// M, cells per dimension.
        cells_per_dim: usize,
    },
    /// The histogram was not built because its cells would hold mostly noise; sphere packing
    /// was used and only the noisy count was paid for.
    HistogramSkipped {
        /// Number of cells the histogram would have had.
        cells: f64,
        /// Their expected positive noise mass.
        noise_mass: f64,
        /// The noisy record count it was compared with (a private release).
        noisy_count: f64,
    },
}

/// Candidates tried per centre before the sphere radius is halved (as in Su et al.'s and
/// diffprivlib's implementation).
const RETRIES: usize = 100;

/// k data-independent initial centroids (row-major, `k × d`) inside `bounds`. The private
/// [`Init::Histogram`] is computed elsewhere ([`super::histogram`]); asked here, it gets its
/// fallback, sphere packing.
pub(crate) fn initial_centroids(
    init: Init,
    bounds: &Bounds,
    k: usize,
    rng: &mut DpRng,
) -> Vec<f64> {
    let unit = match init {
        Init::SpherePacking | Init::Histogram { .. } => sphere_packing(bounds.dims(), k, rng),
    };
    let d = bounds.dims();
    unit.chunks_exact(d)
        .flat_map(|row| row.iter().enumerate().map(|(j, &u)| bounds.unscale(j, u)))
        .collect()
}

/// Sphere packing in [-1, 1]^d (Su et al. 2016): centres uniform in `[-1 + a, 1 − a]^d`,
/// pairwise at least `2a` apart; `a` starts at 1 (half the side) and is halved whenever
/// `RETRIES` candidates in a row fail.
fn sphere_packing(d: usize, k: usize, rng: &mut DpRng) -> Vec<f64> {
    let mut a = 1.0;
    loop {
        let mut centres: Vec<f64> = Vec::with_capacity(k * d);
        let mut retry = 0;
        while centres.len() < k * d && retry < RETRIES {
            let candidate: Vec<f64> = (0..d)
                .map(|_| (2.0 * rng.uniform_f64() - 1.0) * (1.0 - a))
                .collect();
            let far = centres
                .chunks_exact(d)
                .all(|c| squared_distance(c, &candidate) >= 4.0 * a * a);
            if far {
                centres.extend_from_slice(&candidate);
                retry = 0;
            } else {
                retry += 1;
            }
        }
        if centres.len() == k * d {
            return centres;
        }
        a /= 2.0;
        // With a below 2^-40 any k distinct uniform draws fit; the loop always ends.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sphere_packing_is_inside_and_spread() {
        let bounds = Bounds::from_pairs(&[(4.3, 7.9), (2.0, 4.4), (1.0, 6.9), (0.1, 2.5)]).unwrap();
        let mut rng = DpRng::seeded(1);
        for k in [1, 3, 10] {
            let c = initial_centroids(Init::SpherePacking, &bounds, k, &mut rng);
            assert_eq!(c.len(), 4 * k);
            for row in c.chunks(4) {
                for (j, &v) in row.iter().enumerate() {
                    assert!(v >= bounds.lo()[j] && v <= bounds.hi()[j]);
                }
            }
        }
        // In the unit cube, three centres end up with a = 1/2: pairwise ≥ 1 apart.
        let u = sphere_packing(4, 3, &mut rng);
        for i in 0..3 {
            for j in 0..i {
                assert!(
                    squared_distance(&u[i * 4..i * 4 + 4], &u[j * 4..j * 4 + 4]) >= 1.0 - 1e-12
                );
            }
        }
    }
}
