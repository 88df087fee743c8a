//! RDP of a mechanism repeated a random number of times with EVERY output released (a private
//! hyperparameter search that publishes all its trials, and so their number).
//!
//! Q is one run with RDP curve ε(λ); A draws K from [`Repetitions`] independently of the data,
//! runs Q K times (adaptively) and outputs K and all K outputs. Given K = k the outputs are a
//! k-fold composition, so D_λ(A_k(D) ‖ A_k(D′)) ≤ k·ε(λ) (Mironov 2017, Proposition 1). K has
//! the same law under D and D′ and is part of the output, so the two output laws are mixtures
//! over disjoint supports with equal weights P\[K = k\], and
//!
//! exp((λ − 1)·D_λ(A(D) ‖ A(D′))) = Σ_k P\[K = k\]·exp((λ − 1)·D_λ(A_k(D) ‖ A_k(D′)))
//!                                ≤ E_K\[exp((λ − 1)·K·ε(λ))\] = G_K(e^{(λ − 1)ε(λ)}),
//!
//! G_K the probability generating function of K (were K not released, joint convexity of
//! exp((λ − 1)D_λ) would give the same bound). Hence
//! ε′(λ) = ln G_K(e^{(λ − 1)ε(λ)}) / (λ − 1), with, for z = e^x, x = (λ − 1)ε(λ) ≥ 0:
//! - K ~ Poisson(μ): G(z) = exp(μ(z − 1)), so ε′(λ) = μ·(e^x − 1)/(λ − 1).
//! - K ~ D_{η,γ}, η ≠ 0: G(z) = ((1 − (1 − γ)z)^{−η} − 1)/(γ^{−η} − 1); η = 0 (logarithmic):
//!   G(z) = ln(1 − (1 − γ)z)/ln γ. Both are finite only for (1 − γ)z < 1: at an order where
//!   (1 − γ)e^x ≥ 1 the expectation diverges and ε′ is +∞ (that order is unusable).
//!
//! Everything is computed in log space (ln(1 − (1 − γ)z), ln|e^y − 1|), so large orders give
//! +∞ or a finite value, never NaN. As for the best-only bound, each ε′(λ) is finally replaced
//! by the smallest ε′ at any order ≥ λ (Rényi divergence does not decrease with the order).
//!
//! This bound covers more than the best-only one (the best trial is a function of all of
//! them), but the two are different upper bounds: for trials that cost almost nothing, the
//! composition here can come out below Papernot & Steinke's, whose ln(E\[K\])/(λ − 1) term does
//! not vanish with the trial's cost.
//!
//! # Citations
//! - I. Mironov. *Rényi Differential Privacy*. CSF 2017, Proposition 1 (composition).
//! - T. van Erven, P. Harremoës. *Rényi Divergence and Kullback-Leibler Divergence*. IEEE
//!   Trans. Inf. Theory 2014 (mixtures, joint convexity, monotonicity in the order).
//! - N. Papernot, T. Steinke. *Hyperparameter Tuning with Renyi Differential Privacy*. ICLR
//!   2022 (arXiv:2110.03620), Definition 1 (the laws D_{η,γ}).

use dpml_mechanisms::Repetitions;

use super::repeat::monotone;

/// The RDP curve of running a mechanism whose curve is `rdp` (at `orders`, each > 1) a
/// `law`-distributed number of times (`law` validated) and releasing every run's output.
pub(super) fn repeat_and_release_all(orders: &[f64], rdp: &[f64], law: Repetitions) -> Vec<f64> {
    let raw: Vec<f64> = orders
        .iter()
        .zip(rdp)
        .map(|(&lambda, &eps)| ln_pgf(&law, (lambda - 1.0) * eps) / (lambda - 1.0))
        .collect();
    monotone(orders, &raw)
}

/// ln G_K(e^x) for x ≥ 0: the log of E\[e^{xK}\], +∞ where it diverges.
fn ln_pgf(law: &Repetitions, x: f64) -> f64 {
    match *law {
        Repetitions::Poisson { mean } => mean * x.exp_m1(),
        Repetitions::TruncatedNegativeBinomial { eta, .. } => {
            let gamma = law.gamma().unwrap_or(1.0);
            if gamma >= 1.0 {
                // K = 1 with certainty.
                return x;
            }
            // ln((1 − γ)z), which must be < 0 for the series to converge.
            let ln_ratio = (-gamma).ln_1p() + x;
            if ln_ratio.is_nan() || ln_ratio >= 0.0 {
                return f64::INFINITY;
            }
            // ln(1 − (1 − γ)z) ≤ ln γ < 0 (equality at x = 0, where G = 1).
            let ln_rest = ln_one_minus_exp(ln_ratio);
            let ln_gamma = gamma.ln();
            if eta == 0.0 {
                (-ln_rest).ln() - (-ln_gamma).ln()
            } else {
                // (e^{−η·ln_rest} − 1)/(e^{−η·ln γ} − 1): both exponents have η's sign, so
                // numerator and denominator share their sign.
                ln_abs_exp_m1(-eta * ln_rest) - ln_abs_exp_m1(-eta * ln_gamma)
            }
        }
    }
}

