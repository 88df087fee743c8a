//! Times the exact discrete Gaussian samplers at the size DP-SGD's grid noise uses (σ² = 2³⁰
//! grid units): `cargo run --release -p dpml-mechanisms --example exact_bench [n] [mode]`.
//! Without a mode it times all of them; with one (`cks`, `table`, `bulk`, `words`) it runs
//! that one only, for instruction counts (`valgrind --tool=callgrind` at two n, the difference
//! divided by the difference in n is the cost of one draw; `--profile profiling` instead of
//! `--release` builds the same code with line tables, for per-line counts).
use dpml_mechanisms::exact::DiscreteGaussian;
use dpml_mechanisms::{AliasDiscreteGaussian, DpRng, Rational};
use rand::RngCore;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4_000_000);
    let only = args.next();
    let sigma2 = Rational::integer(1 << 30);
    let cks = DiscreteGaussian::new(sigma2).expect("valid σ²");
    let table = AliasDiscreteGaussian::new(sigma2).expect("valid σ²");
    let [mut r1, mut r2, mut r3, mut r4] = [1, 2, 3, 4].map(DpRng::seeded);
    let mut buf = vec![0f64; 8192];
    let mut bytes = vec![0u8; 6 * 8192];
    let modes: [(&str, &mut dyn FnMut() -> f64); 4] = [
        ("words", &mut || {
            r1.as_rng().fill_bytes(&mut bytes);
            f64::from(bytes[7])
        }),
        ("bulk", &mut || {
            table.fill(&mut buf, &mut r2);
            buf[7]
        }),
        ("table", &mut || {
            (0..8192).map(|_| table.sample(&mut r3) as f64).sum()
        }),
        ("cks", &mut || {
            (0..8192).map(|_| cks.sample(&mut r4) as f64).sum()
        }),
    ];
    for (name, draw) in modes {
        if only.as_deref().is_some_and(|m| m != name) {
            continue;
        }
        let start = std::time::Instant::now();
        let acc: f64 = (0..n / 8192).map(|_| draw()).sum();
        let ns = start.elapsed().as_secs_f64() * 1e9 / (n / 8192 * 8192) as f64;
        println!("{name}: {ns:.2} ns/sample (checksum {acc})");
    }
}
