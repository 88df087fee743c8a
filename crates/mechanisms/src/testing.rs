//! Statistical test helpers shared by the unit tests: Kolmogorov–Smirnov, chi-square with pooled
//! cells, Bonferroni-corrected normal quantiles, and the empirical privacy check on neighbouring
//! inputs. Compiled only for tests.

use crate::normal::normal_cdf;

/// The upper-tail standard normal quantile z with P\[Z > z\] = alpha / m (Bonferroni over m
/// one-sided tests), by bisection on Φ.
pub(crate) fn z_bonferroni(alpha: f64, m: usize) -> f64 {
    let target = alpha / m as f64;
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if normal_cdf(-mid) > target {
            lo = mid
        } else {
            hi = mid
        }
    }
    hi
}

/// The Kolmogorov–Smirnov statistic D_n = sup |F_n − F| of `samples` against `cdf`.
pub(crate) fn ks_statistic(samples: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len() as f64;
    samples.iter().enumerate().fold(0.0f64, |d, (i, &x)| {
        let f = cdf(x);
        d.max((f - i as f64 / n).abs())
            .max(((i + 1) as f64 / n - f).abs())
    })
}

/// The KS critical value at the 1% level for large n: 1.63 / √n (asymptotic Kolmogorov law).
pub(crate) fn ks_critical_1pct(n: usize) -> f64 {
    1.63 / (n as f64).sqrt()
}

/// Pearson's chi-square of `counts` against cell probabilities `probs` (summing to ~1) for `n`
/// draws. Adjacent cells are pooled until each pooled cell expects ≥ 5 draws (the usual validity
/// rule). Returns (statistic, degrees of freedom = pooled cells − 1).
pub(crate) fn chi_square(counts: &[u64], probs: &[f64], n: u64) -> (f64, usize) {
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let (mut obs, mut exp) = (0.0, 0.0);
    for (&c, &p) in counts.iter().zip(probs) {
        obs += c as f64;
        exp += p * n as f64;
        if exp >= 5.0 {
            cells.push((obs, exp));
            (obs, exp) = (0.0, 0.0);
        }
    }
    if let Some(last) = cells.last_mut() {
        last.0 += obs;
        last.1 += exp;
    }
    let stat = cells.iter().map(|&(o, e)| (o - e) * (o - e) / e).sum();
    (stat, cells.len().saturating_sub(1))
}

/// The chi-square critical value for `df` degrees of freedom at upper level `alpha`, by the
/// Wilson–Hilferty cube approximation df·(1 − 2/(9df) + z·√(2/(9df)))³ (relative error well
/// under 1% for df ≥ 3 at these levels).
pub(crate) fn chi_square_critical(df: usize, alpha: f64) -> f64 {
    let df = df.max(1) as f64;
    let z = z_bonferroni(alpha, 1);
    let c = 2.0 / (9.0 * df);
    df * (1.0 - c + z * c.sqrt()).powi(3)
}

/// Bucket counts: bucket i holds the samples x with edges[i−1] ≤ x < edges[i] (edges sorted;
/// bucket 0 is everything below edges[0], the last everything from the last edge up).
pub(crate) fn bucketize(samples: impl IntoIterator<Item = f64>, edges: &[f64]) -> Vec<u64> {
    let mut counts = vec![0u64; edges.len() + 1];
    for x in samples {
        counts[edges.partition_point(|&e| e <= x)] += 1;
    }
    counts
}

/// The empirical privacy check on neighbouring inputs.
///
/// `a` and `b` are bucket counts of `n` outputs each, on neighbouring inputs. For every bucket S
/// and both directions, (ε, δ)-DP requires P_a(S) − e^ε P_b(S) − δ ≤ 0. The statistic is the
/// largest z-score (p̂_a − e^ε p̂_b − δ) / se, se² = p̂_a(1−p̂_a)/n + e^{2ε} p̂_b(1−p̂_b)/n,
/// over buckets where one of the two counts reaches `min_count` (so the normal approximation is
/// reasonable). Returns (max z, number of one-sided tests): a violation is declared when max z
/// exceeds [`z_bonferroni`]`(alpha, tests)`.
pub(crate) fn max_violation_z(
    a: &[u64],
    b: &[u64],
    n: u64,
    eps: f64,
    delta: f64,
    min_count: u64,
) -> (f64, usize) {
    let n_f = n as f64;
    let mut worst = f64::NEG_INFINITY;
    let mut tests = 0;
    for (&ca, &cb) in a.iter().zip(b) {
        if ca.max(cb) < min_count {
            continue;
        }
        for (x, y) in [(ca, cb), (cb, ca)] {
            let (px, py) = (x as f64 / n_f, y as f64 / n_f);
            let se = (px * (1.0 - px) / n_f + eps.exp().powi(2) * py * (1.0 - py) / n_f).sqrt();
            let z = (px - eps.exp() * py - delta) / se.max(1e-300);
            worst = worst.max(z);
            tests += 1;
        }
    }
    (worst, tests)
}

