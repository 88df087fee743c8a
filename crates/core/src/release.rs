//! Releasing a number with calibrated noise. Every draw is a separate release of the same
//! value, so N draws cost N times the per-release ε (reported as `epsilon_total`).

use dpml_mechanisms::{
    Calibration, DiscreteGaussianMechanism, DiscreteLaplaceMechanism, DpRng, GaussianMechanism,
    LaplaceMechanism, PrivacyEvent,
};
use serde_json::{Map, Value, json};

use crate::budget::{self, Charge, Ledger};
use crate::error::{Error, Result};
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};

/// The noise mechanism to release with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// Laplace noise, scale Δ₁/ε (ε-DP), sampled exactly on a fine grid.
    Laplace,
    /// Gaussian noise for (ε, δ)-DP, sampled exactly on a fine grid.
    Gaussian,
    /// Discrete Laplace on integers (ε-DP).
    DiscreteLaplace,
    /// Discrete Gaussian on integers ((ε, δ)-DP).
    DiscreteGaussian,
}

impl Mechanism {
    /// The mechanism's name as `dpml release --mechanism` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Laplace => "laplace",
            Mechanism::Gaussian => "gaussian",
            Mechanism::DiscreteLaplace => "discrete-laplace",
            Mechanism::DiscreteGaussian => "discrete-gaussian",
        }
    }
}

/// What to release.
#[derive(Debug, Clone, Copy)]
pub struct ReleaseOptions {
    /// The noise mechanism.
    pub mechanism: Mechanism,
    /// The true value.
    pub value: f64,
    /// Its sensitivity (L1 for Laplace, L2 for Gaussian).
    pub sensitivity: f64,
    /// ε of one release.
    pub epsilon: f64,
    /// δ of one release (Gaussian mechanisms only).
    pub delta: Option<f64>,
    /// Number of independent releases.
    pub count: u64,
    /// How the Gaussian σ is derived from (ε, δ).
    pub calibration: Calibration,
}

/// Upper limit on `--count`, so a typo cannot fill the memory.
const MAX_COUNT: u64 = 10_000_000;

/// Releases `a.value` `a.count` times with `a.mechanism`'s noise drawn from `rng`: the noisy
/// values, each release's ε and δ, their totals and the composed privacy event; with a
/// `ledger`, the total is checked before any noise is drawn and recorded before the values are
/// returned.
///
/// # Errors
/// Usage errors naming the bad parameter: too many releases, δ missing from (or given to) a
/// mechanism, a discrete mechanism on a value or sensitivity that is not an integer.
pub fn release(a: &ReleaseOptions, rng: &mut DpRng, ledger: Option<&Ledger>) -> Result<Value> {
    if a.count > MAX_COUNT {
        return Err(Error::usage(format!(
            "--count {} exceeds the limit {MAX_COUNT}",
            a.count
        )));
    }
    let needs_delta = matches!(
        a.mechanism,
        Mechanism::Gaussian | Mechanism::DiscreteGaussian
    );
    let delta = match (needs_delta, a.delta) {
        (true, Some(d)) => d,
        (true, None) => {
            return Err(Error::usage("--delta is required for Gaussian mechanisms"));
        }
        (false, Some(d)) => {
            return Err(Error::usage(format!(
                "--delta {d} given, but {:?} is pure epsilon-DP",
                a.mechanism
            )));
        }
        (false, None) => 0.0,
    };
    let planned = PrivacyEvent::EpsilonDelta {
        epsilon: a.epsilon,
        delta,
    }
    .repeated(a.count);
    let total = |x: f64| x * a.count as f64;
    budget::check(
        ledger,
        &Charge::of(
            "release",
            "--value",
            planned,
            total(a.epsilon),
            total(delta),
        ),
    )?;
    let n = a.count as usize;
    let mut fields = Map::new();
    // Integer-valued mechanisms release integers, and their values are printed as such.
    let (values, event): (Value, PrivacyEvent) = match a.mechanism {
        Mechanism::Laplace => {
            let m = LaplaceMechanism::new(a.sensitivity, a.epsilon)?;
            fields.insert("scale".into(), json!(m.scale()));
            fields.insert("granularity".into(), json!(m.granularity()));
            let values: Vec<f64> = (0..n)
                .map(|_| m.release(rng, a.value))
                .collect::<std::result::Result<_, _>>()?;
            (json!(values), m.event())
        }
        Mechanism::Gaussian => {
            let m = GaussianMechanism::new(a.sensitivity, a.epsilon, delta, a.calibration)?;
            fields.insert("sigma".into(), json!(m.sigma()));
            fields.insert("granularity".into(), json!(m.granularity()));
            let values: Vec<f64> = (0..n)
                .map(|_| m.release(rng, a.value))
                .collect::<std::result::Result<_, _>>()?;
            (json!(values), m.event())
        }
        Mechanism::DiscreteLaplace => {
            let (x, s) = integers(a.value, a.sensitivity)?;
            let m = DiscreteLaplaceMechanism::new(s, a.epsilon)?;
            fields.insert("scale".into(), json!(m.scale()));
            let values: Vec<i64> = (0..n).map(|_| m.release(rng, x)).collect();
            (json!(values), m.event())
        }
        Mechanism::DiscreteGaussian => {
            let (x, s) = integers(a.value, a.sensitivity)?;
            let m = DiscreteGaussianMechanism::new(s, a.epsilon, delta)?;
            fields.insert("sigma".into(), json!(m.sigma()));
            let values: Vec<i64> = (0..n).map(|_| m.release(rng, x)).collect();
            (json!(values), m.event())
        }
    };
    let charge = Charge::of(
        "release",
        "--value",
        event.clone().repeated(a.count),
        total(a.epsilon),
        total(delta),
    )
    .labelled(format!("{} × {}", a.count, a.mechanism.name()));
    let balance = budget::charge(ledger, &charge)?;
    let mut obj = Map::new();
    obj.insert("values".into(), values);
    obj.insert("mechanism".into(), json!(a.mechanism.name()));
    obj.insert("epsilon".into(), json!(a.epsilon));
    obj.insert("delta".into(), json!(delta));
    obj.extend(fields);
    obj.insert("count".into(), json!(a.count));
    obj.insert("epsilon_total".into(), json!(a.epsilon * a.count as f64));
    obj.insert("delta_total".into(), json!(delta * a.count as f64));
    obj.insert("event".into(), json!(event.repeated(a.count)));
    obj.insert("seeded".into(), json!(rng.is_seeded()));
    if let Some(b) = balance {
        obj.insert("ledger".into(), crate::ledger_json::balance(&b));
    }
    let model = PrivacyModel::new(neighbouring::VALUE, &[public::SENSITIVITY]);
    Ok(Release::from_map(obj, &model).into_value())
}

/// Discrete mechanisms need an integer value and an integer sensitivity, each below 9e15 in
/// magnitude (where every integer is exactly an f64).
fn integers(value: f64, sensitivity: f64) -> Result<(i64, u64)> {
    let whole = |v: f64| v.fract() == 0.0 && v.abs() < 9.0e15;
    if !whole(value) {
        return Err(Error::usage(format!(
            "--value {value} must be an integer below 9e15 in magnitude for a discrete mechanism"
        )));
    }
    if !whole(sensitivity) {
        return Err(Error::usage(format!(
            "--sensitivity {sensitivity} must be an integer below 9e15 for a discrete mechanism"
        )));
    }
    Ok((value as i64, sensitivity as u64))
}
