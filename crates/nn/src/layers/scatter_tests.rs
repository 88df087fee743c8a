//! Tests of the scattering transform: shapes, filter properties derived from the documented
//! formulas, a brute-force spatial-domain reference, invariances, and its place in models.

use super::*;
use crate::{ModelSpec, Sequential, io};
use dpml_mechanisms::DpRng;

/// One record through a fresh layer.
fn scatter(img: &[f32], shape: [usize; 3], j: usize, l: usize) -> Tensor {
    let mut layer = Scattering2d::new(shape, j, l).unwrap();
    let x = Tensor::from_vec(&[1, shape[0], shape[1], shape[2]], img.to_vec()).unwrap();
    let mut y = Tensor::default();
    layer.forward(&x, &mut y);
    y
}

/// A smooth, asymmetric blob (a digit-like stroke) on an h×w grid, centred at (cy, cx).
fn blob(h: usize, w: usize, cy: f32, cx: f32) -> Vec<f32> {
    let mut v = Vec::with_capacity(h * w);
    for r in 0..h {
        for c in 0..w {
            let (y, x) = (r as f32 - cy, c as f32 - cx);
            v.push((-(y * y) / 8.0 - (x * x) / 3.0).exp() + 0.5 * (-(y - x).powi(2) / 2.0).exp());
        }
    }
    v
}

fn rel_diff(a: &[f32], b: &[f32]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum();
    let n: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum();
    (d / n).sqrt()
}

#[test]
fn output_shape_and_channel_count() {
    assert_eq!(scattering_channels(2, 8), 81);
    assert_eq!(scattering_channels(3, 8), 1 + 24 + 64 * 3);
    assert_eq!(scattering_channels(1, 4), 5);
    let layer = Scattering2d::new([3, 28, 28], 2, 8).unwrap();
    assert_eq!(layer.out_shape(), &[243, 7, 7]);
    let layer = Scattering2d::new([1, 30, 17], 2, 8).unwrap();
    assert_eq!(layer.out_shape(), &[81, 7, 4]);
    let y = scatter(&blob(28, 28, 13.0, 14.0), [1, 28, 28], 2, 8);
    assert_eq!(y.shape(), &[1, 81, 7, 7]);
    assert!(y.data().iter().all(|v| v.is_finite()));
}

#[test]
fn bad_parameters_are_named() {
    let msg = |r: Result<Scattering2d>| r.unwrap_err().to_string();
    assert!(msg(Scattering2d::new([1, 28, 28], 0, 8)).contains("got 0"));
    assert!(msg(Scattering2d::new([1, 28, 28], 2, 0)).contains("got 0"));
    // 2^3 = 8 > 6 and the padding of 5 is not shorter than 4.
    let m = msg(Scattering2d::new([1, 4, 4], 3, 8));
    assert!(m.contains("4 x 4"), "{m}");
}

/// The low-pass φ is a normalised Gaussian: its DC gain is Σφ = 2πσ²/(2·3.1415σ²) (the
/// lattice sum of a Gaussian with σ ≥ 0.8 equals 2πσ² to ~1e-10). Each Morlet wavelet sums
/// to zero, and its Fourier transform peaks at the frequency ξ(cos α, sin α)·M/(2π) bins
/// with α = (⌊L/2⌋ − 1 − θ)π/L and ξ = 3π/(4·2^j), as the formula documented in the module
/// says.
#[test]
fn filters_follow_the_documented_formulas() {
    let bank = FilterBank::new(28, 28, 2, 8).unwrap();
    assert_eq!((bank.mp, bank.np, bank.pad), (36, 36, [4, 4]));
    let dc = 2.0 * PI / (2.0 * KYMATIO_PI);
    assert!((f64::from(bank.phi[0][0]) - dc).abs() < 1e-5);
    // Periodising keeps the DC gain.
    assert!((f64::from(bank.phi[1][0]) - dc).abs() < 1e-5);
    let m = 36.0;
    for (n, p) in bank.psi.iter().enumerate() {
        let (j, theta) = (p.j, n % 8);
        assert_eq!(j, n / 8);
        assert!(p.levels[0][0].abs() < 1e-6, "psi {n} DC {}", p.levels[0][0]);
        let f = &p.levels[0];
        let (arg, _) = f
            .iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
        let alpha = (3.0 - theta as f64) * PI / 8.0;
        let xi = 0.75 * PI / f64::from(1u32 << j);
        let want = [
            xi * alpha.cos() * m / (2.0 * PI),
            xi * alpha.sin() * m / (2.0 * PI),
        ];
        let got = [(arg / 36) as f64, (arg % 36) as f64];
        for (g, w) in got.iter().zip(want) {
            // Circular distance in bins; the peak is the nearest bin to the centre frequency
            // or its neighbour (the real part of a slanted filter is not exactly symmetric).
            let d = (g - w.rem_euclid(m)).abs();
            assert!(
                d.min(m - d) <= 1.0,
                "psi {n}: peak at {got:?}, want {want:?}"
            );
        }
    }
}