/// ln(1 − e^a) for a < 0, accurate near 0 and for very negative a.
fn ln_one_minus_exp(a: f64) -> f64 {
    if a > -std::f64::consts::LN_2 {
        (-a.exp_m1()).ln()
    } else {
        (-a.exp()).ln_1p()
    }
}

/// ln|e^y − 1| for y ≠ 0, without overflow for large y.
fn ln_abs_exp_m1(y: f64) -> f64 {
    if y > 0.0 {
        y + (-(-y).exp_m1()).ln()
    } else {
        (-y.exp_m1()).ln()
    }
}

#[cfg(test)]
mod tests {
    use dpml_mechanisms::{PrivacyEvent, Repetitions, TrialRelease};

    use super::*;
    use crate::Accountant;
    use crate::rdp::repeat::lowest_above;
    use crate::rdp::{RdpAccountant, default_orders};

    fn laws() -> Vec<Repetitions> {
        let mut laws: Vec<Repetitions> = [1.0, 3.0, 10.0, 50.0]
            .map(|mean| Repetitions::Poisson { mean })
            .to_vec();
        for eta in [0.0, 1.0, 0.5, -0.5, 2.0] {
            for mean in [3.0, 10.0] {
                laws.push(Repetitions::TruncatedNegativeBinomial { eta, mean });
            }
        }
        laws
    }

    /// The generating function against Σ_k P\[K = k\]·z^k summed term by term from the law's
    /// probabilities, to 1e-9 relative, on a grid of z = e^x where the series converges
    /// fast; +∞ exactly where it diverges.
    #[test]
    fn the_generating_functions_match_brute_force_sums() {
        const TERMS: u64 = 1500;
        for law in laws() {
            let pmf: Vec<f64> = (0..TERMS).map(|k| law.pmf(k)).collect();
            // For the truncated negative binomial, (1 − γ)z < 1 is where the series
            // converges: the grid stays below 0.95 of that radius, and 1500 terms reach 1e-30.
            let radius = law.gamma().map_or(f64::INFINITY, |g| -(-g).ln_1p());
            for x in [0.0, 1e-6, 0.01, 0.1, 0.5, 1.0, 2.0] {
                if law.gamma().is_some() && x > radius + 0.95f64.ln() {
                    continue;
                }
                let brute: f64 = pmf
                    .iter()
                    .enumerate()
                    // In log space: e^{kx} alone overflows where P[K = k] has underflowed.
                    .map(|(k, p)| (p.ln() + k as f64 * x).exp())
                    .sum();
                let closed = ln_pgf(&law, x).exp();
                assert!(
                    (closed - brute).abs() <= 1e-9 * brute,
                    "{law:?}, x {x}: closed form {closed}, sum {brute}"
                );
            }
            if law.gamma().is_some() {
                for past in [radius, radius + 1e-9, radius + 1.0, f64::INFINITY] {
                    assert_eq!(ln_pgf(&law, past), f64::INFINITY, "{law:?} at {past}");
                }
            } else {
                assert_eq!(ln_pgf(&law, f64::INFINITY), f64::INFINITY);
            }
        }
    }

    fn release_all(repetitions: Repetitions, event: PrivacyEvent) -> PrivacyEvent {
        TrialRelease::Every.event(repetitions, event)
    }

    /// The accountant's curve for a Gaussian run, ε(λ) = λ/(2σ²), against the generating
    /// functions written out for three laws: Poisson, μ(e^x − 1); geometric (η = 1),
    /// G(z) = γz/(1 − (1 − γ)z); logarithmic (η = 0), ln(1 − (1 − γ)z)/ln γ. High orders
    /// diverge for the last two (+∞), and lower orders stay finite.
    #[test]
    fn the_accountant_follows_the_closed_forms() {
        let acc = RdpAccountant::default();
        let orders = default_orders();
        let sigma = 2.0;
        let run = PrivacyEvent::Gaussian {
            noise_multiplier: sigma,
        };
        let x = |l: f64| (l - 1.0) * l / (2.0 * sigma * sigma);
        let check = |law: Repetitions, want: Vec<f64>| {
            let got = acc.rdp(&release_all(law, run.clone())).unwrap();
            for ((a, g), w) in orders.iter().zip(&got).zip(&want) {
                assert!(
                    g == w || (g - w).abs() <= 1e-9 * w.max(1.0),
                    "{law:?}, λ {a}: {g} vs {w}"
                );
            }
            got
        };
        let mu = 10.0;
        check(
            Repetitions::Poisson { mean: mu },
            lowest_above(&orders, |l| mu * x(l).exp_m1() / (l - 1.0)),
        );
        let geometric = Repetitions::TruncatedNegativeBinomial {
            eta: 1.0,
            mean: 5.0,
        };
        let g = geometric.gamma().unwrap();
        let got = check(
            geometric,
            lowest_above(&orders, |l| {
                let r = (1.0 - g) * x(l).exp();
                if r >= 1.0 {
                    f64::INFINITY
                } else {
                    (g.ln() + x(l) - (1.0 - r).ln()) / (l - 1.0)
                }
            }),
        );
        assert!(got[0].is_finite() && got.last().unwrap().is_infinite());
        let logarithmic = Repetitions::TruncatedNegativeBinomial {
            eta: 0.0,
            mean: 5.0,
        };
        let g = logarithmic.gamma().unwrap();
        check(
            logarithmic,
            lowest_above(&orders, |l| {
                let r = (1.0 - g) * x(l).exp();
                if r >= 1.0 {
                    f64::INFINITY
                } else {
                    ((1.0 - r).ln() / g.ln()).ln() / (l - 1.0)
                }
            }),
        );
    }

