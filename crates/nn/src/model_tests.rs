//! Model-level tests: whole-chain gradients against finite differences, and private backward
//! passes against brute force (one forward/backward per sample).

use super::*;
use crate::layers::LayerSpec;
use crate::layers::testutil::random;
use crate::loss::cross_entropy;
use crate::optim::{Optimizer, Sgd};

fn small_spec(smooth: bool) -> ModelSpec {
    let (act, pool) = if smooth {
        (
            LayerSpec::Tanh,
            LayerSpec::AvgPool2d {
                kernel: 2,
                stride: 2,
            },
        )
    } else {
        (
            LayerSpec::Relu,
            LayerSpec::MaxPool2d {
                kernel: 2,
                stride: 2,
            },
        )
    };
    ModelSpec {
        name: "test".into(),
        input_shape: vec![2, 8, 8],
        layers: vec![
            LayerSpec::Conv2d {
                in_channels: 2,
                out_channels: 4,
                kernel: 3,
                stride: 1,
                padding: 1,
            },
            LayerSpec::GroupNorm {
                groups: 2,
                channels: 4,
            },
            act.clone(),
            pool,
            LayerSpec::Conv2d {
                in_channels: 4,
                out_channels: 3,
                kernel: 2,
                stride: 2,
                padding: 0,
            },
            act.clone(),
            LayerSpec::Flatten,
            LayerSpec::Linear {
                in_features: 12,
                out_features: 5,
            },
            act,
            LayerSpec::Linear {
                in_features: 5,
                out_features: 3,
            },
        ],
    }
}

/// The non-smooth [`small_spec`] model from `seed`, its convolutions' norms in `mode`.
fn small_model(mode: ConvNormMode, seed: u64) -> Sequential {
    let mut m = Sequential::new(small_spec(false), &mut DpRng::seeded(seed)).unwrap();
    m.set_conv_norm_mode(mode);
    m
}

fn labels(n: usize) -> Vec<usize> {
    (0..n).map(|i| i % 3).collect()
}

/// Summed cross-entropy and its output gradient.
fn loss_grad(m: &mut Sequential, x: &Tensor, y: &[usize]) -> (f64, Tensor) {
    let (mut g, mut l) = (Tensor::default(), Vec::new());
    cross_entropy(m.forward(x).unwrap(), y, Some(&mut g), &mut l).unwrap();
    (l.iter().map(|&v| v as f64).sum(), g)
}

fn flat_grads(m: &Sequential) -> Vec<f32> {
    m.params().iter().flat_map(|p| p.grad.clone()).collect()
}

#[test]
fn whole_model_gradient_matches_finite_differences() {
    let mut rng = DpRng::seeded(1);
    let mut m = Sequential::new(small_spec(true), &mut rng).unwrap();
    let x = random(&[3, 2, 8, 8], &mut rng);
    let y = labels(3);
    let (_, g) = loss_grad(&mut m, &x, &y);
    m.zero_grad();
    m.backward(&g, BackwardMode::NonPrivate).unwrap();
    let analytic = flat_grads(&m);
    // Every 7th coordinate (all layers are covered) by central differences, h = 1e-3:
    // f32 round-off in L (≈ 3, ulp 2.4e-7, a few hundred terms) / 2h ≈ 1e-3; allow 4e-3 + 2%.
    let h = 1e-3;
    let total = analytic.len();
    for j in (0..total).step_by(7) {
        let mut eval = |delta: f32| {
            m.for_each_param_mut(|_, _| {});
            let mut k = 0;
            m.for_each_param_mut(|_, p| {
                if j >= k && j < k + p.len() {
                    p.value[j - k] += delta;
                }
                k += p.len();
            });
            loss_grad(&mut m, &x, &y).0
        };
        let up = eval(h);
        let down = eval(-2.0 * h);
        eval(h);
        let fd = (up - down) / (2.0 * h as f64);
        let an = analytic[j] as f64;
        assert!(
            (fd - an).abs() < 4e-3 + 2e-2 * an.abs(),
            "coordinate {j}/{total}: fd {fd} vs analytic {an}"
        );
    }
}

