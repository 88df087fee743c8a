//! `dpml calibrate`: the smallest noise multiplier σ (to a tolerance) whose ε under the chosen
//! accountant does not exceed the target; the achieved ε is reported and is never above it.
//! The calibration and its default accountant are the library's
//! ([`dpml_core::account::calibrate`]), shared with `dpml.accounting.calibrate`.

use clap::{Args, ValueEnum};
use dpml_core::account::{self, CalibrationAccountant};

use super::schedule::ScheduleArgs;
use crate::args;
use crate::error::CliResult;
use crate::output::Output;

/// Accountants that give upper bounds, so calibration is safe.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum AccountantArg {
    /// Privacy-loss distribution (pessimistic, tight).
    Pld,
    /// Rényi DP.
    Rdp,
}

impl From<AccountantArg> for CalibrationAccountant {
    fn from(a: AccountantArg) -> Self {
        match a {
            AccountantArg::Pld => CalibrationAccountant::Pld,
            AccountantArg::Rdp => CalibrationAccountant::Rdp,
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
    #[arg(long, value_enum, default_value = CalibrationAccountant::default().name())]
    pub accountant: AccountantArg,
}

/// Run `dpml calibrate`.
pub fn run(a: &CalibrateArgs, out: Output) -> CliResult<()> {
    let (q, steps) = a.schedule.resolve()?;
    out.emit(&account::calibrate(
        a.epsilon,
        a.delta,
        q,
        steps,
        a.accountant.into(),
        a.schedule.inputs(q, steps),
    )?);
    Ok(())
}
