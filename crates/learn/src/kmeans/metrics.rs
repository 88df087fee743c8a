//! Scores of a clustering: accuracy against known classes after the best one-to-one matching,
//! inertia, and the normalised intra-cluster variance (NICV) of Su et al.

use super::bounds::Bounds;
use super::lloyd::nearest;
use pathfinding::kuhn_munkres::kuhn_munkres;
use pathfinding::matrix::Matrix;

use crate::LearnError;

/// The share of records whose cluster, mapped to a class by the best one-to-one matching of
/// clusters to classes, equals their class (the Hungarian algorithm on the k × n_classes
/// contingency table). With k > n_classes the extra clusters count as wrong, and with
/// k < n_classes some classes go unmatched.
///
/// # Errors
/// [`LearnError::Labels`] when the two slices differ in length or are empty, or an assignment
/// is ≥ k or a label ≥ n_classes (the message names the first such value).
pub fn clustering_accuracy(
    assignments: &[usize],
    labels: &[u32],
    k: usize,
    n_classes: usize,
) -> Result<f64, LearnError> {
    if assignments.len() != labels.len() || assignments.is_empty() {
        return Err(LearnError::Labels(format!(
            "need as many assignments as labels, at least one: got {} assignments and {} labels",
            assignments.len(),
            labels.len()
        )));
    }
    let mut table = Matrix::new(k, n_classes, 0i64);
    for (i, (&c, &l)) in assignments.iter().zip(labels).enumerate() {
        if c >= k {
            return Err(LearnError::Labels(format!(
                "assignment {c} of record {i} is not below k = {k}"
            )));
        }
        if l as usize >= n_classes {
            return Err(LearnError::Labels(format!(
                "label {l} of record {i} is not below n_classes = {n_classes}"
            )));
        }
        table[(c, l as usize)] += 1;
    }
    Ok(matched_records(table) as f64 / assignments.len() as f64)
}

/// The most records a one-to-one matching of the contingency table's rows (clusters) to its
/// columns (classes) puts on matched pairs: the Hungarian algorithm (`pathfinding`'s
/// Kuhn–Munkres). The weights are counts, so the optimum is exact. Kuhn–Munkres matches every
/// row of a matrix with no more rows than columns, so a table with more clusters than classes
/// is matched on its transpose (every class gets a distinct cluster), which has the same
/// optimum.
fn matched_records(table: Matrix<i64>) -> i64 {
    if table.rows == 0 || table.columns == 0 {
        return 0;
    }
    let table = if table.rows <= table.columns {
        table
    } else {
        table.transposed()
    };
    kuhn_munkres(&table).0
}

/// Sum over records of the squared distance to the nearest centroid (`x` row-major `n × d`,
/// `centroids` row-major `k × d`).
///
/// # Errors
/// [`LearnError::Shape`] when `x` or `centroids` is not a whole number of rows of `d`.
pub fn inertia<T: Copy + Into<f64>>(
    x: &[T],
    d: usize,
    centroids: &[f64],
) -> Result<f64, LearnError> {
    check_rows(x.len(), d)?;
    check_rows(centroids.len(), d)?;
    let mut row = vec![0.0; d];
    Ok(x.chunks_exact(d)
        .map(|p| {
            for (r, &v) in row.iter_mut().zip(p) {
                *r = v.into();
            }
            nearest(&row, centroids, d).1
        })
        .sum())
}

/// Normalised intra-cluster variance (Su et al. 2016, §6):
/// `NICV = (1/n) Σ_i Σ_{x ∈ C_i} ‖x − o_i‖²` with records and centroids rescaled from the
/// declared bounds to [-1, 1]^d (records clamped first) and each record in the cluster of its
/// nearest centroid in that space. Comparable across data sets and dimensions; lower is
/// better.
///
/// # Citations
/// D. Su, J. Cao, N. Li, E. Bertino, H. Jin, "Differentially private k-means clustering",
/// CODASPY 2016 (arXiv:1504.05998), the evaluation metric NICV; also used by FastLloyd
/// (Diaa, Humphries, Kerschbaum 2024).
///
/// # Errors
/// [`LearnError::BoundsDimension`] when the bounds do not cover d dimensions;
/// [`LearnError::Shape`] as [`inertia`], or for an empty `x`.
pub fn nicv<T: Copy + Into<f64>>(
    x: &[T],
    d: usize,
    centroids: &[f64],
    bounds: &Bounds,
) -> Result<f64, LearnError> {
    bounds.check_dims(d)?;
    check_rows(x.len(), d)?;
    check_rows(centroids.len(), d)?;
    if x.is_empty() || centroids.is_empty() {
        return Err(LearnError::Shape {
            len: 0,
            n: 0,
            d,
            expected: d,
        });
    }
    let unit = |i: usize, v: f64| bounds.to_unit(i % d, v);
    let xs: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| unit(i, v.into()))
        .collect();
    let cs: Vec<f64> = centroids
        .iter()
        .enumerate()
        .map(|(i, &v)| unit(i, v))
        .collect();
    Ok(inertia(&xs, d, &cs)? / (x.len() / d) as f64)
}

