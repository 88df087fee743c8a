//! RDP of a mechanism repeated a random number of times with only the best output released
//! (a private hyperparameter search): Papernot & Steinke 2022, Theorems 2 and 6.
//!
//! Q is one run (one trial, with the noisy score it is ranked by), with RDP curve ε(λ) on the
//! accountant's orders. A runs Q K times, K drawn from [`Repetitions`] and kept secret, and
//! outputs the best of the K outputs (under any fixed total order). Then A is (λ, ε′(λ))-RDP:
//! - K ~ Poisson(μ) (Theorem 6, Q being (λ, ε)-RDP and (ε̂, δ̂)-DP with
//!   ε̂ = ln(1 + 1/(λ − 1))): ε′(λ) = ε(λ) + μ·δ̂ + ln(μ)/(λ − 1), δ̂ the δ of Q's own curve at
//!   ε̂ (the accountant's RDP → δ conversion, minimised over the orders).
//! - K ~ D_{η,γ} (Theorem 2, Q being (λ, ε)- and (λ̂, ε̂)-RDP for any λ̂ ≥ 1):
//!   ε′(λ) = ε(λ) + (1 + η)·min_λ̂ [(1 − 1/λ̂)ε(λ̂) + ln(1/γ)/λ̂] + ln(E\[K\])/(λ − 1), the
//!   minimum over the accountant's orders.
//!
//! Rényi divergence does not decrease with the order, so each ε′(λ) is finally replaced by the
//! smallest ε′ at any order ≥ λ (as Google's dp_accounting does).
//!
//! # Citations
//! - N. Papernot, T. Steinke. *Hyperparameter Tuning with Renyi Differential Privacy*. ICLR
//!   2022 (arXiv:2110.03620), Theorems 2 and 6.
//! - Google dp_accounting, `rdp_privacy_accountant._compute_rdp_repeat_and_select`.

use dpml_mechanisms::{Repetitions, TrialRelease};

use super::conversion::{self, Conversion};
use crate::AccountingError;

/// The RDP curve of running a mechanism whose curve is `rdp` (at `orders`, each > 1) a
/// `repetitions`-distributed number of times and releasing what `release` says: the best
/// output (this module), or every output ([`super::repeat_all`]).
///
/// # Errors
/// [`AccountingError::InvalidParameter`] for a law with bad parameters.
pub(crate) fn repeated(
    orders: &[f64],
    rdp: &[f64],
    repetitions: &Repetitions,
    release: TrialRelease,
) -> Result<Vec<f64>, AccountingError> {
    let law = repetitions
        .validate()
        .map_err(|e| AccountingError::InvalidParameter(e.to_string()))?;
    Ok(match release {
        TrialRelease::Best => repeat_and_select(orders, rdp, law),
        TrialRelease::Every => super::repeat_all::repeat_and_release_all(orders, rdp, law),
    })
}

/// Papernot & Steinke's curve of the best of a `law`-distributed number of runs (`law`
/// validated).
fn repeat_and_select(orders: &[f64], rdp: &[f64], law: Repetitions) -> Vec<f64> {
    let raw: Vec<f64> = match law {
        Repetitions::Poisson { mean } => poisson(orders, rdp, mean),
        Repetitions::TruncatedNegativeBinomial { eta, .. } => {
            // Validated, so γ exists and lies in (0, 1].
            let gamma = law.gamma().unwrap_or(1.0);
            truncated_negative_binomial(orders, rdp, eta, gamma, law.expected())
        }
    };
    monotone(orders, &raw)
}

/// Theorem 6: ε(λ) + μ·δ̂(λ) + ln(μ)/(λ − 1), δ̂(λ) = δ of the curve at ε̂ = ln(1 + 1/(λ − 1)).
fn poisson(orders: &[f64], rdp: &[f64], mu: f64) -> Vec<f64> {
    orders
        .iter()
        .zip(rdp)
        .map(|(&lambda, &eps)| {
            let eps_hat = (1.0 / (lambda - 1.0)).ln_1p();
            let (delta_hat, _) = conversion::delta(orders, rdp, eps_hat, Conversion::Current);
            eps + mu * delta_hat + mu.ln() / (lambda - 1.0)
        })
        .collect()
}

