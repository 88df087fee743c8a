//! The DP-SGD schedule flags shared by `account`, `calibrate` and `tradeoff`: a sampling rate
//! and a number of steps, or epochs, batch size and data set size (q = B/N, T = ⌈E·N/B⌉).

use clap::Args;
use dpml_core::schedule::Schedule;
use serde_json::Value;

use crate::args;
use crate::error::CliResult;

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
    /// The schedule these flags give, for the library.
    fn schedule(&self) -> Schedule {
        Schedule {
            sampling_rate: self.sampling_rate,
            steps: self.steps,
            epochs: self.epochs,
            batch_size: self.batch_size,
            train_size: self.train_size,
        }
    }

    /// (q, T) from whichever form was given ([`Schedule::resolve`]).
    pub fn resolve(&self) -> CliResult<(f64, u64)> {
        Ok(self.schedule().resolve()?)
    }

    /// The schedule as given, with the resolved (q, T), for a result's `"inputs"`.
    pub fn inputs(&self, q: f64, steps: u64) -> Value {
        self.schedule().inputs(q, steps)
    }
}
