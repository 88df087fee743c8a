//! `dpml release`: release a number with calibrated noise. Every draw is a separate release of
//! the same value, so `--count N` costs N times the per-release ε (reported as
//! `epsilon_total`).

use clap::{Args, ValueEnum};
use dpml_core::release::{Mechanism, ReleaseOptions, release};
use dpml_mechanisms::Calibration;

use crate::args::{self, SeedArg};
use crate::error::CliResult;
use crate::ledger_args::LedgerArgs;
use crate::output::Output;

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
    pub ledger: LedgerArgs,
    #[command(flatten)]
    pub seed: SeedArg,
}

/// Run `dpml release`.
pub fn run(a: &ReleaseArgs, out: Output) -> CliResult<()> {
    let options = ReleaseOptions {
        mechanism: match a.mechanism {
            MechanismArg::Laplace => Mechanism::Laplace,
            MechanismArg::Gaussian => Mechanism::Gaussian,
            MechanismArg::DiscreteLaplace => Mechanism::DiscreteLaplace,
            MechanismArg::DiscreteGaussian => Mechanism::DiscreteGaussian,
        },
        value: a.value,
        sensitivity: a.sensitivity,
        epsilon: a.epsilon,
        delta: a.delta,
        count: a.count,
        calibration: match a.calibration {
            CalibrationArg::Analytic => Calibration::Analytic,
            CalibrationArg::Classic => Calibration::Classic,
        },
    };
    let ledger = a.ledger.open(&a.seed)?;
    out.emit(&release(&options, &mut a.seed.rng()?, ledger.as_ref())?);
    Ok(())
}