/// Checks that `len` values make whole rows of `d`.
fn check_rows(len: usize, d: usize) -> Result<(), LearnError> {
    if d == 0 || !len.is_multiple_of(d) {
        return Err(LearnError::Shape {
            len,
            n: len / d.max(1),
            d,
            expected: (len / d.max(1)) * d,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accuracy_uses_the_best_matching_not_the_labels_as_given() {
        // Clusters are a permutation of the classes: accuracy 1.
        assert_eq!(
            clustering_accuracy(&[2, 2, 0, 0, 1, 1], &[0, 0, 1, 1, 2, 2], 3, 3).unwrap(),
            1.0
        );
        // table: c0 = [3, 2], c1 = [3, 0]. Greedy (largest entry first: c0 → class 0) gives
        // 3 + 0; the best matching is c0 → class 1, c1 → class 0: 2 + 3 = 5 of 8.
        let a = [0, 0, 0, 0, 0, 1, 1, 1];
        let l = [0, 0, 0, 1, 1, 0, 0, 0];
        assert_eq!(clustering_accuracy(&a, &l, 2, 2).unwrap(), 5.0 / 8.0);
        let a = [0, 0, 0, 0, 1, 1, 1, 1];
        let l = [0, 0, 1, 1, 0, 0, 0, 1];
        // table: c0 = [2, 2], c1 = [3, 1] → c0→1 (2) + c1→0 (3) = 5.
        assert_eq!(clustering_accuracy(&a, &l, 2, 2).unwrap(), 5.0 / 8.0);
        // One cluster for two classes: only the larger class can be matched.
        assert_eq!(
            clustering_accuracy(&[0, 0, 0], &[1, 1, 0], 1, 2).unwrap(),
            2.0 / 3.0
        );
        // More clusters than classes: the extra cluster counts as wrong.
        assert_eq!(
            clustering_accuracy(&[0, 1, 2, 2], &[0, 0, 1, 1], 3, 2).unwrap(),
            0.75
        );
    }

    /// The most records any one-to-one matching of clusters to classes gets right, by
    /// enumerating every injective map from clusters to classes (a cluster may stay
    /// unmatched).
    fn brute_force_matched(a: &[usize], l: &[u32], k: usize, n_classes: usize) -> usize {
        fn rec(table: &[Vec<usize>], c: usize, used: &mut Vec<bool>) -> usize {
            if c == table.len() {
                return 0;
            }
            let mut best = rec(table, c + 1, used);
            for j in 0..used.len() {
                if !used[j] {
                    used[j] = true;
                    best = best.max(table[c][j] + rec(table, c + 1, used));
                    used[j] = false;
                }
            }
            best
        }
        let mut table = vec![vec![0; n_classes]; k];
        for (&c, &y) in a.iter().zip(l) {
            table[c][y as usize] += 1;
        }
        rec(&table, 0, &mut vec![false; n_classes])
    }

    #[test]
    fn accuracy_matches_brute_force_on_random_clusterings() {
        // Square and rectangular tables both ways, with many ties (few records per cell).
        let mut rng = dpml_mechanisms::DpRng::seeded(11);
        for trial in 0..300 {
            let k = 1 + rng.below(6) as usize;
            let n_classes = 1 + rng.below(6) as usize;
            let n = 1 + rng.below(30) as usize;
            let a: Vec<usize> = (0..n).map(|_| rng.below(k as u64) as usize).collect();
            let l: Vec<u32> = (0..n).map(|_| rng.below(n_classes as u64) as u32).collect();
            let want = brute_force_matched(&a, &l, k, n_classes) as f64 / n as f64;
            let got = clustering_accuracy(&a, &l, k, n_classes).unwrap();
            assert_eq!(
                got, want,
                "trial {trial}: k {k}, {n_classes} classes, {a:?} {l:?}"
            );
        }
    }

    #[test]
    fn accuracy_rejects_bad_labels() {
        let msg = clustering_accuracy(&[0, 3], &[0, 1], 3, 2)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("assignment 3 of record 1"), "{msg}");
        let msg = clustering_accuracy(&[0, 1], &[0, 2], 3, 2)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("label 2 of record 1"), "{msg}");
        assert!(clustering_accuracy(&[0], &[0, 1], 3, 2).is_err());
        assert!(clustering_accuracy(&[], &[], 3, 2).is_err());
    }

    #[test]
    fn inertia_and_nicv_by_hand() {
        let x = [0.0, 0.0, 2.0, 0.0, 10.0, 10.0];
        let c = [1.0, 0.0, 10.0, 10.0];
        assert_eq!(inertia(&x, 2, &c).unwrap(), 2.0);
        // Bounds [0, 10]²: the unit map is x ↦ x/5 − 1, so squared distances scale by 1/25.
        let b = Bounds::uniform(0.0, 10.0, 2).unwrap();
        assert!((nicv(&x, 2, &c, &b).unwrap() - 2.0 / 25.0 / 3.0).abs() < 1e-12);
        assert!(inertia(&x, 4, &c).is_err());
        assert!(nicv(&x, 2, &c, &Bounds::uniform(0.0, 1.0, 3).unwrap()).is_err());
    }
}
