//! Randomized response: each respondent reports a possibly false answer, so the individual
//! answer is deniable while population frequencies can still be estimated without bias.

use serde::Serialize;

use crate::exact::bernoulli;
use crate::rational::ulps_up;
use crate::validate::{self, invalid};
use crate::{DpRng, MechanismError, PrivacyEvent, Rational};

/// How a response is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Design {
    /// Binary: a first coin with P\[heads\] = `heads`; heads → the truth, tails → a second fair
    /// coin decides the answer.
    Coin { heads: Rational },
    /// k-ary: report a uniformly chosen *other* category with probability `lie`, else the truth.
    Lie { lie: Rational },
}

/// Randomized response over `k` categories (index 1 = "yes" for the binary forms).
///
/// # Privacy
/// Each category is reported with probability p (the true one) or q (each other one), so
/// changing one respondent's answer changes each output probability by at most p/q:
/// ε = ln(p/q)-local DP.
/// - Fair coin ([`RandomizedResponse::fair_coin`]): truth on heads, else a second toss;
///   P\[yes | yes\] = 3/4, P\[yes | no\] = 1/4, ε = ln 3. A coin with P\[heads\] = h
///   ([`RandomizedResponse::with_coin`]) gives ε = ln((1 + h)/(1 − h)).
/// - From ε ([`RandomizedResponse::binary`], [`RandomizedResponse::k_ary`]): generalised RR with
///   p = e^ε/(e^ε + k − 1), q = 1/(e^ε + k − 1). The probability of lying, (k − 1)q, is computed
///   in `f64`, widened by 8 ulps and rounded *up* to a rational with denominator 2^63; the exact
///   rational Bernoulli draw then realises p'/q' ≤ p/q, so the realised ε is at most the
///   requested one (and the estimator uses the realised p', q').
///
/// All draws are exact rational Bernoullis and uniform integers from [`DpRng`].
///
/// # Citations
/// - S. L. Warner. *Randomized Response: A Survey Technique for Eliminating Evasive Answer
///   Bias*. JASA 1965.
/// - P. Kairouz, S. Oh, P. Viswanath. *Extremal Mechanisms for Local Differential Privacy*.
///   NeurIPS 2014 (k-ary generalised RR).
/// - T. Wang, J. Blocki, N. Li, S. Jha. *Locally Differentially Private Protocols for Frequency
///   Estimation*. USENIX Security 2017 (the unbiased estimator and its variance).
///
/// # Errors
/// Constructors return [`MechanismError::InvalidParameter`] for ε not finite and > 0, fewer than
/// 2 categories, a coin probability outside (0, 1), or an ε so small that p' ≤ q' after
/// rounding.
///
/// ```
/// use dpml_mechanisms::{DpRng, RandomizedResponse};
/// let rr = RandomizedResponse::fair_coin();
/// assert!((rr.epsilon() - 3f64.ln()).abs() < 1e-12);
/// let mut rng = DpRng::seeded(1);
/// let answers: Vec<usize> = (0..1000).map(|i| rr.respond(&mut rng, usize::from(i < 300))).collect::<Result<_, _>>()?;
/// let yes = answers.iter().filter(|&&a| a == 1).count() as u64;
/// let est = &rr.estimate(&[1000 - yes, yes])?[1];
/// assert!(est.ci95[0] <= est.estimate && est.estimate <= est.ci95[1]);
/// # Ok::<(), dpml_mechanisms::MechanismError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RandomizedResponse {
    design: Design,
    categories: u32,
    epsilon: f64,
    p_truth: f64,
    p_other: f64,
}

/// An unbiased frequency estimate with its standard error and 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FrequencyEstimate {
    /// π̂ = (f̂ − q)/(p − q), unbiased (it may fall outside [0, 1]).
    pub estimate: f64,
    /// √(f̂(1 − f̂)/n)/(p − q), the plug-in standard error.
    pub std_error: f64,
    /// π̂ ± 1.96·SE, intersected with [0, 1].
    pub ci95: [f64; 2],
}

