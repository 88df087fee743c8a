//! The empirical ε lower bound from how often one event happens with a record in the training
//! set and without it (e.g. "the attribute-inference guess is correct").
//!
//! # Privacy
//! If training is (ε, δ)-DP under add/remove-one, then for any record z and any event E of the
//! model (any post-processing, such as an attacker's guess), `P[E | z in] ≤ e^ε P[E | z out] + δ`.
//! Averaging over records z drawn from the same distribution in both worlds keeps the
//! inequality, so with the rates `p_in = P[E | member]` and `p_out = P[E | non-member]`
//!
//! `ε ≥ ln((p_in − δ) / p_out)`.
//!
//! The rates are unknown; a one-sided Clopper–Pearson LOWER bound on `p_in` and UPPER bound on
//! `p_out`, each at level `1 − α/2` (`α = 1 − confidence`, a union bound over the two, as in
//! [`super::epsilon`]), make the result a lower bound holding with probability ≥ `confidence`,
//! because the right-hand side increases in `p_in` and decreases in `p_out`. The event must be
//! fixed before the counts are taken (nothing is chosen on them here).
//!
//! As for the threshold bounds, the records of one trained model are treated as independent
//! runs of the game, which they are only approximately.
//!
//! # Citations
//! S. Yeom, I. Giacomelli, M. Fredrikson, S. Jha, "Privacy Risk in Machine Learning: Analyzing
//! the Connection to Overfitting", CSF 2018 (advantage of DP adversaries bounded by e^ε − 1).
//! M. Jagielski, J. Ullman, A. Oprea, NeurIPS 2020 (Clopper–Pearson ε lower bounds).
//!
//! # Errors
//! Counts with zero trials or more hits than trials, and bad parameters, named by value.

use serde::Serialize;

use super::clopper_pearson::{clopper_pearson_lower, clopper_pearson_upper};
use super::epsilon::EpsilonBoundParams;
use crate::error::Result;

/// How often an event happened: `hits` of `trials`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EventCount {
    /// Times the event happened.
    pub hits: u64,
    /// Times it was tried.
    pub trials: u64,
}

impl EventCount {
    /// The observed rate `hits / trials` (NaN for no trials).
    pub fn rate(&self) -> f64 {
        if self.trials == 0 {
            f64::NAN
        } else {
            self.hits as f64 / self.trials as f64
        }
    }
}

/// The ε lower bound of one event's rates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EventBound {
    /// The lower bound on ε, holding with the stated confidence (0 when nothing is shown).
    pub epsilon: f64,
    /// The plug-in value `ln((p_in − δ)/p_out)` of the raw rates: an estimate, NOT a bound.
    pub epsilon_point: f64,
    /// Clopper–Pearson lower bound on the members' rate.
    pub rate_in_lower: f64,
    /// Clopper–Pearson upper bound on the non-members' rate.
    pub rate_out_upper: f64,
}

/// `max(0, ln((p_in − δ)/p_out))`: 0 when `p_in ≤ δ`, `+∞` when `p_out = 0 < p_in − δ`.
pub fn epsilon_from_event_rates(p_in: f64, p_out: f64, delta: f64) -> f64 {
    let num = p_in - delta;
    if num > 0.0 {
        (num / p_out).ln().max(0.0)
    } else {
        0.0
    }
}

