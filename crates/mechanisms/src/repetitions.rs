//! The random number of trials of a private hyperparameter search (Papernot & Steinke 2022):
//! the laws, their means, and an exact sampler.
//!
//! Running a private mechanism a *fixed* number of times and keeping the best output is not
//! private in general; running it K times with K drawn from one of these laws, and releasing
//! only the best output, is (the accountant's `repeat_and_select` event turns the trial's RDP
//! curve into the whole search's). The analysis holds for the law exactly, so K is drawn
//! exactly: the laws' probabilities are ratios of rationals (the parameters are `f64`s, which
//! are rationals), and [`Repetitions::sample`] draws K by rejection from a geometric proposal
//! with every comparison made in exact rational arithmetic against uniform bits of the
//! ChaCha20 stream. No floating point is on the sampling path.
//!
//! # The laws
//! - Poisson(μ): P\[K = k\] = e^{−μ} μ^k / k!, k ≥ 0. K = 0 is possible (probability e^{−μ}):
//!   then no trial runs and nothing but that fact is released.
//! - Truncated negative binomial D_{η,γ} (η > −1, γ ∈ (0, 1]), on k ≥ 1:
//!   P\[K = k\] = (1 − γ)^k / (γ^{−η} − 1) · Π_{ℓ=0}^{k−1} (ℓ + η)/(ℓ + 1), with mean
//!   η(1 − γ) / (γ(1 − γ^η)). η = 0 is the logarithmic law, P\[K = k\] = (1 − γ)^k / (k ln(1/γ)),
//!   mean (1/γ − 1)/ln(1/γ); η = 1 the geometric law, P\[K = k\] = γ(1 − γ)^{k−1}, mean 1/γ.
//!   The user gives the mean; γ is the one root of the mean equation, found by bisection
//!   ([`Repetitions::gamma`]), and everything else (sampling, accounting) uses that γ, so the
//!   law sampled is the law accounted for.
//!
//! # Citations
//! - N. Papernot, T. Steinke. *Hyperparameter Tuning with Renyi Differential Privacy*. ICLR
//!   2022 (arXiv:2110.03620), Definition 1 and Theorems 2 and 6.
//! - J. Liu, K. Talwar. *Private Selection from Private Candidates*. STOC 2019.

use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Zero};
use serde::{Deserialize, Serialize};

use crate::coins::Coins;
use crate::validate::invalid;
use crate::{DpRng, MechanismError};

/// The largest mean number of trials accepted: far above any search one would run, and
/// small enough that the exact sampler's rationals stay a few kilobytes.
pub const MAX_MEAN: f64 = 1000.0;

/// The smallest |η| other than 0 that the truncated negative binomial law takes (2^-20):
/// a smaller one makes the exact sampler's fractions long (see [`Repetitions::validate`]).
pub const MIN_NONZERO_ETA: f64 = 1.0 / 1_048_576.0;

/// The law of the number of trials K of a search, given by its mean.
///
/// Serialised with a `"law"` tag: `{"law": "poisson", "mean": 10}` or
/// `{"law": "truncated_negative_binomial", "eta": 0, "mean": 10}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "law", rename_all = "snake_case", deny_unknown_fields)]
pub enum Repetitions {
    /// K ~ Poisson(mean), K ≥ 0.
    Poisson {
        /// μ = E\[K\], in [1, [`MAX_MEAN`]].
        mean: f64,
    },
    /// K ~ D_{η,γ}, the negative binomial law truncated to K ≥ 1, with γ set by the mean.
    TruncatedNegativeBinomial {
        /// η > −1 (0: logarithmic law, 1: geometric law).
        eta: f64,
        /// E\[K\], in [1, [`MAX_MEAN`]].
        mean: f64,
    },
}

