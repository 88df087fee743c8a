//! `dpml arch show NAME|FILE` and the `--arch FILE` of every command that trains: a network
//! described as JSON, the same form dpml saves beside the weights:
//!
//! ```json
//! {"name": "tiny", "input_shape": [3, 32, 32], "layers": [
//!   {"type": "conv2d", "in_channels": 3, "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1},
//!   {"type": "relu"}, {"type": "flatten"},
//!   {"type": "linear", "in_features": 8192, "out_features": 10}]}
//! ```

use std::path::PathBuf;

use clap::{Args, Subcommand};
use dpml_learn::dpsgd::{DpSgdError, ModelSpec};
use serde_json::{Value, json};

use crate::args;
use crate::error::{CliError, CliResult};
use crate::output::Output;

/// Record shape assumed by `arch show` for a built-in name (MNIST's, as the CNNs take).
const SHOW_INPUT_SHAPE: [usize; 3] = [1, 28, 28];
/// Classes assumed by `arch show` for a built-in name.
const SHOW_CLASSES: usize = 10;

/// Architecture commands.
#[derive(Subcommand, Debug)]
pub enum ArchCommand {
    /// Print an architecture's layers with their output shapes, its parameter count and its
    /// FLOPs per sample.
    Show(ShowArgs),
}

/// Flags of `dpml arch show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// A built-in name (cnn, cnn-tanh, logreg, mlp, scatter-cnn, scatter-linear; shown for
    /// 1x28x28 records and 10 classes) or a JSON architecture file.
    #[arg(value_name = "NAME|FILE")]
    pub arch: String,
    /// Hidden sizes when NAME is mlp.
    #[arg(long, value_delimiter = ',', value_parser = args::at_least_one_at_most(args::MAX_HIDDEN_WIDTH), default_value = "128")]
    pub hidden: Vec<u64>,
}

pub use dpml_core::arch::load_arch;

/// Run `dpml arch …`.
pub fn run(c: &ArchCommand, out: Output) -> CliResult<()> {
    match c {
        ArchCommand::Show(a) => show(a, out),
    }
}

/// A built-in name or, failing that, a file.
fn resolve(a: &ShowArgs) -> CliResult<ModelSpec> {
    if dpml_learn::dpsgd::MODEL_NAMES.contains(&a.arch.to_ascii_lowercase().as_str()) {
        let hidden: Vec<usize> = a.hidden.iter().map(|&h| h as usize).collect();
        return ModelSpec::named(&a.arch, &SHOW_INPUT_SHAPE, SHOW_CLASSES, &hidden)
            .map_err(|e| CliError::from(DpSgdError::from(e)));
    }
    let path = PathBuf::from(&a.arch);
    if !path.exists() {
        return Err(CliError::usage(format!(
            "{:?} is neither a built-in architecture ({}) nor an existing file",
            a.arch,
            dpml_learn::dpsgd::MODEL_NAMES.join(", ")
        )));
    }
    Ok(load_arch(
        &args::input_path(&a.arch).map_err(CliError::usage)?,
    )?)
}

fn show(a: &ShowArgs, out: Output) -> CliResult<()> {
    let spec = resolve(a)?;
    let model = spec
        .check()
        .map_err(|e| CliError::usage(format!("{}: {e}", a.arch)))?;
    let layers: Vec<Value> = model
        .layers()
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let params: usize = l.params().iter().map(|p| p.len()).sum();
            json!({
                "index": i,
                "type": l.spec().type_name(),
                "spec": l.spec(),
                "output_shape": l.out_shape(),
                "parameters": params,
                "flops": l.flops(),
            })
        })
        .collect();
    out.emit(&json!({
        "name": spec.name,
        "input_shape": spec.input_shape,
        "output_shape": model.output_shape(),
        "layers": layers,
        "parameters": model.num_params(),
        "flops_per_sample": model.flops_per_sample(),
        // The description itself, ready to save and edit as an `--arch` file.
        "architecture": spec,
        "flops_counted_as": "2 x the multiply-adds of linear and conv2d layers (weights x output positions) in one record's forward pass; biases, activations, normalisation, pooling and residual additions not counted",
    }));
    Ok(())
}
