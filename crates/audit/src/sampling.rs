//! Random permutations for audits (splitting scores, choosing canaries), drawn from the one
//! randomness source [`DpRng`]. These are simulation uses, not releases.

use dpml_mechanisms::DpRng;

/// Shuffles `items` in place (Fisher–Yates with unbiased `DpRng::below`).
pub(crate) fn shuffle<T>(items: &mut [T], rng: &mut DpRng) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// A uniformly random half split: the shuffled values, cut after `len / 2`.
pub(crate) fn halves(values: &[f64], rng: &mut DpRng) -> (Vec<f64>, Vec<f64>) {
    let mut v = values.to_vec();
    shuffle(&mut v, rng);
    let second = v.split_off(v.len() / 2);
    (v, second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_is_a_uniform_permutation() {
        // Position of element 0 after shuffling 4 items, 40,000 times: each of 4 cells expects
        // 10,000. Chi-square with 3 df has 1% critical value 11.34.
        let mut rng = DpRng::seeded(5);
        let mut counts = [0f64; 4];
        for _ in 0..40_000 {
            let mut v = [0, 1, 2, 3];
            shuffle(&mut v, &mut rng);
            counts[v.iter().position(|&x| x == 0).unwrap_or(0)] += 1.0;
        }
        let chi2: f64 = counts
            .iter()
            .map(|c| (c - 10_000.0).powi(2) / 10_000.0)
            .sum();
        assert!(chi2 < 11.34, "chi2 = {chi2}, counts {counts:?}");
    }

    #[test]
    fn halves_keep_every_value() {
        let mut rng = DpRng::seeded(1);
        let (a, b) = halves(&[1.0, 2.0, 3.0, 4.0, 5.0], &mut rng);
        assert_eq!((a.len(), b.len()), (2, 3));
        let mut all: Vec<f64> = a.into_iter().chain(b).collect();
        all.sort_by(f64::total_cmp);
        assert_eq!(all, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    }
}
