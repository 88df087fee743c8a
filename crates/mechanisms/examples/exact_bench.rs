//! Times the exact discrete Gaussian sampler at the size DP-SGD's grid noise uses
//! (σ² about 2^29 grid units): `cargo run --release -p dpml-mechanisms --example exact_bench [n]`.
use dpml_mechanisms::exact::DiscreteGaussian;
use dpml_mechanisms::{DpRng, Rational};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let dg = DiscreteGaussian::new(Rational::integer(1 << 29)).expect("valid σ²");
    let mut rng = DpRng::seeded(1);
    let start = std::time::Instant::now();
    let mut acc = 0i64;
    for _ in 0..n {
        acc = acc.wrapping_add(dg.sample(&mut rng));
    }
    let ns = start.elapsed().as_secs_f64() * 1e9 / n as f64;
    println!("exact: {ns:.1} ns/sample (checksum {acc})");
}
