//! Poisson sampling of batches (design invariant 5): at every step each of the N records joins
//! the batch independently with probability q, so batch sizes follow Binomial(N, q), may be 0,
//! and no record appears twice in one step. This is the sampling the accountants analyse.
//!
//! Rather than flipping N coins per step, the sampler draws the gaps between chosen records,
//! which are Geometric(q) (the number of failures before the next success of independent
//! Bernoulli(q) trials): gap = ⌊ln U / ln(1 − q)⌋ for U uniform on (0, 1]. This costs O(qN)
//! per step instead of O(N) and gives the same law, up to the 2⁻⁵³ resolution of U.

use dpml_mechanisms::DpRng;

use super::error::{Result, config_err};

/// Draws Poisson batches of indices into `0..n`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoissonSampler {
    n: usize,
    q: f64,
    /// ln(1 − q) (< 0), or −∞ for q = 1.
    log_miss: f64,
}

impl PoissonSampler {
    /// A sampler over `n` records with inclusion probability `q`.
    ///
    /// # Errors
    /// [`super::DpSgdError::InvalidConfig`] when `n` is 0 or `q` is not in (0, 1].
    pub fn new(n: usize, q: f64) -> Result<Self> {
        if n == 0 {
            return Err(config_err(
                "Poisson sampling needs at least one record, got n = 0",
            ));
        }
        if !(q > 0.0 && q <= 1.0) {
            return Err(config_err(format!(
                "sampling_rate must be in (0, 1], got {q}"
            )));
        }
        Ok(Self {
            n,
            q,
            log_miss: (-q).ln_1p(),
        })
    }

    /// The inclusion probability q.
    pub fn sampling_rate(&self) -> f64 {
        self.q
    }

    /// The expected batch size q·N.
    pub fn expected_batch(&self) -> f64 {
        self.q * self.n as f64
    }

    /// One step's batch: the chosen indices, increasing, written into `out` (cleared first).
    pub fn sample_into(&self, rng: &mut DpRng, out: &mut Vec<usize>) {
        out.clear();
        if self.q >= 1.0 {
            out.extend(0..self.n);
            return;
        }
        let mut next = 0usize;
        loop {
            // U in (0, 1]: 1 − [0, 1).
            let u = 1.0 - rng.uniform_f64();
            let gap = (u.ln() / self.log_miss).floor();
            // A gap beyond the data ends the batch (NaN cannot occur: ln u ≤ 0 is finite).
            if gap.is_nan() || gap >= (self.n - next) as f64 {
                return;
            }
            let i = next + gap as usize;
            out.push(i);
            next = i + 1;
            if next >= self.n {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batch sizes against Binomial(N, q): a chi-square goodness-of-fit test on cells with
    /// expected count ≥ 5 (tails pooled), plus the mean within 4.5 standard errors.
    #[test]
    fn batch_sizes_follow_the_binomial_law() {
        let (n, q, steps) = (200usize, 0.05, 20_000usize);
        let s = PoissonSampler::new(n, q).unwrap();
        let mut rng = DpRng::seeded(17);
        let mut counts = vec![0u64; n + 1];
        let mut batch = Vec::new();
        let mut total = 0usize;
        for _ in 0..steps {
            s.sample_into(&mut rng, &mut batch);
            counts[batch.len()] += 1;
            total += batch.len();
        }
        // Binomial pmf by the recurrence p(k+1) = p(k)·(n−k)/(k+1)·q/(1−q).
        let mut pmf = vec![(1.0 - q).powi(n as i32)];
        for k in 0..n {
            let next = pmf[k] * (n - k) as f64 / (k + 1) as f64 * q / (1.0 - q);
            pmf.push(next);
        }
        // Cells: pool everything with expected count < 5 into the nearest tail cell.
        let expected: Vec<f64> = pmf.iter().map(|p| p * steps as f64).collect();
        let lo = expected.iter().position(|&e| e >= 5.0).unwrap();
        let hi = expected.iter().rposition(|&e| e >= 5.0).unwrap();
        let mut chi2 = 0.0;
        let mut cells = 0;
        for k in lo..=hi {
            let (obs, exp) = if k == lo {
                (
                    counts[..=lo].iter().sum::<u64>() as f64,
                    expected[..=lo].iter().sum::<f64>(),
                )
            } else if k == hi {
                (
                    counts[hi..].iter().sum::<u64>() as f64,
                    expected[hi..].iter().sum::<f64>(),
                )
            } else {
                (counts[k] as f64, expected[k])
            };
            chi2 += (obs - exp).powi(2) / exp;
            cells += 1;
        }
        // No parameter is estimated, so df = cells − 1. The 0.1% critical value comes from the
        // Wilson–Hilferty approximation df·(1 − 2/(9df) + z·√(2/(9df)))³ with z = 3.09 (for
        // df = 16 it gives 39.4; the table value is 39.25).
        let df = (cells - 1) as f64;
        let crit = df * (1.0 - 2.0 / (9.0 * df) + 3.09 * (2.0 / (9.0 * df)).sqrt()).powi(3);
        assert!(
            chi2 < crit,
            "chi2 = {chi2:.1} over {cells} cells, critical {crit:.1}"
        );
        // Mean batch size: standard error √(Nq(1−q)/steps) = 0.0218; allow 4.5 SE.
        let mean = total as f64 / steps as f64;
        let se = (n as f64 * q * (1.0 - q) / steps as f64).sqrt();
        assert!((mean - n as f64 * q).abs() < 4.5 * se, "mean {mean}");
    }

    /// Indices increase strictly (so no record twice in a step), stay in range, and every
    /// record is drawn: with q = 0.05 over 2000 steps a given record is missed with
    /// probability 0.95^2000 ≈ 3e-45, so any miss means a bug. Each record's inclusion count
    /// is Binomial(2000, 0.05): mean 100, sd 9.75; all 50 lie within 5.5 sd (two-sided level
    /// 4e-8 each, 2e-6 with Bonferroni over 50).
    #[test]
    fn every_record_can_be_drawn_and_none_twice() {
        let (n, q, steps) = (50usize, 0.05, 2000usize);
        let s = PoissonSampler::new(n, q).unwrap();
        let mut rng = DpRng::seeded(3);
        let mut hits = vec![0u32; n];
        let mut batch = Vec::new();
        for _ in 0..steps {
            s.sample_into(&mut rng, &mut batch);
            assert!(batch.windows(2).all(|w| w[0] < w[1]), "{batch:?}");
            for &i in &batch {
                hits[i] += 1;
            }
        }
        assert!(hits.iter().all(|&h| h > 0), "{hits:?}");
        let sd = (steps as f64 * q * (1.0 - q)).sqrt();
        for h in hits {
            assert!((h as f64 - steps as f64 * q).abs() < 5.5 * sd, "{h}");
        }
        // q = 1 takes everything, once.
        PoissonSampler::new(4, 1.0)
            .unwrap()
            .sample_into(&mut rng, &mut batch);
        assert_eq!(batch, vec![0, 1, 2, 3]);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(
            PoissonSampler::new(0, 0.5)
                .unwrap_err()
                .to_string()
                .contains("n = 0")
        );
        assert!(
            PoissonSampler::new(5, 0.0)
                .unwrap_err()
                .to_string()
                .contains("got 0")
        );
        assert!(
            PoissonSampler::new(5, f64::NAN)
                .unwrap_err()
                .to_string()
                .contains("NaN")
        );
    }
}
