//! Per-layer forward/backward times of the `cnn` model at batch 256 (sum and per-sample modes),
//! to see where a training step spends its time (CPU time, mean of 20 runs). Run with
//! `--release`.

use std::time::Instant;

#[path = "util/cpu.rs"]
mod cpu;

/// Mean CPU time of `reps` runs of `f` in ms (process CPU time, so other processes on a shared
/// machine do not count; with `RAYON_NUM_THREADS=1` this is the single-thread cost), falling
/// back to wall time without `/proc`.
fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    let (c0, t0) = (cpu::process_cpu_ns(), Instant::now());
    (0..reps).for_each(|_| f());
    match (c0, cpu::process_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e6 / reps as f64,
        _ => t0.elapsed().as_secs_f64() * 1e3 / reps as f64,
    }
}

use dpml_mechanisms::DpRng;
use dpml_nn::{GradMode, ModelSpec, Tensor};

fn main() {
    let n = 256;
    let reps = 20;
    let mut rng = DpRng::seeded(1);
    let spec = ModelSpec::named("cnn", &[1, 28, 28], 10, &[]).expect("spec");
    let mut shape = spec.input_shape.clone();
    let mut x = Tensor::from_vec(
        &[n, 1, 28, 28],
        (0..n * 784)
            .map(|_| rng.uniform_f64() as f32 - 0.5)
            .collect(),
    )
    .expect("x");
    for (i, ls) in spec.layers.iter().enumerate() {
        let mut layer = ls.build(&shape, &mut rng).expect("layer");
        let mut y = Tensor::default();
        let f = best(reps, || layer.forward(&x, &mut y));
        let gy = Tensor::from_vec(
            y.shape(),
            (0..y.data().len())
                .map(|_| rng.uniform_f64() as f32 - 0.5)
                .collect(),
        )
        .expect("gy");
        let mut gx = Tensor::default();
        let b = best(reps, || {
            layer.backward(
                &x,
                &y,
                &gy,
                if i > 0 { Some(&mut gx) } else { None },
                GradMode::Sum,
            )
        });
        let mut sq = vec![0.0; n];
        let c = vec![0.5; n];
        let p = best(reps, || {
            layer.backward(
                &x,
                &y,
                &gy,
                if i > 0 { Some(&mut gx) } else { None },
                GradMode::PerSample(&mut sq),
            );
            layer.accumulate_clipped(&x, &gy, &c);
        });
        println!(
            "{i:>2} {:<70} fwd {f:6.3} ms  bwd {b:6.3} ms  private bwd {p:6.3} ms",
            format!("{ls:?}")
        );
        shape = layer.out_shape().to_vec();
        x = y;
    }
}
