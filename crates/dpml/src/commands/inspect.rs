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
    let tensors: Vec<(String, Vec<usize>)> = model
        .named_params()
        .into_iter()
        .map(|(name, p)| (name, p.shape.clone()))
        .collect();
    let architecture = serde_json::to_value(model.spec()).map_err(CliError::internal)?;
    let privacy = facts_json(facts.as_ref())?;
    let mut v = json!({
        "model_file": a.model,
        "parameters": model.num_params(),
        // Through text, so its f32 numbers print as f32 (0.3081, not 0.30809998512268066).
        "input_transform": serde_json::to_string(input)
            .and_then(|t| serde_json::from_str::<Value>(&t))
            .map_err(CliError::internal)?,
        "layers": layer_rows(&architecture, &tensors),
        "tensors": tensors
            .iter()
            .map(|(name, shape)| json!({"name": name, "shape": shape}))
            .collect::<Vec<_>>(),
    });
    v["architecture"] = architecture;
    v["privacy"] = privacy;
    out.emit(&v);
    Ok(())
}

/// One row per layer for a reader: its index (the prefix of its tensors' names, as in PyTorch's
/// `nn.Sequential`), the layer with its settings, and its tensors with their shapes.
fn layer_rows(architecture: &Value, tensors: &[(String, Vec<usize>)]) -> Vec<Value> {
    let layers = architecture["layers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    layers
        .iter()
        .enumerate()
        .map(|(i, layer)| {
            let mut described = layer["type"].as_str().unwrap_or("?").to_string();
            if let Value::Object(fields) = layer {
                for (k, v) in fields.iter().filter(|(k, _)| *k != "type") {
                    described.push_str(&format!(" {k}={v}"));
                }
            }
            let prefix = format!("{i}.");
            let own: Vec<String> = tensors
                .iter()
                .filter(|(name, _)| name.starts_with(&prefix))
                .map(|(name, shape)| format!("{name} {shape:?}"))
                .collect();
            json!({"index": i, "layer": described, "tensors": own.join(", ")})
        })
        .collect()
}

pub use dpml_core::model_file::facts_json;