/// Per-sample gradients the slow way: one forward and backward per sample.
fn brute_force(m: &mut Sequential, x: &Tensor, y: &[usize]) -> Vec<Vec<f32>> {
    let rec = m.input_shape().to_vec();
    (0..x.batch())
        .map(|i| {
            let xi = Tensor::from_vec(&[&[1], &rec[..]].concat(), x.record(i).to_vec()).unwrap();
            let (_, g) = loss_grad(m, &xi, &y[i..=i]);
            m.zero_grad();
            m.backward(&g, BackwardMode::NonPrivate).unwrap();
            flat_grads(m)
        })
        .collect()
}

/// Lengths of each parameterised layer's slice of the flat gradient.
fn layer_lengths(m: &Sequential) -> Vec<usize> {
    m.param_layers
        .iter()
        .map(|&l| m.layers[l].params().iter().map(|p| p.len()).sum())
        .collect()
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt() as f32
}

/// Checks the private backward pass against brute force: total norms, then the clipped sum.
/// f32 sums of the same terms in different orders: relative 1e-4 of the absolute sum.
fn check_private(m: &mut Sequential, x: &Tensor, y: &[usize], per_layer: bool) {
    let per_sample = brute_force(m, x, y);
    let norms: Vec<f32> = per_sample.iter().map(|g| norm(g)).collect();
    let mut sorted = norms.clone();
    sorted.sort_by(f32::total_cmp);
    let c = sorted[norms.len() / 2]; // median: about half the samples are clipped
    let clip = if per_layer {
        ClipConfig::per_layer(c)
    } else {
        ClipConfig::flat(c)
    }
    .unwrap();
    let (_, g) = loss_grad(m, x, y);
    m.zero_grad();
    let got_norms = m
        .backward(&g, BackwardMode::Private(clip))
        .unwrap()
        .to_vec();
    for (i, (a, b)) in got_norms.iter().zip(&norms).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * b,
            "sample {i}: norm {a} vs brute force {b}"
        );
    }
    // Expected clipped sum, the slow way.
    let lens = layer_lengths(m);
    let cl = c / (lens.len() as f32).sqrt();
    let mut want = vec![0f64; per_sample[0].len()];
    let mut scale = vec![0f64; want.len()];
    for g in &per_sample {
        let mut start = 0;
        for &len in &lens {
            let part = &g[start..start + len];
            let f = if per_layer {
                (cl / (norm(part) + 1e-6)).min(1.0)
            } else {
                (c / (norm(g) + 1e-6)).min(1.0)
            };
            for (j, v) in part.iter().enumerate() {
                want[start + j] += (f * v) as f64;
                scale[start + j] += v.abs() as f64;
            }
            start += len;
        }
    }
    let got = flat_grads(m);
    for (j, ((a, b), s)) in got.iter().zip(&want).zip(&scale).enumerate() {
        assert!(
            (*a as f64 - b).abs() <= 1e-4 * s.max(1e-3),
            "coordinate {j}: {a} vs {b}"
        );
    }
    // Every sample's clipped gradient has norm ≤ C: check on the slow side too.
    for g in &per_sample {
        let f = (c / (norm(g) + 1e-6)).min(1.0);
        assert!(f * norm(g) <= c * (1.0 + 1e-6));
    }
}

#[test]
fn private_backward_matches_brute_force_flat_and_per_layer() {
    let mut rng = DpRng::seeded(2);
    let x = random(&[6, 2, 8, 8], &mut rng);
    let y = labels(6);
    for mode in [ConvNormMode::Ghost, ConvNormMode::Materialize] {
        for per_layer in [false, true] {
            let mut m = small_model(mode, 3);
            check_private(&mut m, &x, &y, per_layer);
        }
    }
}

