//! Quick check of the PLD accountant: reference values and timings (run with
//! `cargo run --release -p dpml-accounting --example pld_speed`).

use std::time::Instant;

use dpml_accounting::pld::PldAccountant;
use dpml_accounting::{Accountant, AccountingError, PrivacyEvent};

fn main() -> Result<(), AccountingError> {
    let rows = [
        (256.0 / 60000.0, 1.1, 14063u64, 2.382),
        (256.0 / 60000.0, 1.3, 3516, 0.865),
        (256.0 / 60000.0, 0.7, 10547, 5.640),
        (0.004, 1.3, 3750, 0.834),
    ];
    let acc = PldAccountant::pessimistic();
    for (q, sigma, steps, reference) in rows {
        let event = PrivacyEvent::dp_sgd(sigma, q, steps);
        let (lo, hi) = acc.epsilon_bounds(&event, 1e-5)?;
        println!(
            "q={q:.6} σ={sigma} T={steps}: PLD ε in [{lo:.4}, {hi:.4}] (dp_accounting {reference})"
        );
    }
    for steps in [10_000u64, 100_000, 1_000_000] {
        let event = PrivacyEvent::dp_sgd(1.1, 256.0 / 60000.0, steps);
        let start = Instant::now();
        let pld = acc.pld(&event)?;
        let e = pld.epsilon(1e-5)?;
        let t = start.elapsed();
        println!(
            "σ=1.1 q=256/60000 T={steps}: ε={e:.4} in {:.1} ms (h={:.2e}, {} grid points)",
            t.as_secs_f64() * 1e3,
            pld.value_discretization_interval(),
            pld.grid_points()
        );
    }
    for (name, event) in [
        ("σ=0.3 q=0.5 T=1000", PrivacyEvent::dp_sgd(0.3, 0.5, 1000)),
        ("σ=1 q=1e-5 T=1000", PrivacyEvent::dp_sgd(1.0, 1e-5, 1000)),
        (
            "Gaussian σ=2",
            PrivacyEvent::Gaussian {
                noise_multiplier: 2.0,
            },
        ),
        (
            "Gaussian σ=400",
            PrivacyEvent::Gaussian {
                noise_multiplier: 400.0,
            },
        ),
    ] {
        let start = Instant::now();
        let (lo, hi) = acc.epsilon_bounds(&event, 1e-5)?;
        println!(
            "{name}: ε in [{lo:.6}, {hi:.6}] in {:.1} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    let event = PrivacyEvent::dp_sgd(1.1, 256.0 / 60000.0, 14063);
    for h in [1e-3, 3e-4, 1e-4, 3e-5, 1e-5] {
        let a = acc.with_interval(h);
        let start = Instant::now();
        let (lo, hi) = a.epsilon_bounds(&event, 1e-5)?;
        let _ = a.epsilon(&event, 1e-5)?;
        println!(
            "h={h:e}: ε in [{lo:.5}, {hi:.5}] in {:.1} ms",
            start.elapsed().as_secs_f64() * 1e3 / 1.5
        );
    }
    Ok(())
}
