//! The DP-SGD step as a mechanism, through the real [`Stepper`]: one unsampled step (q = 1) is
//! the Gaussian mechanism on the clipped sum, so adding a canary record whose clipped gradient
//! is C·u shifts the release projected on u by C against noise of sd σC: a Gaussian shift of
//! μ = 1/σ. And poisoned records (huge or non-finite gradients) change nothing.

use dpml_data::Dataset;
use dpml_mechanisms::DpRng;
use dpml_nn::{ClipConfig, ModelSpec, Sequential, Sgd};

use super::Stepper;
use super::tests::values;
use crate::dpsgd::noise::Noise;
use crate::dpsgd::normalize::InputTransform;
use crate::dpsgd::sampler::{PoissonSampler, SamplingKey};

/// A 4-feature, 2-class data set of the given records and labels.
fn data(records: &[([f32; 4], u32)]) -> Dataset {
    Dataset {
        name: "canary".into(),
        x: records.iter().flat_map(|(x, _)| *x).collect(),
        n: records.len(),
        record_shape: vec![4],
        y: records.iter().map(|&(_, y)| y).collect(),
        n_classes: 2,
        feature_names: (0..4).map(|i| format!("f{i}")).collect(),
        class_names: vec!["a".into(), "b".into()],
        feature_range: None,
    }
}

/// A stepper for `spec` on `n` records with Gaussian noise σC, flat clipping at C, plain SGD
/// (no momentum, no weight decay: the update is exactly −lr·(S + Z)/(qN)).
fn stepper(spec: ModelSpec, n: usize, q: f64, sigma: f64, c: f32) -> Stepper {
    let model = Sequential::new(spec, &mut DpRng::seeded(0)).unwrap();
    Stepper::new(
        model,
        Box::new(Sgd::new(0.0, false, 0.0).unwrap()),
        PoissonSampler::new(n, q, SamplingKey::from_rng(&mut DpRng::seeded(1))).unwrap(),
        Noise::Gaussian {
            std: sigma * f64::from(c),
        },
        Some(ClipConfig::flat(c).unwrap()),
        8,
        InputTransform::IDENTITY,
    )
}

/// Upper 10⁻⁶ quantile of the standard normal (one-sided false-alarm rate 10⁻⁶).
const Z_ONE_SIDED: f64 = 4.753;
/// Two-sided 10⁻⁶ quantile.
const Z_TWO_SIDED: f64 = 4.892;