impl Repetitions {
    /// The law's name as the command line writes it: `poisson`,
    /// `truncated-negative-binomial`.
    pub fn name(&self) -> &'static str {
        match self {
            Repetitions::Poisson { .. } => "poisson",
            Repetitions::TruncatedNegativeBinomial { .. } => "truncated-negative-binomial",
        }
    }

    /// The law in words, for reports: "Poisson, mean 10", "logarithmic (η = 0), mean 10".
    pub fn describe(&self) -> String {
        match *self {
            Repetitions::Poisson { mean } => format!("Poisson, mean {}", figure(mean)),
            Repetitions::TruncatedNegativeBinomial { eta, mean } => {
                let kind = if eta == 0.0 {
                    "logarithmic (truncated negative binomial, η = 0)".to_string()
                } else if eta == 1.0 {
                    "geometric (truncated negative binomial, η = 1)".to_string()
                } else {
                    format!("truncated negative binomial, η = {}", figure(eta))
                };
                format!("{kind}, mean {}", figure(mean))
            }
        }
    }

    /// The requested mean.
    pub fn requested_mean(&self) -> f64 {
        match *self {
            Repetitions::Poisson { mean } | Repetitions::TruncatedNegativeBinomial { mean, .. } => {
                mean
            }
        }
    }

    /// `self` if its parameters are in range.
    ///
    /// # Errors
    /// [`MechanismError::InvalidParameter`] naming the mean unless it is in [1, [`MAX_MEAN`]],
    /// or η unless it is finite and > −1.
    pub fn validate(&self) -> Result<Self, MechanismError> {
        let mean = self.requested_mean();
        if !(mean.is_finite() && (1.0..=MAX_MEAN).contains(&mean)) {
            return Err(invalid(format!(
                "the mean number of trials must be in [1, {MAX_MEAN}], got {mean}"
            )));
        }
        if let Repetitions::TruncatedNegativeBinomial { eta, .. } = *self {
            if !(eta.is_finite() && eta > -1.0) {
                return Err(invalid(format!(
                    "eta of the truncated negative binomial law must be finite and > -1, got {eta}"
                )));
            }
            // The exact sampler computes with η's binary fraction, whose length grows with
            // how small η is: 1e-300 takes some 1000 bits at each step, and a draw of mean 50
            // did not end. Such an η is the law of η = 0 to every digit shown.
            if eta != 0.0 && eta.abs() < MIN_NONZERO_ETA {
                return Err(invalid(format!(
                    "eta {eta} of the truncated negative binomial law is too close to 0 to \
                     sample exactly: use 0, or |eta| of at least 2^-20 (about 9.6e-7)"
                )));
            }
            // As η nears −1 the law's mean stays near 1 for every γ that f64 holds: the law
            // accounted and sampled would not be the one asked for.
            let reached = self.expected();
            if reached.is_nan() || (reached - mean).abs() > 1e-6 * mean {
                // Why it cannot: near −1 the mean stays near 1; a huge η needs a γ closer
                // to 1 than f64 holds.
                let why = if eta < 0.0 {
                    "near -1 its mean stays near 1"
                } else {
                    "so large an eta needs a gamma closer to 1 than a float holds"
                };
                return Err(invalid(format!(
                    "a truncated negative binomial law with eta {eta} cannot have mean {mean} \
                     (it reaches {reached:.4}; {why}): choose another eta or mean"
                )));
            }
        }
        Ok(*self)
    }

    /// γ of a truncated negative binomial law: the γ ∈ (0, 1] whose mean is the requested one
    /// (to the last bit bisection on `f64` reaches); `None` for Poisson.
    pub fn gamma(&self) -> Option<f64> {
        match *self {
            Repetitions::Poisson { .. } => None,
            Repetitions::TruncatedNegativeBinomial { eta, mean } => Some(gamma_for_mean(eta, mean)),
        }
    }

    /// E\[K\] of the law actually used: μ for Poisson; the mean at [`Repetitions::gamma`] for
    /// the truncated negative binomial (equal to the requested mean up to rounding).
    pub fn expected(&self) -> f64 {
        match *self {
            Repetitions::Poisson { mean } => mean,
            Repetitions::TruncatedNegativeBinomial { eta, mean } => {
                tnb_mean(eta, gamma_for_mean(eta, mean))
            }
        }
    }

    /// P\[K = k\] (in floating point: for tests and reports, never for sampling).
    pub fn pmf(&self, k: u64) -> f64 {
        match *self {
            Repetitions::Poisson { mean } => {
                let ln: f64 = (1..=k).map(|j| (mean / j as f64).ln()).sum::<f64>() - mean;
                ln.exp()
            }
            Repetitions::TruncatedNegativeBinomial { eta, mean } => {
                if k == 0 {
                    return 0.0;
                }
                let gamma = gamma_for_mean(eta, mean);
                if gamma >= 1.0 {
                    return if k == 1 { 1.0 } else { 0.0 };
                }
                // P[K = 1] = (1 − γ)·η/(γ^{−η} − 1), which tends to (1 − γ)/ln(1/γ) at η = 0.
                let ln_gamma = gamma.ln();
                let first = if eta == 0.0 {
                    (1.0 - gamma) / -ln_gamma
                } else {
                    (1.0 - gamma) * eta / (-eta * ln_gamma).exp_m1()
                };
                let ln: f64 = (1..k)
                    .map(|j| ((1.0 - gamma) * (j as f64 + eta) / (j as f64 + 1.0)).ln())
                    .sum();
                first * ln.exp()
            }
        }
    }

    /// One exact draw of K from the law, with the generator's uniform bits.
    ///
    /// # Privacy
    /// K is drawn independently of any data; the search's guarantee assumes that K follows
    /// the law exactly and stays secret, and this sampler draws it exactly (see the module
    /// documentation).
    ///
    /// # Errors
    /// As [`Repetitions::validate`].
    pub fn sample(&self, rng: &mut DpRng) -> Result<u64, MechanismError> {
        Ok(self.sampler()?.draw(rng))
    }

    /// A sampler of the law, for many draws (it keeps the acceptance probabilities it has
    /// computed).
    ///
    /// # Errors
    /// As [`Repetitions::validate`].
    pub fn sampler(&self) -> Result<TrialSampler, MechanismError> {
        if let Repetitions::TruncatedNegativeBinomial { eta, mean } = *self
            && eta > 1.0
        {
            return Err(invalid(format!(
                "the truncated negative binomial law with eta {eta} and mean {mean} cannot be \
                 sampled exactly in reasonable time: the sampler's proposal fits the law for eta \
                 up to 1 (eta 50 at mean 100 needs a proposal no draw gets past); choose eta in \
                 (-1, 1]"
            )));
        }
        if let Repetitions::TruncatedNegativeBinomial { eta, mean } = *self
            && let Some(gamma) = self.gamma()
            && gamma < min_sampled_gamma(eta)
        {
            return Err(invalid(format!(
                "the truncated negative binomial law with eta {eta} and mean {mean} (gamma \
                 {gamma:.2e}) cannot be sampled exactly in reasonable time: choose a smaller \
                 mean, an eta of a short binary fraction (0.5, -0.5, 0.25), or eta 0 or 1 \
                 (their sampler stays fast up to mean {MAX_MEAN})"
            )));
        }
        Ok(match self.validate()? {
            Repetitions::Poisson { mean } => {
                // Ratio μ/(k + 1); the geometric proposal of mean μ.
                let mu = exact(mean);
                let rho = &mu / (&mu + BigRational::one());
                TrialSampler::new(0, rho, Box::new(move |k| &mu / integer(k + 1)))
            }
            Repetitions::TruncatedNegativeBinomial { eta, mean } => {
                let gamma = gamma_for_mean(eta, mean);
                let (g, e) = (exact(gamma), exact(eta));
                let keep = BigRational::one() - &g;
                // For η ≤ 1 (the only ones sampled) the ratio (1 − γ)(k + η)/(k + 1) never
                // exceeds 1 − γ, the proposal's. γ = 1 (mean 1) makes ρ = 0: K = 1 always.
                TrialSampler::new(
                    1,
                    keep.clone(),
                    Box::new(move |k| &keep * (integer(k) + &e) / integer(k + 1)),
                )
            }
        })
    }
}

