//! Exact samplers for Bernoulli, discrete Laplace and discrete Gaussian noise (Canonne, Kamath,
//! Steinke 2020, Algorithms 1–3).
//!
//! Every sampler takes its parameters as [`Rational`]s, computes only with integers (`u64`,
//! `u128`, with overflow excluded by the parameter checks below) and draws all its randomness as
//! uniform integers and fair bits from [`Coins`] over the [`DpRng`] stream. There is no
//! floating point on the sampling path, so the output distribution is exactly the stated one:
//! nothing leaks through rounding (Mironov 2012).
//!
//! # Speed
//! The samplers are Algorithms 1–3 as published; what is tuned is how many random bits and
//! which integer operations each coin costs, since generating the ChaCha20 stream dominated:
//! coins with a range below 2³² take 32 bits and a sign one bit ([`Coins`]); the A_k of
//! Algorithm 1 is one draw below k·den rather than two draws; Bernoulli(exp(−1)), which every
//! geometric draw of the discrete Laplace repeats, decides up to nine of its A_k from one
//! draw below 10! and a few comparisons with constants; and 128-bit division is used only where the numerator needs it. Many
//! samples in a row share one [`Coins`] ([`DiscreteGaussian::sample_with`]).
//!
//! # Citations
//! - C. Canonne, G. Kamath, T. Steinke. *The Discrete Gaussian for Differential Privacy*.
//!   NeurIPS 2020 (arXiv:2004.00010), Algorithms 1 (Bernoulli(exp(−γ))), 2 (discrete Laplace),
//!   3 (discrete Gaussian).
//! - I. Mironov. *On Significance of the Least Significant Bits for Differential Privacy*.
//!   CCS 2012.

use crate::coins::Coins;
use crate::validate::invalid;
use crate::{DpRng, MechanismError, Rational};

/// Largest discrete Laplace scale accepted, 2^48: then |sample| ≥ 2^63 (outside `i64`) has
/// probability below exp(−2^15), and such a draw is simply redrawn.
const MAX_LAPLACE_SCALE_LOG2: u32 = 48;

/// A sample from Bernoulli(p) for a rational `p ∈ [0, 1]`.
///
/// # Errors
/// [`MechanismError::InvalidParameter`] when `p > 1`.
pub fn bernoulli(rng: &mut DpRng, p: Rational) -> Result<bool, MechanismError> {
    if p.num() > p.den() {
        return Err(invalid(format!(
            "Bernoulli probability must be in [0, 1], got {p}"
        )));
    }
    Ok(Coins::new(rng).ratio(p.num(), p.den()))
}

/// A sample from Bernoulli(exp(−γ)) for a rational `γ ≥ 0` (CKS 2020, Algorithm 1).
pub fn bernoulli_exp(rng: &mut DpRng, gamma: Rational) -> bool {
    bernoulli_exp_ratio(rng, u128::from(gamma.num()), gamma.den())
}

/// Bernoulli(exp(−num/den)) for `den ≥ 1` (see [`exp_ratio`]).
pub(crate) fn bernoulli_exp_ratio(rng: &mut DpRng, num: u128, den: u64) -> bool {
    exp_ratio(&mut Coins::new(rng), num, den)
}

/// Bernoulli(exp(−num/den)) for `den ≥ 1`: for γ = num/den > 1, ⌊γ⌋ draws of
/// Bernoulli(exp(−1)) (stopping at the first 0) and one of Bernoulli(exp(−(γ − ⌊γ⌋))).
fn exp_ratio(coins: &mut Coins, num: u128, den: u64) -> bool {
    if num <= u128::from(den) {
        // γ ≤ 1, and num fits in a u64 because den does.
        return exp_at_most_one(coins, num as u64, den);
    }
    // A 64-bit division where the numerator allows (most calls), 128-bit otherwise.
    let (whole, rest) = match u64::try_from(num) {
        Ok(n) => (u128::from(n / den), n % den),
        Err(_) => (num / u128::from(den), (num % u128::from(den)) as u64),
    };
    let mut k: u128 = 0;
    while k < whole {
        if !exp_minus_one(coins) {
            return false;
        }
        k += 1;
    }
    exp_at_most_one(coins, rest, den)
}