/// Logistic regression (one Linear 4 → 2) started at zero parameters, so the logits are 0 and
/// p = (½, ½). The canary x = (100, 0, 0, 0) with label 0 has gradient (p − e₀) ⊗ (x, 1):
/// weight rows −½x and +½x, bias (−½, ½), norm √5000.5 ≈ 70.7 ≫ C = 1, so clipping makes it
/// C·u with u that gradient's direction (up to the 10⁻⁶ in the clip factor's denominator:
/// a shift of C·(1 − 1.4·10⁻⁸)). A filler record (0, 1, 0, 0) with label 1 is in both data
/// sets, so they are neighbours (add/remove the canary) and its clipped gradient is the same
/// fixed offset in both.
///
/// Each repetition resets the parameters to 0 and takes one real step with q = 1 (the whole
/// data set, divisor q·N = N). With plain SGD the released sum is R = S + Z = −N·Δθ/lr.
/// Projected on u: R·u ~ N(a + C·[canary], σ²C²), so with n repetitions per side
/// μ̂ = (mean_with − mean_without)/s (s the pooled sample sd) estimates μ = 1/σ with
/// standard error se = √(2/n + μ²/(4n)) (delta method: 2/n from the two means, μ²/(4n) from
/// s over 2n draws). The test asserts (μ̂ − μ)/se < 4.753 (one-sided, false alarm 10⁻⁶: the
/// mechanism must not leak more than the accountant assumes) and |μ̂/μ − 1| < 10%, which n
/// makes a > 5·se test. Each side's sd of the update along u must be lr·σC/(qN) within
/// 4.892/√(2(n−1)) relative (the sd's relative standard error, two-sided 10⁻⁶).
#[test]
fn one_unsampled_step_is_the_gaussian_mechanism_with_mu_one_over_sigma() {
    let (sigma, c, lr, reps) = (1.0f64, 1.0f32, 0.5f32, 100_000usize);
    let mu = 1.0 / sigma;
    let se = ((2.0 + mu * mu / 4.0) / reps as f64).sqrt();
    assert!(0.1 * mu > 5.0 * se, "too few repetitions: se {se}");
    let canary = ([100.0, 0.0, 0.0, 0.0], 0);
    let filler = ([0.0, 1.0, 0.0, 0.0], 1);
    // u: weight [2, 4] row-major, then bias [2].
    let mut u = vec![0f64; 10];
    (u[0], u[4], u[8], u[9]) = (-50.0, 50.0, -0.5, 0.5);
    let unorm = u.iter().map(|v| v * v).sum::<f64>().sqrt();
    u.iter_mut().for_each(|v| *v /= unorm);
    let spec = ModelSpec::named("logreg", &[4], 2, &[]).unwrap();
    let mut rng = DpRng::seeded(2024);
    let mut run = |d: &Dataset| {
        let mut s = stepper(spec.clone(), d.n, 1.0, sigma, c);
        let qn = s.sampler.expected_batch();
        let (mut sum, mut sum_sq) = (0.0, 0.0);
        for t in 0..reps as u64 {
            s.model.for_each_param_mut(|_, p| p.value.fill(0.0));
            let stats = s
                .step(d, lr, &mut rng, t, &crate::dpsgd::collective::Solo)
                .unwrap();
            assert_eq!(stats.batch, d.n);
            // Δθ = −lr·R/(qN), θ started at 0: the update projected on u, in update units.
            let dp: f64 = values(&s.model)
                .iter()
                .zip(&u)
                .map(|(&v, &w)| f64::from(v) * w)
                .sum();
            sum += dp;
            sum_sq += dp * dp;
        }
        let mean = sum / reps as f64;
        let sd = ((sum_sq - reps as f64 * mean * mean) / (reps - 1) as f64).sqrt();
        // Back to the released sum: R·u = −qN·(Δθ·u)/lr.
        let scale = qn / f64::from(lr);
        (-mean * scale, sd * scale, sd, qn)
    };
    let (mean1, sd1, upd_sd1, qn1) = run(&data(&[filler, canary]));
    let (mean0, sd0, upd_sd0, qn0) = run(&data(&[filler]));
    let pooled = ((sd1 * sd1 + sd0 * sd0) / 2.0).sqrt();
    let mu_hat = (mean1 - mean0) / pooled;
    eprintln!(
        "mu_hat {mu_hat:.4} (mu {mu}, se {se:.4}, z {:.2}); released-sum sd {sd1:.4} / {sd0:.4} \
         (sigma*C {}); update sd {upd_sd1:.5} / {upd_sd0:.5}",
        (mu_hat - mu) / se,
        sigma * f64::from(c)
    );
    assert!(
        (mu_hat - mu) / se < Z_ONE_SIDED,
        "mu_hat {mu_hat} is significantly above 1/sigma = {mu} (se {se})"
    );
    assert!(
        (mu_hat / mu - 1.0).abs() < 0.1,
        "mu_hat {mu_hat} not within 10% of {mu}"
    );
    let sd_tol = Z_TWO_SIDED / (2.0 * (reps - 1) as f64).sqrt();
    for (sd, qn) in [(upd_sd1, qn1), (upd_sd0, qn0)] {
        let want = f64::from(lr) * sigma * f64::from(c) / qn;
        assert!(
            (sd / want - 1.0).abs() < sd_tol,
            "update sd {sd} vs lr*sigma*C/(qN) = {want} (tolerance {sd_tol})"
        );
    }
}

/// The review's case end to end: the record (3e38, 3e38) in an mlp makes a hidden activation
/// infinite. In the batch it must change nothing: with the same noise draws (same seed, batch
/// given explicitly so the sampler draws nothing) the step with it equals the step without
/// it, and every parameter stays finite. A batch of only poisoned records gives the pure-noise
/// update of an empty batch.
#[test]
fn a_poisoned_record_changes_nothing_in_a_private_step() {
    let records = [
        ([0.1, -0.2, 0.3, 0.5], 0),
        ([3e38, 3e38, 3e38, 3e38], 1),
        ([-0.4, 0.2, 0.9, -0.1], 1),
        ([0.7, 0.1, -0.3, 0.2], 0),
        ([-3e38, 3e38, 1.0, -1e38], 0),
    ];
    let d = data(&records);
    let spec = ModelSpec::named("mlp", &[4], 2, &[8]).unwrap();
    let step = |batch: &[usize]| {
        let mut s = stepper(spec.clone(), d.n, 0.5, 1.0, 0.5);
        s.step_on(&d, batch, 0.1, &mut DpRng::seeded(5)).unwrap();
        values(&s.model)
    };
    for (with, without) in [(&[0, 1, 2, 3, 4][..], &[0, 2, 3][..]), (&[1, 4], &[])] {
        let (a, b) = (step(with), step(without));
        for (x, y) in a.iter().zip(&b) {
            assert!(x.is_finite(), "batch {with:?}: a parameter is {x}");
            assert!(
                (x - y).abs() <= 1e-6 * (1.0 + y.abs()),
                "batch {with:?}: {x} vs {y}"
            );
        }
    }
}
