//! Seeded train/test splits (stratified by class) and k-fold cross-validation indices.
//!
//! Splits use their own ChaCha20 stream seeded from the given `u64`, so the same seed always
//! gives the same split on every platform. Which records are held out is not a privacy
//! release: these shuffles are bookkeeping, not noise.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha20Rng;

use crate::{DataError, Dataset};

/// Splits `d` into (train, test) with about `test_fraction` of the records in test, stratified:
/// each class is split in the same proportion (to within one record), as scikit-learn's
/// `train_test_split(..., stratify=y)`. Both parts are shuffled.
///
/// # Errors
/// [`DataError::InvalidParameter`] when `test_fraction` is not in (0, 1) or leaves either
/// part empty.
pub fn train_test_split(
    d: &Dataset,
    test_fraction: f64,
    seed: u64,
) -> Result<(Dataset, Dataset), DataError> {
    let (train, test) = stratified_split_indices(&d.y, test_fraction, seed)?;
    Ok((d.subset(&train), d.subset(&test)))
}

/// The indices behind [`train_test_split`]: (train, test) over records labelled `y`.
///
/// The test size is ⌈test_fraction · n⌉ (as scikit-learn); each class c with n_c records
/// gives ⌊test_fraction · n_c⌋ records, and the remaining ones go to the classes with the
/// largest fractional parts (ties to the lower class index).
///
/// # Errors
/// As [`train_test_split`].
pub fn stratified_split_indices(
    y: &[u32],
    test_fraction: f64,
    seed: u64,
) -> Result<(Vec<usize>, Vec<usize>), DataError> {
    let n = y.len();
    if !(test_fraction.is_finite() && test_fraction > 0.0 && test_fraction < 1.0) {
        return Err(DataError::param(
            "test_fraction",
            "finite and in (0, 1)",
            test_fraction,
        ));
    }
    // The small slack keeps e.g. 0.1 · 30 = 3.0000000000000004 from rounding up to 4.
    let n_test = (test_fraction * n as f64 - 1e-9).ceil().max(0.0) as usize;
    if n_test == 0 || n_test >= n {
        return Err(DataError::param(
            "test_fraction",
            format!("such that train and test both get records (n = {n})"),
            test_fraction,
        ));
    }

    // A map, not a vector indexed by class: labels come from the caller and may be sparse.
    let mut classes: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, &c) in y.iter().enumerate() {
        classes.entry(c).or_default().push(i);
    }
    let by_class: Vec<Vec<usize>> = classes.into_values().collect();
    let quotas = allocate(
        &by_class.iter().map(Vec::len).collect::<Vec<_>>(),
        n_test,
        test_fraction,
    );

    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (mut train, mut test) = (Vec::with_capacity(n - n_test), Vec::with_capacity(n_test));
    for (mut members, quota) in by_class.into_iter().zip(quotas) {
        members.shuffle(&mut rng);
        test.extend_from_slice(&members[..quota]);
        train.extend_from_slice(&members[quota..]);
    }
    train.shuffle(&mut rng);
    test.shuffle(&mut rng);
    Ok((train, test))
}

/// Per-class test counts summing to `total` (largest-remainder rounding of fraction · count).
fn allocate(counts: &[usize], total: usize, fraction: f64) -> Vec<usize> {
    let exact: Vec<f64> = counts.iter().map(|&c| fraction * c as f64).collect();
    let mut quotas: Vec<usize> = exact
        .iter()
        .zip(counts)
        .map(|(&q, &c)| (q.floor() as usize).min(c))
        .collect();
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    let mut missing = total.saturating_sub(quotas.iter().sum());
    // `total < Σ counts`, so a class with room always exists while records are missing.
    while missing > 0 {
        let before = missing;
        for &k in &order {
            if missing > 0 && quotas[k] < counts[k] {
                quotas[k] += 1;
                missing -= 1;
            }
        }
        if missing == before {
            break;
        }
    }
    quotas
}

/// One fold of [`kfold`]: (train indices, test indices).
pub type Fold = (Vec<usize>, Vec<usize>);

