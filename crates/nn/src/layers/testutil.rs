//! Shared test helpers: finite-difference gradient checks and brute-force per-sample gradient
//! checks for any [`Layer`].

use dpml_mechanisms::DpRng;

use super::{GradMode, Layer};
use crate::tensor::Tensor;

/// Values in ±1 from a seeded generator.
pub fn random(shape: &[usize], rng: &mut DpRng) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec(
        shape,
        (0..n)
            .map(|_| (2.0 * rng.uniform_f64() - 1.0) as f32)
            .collect(),
    )
    .unwrap()
}

/// Distinct values spaced 0.05 apart, none within 0.025 of zero, in random order, so that a
/// finite-difference step of 1e-3 never crosses a ReLU kink or changes a max-pool winner.
pub fn spaced(shape: &[usize], rng: &mut DpRng) -> Tensor {
    let n: usize = shape.iter().product();
    let mut v: Vec<f32> = (0..n)
        .map(|k| (k as f32 - n as f32 / 2.0) * 0.05 + 0.025)
        .collect();
    for i in (1..n).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
    Tensor::from_vec(shape, v).unwrap()
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
}

/// L(x) = <r, layer(x)>.
fn objective(layer: &mut dyn Layer, x: &Tensor, r: &Tensor) -> f64 {
    let mut y = Tensor::default();
    layer.forward(x, &mut y);
    dot(y.data(), r.data())
}

fn all_grads(layer: &dyn Layer) -> Vec<f32> {
    layer.params().iter().flat_map(|p| p.grad.clone()).collect()
}

fn zero_grads(layer: &mut dyn Layer) {
    for p in layer.params_mut() {
        p.grad.iter_mut().for_each(|g| *g = 0.0);
    }
}

/// Central differences (step 1e-3) of L = <r, layer(x)> against the analytic input and
/// parameter gradients. The tolerance: f32 round-off in L (|L| ≲ 10, ulp ≈ 1e-6) divided by
/// 2·1e-3 gives ≈ 1e-3 absolute noise; the O(h²) truncation term is far smaller. So we allow
/// 5e-3 + 1e-2·|g|.
pub fn check_layer(layer: &mut dyn Layer, x_shape: &[usize], seed: u64) {
    let mut rng = DpRng::seeded(seed);
    let mut x = spaced(x_shape, &mut rng);
    let mut y = Tensor::default();
    layer.forward(&x, &mut y);
    let r = random(y.shape(), &mut rng);
    zero_grads(layer);
    let mut gx = Tensor::default();
    layer.backward(&x, &y, &r, Some(&mut gx), GradMode::Sum);
    assert_eq!(gx.shape(), x.shape());
    let h = 1e-3f32;
    let close = |fd: f64, an: f32, what: &str| {
        assert!(
            (fd - an as f64).abs() < 5e-3 + 1e-2 * (an as f64).abs(),
            "{what}: finite difference {fd} vs analytic {an}"
        );
    };
    for j in 0..x.data().len() {
        let v = x.data()[j];
        x.data_mut()[j] = v + h;
        let up = objective(layer, &x, &r);
        x.data_mut()[j] = v - h;
        let down = objective(layer, &x, &r);
        x.data_mut()[j] = v;
        close(
            (up - down) / (2.0 * h as f64),
            gx.data()[j],
            &format!("input grad {j}"),
        );
    }
    let grads = all_grads(layer);
    let mut k = 0;
    let nparams = layer.params().len();
    for p in 0..nparams {
        let len = layer.params()[p].len();
        for j in 0..len {
            let v = layer.params()[p].value[j];
            layer.params_mut()[p].value[j] = v + h;
            let up = objective(layer, &x, &r);
            layer.params_mut()[p].value[j] = v - h;
            let down = objective(layer, &x, &r);
            layer.params_mut()[p].value[j] = v;
            close(
                (up - down) / (2.0 * h as f64),
                grads[k],
                &format!("param {p} coordinate {j}"),
            );
            k += 1;
        }
    }
}

/// Per-sample squared norms and the clipped sum against brute force: one forward and backward
/// per sample gives gᵢ; then ‖gᵢ‖² must match the layer's per-sample norms and the clipped sum
/// with factors cᵢ = min(1, C/‖gᵢ‖) (C the median norm, so some samples are clipped) must equal
/// Σ cᵢ gᵢ. Both sides are f32 sums of the same terms in different order: relative 1e-4.
pub fn check_per_sample(layer: &mut dyn Layer, x_shape: &[usize], seed: u64) {
    let mut rng = DpRng::seeded(seed);
    let x = random(x_shape, &mut rng);
    let n = x.batch();
    let mut y = Tensor::default();
    layer.forward(&x, &mut y);
    let gy = random(y.shape(), &mut rng);
    let mut per_sample = Vec::new();
    for i in 0..n {
        let xi = Tensor::from_vec(&[&[1], &x_shape[1..]].concat(), x.record(i).to_vec()).unwrap();
        let gi =
            Tensor::from_vec(&[&[1], &y.shape()[1..]].concat(), gy.record(i).to_vec()).unwrap();
        let mut yi = Tensor::default();
        layer.forward(&xi, &mut yi);
        zero_grads(layer);
        layer.backward(&xi, &yi, &gi, None, GradMode::Sum);
        per_sample.push(all_grads(layer));
    }
    layer.forward(&x, &mut y);
    zero_grads(layer);
    let mut sq = vec![0.0; n];
    layer.backward(&x, &y, &gy, None, GradMode::PerSample(&mut sq));
    assert!(
        all_grads(layer).iter().all(|&g| g == 0.0),
        "per-sample mode must not touch grad"
    );
    let norms: Vec<f32> = per_sample.iter().map(|g| dot(g, g).sqrt() as f32).collect();
    for (i, (s, b)) in sq.iter().zip(&norms).enumerate() {
        assert!(
            (s.sqrt() - b).abs() <= 1e-4 * b.max(1e-3),
            "sample {i}: norm {} vs brute force {b}",
            s.sqrt()
        );
    }
    let mut sorted = norms.clone();
    sorted.sort_by(f32::total_cmp);
    let c = sorted[n / 2];
    let factors: Vec<f32> = norms.iter().map(|&nm| (c / nm).min(1.0)).collect();
    layer.accumulate_clipped(&x, &gy, &factors);
    let got = all_grads(layer);
    for (j, g) in got.iter().enumerate() {
        let want: f32 = per_sample.iter().zip(&factors).map(|(p, f)| p[j] * f).sum();
        let scale: f32 = per_sample.iter().map(|p| p[j].abs()).sum::<f32>().max(1e-3);
        assert!(
            (g - want).abs() <= 1e-4 * scale,
            "coordinate {j}: clipped sum {g} vs {want}"
        );
    }
}
