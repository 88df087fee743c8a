//! The DP-SGD schedule flags shared by `account`, `calibrate` and `tradeoff`: a sampling rate
//! and a number of steps, or epochs, batch size and data set size (q = B/N, T = ⌈E·N/B⌉).

use clap::Args;
use serde_json::{Value, json};

use crate::args;
use crate::error::{CliError, CliResult};

/// How often and how sparsely DP-SGD samples the data.
#[derive(Args, Debug, Clone)]
pub struct ScheduleArgs {
    /// Poisson sampling rate q in (0, 1].
    #[arg(long, value_parser = args::rate)]
    pub sampling_rate: Option<f64>,
    /// Number of steps T.
    #[arg(long, value_parser = args::at_least_one)]
    pub steps: Option<u64>,
    /// Epochs (with --batch-size and --train-size, instead of --sampling-rate/--steps).
    #[arg(long, value_parser = args::positive)]
    pub epochs: Option<f64>,
    /// Expected batch size B.
    #[arg(long, value_parser = args::at_least_one)]
    pub batch_size: Option<u64>,
    /// Training-set size N (the records DP-SGD samples from).
    #[arg(long, alias = "dataset-size", value_parser = args::at_least_one)]
    pub train_size: Option<u64>,
}

impl ScheduleArgs {
    /// (q, T) from whichever form was given.
    pub fn resolve(&self) -> CliResult<(f64, u64)> {
        match (self, self.sampling_rate, self.steps) {
            (s, Some(q), Some(t)) if s.epochs.is_none() => Ok((q, t)),
            (s, None, None) => {
                let (Some(e), Some(b), Some(n)) = (s.epochs, s.batch_size, s.train_size) else {
                    return Err(CliError::usage(
                        "give --sampling-rate and --steps, or --epochs, --batch-size and --train-size",
                    ));
                };
                if b > n {
                    return Err(CliError::usage(format!(
                        "--batch-size {b} is larger than --train-size {n}"
                    )));
                }
                Ok(dpml_accounting::calibrate::steps_for_epochs(e, b, n)?)
            }
            _ => Err(CliError::usage(
                "give --sampling-rate and --steps together, or --epochs, --batch-size and --train-size instead",
            )),
        }
    }

    /// The inputs as reported in JSON outputs.
    pub fn inputs(&self, q: f64, steps: u64) -> Value {
        json!({
            "sampling_rate": q,
            "steps": steps,
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "train_size": self.train_size,
        })
    }
}
