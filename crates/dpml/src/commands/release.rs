//! `dpml release`: release a number with calibrated noise. Every draw is a separate release of
//! the same value, so `--count N` costs N times the per-release ε (reported as
//! `epsilon_total`).

use clap::{Args, ValueEnum};
use dpml_mechanisms::{
    Calibration, DiscreteGaussianMechanism, DiscreteLaplaceMechanism, GaussianMechanism,
    LaplaceMechanism, PrivacyEvent,
};
use serde_json::{Map, json};

use crate::args::{self, SeedArg};
use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::privacy_model::{PrivacyModel, Release, neighbouring, public};

/// The noise mechanism to release with.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MechanismArg {
    /// Laplace noise, scale Δ₁/ε (ε-DP), sampled exactly on a fine grid.
    Laplace,
    /// Gaussian noise for (ε, δ)-DP, sampled exactly on a fine grid.
    Gaussian,
    /// Discrete Laplace on integers (ε-DP).
    DiscreteLaplace,
    /// Discrete Gaussian on integers ((ε, δ)-DP).
    DiscreteGaussian,
}

/// How σ of the Gaussian mechanism is derived from (ε, δ).
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum CalibrationArg {
    /// Balle & Wang 2018: the smallest σ, any ε.
    Analytic,
    /// σ = Δ₂·√(2 ln(1.25/δ))/ε, valid for ε < 1 only.
    Classic,
}

/// Flags of `dpml release`.
#[derive(Args, Debug)]
pub struct ReleaseArgs {
    /// Noise mechanism.
    #[arg(long, value_enum)]
    pub mechanism: MechanismArg,
    /// The true value to release.
    #[arg(long, value_parser = args::finite, allow_hyphen_values = true)]
    pub value: f64,
    /// Sensitivity of the value (L1 for Laplace, L2 for Gaussian).
    #[arg(long, value_parser = args::positive)]
    pub sensitivity: f64,
    /// ε of one release.
    #[arg(long, value_parser = args::positive)]
    pub epsilon: f64,
    /// δ of one release (Gaussian mechanisms).
    #[arg(long, value_parser = args::open_unit)]
    pub delta: Option<f64>,
    /// Number of independent releases of the value.
    #[arg(long, value_parser = args::at_least_one, default_value = "1")]
    pub count: u64,
    /// Gaussian calibration.
    #[arg(long, value_enum, default_value = "analytic")]
    pub calibration: CalibrationArg,
    #[command(flatten)]
    pub seed: SeedArg,
}

/// Upper limit on `--count`, so a typo cannot fill the memory.
const MAX_COUNT: u64 = 10_000_000;

/// Run `dpml release`.
pub fn run(a: &ReleaseArgs, out: Output) -> CliResult<()> {
    if a.count > MAX_COUNT {
        return Err(CliError::usage(format!(
            "--count {} exceeds the limit {MAX_COUNT}",
            a.count
        )));
    }
    let needs_delta = matches!(
        a.mechanism,
        MechanismArg::Gaussian | MechanismArg::DiscreteGaussian
    );
    let delta = match (needs_delta, a.delta) {
        (true, Some(d)) => d,
        (true, None) => {
            return Err(CliError::usage(
                "--delta is required for Gaussian mechanisms",
            ));
        }
        (false, Some(d)) => {
            return Err(CliError::usage(format!(
                "--delta {d} given, but {:?} is pure epsilon-DP",
                a.mechanism
            )));
        }
        (false, None) => 0.0,
    };
    let mut rng = a.seed.rng()?;
    let n = a.count as usize;
    let mut fields = Map::new();
    let (values, event): (Vec<f64>, PrivacyEvent) = match a.mechanism {
        MechanismArg::Laplace => {
            let m = LaplaceMechanism::new(a.sensitivity, a.epsilon)?;
            fields.insert("scale".into(), json!(m.scale()));
            fields.insert("granularity".into(), json!(m.granularity()));
            (
                (0..n)
                    .map(|_| m.release(&mut rng, a.value))
                    .collect::<Result<_, _>>()?,
                m.event(),
            )
        }
        MechanismArg::Gaussian => {
            let cal = match a.calibration {
                CalibrationArg::Analytic => Calibration::Analytic,
                CalibrationArg::Classic => Calibration::Classic,
            };
            let m = GaussianMechanism::new(a.sensitivity, a.epsilon, delta, cal)?;
            fields.insert("sigma".into(), json!(m.sigma()));
            fields.insert("granularity".into(), json!(m.granularity()));
            (
                (0..n)
                    .map(|_| m.release(&mut rng, a.value))
                    .collect::<Result<_, _>>()?,
                m.event(),
            )
        }
        MechanismArg::DiscreteLaplace => {
            let (x, s) = integers(a.value, a.sensitivity)?;
            let m = DiscreteLaplaceMechanism::new(s, a.epsilon)?;
            fields.insert("scale".into(), json!(m.scale()));
            (
                (0..n).map(|_| m.release(&mut rng, x) as f64).collect(),
                m.event(),
            )
        }
        MechanismArg::DiscreteGaussian => {
            let (x, s) = integers(a.value, a.sensitivity)?;
            let m = DiscreteGaussianMechanism::new(s, a.epsilon, delta)?;
            fields.insert("sigma".into(), json!(m.sigma()));
            (
                (0..n).map(|_| m.release(&mut rng, x) as f64).collect(),
                m.event(),
            )
        }
    };
    let mut obj = Map::new();
    obj.insert("values".into(), json!(values));
    obj.insert(
        "mechanism".into(),
        json!(
            a.mechanism
                .to_possible_value()
                .map(|v| v.get_name().to_string())
        ),
    );
    obj.insert("epsilon".into(), json!(a.epsilon));
    obj.insert("delta".into(), json!(delta));
    obj.extend(fields);
    obj.insert("count".into(), json!(a.count));
    obj.insert("epsilon_total".into(), json!(a.epsilon * a.count as f64));
    obj.insert("delta_total".into(), json!(delta * a.count as f64));
    obj.insert("event".into(), json!(event.repeated(a.count)));
    obj.insert("seeded".into(), json!(rng.is_seeded()));
    let model = PrivacyModel::new(neighbouring::VALUE, &[public::SENSITIVITY]);
    out.emit(&Release::from_map(obj, &model).into_value());
    Ok(())
}

/// Discrete mechanisms need an integer value and an integer sensitivity.
fn integers(value: f64, sensitivity: f64) -> CliResult<(i64, u64)> {
    let whole = |v: f64| v.fract() == 0.0 && v.abs() < 9.0e15;
    if !whole(value) {
        return Err(CliError::usage(format!(
            "--value {value} must be an integer for a discrete mechanism"
        )));
    }
    if !whole(sensitivity) {
        return Err(CliError::usage(format!(
            "--sensitivity {sensitivity} must be an integer for a discrete mechanism"
        )));
    }
    Ok((value as i64, sensitivity as u64))
}
