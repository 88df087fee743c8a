//! Decomposition of a [`PrivacyEvent`] into an RDP curve plus a basic-composition (ε, δ) part.
//!
//! RDP composes by adding curves. Events that only have an (ε, δ) guarantee with δ > 0 have no
//! RDP curve; they are summed separately (basic composition) and combined at conversion time as
//! ε = ε_rdp(δ − Σδᵢ) + Σεᵢ. Pure ε-DP events can go either way ([`PureAs`]); the accountant
//! tries both and keeps the smaller ε.

use dpml_mechanisms::TrialRelease;

use crate::{AccountingError, PrivacyEvent};

use super::{check, curves, sampled_gaussian};

/// Where pure ε-DP events (Laplace, randomized response, discrete Laplace, (ε, 0)) go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PureAs {
    /// Into the RDP curve (best when many are composed).
    Rdp,
    /// Into the basic-composition sum as (ε, 0) (best for a few).
    Epsilon,
}

/// The privacy cost of an event: an RDP curve (one value per order) plus (ε, δ) terms composed
/// by basic composition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cost {
    /// RDP at each order.
    pub rdp: Vec<f64>,
    /// Σεᵢ of the basic-composition part.
    pub epsilon: f64,
    /// Σδᵢ of the basic-composition part.
    pub delta: f64,
    /// Whether some pure ε-DP event was placed according to [`PureAs`].
    pub has_pure: bool,
}

impl Cost {
    fn zero(orders: usize) -> Self {
        Cost {
            rdp: vec![0.0; orders],
            epsilon: 0.0,
            delta: 0.0,
            has_pure: false,
        }
    }

    fn curve(orders: &[f64], f: impl Fn(f64) -> f64) -> Self {
        Cost {
            rdp: orders.iter().map(|&a| f(a)).collect(),
            ..Cost::zero(0)
        }
    }

    fn curve_values(rdp: Vec<f64>) -> Self {
        Cost {
            rdp,
            ..Cost::zero(0)
        }
    }

    fn approximate(orders: usize, epsilon: f64, delta: f64) -> Self {
        Cost {
            epsilon,
            delta,
            ..Cost::zero(orders)
        }
    }

    /// A pure ε-DP event whose exact RDP curve is `exact`, placed according to `mode`.
    fn pure(orders: &[f64], epsilon: f64, mode: PureAs, exact: impl Fn(f64) -> f64) -> Self {
        let cost = match mode {
            PureAs::Rdp => Cost::curve(orders, exact),
            PureAs::Epsilon => Cost::approximate(orders.len(), epsilon, 0.0),
        };
        Cost {
            has_pure: true,
            ..cost
        }
    }

    fn add(&mut self, other: &Cost) {
        for (a, b) in self.rdp.iter_mut().zip(&other.rdp) {
            *a += b;
        }
        self.epsilon += other.epsilon;
        self.delta += other.delta;
        self.has_pure |= other.has_pure;
    }

    /// The pointwise larger of two costs: a bound for either.
    fn worst(mut self, other: &Cost) -> Self {
        for (a, b) in self.rdp.iter_mut().zip(&other.rdp) {
            *a = a.max(*b);
        }
        self.epsilon = self.epsilon.max(other.epsilon);
        self.delta = self.delta.max(other.delta);
        self.has_pure |= other.has_pure;
        self
    }

    fn times(mut self, count: u64) -> Self {
        let n = count as f64;
        self.rdp.iter_mut().for_each(|r| *r *= n);
        self.epsilon *= n;
        self.delta *= n;
        self
    }

    /// Whether the RDP part is identically zero.
    pub fn rdp_is_zero(&self) -> bool {
        self.rdp.iter().all(|&r| r == 0.0)
    }
}