/// What a private search releases, and so which bound its guarantee is.
///
/// Serialised in snake case: `"best"`, `"every"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialRelease {
    /// Only the best trial, K kept secret: Papernot & Steinke's bound (`repeat_and_select`).
    #[default]
    Best,
    /// Every trial's output, and so K: RDP composition over the random number of trials
    /// (`repeat_and_release_all`), a larger ε.
    Every,
}

impl TrialRelease {
    /// What is released and under which bound, in words, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            TrialRelease::Best => "best trial only (Papernot & Steinke)",
            TrialRelease::Every => "every trial (composition over the random number of trials)",
        }
    }

    /// The event of a search of `trial` repeated as `repetitions` says, releasing what `self`
    /// says.
    pub fn event(
        self,
        repetitions: Repetitions,
        trial: crate::PrivacyEvent,
    ) -> crate::PrivacyEvent {
        let event = Box::new(trial);
        match self {
            TrialRelease::Best => crate::PrivacyEvent::RepeatAndSelect { repetitions, event },
            TrialRelease::Every => crate::PrivacyEvent::RepeatAndReleaseAll { repetitions, event },
        }
    }
}

/// The ratio P\[K = k + 1\] / P\[K = k\] of a law, exactly.
type Ratio = Box<dyn Fn(u64) -> BigRational + Send + Sync>;