/// `k` (train, test) index pairs for k-fold cross-validation over `n` records: the records
/// are shuffled with `seed` and cut into `k` folds whose sizes differ by at most one (the
/// first `n mod k` folds get the extra record). Each fold is the test set once; indices in
/// each set are ascending.
///
/// # Errors
/// [`DataError::InvalidParameter`] unless `2 ≤ k ≤ n`.
pub fn kfold(n: usize, k: usize, seed: u64) -> Result<Vec<Fold>, DataError> {
    if k < 2 || k > n {
        return Err(DataError::param(
            "k",
            format!("between 2 and the number of records {n}"),
            k,
        ));
    }
    let mut perm: Vec<usize> = (0..n).collect();
    perm.shuffle(&mut ChaCha20Rng::seed_from_u64(seed));
    let mut folds = Vec::with_capacity(k);
    let mut start = 0;
    for f in 0..k {
        let size = n / k + usize::from(f < n % k);
        let mut test = perm[start..start + size].to_vec();
        test.sort_unstable();
        let mut train: Vec<usize> = perm[..start]
            .iter()
            .chain(&perm[start + size..])
            .copied()
            .collect();
        train.sort_unstable();
        folds.push((train, test));
        start += size;
    }
    Ok(folds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::tests::toy;

    fn is_partition(a: &[usize], b: &[usize], n: usize) -> bool {
        let mut all: Vec<usize> = a.iter().chain(b).copied().collect();
        all.sort_unstable();
        all == (0..n).collect::<Vec<_>>()
    }

    #[test]
    fn split_is_a_stratified_reproducible_partition() {
        let y: Vec<u32> = (0..103).map(|i| [0, 0, 0, 1, 1, 2][i % 6]).collect();
        let (train, test) = stratified_split_indices(&y, 0.25, 7).unwrap();
        assert!(is_partition(&train, &test, 103));
        assert_eq!(test.len(), 26); // ⌈0.25 · 103⌉
        for c in 0..3u32 {
            let n_c = y.iter().filter(|&&v| v == c).count() as f64;
            let t_c = test.iter().filter(|&&i| y[i] == c).count() as f64;
            assert!(
                (t_c - 0.25 * n_c).abs() < 1.0 + 1e-9,
                "class {c}: {t_c} of {n_c}"
            );
        }
        assert_eq!(
            stratified_split_indices(&y, 0.25, 7).unwrap(),
            (train.clone(), test.clone())
        );
        assert_ne!(stratified_split_indices(&y, 0.25, 8).unwrap().1, test);
    }

    #[test]
    fn split_sizes_and_exact_fractions() {
        let y = vec![0u32; 30];
        let (train, test) = stratified_split_indices(&y, 0.1, 1).unwrap();
        assert_eq!((train.len(), test.len()), (27, 3));
        let d = toy(10);
        let (a, b) = train_test_split(&d, 0.3, 3).unwrap();
        assert_eq!((a.n, b.n), (7, 3));
        assert_eq!(a.x.len(), 14);
        // Rows keep their labels: feature 0 of record i is i, its class i % 3.
        for part in [&a, &b] {
            for r in 0..part.n {
                assert_eq!(part.y[r], (part.row(r)[0] as u32) % 3);
            }
        }
    }

    #[test]
    fn split_handles_sparse_labels() {
        let y = vec![u32::MAX, 7, u32::MAX, 7, 7, u32::MAX];
        let (train, test) = stratified_split_indices(&y, 0.5, 2).unwrap();
        assert!(is_partition(&train, &test, 6));
        assert_eq!(test.iter().filter(|&&i| y[i] == 7).count(), 2);
    }

    #[test]
    fn split_rejects_bad_fractions() {
        let y = vec![0u32; 10];
        for f in [0.0, 1.0, -0.5, f64::NAN, 1e-12, 0.99] {
            let msg = stratified_split_indices(&y, f, 0).unwrap_err().to_string();
            assert!(msg.contains("test_fraction"), "{msg}");
        }
    }

    #[test]
    fn kfold_folds_partition_and_cover_everything_once() {
        let folds = kfold(23, 5, 11).unwrap();
        assert_eq!(folds.len(), 5);
        let sizes: Vec<usize> = folds.iter().map(|f| f.1.len()).collect();
        assert_eq!(sizes, vec![5, 5, 5, 4, 4]);
        let mut seen = [0; 23];
        for (train, test) in &folds {
            assert!(is_partition(train, test, 23));
            assert!(test.windows(2).all(|w| w[0] < w[1]));
            for &i in test {
                seen[i] += 1;
            }
        }
        assert!(seen.iter().all(|&s| s == 1));
        assert_eq!(kfold(23, 5, 11).unwrap(), folds);
        assert_ne!(kfold(23, 5, 12).unwrap(), folds);
        for (n, k) in [(5, 1), (5, 6), (0, 2)] {
            assert!(
                kfold(n, k, 0)
                    .unwrap_err()
                    .to_string()
                    .contains("k must be")
            );
        }
    }
}