/// The cost of `event` at `orders`.
pub(crate) fn cost(
    event: &PrivacyEvent,
    orders: &[f64],
    mode: PureAs,
) -> Result<Cost, AccountingError> {
    Ok(match event {
        PrivacyEvent::Gaussian { noise_multiplier } => {
            let sigma = check::positive("noise_multiplier of a gaussian event", *noise_multiplier)?;
            Cost::curve(orders, |a| curves::gaussian(sigma, a))
        }
        PrivacyEvent::DiscreteGaussian { sigma, sensitivity } => {
            let sigma = check::positive("sigma of a discrete_gaussian event", *sigma)?;
            let sens = *sensitivity as f64;
            Cost::curve(orders, |a| curves::discrete_gaussian(sigma, sens, a))
        }
        PrivacyEvent::Laplace { noise_multiplier } => {
            let eps =
                1.0 / check::positive("noise_multiplier of a laplace event", *noise_multiplier)?;
            Cost::pure(orders, eps, mode, |a| curves::laplace(eps, a))
        }
        PrivacyEvent::RandomizedResponse {
            epsilon,
            categories,
        } => {
            let (eps, k) = randomized_response(*epsilon, *categories)?;
            Cost::pure(orders, eps, mode, |a| {
                curves::randomized_response(eps, k, a)
            })
        }
        PrivacyEvent::DiscreteLaplace { scale, sensitivity } => {
            let t = check::positive("scale of a discrete_laplace event", *scale)?;
            let sens = *sensitivity as f64;
            Cost::pure(orders, sens / t, mode, |a| {
                curves::discrete_laplace(t, sens, a)
            })
        }
        PrivacyEvent::EpsilonDelta { epsilon, delta } => {
            let (eps, delta) = epsilon_delta(*epsilon, *delta)?;
            if delta == 0.0 {
                Cost::pure(orders, eps, mode, |a| curves::pure(eps, a))
            } else {
                Cost::approximate(orders.len(), eps, delta)
            }
        }
        PrivacyEvent::PoissonSampled {
            sampling_rate,
            event,
        } => poisson_sampled(*sampling_rate, event, orders, mode)?,
        PrivacyEvent::SelfComposed { event, count } => {
            let n = check::count("count of a self_composed event", *count)?;
            cost(event, orders, mode)?.times(n)
        }
        PrivacyEvent::Composed { events } => {
            let mut total = Cost::zero(orders.len());
            for e in events {
                total.add(&cost(e, orders, mode)?);
            }
            total
        }
        PrivacyEvent::WorstOf { events } => {
            // A data-independent pick among mechanisms: exp((α−1)D_α) of the mixture is at
            // most the weighted mean of its parts' (joint convexity), so below the worst; the
            // (ε, δ) parts likewise (the hockey-stick divergence is jointly convex). Mechanisms
            // on disjoint, per-record parts of the data: a neighbouring pair differs in one
            // part, where one mechanism's bound holds and the others' outputs are identical.
            let mut worst: Option<Cost> = None;
            for e in events {
                let c = cost(e, orders, mode)?;
                worst = Some(match worst {
                    None => c,
                    Some(w) => w.worst(&c),
                });
            }
            worst.ok_or_else(|| {
                AccountingError::InvalidParameter(
                    "a worst_of event needs at least one event".into(),
                )
            })?
        }
        PrivacyEvent::RepeatAndSelect { repetitions, event } => {
            Cost::curve_values(super::repeat::repeated(
                orders,
                &run_curve("repeat_and_select", event, orders)?,
                repetitions,
                TrialRelease::Best,
            )?)
        }
        PrivacyEvent::RepeatAndReleaseAll { repetitions, event } => {
            Cost::curve_values(super::repeat::repeated(
                orders,
                &run_curve("repeat_and_release_all", event, orders)?,
                repetitions,
                TrialRelease::Every,
            )?)
        }
    })
}

/// The RDP curve of the run a search (of type `search`) repeats: the bounds over the random number of
/// runs take a curve, so the run's pure parts go into it, and (ε, δ) parts with δ > 0 (which
/// have none) are refused.
fn run_curve(
    search: &str,
    run: &PrivacyEvent,
    orders: &[f64],
) -> Result<Vec<f64>, AccountingError> {
    let c = cost(run, orders, PureAs::Rdp)?;
    if c.delta > 0.0 || c.epsilon > 0.0 {
        return Err(AccountingError::Unsupported(format!(
            "{} needs a run with an RDP curve; its {} event has (ε, δ) parts with δ > 0, \
             which have none",
            search,
            run.kind()
        )));
    }
    Ok(c.rdp)
}

fn poisson_sampled(
    rate: f64,
    inner: &PrivacyEvent,
    orders: &[f64],
    mode: PureAs,
) -> Result<Cost, AccountingError> {
    // Poisson sampling with rate q₂ inside one with rate q₁ is Poisson sampling with q₁q₂.
    let mut q = check::sampling_rate(rate)?;
    let mut inner = inner;
    while let PrivacyEvent::PoissonSampled {
        sampling_rate,
        event,
    } = inner
    {
        q *= check::sampling_rate(*sampling_rate)?;
        inner = event;
    }
    if let Some(precision) = gaussian_precision(inner)? {
        if precision == 0.0 {
            return Ok(Cost::zero(orders.len()));
        }
        let sigma = precision.sqrt().recip();
        return Ok(Cost::curve(orders, |a| sampled_gaussian::rdp(q, sigma, a)));
    }
    match dp_guarantee(inner)? {
        Some((eps, delta)) => {
            let amplified = amplify(q, eps);
            Ok(if delta == 0.0 {
                Cost::pure(orders, amplified, mode, |a| curves::pure(amplified, a))
            } else {
                Cost::approximate(orders.len(), amplified, q * delta)
            })
        }
        None => Err(AccountingError::Unsupported(format!(
            "the RDP accountant handles poisson_sampled only around a gaussian event (or a \
             composition of gaussians) or around pure/approximate (ε, δ) events; got \
             poisson_sampled({})",
            inner.kind()
        ))),
    }
}