/// A constant image: S₀ is the constant times φ's DC gain, every wavelet coefficient is zero
/// (wavelets have zero mean, and reflect padding keeps the image constant).
#[test]
fn constant_image_has_only_order_zero() {
    let y = scatter(&[0.7; 16 * 16], [1, 16, 16], 2, 8);
    let dc = (2.0 * PI / (2.0 * KYMATIO_PI)) as f32;
    let s = y.data();
    for &v in &s[..16] {
        assert!((v - 0.7 * dc).abs() < 1e-5, "{v}");
    }
    assert!(s[16..].iter().all(|v| v.abs() < 1e-5));
}

/// A naive inverse DFT (O(n²) per value): the spatial filter of a Fourier filter.
fn spatial(f: &[f32], m: usize, n: usize) -> Vec<Complex<f64>> {
    let mut out = vec![Complex::new(0.0, 0.0); m * n];
    for (p, o) in out.iter_mut().enumerate() {
        let (a, b) = ((p / n) as f64, (p % n) as f64);
        for (q, &v) in f.iter().enumerate() {
            let (k, l) = ((q / n) as f64, (q % n) as f64);
            let phase = 2.0 * PI * (a * k / m as f64 + b * l / n as f64);
            *o += Complex::from_polar(f64::from(v), phase);
        }
        *o /= (m * n) as f64;
    }
    out
}

/// Brute-force circular convolution on an m×n grid, then keeping every k-th sample.
fn conv_sub(
    x: &[Complex<f64>],
    h: &[Complex<f64>],
    m: usize,
    n: usize,
    k: usize,
) -> Vec<Complex<f64>> {
    let mut out = Vec::new();
    for a in (0..m).step_by(k) {
        for b in (0..n).step_by(k) {
            let mut acc = Complex::new(0.0, 0.0);
            for i in 0..m {
                for j in 0..n {
                    acc += x[i * n + j] * h[((a + m - i) % m) * n + (b + n - j) % n];
                }
            }
            out.push(acc);
        }
    }
    out
}