/// Exact draws of K ≥ `k0` with P\[K = k\] ∝ Π_{j=k0}^{k−1} ratio(j), by rejection from the
/// geometric law P\[k0 + j\] = (1 − ρ)ρ^j: a proposal k is kept with probability
/// v_k / max v, where v_k = Π_{j<k} ratio(j)/ρ. `ratio(j)/ρ` decreases in j or never exceeds
/// 1, and falls below 1 for good, so v rises to one peak and then decays: max v is that peak.
pub struct TrialSampler {
    k0: u64,
    rho: BigRational,
    ratio: Ratio,
    peak: BigRational,
    /// v_k / peak for k = k0, k0 + 1, …, as far as proposals have reached.
    accept: Vec<BigRational>,
    /// v_k for the last k in `accept`.
    last_v: BigRational,
}

impl std::fmt::Debug for TrialSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TrialSampler(k0 = {}, rho = {})", self.k0, self.rho)
    }
}

impl TrialSampler {
    fn new(k0: u64, rho: BigRational, ratio: Ratio) -> Self {
        let one = BigRational::one();
        let mut peak = one.clone();
        if rho > BigRational::zero() {
            let mut k = k0;
            loop {
                let step = ratio(k) / &rho;
                if step <= one {
                    break;
                }
                peak *= step;
                k += 1;
            }
        }
        let first = one.clone() / &peak;
        Self {
            k0,
            rho,
            ratio,
            peak,
            accept: vec![first],
            last_v: one,
        }
    }

    /// One draw.
    pub fn draw(&mut self, rng: &mut DpRng) -> u64 {
        let mut coins = Coins::new(rng);
        loop {
            let mut j = 0usize;
            while bernoulli(&mut coins, &self.rho) {
                j += 1;
            }
            while self.accept.len() <= j {
                let k = self.k0 + self.accept.len() as u64 - 1;
                self.last_v = &self.last_v * (self.ratio)(k) / &self.rho;
                self.accept.push(&self.last_v / &self.peak);
            }
            debug_assert!(self.accept[j] <= BigRational::one(), "v_k above its peak");
            if bernoulli(&mut coins, &self.accept[j]) {
                return self.k0 + j as u64;
            }
        }
    }
}

/// The smallest γ whose law [`TrialSampler`] draws in reasonable time (about a second). A draw
/// proposes some 1/γ steps, and each step's acceptance probability is an exact product of the
/// ratios (1 − γ)(k + η)/(k + 1): for an integer η they cancel into short fractions, for any
/// other η they grow with each step by η's binary fraction (η = −0.5, γ = 6.6e-4: 2.6 s a
/// draw; η = −0.9 at mean 10 needs γ = 3.5e-11, and never ends). Measured here: η = −0.1 (55
/// bits) took 48 ms a draw at γ = 0.021, 1.2 s at γ = 0.008, and did not end at γ = 0.001; so
/// a fraction of b bits needs γ ≥ b/3000. Short fractions still grow: at γ = 0.001, η = 0.125
/// took 7 s a draw and η = −0.875 8 to 27 s, since below η = 0 a draw proposes some
/// γ^−(1−η) steps; so γ is also at least 0.005^(1/(1 − η)) for η < 0, 0.005 otherwise.
fn min_sampled_gamma(eta: f64) -> f64 {
    if eta.fract() == 0.0 {
        return 1e-4;
    }
    let floor = 0.005f64.powf(1.0 / (1.0 - eta.min(0.0)));
    (fraction_bits(eta) as f64 / 3000.0).max(floor)
}

