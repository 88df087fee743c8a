//! Calibration of the `dpml train` default (PLD, ε = 3, δ = 1e-5, batch 256 of 60000, 1 epoch)
//! on its own, to measure its time and peak memory:
//! `/usr/bin/time -v cargo run --release -p dpml-accounting --example calibrate_peak [epochs]`.

use std::time::Instant;

use dpml_accounting::AccountingError;
use dpml_accounting::calibrate::{noise_multiplier, steps_for_epochs};
use dpml_accounting::pld::PldAccountant;

fn main() -> Result<(), AccountingError> {
    let epochs: f64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1.0);
    let (q, steps) = steps_for_epochs(epochs, 256, 60000)?;
    let start = Instant::now();
    let c = noise_multiplier(&PldAccountant::pessimistic(), 3.0, 1e-5, q, steps)?;
    println!(
        "epochs={epochs} steps={steps}: sigma={} epsilon={} in {:.2?}",
        c.noise_multiplier,
        c.epsilon,
        start.elapsed()
    );
    Ok(())
}
