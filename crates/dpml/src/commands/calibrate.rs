//! `dpml calibrate`: the smallest noise multiplier σ (to a tolerance) whose ε under the chosen
//! accountant does not exceed the target; the achieved ε is reported and is never above it.

use clap::{Args, ValueEnum};
use dpml_accounting::Accountant;
use dpml_accounting::calibrate::noise_multiplier;
use dpml_accounting::pld::PldAccountant;
use dpml_accounting::rdp::{Conversion, RdpAccountant};
use serde_json::json;

use super::schedule::ScheduleArgs;
use crate::args;
use crate::error::CliResult;
use crate::output::Output;

/// Accountants that give upper bounds, so calibration is safe.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum CalibrationAccountant {
    /// Rényi DP.
    Rdp,
    /// Privacy-loss distribution (pessimistic, tight).
    Pld,
}

impl CalibrationAccountant {
    /// The accountant object.
    pub fn build(self) -> Box<dyn Accountant> {
        match self {
            CalibrationAccountant::Rdp => Box::new(RdpAccountant::new(Conversion::Current)),
            CalibrationAccountant::Pld => Box::new(PldAccountant::pessimistic()),
        }
    }
}

/// Flags of `dpml calibrate`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// The ε not to exceed.
    #[arg(long, alias = "target-epsilon", value_parser = args::positive)]
    pub epsilon: f64,
    /// δ of the guarantee.
    #[arg(long, value_parser = args::open_unit)]
    pub delta: f64,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// Accountant used for calibration.
    #[arg(long, value_enum, default_value = "pld")]
    pub accountant: CalibrationAccountant,
}

/// Run `dpml calibrate`.
pub fn run(a: &CalibrateArgs, out: Output) -> CliResult<()> {
    let (q, steps) = a.schedule.resolve()?;
    let accountant = a.accountant.build();
    let cal = noise_multiplier(accountant.as_ref(), a.epsilon, a.delta, q, steps)?;
    out.emit(&json!({
        "noise_multiplier": cal.noise_multiplier,
        "epsilon": cal.epsilon,
        "target_epsilon": a.epsilon,
        "delta": a.delta,
        "accountant": accountant.name(),
        "inputs": a.schedule.inputs(q, steps),
    }));
    Ok(())
}
