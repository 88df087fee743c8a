//! A DP-SGD schedule: a sampling rate and a number of steps, or epochs, batch size and data
//! set size (q = B/N, T = ⌈E·N/B⌉).

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// How often and how sparsely DP-SGD samples the data; either (q, T) or (E, B, N).
#[derive(Debug, Clone, Copy, Default)]
pub struct Schedule {
    /// Poisson sampling rate q in (0, 1].
    pub sampling_rate: Option<f64>,
    /// Number of steps T.
    pub steps: Option<u64>,
    /// Epochs E.
    pub epochs: Option<f64>,
    /// Expected batch size B.
    pub batch_size: Option<u64>,
    /// Training-set size N.
    pub train_size: Option<u64>,
}

impl Schedule {
    /// (q, T) from whichever form was given.
    ///
    /// # Errors
    /// A usage error for an incomplete or mixed schedule, or a batch larger than the data.
    pub fn resolve(&self) -> Result<(f64, u64)> {
        match (self, self.sampling_rate, self.steps) {
            (s, Some(q), Some(t))
                if s.epochs.is_none() && s.batch_size.is_none() && s.train_size.is_none() =>
            {
                Ok((q, t))
            }
            (s, None, None) => {
                let (Some(e), Some(b), Some(n)) = (s.epochs, s.batch_size, s.train_size) else {
                    return Err(Error::usage(
                        "give --sampling-rate and --steps, or --epochs, --batch-size and --train-size",
                    ));
                };
                if b > n {
                    return Err(Error::usage(format!(
                        "--batch-size {b} is larger than --train-size {n}"
                    )));
                }
                Ok(dpml_accounting::calibrate::steps_for_epochs(e, b, n)?)
            }
            _ => Err(Error::usage(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mixed_schedule_is_refused_not_half_read() {
        let qt = Schedule {
            sampling_rate: Some(0.01),
            steps: Some(100),
            ..Schedule::default()
        };
        assert_eq!(qt.resolve().unwrap(), (0.01, 100));
        // --batch-size and --train-size next to (q, T) would be ignored: refused instead.
        for mixed in [
            Schedule {
                batch_size: Some(64),
                ..qt
            },
            Schedule {
                train_size: Some(6000),
                ..qt
            },
            Schedule {
                epochs: Some(1.0),
                ..qt
            },
        ] {
            let msg = mixed.resolve().unwrap_err().to_string();
            assert!(msg.contains("together"), "{msg}");
        }
    }
}
