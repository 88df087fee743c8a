//! Empirical lower bounds on ε from the error rates of a membership-inference attack.
//!
//! # Privacy
//! If a mechanism is (ε, δ)-DP, every test between two neighbouring data sets has
//! `FPR + e^ε · FNR ≥ 1 − δ` and `FNR + e^ε · FPR ≥ 1 − δ` (Kairouz, Oh, Viswanath 2015), so
//!
//! `ε ≥ max( ln((1 − δ − FPR) / FNR), ln((1 − δ − FNR) / FPR) )`.
//!
//! The true rates are unknown; plugging in one-sided Clopper–Pearson UPPER bounds for both
//! (each at level `1 − α/2`, a union bound over the two rates, `α = 1 − confidence`) makes the
//! result a lower bound that holds with probability ≥ `confidence`, because the right-hand side
//! decreases in both rates. The threshold must not be chosen on the scores it is evaluated on:
//! [`choose_threshold`] picks it on split A and [`evaluate_threshold`] measures it on split B;
//! [`split_epsilon_lower_bound`] does both on a random half split. Evaluating several thresholds
//! on B ([`evaluate_thresholds`]) divides α among them (Bonferroni).
//!
//! The guarantee treats each score as one independent run of the membership game; scores of
//! different records from one trained model are only approximately that (as in the literature).
//!
//! # Citations
//! M. Jagielski, J. Ullman, A. Oprea, "Auditing differentially private machine learning: how
//! private is private SGD?", NeurIPS 2020. M. Nasr, S. Song, A. Thakurta, N. Papernot,
//! N. Carlini, "Adversary instantiation: lower bounds for differentially private machine
//! learning", IEEE S&P 2021.
//!
//! # Errors
//! Empty or non-finite score sets, `confidence ∉ (0, 1)`, `δ ∉ [0, 1)`, and splits too small to
//! hold a member and a non-member on each side are rejected with [`AuditError`]s naming the value.

use dpml_mechanisms::DpRng;

use super::clopper_pearson::clopper_pearson_upper;
use crate::error::{AuditError, Result};
use crate::roc::{Confusion, RocCurve};
use crate::{sampling, validate};

/// The confidence used when the caller has no reason to pick another.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

/// δ and the confidence level of an empirical ε bound.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct EpsilonBoundParams {
    delta: f64,
    confidence: f64,
}

impl EpsilonBoundParams {
    /// Validated parameters.
    ///
    /// # Errors
    /// [`AuditError::OutOfRange`] when `delta ∉ [0, 1)` or `confidence ∉ (0, 1)`.
    pub fn new(delta: f64, confidence: f64) -> Result<Self> {
        validate::delta(delta)?;
        validate::confidence(confidence)?;
        Ok(Self { delta, confidence })
    }

    /// δ of the audited guarantee.
    pub fn delta(&self) -> f64 {
        self.delta
    }

    /// Probability with which the bound holds.
    pub fn confidence(&self) -> f64 {
        self.confidence
    }
}

/// An ε lower bound measured at one threshold.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct EpsilonBound {
    /// The lower bound on ε, holding with the stated confidence (0 when nothing is shown).
    pub epsilon: f64,
    /// The plug-in value from the raw rates: an estimate, NOT a bound.
    pub epsilon_point: f64,
    /// The attack's threshold ("member" iff score ≥ threshold).
    pub threshold: f64,
    /// Counts on the evaluation scores.
    pub confusion: Confusion,
    /// Clopper–Pearson upper bound on the false-positive rate.
    pub fpr_upper: f64,
    /// Clopper–Pearson upper bound on the false-negative rate.
    pub fnr_upper: f64,
    /// The parameters used.
    pub params: EpsilonBoundParams,
}

/// `max(0, ln((1 − δ − fpr)/fnr), ln((1 − δ − fnr)/fpr))`; a term whose numerator is ≤ 0
/// contributes nothing, a zero denominator with a positive numerator gives `+∞`.
pub fn epsilon_from_rates(fpr: f64, fnr: f64, delta: f64) -> f64 {
    let term = |num: f64, den: f64| if num > 0.0 { (num / den).ln() } else { 0.0 };
    term(1.0 - delta - fpr, fnr)
        .max(term(1.0 - delta - fnr, fpr))
        .max(0.0)
}