/// The ε lower bound of an event seen `members.hits` of `members.trials` times on members and
/// `non_members.hits` of `non_members.trials` times on non-members.
///
/// # Errors
/// [`crate::AuditError::Invalid`] for zero trials or more hits than trials (from the
/// Clopper–Pearson bounds).
pub fn event_epsilon_lower_bound(
    members: EventCount,
    non_members: EventCount,
    params: EpsilonBoundParams,
) -> Result<EventBound> {
    let level = 1.0 - (1.0 - params.confidence()) / 2.0;
    let rate_in_lower = clopper_pearson_lower(members.hits, members.trials, level)?;
    let rate_out_upper = clopper_pearson_upper(non_members.hits, non_members.trials, level)?;
    Ok(EventBound {
        epsilon: epsilon_from_event_rates(rate_in_lower, rate_out_upper, params.delta()),
        epsilon_point: epsilon_from_event_rates(members.rate(), non_members.rate(), params.delta()),
        rate_in_lower,
        rate_out_upper,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::DEFAULT_CONFIDENCE;
    use dpml_mechanisms::DpRng;

    const LN3: f64 = 1.098_612_288_668_109_8;

    /// The attribute game against randomized response with ε = ln 3 per record: a member's
    /// secret bit (always 1 here, the hardest case for the bound) is released with probability
    /// 3/4 and flipped otherwise; without the record the mechanism releases RR of a fixed 0.
    /// The release of 1 has probability 3/4 with the record and 1/4 without: a ratio of exactly
    /// 3, so the mechanism is (ln 3, 0)-DP and no valid bound may exceed ln 3. The event is
    /// "the attacker, guessing the released bit, is right".
    fn rr_counts(runs: u64, rng: &mut DpRng) -> (EventCount, EventCount) {
        let mut hits = |member: bool| {
            (0..runs)
                .filter(|_| {
                    let truth = if member { 1 } else { 0 };
                    let keep = rng.uniform_f64() < 0.75;
                    let released = if keep { truth } else { 1 - truth };
                    released == 1
                })
                .count() as u64
        };
        let (a, b) = (hits(true), hits(false));
        (
            EventCount {
                hits: a,
                trials: runs,
            },
            EventCount {
                hits: b,
                trials: runs,
            },
        )
    }

    #[test]
    fn hand_computed_values() {
        assert!((epsilon_from_event_rates(0.75, 0.25, 0.0) - LN3).abs() < 1e-15);
        assert_eq!(epsilon_from_event_rates(0.2, 0.5, 0.0), 0.0);
        assert_eq!(epsilon_from_event_rates(1e-6, 0.0, 1e-5), 0.0);
        assert_eq!(epsilon_from_event_rates(0.5, 0.0, 0.0), f64::INFINITY);
        // 50 of 50 members, 0 of 50 non-members at 95%: each side at 97.5%, lower bound
        // 0.025^(1/50) and upper 1 − 0.025^(1/50).
        let p = EpsilonBoundParams::new(0.0, 0.95).unwrap();
        let b = event_epsilon_lower_bound(
            EventCount {
                hits: 50,
                trials: 50,
            },
            EventCount {
                hits: 0,
                trials: 50,
            },
            p,
        )
        .unwrap();
        let u = 1.0 - 0.025f64.powf(1.0 / 50.0);
        assert!((b.epsilon - ((1.0 - u) / u).ln()).abs() < 1e-9, "{b:?}");
        assert_eq!(b.epsilon_point, f64::INFINITY);
    }

    #[test]
    fn randomized_response_bound_approaches_but_never_exceeds_ln3() {
        let params = EpsilonBoundParams::new(0.0, DEFAULT_CONFIDENCE).unwrap();
        let mut means = Vec::new();
        for runs in [100u64, 1_000, 10_000, 100_000] {
            let mut sum = 0.0;
            for seed in 0..10 {
                let mut rng = DpRng::seeded(runs * 100 + seed);
                let (m, n) = rr_counts(runs, &mut rng);
                let b = event_epsilon_lower_bound(m, n, params).unwrap();
                assert!(b.epsilon <= LN3, "runs={runs} seed={seed}: {b:?}");
                sum += b.epsilon;
            }
            means.push(sum / 10.0);
        }
        assert!(means.windows(2).all(|w| w[0] < w[1]), "{means:?}");
        // At 100,000 runs per side the one-sided 97.5% bounds sit about
        // 1.96·sqrt(3/16/100000) = 0.00268 from the rates, plus up to 3 sd (0.0041) of
        // sampling error: p_in lower ≥ 0.7432 and p_out upper ≤ 0.2568 give
        // ε ≥ ln(0.7432/0.2568) = 1.0627.
        let last = means[means.len() - 1];
        assert!(last > 1.0627 && last <= LN3, "{means:?}");
    }

    #[test]
    fn randomized_response_bound_holds_with_the_stated_confidence() {
        // 200 audits at 95%: a valid bound exceeds ln 3 at most as often as
        // Binomial(200, 0.05), and P[Binomial(200, 0.05) ≥ 19] = 0.0058 < 1%.
        let params = EpsilonBoundParams::new(0.0, DEFAULT_CONFIDENCE).unwrap();
        let mut rng = DpRng::seeded(77);
        let failures = (0..200)
            .filter(|_| {
                let (m, n) = rr_counts(500, &mut rng);
                event_epsilon_lower_bound(m, n, params).unwrap().epsilon > LN3
            })
            .count();
        assert!(failures <= 18, "{failures} of 200 audits exceeded ln 3");
    }

    #[test]
    fn bad_counts_are_named() {
        let p = EpsilonBoundParams::new(0.0, 0.95).unwrap();
        let ok = EventCount { hits: 1, trials: 2 };
        let e = event_epsilon_lower_bound(EventCount { hits: 3, trials: 2 }, ok, p).unwrap_err();
        assert!(e.to_string().contains("3"), "{e}");
        let e = event_epsilon_lower_bound(ok, EventCount { hits: 0, trials: 0 }, p).unwrap_err();
        assert!(e.to_string().contains("got 0"), "{e}");
    }
}