impl RandomizedResponse {
    /// The fair-coin survey: truth on heads, else a second toss (ε = ln 3).
    pub fn fair_coin() -> Self {
        Self::coin(Rational::HALF)
    }

    /// Binary RR with a first coin of P\[heads\] = `heads` (truth on heads, else a fair toss).
    ///
    /// # Errors
    /// `heads` must lie strictly between 0 and 1.
    pub fn with_coin(heads: Rational) -> Result<Self, MechanismError> {
        if heads.num() == 0 || heads.num() >= heads.den() {
            return Err(invalid(format!(
                "coin probability of heads must be in (0, 1), got {heads}"
            )));
        }
        Ok(Self::coin(heads))
    }

    fn coin(heads: Rational) -> Self {
        let (h, d) = (heads.num() as f64, heads.den() as f64);
        // ln((d + h)/(d − h)): two u64→f64 conversions, a division and a logarithm, each within
        // one ulp; 4 ulps up keeps the reported ε an upper bound.
        let epsilon = ulps_up(((d + h) / (d - h)).ln(), 4);
        Self {
            design: Design::Coin { heads },
            categories: 2,
            epsilon,
            p_truth: (d + h) / (2.0 * d),
            p_other: (d - h) / (2.0 * d),
        }
    }

    /// Binary RR from ε: the truth with probability e^ε/(1 + e^ε).
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn binary(epsilon: f64) -> Result<Self, MechanismError> {
        Self::k_ary(epsilon, 2)
    }

    /// Generalised RR over `categories` ≥ 2 categories: the truth with probability
    /// e^ε/(e^ε + k − 1), else one of the other k − 1 uniformly.
    ///
    /// # Errors
    /// See the type-level `# Errors`.
    pub fn k_ary(epsilon: f64, categories: u32) -> Result<Self, MechanismError> {
        let epsilon = validate::epsilon(epsilon)?;
        if categories < 2 {
            return Err(invalid(format!(
                "randomized response needs at least 2 categories, got {categories}"
            )));
        }
        let others = f64::from(categories - 1);
        let c = others * (-epsilon).exp();
        let lie_f = ulps_up(c / (1.0 + c), 8);
        let mut lie = Rational::ceil_from_f64(lie_f.min(1.0), 63)?;
        if lie.num() == 0 {
            lie = Rational::new(1, lie.den())?;
        }
        let k = u128::from(categories);
        if u128::from(lie.num()) * k >= (k - 1) * u128::from(lie.den()) {
            return Err(invalid(format!(
                "epsilon {epsilon} is too small for randomized response to represent"
            )));
        }
        let lie_p = lie.num() as f64 / lie.den() as f64;
        Ok(Self {
            design: Design::Lie { lie },
            categories,
            epsilon,
            p_truth: 1.0 - lie_p,
            p_other: lie_p / others,
        })
    }

    /// The ε of one response (an upper bound on the realised one).
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The number of categories k.
    pub fn categories(&self) -> u32 {
        self.categories
    }

    /// P\[report = true category\] (realised).
    pub fn p_truth(&self) -> f64 {
        self.p_truth
    }

    /// P\[report = a given other category\] (realised).
    pub fn p_other(&self) -> f64 {
        self.p_other
    }

    /// The privacy cost of one response (local DP for that respondent).
    pub fn event(&self) -> PrivacyEvent {
        PrivacyEvent::RandomizedResponse {
            epsilon: self.epsilon,
            categories: self.categories,
        }
    }