#[test]
fn cnn_private_backward_matches_brute_force_in_both_conv_modes() {
    let mut rng = DpRng::seeded(4);
    let x = random(&[4, 1, 28, 28], &mut rng);
    let y = labels(4);
    for mode in [
        ConvNormMode::Auto,
        ConvNormMode::Ghost,
        ConvNormMode::Materialize,
    ] {
        let spec = ModelSpec::named("cnn", &[1, 28, 28], 10, &[]).unwrap();
        let mut m = Sequential::new(spec, &mut DpRng::seeded(5)).unwrap();
        m.set_conv_norm_mode(mode);
        check_private(&mut m, &x, &y, false);
    }
}

/// A batch of several clipping groups (72 samples: 32 + 32 + 8) matches brute force in both
/// conv modes, and its private backward pass gives the same gradients bit for bit on 1, 2 and
/// 3 threads: the groups, and so the order of the sums, do not depend on the thread count.
#[test]
fn private_backward_over_several_groups_is_exact_and_the_same_on_any_thread_count() {
    let mut rng = DpRng::seeded(8);
    let x = random(&[72, 2, 8, 8], &mut rng);
    let y = labels(72);
    for mode in [ConvNormMode::Ghost, ConvNormMode::Materialize] {
        let model = || small_model(mode, 3);
        check_private(&mut model(), &x, &y, false);
        let grads_on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut m = model();
                let (_, g) = loss_grad(&mut m, &x, &y);
                m.zero_grad();
                let clip = ClipConfig::flat(0.5).unwrap();
                m.backward(&g, BackwardMode::Private(clip)).unwrap();
                flat_grads(&m)
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>()
            })
        };
        let one = grads_on(1);
        assert_eq!(one, grads_on(2), "{mode:?}");
        assert_eq!(one, grads_on(3), "{mode:?}");
    }
}

#[test]
fn virtual_batches_accumulate_to_the_full_batch() {
    let mut rng = DpRng::seeded(6);
    let x = random(&[6, 2, 8, 8], &mut rng);
    let y = labels(6);
    let mut m = Sequential::new(small_spec(false), &mut DpRng::seeded(7)).unwrap();
    let clip = BackwardMode::Private(ClipConfig::flat(0.5).unwrap());
    let (_, g) = loss_grad(&mut m, &x, &y);
    m.zero_grad();
    m.backward(&g, clip).unwrap();
    let full = flat_grads(&m);
    m.zero_grad();
    let rec = x.record_len();
    for (lo, hi) in [(0, 4), (4, 6)] {
        let part =
            Tensor::from_vec(&[hi - lo, 2, 8, 8], x.data()[lo * rec..hi * rec].to_vec()).unwrap();
        let (_, g) = loss_grad(&mut m, &part, &y[lo..hi]);
        m.backward(&g, clip).unwrap();
    }
    for (a, b) in flat_grads(&m).iter().zip(&full) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

#[test]
fn wrong_input_and_gradient_shapes_are_refused() {
    let spec = ModelSpec::named("mlp", &[4], 2, &[3]).unwrap();
    let mut m = Sequential::new(spec, &mut DpRng::seeded(0)).unwrap();
    let msg = m.forward(&Tensor::zeros(&[2, 5])).unwrap_err().to_string();
    assert!(msg.contains("[4]") && msg.contains("[2, 5]"), "{msg}");
    m.forward(&Tensor::zeros(&[2, 4])).unwrap();
    assert!(
        m.backward(&Tensor::zeros(&[3, 2]), BackwardMode::NonPrivate)
            .is_err()
    );
    assert!(
        ClipConfig::flat(0.0)
            .unwrap_err()
            .to_string()
            .contains("got 0")
    );
    assert!(
        ClipConfig::flat(f32::NAN)
            .unwrap_err()
            .to_string()
            .contains("NaN")
    );
}

#[test]
fn spec_with_wrong_layer_shape_is_refused_naming_the_layer() {
    let mut spec = small_spec(false);
    spec.layers[7] = LayerSpec::Linear {
        in_features: 13,
        out_features: 5,
    };
    let msg = Sequential::new(spec, &mut DpRng::seeded(0))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("layer 7") && msg.contains("[13]") && msg.contains("[12]"),
        "{msg}"
    );
}