/// The ε lower bound of one threshold's counts, where `tests` thresholds in all are evaluated
/// on the same scores (α is divided among them; 1 for a single pre-chosen threshold).
///
/// # Errors
/// [`AuditError::Invalid`] when `tests` is 0.
pub fn epsilon_lower_bound(
    confusion: &Confusion,
    threshold: f64,
    params: EpsilonBoundParams,
    tests: usize,
) -> Result<EpsilonBound> {
    if tests == 0 {
        return Err(AuditError::Invalid(
            "tests must be at least 1, got 0".into(),
        ));
    }
    // Two rates per threshold, `tests` thresholds: each bound fails with probability α/(2·tests).
    let level = 1.0 - (1.0 - params.confidence) / (2.0 * tests as f64);
    let fpr_upper = clopper_pearson_upper(
        confusion.false_positives as u64,
        confusion.non_members as u64,
        level,
    )?;
    let fnr_upper = clopper_pearson_upper(
        confusion.false_negatives() as u64,
        confusion.members as u64,
        level,
    )?;
    Ok(EpsilonBound {
        epsilon: epsilon_from_rates(fpr_upper, fnr_upper, params.delta),
        epsilon_point: epsilon_from_rates(confusion.fpr(), confusion.fnr(), params.delta),
        threshold,
        confusion: *confusion,
        fpr_upper,
        fnr_upper,
        params,
    })
}

/// Chooses the threshold with the largest confidence-adjusted ε bound on split A's scores
/// (the bound on A itself is not valid for reporting: A was looked at to choose).
///
/// # Errors
/// As [`RocCurve::from_scores`].
pub fn choose_threshold(
    members_a: &[f64],
    non_members_a: &[f64],
    params: EpsilonBoundParams,
) -> Result<f64> {
    let roc = RocCurve::from_scores(members_a, non_members_a)?;
    let (np, nn) = (roc.members(), roc.non_members());
    // The Clopper–Pearson uppers are ≥ the raw rates and the bound decreases in both, so a
    // point's plug-in value caps what its bound can reach. Visiting points by decreasing
    // plug-in value, the search stops at the first one that cannot beat the best so far: a
    // handful of Clopper–Pearson evaluations instead of one per point (10⁶ scores in well under
    // a second). Among equal bounds the earliest point (highest threshold) wins, as in a scan.
    let points = roc.points();
    let mut order: Vec<(f64, usize)> = points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let fnr = (np - p.true_positives) as f64 / np as f64;
            (epsilon_from_rates(p.fpr, fnr, params.delta), i)
        })
        .filter(|&(cap, _)| cap > 0.0)
        .collect();
    order.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut best: Option<(f64, usize)> = None;
    for (cap, i) in order {
        if best.is_some_and(|(eps, _)| cap < eps) {
            break;
        }
        let p = &points[i];
        let c = Confusion {
            true_positives: p.true_positives,
            false_positives: p.false_positives,
            members: np,
            non_members: nn,
        };
        let eps = epsilon_lower_bound(&c, p.threshold, params, 1)?.epsilon;
        let better = match best {
            None => eps > 0.0,
            Some((b, j)) => eps > b || (eps == b && i < j),
        };
        if better {
            best = Some((eps, i));
        }
    }
    Ok(best.map_or(f64::INFINITY, |(_, i)| points[i].threshold))
}

/// The ε lower bound of a threshold chosen elsewhere, measured on split B's scores.
///
/// # Errors
/// As [`Confusion::at_threshold`].
pub fn evaluate_threshold(
    members_b: &[f64],
    non_members_b: &[f64],
    threshold: f64,
    params: EpsilonBoundParams,
) -> Result<EpsilonBound> {
    evaluate_thresholds(members_b, non_members_b, &[threshold], params)
}

/// The best ε lower bound among several thresholds chosen elsewhere, measured on split B with
/// a Bonferroni correction over their number.
///
/// # Errors
/// [`AuditError::Invalid`] for an empty threshold list; otherwise as
/// [`Confusion::at_threshold`].
pub fn evaluate_thresholds(
    members_b: &[f64],
    non_members_b: &[f64],
    thresholds: &[f64],
    params: EpsilonBoundParams,
) -> Result<EpsilonBound> {
    let mut best: Option<EpsilonBound> = None;
    for &t in thresholds {
        let c = Confusion::at_threshold(members_b, non_members_b, t)?;
        let b = epsilon_lower_bound(&c, t, params, thresholds.len())?;
        if best.is_none_or(|x| b.epsilon > x.epsilon) {
            best = Some(b);
        }
    }
    best.ok_or_else(|| AuditError::Invalid("thresholds is empty: give at least one".into()))
}