/// The transform recomputed in the spatial domain, without any FFT: reflect padding written
/// out by hand, brute-force circular convolutions with the filters' spatial kernels, modulus,
/// subsampling by keeping every k-th sample, and the one-sample border removed. Compared with
/// the FFT implementation on a random 8×8 image (J = 2, L = 4: 1 + 8 + 16 = 25 channels).
#[test]
fn matches_a_brute_force_spatial_reference() {
    let (h, w, jj, l) = (8usize, 8usize, 2usize, 4usize);
    let mut rng = DpRng::seeded(7);
    let img: Vec<f32> = (0..h * w).map(|_| rng.uniform_f64() as f32).collect();
    let got = scatter(&img, [1, h, w], jj, l);
    let bank = FilterBank::new(h, w, jj, l).unwrap();
    let (m, n) = (bank.mp, bank.np);
    assert_eq!((m, n), (16, 16));
    // numpy 'reflect' padding by 4: padded index p maps to |p − 4| mirrored at the far edge.
    let mirror = |p: usize, len: usize| {
        let i = (p as i64 - 4).abs();
        (if i >= len as i64 {
            2 * (len as i64 - 1) - i
        } else {
            i
        }) as usize
    };
    let x: Vec<Complex<f64>> = (0..m * n)
        .map(|p| Complex::new(f64::from(img[mirror(p / n, h) * w + mirror(p % n, w)]), 0.0))
        .collect();
    let phi: Vec<_> = (0..jj)
        .map(|r| spatial(&bank.phi[r], m >> r, n >> r))
        .collect();
    let modulus = |v: Vec<Complex<f64>>| -> Vec<Complex<f64>> {
        v.into_iter().map(|c| Complex::new(c.norm(), 0.0)).collect()
    };
    let mut want: Vec<Vec<Complex<f64>>> = vec![conv_sub(&x, &phi[0], m, n, 4)];
    let mut order2 = Vec::new();
    for p1 in &bank.psi {
        let j1 = p1.j;
        let u1 = modulus(conv_sub(&x, &spatial(&p1.levels[0], m, n), m, n, 1 << j1));
        let (m1, n1) = (m >> j1, n >> j1);
        want.push(conv_sub(&u1, &phi[j1], m1, n1, 1 << (jj - j1)));
        for p2 in bank.psi.iter().filter(|p| p.j > j1) {
            let psi2 = spatial(&p2.levels[j1], m1, n1);
            let u2 = modulus(conv_sub(&u1, &psi2, m1, n1, 1 << (p2.j - j1)));
            let (m2, n2) = (m >> p2.j, n >> p2.j);
            order2.push(conv_sub(&u2, &phi[p2.j], m2, n2, 1 << (jj - p2.j)));
        }
    }
    want.extend(order2);
    assert_eq!(want.len(), 25);
    let (oh, ow) = (h >> jj, w >> jj);
    let side = m >> jj;
    let mut max_err = 0.0f64;
    for (ch, full) in want.iter().enumerate() {
        for r in 0..oh {
            for c in 0..ow {
                let v = full[(r + 1) * side + c + 1];
                // The spatial result of real filters' real Fourier parts is real.
                assert!(v.im.abs() < 1e-9, "channel {ch}: imaginary part {}", v.im);
                let g = f64::from(got.data()[ch * oh * ow + r * ow + c]);
                max_err = max_err.max((g - v.re).abs());
            }
        }
    }
    // f32 FFTs of values O(1) on 16×16 grids: errors of a few 1e-7 per operation, a few
    // dozen operations deep.
    assert!(max_err < 1e-4, "max error {max_err}");
}

/// Scattering coefficients are stable to small translations (Mallat 2012): shifting the
/// image by one pixel (much less than 2^J = 4) changes them far less than it changes the
/// pixels. Also S(a·x) = a·S(x) for a > 0 (every stage is positively homogeneous).
#[test]
fn stable_to_small_shifts_and_homogeneous() {
    let (a, b) = (blob(28, 28, 13.0, 13.0), blob(28, 28, 13.0, 14.0));
    let (sa, sb) = (
        scatter(&a, [1, 28, 28], 2, 8),
        scatter(&b, [1, 28, 28], 2, 8),
    );
    let pixels = rel_diff(&a, &b);
    let coeffs = rel_diff(sa.data(), sb.data());
    assert!(pixels > 0.4, "test image too smooth: {pixels}");
    assert!(
        coeffs < 0.5 * pixels,
        "coefficients {coeffs} vs pixels {pixels}"
    );
    let scaled: Vec<f32> = a.iter().map(|v| 2.5 * v).collect();
    let ss = scatter(&scaled, [1, 28, 28], 2, 8);
    for (x, y) in ss.data().iter().zip(sa.data()) {
        assert!(
            (x - 2.5 * y).abs() < 1e-4 * (1.0 + y.abs()),
            "{x} vs {}",
            2.5 * y
        );
    }
}

