//! `dpml inspect MODEL`: what a saved model file is, read from the file alone: its
//! architecture (layers, parameter count, tensor names and shapes), the input transform it
//! expects, and the privacy facts it was saved with (`dpml train --out`,
//! `dpml label-dp --save-model`).
//!
//! Tensor names follow PyTorch's `nn.Sequential` state dict: `"{i}.weight"` and `"{i}.bias"`,
//! `i` being the layer's index counting every layer (Flatten and activations too), so the
//! file loads into the matching `nn.Sequential` with `load_state_dict`.

use std::path::PathBuf;

use clap::Args;
use dpml_learn::dpsgd::{self, SavedModel};
use dpml_learn::model_facts::ModelFacts;
use serde_json::{Value, json};

use crate::args;
use crate::error::{CliError, CliResult};
use crate::output::Output;

/// Flags of `dpml inspect`.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// A model file written by `dpml train --out` or `dpml label-dp --save-model`.
    #[arg(value_name = "MODEL", value_parser = args::input_path)]
    pub model: PathBuf,
}

/// Run `dpml inspect`.
pub fn run(a: &InspectArgs, out: Output) -> CliResult<()> {
    let saved = dpsgd::load_saved(&a.model)?;
    let SavedModel {
        model,
        input,
        facts,
    } = &saved;
    let tensors: Vec<Value> = model
        .named_params()
        .into_iter()
        .map(|(name, p)| json!({"name": name, "shape": p.shape}))
        .collect();
    out.emit(&json!({
        "model": a.model,
        "architecture": model.spec(),
        "parameters": model.num_params(),
        "tensors": tensors,
        "input_transform": serde_json::to_value(input).map_err(CliError::internal)?,
        "privacy": facts_json(facts.as_ref())?,
    }));
    Ok(())
}

/// The `"guarantee"` of a model whose file records no privacy facts.
pub const UNKNOWN_GUARANTEE: &str = "unknown";

/// A model's privacy facts as JSON; for a file without them (written before dpml recorded
/// them, or by another tool), `{"guarantee": "unknown", "note": …}`, so that a reader never
/// takes a missing ε for a non-private model or for a private one.
pub fn facts_json(facts: Option<&ModelFacts>) -> CliResult<Value> {
    match facts {
        Some(f) => serde_json::to_value(f).map_err(CliError::internal),
        None => Ok(json!({
            "guarantee": UNKNOWN_GUARANTEE,
            "note": format!(
                "the file records no privacy facts (no {:?} metadata): its guarantee is unknown",
                dpsgd::io::FACTS_KEY
            ),
        })),
    }
}
