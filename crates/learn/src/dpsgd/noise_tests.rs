//! Tests of the chunked parallel noise: its per-coordinate spread, the independence of the
//! chunks' streams, and a seeded run's independence of the thread count.

use dpml_mechanisms::DpRng;
use dpml_nn::{ModelSpec, Sequential};
use rand::RngCore;

use super::*;
use crate::dpsgd::{Normalization, Privacy, TrainConfig, train};

/// z for a two-sided level of about 1e-6: a correct sampler fails one check in a million.
const Z: f64 = 4.9;

/// Pearson correlation of two equally long series.
fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    sab / (saa * sbb).sqrt()
}

/// `reps` noise draws over `chunks` whole chunks of zeros, each draw from a fresh key.
fn draws(noise: &Noise, chunks: usize, reps: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = DpRng::seeded(seed);
    (0..reps)
        .map(|_| {
            let key = rng.stream_key();
            let mut v = vec![0.0f32; chunks * CHUNK];
            match noise {
                Noise::Gaussian { std } => add_gaussian(&mut v, *std, &key, 0),
                Noise::Exact(grid) => grid.add_to(&mut v, &key, 0),
                Noise::None => {}
            }
            v.into_iter().map(f64::from).collect()
        })
        .collect()
}

/// The checks shared by both samplers, on noise of standard deviation `std`:
/// - the per-coordinate standard deviation, pooled over every coordinate and draw;
/// - each coordinate's spread across draws (the first coordinate of every chunk, where a
///   stream starts): its sample variance within a chi-square-style band;
/// - chunk i against chunk i+1 of one draw, coordinate by coordinate (a shared or shifted
///   stream shows as correlation near 1);
/// - the last coordinate of a chunk against the first of the next, across draws.
fn check_noise(noise: &Noise, std: f64, seed: u64) {
    let (chunks, reps) = (4, 24);
    let all = draws(noise, chunks, reps, seed);
    // Pooled variance of n normal draws: sd of the sample variance is std²·√(2/n).
    let n = (chunks * CHUNK * reps) as f64;
    let var = all.iter().flatten().map(|x| x * x).sum::<f64>() / n;
    let rel = (var / (std * std) - 1.0).abs();
    assert!(
        rel < Z * (2.0 / n).sqrt(),
        "pooled variance {var} vs {}",
        std * std
    );
    // One coordinate across draws (reps values): a loose band that still catches a zero or a
    // doubled spread at a stream's start.
    for c in 0..chunks {
        let v = all.iter().map(|d| d[c * CHUNK].powi(2)).sum::<f64>() / reps as f64;
        assert!(
            v > 0.2 * std * std && v < 2.5 * std * std,
            "chunk {c} start: variance {v}"
        );
    }
    for d in &all {
        for c in 0..chunks - 1 {
            let r = correlation(
                &d[c * CHUNK..(c + 1) * CHUNK],
                &d[(c + 1) * CHUNK..(c + 2) * CHUNK],
            );
            // Null sd of a correlation over m pairs is about 1/√m.
            assert!(
                r.abs() < Z / (CHUNK as f64).sqrt(),
                "chunks {c}, {}: r = {r}",
                c + 1
            );
        }
    }
    let (mut last, mut first) = (Vec::new(), Vec::new());
    for d in &all {
        for c in 0..chunks - 1 {
            last.push(d[(c + 1) * CHUNK - 1]);
            first.push(d[(c + 1) * CHUNK]);
        }
    }
    let r = correlation(&last, &first);
    assert!(
        r.abs() < Z / (last.len() as f64).sqrt(),
        "across boundaries: r = {r} over {} pairs",
        last.len()
    );
}

#[test]
fn gaussian_chunks_have_the_right_spread_and_no_correlation() {
    check_noise(&Noise::Gaussian { std: 1.7 }, 1.7, 1);
}

#[test]
fn exact_chunks_have_the_right_spread_and_no_correlation() {
    let grid = GridNoise::new(1.1, 1.0, 4 * CHUNK).unwrap();
    let std = grid.std();
    check_noise(&Noise::Exact(grid), std, 2);
}

