//! The mechanisms a PLD is built from ("leaves"), validated, and the flattening of an event tree
//! into leaves with repetition counts.
//!
//! Composition is commutative, so `Composed` and `SelfComposed` only multiply counts; all plain
//! Gaussian leaves merge exactly into one Gaussian (`1/σ² = Σ count/σᵢ²`), and a Poisson-sampled
//! composition of Gaussians is one sampled Gaussian with that σ.

use super::discrete;
use super::discretize::Cells;
use super::gaussian::SampledGaussian;
use crate::{AccountingError, PrivacyEvent};

/// One mechanism with a known privacy-loss distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Leaf {
    /// Poisson-subsampled Gaussian (q < 1) or plain Gaussian (q = 1), sensitivity 1.
    Gaussian(SampledGaussian),
    /// Laplace with scale `b` on sensitivity 1.
    Laplace { b: f64 },
    /// k-ary randomized response.
    RandomizedResponse { epsilon: f64, categories: u32 },
    /// A black-box (ε, δ) step.
    EpsilonDelta { epsilon: f64, delta: f64 },
    /// Discrete Laplace with scale `t` on integer sensitivity `s`.
    DiscreteLaplace { scale: f64, sensitivity: u64 },
    /// Discrete Gaussian with parameter σ on integer sensitivity `s`.
    DiscreteGaussian { sigma: f64, sensitivity: u64 },
}

impl Leaf {
    /// Whether the add-one and remove-one PLDs coincide (all but the subsampled Gaussian).
    pub(crate) fn symmetric(&self) -> bool {
        !matches!(self, Leaf::Gaussian(g) if g.q < 1.0)
    }

    /// A loss value the grid should hit exactly, when the PLD has an atom there.
    pub(crate) fn anchor(&self) -> Option<f64> {
        let a = match *self {
            Leaf::Laplace { b } => 1.0 / b,
            Leaf::RandomizedResponse { epsilon, .. } | Leaf::EpsilonDelta { epsilon, .. } => {
                epsilon
            }
            Leaf::DiscreteLaplace { scale, .. } => 1.0 / scale,
            _ => return None,
        };
        (a > 0.0 && a.is_finite()).then_some(a)
    }

    /// Smallest and largest finite loss in the cells (remove direction).
    pub(crate) fn span(&self) -> (f64, f64) {
        match *self {
            Leaf::Gaussian(g) => g.span(),
            Leaf::Laplace { b } => (-1.0 / b, 1.0 / b),
            Leaf::RandomizedResponse { epsilon, .. } | Leaf::EpsilonDelta { epsilon, .. } => {
                (-epsilon, epsilon)
            }
            Leaf::DiscreteLaplace { scale, sensitivity } => {
                let m = sensitivity as f64 / scale;
                (-m, m)
            }
            Leaf::DiscreteGaussian { sigma, sensitivity } => {
                let s = sensitivity as f64;
                let reach = s * (11.0 * sigma + s + 2.0) / (sigma * sigma);
                (-reach, reach)
            }
        }
    }

    /// Exact (P, Q) masses per loss cell of width `h`, remove direction.
    ///
    /// # Errors
    /// [`AccountingError::Unsupported`] when the support is too large to enumerate or the
    /// parameters are so extreme that the masses cannot be computed in floating point.
    pub(crate) fn cells(&self, h: f64) -> Result<Cells, AccountingError> {
        let cells = self.raw_cells(h)?;
        let finite = |x: &f64| x.is_finite() && *x >= 0.0;
        let tails = [
            cells.inf_p,
            cells.neg_inf_q,
            cells.above.0,
            cells.above.1,
            cells.below.0,
            cells.below.1,
        ];
        if cells.p.iter().chain(&cells.q).chain(&tails).all(finite) {
            Ok(cells)
        } else {
            Err(AccountingError::Unsupported(format!(
                "{self:?} is too extreme: its privacy-loss masses are not finite in floating point"
            )))
        }
    }