/// Theorem 2: ε(λ) + (1 + η)·min_λ̂ [(1 − 1/λ̂)ε(λ̂) + ln(1/γ)/λ̂] + ln(E[K])/(λ − 1).
fn truncated_negative_binomial(
    orders: &[f64],
    rdp: &[f64],
    eta: f64,
    gamma: f64,
    mean: f64,
) -> Vec<f64> {
    let ln_inv_gamma = -gamma.ln();
    let cost = orders
        .iter()
        .zip(rdp)
        .map(|(&l, &e)| (1.0 - 1.0 / l) * e + ln_inv_gamma / l)
        .fold(f64::INFINITY, f64::min);
    let constant = (1.0 + eta) * cost;
    orders
        .iter()
        .zip(rdp)
        .map(|(&lambda, &eps)| eps + constant + mean.ln() / (lambda - 1.0))
        .collect()
}

/// Each value replaced by the smallest at any order ≥ its own (RDP is non-decreasing in the
/// order, so a bound at a higher order holds at a lower one). Negative values become 0.
pub(super) fn monotone(orders: &[f64], values: &[f64]) -> Vec<f64> {
    orders
        .iter()
        .map(|&a| {
            orders
                .iter()
                .zip(values)
                .filter(|&(&b, _)| b >= a)
                .map(|(_, &v)| super::bound(v))
                .fold(f64::INFINITY, f64::min)
        })
        .collect()
}

