//! What a saved model's file says about its guarantee.

use dpml_learn::dpsgd;
use dpml_learn::model_facts::ModelFacts;
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The `"guarantee"` of a model whose file records no privacy facts.
pub const UNKNOWN_GUARANTEE: &str = "unknown";

/// The `"guarantee"` of a model whose file records facts that are no guarantee (ε = −1, a
/// sampling rate of 7): [`ModelFacts::problems`].
pub const INVALID_GUARANTEE: &str = "invalid";

/// A model's privacy facts as JSON; for a file without them (written before dpml recorded
/// them, or by another tool), `{"guarantee": "unknown", "note": …}`, so that a reader never
/// takes a missing ε for a non-private model or for a private one; for facts that are no
/// guarantee (edited or forged: ε = −1, δ = 2), `{"guarantee": "invalid", "problems": […],
/// "recorded": {…}}`, the file's numbers kept away from the top level where a guarantee is
/// read.
///
/// # Errors
/// An internal error if the facts do not serialise.
pub fn facts_json(facts: Option<&ModelFacts>) -> Result<Value> {
    match facts {
        Some(f) if !f.problems().is_empty() => Ok(json!({
            "guarantee": INVALID_GUARANTEE,
            "problems": f.problems(),
            "note": "the file's privacy facts are not a valid guarantee (edited, damaged or \
                     forged): the model has no stated guarantee",
            "recorded": serde_json::to_value(f).map_err(Error::internal)?,
        })),
        Some(f) => serde_json::to_value(f).map_err(Error::internal),
        None => Ok(json!({
            "guarantee": UNKNOWN_GUARANTEE,
            "note": format!(
                "the file records no privacy facts (no {:?} metadata): its guarantee is unknown",
                dpsgd::io::FACTS_KEY
            ),
        })),
    }
}