/// Runs [`max_violation_z`] and reports whether it declares a violation at level 0.001
/// (Bonferroni over the tests made).
pub(crate) fn violates(a: &[u64], b: &[u64], n: u64, eps: f64, delta: f64) -> (bool, f64, f64) {
    let (z, tests) = max_violation_z(a, b, n, eps, delta, 20);
    let crit = z_bonferroni(0.001, tests.max(1));
    (z > crit, z, crit)
}

/// Exact pmf of an integer-valued law on −k_max..=k_max (tails beyond are negligible).
pub(crate) fn pmf(weight: impl Fn(f64) -> f64, k_max: i64) -> Vec<(i64, f64)> {
    let total: f64 = (-k_max..=k_max).map(|k| weight(k as f64)).sum();
    (-k_max..=k_max)
        .map(|k| (k, weight(k as f64) / total))
        .collect()
}

/// The discrete Gaussian's pmf for σ² = `s2`, out to 12σ.
pub(crate) fn discrete_gaussian_pmf(s2: f64) -> Vec<(i64, f64)> {
    pmf(
        |k| (-k * k / (2.0 * s2)).exp(),
        (12.0 * s2.sqrt()).ceil() as i64 + 2,
    )
}

/// Samples `n` draws and checks a chi-square goodness of fit (cells with expected count < 5
/// pooled into the two tails), the mean and the variance.
pub(crate) fn check_law(mut draw: impl FnMut() -> i64, law: &[(i64, f64)], n: usize) {
    let k_max = law.last().unwrap().0;
    let mut counts = vec![0u64; law.len()];
    let mut sum = 0.0;
    let mut sum_sq = 0.0;
    for _ in 0..n {
        let k = draw();
        sum += k as f64;
        sum_sq += (k * k) as f64;
        counts[(k.clamp(-k_max, k_max) + k_max) as usize] += 1;
    }
    let probs: Vec<f64> = law.iter().map(|&(_, p)| p).collect();
    let (stat, df) = chi_square(&counts, &probs, n as u64);
    let crit = chi_square_critical(df, 0.001);
    assert!(stat < crit, "chi-square {stat} ≥ {crit} (df {df})");
    // Mean and variance: the sample mean has sd sqrt(var/n); the sample second moment has
    // sd sqrt((μ4 − var²)/n). Both within 4.9 sd (two-sided 1e-6).
    let var: f64 = law.iter().map(|&(k, p)| p * (k * k) as f64).sum();
    let mu4: f64 = law.iter().map(|&(k, p)| p * ((k * k) as f64).powi(2)).sum();
    let n = n as f64;
    assert!((sum / n).abs() < 4.9 * (var / n).sqrt(), "mean {}", sum / n);
    assert!(
        (sum_sq / n - var).abs() < 4.9 * ((mu4 - var * var) / n).sqrt(),
        "var {} vs {var}",
        sum_sq / n
    );
}

/// For a discrete Gaussian with a wide σ (a power of two ≥ 2⁴) the mass on an interval [a, b)
/// of integers is that of N(0, σ²) on [a − ½, b − ½) up to far below double precision (Poisson
/// summation: relative error about exp(−2π²σ²)), so `n` draws are checked by a chi-square
/// against the normal distribution function over 32 cells of width σ/4 on [−4σ, 4σ) plus two
/// tails.
pub(crate) fn check_normal_shape(mut draw: impl FnMut() -> i64, sigma: i64, n: u64) {
    let cells = 32i64;
    let width = sigma / 4;
    let lo = -cells / 2 * width;
    let mut counts = vec![0u64; cells as usize + 2];
    for _ in 0..n {
        let k = draw();
        let cell = if k < lo {
            0
        } else {
            (1 + (k - lo) / width).min(cells + 1) as usize
        };
        counts[cell] += 1;
    }
    let cdf = |k: i64| normal_cdf((k as f64 - 0.5) / sigma as f64);
    let mut probs = vec![cdf(lo)];
    probs.extend((0..cells).map(|c| cdf(lo + (c + 1) * width) - cdf(lo + c * width)));
    probs.push(1.0 - cdf(lo + cells * width));
    let (stat, df) = chi_square(&counts, &probs, n);
    let crit = chi_square_critical(df, 0.001);
    assert!(stat < crit, "chi-square {stat} ≥ {crit} (df {df})");
}

#[test]
fn helpers_behave() {
    assert!((z_bonferroni(0.05, 2) - 1.96).abs() < 0.01);
    assert!((chi_square_critical(10, 0.001) - 29.59).abs() < 0.3);
    let mut u: Vec<f64> = (0..1000).map(|i| (i as f64 + 0.5) / 1000.0).collect();
    assert!(ks_statistic(&mut u, |x| x) < 1e-3);
    assert_eq!(
        bucketize([0.5, 1.0, 2.5, -3.0], &[0.0, 1.0, 2.0]),
        vec![1, 1, 1, 1]
    );
    let (stat, df) = chi_square(&[50, 50], &[0.5, 0.5], 100);
    assert_eq!((stat, df), (0.0, 1));
}