/// The bits of `x`'s binary fraction: 1 for 0.5, 55 for 0.1 (0 for an integer).
fn fraction_bits(x: f64) -> u32 {
    let mut frac = x.fract().abs();
    let mut bits = 0;
    // Doubling is exact in f64: a finite fraction ends within 1074 doublings.
    while frac != 0.0 && bits < 1100 {
        frac = (frac * 2.0).fract();
        bits += 1;
    }
    bits
}

/// E\[K\] of D_{η,γ}: η(1 − γ)/(γ(1 − γ^η)); (1/γ − 1)/ln(1/γ) at η = 0; 1 at γ = 1.
pub(crate) fn tnb_mean(eta: f64, gamma: f64) -> f64 {
    if gamma >= 1.0 {
        return 1.0;
    }
    let ln_gamma = gamma.ln();
    if eta == 0.0 {
        (1.0 - gamma) / (gamma * -ln_gamma)
    } else {
        // 1 − γ^η = −expm1(η ln γ), accurate for small η.
        eta * (1.0 - gamma) / (gamma * -(eta * ln_gamma).exp_m1())
    }
}

/// The γ ∈ (0, 1] with `tnb_mean(eta, γ) = mean`. The mean falls from ∞ (γ → 0) to 1 (γ = 1),
/// so bisection finds it; the loop ends when the bracket cannot shrink in `f64`.
fn gamma_for_mean(eta: f64, mean: f64) -> f64 {
    if mean <= 1.0 {
        return 1.0;
    }
    let (mut lo, mut hi) = (f64::MIN_POSITIVE, 1.0f64);
    loop {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            return hi;
        }
        if tnb_mean(eta, mid) > mean {
            lo = mid;
        } else {
            hi = mid;
        }
    }
}

/// `x` as the exact rational it is.
fn exact(x: f64) -> BigRational {
    // Every finite f64 is a rational; the parameters were validated finite.
    BigRational::from_float(x).unwrap_or_else(BigRational::zero)
}

fn integer(k: u64) -> BigRational {
    BigRational::from_integer(BigInt::from(k))
}

/// Bernoulli(p) for a rational p ∈ [0, 1]: compares a uniform U ∈ [0, 1), one random bit at
/// a time, with p's binary expansion; the first bit where they differ decides U < p (two bits
/// are needed on average).
fn bernoulli(coins: &mut Coins<'_>, p: &BigRational) -> bool {
    let den = p.denom().clone();
    let mut num = p.numer().clone();
    if num >= den {
        return true;
    }
    if num <= BigInt::zero() {
        return false;
    }
    loop {
        num <<= 1;
        let p_bit = num >= den;
        if p_bit {
            num -= &den;
        }
        if coins.bit() != p_bit {
            // U's bit is 0 where p's is 1 (U < p), or the other way round.
            return p_bit;
        }
    }
}

