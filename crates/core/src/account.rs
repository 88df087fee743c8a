//! ε of a DP-SGD run, or of any composition of privacy events, under the RDP, PLD and GDP
//! accountants side by side, each labelled as an upper bound, lower bound or approximation.

use dpml_accounting::gdp::GdpAccountant;
use dpml_accounting::named::Named;
use dpml_accounting::pld::PldAccountant;
use dpml_accounting::rdp::{Conversion, RdpAccountant};
use dpml_accounting::{Accountant, AccountingError, PrivacyEvent};
use dpml_mechanisms::{Repetitions, TrialRelease};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};

/// Which accountants to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// ε of `event` at `delta` under the accountants `which` names, each labelled as an upper
/// bound, lower bound or approximation, with `inputs` (what the event was built from) beside
/// them. GDP's central-limit approximation is left out with a note where it does not apply,
/// when every accountant was asked for.
///
/// # Errors
/// The accountants' refusals.
pub fn account(
    event: &PrivacyEvent,
    inputs: Value,
    delta: f64,
    which: Which,
    conversion: Conversion,
) -> Result<Value> {
    let wants = |w: Which| which == Which::All || which == w;
    let mut eps = Map::new();
    let mut kinds = Map::new();
    let mut result = Map::new();
    let mut notes: Vec<String> = Vec::new();

    if wants(Which::Rdp) {
        let rdp = RdpAccountant::new(conversion);
        let (e, order) = rdp.epsilon_and_order(event, delta)?;
        eps.insert("rdp".into(), json!(e));
        kinds.insert("rdp".into(), json!(rdp.bound()));
        result.insert("rdp_order".into(), json!(order));
        result.insert(
            "rdp_conversion".into(),
            json!(format!("{conversion:?}").to_lowercase()),
        );
    }
    if wants(Which::Pld) {
        let pld = PldAccountant::pessimistic();
        // The upper bound with its note (RDP below the PLD's δ floor), then the lower bound.
        match pld.upper_epsilon(event, delta) {
            Ok((upper, note)) => {
                let lower = PldAccountant::optimistic().epsilon(event, delta)?;
                notes.extend(note);
                eps.insert("pld".into(), json!(upper));
                kinds.insert("pld".into(), json!(pld.bound()));
                result.insert("pld_lower".into(), json!(lower));
                result.insert("pld_gap".into(), json!(upper - lower));
            }
            Err(AccountingError::Unsupported(why)) if which == Which::All => {
                notes.push(format!("pld not reported: {why}"));
            }
            Err(e) => return Err(e.into()),
        }
    }
    if wants(Which::Gdp) {
        let gdp = GdpAccountant;
        match (gdp.mu(event), gdp.epsilon(event, delta)) {
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
                if which == Which::All =>
            {
                notes.push(format!("gdp not reported: {why}"));
            }
            (Err(e), _) | (_, Err(e)) => return Err(e.into()),
        }
    }

    // JSON has no infinity: an ε that is not finite prints as null, which needs its reason.
    for (name, e) in &eps {
        if e.as_f64().is_none_or(|e| !e.is_finite()) {
            notes.push(format!(
                "{name}: epsilon is not finite (no guarantee at this delta)"
            ));
        }
    }
    let mut obj = Map::new();
    obj.insert("epsilon".into(), Value::Object(eps));
    obj.extend(result);
    obj.insert("delta".into(), json!(delta));
    obj.insert("bounds".into(), Value::Object(kinds));
    obj.insert("neighbouring".into(), json!("add/remove one record"));
    obj.insert("inputs".into(), inputs);
    obj.insert("notes".into(), json!(notes));
    Ok(Value::Object(obj))
}

/// [`account`] of a search: `run` repeated K times, K drawn from `repetitions`, with only the
/// best output released, K secret (Papernot & Steinke 2022), or every output (and K), as
/// `release` says; the RDP accountant alone has a bound for either. Beside the search's ε:
/// `"epsilon_per_trial"`, the ε of one run by itself (RDP), and `"tuning"`, the law, its mean
/// and what is released (`"released"`).
///
/// # Errors
/// As [`account`]; a usage error naming the law's bad parameter.
pub fn account_search(
    run: &PrivacyEvent,
    repetitions: Repetitions,
    release: TrialRelease,
    inputs: Value,
    delta: f64,
    which: Which,
    conversion: Conversion,
) -> Result<Value> {
    let repetitions = repetitions
        .validate()
        .map_err(|e| Error::usage(e.to_string()))?;
    let search = release.event(repetitions, run.clone());
    let mut value = account(&search, inputs, delta, which, conversion)?;
    let per_trial = RdpAccountant::new(conversion).epsilon(run, delta)?;
    if let Value::Object(map) = &mut value {
        map.insert("epsilon_per_trial".into(), json!(per_trial));
        map.insert("tuning".into(), tuning_json(&repetitions, release));
    }
    Ok(value)
}

