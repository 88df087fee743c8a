//! Throughput of one training step of the `cnn` model on random 1×28×28 input: non-private
//! (forward + backward + SGD) against private (forward + backward with per-sample norms,
//! clipping and the clipped sum, Gaussian noise from the ChaCha20 `DpRng`, + SGD), measured in
//! the same run. Run with `cargo run -p dpml-nn --release --example step_bench [batch] [steps]`.
//! With `STEP_BENCH_ONLY=private` (or `nonprivate`) it runs that one mode once (conv norms
//! `Auto`), for instruction counts: `valgrind --tool=callgrind` at two step counts, the
//! difference divided by the difference in steps is the cost of one step (`--profile
//! profiling` instead of `--release` gives the same code with line tables, for per-line counts).

use std::time::Instant;

#[path = "util/cpu.rs"]
mod cpu;

use dpml_mechanisms::DpRng;
use dpml_nn::{
    BackwardMode, ClipConfig, ConvNormMode, ModelSpec, Optimizer, Sequential, Sgd, Tensor,
    cross_entropy,
};

fn gaussian(rng: &mut DpRng) -> f32 {
    // Box–Muller; benchmark noise only (releases use the exact samplers).
    let u1 = rng.uniform_f64().max(f64::MIN_POSITIVE);
    let u2 = rng.uniform_f64();
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

/// Samples per second of wall time, and per second of CPU time times the thread count (what a
/// machine with that many otherwise idle cores would give; robust to other processes).
fn run(mode: BackwardMode, conv_mode: ConvNormMode, batch: usize, steps: usize) -> (f64, f64) {
    let mut rng = DpRng::seeded(1);
    let spec = ModelSpec::named("cnn", &[1, 28, 28], 10, &[]).expect("cnn spec");
    let mut model = Sequential::new(spec, &mut rng).expect("cnn model");
    model.set_conv_norm_mode(conv_mode);
    let mut opt = Sgd::new(0.9, false, 0.0).expect("sgd");
    let x = Tensor::from_vec(
        &[batch, 1, 28, 28],
        (0..batch * 784).map(|_| rng.uniform_f64() as f32).collect(),
    )
    .expect("input");
    let labels: Vec<usize> = (0..batch).map(|_| rng.below(10) as usize).collect();
    let (mut grad, mut losses) = (Tensor::default(), Vec::new());
    let sigma_c = 1.0f32;
    let mut step = |model: &mut Sequential, rng: &mut DpRng| {
        let out = model.forward(&x).expect("forward");
        cross_entropy(out, &labels, Some(&mut grad), &mut losses).expect("loss");
        model.zero_grad();
        model.backward(&grad, mode).expect("backward");
        let private = matches!(mode, BackwardMode::Private(_));
        let scale = 1.0 / batch as f32;
        model.for_each_param_mut(|_, p| {
            for g in &mut p.grad {
                let noise = if private {
                    sigma_c * gaussian(rng)
                } else {
                    0.0
                };
                *g = (*g + noise) * scale;
            }
        });
        opt.step(model, 0.05);
    };
    for _ in 0..3 {
        step(&mut model, &mut rng);
    }
    let (t, c0) = (Instant::now(), cpu::process_cpu_ns());
    for _ in 0..steps {
        step(&mut model, &mut rng);
    }
    let wall = t.elapsed().as_secs_f64();
    let cpu_s = match (c0, cpu::process_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9 / rayon::current_num_threads() as f64,
        _ => wall,
    };
    let samples = (batch * steps) as f64;
    (samples / wall, samples / cpu_s)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let batch = args.first().copied().unwrap_or(256);
    let steps = args.get(1).copied().unwrap_or(40);
    let clip = BackwardMode::Private(ClipConfig::flat(1.0).expect("clip"));
    match std::env::var("STEP_BENCH_ONLY").as_deref() {
        Ok("private") => return only(clip, batch, steps),
        Ok("nonprivate") => return only(BackwardMode::NonPrivate, batch, steps),
        _ => {}
    }
    println!(
        "cnn, batch {batch}, {steps} steps per run, median of 3 runs, {} rayon threads",
        rayon::current_num_threads()
    );
    println!("samples/s by wall clock | by CPU time (÷ threads); ratio = private / non-private");
    let modes = [
        ConvNormMode::Auto,
        ConvNormMode::Ghost,
        ConvNormMode::Materialize,
    ];
    let mut res = vec![(Vec::new(), Vec::new()); 4];
    for _ in 0..3 {
        let (w, c) = run(BackwardMode::NonPrivate, ConvNormMode::Auto, batch, steps);
        res[0].0.push(w);
        res[0].1.push(c);
        for (k, m) in modes.iter().enumerate() {
            let (w, c) = run(clip, *m, batch, steps);
            res[k + 1].0.push(w);
            res[k + 1].1.push(c);
        }
    }
    let (nw, nc) = (median(res[0].0.clone()), median(res[0].1.clone()));
    println!("{:<26} {nw:>8.0} | {nc:>8.0}", "non-private");
    for (k, m) in modes.iter().enumerate() {
        let (w, c) = (median(res[k + 1].0.clone()), median(res[k + 1].1.clone()));
        println!(
            "{:<26} {w:>8.0} | {c:>8.0}   ratio {:.3} | {:.3}",
            format!("private, conv {m:?}"),
            w / nw,
            c / nc
        );
    }
}

/// One run of one mode (for instruction counts under callgrind).
fn only(mode: BackwardMode, batch: usize, steps: usize) {
    let (w, _) = run(mode, ConvNormMode::Auto, batch, steps);
    println!("{mode:?}: {w:.0} samples/s, batch {batch}, {steps} steps");
}
