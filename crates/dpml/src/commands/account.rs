//! `dpml account`: ε of a DP-SGD run, or of any composition of privacy events, under the RDP,
//! PLD and GDP accountants side by side, each labelled as an upper bound, lower bound or
//! approximation.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use dpml_accounting::gdp::GdpAccountant;
use dpml_accounting::pld::PldAccountant;
use dpml_accounting::rdp::{Conversion, RdpAccountant};
use dpml_accounting::{Accountant, AccountingError, PrivacyEvent};
use serde_json::{Map, Value, json};

use super::schedule::ScheduleArgs;
use crate::args;
use crate::error::{CliError, CliResult};
use crate::output::Output;

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
}

/// Run `dpml account`.
pub fn run(a: &AccountArgs, out: Output) -> CliResult<()> {
    let (event, inputs) = event_and_inputs(a)?;
    let wants = |w: Which| a.accountant == Which::All || a.accountant == w;
    let mut eps = Map::new();
    let mut kinds = Map::new();
    let mut result = Map::new();
    let mut notes: Vec<String> = Vec::new();

    if wants(Which::Rdp) {
        let rdp = RdpAccountant::new(a.conversion.into());
        let (e, order) = rdp.epsilon_and_order(&event, a.delta)?;
        eps.insert("rdp".into(), json!(e));
        kinds.insert("rdp".into(), json!(rdp.bound()));
        result.insert("rdp_order".into(), json!(order));
        result.insert(
            "rdp_conversion".into(),
            json!(format!("{:?}", a.conversion).to_lowercase()),
        );
    }
    if wants(Which::Pld) {
        let pld = PldAccountant::pessimistic();
        // The upper bound with its note (RDP below the PLD's δ floor), then the lower bound.
        let (upper, note) = pld.upper_epsilon(&event, a.delta)?;
        let lower = PldAccountant::optimistic().epsilon(&event, a.delta)?;
        notes.extend(note);
        eps.insert("pld".into(), json!(upper));
        kinds.insert("pld".into(), json!(pld.bound()));
        result.insert("pld_lower".into(), json!(lower));
        result.insert("pld_gap".into(), json!(upper - lower));
    }
    if wants(Which::Gdp) {
        let gdp = GdpAccountant;
        match (gdp.mu(&event), gdp.epsilon(&event, a.delta)) {
            (Ok(mu), Ok(e)) => {
                eps.insert("gdp".into(), json!(e));
                kinds.insert("gdp".into(), json!(gdp.bound()));
                result.insert("mu".into(), json!(mu));
                notes.push(
                    "gdp is a central-limit approximation and can underestimate epsilon".into(),
                );
            }
            (Err(AccountingError::Unsupported(why)), _)
            | (_, Err(AccountingError::Unsupported(why)))
                if a.accountant == Which::All =>
            {
                notes.push(format!("gdp not reported: {why}"));
            }
            (Err(e), _) | (_, Err(e)) => return Err(e.into()),
        }
    }

    let mut obj = Map::new();
    obj.insert("epsilon".into(), Value::Object(eps));
    obj.extend(result);
    obj.insert("delta".into(), json!(a.delta));
    obj.insert("bounds".into(), Value::Object(kinds));
    obj.insert("neighbouring".into(), json!("add/remove one record"));
    obj.insert("inputs".into(), inputs);
    obj.insert("notes".into(), json!(notes));
    out.emit(&Value::Object(obj));
    Ok(())
}

/// The event to account and the inputs to echo: DP-SGD from flags, or an events file.
pub fn event_and_inputs(a: &AccountArgs) -> CliResult<(PrivacyEvent, Value)> {
    match (&a.events, a.noise_multiplier) {
        (Some(path), None) => {
            let event = read_events(path)?;
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

/// Read one event, or a list of events (composed in order), from a JSON file.
pub fn read_events(path: &std::path::Path) -> CliResult<PrivacyEvent> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read events file {}: {e}", path.display())))?;
    let bad = |e: serde_json::Error| {
        CliError::usage(format!(
            "events file {} does not parse: {e}",
            path.display()
        ))
    };
    let value: Value = serde_json::from_str(&text).map_err(bad)?;
    match value {
        Value::Array(_) => {
            let events: Vec<PrivacyEvent> = serde_json::from_value(value).map_err(bad)?;
            if events.is_empty() {
                return Err(CliError::usage(format!(
                    "events file {} lists no events",
                    path.display()
                )));
            }
            Ok(PrivacyEvent::Composed { events })
        }
        _ => serde_json::from_value(value).map_err(bad),
    }
}
