//! Optimal one-to-one assignment (the Hungarian / Kuhn–Munkres algorithm), used to match
//! clusters to classes when scoring a clustering.
//!
//! The implementation is the O(r²·c) shortest-augmenting-path form with row and column
//! potentials (Kuhn 1955, Munkres 1957; the potentials formulation of Jonker & Volgenant
//! 1987). It handles rectangular matrices: with `r ≤ c` every row gets a distinct column; with
//! `r > c` the problem is solved on the transpose and every column gets a distinct row.

use crate::LearnError;

/// Assignment minimising the total cost: `result[i]` is the column given to row `i`, or `None`
/// when there are more rows than columns and row `i` is left out. `cost` is row-major,
/// `rows × cols`.
///
/// # Errors
/// [`LearnError::InvalidParameter`] when `cost.len() != rows · cols` or a cost is not finite.
pub fn min_cost_assignment(
    cost: &[f64],
    rows: usize,
    cols: usize,
) -> Result<Vec<Option<usize>>, LearnError> {
    if rows.checked_mul(cols) != Some(cost.len()) {
        return Err(LearnError::invalid(
            "cost matrix",
            "must hold rows x cols values",
            format!("{} values for {rows} x {cols}", cost.len()),
        ));
    }
    if let Some(bad) = cost.iter().find(|c| !c.is_finite()) {
        return Err(LearnError::invalid(
            "cost matrix entries",
            "must be finite",
            bad,
        ));
    }
    if rows <= cols {
        Ok(solve(|i, j| cost[i * cols + j], rows, cols))
    } else {
        // Each column gets a row on the transpose; invert that map.
        let by_col = solve(|i, j| cost[j * cols + i], cols, rows);
        let mut by_row = vec![None; rows];
        for (c, r) in by_col.iter().enumerate() {
            if let Some(r) = *r {
                by_row[r] = Some(c);
            }
        }
        Ok(by_row)
    }
}

/// Assignment maximising the total weight (see [`min_cost_assignment`]).
///
/// # Errors
/// As [`min_cost_assignment`].
pub fn max_weight_assignment(
    weight: &[f64],
    rows: usize,
    cols: usize,
) -> Result<Vec<Option<usize>>, LearnError> {
    let negated: Vec<f64> = weight.iter().map(|w| -w).collect();
    min_cost_assignment(&negated, rows, cols)
}