/// The law of a search's number of trials, as reports show it: its name, mean, η and γ (for
/// the truncated negative binomial), a description in words, and what the search releases
/// (`"released"`: which bound its ε is).
pub fn tuning_json(repetitions: &Repetitions, release: TrialRelease) -> Value {
    let mut v = json!({
        "law": repetitions.name(),
        "trials_mean": repetitions.expected(),
        "description": repetitions.describe(),
        "released": release.describe(),
    });
    if let Repetitions::TruncatedNegativeBinomial { eta, .. } = repetitions {
        v["eta"] = json!(eta);
        v["gamma"] = json!(repetitions.gamma());
    }
    v
}

/// The accountants calibration may use: upper bounds only, so the ε reached never exceeds the
/// target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CalibrationAccountant {
    /// Pessimistic PLD: the tight upper bound, and the default of every front.
    #[default]
    Pld,
    /// Rényi DP (a looser upper bound: more noise for the same target).
    Rdp,
}

impl CalibrationAccountant {
    /// The name on the command line and in outputs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pld => "pld",
            Self::Rdp => "rdp",
        }
    }
}

impl std::str::FromStr for CalibrationAccountant {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "pld" => Ok(Self::Pld),
            "rdp" => Ok(Self::Rdp),
            other => Err(Error::usage(format!(
                "the calibration accountant must be pld or rdp (upper bounds), got {other:?}"
            ))),
        }
    }
}

/// The smallest noise multiplier σ (to a tolerance) for which `steps` Poisson-subsampled
/// Gaussian steps at `sampling_rate` are (`target_epsilon`, `delta`)-DP under `accountant`:
/// `{"noise_multiplier", "epsilon" (reached, never above the target), "target_epsilon",
/// "delta", "accountant", "inputs"}`, the JSON of `dpml calibrate`.
///
/// # Errors
/// The accountant's refusals (a target it cannot reach, bad parameters).
pub fn calibrate(
    target_epsilon: f64,
    delta: f64,
    sampling_rate: f64,
    steps: u64,
    accountant: CalibrationAccountant,
    inputs: Value,
) -> Result<Value> {
    let named = match accountant {
        CalibrationAccountant::Pld => Named::Pld,
        CalibrationAccountant::Rdp => Named::Rdp,
    };
    let cal = named.calibrate(target_epsilon, delta, sampling_rate, steps)?;
    Ok(json!({
        "noise_multiplier": cal.noise_multiplier,
        "epsilon": cal.epsilon,
        "target_epsilon": target_epsilon,
        "delta": delta,
        "accountant": accountant.name(),
        "inputs": inputs,
    }))
}

/// ε of `event` at `delta` under RDP and the order that gives it (Opacus's
/// `get_privacy_spent`).
///
/// # Errors
/// The accountant's refusals.
pub fn rdp_epsilon_and_order(event: &PrivacyEvent, delta: f64) -> Result<(f64, f64)> {
    Ok(RdpAccountant::default().epsilon_and_order(event, delta)?)
}

/// The largest events file read (16 MiB: many thousands of events composed).
pub const MAX_EVENTS_FILE_BYTES: u64 = 16 << 20;

/// The privacy event in a JSON file: one event, or a list of events composed.
///
/// # Errors
/// A usage error naming the file when it cannot be read, does not parse or lists no events.
pub fn read_events(path: &std::path::Path) -> Result<PrivacyEvent> {
    let text = dpml_data::read_text(path, "an events file", MAX_EVENTS_FILE_BYTES)
        .map_err(|e| Error::usage(format!("cannot read events file {e}")))?;
    let bad = |e: serde_json::Error| {
        Error::usage(format!(
            "events file {} does not parse: {e}",
            path.display()
        ))
    };
    let value: Value = serde_json::from_str(&text).map_err(bad)?;
    match value {
        Value::Array(_) => {
            let events: Vec<PrivacyEvent> = serde_json::from_value(value).map_err(bad)?;
            if events.is_empty() {
                return Err(Error::usage(format!(
                    "events file {} lists no events",
                    path.display()
                )));
            }
            Ok(PrivacyEvent::Composed { events })
        }
        _ => serde_json::from_value(value).map_err(bad),
    }
}
