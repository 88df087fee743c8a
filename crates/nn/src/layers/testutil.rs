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
/// Moves every parameter of `layer` by a uniform draw in [-0.5, 0.5), so that tests of
/// normalisation layers exercise their affine part (γ = 1, β = 0 at initialisation would hide it).
pub fn perturb_params(layer: &mut dyn Layer, seed: u64) {
    let mut rng = DpRng::seeded(seed);
    for p in layer.params_mut() {
        p.value
            .iter_mut()
            .for_each(|v| *v += (rng.uniform_f64() - 0.5) as f32);
    }
}

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
    // The input gradient alone (`GradMode::InputOnly`): the same as above, and no parameter
    // gradient touched.
    layer.forward(&x, &mut y);
    zero_grads(layer);
    let mut gx_only = Tensor::default();
    layer.backward(&x, &y, &r, Some(&mut gx_only), GradMode::InputOnly);
    assert_eq!(gx_only.data(), gx.data(), "input gradient alone");
    assert!(
        all_grads(layer).iter().all(|&g| g == 0.0),
        "an input-only backward pass changed a parameter gradient"
    );
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

/// Values that poison one record: the first mixes huge, infinite and NaN values (its gradient
/// norm is always non-finite), the second is only huge (norms overflow f32, or stay finite
/// where the layer normalises them away), the third is a lone NaN.
pub const POISONS: [&[f32]; 3] = [
    &[1e38, -1e38, f32::INFINITY, f32::NEG_INFINITY, f32::NAN],
    &[3e38, -3e38, 1e38],
    &[f32::NAN],
];

/// Clip factors as the model computes them: min(1, C/(‖g‖ + 10⁻⁶)), and 0 for a non-finite
/// norm.
pub fn clip_factors(sq: &[f32], c: f32) -> Vec<f32> {
    sq.iter()
        .map(|s| {
            let nm = s.sqrt();
            if nm.is_finite() {
                (c / (nm + 1e-6)).min(1.0)
            } else {
                0.0
            }
        })
        .collect()
}

/// The batch `x` with the record `bad` inserted at position 1, and `gy` with `bad_gy`
/// inserted likewise.
fn with_record(x: &Tensor, bad: &[f32], gy: &Tensor, bad_gy: &[f32]) -> (Tensor, Tensor) {
    let insert = |t: &Tensor, row: &[f32]| {
        let mut shape = t.shape().to_vec();
        shape[0] += 1;
        let len = t.record_len();
        let mut v = t.data()[..len].to_vec();
        v.extend_from_slice(row);
        v.extend_from_slice(&t.data()[len..]);
        Tensor::from_vec(&shape, v).unwrap()
    };
    (insert(x, bad), insert(gy, bad_gy))
}

/// Private backward on (`x`, `gy`) with factors from C = `c`: the squared norms and the
/// clipped sum (all parameter gradients, flattened).
fn clipped_sum(layer: &mut dyn Layer, x: &Tensor, gy: &Tensor, c: f32) -> (Vec<f32>, Vec<f32>) {
    let mut y = Tensor::default();
    layer.forward(x, &mut y);
    assert_eq!(y.shape(), gy.shape());
    zero_grads(layer);
    let mut sq = vec![0.0; x.batch()];
    layer.backward(x, &y, gy, None, GradMode::PerSample(&mut sq));
    layer.accumulate_clipped(x, gy, &clip_factors(&sq, c));
    (sq, all_grads(layer))
}

/// One poisoned record (each of [`POISONS`], cycled over the record) among clean ones, in the
/// input `x` or in the output gradient `gy`: the clipped sum over the whole batch must be
/// finite and equal the clipped sum over the clean records plus the poisoned record's own
/// clipped contribution (clipping is per sample, so the two add). A record whose norm is not
/// finite must contribute exactly nothing, so there the sum equals the clean batch's; the mixed
/// pattern in `x` always has a non-finite norm, which checks the dropping is exercised.
/// Tolerance: relative 1e-5 of the largest clean coordinate (the same f32 terms, summed in a
/// different order across threads).
pub fn check_poisoned_sample(layer: &mut dyn Layer, x_shape: &[usize], seed: u64) {
    let mut rng = DpRng::seeded(seed);
    let x = random(x_shape, &mut rng);
    let mut y = Tensor::default();
    layer.forward(&x, &mut y);
    let gy = random(y.shape(), &mut rng);
    let mut norms: Vec<f32> = clipped_sum(layer, &x, &gy, 1.0)
        .0
        .iter()
        .map(|s| s.sqrt())
        .collect();
    norms.sort_by(f32::total_cmp);
    let c = norms[norms.len() / 2]; // median: some clean samples are clipped
    let clean = clipped_sum(layer, &x, &gy, c).1;
    let scale = clean.iter().fold(0f32, |m, v| m.max(v.abs()));
    let (xlen, ylen) = (x.record_len(), gy.record_len());
    for (p, poison) in POISONS.iter().enumerate() {
        for in_x in [true, false] {
            let cycled =
                |len: usize| -> Vec<f32> { poison.iter().copied().cycle().take(len).collect() };
            let (bad_x, bad_gy) = if in_x {
                (cycled(xlen), gy.record(0).to_vec())
            } else {
                (x.record(0).to_vec(), cycled(ylen))
            };
            let what = format!("poison {p} in {}", if in_x { "x" } else { "gy" });
            // The poisoned record alone.
            let one = Tensor::from_vec(&[&[1], &x_shape[1..]].concat(), bad_x.clone()).unwrap();
            let one_gy =
                Tensor::from_vec(&[&[1], &gy.shape()[1..]].concat(), bad_gy.clone()).unwrap();
            let (sq_one, alone) = clipped_sum(layer, &one, &one_gy, c);
            if !sq_one[0].is_finite() {
                assert!(
                    alone.iter().all(|&v| v == 0.0),
                    "{what}: dropped record added {alone:?}"
                );
            } else {
                assert!(alone.iter().all(|v| v.is_finite()), "{what}: {alone:?}");
            }
            if p == 0 && in_x {
                assert!(
                    !sq_one[0].is_finite(),
                    "{what}: norm² {} is finite",
                    sq_one[0]
                );
            }
            // The full batch.
            let (xf, gyf) = with_record(&x, &bad_x, &gy, &bad_gy);
            let (sq_full, full) = clipped_sum(layer, &xf, &gyf, c);
            assert_eq!(sq_full[1].is_finite(), sq_one[0].is_finite(), "{what}");
            for (j, ((f, a), b)) in full.iter().zip(&clean).zip(&alone).enumerate() {
                let want = a + b;
                assert!(f.is_finite(), "{what}: coordinate {j} is {f}");
                assert!(
                    (f - want).abs() <= 1e-5 * scale.max(b.abs()),
                    "{what}: coordinate {j}: {f} vs clean {a} + poisoned alone {b}"
                );
            }
        }
    }
}