/// Shortest augmenting paths with potentials for `n ≤ m`; every row is assigned.
fn solve(a: impl Fn(usize, usize) -> f64, n: usize, m: usize) -> Vec<Option<usize>> {
    // 1-based arrays; index 0 is the virtual column that starts each augmentation.
    let mut u = vec![0.0f64; n + 1];
    let mut v = vec![0.0f64; m + 1];
    let mut p = vec![0usize; m + 1]; // p[j]: the row matched to column j (0 = none)
    let mut way = vec![0usize; m + 1];
    for i in 1..=n {
        p[0] = i;
        let mut j0 = 0;
        let mut minv = vec![f64::INFINITY; m + 1];
        let mut used = vec![false; m + 1];
        loop {
            used[j0] = true;
            let i0 = p[j0];
            let mut delta = f64::INFINITY;
            let mut j1 = 0;
            for j in 1..=m {
                if !used[j] {
                    let cur = a(i0 - 1, j - 1) - u[i0] - v[j];
                    if cur < minv[j] {
                        minv[j] = cur;
                        way[j] = j0;
                    }
                    if minv[j] < delta {
                        delta = minv[j];
                        j1 = j;
                    }
                }
            }
            for j in 0..=m {
                if used[j] {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
            if p[j0] == 0 {
                break;
            }
        }
        // Flip the alternating path back to the virtual column.
        loop {
            let j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
            if j0 == 0 {
                break;
            }
        }
    }
    let mut result = vec![None; n];
    for j in 1..=m {
        if p[j] != 0 {
            result[p[j] - 1] = Some(j - 1);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpml_mechanisms::DpRng;

    fn total(cost: &[f64], cols: usize, a: &[Option<usize>]) -> f64 {
        a.iter()
            .enumerate()
            .filter_map(|(i, c)| c.map(|c| cost[i * cols + c]))
            .sum()
    }

    /// The best total over all injective maps from the smaller side, by enumeration.
    fn brute_force(cost: &[f64], rows: usize, cols: usize) -> f64 {
        fn rec(cost: &[f64], rows: usize, cols: usize, i: usize, used: &mut Vec<bool>) -> f64 {
            if i == rows {
                return 0.0;
            }
            let mut best = f64::INFINITY;
            if rows > cols {
                // Row i may stay unassigned only if enough rows remain for the free columns.
                let free = used.iter().filter(|u| !**u).count();
                if rows - i > free {
                    best = rec(cost, rows, cols, i + 1, used);
                }
            }
            for j in 0..cols {
                if !used[j] {
                    used[j] = true;
                    best = best.min(cost[i * cols + j] + rec(cost, rows, cols, i + 1, used));
                    used[j] = false;
                }
            }
            best
        }
        rec(cost, rows, cols, 0, &mut vec![false; cols])
    }

    #[test]
    fn hand_cases() {
        // The classic 3×3 example: optimum 1 + 2 + 2 = 5 by rows → (1, 0, 2).
        let cost = [4.0, 1.0, 3.0, 2.0, 0.0, 5.0, 3.0, 2.0, 2.0];
        let a = min_cost_assignment(&cost, 3, 3).unwrap();
        assert_eq!(a, vec![Some(1), Some(0), Some(2)]);
        assert_eq!(total(&cost, 3, &a), 5.0);
        // Greedy (take the largest entry first: 9) would give 9 + 1 = 10; the optimum is 8 + 8.
        let w = [9.0, 8.0, 8.0, 1.0];
        assert_eq!(
            max_weight_assignment(&w, 2, 2).unwrap(),
            vec![Some(1), Some(0)]
        );
        // Rectangular both ways: 2 clusters, 3 classes and 3 clusters, 2 classes.
        let w = [0.0, 5.0, 1.0, 4.0, 0.0, 3.0];
        assert_eq!(
            max_weight_assignment(&w, 2, 3).unwrap(),
            vec![Some(1), Some(0)]
        );
        let w = [0.0, 4.0, 5.0, 0.0, 1.0, 3.0];
        assert_eq!(
            max_weight_assignment(&w, 3, 2).unwrap(),
            vec![Some(1), Some(0), None]
        );
        assert_eq!(min_cost_assignment(&[], 0, 3).unwrap(), vec![]);
    }

    #[test]
    fn matches_brute_force_on_random_matrices() {
        let mut rng = DpRng::seeded(11);
        for trial in 0..300 {
            let rows = 1 + rng.below(7) as usize;
            let cols = 1 + rng.below(7) as usize;
            // Small integer costs make ties common, which is where bugs hide.
            let cost: Vec<f64> = (0..rows * cols).map(|_| rng.below(6) as f64).collect();
            let a = min_cost_assignment(&cost, rows, cols).unwrap();
            let cols_used: Vec<usize> = a.iter().flatten().copied().collect();
            let mut dedup = cols_used.clone();
            dedup.sort_unstable();
            dedup.dedup();
            assert_eq!(
                dedup.len(),
                cols_used.len(),
                "trial {trial}: column used twice"
            );
            assert_eq!(
                cols_used.len(),
                rows.min(cols),
                "trial {trial}: not a full matching"
            );
            let best = brute_force(&cost, rows, cols);
            assert_eq!(
                total(&cost, cols, &a),
                best,
                "trial {trial}: {rows}x{cols} {cost:?}"
            );
        }
    }

    #[test]
    fn ten_by_ten_permutation_is_recovered() {
        // Weight 10 on a hidden permutation, small weights elsewhere: the matching must find it.
        let perm = [3, 7, 0, 9, 1, 4, 8, 2, 6, 5];
        let mut w = vec![0.0; 100];
        for (i, &j) in perm.iter().enumerate() {
            w[i * 10 + j] = 10.0;
            w[i * 10 + (j + 1) % 10] = 6.0;
        }
        let a = max_weight_assignment(&w, 10, 10).unwrap();
        assert_eq!(a, perm.iter().map(|&j| Some(j)).collect::<Vec<_>>());
    }

    #[test]
    fn bad_input_is_named() {
        let msg = min_cost_assignment(&[1.0; 5], 2, 3)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("5 values for 2 x 3"), "{msg}");
        let msg = min_cost_assignment(&[1.0, f64::NAN], 1, 2)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("NaN"), "{msg}");
    }
}
