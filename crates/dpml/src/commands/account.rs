//! `dpml account`: ε of a DP-SGD run, or of any composition of privacy events, under the RDP,
//! PLD and GDP accountants side by side, each labelled as an upper bound, lower bound or
//! approximation.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use dpml_accounting::PrivacyEvent;
use dpml_accounting::rdp::Conversion;
use dpml_core::account;
use dpml_mechanisms::TrialRelease;
use serde_json::{Value, json};

use super::schedule::ScheduleArgs;
use crate::args;
use crate::error::{CliError, CliResult};
use crate::output::Output;
use crate::trials_args::{LawArg, TrialsArgs};

/// Which accountants to run.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// Rényi DP (upper bound).
    Rdp,
    /// Privacy-loss distributions (tight upper bound, with a lower bound beside it).
    Pld,
    /// Gaussian DP via the central limit theorem (approximation; can underestimate).
    Gdp,
    /// All three.
    All,
}

/// RDP → (ε, δ) conversion.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum ConversionArg {
    /// Balle et al. 2020, Theorem 21 (what Opacus and TF Privacy use now).
    Current,
    /// ε = min_α RDP(α) + ln(1/δ)/(α−1) (older papers and READMEs).
    Classic,
}

impl From<ConversionArg> for Conversion {
    fn from(c: ConversionArg) -> Self {
        match c {
            ConversionArg::Current => Conversion::Current,
            ConversionArg::Classic => Conversion::Classic,
        }
    }
}

/// Flags of `dpml account`.
#[derive(Args, Debug)]
pub struct AccountArgs {
    /// Noise multiplier σ (noise std / clipping norm) of DP-SGD.
    #[arg(long, value_parser = args::positive)]
    pub noise_multiplier: Option<f64>,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// A JSON file with a privacy event (or a list of events) to account instead of DP-SGD.
    #[arg(long, conflicts_with = "noise_multiplier", value_parser = args::input_path)]
    pub events: Option<PathBuf>,
    /// δ of the (ε, δ) guarantee.
    #[arg(long, value_parser = args::open_unit)]
    pub delta: f64,
    /// Which accountant(s).
    #[arg(long, value_enum, default_value = "all")]
    pub accountant: Which,
    /// RDP to (ε, δ) conversion.
    #[arg(long, value_enum, default_value = "current")]
    pub conversion: ConversionArg,
    /// The guarantee of a private search over the event: it runs K times, K drawn in secret
    /// from this law (with --trials-mean, and --eta for the truncated negative binomial), and
    /// only the best run is released (Papernot & Steinke 2022; RDP only).
    #[arg(long, value_enum, value_name = "LAW")]
    pub tuning: Option<LawArg>,
    #[command(flatten)]
    pub trials: TrialsArgs,
    /// With --tuning: the guarantee of releasing every run's output (and so K) instead of the
    /// best one: composition over the random number of runs (RDP only).
    #[arg(long, requires = "tuning")]
    pub release_trials: bool,
}

/// Run `dpml account`.
pub fn run(a: &AccountArgs, out: Output) -> CliResult<()> {
    let (event, inputs) = event_and_inputs(a)?;
    let which = match a.accountant {
        Which::Rdp => account::Which::Rdp,
        Which::Pld => account::Which::Pld,
        Which::Gdp => account::Which::Gdp,
        Which::All => account::Which::All,
    };
    let result = match a.tuning {
        Some(law) => {
            if matches!(a.accountant, Which::Pld | Which::Gdp) {
                return Err(CliError::usage(format!(
                    "--tuning has an RDP bound only (Papernot & Steinke's theorems): drop \
                     --accountant {}",
                    format!("{:?}", a.accountant).to_lowercase()
                )));
            }
            let repetitions = a.trials.repetitions(law, "--tuning")?;
            let release = if a.release_trials {
                TrialRelease::Every
            } else {
                TrialRelease::Best
            };
            account::account_search(
                &event,
                repetitions,
                release,
                inputs,
                a.delta,
                account::Which::Rdp,
                a.conversion.into(),
            )?
        }
        None if a.trials.any() => {
            return Err(CliError::usage(
                "--trials-mean and --eta describe a search: give --tuning LAW",
            ));
        }
        None => account::account(&event, inputs, a.delta, which, a.conversion.into())?,
    };
    out.emit(&result);
    Ok(())
}

/// The event to account and the inputs to echo: DP-SGD from flags, or an events file.
pub fn event_and_inputs(a: &AccountArgs) -> CliResult<(PrivacyEvent, Value)> {
    match (&a.events, a.noise_multiplier) {
        (Some(path), None) => {
            let event = account::read_events(path)?;
            Ok((event.clone(), json!({"events": event})))
        }
        (None, Some(sigma)) => {
            let (q, steps) = a.schedule.resolve()?;
            let mut inputs = a.schedule.inputs(q, steps);
            inputs["noise_multiplier"] = json!(sigma);
            Ok((PrivacyEvent::dp_sgd(sigma, q, steps), inputs))
        }
        _ => Err(CliError::usage(
            "give --noise-multiplier with a schedule, or --events FILE.json",
        )),
    }
}