#[test]
fn model_without_parameters_backpropagates_in_both_modes() {
    let spec = ModelSpec {
        name: "act".into(),
        input_shape: vec![3],
        layers: vec![LayerSpec::Tanh],
    };
    let mut m = Sequential::new(spec, &mut DpRng::seeded(0)).unwrap();
    m.forward(&Tensor::zeros(&[2, 3])).unwrap();
    let g = Tensor::zeros(&[2, 3]);
    assert!(m.backward(&g, BackwardMode::NonPrivate).unwrap().is_empty());
    let norms = m
        .backward(&g, BackwardMode::Private(ClipConfig::flat(1.0).unwrap()))
        .unwrap();
    assert_eq!(norms, &[0.0, 0.0]);
}

/// `x` with the record `bad` inserted at position `at`.
fn insert_record(x: &Tensor, at: usize, bad: &[f32]) -> Tensor {
    let len = x.record_len();
    let mut shape = x.shape().to_vec();
    shape[0] += 1;
    let mut v = x.data()[..at * len].to_vec();
    v.extend_from_slice(bad);
    v.extend_from_slice(&x.data()[at * len..]);
    Tensor::from_vec(&shape, v).unwrap()
}

/// The private backward pass on a fresh gradient: the per-sample norms and the clipped sum.
fn private_sum(
    m: &mut Sequential,
    x: &Tensor,
    y: &[usize],
    clip: ClipConfig,
) -> (Vec<f32>, Vec<f32>) {
    let (_, g) = loss_grad(m, x, y);
    m.zero_grad();
    let norms = m
        .backward(&g, BackwardMode::Private(clip))
        .unwrap()
        .to_vec();
    (norms, flat_grads(m))
}

/// Inserts each poisoned record of `bad` (labelled 0) at position 1 of the clean batch `x` and
/// checks, in both clipping modes: the clipped sum is finite and equals the clean batch's
/// clipped sum plus the poisoned record's own clipped contribution (computed alone), which is
/// exactly zero when the record's norm is not finite; a plain SGD step then leaves every
/// parameter finite. Records listed in `must_drop` must have a non-finite norm. Tolerance:
/// relative 1e-5 of the largest coordinate (the same f32 terms summed in a different order).
fn check_poisoned(
    m: &mut Sequential,
    x: &Tensor,
    y: &[usize],
    bad: &[Vec<f32>],
    must_drop: &[usize],
) {
    let mut norms = private_sum(m, x, y, ClipConfig::flat(1.0).unwrap()).0;
    norms.sort_by(f32::total_cmp);
    let c = norms[norms.len() / 2];
    let rec = m.input_shape().to_vec();
    let y_full: Vec<usize> = [&y[..1], &[0], &y[1..]].concat();
    for per_layer in [false, true] {
        let clip = if per_layer {
            ClipConfig::per_layer(c)
        } else {
            ClipConfig::flat(c)
        }
        .unwrap();
        let clean = private_sum(m, x, y, clip).1;
        for (k, b) in bad.iter().enumerate() {
            let what = format!("poisoned record {k}, per_layer {per_layer}");
            let one = Tensor::from_vec(&[&[1], &rec[..]].concat(), b.clone()).unwrap();
            let (norm_one, alone) = private_sum(m, &one, &[0], clip);
            if must_drop.contains(&k) {
                assert!(
                    !norm_one[0].is_finite(),
                    "{what}: norm {} is finite",
                    norm_one[0]
                );
            }
            if !norm_one[0].is_finite() {
                assert!(
                    alone.iter().all(|&v| v == 0.0),
                    "{what}: a dropped record added to the sum"
                );
            }
            let (norms, full) = private_sum(m, &insert_record(x, 1, b), &y_full, clip);
            assert_eq!(norms[1].is_finite(), norm_one[0].is_finite(), "{what}");
            let scale = clean.iter().chain(&alone).fold(0f32, |s, v| s.max(v.abs()));
            for (j, ((f, a), o)) in full.iter().zip(&clean).zip(&alone).enumerate() {
                assert!(f.is_finite(), "{what}: coordinate {j} is {f}");
                assert!(
                    (f - (a + o)).abs() <= 1e-5 * scale,
                    "{what}: coordinate {j}: {f} vs clean {a} + poisoned alone {o}"
                );
            }
            // The step on this sum keeps every parameter finite; then undo it, so the next
            // record is compared against the same clean sum.
            let before: Vec<Vec<f32>> = m.params().iter().map(|p| p.value.clone()).collect();
            Sgd::new(0.9, false, 1e-4).unwrap().step(m, 0.1);
            assert!(
                m.params()
                    .iter()
                    .all(|p| p.value.iter().all(|v| v.is_finite())),
                "{what}: a parameter is not finite after the step"
            );
            m.for_each_param_mut(|i, p| p.value.copy_from_slice(&before[i]));
        }
    }
}