/// Each input channel is transformed independently, channel-major; batches are independent.
#[test]
fn channels_and_records_are_independent() {
    let (a, b) = (blob(12, 12, 5.0, 6.0), blob(12, 12, 7.0, 4.0));
    let mut layer = Scattering2d::new([2, 12, 12], 1, 4).unwrap();
    let mut both = a.clone();
    both.extend(&b);
    both.extend(&b);
    both.extend(&a);
    let x = Tensor::from_vec(&[2, 2, 12, 12], both).unwrap();
    let mut y = Tensor::default();
    layer.forward(&x, &mut y);
    assert_eq!(y.shape(), &[2, 10, 6, 6]);
    let (sa, sb) = (
        scatter(&a, [1, 12, 12], 1, 4),
        scatter(&b, [1, 12, 12], 1, 4),
    );
    let k = 5 * 36;
    assert_eq!(&y.data()[..k], sa.data());
    assert_eq!(&y.data()[k..2 * k], sb.data());
    assert_eq!(&y.data()[2 * k..3 * k], sb.data());
    assert_eq!(&y.data()[3 * k..], sa.data());
}

fn tiny_scatter_model() -> ModelSpec {
    ModelSpec {
        name: "tiny-scatter".into(),
        input_shape: vec![1, 8, 8],
        layers: vec![
            LayerSpec::Scattering2d { j: 1, l: 4 },
            LayerSpec::Flatten,
            LayerSpec::Linear {
                in_features: 5 * 16,
                out_features: 3,
            },
        ],
    }
}

#[test]
fn only_allowed_as_the_first_layer() {
    let mut spec = tiny_scatter_model();
    spec.layers.insert(0, LayerSpec::Relu);
    let msg = Sequential::new(spec, &mut DpRng::seeded(0))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("first layer") && msg.contains("position 1"),
        "{msg}"
    );
}

/// Mapping a batch through the fixed prefix once and running the rest gives the same outputs
/// and gradients as the whole model.
#[test]
fn fixed_prefix_split_matches_the_whole_model() {
    use crate::{BackwardMode, ClipConfig, cross_entropy};
    let mut m = Sequential::new(tiny_scatter_model(), &mut DpRng::seeded(3)).unwrap();
    assert_eq!(m.fixed_prefix_len(), 2);
    assert_eq!(m.shape_before(2).unwrap(), &[80]);
    let mut rng = DpRng::seeded(4);
    let x = Tensor::from_vec(
        &[3, 1, 8, 8],
        (0..192).map(|_| rng.uniform_f64() as f32).collect(),
    )
    .unwrap();
    let labels = [0, 2, 1];
    let run = |m: &mut Sequential, logits: Tensor| {
        let (mut g, mut losses) = (Tensor::default(), Vec::new());
        cross_entropy(&logits, &labels, Some(&mut g), &mut losses).unwrap();
        m.zero_grad();
        let mode = BackwardMode::Private(ClipConfig::flat(0.1).unwrap());
        let norms = m.backward(&g, mode).unwrap().to_vec();
        let grads: Vec<f32> = m.params().iter().flat_map(|p| p.grad.clone()).collect();
        (logits, norms, grads)
    };
    let whole = m.forward(&x).unwrap().clone();
    let whole = run(&mut m, whole);
    let feats = m.forward_prefix(&x, 2).unwrap().clone();
    assert_eq!(feats.shape(), &[3, 80]);
    let split = m.forward_from(2, &feats).unwrap().clone();
    let split = run(&mut m, split);
    assert_eq!(whole, split);
    assert!(m.forward_prefix(&x, 3).is_err());
    let msg = m.forward_from(1, &feats).unwrap_err().to_string();
    assert!(msg.contains("layer 1") && msg.contains("[3, 80]"), "{msg}");
}

#[test]
fn models_with_scattering_save_and_load() {
    let mut m = Sequential::new(tiny_scatter_model(), &mut DpRng::seeded(5)).unwrap();
    let bytes = io::to_bytes(&m).unwrap();
    let mut back = io::from_bytes(&bytes).unwrap();
    assert_eq!(back.spec(), m.spec());
    let x = Tensor::from_vec(&[1, 1, 8, 8], blob(8, 8, 3.0, 4.0)).unwrap();
    let want = m.forward(&x).unwrap().clone();
    assert_eq!(back.forward(&x).unwrap(), &want);
    let json = serde_json::to_string(&LayerSpec::Scattering2d { j: 2, l: 8 }).unwrap();
    assert_eq!(json, r#"{"type":"scattering2d","j":2,"l":8}"#);
}