/// Each value replaced by the smallest at any order ≥ its own, written out afresh (for tests,
/// apart from [`monotone`]).
#[cfg(test)]
pub(super) fn lowest_above(orders: &[f64], raw: impl Fn(f64) -> f64) -> Vec<f64> {
    orders
        .iter()
        .map(|&a| {
            let mut best = f64::INFINITY;
            for &b in orders {
                if b >= a {
                    best = best.min(raw(b));
                }
            }
            best.max(0.0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use dpml_mechanisms::{PrivacyEvent, Repetitions, TrialRelease};

    use super::*;
    use crate::rdp::{RdpAccountant, default_orders};

    fn search(repetitions: Repetitions, event: PrivacyEvent) -> PrivacyEvent {
        PrivacyEvent::RepeatAndSelect {
            repetitions,
            event: Box::new(event),
        }
    }

    /// The accountant's curve for a Gaussian run against Papernot & Steinke's formulas written
    /// out for ε(λ) = λ/(2σ²): Theorem 2 for the geometric law (γ = 1/mean exactly), the
    /// logarithmic law and η = 0.5; Theorem 6 for Poisson, δ̂ from the accountant's public
    /// δ(ε) of the run.
    #[test]
    fn the_closed_forms_hold_to_1e_9_on_the_default_orders() {
        let acc = RdpAccountant::default();
        let orders = default_orders();
        let sigma = 3.0;
        let run = PrivacyEvent::Gaussian {
            noise_multiplier: sigma,
        };
        let eps = |l: f64| l / (2.0 * sigma * sigma);
        for (eta, mean) in [(1.0, 8.0), (0.0, 8.0), (0.5, 20.0), (2.0, 3.0)] {
            let law = Repetitions::TruncatedNegativeBinomial { eta, mean };
            let gamma = if eta == 1.0 {
                1.0 / mean
            } else {
                law.gamma().unwrap()
            };
            let k_mean = law.expected();
            assert!((k_mean - mean).abs() < 1e-9 * mean);
            let constant = (1.0 + eta)
                * orders
                    .iter()
                    .map(|&h| (1.0 - 1.0 / h) * eps(h) + (1.0 / gamma).ln() / h)
                    .fold(f64::INFINITY, f64::min);
            let want = lowest_above(&orders, |l| eps(l) + constant + k_mean.ln() / (l - 1.0));
            let got = acc.rdp(&search(law, run.clone())).unwrap();
            for ((a, g), w) in orders.iter().zip(&got).zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-9 * w.max(1.0),
                    "η {eta}, λ {a}: {g} vs {w}"
                );
            }
        }
        for mu in [1.0, 5.0, 30.0] {
            let law = Repetitions::Poisson { mean: mu };
            let raw = |l: f64| {
                let (d, _) = acc
                    .delta_and_order(&run, (1.0 / (l - 1.0)).ln_1p())
                    .unwrap();
                eps(l) + mu * d + mu.ln() / (l - 1.0)
            };
            let want = lowest_above(&orders, raw);
            let got = acc.rdp(&search(law, run.clone())).unwrap();
            for ((a, g), w) in orders.iter().zip(&got).zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-9 * w.max(1.0),
                    "μ {mu}, λ {a}: {g} vs {w}"
                );
            }
        }
    }

    /// Rényi divergence of order α between two laws on the same finite outcomes (in log
    /// space: orders up to 1024 would underflow the powers).
    fn renyi(p: &[f64], q: &[f64], alpha: f64) -> f64 {
        let terms: Vec<f64> = p
            .iter()
            .zip(q)
            .filter(|(a, _)| **a > 0.0)
            .map(|(a, b)| alpha * a.ln() + (1.0 - alpha) * b.ln())
            .collect();
        let m = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (m + terms.iter().map(|t| (t - m).exp()).sum::<f64>().ln()) / (alpha - 1.0)
    }

    /// The law of the best of K runs of a run whose outputs 0..m (ranked by value) have
    /// probabilities `run`, by summing over K term by term (not through a generating
    /// function): P[best = y] = Σ_k P[K = k]·(F(y)^k − F(y − 1)^k). Poisson's K = 0 adds the
    /// outcome "nothing", last.
    fn best_of(run: &[f64], law: &Repetitions) -> Vec<f64> {
        let cdf: Vec<f64> = run
            .iter()
            .scan(0.0, |c, p| {
                *c += p;
                Some(*c)
            })
            .collect();
        let mut out = vec![0.0; run.len() + 1];
        for k in 0..3000u64 {
            let pk = law.pmf(k);
            if k == 0 {
                out[run.len()] += pk;
                continue;
            }
            for y in 0..run.len() {
                let below = if y == 0 { 0.0 } else { cdf[y - 1] };
                out[y] += pk * (cdf[y].powi(k as i32) - below.powi(k as i32));
            }
        }
        out
    }

    /// A run on neighbouring data sets: a noisy score among 0..6, its law a discretised
    /// Laplace around 3 or 4 (so D and D′ differ at every outcome). The exact Rényi
    /// divergences of the best of K runs, K from each law, stay below the bound computed from
    /// the run's exact curve, at every order.
    #[test]
    fn exact_enumeration_of_a_small_search_stays_below_the_bound() {
        let orders = default_orders();
        let law_at = |centre: f64| -> Vec<f64> {
            let w: Vec<f64> = (0..7)
                .map(|y| (-(f64::from(y) - centre).abs() * 0.6).exp())
                .collect();
            let z: f64 = w.iter().sum();
            w.iter().map(|v| v / z).collect()
        };
        let (p, q) = (law_at(3.0), law_at(4.0));
        let run_curve: Vec<f64> = orders
            .iter()
            .map(|&a| renyi(&p, &q, a).max(renyi(&q, &p, a)))
            .collect();
        let laws = [
            Repetitions::Poisson { mean: 3.0 },
            Repetitions::Poisson { mean: 10.0 },
            Repetitions::TruncatedNegativeBinomial {
                eta: 0.0,
                mean: 5.0,
            },
            Repetitions::TruncatedNegativeBinomial {
                eta: 1.0,
                mean: 5.0,
            },
            Repetitions::TruncatedNegativeBinomial {
                eta: 0.5,
                mean: 10.0,
            },
        ];
        for law in laws {
            let (a, b) = (best_of(&p, &law), best_of(&q, &law));
            assert!((a.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            let bound = repeated(&orders, &run_curve, &law, TrialRelease::Best).unwrap();

            let mut tightest = f64::INFINITY;
            let mut closest = (0.0, 0.0, 0.0);
            for ((&alpha, &limit), &single) in orders.iter().zip(&bound).zip(&run_curve) {
                let exact = renyi(&a, &b, alpha).max(renyi(&b, &a, alpha));
                assert!(
                    exact <= limit + 1e-12,
                    "{law:?} α {alpha}: {exact} > {limit}"
                );
                // The search leaks more than one run at some order: the bound is not vacuous
                // because nothing leaks.
                if limit - exact < tightest {
                    tightest = limit - exact;
                    closest = (alpha, exact, limit);
                }
                assert!(limit >= single, "the bound is below one run's curve");
            }
            assert!(
                tightest < 1.0,
                "{law:?}: the bound is never close ({tightest})"
            );
            eprintln!(
                "{law:?}: closest at order {}: exact {:.4}, bound {:.4}",
                closest.0, closest.1, closest.2
            );
        }
    }

    #[test]
    fn only_rdp_accounts_for_a_search_and_runs_need_a_curve() {
        let event = search(
            Repetitions::Poisson { mean: 5.0 },
            PrivacyEvent::dp_sgd(1.0, 0.01, 1000),
        );
        let acc = RdpAccountant::default();
        let total = crate::Accountant::epsilon(&acc, &event, 1e-5).unwrap();
        let one =
            crate::Accountant::epsilon(&acc, &PrivacyEvent::dp_sgd(1.0, 0.01, 1000), 1e-5).unwrap();
        assert!(total > one && total < 3.0 * one, "{total} vs {one}");
        // Both search events, the best-only one and the all-release one: RDP only, a run
        // with a curve, a law in range.
        for release in [TrialRelease::Best, TrialRelease::Every] {
            let searched = release.event(
                Repetitions::Poisson { mean: 5.0 },
                PrivacyEvent::dp_sgd(1.0, 0.01, 1000),
            );
            let pld = crate::pld::PldAccountant::pessimistic();
            let e = crate::Accountant::epsilon(&pld, &searched, 1e-5).unwrap_err();
            assert!(e.to_string().contains("RDP accountant"), "{e}");
            let approximate = release.event(
                Repetitions::Poisson { mean: 5.0 },
                PrivacyEvent::EpsilonDelta {
                    epsilon: 1.0,
                    delta: 1e-6,
                },
            );
            let e = acc.rdp(&approximate).unwrap_err().to_string();
            assert!(
                e.contains(searched.kind()) && e.contains("RDP curve"),
                "{e}"
            );
            let bad = release.event(
                Repetitions::Poisson { mean: 0.0 },
                PrivacyEvent::Gaussian {
                    noise_multiplier: 1.0,
                },
            );
            assert!(
                acc.rdp(&bad)
                    .unwrap_err()
                    .to_string()
                    .contains("mean number of trials")
            );
        }
        // More trials on average cost more.
        let more = search(
            Repetitions::Poisson { mean: 50.0 },
            PrivacyEvent::dp_sgd(1.0, 0.01, 1000),
        );
        assert!(crate::Accountant::epsilon(&acc, &more, 1e-5).unwrap() > total);
    }

    /// A trial whose hyperparameters are drawn at random is one of several mechanisms: its
    /// curve is the worst of theirs, order by order, and so is its ε.
    #[test]
    fn worst_of_is_the_worst_of_its_events() {
        let acc = RdpAccountant::default();
        let a = PrivacyEvent::dp_sgd(1.0, 0.01, 2000);
        let b = PrivacyEvent::Composed {
            events: vec![
                PrivacyEvent::dp_sgd(0.8, 0.02, 500),
                PrivacyEvent::DiscreteLaplace {
                    scale: 10.0,
                    sensitivity: 1,
                },
            ],
        };
        let either = PrivacyEvent::WorstOf {
            events: vec![a.clone(), b.clone()],
        };
        let (ra, rb, r) = (
            acc.rdp(&a).unwrap(),
            acc.rdp(&b).unwrap(),
            acc.rdp(&either).unwrap(),
        );
        for i in 0..r.len() {
            assert_eq!(r[i], ra[i].max(rb[i]));
        }
        let eps = |e: &PrivacyEvent| crate::Accountant::epsilon(&acc, e, 1e-5).unwrap();
        assert!(eps(&either) >= eps(&a).max(eps(&b)));
        let empty = PrivacyEvent::WorstOf { events: vec![] };
        assert!(
            acc.rdp(&empty)
                .unwrap_err()
                .to_string()
                .contains("at least one")
        );
        let s = serde_json::to_string(&either).unwrap();
        assert!(s.starts_with(r#"{"type":"worst_of","events":["#), "{s}");
    }
}