/// `x` as written for a person: `1e300` rather than its 301 digits.
fn figure(x: f64) -> String {
    if x != 0.0 && !(1e-4..1e6).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tnb(eta: f64, mean: f64) -> Repetitions {
        Repetitions::TruncatedNegativeBinomial { eta, mean }
    }

    fn laws() -> Vec<Repetitions> {
        vec![
            Repetitions::Poisson { mean: 3.0 },
            Repetitions::Poisson { mean: 12.5 },
            tnb(0.0, 4.0),
            tnb(1.0, 4.0),
            tnb(0.5, 6.0),
            tnb(2.0, 5.0),
            tnb(-0.5, 3.0),
        ]
    }

    #[test]
    fn pmf_sums_to_one_and_its_mean_is_the_requested_one() {
        for law in laws() {
            let (mut total, mut mean) = (0.0, 0.0);
            for k in 0..5000 {
                let p = law.pmf(k);
                total += p;
                mean += k as f64 * p;
            }
            assert!((total - 1.0).abs() < 1e-9, "{law:?}: {total}");
            assert!(
                (mean - law.requested_mean()).abs() < 1e-8 * law.requested_mean(),
                "{law:?}: {mean}"
            );
            assert!((law.expected() - law.requested_mean()).abs() < 1e-12 * mean);
        }
    }

    #[test]
    fn a_law_it_cannot_reach_or_sample_is_refused() {
        // Near η = −1 the mean stays near 1 for every γ f64 holds: mean 10 is out of reach.
        let err = tnb(-0.9999999, 10.0).validate().unwrap_err().to_string();
        assert!(err.contains("cannot have mean 10"), "{err}");
        assert!(err.contains("near -1"), "{err}");
        // A huge η needs γ within one ulp of 1: out of reach for another reason.
        let err = tnb(1e300, 10.0).validate().unwrap_err().to_string();
        assert!(err.contains("closer to 1"), "{err}");
        assert!(tnb(-0.9999999, 10.0).sampler().is_err());
        // η = −0.9 reaches mean 10 only at γ ≈ 3.5e-11: accounted, but no draw would end.
        let law = tnb(-0.9, 10.0);
        assert!(law.validate().is_ok());
        assert!(law.gamma().unwrap() < 1e-9);
        let err = law.sampler().unwrap_err().to_string();
        assert!(err.contains("cannot be sampled exactly"), "{err}");
        // Beyond η = 1 the sampler's proposal does not fit the law.
        let err = tnb(2.0, 5.0).sampler().unwrap_err().to_string();
        assert!(err.contains("eta up to 1"), "{err}");
        assert!(tnb(2.0, 5.0).validate().is_ok());
        // An η too small to compute with is refused, not accounted as NaN; one whose binary
        // fraction is long (1e-300: a draw of mean 50 did not end) is refused too.
        assert!(tnb(5e-324, 10.0).validate().is_err());
        for eta in [1e-300, -1e-100, MIN_NONZERO_ETA / 2.0] {
            let err = tnb(eta, 50.0).validate().unwrap_err().to_string();
            assert!(err.contains("too close to 0"), "{eta}: {err}");
        }
        assert!(tnb(MIN_NONZERO_ETA, 50.0).validate().is_ok());
        // The smallest one still draws (in well under a second here).
        let mut rng = crate::DpRng::seeded(3);
        assert!(tnb(MIN_NONZERO_ETA, 10.0).sample(&mut rng).unwrap() >= 1);
        // η = −0.1 is a 55-bit fraction: mean 10 (γ = 0.021) is drawn, mean 100 (γ = 0.001)
        // would not end; η = 0.5 is one bit, and draws at mean 30.
        assert_eq!(fraction_bits(-0.1), 55);
        assert_eq!(fraction_bits(0.5), 1);
        assert!(tnb(-0.1, 10.0).sampler().is_ok());
        let err = tnb(-0.1, 100.0).sampler().err().unwrap().to_string();
        assert!(err.contains("short binary fraction"), "{err}");
        assert!(tnb(0.5, 30.0).sampler().is_ok());
        // Integer η keeps its sampler fast up to the largest mean.
        assert!(tnb(0.0, MAX_MEAN).sampler().is_ok());
        assert!(tnb(1.0, MAX_MEAN).sampler().is_ok());
    }

    #[test]
    fn special_cases_are_the_logarithmic_and_geometric_laws() {
        let geometric = tnb(1.0, 4.0);
        assert!((geometric.gamma().unwrap() - 0.25).abs() < 1e-15);
        for k in 1..30 {
            let direct = 0.25 * 0.75f64.powi(k as i32 - 1);
            assert!((geometric.pmf(k) - direct).abs() < 1e-15, "{k}");
        }
        let log = tnb(0.0, 4.0);
        let g = log.gamma().unwrap();
        for k in 1..30u64 {
            let direct = (1.0 - g).powi(k as i32) / (k as f64 * (1.0 / g).ln());
            assert!((log.pmf(k) - direct).abs() < 1e-14, "{k}");
        }
        // η next to 0 is next to the logarithmic law.
        let near = tnb(1e-9, 4.0);
        assert!((near.gamma().unwrap() - g).abs() < 1e-8);
        assert_eq!(tnb(0.3, 1.0).gamma(), Some(1.0));
        assert_eq!(tnb(0.3, 1.0).pmf(1), 1.0);
    }

    /// The empirical law of 20 000 draws against the pmf: the sample mean within 5 standard
    /// errors, and every count with at least 20 expected within 5 binomial standard deviations.
    #[test]
    fn samples_follow_the_law() {
        let mut rng = DpRng::seeded(38);
        let n = 20_000usize;
        let sampled = laws().into_iter().filter(|l| {
            !matches!(l,
            Repetitions::TruncatedNegativeBinomial { eta, .. } if *eta > 1.0)
        });
        for law in sampled {
            let mut sampler = law.sampler().unwrap();
            let mut counts = vec![0u64; 4096];
            let mut sum = 0.0;
            let mut sum_sq = 0.0;
            for _ in 0..n {
                let k = sampler.draw(&mut rng);
                counts[k.min(4095) as usize] += 1;
                sum += k as f64;
                sum_sq += (k * k) as f64;
            }
            let mean = sum / n as f64;
            let sd = ((sum_sq / n as f64 - mean * mean) / n as f64).sqrt();
            let want = law.requested_mean();
            assert!(
                (mean - want).abs() < 5.0 * sd,
                "{law:?}: mean {mean} vs {want}"
            );
            for (k, &c) in counts.iter().enumerate() {
                let p = law.pmf(k as u64);
                let expected = p * n as f64;
                if expected >= 20.0 {
                    let sd = (expected * (1.0 - p)).sqrt();
                    assert!(
                        (c as f64 - expected).abs() < 5.0 * sd,
                        "{law:?}: k = {k}: {c} vs {expected}"
                    );
                } else if p == 0.0 {
                    assert_eq!(c, 0, "{law:?}: k = {k} has probability 0");
                }
            }
        }
    }

    #[test]
    fn exact_bernoulli_has_the_right_frequency() {
        let mut rng = DpRng::seeded(5);
        let mut coins = Coins::new(&mut rng);
        let p = BigRational::new(BigInt::from(1), BigInt::from(3));
        let hits = (0..30_000).filter(|_| bernoulli(&mut coins, &p)).count() as f64;
        // Binomial(30000, 1/3): sd ≈ 81.6.
        assert!((hits - 10_000.0).abs() < 5.0 * 81.6, "{hits}");
        assert!(bernoulli(&mut coins, &BigRational::one()));
        assert!(!bernoulli(&mut coins, &BigRational::zero()));
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        for (law, word) in [
            (Repetitions::Poisson { mean: 0.5 }, "mean number of trials"),
            (
                Repetitions::Poisson { mean: f64::NAN },
                "mean number of trials",
            ),
            (Repetitions::Poisson { mean: 1e4 }, "mean number of trials"),
            (tnb(-1.0, 3.0), "eta"),
            (tnb(f64::INFINITY, 3.0), "eta"),
        ] {
            let e = law.sample(&mut DpRng::seeded(1)).unwrap_err().to_string();
            assert!(e.contains(word), "{e}");
        }
    }

    #[test]
    fn json_names_the_law() {
        let law = tnb(0.0, 10.0);
        let s = serde_json::to_string(&law).unwrap();
        assert_eq!(
            s,
            r#"{"law":"truncated_negative_binomial","eta":0.0,"mean":10.0}"#
        );
        assert_eq!(serde_json::from_str::<Repetitions>(&s).unwrap(), law);
        let p: Repetitions = serde_json::from_str(r#"{"law":"poisson","mean":5}"#).unwrap();
        assert_eq!(p, Repetitions::Poisson { mean: 5.0 });
        assert!(
            serde_json::from_str::<Repetitions>(r#"{"law":"poisson","mean":5,"x":1}"#).is_err()
        );
    }
}