/// The noise of a step on a zero-gradient model: chunk numbering runs on across parameter
/// tensors, so two tensors never share a stream.
#[test]
fn parameter_tensors_draw_from_different_streams() {
    let spec = ModelSpec::named("mlp", &[1, 8, 8], 10, &[CHUNK / 64]).unwrap();
    let mut model = Sequential::new(spec, &mut DpRng::seeded(1)).unwrap();
    model.zero_grad();
    Noise::Gaussian { std: 1.0 }.add(&mut model, &mut DpRng::seeded(2));
    let grads: Vec<Vec<f64>> = model
        .params()
        .iter()
        .map(|p| p.grad.iter().map(|&v| f64::from(v)).collect())
        .collect();
    // The first weight (64 × 128 = one whole chunk) against the second (128 × 10).
    let m = grads[2].len();
    let r = correlation(&grads[0][..m], &grads[2][..m]);
    assert!(r.abs() < Z / (m as f64).sqrt(), "r = {r} over {m}");
    assert_ne!(grads[0][0], grads[1][0]);
}

/// Trains `cfg` on the digits data in a pool of `threads` rayon threads (`None`: called from
/// outside any pool, on the global one); the parameters' bits.
fn trained_bits(cfg: &TrainConfig, threads: Option<usize>) -> Vec<u32> {
    let data = dpml_data::load(
        &"digits".parse::<dpml_data::Source>().unwrap(),
        &dpml_data::LoadOptions::default(),
    )
    .unwrap()
    .train;
    let run = || train(cfg, &data, None, &mut DpRng::seeded(5), &mut |_| {});
    let out = match threads {
        Some(threads) => rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(run),
        None => run(),
    };
    out.unwrap()
        .model
        .params()
        .iter()
        .flat_map(|p| p.value.iter().map(|v| v.to_bits()))
        .collect()
}

/// A seeded run gives the same model on 1 and 2 threads, and on the global pool kept awake,
/// with either noise. The MLP has 64·200 = 12,800 first-layer weights: two chunks, one
/// partial.
#[test]
fn seeded_runs_are_identical_on_one_and_two_threads() {
    for exact_noise in [false, true] {
        let cfg = TrainConfig {
            model: "mlp".into(),
            hidden: vec![200],
            epochs: 1.0,
            batch_size: 128,
            privacy: Privacy::NoiseMultiplier(1.0),
            exact_noise,
            normalize: Normalization::PublicRange,
            ..TrainConfig::default()
        };
        let one = trained_bits(&cfg, Some(1));
        assert!(one.len() > CHUNK);
        assert_eq!(
            one,
            trained_bits(&cfg, Some(2)),
            "exact_noise = {exact_noise}"
        );
        // Started from outside any pool, the steps keep the global pool's other threads
        // awake (`on_pool_awake`), which changes who runs each piece, not what it computes.
        assert_eq!(one, trained_bits(&cfg, None), "exact_noise = {exact_noise}");
    }
}

/// Nanoseconds per coordinate of one noise fill on one thread, over an MLP-sized vector
/// (784·512 weights, 49 chunks). A measurement, not a check: run with
/// `cargo test --release -p dpml-learn --lib noise_fill_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn noise_fill_speed() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let grid = GridNoise::new(1.1, 1.0, 784 * 512).unwrap();
    for (name, noise) in [
        ("float", Noise::Gaussian { std: 1.1 }),
        ("exact", Noise::Exact(grid)),
    ] {
        let mut v = vec![0.0f32; 784 * 512];
        let mut rng = DpRng::seeded(3);
        let reps = 20;
        let best = (0..reps)
            .map(|_| {
                let key = rng.stream_key();
                let start = std::time::Instant::now();
                pool.install(|| match &noise {
                    Noise::Gaussian { std } => add_gaussian(&mut v, *std, &key, 0),
                    Noise::Exact(grid) => grid.add_to(&mut v, &key, 0),
                    Noise::None => {}
                });
                start.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        println!(
            "{name}: {:.2} ns per coordinate (best of {reps}, one thread)",
            best * 1e9 / v.len() as f64
        );
    }
    // The floor under the float noise: the ChaCha20 stream alone, one 32-bit word per value.
    let mut bytes = vec![0u8; 4 * CHUNK];
    let key = DpRng::seeded(4).stream_key();
    let start = std::time::Instant::now();
    let reps = 400;
    for i in 0..reps {
        key.stream(i).as_rng().fill_bytes(&mut bytes);
    }
    println!(
        "chacha20 alone: {:.2} ns per 32-bit word ({})",
        start.elapsed().as_secs_f64() * 1e9 / (reps as usize * CHUNK) as f64,
        bytes[7]
    );
}
