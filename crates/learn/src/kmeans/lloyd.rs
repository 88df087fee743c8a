//! Plain Lloyd iterations and their kernels (nearest-centroid assignment, centroid update,
//! k-means++ seeding), shared by the non-private baseline, input perturbation and the private
//! variants. Points and centroids are row-major `f64` buffers of width `d`.

use dpml_mechanisms::DpRng;

/// Squared Euclidean distance between two rows.
pub(crate) fn squared_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Index of the nearest centroid to `point` and the squared distance to it (ties: lowest
/// index).
pub(crate) fn nearest(point: &[f64], centroids: &[f64], d: usize) -> (usize, f64) {
    let mut best = (0, f64::INFINITY);
    for (c, centroid) in centroids.chunks_exact(d).enumerate() {
        let dist = squared_distance(point, centroid);
        if dist < best.1 {
            best = (c, dist);
        }
    }
    best
}

/// Assigns every point to its nearest centroid, writing `labels`; returns the inertia (the sum
/// of squared distances to the assigned centroids).
pub(crate) fn assign(points: &[f64], centroids: &[f64], d: usize, labels: &mut [usize]) -> f64 {
    let mut inertia = 0.0;
    for (label, point) in labels.iter_mut().zip(points.chunks_exact(d)) {
        let (c, dist) = nearest(point, centroids, d);
        *label = c;
        inertia += dist;
    }
    inertia
}

/// One Lloyd update: each centroid becomes the weighted mean of its points; a centroid without
/// weight stays where it is. Returns the largest squared movement of a centroid.
fn update(
    points: &[f64],
    weights: &[f64],
    labels: &[usize],
    d: usize,
    centroids: &mut [f64],
) -> f64 {
    let k = centroids.len() / d;
    let mut sums = vec![0.0; k * d];
    let mut mass = vec![0.0; k];
    for ((point, &c), &w) in points.chunks_exact(d).zip(labels).zip(weights) {
        mass[c] += w;
        for (s, x) in sums[c * d..(c + 1) * d].iter_mut().zip(point) {
            *s += w * x;
        }
    }
    let mut moved: f64 = 0.0;
    for c in 0..k {
        if mass[c] <= 0.0 {
            continue;
        }
        let row = &mut centroids[c * d..(c + 1) * d];
        let mean: Vec<f64> = sums[c * d..(c + 1) * d]
            .iter()
            .map(|s| s / mass[c])
            .collect();
        moved = moved.max(squared_distance(row, &mean));
        row.copy_from_slice(&mean);
    }
    moved
}

/// An index drawn with probability proportional to `weights` (uniform if they sum to 0).
fn draw(weights: &[f64], rng: &mut DpRng) -> usize {
    let total: f64 = weights.iter().sum();
    if total > 0.0 {
        let target = rng.uniform_f64() * total;
        let mut acc = 0.0;
        weights
            .iter()
            .position(|w| {
                acc += w;
                acc > target
            })
            .unwrap_or(weights.len() - 1)
    } else {
        rng.below(weights.len() as u64) as usize
    }
}

/// Weighted k-means++ seeding (Arthur & Vassilvitskii 2007): the first centre with probability
/// proportional to its weight, each next one proportional to weight × squared distance to the
/// nearest centre chosen so far. For public (or already privatised) points only: it reads
/// individual records.
pub(crate) fn kmeans_plus_plus(
    points: &[f64],
    weights: &[f64],
    d: usize,
    k: usize,
    rng: &mut DpRng,
) -> Vec<f64> {
    let mut centroids = Vec::with_capacity(k * d);
    let first = draw(weights, rng);
    centroids.extend_from_slice(&points[first * d..(first + 1) * d]);
    let mut dist: Vec<f64> = points
        .chunks_exact(d)
        .map(|p| squared_distance(p, &centroids[..d]))
        .collect();
    while centroids.len() < k * d {
        let score: Vec<f64> = dist.iter().zip(weights).map(|(x, w)| x * w).collect();
        let pick = draw(&score, rng);
        let start = centroids.len();
        centroids.extend_from_slice(&points[pick * d..(pick + 1) * d]);
        for (w, p) in dist.iter_mut().zip(points.chunks_exact(d)) {
            *w = w.min(squared_distance(p, &centroids[start..start + d]));
        }
    }
    centroids
}

/// The result of plain Lloyd iterations.
pub(crate) struct LloydRun {
    /// Final centroids, `k × d`.
    pub centroids: Vec<f64>,
    /// Iterations performed (updates of the centroids).
    pub iterations: usize,
    /// Inertia of the final assignment.
    pub inertia: f64,
}

/// Weighted Lloyd from `centroids` until no centroid moves by more than `tol` (squared
/// distance, relative to the squared scale of the data) or `max_iter` updates. The inertia is
/// weighted too.
pub(crate) fn lloyd(
    points: &[f64],
    weights: &[f64],
    d: usize,
    mut centroids: Vec<f64>,
    max_iter: usize,
) -> LloydRun {
    let n = points.len() / d;
    let mut labels = vec![0; n];
    let scale: f64 = points.iter().map(|x| x * x).sum::<f64>() / n.max(1) as f64;
    let tol = 1e-12 * scale.max(f64::MIN_POSITIVE);
    let mut iterations = 0;
    while iterations < max_iter {
        assign(points, &centroids, d, &mut labels);
        iterations += 1;
        if update(points, weights, &labels, d, &mut centroids) <= tol {
            break;
        }
    }
    assign(points, &centroids, d, &mut labels);
    let inertia = points
        .chunks_exact(d)
        .zip(&labels)
        .zip(weights)
        .map(|((p, &c), w)| w * squared_distance(p, &centroids[c * d..(c + 1) * d]))
        .sum();
    LloydRun {
        centroids,
        iterations,
        inertia,
    }
}

/// The best of `restarts` weighted Lloyd runs from k-means++ seeds (lowest inertia), as
/// scikit-learn does with `n_init`.
pub(crate) fn lloyd_restarts(
    points: &[f64],
    weights: &[f64],
    d: usize,
    k: usize,
    max_iter: usize,
    restarts: usize,
    rng: &mut DpRng,
) -> LloydRun {
    let mut best: Option<LloydRun> = None;
    for _ in 0..restarts.max(1) {
        let seeds = kmeans_plus_plus(points, weights, d, k, rng);
        let run = lloyd(points, weights, d, seeds, max_iter);
        if best.as_ref().is_none_or(|b| run.inertia < b.inertia) {
            best = Some(run);
        }
    }
    // restarts.max(1) ≥ 1 iterations ran, so `best` is set.
    best.unwrap_or_else(|| lloyd(points, weights, d, points[..k * d].to_vec(), max_iter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_and_assign() {
        let centroids = [0.0, 0.0, 10.0, 10.0];
        assert_eq!(nearest(&[1.0, 2.0], &centroids, 2), (0, 5.0));
        assert_eq!(nearest(&[9.0, 9.0], &centroids, 2), (1, 2.0));
        let points = [0.0, 1.0, 10.0, 9.0, 6.0, 6.0];
        let mut labels = vec![9; 3];
        let inertia = assign(&points, &centroids, 2, &mut labels);
        assert_eq!(labels, vec![0, 1, 1]);
        assert_eq!(inertia, 1.0 + 1.0 + 32.0);
    }

    #[test]
    fn lloyd_converges_on_two_blobs() {
        let points = [
            0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 10.0, 10.0, 11.0, 10.0, 10.0, 11.0,
        ];
        let run = lloyd(&points, &[1.0; 6], 2, vec![0.0, 0.0, 1.0, 0.0], 100);
        let mut c: Vec<_> = run.centroids.chunks(2).map(|r| (r[0], r[1])).collect();
        c.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(
            (c[0].0 - 1.0 / 3.0).abs() < 1e-12 && (c[1].0 - 31.0 / 3.0).abs() < 1e-12,
            "{c:?}"
        );
        assert!(run.iterations < 10);
    }

    #[test]
    fn kmeans_plus_plus_picks_distinct_points() {
        let points = [0.0, 0.0, 0.0, 0.0, 5.0, 5.0];
        let mut rng = DpRng::seeded(3);
        for _ in 0..20 {
            let c = kmeans_plus_plus(&points, &[1.0; 3], 2, 2, &mut rng);
            // The duplicate point has distance 0 to the first centre: never chosen second.
            assert!(c[0..2] != c[2..4], "{c:?}");
        }
    }
}