/// Bernoulli(exp(−γ)) for γ = num/den ∈ [0, 1]: draw A_k ~ Bernoulli(γ/k) for k = 1, 2, … until
/// the first A_k = 0; return whether that k is odd. P\[odd\] = Σ (−γ)^j / j! = exp(−γ).
/// A_k is one uniform draw below k·den compared with num (Bernoulli(num/(k·den)) = γ/k), or,
/// once k·den would overflow, Bernoulli(num/den) ∧ Bernoulli(1/k).
fn exp_at_most_one(coins: &mut Coins, num: u64, den: u64) -> bool {
    if num == den {
        return exp_minus_one(coins);
    }
    let mut k: u64 = 1;
    loop {
        let hit = match den.checked_mul(k) {
            Some(kd) => coins.ratio(num, kd),
            None => coins.ratio(num, den) && coins.ratio(1, k),
        };
        if !hit {
            return k % 2 == 1;
        }
        k += 1;
    }
}

/// 10! = 2·3·…·10: one uniform draw below it decides A_2, …, A_10 of Algorithm 1 at γ = 1.
const FACTORIAL_10: u64 = 3_628_800;

/// 10!/k! for k = 2, …, 10: for W uniform below 10!, P\[W < 10!/k!\] = 1/k!.
const FACTORIAL_10_OVER: [u64; 9] = [1_814_400, 604_800, 151_200, 30_240, 5_040, 720, 90, 10, 1];

/// Bernoulli(exp(−1)): Algorithm 1 at γ = 1, where A_1 = 1 and A_k ~ Bernoulli(1/k), so
/// A_2, …, A_k all hold with probability 1/k!. For W uniform below 10! the nested events
/// "W < 10!/k!" have exactly these probabilities, so the first failing index K is the first k
/// with W ≥ 10!/k!: one 32-bit draw and a few comparisons decide the sample unless W = 0
/// (probability 1/10!), after which A_11, A_12, … are drawn one at a time. This is the coin
/// behind every geometric draw of the discrete Laplace sampler.
fn exp_minus_one(coins: &mut Coins) -> bool {
    let w = coins.below(FACTORIAL_10);
    if let Some(i) = FACTORIAL_10_OVER.iter().position(|&bound| w >= bound) {
        // K = i + 2.
        return i % 2 == 1;
    }
    let mut k = 11u64;
    while coins.ratio(1, k) {
        k += 1;
    }
    k % 2 == 1
}

/// The discrete Laplace distribution on ℤ with rational scale `t`: P\[x\] ∝ exp(−|x| / t)
/// (CKS 2020, Algorithm 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscreteLaplace {
    scale: Rational,
}

impl DiscreteLaplace {
    /// The sampler for scale `scale = num/den`.
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] when the scale is 0 or above 2^48.
    pub fn new(scale: Rational) -> Result<Self, MechanismError> {
        if scale.num() == 0 {
            return Err(invalid(format!(
                "discrete Laplace scale must be > 0, got {scale}"
            )));
        }
        if u128::from(scale.num()) > u128::from(scale.den()) << MAX_LAPLACE_SCALE_LOG2 {
            return Err(invalid(format!(
                "discrete Laplace scale must be at most 2^{MAX_LAPLACE_SCALE_LOG2}, got {scale}"
            )));
        }
        Ok(Self { scale })
    }

    /// The scale t.
    pub fn scale(&self) -> Rational {
        self.scale
    }

    /// One exact sample.
    pub fn sample(&self, rng: &mut DpRng) -> i64 {
        self.sample_with(&mut Coins::new(rng))
    }

    /// One exact sample from `coins` (for many samples in a row: the coins' unused bits carry
    /// over from one sample to the next).
    pub fn sample_with(&self, coins: &mut Coins) -> i64 {
        // Algorithm 2 with t = num (the numerator) and s = den: X = U + t·V is geometric-like
        // with parameter exp(−1/t) over ℕ, Y = ⌊X/s⌋ is geometric with parameter exp(−s/t),
        // and a random sign (rejecting "−0") gives the two-sided law.
        let (t, s) = (self.scale.num(), self.scale.den());
        loop {
            let u = coins.below(t);
            if !exp_at_most_one(coins, u, t) {
                continue;
            }
            let mut v: u128 = 0;
            while exp_minus_one(coins) {
                v += 1;
            }
            // u < 2^64 and t·v < 2^64·v: no overflow in u128 for any v below 2^63.
            let x = u128::from(u) + u128::from(t) * v;
            let y = if s == 1 { x } else { x / u128::from(s) };
            let negative = coins.bit();
            if negative && y == 0 {
                continue;
            }
            // |y| ≥ 2^63 has probability < exp(−2^15) under the scale limit; redraw it.
            let Ok(y) = i64::try_from(y) else { continue };
            return if negative { -y } else { y };
        }
    }
}