    fn raw_cells(&self, h: f64) -> Result<Cells, AccountingError> {
        Ok(match *self {
            Leaf::Gaussian(g) => g.cells(h),
            Leaf::Laplace { b } => discrete::laplace(b, h),
            Leaf::RandomizedResponse {
                epsilon,
                categories,
            } => discrete::randomized_response(epsilon, categories, h),
            Leaf::EpsilonDelta { epsilon, delta } => discrete::epsilon_delta(epsilon, delta, h),
            Leaf::DiscreteLaplace { scale, sensitivity } => {
                discrete::discrete_laplace(scale, sensitivity, h)?
            }
            Leaf::DiscreteGaussian { sigma, sensitivity } => {
                discrete::discrete_gaussian(sigma, sensitivity, h)?
            }
        })
    }
}

fn invalid(msg: String) -> AccountingError {
    AccountingError::InvalidParameter(msg)
}

/// A positive, finite parameter whose reciprocal square is also finite.
fn positive(name: &str, v: f64) -> Result<f64, AccountingError> {
    if !(v.is_finite() && v > 0.0) {
        Err(invalid(format!("{name} must be finite and > 0, got {v}")))
    } else if (v * v).is_infinite() {
        Err(invalid(format!(
            "{name} {v} is too large to account for ({name}² overflows; beyond 1e150 the noise \
             hides everything)"
        )))
    } else if !(1.0 / (v * v)).is_finite() {
        Err(invalid(format!(
            "{name} {v} is too small to account for (1/{name}² overflows)"
        )))
    } else {
        Ok(v)
    }
}

fn non_negative(name: &str, v: f64) -> Result<f64, AccountingError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(invalid(format!("{name} must be finite and >= 0, got {v}")))
    }
}

/// Leaves with their total repetition counts, equal leaves merged.
#[derive(Debug, Default)]
pub(crate) struct Flat {
    /// Distinct leaves and how often each is applied.
    pub(crate) leaves: Vec<(Leaf, u64)>,
    /// Σ count/σ² over plain Gaussian leaves.
    gaussian_precision: f64,
}

impl Flat {
    /// Flattens `event`, validating every parameter.
    ///
    /// # Errors
    /// [`AccountingError::InvalidParameter`] naming the bad value;
    /// [`AccountingError::Unsupported`] for Poisson sampling of anything but Gaussian noise.
    pub(crate) fn from_event(event: &PrivacyEvent) -> Result<Flat, AccountingError> {
        let mut flat = Flat::default();
        flat.push(event, 1)?;
        if flat.gaussian_precision > 0.0 {
            let sigma = positive(
                "effective Gaussian noise_multiplier",
                flat.gaussian_precision.sqrt().recip(),
            )?;
            flat.add(Leaf::Gaussian(SampledGaussian { q: 1.0, sigma }), 1)?;
        }
        Ok(flat)
    }

    fn add(&mut self, leaf: Leaf, count: u64) -> Result<(), AccountingError> {
        if let Some((_, c)) = self.leaves.iter_mut().find(|(l, _)| *l == leaf) {
            *c = c
                .checked_add(count)
                .ok_or_else(|| invalid(format!("total count overflows u64 for {leaf:?}")))?;
        } else {
            self.leaves.push((leaf, count));
        }
        Ok(())
    }