/// Splits members and non-members at random into halves A and B (with `rng`), chooses the
/// threshold on A and returns its bound measured on B.
///
/// # Errors
/// [`AuditError::Invalid`] when either set has fewer than 2 scores; otherwise as
/// [`choose_threshold`].
pub fn split_epsilon_lower_bound(
    members: &[f64],
    non_members: &[f64],
    params: EpsilonBoundParams,
    rng: &mut DpRng,
) -> Result<EpsilonBound> {
    validate::finite_nonempty("member scores", members)?;
    validate::finite_nonempty("non-member scores", non_members)?;
    for (what, n) in [("member", members.len()), ("non-member", non_members.len())] {
        if n < 2 {
            return Err(AuditError::Invalid(format!(
                "a split bound needs at least 2 {what} scores (one per half), got {n}"
            )));
        }
    }
    let (members_a, members_b) = sampling::halves(members, rng);
    let (non_members_a, non_members_b) = sampling::halves(non_members, rng);
    let threshold = choose_threshold(&members_a, &non_members_a, params)?;
    evaluate_threshold(&members_b, &non_members_b, threshold, params)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LN3: f64 = 1.098_612_288_668_109_8;

    /// The membership game against randomized response with ε = ln 3: the secret bit is
    /// "member"; the released bit equals it with probability e^ε/(1+e^ε) = 3/4. The optimal
    /// attack scores each run by the released bit. Returns (member scores, non-member scores).
    fn rr_game(runs: usize, rng: &mut DpRng) -> (Vec<f64>, Vec<f64>) {
        let mut release = |secret: bool| {
            let keep = rng.uniform_f64() < 0.75;
            if keep == secret { 1.0 } else { 0.0 }
        };
        let members = (0..runs).map(|_| release(true)).collect();
        let non_members = (0..runs).map(|_| release(false)).collect();
        (members, non_members)
    }

    #[test]
    fn rates_formula() {
        // FPR = FNR = 1/4, δ = 0 → ln(0.75/0.25) = ln 3.
        assert!((epsilon_from_rates(0.25, 0.25, 0.0) - LN3).abs() < 1e-15);
        // δ lowers the bound; useless tests give 0.
        assert!(epsilon_from_rates(0.25, 0.25, 0.1) < LN3);
        assert_eq!(epsilon_from_rates(0.5, 0.5, 0.0), 0.0);
        assert_eq!(epsilon_from_rates(1.0, 0.0, 0.0), 0.0);
        assert_eq!(epsilon_from_rates(0.0, 0.5, 0.0), f64::INFINITY);
    }

    #[test]
    fn randomized_response_bound_approaches_but_never_exceeds_ln3() {
        let params = EpsilonBoundParams::new(0.0, DEFAULT_CONFIDENCE).unwrap();
        let sizes = [200usize, 2_000, 20_000, 200_000];
        let seeds = 0..10u64;
        let mut means = Vec::new();
        let mut above = Vec::new();
        for &n in &sizes {
            let mut sum = 0.0;
            for seed in seeds.clone() {
                let mut rng = DpRng::seeded(1000 * n as u64 + seed);
                let (m, nm) = rr_game(n, &mut rng);
                let b = split_epsilon_lower_bound(&m, &nm, params, &mut rng).unwrap();
                // The bound holds with probability ≥ 95% per run, so a run above ln 3 is
                // allowed now and then (counted below), never far above it.
                if b.epsilon > LN3 {
                    above.push((n, seed, b.epsilon));
                }
                assert!(
                    b.epsilon <= LN3 + 0.1,
                    "n={n} seed={seed}: {} ≫ ln 3",
                    b.epsilon
                );
                assert_eq!(
                    b.threshold, 1.0,
                    "n={n} seed={seed}: the ideal attack is the bit"
                );
                sum += b.epsilon;
            }
            means.push(sum / 10.0);
        }
        // Over 40 runs that each exceed ln 3 with probability at most 5%, 7 or more
        // exceedances have probability below 1.4%; a broken bound exceeds it in most runs.
        assert!(above.len() <= 6, "bounds above ln 3: {above:?}");
        // More samples, tighter bound.
        assert!(means.windows(2).all(|w| w[0] < w[1]), "{means:?}");
        // At n = 200,000 runs, split B has 100,000 of each kind. The 97.5% one-sided upper
        // bound of a rate p = 1/4 is about p + 1.96·sqrt(p(1−p)/n) = 0.25 + 0.00268, plus the
        // sampling error of the rate itself (sd 0.00137, allow 3 sd = 0.0041): uppers below
        // 0.2568 each give ε ≥ ln(0.7432/0.2568) = 1.0627.
        let last = means[means.len() - 1];
        assert!(last > 1.0627 && last <= LN3, "{means:?}");
    }

    #[test]
    fn randomized_response_bound_holds_with_the_stated_confidence() {
        // 200 independent audits of ε = ln 3 at 95%: if the bound is valid, the number that
        // exceed ln 3 is stochastically at most Binomial(200, 0.05), and
        // P[Binomial(200, 0.05) ≥ 19] = 0.0058 < 1%, so 19 or more failures reject validity.
        let params = EpsilonBoundParams::new(0.0, DEFAULT_CONFIDENCE).unwrap();
        let mut rng = DpRng::seeded(2024);
        let failures = (0..200)
            .filter(|_| {
                let (m, nm) = rr_game(1_000, &mut rng);
                split_epsilon_lower_bound(&m, &nm, params, &mut rng)
                    .unwrap()
                    .epsilon
                    > LN3
            })
            .count();
        assert!(failures <= 18, "{failures} of 200 audits exceeded ln 3");
    }

    #[test]
    fn threshold_chosen_on_a_is_evaluated_on_b() {
        let params = EpsilonBoundParams::new(1e-5, 0.95).unwrap();
        let t = choose_threshold(&[3.0, 4.0, 5.0, 6.0], &[0.0, 1.0, 2.0, 3.5], params).unwrap();
        let b = evaluate_threshold(&[1.0, 9.0], &[0.5, 8.0], t, params).unwrap();
        assert_eq!(b.threshold, t);
        assert_eq!(
            b.confusion,
            Confusion::at_threshold(&[1.0, 9.0], &[0.5, 8.0], t).unwrap()
        );
        // Two thresholds on B: each rate bound is at level 1 − 0.05/4 (stricter) → uppers grow.
        let one = evaluate_threshold(&[5.0; 50], &[0.0; 50], 4.0, params).unwrap();
        let two = evaluate_thresholds(&[5.0; 50], &[0.0; 50], &[4.0, 4.5], params).unwrap();
        assert!(two.fpr_upper > one.fpr_upper && two.epsilon < one.epsilon);
        // Perfect separation of 50 + 50: upper rates 1 − 0.025^(1/50) = 0.0711 → ε = ln(0.9289/0.0711).
        let u = 1.0 - 0.025f64.powf(1.0 / 50.0);
        assert!(
            (one.epsilon - ((1.0 - 1e-5 - u) / u).ln()).abs() < 1e-9,
            "{one:?}"
        );
    }

    #[test]
    fn bad_input_is_named() {
        assert!(
            EpsilonBoundParams::new(-0.1, 0.95)
                .unwrap_err()
                .to_string()
                .contains("-0.1")
        );
        assert!(
            EpsilonBoundParams::new(0.0, 0.0)
                .unwrap_err()
                .to_string()
                .contains("got 0")
        );
        let p = EpsilonBoundParams::new(0.0, 0.95).unwrap();
        let mut rng = DpRng::seeded(0);
        let e = split_epsilon_lower_bound(&[1.0], &[0.0, 1.0], p, &mut rng).unwrap_err();
        assert!(e.to_string().contains("got 1"), "{e}");
        let e = split_epsilon_lower_bound(&[1.0, f64::NAN], &[0.0, 1.0], p, &mut rng).unwrap_err();
        assert!(e.to_string().contains("NaN"), "{e}");
        assert!(evaluate_thresholds(&[1.0], &[0.0], &[], p).is_err());
        let c = Confusion::at_threshold(&[1.0], &[0.0], 0.5).unwrap();
        assert!(
            epsilon_lower_bound(&c, 0.5, p, 0)
                .unwrap_err()
                .to_string()
                .contains("got 0")
        );
    }
}