/// Poisoned records: the mixed pattern ±1e38, ±inf, NaN (norm always non-finite), only ±3e38
/// (overflow), a lone NaN, and a huge constant record, each cycled over `len` values.
fn poisons(len: usize) -> Vec<Vec<f32>> {
    let patterns: [&[f32]; 4] = [
        &[1e38, -1e38, f32::INFINITY, f32::NEG_INFINITY, f32::NAN],
        &[3e38, -3e38],
        &[0.5, f32::NAN, -0.5],
        &[3e38],
    ];
    patterns
        .iter()
        .map(|p| p.iter().copied().cycle().take(len).collect())
        .collect()
}

#[test]
fn poisoned_record_is_left_out_in_every_layer_and_clipping_mode() {
    let mut rng = DpRng::seeded(8);
    let x = random(&[5, 2, 8, 8], &mut rng);
    let y = labels(5);
    for mode in [ConvNormMode::Ghost, ConvNormMode::Materialize] {
        let mut m = small_model(mode, 9);
        check_poisoned(&mut m, &x, &y, &poisons(2 * 8 * 8), &[0]);
    }
}

/// The review's case: the CSV record `3e38,3e38` in an mlp gives a hidden activation of ±inf;
/// it must be dropped rather than turn the clipped sum into NaN.
#[test]
fn huge_record_in_an_mlp_is_dropped_not_turned_into_nan() {
    let mut rng = DpRng::seeded(10);
    let x = random(&[4, 2], &mut rng);
    let y = labels(4);
    let spec = ModelSpec::named("mlp", &[2], 3, &[16]).unwrap();
    let mut m = Sequential::new(spec, &mut DpRng::seeded(11)).unwrap();
    let mut bad = poisons(2);
    bad.insert(0, vec![3e38, 3e38]);
    bad.push(vec![-3e38, 3e38]);
    check_poisoned(&mut m, &x, &y, &bad, &[0, 1]);
}

#[test]
fn an_all_poisoned_batch_adds_nothing_and_the_step_stays_finite() {
    let spec = ModelSpec::named("mlp", &[2], 3, &[16]).unwrap();
    let mut m = Sequential::new(spec, &mut DpRng::seeded(12)).unwrap();
    let x = Tensor::from_vec(
        &[3, 2],
        vec![3e38, 3e38, f32::NAN, 1.0, f32::INFINITY, -3e38],
    )
    .unwrap();
    for clip in [ClipConfig::flat(1.0), ClipConfig::per_layer(1.0)] {
        let (norms, sum) = private_sum(&mut m, &x, &[0, 1, 2], clip.unwrap());
        assert!(norms.iter().all(|n| !n.is_finite()), "{norms:?}");
        assert!(sum.iter().all(|&v| v == 0.0), "{sum:?}");
        let before: Vec<f32> = m.params().iter().flat_map(|p| p.value.clone()).collect();
        Sgd::new(0.9, false, 0.0).unwrap().step(&mut m, 0.1);
        let after: Vec<f32> = m.params().iter().flat_map(|p| p.value.clone()).collect();
        assert_eq!(before, after);
    }
}