/// Privacy amplification by Poisson subsampling under add/remove: an (ε, δ)-DP mechanism run
/// on a q-subsample is (ln(1 + q(e^ε − 1)), qδ)-DP (Li, Qardaji, Su 2012; Balle, Barthe,
/// Gaboardi 2018). Computed so that large ε does not overflow.
fn amplify(q: f64, eps: f64) -> f64 {
    if eps <= 1.0 {
        (q * eps.exp_m1()).ln_1p()
    } else {
        eps + (q + (1.0 - q) * (-eps).exp()).ln()
    }
}

/// Total precision Σ 1/σᵢ² if `event` is a Gaussian or a (self-)composition of Gaussians, which
/// on the same (sub)sample act as one Gaussian query with σ = (Σ 1/σᵢ²)^{−1/2}: the vector of
/// queries scaled by 1/σᵢ has L2 sensitivity (Σ 1/σᵢ²)^{1/2} (as dp_accounting's
/// `_effective_gaussian_noise_multiplier` does, citing arXiv:1812.06210, §3); `None` otherwise.
fn gaussian_precision(event: &PrivacyEvent) -> Result<Option<f64>, AccountingError> {
    Ok(match event {
        PrivacyEvent::Gaussian { noise_multiplier } => {
            let s = check::positive("noise_multiplier of a gaussian event", *noise_multiplier)?;
            Some(1.0 / (s * s))
        }
        PrivacyEvent::SelfComposed { event, count } => {
            let n = check::count("count of a self_composed event", *count)?;
            gaussian_precision(event)?.map(|p| p * n as f64)
        }
        PrivacyEvent::Composed { events } => {
            let mut total = 0.0;
            for e in events {
                match gaussian_precision(e)? {
                    Some(p) => total += p,
                    None => return Ok(None),
                }
            }
            Some(total)
        }
        _ => None,
    })
}

/// The (ε, δ) guarantee of `event` by basic composition, if it has one without Gaussians.
pub(crate) fn dp_guarantee(event: &PrivacyEvent) -> Result<Option<(f64, f64)>, AccountingError> {
    Ok(match event {
        PrivacyEvent::Laplace { noise_multiplier } => Some((
            1.0 / check::positive("noise_multiplier of a laplace event", *noise_multiplier)?,
            0.0,
        )),
        PrivacyEvent::RandomizedResponse {
            epsilon,
            categories,
        } => Some((randomized_response(*epsilon, *categories)?.0, 0.0)),
        PrivacyEvent::DiscreteLaplace { scale, sensitivity } => {
            let t = check::positive("scale of a discrete_laplace event", *scale)?;
            Some((*sensitivity as f64 / t, 0.0))
        }
        PrivacyEvent::EpsilonDelta { epsilon, delta } => Some(epsilon_delta(*epsilon, *delta)?),
        PrivacyEvent::PoissonSampled {
            sampling_rate,
            event,
        } => {
            let q = check::sampling_rate(*sampling_rate)?;
            dp_guarantee(event)?.map(|(e, d)| (amplify(q, e), q * d))
        }
        PrivacyEvent::SelfComposed { event, count } => {
            let n = check::count("count of a self_composed event", *count)? as f64;
            dp_guarantee(event)?.map(|(e, d)| (e * n, d * n))
        }
        PrivacyEvent::Composed { events } => {
            let (mut eps, mut delta) = (0.0, 0.0);
            for e in events {
                match dp_guarantee(e)? {
                    Some((a, b)) => {
                        eps += a;
                        delta += b;
                    }
                    None => return Ok(None),
                }
            }
            Some((eps, delta))
        }
        PrivacyEvent::WorstOf { events } => {
            let (mut eps, mut delta) = (0.0f64, 0.0f64);
            for e in events {
                match dp_guarantee(e)? {
                    Some((a, b)) => {
                        eps = eps.max(a);
                        delta = delta.max(b);
                    }
                    None => return Ok(None),
                }
            }
            Some((eps, delta))
        }
        PrivacyEvent::Gaussian { .. }
        | PrivacyEvent::DiscreteGaussian { .. }
        | PrivacyEvent::RepeatAndSelect { .. }
        | PrivacyEvent::RepeatAndReleaseAll { .. } => None,
    })
}

fn randomized_response(epsilon: f64, categories: u32) -> Result<(f64, f64), AccountingError> {
    let eps = check::non_negative("epsilon of a randomized_response event", epsilon)?;
    if categories < 2 {
        return Err(AccountingError::InvalidParameter(format!(
            "categories of a randomized_response event must be >= 2, got {categories}"
        )));
    }
    Ok((eps, f64::from(categories)))
}

fn epsilon_delta(epsilon: f64, delta: f64) -> Result<(f64, f64), AccountingError> {
    let eps = check::non_negative("epsilon of an epsilon_delta event", epsilon)?;
    if !(0.0..1.0).contains(&delta) {
        return Err(AccountingError::InvalidParameter(format!(
            "delta of an epsilon_delta event must be in [0, 1), got {delta}"
        )));
    }
    Ok((eps, delta))
}