/// The discrete Gaussian distribution on ℤ with rational variance parameter `σ²`:
/// P\[x\] ∝ exp(−x² / (2σ²)) (CKS 2020, Algorithm 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscreteGaussian {
    sigma2: Rational,
    /// t = ⌊σ⌋ + 1, the scale of the discrete Laplace proposal.
    t: u64,
    proposal: DiscreteLaplace,
    /// 2·n·d·t² for σ² = n/d: the denominator of the acceptance exponent; < 2^64 by construction.
    accept_den: u64,
}

impl DiscreteGaussian {
    /// The sampler for `σ² = num/den`.
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] when σ² is 0, or so large (or its denominator so
    /// large) that the exact acceptance test would not fit in 128-bit integers:
    /// 2·num·den·(⌊σ⌋+1)² must be below 2^64 (for an integer σ², σ up to about 2^15).
    pub fn new(sigma2: Rational) -> Result<Self, MechanismError> {
        let (n, d) = (sigma2.num(), sigma2.den());
        if n == 0 {
            return Err(invalid(format!(
                "discrete Gaussian sigma^2 must be > 0, got {sigma2}"
            )));
        }
        // ⌊σ⌋ = ⌊√⌊n/d⌋⌋ (the floor of a square root only depends on the integer part).
        let t = (n / d).isqrt() + 1;
        let accept_den = 2u128
            .checked_mul(u128::from(n))
            .and_then(|v| v.checked_mul(u128::from(d)))
            .and_then(|v| v.checked_mul(u128::from(t) * u128::from(t)))
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| {
                invalid(format!(
                    "discrete Gaussian sigma^2 = {sigma2} is too large for exact sampling \
                     (need 2*num*den*(floor(sigma)+1)^2 < 2^64)"
                ))
            })?;
        let proposal = DiscreteLaplace::new(Rational::integer(t))?;
        Ok(Self {
            sigma2,
            t,
            proposal,
            accept_den,
        })
    }

    /// σ² as given.
    pub fn sigma2(&self) -> Rational {
        self.sigma2
    }

    /// One exact sample.
    pub fn sample(&self, rng: &mut DpRng) -> i64 {
        self.sample_with(&mut Coins::new(rng))
    }

    /// One exact sample from `coins` (for many samples in a row: the coins' unused bits carry
    /// over from one sample to the next).
    pub fn sample_with(&self, coins: &mut Coins) -> i64 {
        let (n, d) = (u128::from(self.sigma2.num()), u128::from(self.sigma2.den()));
        let den = self.accept_den;
        loop {
            let y = self.proposal.sample_with(coins);
            // Accept with probability exp(−(|y| − σ²/t)² / (2σ²)) = exp(−a² / D) where
            // a = |y|·d·t − n and D = 2·n·d·t². Since D < 2^64 we have d·t < 2^63, and
            // |y| < 2^63, so |y|·d·t < 2^126: no overflow.
            let a = (u128::from(y.unsigned_abs()) * d * u128::from(self.t)).abs_diff(n);
            let accept = if a < 1u128 << 64 {
                exp_ratio(coins, a * a, den)
            } else {
                // a² would overflow: exp(−a²/D) = exp(−a/D)^a, a conjunction of `a`
                // independent Bernoulli(exp(−a/D)) draws. Here a/D ≥ 1, so each draw fails with
                // probability ≥ 1 − 1/e and the loop stops after a few draws.
                (0..a).all(|_| exp_ratio(coins, a, den))
            };
            if accept {
                return y;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{check_law, check_normal_shape, discrete_gaussian_pmf, pmf, z_bonferroni};

    fn rat(n: u64, d: u64) -> Rational {
        Rational::new(n, d).unwrap()
    }

    #[test]
    fn bernoulli_exp_frequencies_match() {
        // Each frequency is Binomial(n, p)/n: |p̂ − p| ≤ z·sqrt(p(1−p)/n) with z for a 0.1%
        // two-sided level Bonferroni-corrected over the 7 cases.
        let mut rng = DpRng::seeded(11);
        let n = 100_000u32;
        let cases = [
            rat(0, 1),
            rat(1, 2),
            rat(1, 1),
            rat(7, 3),
            rat(5, 2),
            rat(10, 1),
            rat(1, 1000),
            // A denominator near 2^63: k·den overflows from k = 2, so A_k takes two draws.
            rat((1 << 62) + 1, (1 << 62) + 3),
            // γ just above 1 with a 63-bit denominator: the whole part and a tiny remainder.
            rat((1 << 62) + 7, 1 << 62),
        ];
        let z = z_bonferroni(0.001, 2 * cases.len());
        for gamma in cases {
            let p = (-(gamma.num() as f64) / gamma.den() as f64).exp();
            let hits = (0..n).filter(|_| bernoulli_exp(&mut rng, gamma)).count() as f64;
            let tol = z * (p * (1.0 - p) / n as f64).sqrt();
            assert!(
                (hits / n as f64 - p).abs() <= tol.max(1e-12),
                "γ={gamma}: {} vs {p}",
                hits / n as f64
            );
        }
    }

    #[test]
    fn bernoulli_rational_frequency_and_validation() {
        let mut rng = DpRng::seeded(5);
        let n = 100_000u32;
        let hits = (0..n)
            .filter(|_| bernoulli(&mut rng, rat(3, 7)).unwrap())
            .count() as f64;
        let p = 3.0 / 7.0;
        // 4.9 standard deviations: two-sided level 1e-6.
        assert!((hits / n as f64 - p).abs() < 4.9 * (p * (1.0 - p) / n as f64).sqrt());
        assert!(
            bernoulli(&mut rng, rat(8, 7))
                .unwrap_err()
                .to_string()
                .contains("8/7")
        );
    }

    #[test]
    fn discrete_laplace_fits_its_law() {
        let mut rng = DpRng::seeded(21);
        for (num, den) in [(3u64, 2u64), (1, 3), (10, 1)] {
            let t = num as f64 / den as f64;
            let dl = DiscreteLaplace::new(rat(num, den)).unwrap();
            let law = pmf(|k| (-k.abs() / t).exp(), (60.0 * t).ceil() as i64);
            check_law(|| dl.sample(&mut rng), &law, 60_000);
        }
    }

    #[test]
    fn discrete_gaussian_fits_its_law() {
        let mut rng = DpRng::seeded(22);
        for (num, den) in [(7u64, 2u64), (1, 4), (100, 1), (13, 1000)] {
            let s2 = num as f64 / den as f64;
            let dg = DiscreteGaussian::new(rat(num, den)).unwrap();
            let law = discrete_gaussian_pmf(s2);
            check_law(|| dg.sample(&mut rng), &law, 60_000);
        }
    }

    /// At DP-SGD's scale (σ = 2^14, the grid noise's σ² of about 2^28) the proposal and the
    /// acceptance take their many-bit paths. For σ this large the discrete Gaussian's mass on
    /// an interval [a, b) of integers is that of N(0, σ²) on [a − ½, b − ½) up to far below
    /// double precision (Poisson summation: relative error about exp(−2π²σ²)), so the
    /// chi-square is taken against the normal distribution function over 32 cells of width σ/4
    /// on [−4σ, 4σ) plus two tails.
    #[test]
    fn wide_discrete_gaussian_fits_the_normal_shape() {
        let dg = DiscreteGaussian::new(Rational::integer(1 << 28)).unwrap();
        let mut rng = DpRng::seeded(23);
        let mut coins = Coins::new(&mut rng);
        check_normal_shape(|| dg.sample_with(&mut coins), 1 << 14, 120_000);
    }

    #[test]
    fn large_parameters_are_refused_not_overflowed() {
        assert!(DiscreteLaplace::new(rat(0, 1)).is_err());
        assert!(
            DiscreteLaplace::new(rat(1 << 50, 1))
                .unwrap_err()
                .to_string()
                .contains("2^48")
        );
        assert!(DiscreteGaussian::new(rat(0, 1)).is_err());
        let err = DiscreteGaussian::new(rat(u64::MAX, 1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("too large"), "{err}");
        // A wide discrete Gaussian still works (σ = 2^14).
        let dg = DiscreteGaussian::new(Rational::integer(1 << 28)).unwrap();
        let mut rng = DpRng::seeded(1);
        let spread = (0..200).map(|_| dg.sample(&mut rng).abs()).max().unwrap();
        assert!(spread > 1 << 13 && spread < 1 << 17, "{spread}");
    }
}