    fn push(&mut self, event: &PrivacyEvent, count: u64) -> Result<(), AccountingError> {
        match event {
            PrivacyEvent::Gaussian { noise_multiplier } => {
                let s = positive("noise_multiplier", *noise_multiplier)?;
                self.gaussian_precision += count as f64 / (s * s);
                if !self.gaussian_precision.is_finite() {
                    return Err(invalid(format!(
                        "Gaussian noise too small in total (noise_multiplier {s})"
                    )));
                }
            }
            PrivacyEvent::Laplace { noise_multiplier } => {
                let b = positive("noise_multiplier", *noise_multiplier)?;
                self.add(Leaf::Laplace { b }, count)?;
            }
            PrivacyEvent::RandomizedResponse {
                epsilon,
                categories,
            } => {
                let epsilon = non_negative("epsilon", *epsilon)?;
                if *categories < 2 {
                    return Err(invalid(format!(
                        "categories must be >= 2, got {categories}"
                    )));
                }
                self.add(
                    Leaf::RandomizedResponse {
                        epsilon,
                        categories: *categories,
                    },
                    count,
                )?;
            }
            PrivacyEvent::EpsilonDelta { epsilon, delta } => {
                let epsilon = non_negative("epsilon", *epsilon)?;
                if !(0.0..1.0).contains(delta) {
                    return Err(invalid(format!("delta must be in [0, 1), got {delta}")));
                }
                self.add(
                    Leaf::EpsilonDelta {
                        epsilon,
                        delta: *delta,
                    },
                    count,
                )?;
            }
            PrivacyEvent::DiscreteLaplace { scale, sensitivity } => {
                let scale = positive("scale", *scale)?;
                if *sensitivity > 0 {
                    self.add(
                        Leaf::DiscreteLaplace {
                            scale,
                            sensitivity: *sensitivity,
                        },
                        count,
                    )?;
                }
            }
            PrivacyEvent::DiscreteGaussian { sigma, sensitivity } => {
                let sigma = positive("sigma", *sigma)?;
                if *sensitivity > 0 {
                    self.add(
                        Leaf::DiscreteGaussian {
                            sigma,
                            sensitivity: *sensitivity,
                        },
                        count,
                    )?;
                }
            }
            PrivacyEvent::PoissonSampled {
                sampling_rate,
                event,
            } => {
                let q = *sampling_rate;
                if !(q > 0.0 && q <= 1.0) {
                    return Err(invalid(format!("sampling_rate must be in (0, 1], got {q}")));
                }
                let sigma = gaussian_only(event)?;
                if q == 1.0 {
                    self.gaussian_precision += count as f64 / (sigma * sigma);
                } else {
                    self.add(Leaf::Gaussian(SampledGaussian { q, sigma }), count)?;
                }
            }
            PrivacyEvent::SelfComposed {
                event,
                count: inner,
            } => {
                if *inner == 0 {
                    return Err(invalid("count must be >= 1, got 0".to_string()));
                }
                let total = count.checked_mul(*inner).ok_or_else(|| {
                    invalid(format!("total count {count} × {inner} overflows u64"))
                })?;
                self.push(event, total)?;
            }
            PrivacyEvent::Composed { events } => {
                for e in events {
                    self.push(e, count)?;
                }
            }
            PrivacyEvent::RepeatAndSelect { .. } => {
                return Err(AccountingError::Unsupported(
                    "the PLD accountant has no bound for repeat_and_select (a private \
                     hyperparameter search); Papernot & Steinke's theorems are RDP bounds: use \
                     the RDP accountant"
                        .into(),
                ));
            }
            PrivacyEvent::RepeatAndReleaseAll { .. } => {
                return Err(AccountingError::Unsupported(
                    "the PLD accountant has no bound for repeat_and_release_all (every trial of \
                     a private hyperparameter search released); its bound is an RDP one: use \
                     the RDP accountant"
                        .into(),
                ));
            }
            PrivacyEvent::WorstOf { .. } => {
                return Err(AccountingError::Unsupported(
                    "the PLD accountant does not take worst_of events (the worst of several \
                     mechanisms); use the RDP accountant"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

/// The single Gaussian σ equivalent to an event made only of Gaussian noise (for Poisson sampling).
fn gaussian_only(event: &PrivacyEvent) -> Result<f64, AccountingError> {
    let mut inner = Flat::default();
    let only_gaussian = {
        fn check(e: &PrivacyEvent) -> bool {
            match e {
                PrivacyEvent::Gaussian { .. } => true,
                PrivacyEvent::SelfComposed { event, .. } => check(event),
                PrivacyEvent::Composed { events } => !events.is_empty() && events.iter().all(check),
                _ => false,
            }
        }
        check(event)
    };
    if !only_gaussian {
        return Err(AccountingError::Unsupported(format!(
            "the PLD accountant handles Poisson sampling of Gaussian noise only, got a {} event that is not (a composition of) Gaussian noise",
            event.kind()
        )));
    }
    inner.push(event, 1)?;
    positive(
        "effective Gaussian noise_multiplier",
        inner.gaussian_precision.sqrt().recip(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaussians_merge_exactly_and_counts_multiply() {
        let e = PrivacyEvent::Composed {
            events: vec![
                PrivacyEvent::Gaussian {
                    noise_multiplier: 2.0,
                }
                .repeated(4),
                PrivacyEvent::Laplace {
                    noise_multiplier: 1.0,
                }
                .repeated(3)
                .repeated(2),
                PrivacyEvent::Laplace {
                    noise_multiplier: 1.0,
                },
            ],
        };
        let flat = Flat::from_event(&e).unwrap();
        assert_eq!(flat.leaves.len(), 2);
        assert_eq!(flat.leaves[0], (Leaf::Laplace { b: 1.0 }, 7));
        // Four releases with σ = 2 are one release with σ = 1.
        assert_eq!(
            flat.leaves[1],
            (Leaf::Gaussian(SampledGaussian { q: 1.0, sigma: 1.0 }), 1)
        );
    }

    #[test]
    fn a_noise_multiplier_out_of_f64s_reach_is_named() {
        for (sigma, words) in [(1e300, "too large"), (1e-300, "too small")] {
            let e = PrivacyEvent::Gaussian {
                noise_multiplier: sigma,
            }
            .poisson_sampled(0.01);
            let err = Flat::from_event(&e).unwrap_err().to_string();
            assert!(
                err.contains("noise_multiplier") && err.contains(words) && !err.contains("inf"),
                "{err}"
            );
        }
    }

    #[test]
    fn sampled_compositions_of_gaussians_are_one_sampled_gaussian() {
        let inner = PrivacyEvent::Gaussian {
            noise_multiplier: 2.0,
        }
        .repeated(4);
        let flat = Flat::from_event(&inner.poisson_sampled(0.1).repeated(10)).unwrap();
        assert_eq!(
            flat.leaves,
            vec![(Leaf::Gaussian(SampledGaussian { q: 0.1, sigma: 1.0 }), 10)]
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        let cases: Vec<(PrivacyEvent, &str)> = vec![
            (
                PrivacyEvent::Gaussian {
                    noise_multiplier: 0.0,
                },
                "got 0",
            ),
            (
                PrivacyEvent::Gaussian {
                    noise_multiplier: f64::NAN,
                },
                "got NaN",
            ),
            (
                PrivacyEvent::dp_sgd(1.0, 1.5, 10),
                "sampling_rate must be in (0, 1], got 1.5",
            ),
            (PrivacyEvent::dp_sgd(1.0, 0.0, 10), "got 0"),
            (
                PrivacyEvent::dp_sgd(1.0, 0.01, 0),
                "count must be >= 1, got 0",
            ),
            (
                PrivacyEvent::Laplace {
                    noise_multiplier: -1.0,
                },
                "got -1",
            ),
            (
                PrivacyEvent::RandomizedResponse {
                    epsilon: 1.0,
                    categories: 1,
                },
                "got 1",
            ),
            (
                PrivacyEvent::EpsilonDelta {
                    epsilon: 1.0,
                    delta: 1.0,
                },
                "delta must be in [0, 1), got 1",
            ),
        ];
        for (e, needle) in cases {
            match Flat::from_event(&e) {
                Err(AccountingError::InvalidParameter(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("{e:?}: expected InvalidParameter, got {other:?}"),
            }
        }
        let sampled_laplace = PrivacyEvent::Laplace {
            noise_multiplier: 1.0,
        }
        .poisson_sampled(0.1);
        assert!(matches!(
            Flat::from_event(&sampled_laplace),
            Err(AccountingError::Unsupported(_))
        ));
    }
}