    /// K fixed at 1 (a truncated negative binomial of mean 1: γ = 1) releases one run: the
    /// run's own curve, whatever η.
    #[test]
    fn one_trial_for_certain_is_the_run_itself() {
        let acc = RdpAccountant::default();
        let run = PrivacyEvent::dp_sgd(1.1, 0.01, 500);
        let base = acc.rdp(&run).unwrap();
        for eta in [0.0, 1.0, -0.5, 3.0] {
            let law = Repetitions::TruncatedNegativeBinomial { eta, mean: 1.0 };
            assert_eq!(law.gamma(), Some(1.0));
            let once = acc.rdp(&release_all(law, run.clone())).unwrap();
            for (a, b) in once.iter().zip(&base) {
                assert!((a - b).abs() <= 1e-12 * b.max(1.0), "η {eta}: {a} vs {b}");
            }
        }
    }

    /// Releasing every trial is charged at least what releasing the best one is, in ε, for
    /// trials that cost what DP-SGD trials do, for every law (the heavy-tailed truncated
    /// negative binomials far more: their E[e^{xK}] diverges at all but low orders). Order by
    /// order the two curves do not compare: at low orders a composition of a few cheap runs
    /// is below Papernot & Steinke's ln(E[K])/(λ − 1) term, and for a trial that costs next to
    /// nothing it stays below at some order. Both are upper bounds (releasing every trial
    /// reveals at least as much as its best), which is no contradiction.
    #[test]
    fn releasing_every_trial_costs_at_least_the_best_alone() {
        let acc = RdpAccountant::default();
        let runs = [
            PrivacyEvent::dp_sgd(1.0, 0.01, 1000),
            PrivacyEvent::dp_sgd(0.8, 0.05, 300),
            PrivacyEvent::Gaussian {
                noise_multiplier: 2.0,
            },
        ];
        for run in runs {
            for law in laws().into_iter().filter(|l| l.requested_mean() > 1.0) {
                let best = TrialRelease::Best.event(law, run.clone());
                let every = release_all(law, run.clone());
                let (eb, ee) = (
                    acc.epsilon(&best, 1e-5).unwrap(),
                    acc.epsilon(&every, 1e-5).unwrap(),
                );
                assert!(ee >= eb, "{law:?}, {run:?}: ε {ee} < {eb}");
            }
        }
        let law = Repetitions::Poisson { mean: 10.0 };
        let order_by_order = |run: PrivacyEvent| {
            let b = acc
                .rdp(&TrialRelease::Best.event(law, run.clone()))
                .unwrap();
            let e = acc.rdp(&release_all(law, run)).unwrap();
            b.iter().zip(&e).any(|(x, y)| y < x)
        };
        assert!(order_by_order(PrivacyEvent::dp_sgd(1.0, 0.01, 1000)));
        assert!(order_by_order(PrivacyEvent::Gaussian {
            noise_multiplier: 100.0
        }));
    }

    /// The event reads and writes as JSON with its own tag (its refusals are tested with the
    /// best-only event's, in `repeat`).
    #[test]
    fn it_reads_and_writes_as_json() {
        let event = release_all(
            Repetitions::TruncatedNegativeBinomial {
                eta: 0.0,
                mean: 4.0,
            },
            PrivacyEvent::Laplace {
                noise_multiplier: 2.0,
            },
        );
        let s = serde_json::to_string(&event).unwrap();
        assert!(
            s.starts_with(r#"{"type":"repeat_and_release_all","repetitions":{"law":"#),
            "{s}"
        );
        assert_eq!(serde_json::from_str::<PrivacyEvent>(&s).unwrap(), event);
        assert_eq!(event.kind(), "repeat_and_release_all");
        let acc = RdpAccountant::default();
        assert!(acc.epsilon(&event, 1e-5).unwrap().is_finite());
    }
}