    /// One randomized answer for a respondent whose true category is `true_index`.
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] when `true_index ≥ k`.
    pub fn respond(&self, rng: &mut DpRng, true_index: usize) -> Result<usize, MechanismError> {
        let k = self.categories as usize;
        if true_index >= k {
            return Err(invalid(format!(
                "category index must be below {k}, got {true_index}"
            )));
        }
        Ok(match self.design {
            Design::Coin { heads } => {
                if bernoulli(rng, heads)? {
                    true_index
                } else {
                    usize::from(bernoulli(rng, Rational::HALF)?)
                }
            }
            Design::Lie { lie } => {
                if bernoulli(rng, lie)? {
                    let j = rng.below(u64::from(self.categories - 1)) as usize;
                    if j >= true_index { j + 1 } else { j }
                } else {
                    true_index
                }
            }
        })
    }

    /// Unbiased frequency estimates of every category from the counts of reported categories.
    ///
    /// E[f̂_j] = π_j p + (1 − π_j) q for the observed share f̂_j, hence π̂_j = (f̂_j − q)/(p − q)
    /// with Var = f_j(1 − f_j)/(n (p − q)²); the fair coin gives p̂ = 2·(P̂\[yes\] − 1/4).
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] when `counts.len() ≠ k` or all counts are 0.
    pub fn estimate(&self, counts: &[u64]) -> Result<Vec<FrequencyEstimate>, MechanismError> {
        if counts.len() != self.categories as usize {
            return Err(invalid(format!(
                "expected {} category counts, got {}",
                self.categories,
                counts.len()
            )));
        }
        let n: u64 = counts.iter().sum();
        if n == 0 {
            return Err(invalid("cannot estimate frequencies from 0 responses"));
        }
        let gap = self.p_truth - self.p_other;
        Ok(counts
            .iter()
            .map(|&c| {
                let f = c as f64 / n as f64;
                let estimate = (f - self.p_other) / gap;
                let std_error = (f * (1.0 - f) / n as f64).sqrt() / gap;
                let half = 1.96 * std_error;
                FrequencyEstimate {
                    estimate,
                    std_error,
                    ci95: [
                        (estimate - half).clamp(0.0, 1.0),
                        (estimate + half).clamp(0.0, 1.0),
                    ],
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{chi_square, chi_square_critical, violates};

    fn responses(
        rr: &RandomizedResponse,
        rng: &mut DpRng,
        truth: impl Fn(usize) -> usize,
        n: usize,
    ) -> Vec<u64> {
        let mut counts = vec![0u64; rr.categories() as usize];
        for i in 0..n {
            counts[rr.respond(rng, truth(i)).unwrap()] += 1;
        }
        counts
    }

    #[test]
    fn coin_flip_survey_recovers_the_proportion() {
        let rr = RandomizedResponse::fair_coin();
        let ln3 = 3f64.ln();
        assert!(rr.epsilon() >= ln3 && rr.epsilon() - ln3 < 1e-14);
        assert_eq!((rr.p_truth(), rr.p_other()), (0.75, 0.25));
        assert_eq!(
            rr.event(),
            PrivacyEvent::RandomizedResponse {
                epsilon: rr.epsilon(),
                categories: 2
            }
        );
        // 20 000 respondents, 30% truly "yes".
        let mut rng = DpRng::seeded(61);
        let n = 20_000;
        let counts = responses(&rr, &mut rng, |i| usize::from(i < 6_000), n);
        let est = rr.estimate(&counts).unwrap()[1];
        let p_yes = counts[1] as f64 / n as f64;
        assert!(
            (est.estimate - 2.0 * (p_yes - 0.25)).abs() < 1e-12,
            "p̂ = 2(P̂[yes] − 1/4)"
        );
        // The 95% interval is estimate ± 1.96 SE; the truth is checked at 4.9 SE (a
        // two-sided 1e-6 level), since a 95% interval misses it for one seed in twenty.
        let half = 1.96 * est.std_error;
        assert!(
            (est.ci95[0] - (est.estimate - half)).abs() < 1e-9,
            "{est:?}"
        );
        assert!(
            (est.ci95[1] - (est.estimate + half)).abs() < 1e-9,
            "{est:?}"
        );
        assert!((est.estimate - 0.3).abs() < 4.9 * est.std_error, "{est:?}");
        // SE ≈ √(0.4·0.6/n)/0.5 ≈ 0.0069.
        assert!((est.std_error - 0.0069).abs() < 0.0005, "{}", est.std_error);
    }

    #[test]
    fn responses_follow_their_law() {
        // Chi-square at 0.1% on the reported categories for a fixed true category.
        let mut rng = DpRng::seeded(62);
        let n = 40_000u64;
        for rr in [
            RandomizedResponse::fair_coin(),
            RandomizedResponse::k_ary(1.0, 4).unwrap(),
            RandomizedResponse::binary(0.3).unwrap(),
        ] {
            let k = rr.categories() as usize;
            let counts = responses(&rr, &mut rng, |_| 1, n as usize);
            let probs: Vec<f64> = (0..k)
                .map(|j| if j == 1 { rr.p_truth() } else { rr.p_other() })
                .collect();
            let (stat, df) = chi_square(&counts, &probs, n);
            assert!(stat < chi_square_critical(df, 0.001), "{stat} df {df}");
        }
        let rr = RandomizedResponse::k_ary(1.0, 4).unwrap();
        let e = 1f64.exp();
        assert!((rr.p_truth() - e / (e + 3.0)).abs() < 1e-15 && rr.p_truth() <= e / (e + 3.0));
        assert!(rr.p_truth() / rr.p_other() <= e);
    }

    #[test]
    fn k_ary_estimates_are_unbiased_within_their_error() {
        let rr = RandomizedResponse::k_ary(2.0, 3).unwrap();
        let mut rng = DpRng::seeded(63);
        let n = 30_000;
        let counts = responses(
            &rr,
            &mut rng,
            |i| {
                if i < 15_000 {
                    0
                } else if i < 24_000 {
                    1
                } else {
                    2
                }
            },
            n,
        );
        let truth = [0.5, 0.3, 0.2];
        let est = rr.estimate(&counts).unwrap();
        // Within 3.0 SE each (two-sided 0.27%, Bonferroni over 3 ≈ 0.8%).
        for (e, t) in est.iter().zip(truth) {
            assert!((e.estimate - t).abs() < 3.0 * e.std_error, "{e:?} vs {t}");
        }
        assert!((est.iter().map(|e| e.estimate).sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn privacy_check_passes_and_catches_double_epsilon() {
        let n = 100_000;
        let mut rng = DpRng::seeded(64);
        for (rr, eps) in [
            (RandomizedResponse::fair_coin(), 3f64.ln()),
            (RandomizedResponse::k_ary(1.0, 4).unwrap(), 1.0),
        ] {
            let a = responses(&rr, &mut rng, |_| 0, n);
            let b = responses(&rr, &mut rng, |_| 1, n);
            let (bad, z, crit) = violates(&a, &b, n as u64, eps, 0.0);
            assert!(!bad, "RR flagged: {z} > {crit}");
        }
        let under = RandomizedResponse::k_ary(2.0, 4).unwrap();
        let a = responses(&under, &mut rng, |_| 0, n);
        let b = responses(&under, &mut rng, |_| 1, n);
        assert!(
            violates(&a, &b, n as u64, 1.0, 0.0).0,
            "RR at 2ε not caught at ε"
        );
    }

    #[test]
    fn invalid_parameters_are_named() {
        assert!(
            RandomizedResponse::k_ary(1.0, 1)
                .unwrap_err()
                .to_string()
                .contains("got 1")
        );
        assert!(
            RandomizedResponse::binary(f64::NAN)
                .unwrap_err()
                .to_string()
                .contains("NaN")
        );
        assert!(
            RandomizedResponse::binary(1e-300)
                .unwrap_err()
                .to_string()
                .contains("too small")
        );
        assert!(
            RandomizedResponse::with_coin(Rational::integer(1))
                .unwrap_err()
                .to_string()
                .contains("1/1")
        );
        let rr = RandomizedResponse::fair_coin();
        assert!(
            rr.respond(&mut DpRng::seeded(0), 2)
                .unwrap_err()
                .to_string()
                .contains("got 2")
        );
        assert!(
            rr.estimate(&[1, 2, 3])
                .unwrap_err()
                .to_string()
                .contains("got 3")
        );
        assert!(rr.estimate(&[0, 0]).is_err());
        // A huge ε still randomizes (at least 2^-63 lie probability) and stays valid.
        assert!(RandomizedResponse::binary(800.0).unwrap().p_other() > 0.0);
    }
}
