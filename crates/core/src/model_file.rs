//! What a saved model's file says about its guarantee.

use dpml_learn::dpsgd;
use dpml_learn::model_facts::ModelFacts;
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The `"guarantee"` of a model whose file records no privacy facts.
pub const UNKNOWN_GUARANTEE: &str = "unknown";

/// A model's privacy facts as JSON; for a file without them (written before dpml recorded
/// them, or by another tool), `{"guarantee": "unknown", "note": …}`, so that a reader never
/// takes a missing ε for a non-private model or for a private one.
///
/// # Errors
/// An internal error if the facts do not serialise.
pub fn facts_json(facts: Option<&ModelFacts>) -> Result<Value> {
    match facts {
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
